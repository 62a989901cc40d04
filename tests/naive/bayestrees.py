"""Oracles of Bayesian trees and BART (``ebf.bayestrees``): the prior, leaf marginals,
1-D enumeration of every tree, resampling, proposals, conditional SMC, MH ratios, ESS."""

from __future__ import annotations

import numpy as np
from scipy import stats

# ---------------------------------------------------------------- Bayesian trees (ebf.bayestrees)


def naive_bayestree_rows(arrays, X) -> list[np.ndarray]:
    """Rows of every node of a flat Bayesian tree, following the child links from the root."""
    rows = [np.empty(0, np.int64)] * len(arrays["feature"])
    rows[0] = np.arange(X.shape[0])
    stack = [0]
    while stack:
        j = stack.pop()
        f = arrays["feature"][j]
        if f < 0:
            continue
        go_left = X[rows[j], f] <= arrays["threshold"][j]
        rows[arrays["left"][j]] = rows[j][go_left]
        rows[arrays["right"][j]] = rows[j][~go_left]
        stack += [arrays["left"][j], arrays["right"][j]]
    return rows


def _naive_split_prob(depth, alpha_s, beta_s):
    return alpha_s / (1.0 + depth) ** beta_s


def naive_bayestree_log_prior(arrays, X, alpha_s, beta_s) -> float:
    """Thesis eq. (3.4), node by node, from the rows of every node."""
    total = 0.0
    for j, rows in enumerate(naive_bayestree_rows(arrays, X)):
        lo, hi = X[rows].min(axis=0), X[rows].max(axis=0)
        varies = np.flatnonzero(hi > lo)
        p = _naive_split_prob(arrays["depth"][j], alpha_s, beta_s)
        f = arrays["feature"][j]
        if f < 0:
            total += np.log(1 - p) if varies.size else 0.0
        elif f in varies and lo[f] <= arrays["threshold"][j] < hi[f]:
            total += np.log(p) - np.log(varies.size) - np.log(hi[f] - lo[f])
        else:
            return -np.inf
    return total


_NODE_ARRAYS = ("feature", "threshold", "left", "right", "parent", "depth")


def _naive_root(n_rows):
    return dict(feature=-1, threshold=np.nan, left=-1, right=-1, parent=-1, depth=0,
                rows=np.arange(n_rows))


def _naive_prior_cut(X, node, alpha_s, beta_s, u):
    """``(f, t)`` the prior gives ``node`` with uniforms ``u`` (Sec. 3.2.3), None to stop."""
    rows, (u0, u1, u2) = node["rows"], u
    lo, hi = X[rows].min(axis=0), X[rows].max(axis=0)
    varies = np.flatnonzero(hi > lo)
    if not varies.size or u0 >= _naive_split_prob(node["depth"], alpha_s, beta_s):
        return None
    f = varies[min(int(u1 * varies.size), varies.size - 1)]
    t = lo[f] + u2 * (hi[f] - lo[f])
    return f, (lo[f] if t >= hi[f] else t)


def naive_prior_cut(X, rows, u1, u2):
    """The prior's cut ``(f, t)`` of a node holding ``rows`` that splits, from the uniforms
    of its dimension and location (Sec. 3.2.3); None if its rows do not vary."""
    return _naive_prior_cut(X, dict(rows=rows, depth=0), 0.5, 0.0, (0.0, u1, u2))


def naive_split_sums(X, S, rows, f, t):
    """``(left rows, right rows, left sums, right sums)`` of the rows ``rows`` split at
    ``x[f] <= t``: each side in the order of ``rows``, its per-row statistics ``S`` summed
    one row after another in that order (a Python loop, not NumPy's pairwise sum)."""
    go_left = X[rows, f] <= t
    sides = rows[go_left], rows[~go_left]
    sums = []
    for side in sides:
        acc = [0.0] * S.shape[1]
        for row in side:
            for k in range(S.shape[1]):
                acc[k] += S[row, k]
        sums.append(np.array(acc))
    return (*sides, *sums)


def _naive_split(nodes, j, X, f, t):
    """Split ``nodes[j]`` at ``x[f] <= t``, appending its children (left first)."""
    node, rows = nodes[j], nodes[j]["rows"]
    node.update(feature=f, threshold=t, left=len(nodes), right=len(nodes) + 1)
    for side in (X[rows, f] <= t, X[rows, f] > t):
        nodes.append(dict(feature=-1, threshold=np.nan, left=-1, right=-1, parent=j,
                          depth=node["depth"] + 1, rows=rows[side]))


def _naive_arrays(nodes):
    return {k: np.array([n[k] for n in nodes]) for k in _NODE_ARRAYS}


def naive_sample_prior(X, alpha_s, beta_s, u) -> dict[str, np.ndarray]:
    """The generative process of Sec. 3.2.3, breadth first, node slot j using uniforms u[j]."""
    nodes = [_naive_root(X.shape[0])]
    head = 0
    while head < len(nodes):
        cut = _naive_prior_cut(X, nodes[head], alpha_s, beta_s, u[head])
        if cut is not None:
            _naive_split(nodes, head, X, *cut)
        head += 1
    return _naive_arrays(nodes)


def naive_dirichlet_multinomial_polya(labels, alpha, n_classes) -> float:
    """eq. (3.2) as the product of Polya-urn predictives p(y_i | y_<i), one label at a time."""
    counts = np.zeros(n_classes)
    out = 0.0
    for i, k in enumerate(labels):
        out += np.log((counts[k] + alpha / n_classes) / (i + alpha))
        counts[k] += 1
    return out


def naive_normal_marginal_quad(y, sigma2, mu0, sigma_mu2) -> float:
    """eq. (4.9) by numerical integration over the leaf mean (scipy.integrate.quad).

    The integrand is scaled by its value at the posterior mode so quad sees numbers near 1.
    """
    from scipy import integrate

    y = np.asarray(y, float)

    def log_joint(mu):
        return (stats.norm.logpdf(y, mu, np.sqrt(sigma2)).sum()
                + stats.norm.logpdf(mu, mu0, np.sqrt(sigma_mu2)))

    prec = y.size / sigma2 + 1 / sigma_mu2
    mode = (y.sum() / sigma2 + mu0 / sigma_mu2) / prec
    sd = 1 / np.sqrt(prec)
    peak = log_joint(mode)
    val, _ = integrate.quad(lambda mu: np.exp(log_joint(mu) - peak), mode - 40 * sd,
                            mode + 40 * sd, points=[mode], epsabs=0, epsrel=1e-12, limit=200)
    return peak + np.log(val)


def naive_nig_marginal_sequential(y, nu, lam, mu0, kappa) -> tuple[float, float, float]:
    """The normal-inverse-gamma leaf (sigma^2 ~ IG(nu/2, nu lam/2), mu | sigma^2 ~
    N(mu0, sigma^2 / kappa)) one label at a time: log p(y) as the sum of the Student-t
    predictives p(y_i | y_<i) (scipy.stats.t), each followed by the one-row conjugate update.

    Returns ``(log p(y), predictive mean, predictive variance)`` of the next label.
    """
    m, k, a, b = float(mu0), float(kappa), nu / 2, nu * lam / 2
    out = 0.0
    for v in np.asarray(y, float):
        out += stats.t.logpdf(v, 2 * a, m, np.sqrt(b * (k + 1) / (a * k)))
        b += k * (v - m) ** 2 / (2 * (k + 1))
        m = (k * m + v) / (k + 1)
        k += 1
        a += 0.5
    return out, m, stats.t.var(2 * a, m, np.sqrt(b * (k + 1) / (a * k)))


def naive_enumerate_trees_1d(x, alpha_s, beta_s, leaf_loglik):
    """Every tree of the prior on distinct 1-D inputs, with its exact prior mass.

    In 1-D a node holds a run ``a..b`` of the sorted points and the likelihood only depends
    on which run goes left, so the uniform split location is integrated exactly over each gap
    ``(x_i, x_{i+1}]``: the cut after point ``i`` has mass ``(x_{i+1} - x_i) / (x_b - x_a)``.
    A single point cannot split, so the enumeration is complete (no depth cap) and the masses
    sum to one.

    Parameters
    ----------
    x : 1-D array of distinct values (any order)
    leaf_loglik : callable(sorted positions of a leaf's points) -> float

    Returns
    -------
    log_evidence : float
        log p(Y | X) = log sum_T p(T | X) p(Y | T, X).
    trees : list of dict
        ``structure`` (a leaf is ``(a, b)``, an internal node ``(i, left, right)`` cutting
        after sorted position ``i``), ``log_prior`` (the partition's mass), ``log_lik``,
        ``log_post``, ``depth`` (max leaf depth), ``n_leaves``.
    """
    xs = np.sort(np.asarray(x, float))
    if np.unique(xs).size != xs.size:
        raise ValueError("naive_enumerate_trees_1d needs distinct x values")

    def subtrees(a, b, depth):
        """(structure, log mass, log lik, max depth, leaves) of every subtree of a..b."""
        leaf_ll = leaf_loglik(np.arange(a, b + 1))
        if a == b:
            return [((a, b), 0.0, leaf_ll, depth, 1)]
        p = _naive_split_prob(depth, alpha_s, beta_s)
        out = [((a, b), np.log(1 - p), leaf_ll, depth, 1)]
        for i in range(a, b):
            log_cut = np.log(p) + np.log((xs[i + 1] - xs[i]) / (xs[b] - xs[a]))
            for sl, ml, ll, dl, nl in subtrees(a, i, depth + 1):
                for sr, mr, lr, dr, nr in subtrees(i + 1, b, depth + 1):
                    out.append(((i, sl, sr), log_cut + ml + mr, ll + lr, max(dl, dr), nl + nr))
        return out

    from scipy.special import logsumexp

    found = subtrees(0, xs.size - 1, 0)
    log_joint = np.array([m + ll for _, m, ll, _, _ in found])
    log_evidence = float(logsumexp(log_joint))
    trees = [dict(structure=s, log_prior=m, log_lik=ll, log_post=m + ll - log_evidence,
                  depth=d, n_leaves=n) for s, m, ll, d, n in found]
    return log_evidence, trees


def naive_structure_1d(arrays, x):
    """The enumeration structure (``naive_enumerate_trees_1d``) of a flat tree on 1-D ``x``."""
    rank = np.argsort(np.argsort(np.asarray(x, float)))
    rows = naive_bayestree_rows(arrays, np.asarray(x, float).reshape(-1, 1))

    def structure(j):
        if arrays["feature"][j] < 0:
            return (int(rank[rows[j]].min()), int(rank[rows[j]].max()))
        left, right = arrays["left"][j], arrays["right"][j]
        return (int(rank[rows[left]].max()), structure(left), structure(right))

    return structure(0)


def naive_resample(w, u, scheme) -> np.ndarray:
    """Ancestors by inverting the cumulative weights at sorted points (multinomial: the
    sorted uniforms; systematic: ``(u[0] + i) / n``), never a zero-weight particle."""
    w = np.asarray(w, float)
    n = len(u) if scheme == "multinomial" else int(u[1])
    points = np.sort(u) if scheme == "multinomial" else (u[0] + np.arange(n)) / n
    idx = np.searchsorted(np.cumsum(w), points, side="right")
    last = np.flatnonzero(w > 0)[-1]
    return np.minimum(idx, last)


def _naive_gaps(values):
    """Distinct sorted values of a node along a dimension, and the gaps between neighbours."""
    v = np.unique(values)
    return v[:-1], v[1:]


def naive_expand_empirical(X, rows, depth, alpha_s, beta_s, u):
    """The empirical proposal of thesis Sec. 3.3 at a node owning ``rows``, from the four
    uniforms ``u``: ``None`` (stop) or ``(f, t, log P/Q)``, P/Q = (U - 1) |gap| / |extent|."""
    lo, hi = X[rows].min(axis=0), X[rows].max(axis=0)
    varies = np.flatnonzero(hi > lo)
    if not varies.size or u[0] >= _naive_split_prob(depth, alpha_s, beta_s):
        return None
    f = varies[min(int(u[1] * varies.size), varies.size - 1)]
    a, b = _naive_gaps(X[rows, f])
    g = min(int(u[2] * a.size), a.size - 1)
    t = a[g] + u[3] * (b[g] - a[g])
    t = a[g] if t >= b[g] else t
    return f, t, np.log(a.size) + np.log(b[g] - a[g]) - np.log(hi[f] - lo[f])


def naive_optimal_proposal(X, rows, depth, alpha_s, beta_s, leaf_loglik):
    """Every choice of the one-step optimal proposal (thesis eq. 3.5, Sec. 3.3.1) at a node.

    Returns ``log Z_j`` and the list of ``(f, lo, hi, log mass)``: ``f = -1`` for the stop
    (mass ``(1 - p) l(j)``), else a cut along ``f`` anywhere in the gap ``[lo, hi)`` between
    neighbouring distinct values, of mass ``p / |V| * (hi - lo) / |extent| * l(left)
    l(right)``, in the order stop, then dimensions, then gaps ascending. ``leaf_loglik``
    maps an array of rows to log l.
    """
    from scipy.special import logsumexp

    ll = leaf_loglik(rows)
    xlo, xhi = X[rows].min(axis=0), X[rows].max(axis=0)
    varies = np.flatnonzero(xhi > xlo)
    if not varies.size:
        return ll, [(-1, np.nan, np.nan, ll)]
    p = _naive_split_prob(depth, alpha_s, beta_s)
    out = [(-1, np.nan, np.nan, np.log1p(-p) + ll)]
    for f in varies:
        for a, b in zip(*_naive_gaps(X[rows, f]), strict=True):
            go_left = X[rows, f] <= a
            mass = (np.log(p) - np.log(varies.size) + np.log(b - a) - np.log(xhi[f] - xlo[f])
                    + leaf_loglik(rows[go_left]) + leaf_loglik(rows[~go_left]))
            out.append((f, a, b, mass))
    return logsumexp([c[3] for c in out]), out


# ---------------------------------------------------------------- BART samplers (ebf.bayestrees)


def naive_relabel(arrays) -> dict[str, np.ndarray]:
    """The tree reachable from node 0 renumbered by a FIFO queue (breadth first)."""
    old = [0]
    k = 0
    while k < len(old):
        o = old[k]
        if arrays["feature"][o] >= 0:
            old += [int(arrays["left"][o]), int(arrays["right"][o])]
        k += 1
    new = {o: i for i, o in enumerate(old)}
    out = {}
    for name in _NODE_ARRAYS:
        a = np.asarray(arrays[name])[old]
        if name in ("left", "right", "parent"):
            a = np.array([new[v] if v >= 0 else -1 for v in a], dtype=np.int64)
        out[name] = a
    return out


def naive_conditional_smc(old, X, leaf_ll, n_particles, alpha_s, beta_s, seed,
                          ess_threshold=1.0):
    """Algorithm 4.2 with Python node lists, consuming ``RandomState(seed)`` uniforms in the
    order ``ebf.bayestrees._pgbart.csmc`` documents; returns the drawn tree's arrays. With
    ``ess_threshold < 1`` a stage resamples only when ``1 / sum(w^2) <= ess_threshold * C``.

    ``old`` holds the old tree's arrays in breadth-first slot order; ``leaf_ll(rows)`` is
    log l of a leaf holding ``rows``.
    """
    import copy

    rs = np.random.RandomState(seed)
    particles = [dict(nodes=[_naive_root(X.shape[0])], head=0) for _ in range(n_particles)]
    log_w = np.zeros(n_particles)
    while True:
        for c, part in enumerate(particles):
            nodes, j = part["nodes"], part["head"]
            if j == len(nodes):
                continue
            part["head"] += 1
            if c == 0:
                cut = None if old["feature"][j] < 0 else (old["feature"][j], old["threshold"][j])
            else:
                cut = _naive_prior_cut(X, nodes[j], alpha_s, beta_s, rs.random_sample(3))
            if cut is None:
                continue
            _naive_split(nodes, j, X, *cut)
            log_w[c] += (leaf_ll(nodes[-2]["rows"]) + leaf_ll(nodes[-1]["rows"])
                         - leaf_ll(nodes[j]["rows"]))
        w = np.exp(log_w - log_w.max())
        w /= w.sum()
        if all(p["head"] == len(p["nodes"]) for p in particles):
            k = naive_resample(w, rs.random_sample(1), "multinomial")[0]
            return _naive_arrays(particles[k]["nodes"])
        if ess_threshold < 1.0 and 1.0 / np.sum(w**2) > ess_threshold * n_particles:
            continue
        anc = [0, *naive_resample(w, rs.random_sample(n_particles - 1), "multinomial")]
        particles = [copy.deepcopy(particles[a]) for a in anc]
        log_w[:] = 0.0


def _naive_node_facts(arrays, X):
    """Per node: its rows, the dimensions its rows vary in and their extent."""
    rows = naive_bayestree_rows(arrays, X)
    out = []
    for r in rows:
        lo, hi = X[r].min(axis=0), X[r].max(axis=0)
        out.append((frozenset(r.tolist()), np.flatnonzero(hi > lo), hi - lo))
    return out


def naive_mh_log_ratio(before, after, X, leaf_ll, move, move_p, alpha_s, beta_s) -> float:
    """log of the Metropolis-Hastings ratio of a CGM move ``before -> after`` from whole trees.

    pi(T) = p(T | X) (eq. 3.4, :func:`naive_bayestree_log_prior`) times the leaves'
    likelihoods; the proposal probabilities of ``ebf.bayestrees.mcmc`` (a leaf uniformly
    among the leaves for grow, a node among those with two leaf children for prune, an
    internal node for change, a rule of the prior at the chosen node) are found by comparing
    the two trees' row sets.
    """
    def log_pi(arrays):
        rows = naive_bayestree_rows(arrays, X)
        ll = sum(leaf_ll(rows[j]) for j in np.flatnonzero(arrays["feature"] < 0))
        return naive_bayestree_log_prior(arrays, X, alpha_s, beta_s) + ll

    def counts(arrays):
        f, left, right = arrays["feature"], arrays["left"], arrays["right"]
        leaves = int((f < 0).sum())
        nog = sum(1 for j in np.flatnonzero(f >= 0) if f[left[j]] < 0 and f[right[j]] < 0)
        return leaves, nog

    def log_cut(facts, j, f):
        _, varies, extent = facts[j]
        return -np.log(varies.size) - np.log(extent[f])

    fb, fa = _naive_node_facts(before, X), _naive_node_facts(after, X)
    log_q = 0.0  # log q(before | after) - log q(after | before)
    if move in ("grow", "prune"):
        small, big = (before, after) if move == "grow" else (after, before)
        fs, fbig = (fb, fa) if move == "grow" else (fa, fb)
        big_sets = {s: j for j, (s, _, _) in enumerate(fbig)}
        # the leaf of the small tree that is internal in the big one
        j_small = next(j for j in np.flatnonzero(small["feature"] < 0)
                       if big["feature"][big_sets[fs[j][0]]] >= 0)
        j_big = big_sets[fs[j_small][0]]
        log_grow = (np.log(move_p[0]) - np.log(counts(small)[0])
                    + log_cut(fbig, j_big, big["feature"][j_big]))
        log_prune = np.log(move_p[1]) - np.log(counts(big)[1])
        log_q = log_prune - log_grow if move == "grow" else log_grow - log_prune
    elif move == "change":
        j = next(j for j in range(len(fb)) if before["feature"][j] >= 0 and (
            before["feature"][j] != after["feature"][j]
            or before["threshold"][j] != after["threshold"][j]))
        log_q = log_cut(fb, j, before["feature"][j]) - log_cut(fa, j, after["feature"][j])
    return log_pi(after) - log_pi(before) + log_q


def naive_tree_from_structure_1d(structure, x, rng) -> dict[str, np.ndarray]:
    """Breadth-first arrays of an enumerated 1-D structure (``naive_enumerate_trees_1d``),
    each cut uniform in its gap: given the partition the posterior of a location is uniform
    on its gap (eq. 3.4 is flat there), so a structure drawn from the enumerated posterior
    and these locations is an exact posterior draw."""
    xs = np.sort(np.asarray(x, float))
    nodes = [dict(feature=-1, threshold=np.nan, left=-1, right=-1, parent=-1, depth=0)]
    queue = [structure]
    for j, s in enumerate(queue):
        if len(s) == 2:
            continue
        i, left, right = s
        nodes[j].update(feature=0, threshold=xs[i] + rng.random() * (xs[i + 1] - xs[i]),
                        left=len(nodes), right=len(nodes) + 1)
        for _ in range(2):
            nodes.append(dict(feature=-1, threshold=np.nan, left=-1, right=-1, parent=j,
                              depth=nodes[j]["depth"] + 1))
        queue += [left, right]
    return _naive_arrays(nodes)


def naive_chain_ess(x) -> float:
    """ESS by Geyer's initial monotone sequence with autocorrelations summed lag by lag."""
    x = np.asarray(x, float)
    n = x.size
    xc = x - x.mean()
    c0 = np.dot(xc, xc) / n
    rho = np.array([np.dot(xc[: n - t], xc[t:]) / n / c0 for t in range(2 * (n // 2))])
    pairs = rho[0::2] + rho[1::2]
    stop = np.flatnonzero(pairs <= 0)
    pairs = pairs[: stop[0] if stop.size else pairs.size]
    return n / (2 * np.minimum.accumulate(pairs).sum() - 1)


def naive_draws_predict(state, n_trees, X) -> np.ndarray:
    """Every draw's sum over its trees of the leaf value of each row, one row at a time."""
    offsets = state["offsets"]
    n_draws = (offsets.size - 1) // n_trees
    out = np.zeros((X.shape[0], n_draws))
    for i, x in enumerate(X):
        for t in range(offsets.size - 1):
            j = offsets[t]
            while state["feature"][j] >= 0:
                j = state["left"][j] if x[state["feature"][j]] <= state["threshold"][j] else (
                    state["right"][j])
            out[i, t // n_trees] += state["value"][j]
    return out
