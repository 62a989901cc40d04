"""Plain-NumPy reference implementations (oracles) that the numba kernels are tested against.

Every function here is written for clarity, not speed: loops, dense linear algebra and
enumeration. Each section belongs to one area of the package.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

# ---------------------------------------------------------------- predictive mixtures (oracles)


def naive_mixture_moments(weights, means, variances):
    """Row-by-row mean and variance of Gaussian mixtures (law of total variance)."""
    w = np.atleast_2d(np.asarray(weights, float))
    m = np.atleast_2d(np.asarray(means, float))
    v = np.atleast_2d(np.asarray(variances, float))
    mean = np.empty(w.shape[0])
    var = np.empty(w.shape[0])
    for i in range(w.shape[0]):
        total = 0.0
        ey = 0.0
        ey2 = 0.0
        for k in range(w.shape[1]):
            if w[i, k] == 0:
                continue
            total += w[i, k]
            ey += w[i, k] * m[i, k]
            ey2 += w[i, k] * (v[i, k] + m[i, k] ** 2)
        mean[i] = ey / total
        var[i] = ey2 / total - mean[i] ** 2
    return mean, var


def naive_mixture_cdf(weights, means, variances, y):
    """``sum_k w_k Phi((y - m_k) / s_k) / sum_k w_k`` for one row and a scalar y."""
    out = 0.0
    for wk, mk, vk in zip(weights, means, variances, strict=True):
        if wk > 0:
            out += wk * stats.norm.cdf(y, mk, np.sqrt(vk))
    return out / np.sum(weights)


def naive_mixture_pdf(weights, means, variances, y):
    """Explicit sum of weighted normal densities for one row and a scalar y."""
    out = 0.0
    for wk, mk, vk in zip(weights, means, variances, strict=True):
        if wk > 0:
            out += wk * stats.norm.pdf(y, mk, np.sqrt(vk))
    return out / np.sum(weights)


def naive_mixture_logpdf(weights, means, variances, y):
    """Log density for one row via scipy's logsumexp over the live components."""
    from scipy.special import logsumexp

    terms = [
        np.log(wk / np.sum(weights)) + stats.norm.logpdf(y, mk, np.sqrt(vk))
        for wk, mk, vk in zip(weights, means, variances, strict=True)
        if wk > 0
    ]
    return logsumexp(terms)


def naive_mixture_quantile(weights, means, variances, q):
    """Quantile of one row's mixture by Brent's method on a wide bracket."""
    from scipy.optimize import brentq

    live = np.asarray(weights) > 0
    m = np.asarray(means, float)[live]
    s = np.sqrt(np.asarray(variances, float)[live])
    lo = np.min(m - 40 * s)
    hi = np.max(m + 40 * s)
    return brentq(
        lambda y: naive_mixture_cdf(weights, means, variances, y) - q,
        lo,
        hi,
        xtol=1e-14,
        rtol=4 * np.finfo(float).eps,
        maxiter=500,
    )


# ---------------------------------------------------------------- Gaussian belief propagation


def _bp_sigmoid(t):
    return 1.0 / (1.0 + np.exp(-t))  # np.exp(-inf) = 0 -> sigmoid(inf) = 1


def node_noise_variance_naive(node_y, noise_var, shape):
    """Per-node noise variances (``mondrian.posterior.node_noise_variance``) from the labels.

    ``node_y[j]`` holds every label below node ``j``; the within-node sum of squares is
    taken about their mean directly (not from the sums), and the inverse-gamma posterior
    mode ``(b0 + SS / 2) / (a0 + n / 2 + 1)`` with ``a0 = shape`` and
    ``b0 = noise_var * (a0 + 1)`` (prior mode ``noise_var``) is written as it reads.
    """
    a0 = float(shape)
    b0 = noise_var * (a0 + 1.0)
    out = np.empty(len(node_y))
    for j, y in enumerate(node_y):
        y = np.asarray(y, dtype=float)
        ss = float(np.sum((y - y.mean()) ** 2)) if len(y) else 0.0
        out[j] = (b0 + ss / 2.0) / (a0 + len(y) / 2.0 + 1.0)
    return out


def gaussian_posterior_dense(left, right, parent, tau, root, n_nodes, leaf_y, mu_h, gamma1,
                             gamma2, noise_var):
    """Posterior of every node mean by dense Gaussian conditioning (oracle of BP).

    Builds the joint Gaussian of all node means ``mu`` and all individual labels ``y``
    (Lakshminarayanan, Roy & Teh (2016), Sec. 3): ``Cov(mu_i, mu_j)`` = sum of ``phi`` along
    the path from the top to the lowest common ancestor of ``i`` and ``j`` (written as
    ``A diag(phi) A^T`` with ``A[i, k] = 1`` iff ``k`` is ``i`` or an ancestor of ``i``),
    prior mean ``mu_h``; ``y_n = mu_leaf(n) + N(0, noise_var)`` (``noise_var``: a float or
    one per node, the leaf's). Conditions on ``y`` with
    ``np.linalg.solve``. ``phi_j = gamma1 sigmoid(gamma2 tau_j) - gamma1 sigmoid(gamma2
    tau_parent(j))`` (naive formula, clamped at 0), ``tau_parent(root) = 0``.

    Parameters
    ----------
    leaf_y : sequence of length ``n_nodes``
        ``leaf_y[j]`` = array of the individual labels at leaf ``j`` (ignored for internal
        nodes; may be empty).

    Returns
    -------
    mean, var : float64[n_nodes]
        Posterior mean and variance of ``mu_j`` for every slot ``j < n_nodes``.
    """
    nn = int(n_nodes)
    phi = np.zeros(nn)
    for j in range(nn):
        tp = 0.0 if j == root else tau[parent[j]]
        phi_j = gamma1 * _bp_sigmoid(gamma2 * tau[j]) - gamma1 * _bp_sigmoid(gamma2 * tp)
        phi[j] = max(phi_j, 0.0)
    anc = np.zeros((nn, nn))
    for j in range(nn):
        k = j
        while k != -1:
            anc[j, k] = 1.0
            k = -1 if k == root else parent[k]
    cov_mu = anc @ np.diag(phi) @ anc.T

    obs_node = []
    y = []
    for j in range(nn):
        if left[j] == -1 and right[j] == -1:
            for v in np.asarray(leaf_y[j], dtype=float):
                obs_node.append(j)
                y.append(v)
    if not y:
        return np.full(nn, float(mu_h)), np.diag(cov_mu).copy()
    obs_node = np.asarray(obs_node)
    y = np.asarray(y)
    cov_my = cov_mu[:, obs_node]                                   # Cov(mu, y)
    noise = np.broadcast_to(np.asarray(noise_var, dtype=float), (nn,))[obs_node]
    cov_yy = cov_mu[np.ix_(obs_node, obs_node)] + np.diag(noise)
    mean = mu_h + cov_my @ np.linalg.solve(cov_yy, y - mu_h)
    cov = cov_mu - cov_my @ np.linalg.solve(cov_yy, cov_my.T)
    return mean, np.diag(cov).copy()


# ---------------------------------------------------------------- IKN classification counts
def _ikn_tab(c):
    """IKN table count: at most one table per class (thesis Sec. 5.4)."""
    return np.minimum(c, 1.0)


def ikn_counts_naive(left, right, root, counts):
    """IKN counts of every node (thesis Alg. 5.3), recursively; returns a new array.

    Leaf rows of ``counts`` are the raw label counts; every internal row is recomputed as
    ``tab_left + tab_right``. Rows of nodes not reachable from ``root`` are copied unchanged.
    """
    out = np.array(counts, dtype=np.float64, copy=True)

    def visit(j):
        if left[j] == -1:
            return out[j]
        out[j] = _ikn_tab(visit(left[j])) + _ikn_tab(visit(right[j]))
        return out[j]

    visit(root)
    return out


def ikn_posterior_naive(left, right, tau, counts, root, gamma):
    """Posterior means G_j of eq. (5.5) (thesis Alg. 5.4), recursively, as ``{slot: G_j}``.

    ``d_j = exp(-gamma (tau_j - tau_parent(j)))``, ``tau_parent(root) = 0``, ``G_parent(root)``
    uniform; ``gamma = 0`` gives ``d_j = 1`` even when ``tau_j = inf``.
    """
    K = counts.shape[1]
    G = {}

    def visit(j, G_par, tau_par):
        delta = tau[j] - tau_par
        d = 1.0 if gamma == 0 else float(np.exp(-gamma * delta))
        c = np.asarray(counts[j], dtype=np.float64)
        if c.sum() > 0:
            tab = _ikn_tab(c)
            G[j] = (c - d * tab + d * tab.sum() * G_par) / c.sum()
        else:
            G[j] = np.array(G_par, dtype=np.float64)
        if left[j] != -1:
            visit(left[j], G[j], tau[j])
            visit(right[j], G[j], tau[j])

    visit(root, np.full(K, 1.0 / K), 0.0)
    return G


def expected_discount_quad(eta, delta, gamma):
    """E[exp(-gamma Delta)] for Delta ~ Exp(eta) truncated to [0, delta], by numerical quadrature.

    Integrates ``exp(-gamma t)`` against the truncated exponential density
    ``eta exp(-eta t) / (1 - exp(-eta delta))`` (uniform ``1 / delta`` when ``eta = 0``).
    """
    from scipy import integrate

    if delta == 0:
        return 1.0
    if eta == 0:
        Z = float(delta)

        def dens(t):
            return 1.0 / Z
    else:
        Z = 1.0 if np.isinf(delta) else -np.expm1(-eta * delta)

        def dens(t):
            return eta * np.exp(-eta * t) / Z

    def f(t):
        return np.exp(-gamma * t) * dens(t)

    if np.isinf(delta):
        val, _ = integrate.quad(f, 0.0, np.inf, epsabs=1e-14, epsrel=1e-13, limit=500)
        return val
    # split at the decay scale so quad sees the peak near 0 on long intervals
    scale = 1.0 / (eta + gamma) if eta + gamma > 0 else delta
    edges = [0.0] + [m * scale for m in (1, 5, 20, 60) if m * scale < delta] + [float(delta)]
    val = 0.0
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        v, _ = integrate.quad(f, a, b, epsabs=1e-15, epsrel=1e-13, limit=500)
        val += v
    return val


def expected_discount_mc(eta, delta, gamma, n, rng):
    """Monte-Carlo estimate of the same expectation: inverse-CDF samples of the truncated Delta."""
    u = rng.random(n)
    if eta == 0:
        t = u * delta
    else:
        mass = 1.0 if np.isinf(delta) else -np.expm1(-eta * delta)
        t = -np.log1p(-u * mass) / eta
    return float(np.mean(np.exp(-gamma * t)))


def branch_off_G_naive(G_parent, c, dbar):
    """G of the node created when a test point branches off above j (thesis Alg. 5.8 l. 10-11)."""
    tab = _ikn_tab(np.asarray(c, dtype=np.float64))
    if tab.sum() == 0:
        return np.array(G_parent, dtype=np.float64)
    return (tab - dbar * tab + dbar * tab.sum() * np.asarray(G_parent)) / tab.sum()


# ---------------------------------------------------------------- Mondrian tree sampling


def naive_sample_mondrian_block(X, rows, rng, *, tau_parent=0.0, lifetime=np.inf,
                                min_samples_split=2, labels=None):
    """SampleMondrianBlock (paper Alg. 2; thesis Alg. 5.2 / 5.9 with pausing), recursively.

    Plain NumPy reference sampler. ``rows`` index ``X``; ``rng`` is a ``np.random.Generator``.
    Regression (``labels is None``): a block with fewer than ``min_samples_split`` points is
    paused. Classification: a block is also paused when all its labels are identical.
    Returns a nested dict ``{rows, lower, upper, tau, feature, threshold, left, right}``
    (``feature = -1`` and ``left = right = None`` at a leaf, whose ``tau`` is ``lifetime``).
    """
    rows = np.asarray(rows)
    pts = X[rows]
    lower = pts.min(axis=0)
    upper = pts.max(axis=0)
    node = dict(rows=rows, lower=lower, upper=upper, tau=lifetime, feature=-1,
                threshold=np.nan, left=None, right=None)
    paused = len(rows) < min_samples_split
    if labels is not None:
        paused = paused or len(np.unique(labels[rows])) <= 1
    extent = upper - lower
    rate = extent.sum()
    if paused or rate <= 0:
        return node
    t = tau_parent + rng.exponential(1.0 / rate)
    if not t < lifetime:
        return node
    d = int(rng.choice(len(extent), p=extent / rate))
    xi = rng.uniform(lower[d], upper[d])
    go_left = pts[:, d] <= xi
    node.update(tau=t, feature=d, threshold=xi)
    kw = dict(lifetime=lifetime, min_samples_split=min_samples_split, labels=labels)
    node["left"] = naive_sample_mondrian_block(X, rows[go_left], rng, tau_parent=t, **kw)
    node["right"] = naive_sample_mondrian_block(X, rows[~go_left], rng, tau_parent=t, **kw)
    return node


def naive_tree_leaves(node):
    """Row arrays of the leaves of a nested tree from ``naive_sample_mondrian_block``."""
    if node["left"] is None:
        return [node["rows"]]
    return naive_tree_leaves(node["left"]) + naive_tree_leaves(node["right"])


def flat_tree_leaf_rows(tree, j):
    """Rows stored in the linked list of leaf slot ``j`` of a flat tree."""
    out = []
    r = tree.leaf_head[j]
    while r != -1:
        out.append(int(r))
        r = tree.pt_next[r]
        if len(out) > tree.pt_next.shape[0]:
            raise AssertionError(f"cycle in the point list of leaf {j}")
    return out


def check_tree_invariants(tree, X, y, labels, rows, task, *, lifetime=np.inf,
                          min_samples_split=2, n_classes=None):
    """Assert every structural invariant of a flat Mondrian tree (the layout in
    ``docs/families/mondrian-forests.md``).

    ``rows`` are all the rows inserted so far; ``task`` is "regression" or "classification".
    Raises ``AssertionError`` with a message on the first violation.
    """
    rows = np.sort(np.asarray(rows))
    n_nodes = int(tree.n_nodes)
    root = int(tree.root)
    assert 1 <= n_nodes <= 2 * len(rows) - 1, (n_nodes, len(rows))
    assert tree.parent[root] == -1, "root has a parent"

    # reachability and pointer consistency (nodes are never deleted: all live slots reachable)
    order = []
    stack = [root]
    seen = set()
    while stack:
        j = stack.pop()
        assert 0 <= j < n_nodes, f"slot {j} out of the live range"
        assert j not in seen, f"slot {j} reached twice"
        seen.add(j)
        order.append(j)
        lj, rj = int(tree.left[j]), int(tree.right[j])
        if lj == -1 or rj == -1:
            assert lj == rj == -1, f"node {j} has one child"
            assert tree.feature[j] == -1, f"leaf {j} has a feature"
        else:
            assert tree.parent[lj] == j and tree.parent[rj] == j, f"parent pointers of {j}"
            assert 0 <= tree.feature[j] < X.shape[1], f"bad feature at {j}"
            assert tree.leaf_head[j] == -1, f"internal node {j} stores points"
            stack += [rj, lj]
    assert seen == set(range(n_nodes)), "unreachable live slots"

    # points below every node (post-order over the reversed pre-order)
    below = {}
    for j in reversed(order):
        if tree.left[j] == -1:
            below[j] = flat_tree_leaf_rows(tree, j)
        else:
            below[j] = below[int(tree.left[j])] + below[int(tree.right[j])]
    assert sorted(below[root]) == list(rows), "leaf lists do not partition the inserted rows"

    for j in order:
        pts = X[below[j]]
        assert len(below[j]) > 0, f"empty node {j}"
        np.testing.assert_array_equal(tree.lower[j], pts.min(axis=0), err_msg=f"lower {j}")
        np.testing.assert_array_equal(tree.upper[j], pts.max(axis=0), err_msg=f"upper {j}")
        tp = 0.0 if j == root else tree.tau[tree.parent[j]]
        if task == "regression":
            n_j = len(below[j])
            yy = y[below[j]]
            np.testing.assert_allclose(tree.stats[j], [n_j, yy.sum(), (yy ** 2).sum()],
                                       rtol=1e-9, atol=1e-9, err_msg=f"regression stats {j}")
            paused = n_j < min_samples_split
        else:
            lab = labels[below[j]]
            paused = len(lab) < min_samples_split or len(np.unique(lab)) <= 1
        if tree.left[j] == -1:
            assert tree.tau[j] == lifetime, f"leaf {j} tau {tree.tau[j]} != lifetime"
            if task == "classification":
                counts = np.bincount(labels[below[j]], minlength=n_classes)
                np.testing.assert_array_equal(tree.stats[j], counts, err_msg=f"leaf counts {j}")
            if np.isinf(lifetime):
                # with an infinite lifetime a leaf is paused or holds identical points only
                assert paused or np.all(pts == pts[0]), f"leaf {j} neither paused nor constant"
        else:
            lj, rj = int(tree.left[j]), int(tree.right[j])
            f = int(tree.feature[j])
            xi = tree.threshold[j]
            assert not paused, f"internal node {j} should be paused"
            assert tp < tree.tau[j] < lifetime, f"split time of {j} not in (tau_parent, lifetime)"
            assert tree.tau[lj] > tree.tau[j] and tree.tau[rj] > tree.tau[j], f"tau order {j}"
            for c in (lj, rj):
                assert np.all(tree.lower[j] <= tree.lower[c]), f"extent {j} !>= child {c}"
                assert np.all(tree.upper[j] >= tree.upper[c]), f"extent {j} !>= child {c}"
            assert tree.lower[j, f] <= xi < tree.upper[j, f], f"threshold of {j} outside extent"
            assert tree.upper[lj, f] <= xi < tree.lower[rj, f], f"children of {j} straddle xi"
            if task == "regression":
                np.testing.assert_allclose(tree.stats[j], tree.stats[lj] + tree.stats[rj],
                                           rtol=1e-9, atol=1e-9, err_msg=f"sum stats {j}")
            else:
                ikn = np.minimum(tree.stats[lj], 1) + np.minimum(tree.stats[rj], 1)
                np.testing.assert_array_equal(tree.stats[j], ikn, err_msg=f"IKN counts {j}")

    # routing: every training point reaches the leaf whose list holds it
    leaf_of = {r: j for j in order if tree.left[j] == -1 for r in below[j]}
    for r in rows:
        j = root
        while tree.left[j] != -1:
            j = tree.left[j] if X[r, tree.feature[j]] <= tree.threshold[j] else tree.right[j]
        assert j == leaf_of[int(r)], f"row {r} routes to {j}, stored at {leaf_of[int(r)]}"


# ---------------------------------------------------------------- trunk stability (EBF Sec. 3.1)


def naive_clt_split_match(X, y, task="regression"):
    """Eq. (6)-(11) of Taddy et al. (2015) literally, for binary features (x in {0, 1}).

    Regression uses eq. (9): ``d_ji = ybar1(x_i1)^2 - ybarj(x_ij)^2 - 2 y_i (ybar1 - ybarj)``.
    Classification uses the same construction with each row's first-order Gini term
    ``1 - 2 p_side(y_i) + sum_k p_side(k)^2``. Returns ``1 - sum_j Phi(-sqrt(n) z_j)``.
    """
    X = np.asarray(X)
    y = np.asarray(y)
    n, p = X.shape

    def terms(j):
        g = np.empty(n)
        for side in (0, 1):
            rows = [i for i in range(n) if X[i, j] == side]
            if task == "regression":
                ybar = sum(y[i] for i in rows) / len(rows)
                for i in rows:
                    g[i] = ybar**2 - 2 * y[i] * ybar  # + y_i^2, which cancels in d
            else:
                labels = sorted(set(y.tolist()))
                frac = {c: sum(1 for i in rows if y[i] == c) / len(rows) for c in labels}
                sq = sum(v * v for v in frac.values())
                for i in rows:
                    g[i] = 1 - 2 * frac[y[i]] + sq
        return g

    g = [terms(j) for j in range(p)]
    best = int(np.argmin([gj.sum() for gj in g]))
    miss = 0.0
    for j in range(p):
        if j == best:
            continue
        d = g[best] - g[j]
        z = abs(d.mean()) / np.sqrt(np.dot(d, d) / n)
        miss += stats.norm.cdf(-np.sqrt(n) * z)
    return max(0.0, 1.0 - miss)


def naive_impurity_terms(y, w, left, task, n_classes):
    """Per-row impurity contributions of a split (eq. 7-8), row by row; an empty side none."""
    g = np.zeros(len(y))
    for side in (left, ~left):
        rows = np.flatnonzero(side)
        if rows.size == 0:
            continue
        W = sum(w[i] for i in rows)
        if task == "regression":
            mu = sum(w[i] * y[i] for i in rows) / W
            for i in rows:
                g[i] = w[i] * (y[i] - mu) ** 2
        else:
            p = [sum(w[i] for i in rows if y[i] == c) / W for c in range(n_classes)]
            sq = sum(v * v for v in p)
            for i in rows:
                g[i] = w[i] * (1.0 - 2.0 * p[y[i]] + sq)
    return g


def naive_stored_split_match(X, y, w, edges, task, n_classes, min_rows, chosen, blocks=None):
    """Signed eq. (11) at one node for a split fixed beforehand, ``chosen = (f, b)``
    (rows with ``x_f <= edges[f][b]`` go left), against the best split on every other feature
    (brute force over its edges, :func:`naive_best_split`, at least ``min_rows`` a side):
    ``max(0, 1 - sum_j Phi(sqrt(n) dbar_j / sd_j))`` with ``d_j = g1 - gj``. With
    ``blocks`` (block id per row) the rows of a block are summed first and the blocks play
    the rows' part (one bootstrap weight per block)."""
    f1, b1 = chosen
    g1 = naive_impurity_terms(y, w, X[:, f1] <= edges[f1][b1], task, n_classes)
    miss = 0.0
    for j in range(X.shape[1]):
        if j == f1:
            continue
        _, f, b = naive_best_split(X[:, [j]], y, w, [edges[j]], task, n_classes, min_rows)
        if f < 0:
            continue
        d = g1 - naive_impurity_terms(y, w, X[:, j] <= edges[j][b], task, n_classes)
        if blocks is not None:
            d = np.array([sum(d[i] for i in range(len(y)) if blocks[i] == k)
                          for k in range(max(blocks) + 1)])
        n = len(d)
        sd = np.sqrt(sum(v * v for v in d) / n)
        if sd == 0:
            continue
        miss += stats.norm.cdf(np.sqrt(n) * np.mean(d) / sd)
    return max(0.0, 1.0 - miss)


# ---------------------------------------------------------------- trunk (ebf.trunk and its kernels)


def naive_histogram(binned, node_of_row, slot_of_node, S, n_slots, n_bins):
    """``hist[slot, f, b] = sum of S[i]`` over rows i of the node in that slot with code b."""
    n, d = binned.shape
    hist = np.zeros((n_slots, d, n_bins, S.shape[1]))
    for i in range(n):
        s = slot_of_node[node_of_row[i]]
        if s < 0:
            continue
        for f in range(d):
            hist[s, f, binned[i, f]] += S[i]
    return hist


def naive_stats(y, w, task, n_classes):
    """Statistic totals of a set of rows: ``[n, W, WY, WY2]`` or ``[n, W_0, ..., W_C-1]``."""
    if task == "regression":
        return np.array([len(y), w.sum(), (w * y).sum(), (w * y * y).sum()])
    return np.concatenate([[len(y)], [w[y == c].sum() for c in range(n_classes)]])


def naive_impurity(y, w, task, n_classes):
    """Weighted squared error about the weighted mean (paper eq. 4) or weighted Gini."""
    W = w.sum()
    if W <= 0:
        return 0.0
    if task == "regression":
        mu = (w * y).sum() / W
        return float((w * (y - mu) ** 2).sum())
    p = np.array([w[y == c].sum() for c in range(n_classes)]) / W
    return float(W * (1.0 - (p**2).sum()))


def naive_scale(y, w, task):
    """Size of the sums that cancel in an impurity decrease (for the zero-gain rule)."""
    return float((w * y * y).sum()) if task == "regression" else float(w.sum())


def naive_best_split(X, y, w, edges, task, n_classes, min_rows=1, min_weight=0.0):
    """Brute force over every (feature f, edge b): rows with ``x <= edges[f][b]`` go left.

    Returns ``(gain, f, b)`` of the valid split with the largest impurity decrease (within
    a relative 1e-9, the lowest feature then the lowest edge), or ``(0.0, -1, -1)``.
    """
    parent = naive_impurity(y, w, task, n_classes)
    scale = naive_scale(y, w, task)
    cands = []
    for f in range(X.shape[1]):
        for b, t in enumerate(edges[f]):
            go_left = X[:, f] <= t
            nl, nr = go_left.sum(), (~go_left).sum()
            wl, wr = w[go_left].sum(), w[~go_left].sum()
            if nl < min_rows or nr < min_rows:
                continue
            if wl <= 0 or wr <= 0 or wl < min_weight or wr < min_weight:
                continue
            gain = (parent - naive_impurity(y[go_left], w[go_left], task, n_classes)
                    - naive_impurity(y[~go_left], w[~go_left], task, n_classes))
            cands.append((gain, f, b))
    if not cands:
        return 0.0, -1, -1
    best = max(g for g, _, _ in cands)
    if not best > 1e-9 * scale:
        return 0.0, -1, -1
    tied = [(f, b, g) for g, f, b in cands if g >= best - 1e-9 * abs(best)]
    f, b, g = min(tied)
    return g, f, b


def naive_grow(X, y, w, edges, task="regression", n_classes=None, max_leaves=None,
               min_rows=1, min_weight=0.0, max_depth=None):
    """Level-wise CART on raw rows with the grower's rules, as a dict of flat arrays.

    Per level: best split of every open node, applied in decreasing gain (ties by node id)
    within the leaf budget; children appended in parent-id order; leaf ids in preorder.
    """
    rows = [np.arange(len(y))]
    nodes = [dict(feature=-1, bin=-1, threshold=np.nan, left=-1, right=-1, depth=0, gain=0.0)]
    open_nodes = [0]
    n_closed = 0
    while open_nodes:
        depth = nodes[open_nodes[0]]["depth"]
        if max_depth is not None and depth >= max_depth:
            break
        if max_leaves is not None and n_closed + len(open_nodes) >= max_leaves:
            break
        found = []
        for j in open_nodes:
            r = rows[j]
            g, f, b = naive_best_split(X[r], y[r], w[r], edges, task, n_classes,
                                       min_rows, min_weight)
            if f >= 0:
                found.append((-g, j, f, b, g))
        found.sort()
        if max_leaves is not None:
            found = found[: max_leaves - n_closed - len(open_nodes)]
        found.sort(key=lambda t: t[1])
        new_open = []
        for _, j, f, b, g in found:
            r = rows[j]
            go_left = X[r, f] <= edges[f][b]
            nodes[j].update(feature=f, bin=b, threshold=edges[f][b], gain=g,
                            left=len(nodes), right=len(nodes) + 1)
            for part in (r[go_left], r[~go_left]):
                new_open.append(len(nodes))
                rows.append(part)
                nodes.append(dict(feature=-1, bin=-1, threshold=np.nan, left=-1, right=-1,
                                  depth=depth + 1, gain=0.0))
        n_closed += len(open_nodes) - len(found)
        open_nodes = new_open

    leaf_id = [-1] * len(nodes)
    counter = [0]

    def preorder(j):
        if nodes[j]["left"] < 0:
            leaf_id[j] = counter[0]
            counter[0] += 1
            return
        preorder(nodes[j]["left"])
        preorder(nodes[j]["right"])

    preorder(0)
    stats = np.array([naive_stats(y[r], w[r], task, n_classes) for r in rows])
    return dict(
        feature=np.array([n["feature"] for n in nodes]),
        threshold_bin=np.array([n["bin"] for n in nodes]),
        threshold=np.array([n["threshold"] for n in nodes], dtype=float),
        left=np.array([n["left"] for n in nodes]),
        right=np.array([n["right"] for n in nodes]),
        depth=np.array([n["depth"] for n in nodes]),
        n_rows=np.array([len(r) for r in rows]),
        weight=stats[:, 1] if task == "regression" else stats[:, 1:].sum(axis=1),
        stats=stats,
        gain=np.array([n["gain"] for n in nodes]),
        leaf_id=np.array(leaf_id),
    )


def naive_trunk_apply(X, arrays):
    """Leaf id of every raw row, one row and one node at a time."""
    out = np.empty(X.shape[0], dtype=np.int64)
    for i in range(X.shape[0]):
        j = 0
        while arrays["feature"][j] >= 0:
            f = arrays["feature"][j]
            j = arrays["left"][j] if X[i, f] <= arrays["threshold"][j] else arrays["right"][j]
        out[i] = arrays["leaf_id"][j]
    return out


# ---------------------------------------------------------------- weighted CART (ebf.cart)


def naive_path(left, right, feature, threshold, root, x) -> list[int]:
    """Nodes visited by row ``x`` from ``root`` to its leaf (scikit-learn's float32 rule)."""
    node = int(root)
    path = [node]
    while left[node] != -1:
        xv = float(np.float32(x[feature[node]]))  # scikit-learn stores X as float32
        node = int(left[node]) if xv <= threshold[node] else int(right[node])
        path.append(node)
    return path


def naive_apply(left, right, feature, threshold, root, X) -> np.ndarray:
    """Leaf of every row of ``X`` in one tree."""
    return np.array([naive_path(left, right, feature, threshold, root, x)[-1] for x in X])


def naive_node_stats(left, right, feature, threshold, root, X, y, w):
    """Weighted mean and weighted variance of the training rows that reach every node.

    Returns dicts ``node -> mean`` and ``node -> variance`` over the nodes reached by at
    least one row of positive weight; variance is ``sum w (y - mean)^2 / sum w``.
    """
    rows: dict[int, list[int]] = {}
    for i, x in enumerate(X):
        if w[i] <= 0:
            continue
        for node in naive_path(left, right, feature, threshold, root, x):
            rows.setdefault(node, []).append(i)
    mean, var = {}, {}
    for node, idx in rows.items():
        yy = np.asarray(y, float)[idx]
        ww = np.asarray(w, float)[idx]
        total = 0.0
        s = 0.0
        for yi, wi in zip(yy, ww, strict=True):
            total += wi
            s += wi * yi
        m = s / total
        ss = 0.0
        for yi, wi in zip(yy, ww, strict=True):
            ss += wi * (yi - m) ** 2
        mean[node] = m
        var[node] = ss / total
    return mean, var


def naive_class_fractions(leaves, codes, w, n_classes) -> dict[int, np.ndarray]:
    """Weighted class fractions of the rows in every leaf (global class columns)."""
    out: dict[int, np.ndarray] = {}
    for leaf in np.unique(leaves):
        frac = np.zeros(n_classes)
        for i in np.flatnonzero(leaves == leaf):
            frac[codes[i]] += w[i]
        if frac.sum() > 0:
            out[int(leaf)] = frac / frac.sum()
    return out


def naive_branch_off_moments(left, right, parent, tau, root, n_nodes, leaf_y, j, s_nodes,
                             s_weights, lifetime, mu_h, gamma1, gamma2, noise_var):
    """Predictive moments of a test point that branches off on the edge above node ``j``.

    Lakshminarayanan, Roy & Teh (2016), Sec. 3.3: the point creates a new node ``j~`` at
    time ``tau_parent(j) + s`` between ``parent(j)`` and ``j`` and a new leaf below it (time
    ``lifetime``, no data). For each split-time offset ``s`` of ``s_nodes`` the augmented
    tree is conditioned densely (:func:`gaussian_posterior_dense`); the new leaf's
    predictive is ``N(mean, var + noise_var)``, and the components are moment-matched with
    ``s_weights``. ``noise_var`` is a float or one per node; with one per node, the new node
    and the new leaf take node ``j``'s (the new node holds the same training rows as ``j``).

    Returns
    -------
    mean, var : float
    """
    nn = int(n_nodes)
    noise = np.broadcast_to(np.asarray(noise_var, dtype=float), (nn,))
    noise = np.concatenate([noise, [noise[j], noise[j]]])
    m1 = 0.0
    m2 = 0.0
    for s, w in zip(s_nodes, s_weights, strict=True):
        new, leaf = nn, nn + 1
        L = np.concatenate([np.asarray(left[:nn]), [j, -1]])
        R = np.concatenate([np.asarray(right[:nn]), [leaf, -1]])
        P = np.concatenate([np.asarray(parent[:nn]), [parent[j], new]])
        t_parent = 0.0 if j == root else tau[parent[j]]
        T = np.concatenate([np.asarray(tau[:nn], dtype=float), [t_parent + s, lifetime]])
        p = parent[j]
        new_root = root
        if j == root:
            new_root = new
            P[new] = -1
        elif L[p] == j:
            L[p] = new
        else:
            R[p] = new
        P[j] = new
        ys = list(leaf_y[:nn]) + [np.empty(0), np.empty(0)]
        mean, var = gaussian_posterior_dense(L, R, P, T, new_root, nn + 2, ys, mu_h, gamma1,
                                             gamma2, noise)
        v = var[leaf] + noise[leaf]
        m1 += w * mean[leaf]
        m2 += w * (v + mean[leaf] ** 2)
    return m1, m2 - m1 * m1


def naive_subtract_histogram(parent, child, task):
    """The other child's histogram, ``parent - child``, bin by bin: a bin left without rows
    is all zeros, and every column but ``w*y`` (regression column 2) is at least zero."""
    out = np.array(parent, dtype=float, copy=True)
    n_features, n_bins, k = out.shape
    for f in range(n_features):
        for b in range(n_bins):
            diff = parent[f, b] - child[f, b]
            if diff[0] <= 0:
                out[f, b] = 0.0
                continue
            for c in range(k):
                signed = task == "regression" and c == 2
                out[f, b, c] = diff[c] if signed else max(diff[c], 0.0)
    return out


def naive_trunk_requests(trunk, task, min_rows=1, max_leaves=None, max_depth=None,
                         max_cond=np.inf):
    """Nodes a subtracting grower asks its source for, read off the grown trunk.

    The root; then for every split whose children's level was grown (depth and leaf budget
    left) and one of whose children has the ``2 * min_rows`` rows a split needs: only the
    child with fewer rows (the left one on ties) if the other may be derived, else every
    child that needs a histogram. The other may be derived if the totals of the histograms
    it would be made of (its parent's, recursively, plus its sibling's) are at most
    ``max_cond`` times its own (weight; regression also ``W * sum w y**2``, squared bound).
    """
    stats = trunk.stats
    n = trunk.n_nodes
    weight = stats[:, 1] if task == "regression" else stats[:, 1:].sum(axis=1)

    def ok(scale, c):
        if task == "regression":
            w_c, s2_c = stats[c, 1], stats[c, 3]
            return (w_c > 0 and s2_c > 0 and scale[1] <= max_cond * w_c
                    and scale[1] * scale[3] <= max_cond**2 * w_c * s2_c)
        return weight[c] > 0 and scale[1:].sum() <= max_cond * weight[c]

    scale = {0: np.abs(stats[0])}
    asked = [0]
    splits_up_to = {}  # depth -> splits at depths <= depth
    for depth in range(int(trunk.depth.max()) + 1):
        splits_up_to[depth] = int(np.sum((trunk.feature >= 0) & (trunk.depth <= depth)))
    for p in range(n):  # nodes are numbered level by level
        if trunk.feature[p] < 0:
            continue
        level = int(trunk.depth[p]) + 1
        grown = (max_depth is None or level < max_depth) and (
            max_leaves is None or 1 + splits_up_to[level - 1] < max_leaves)
        pair = [int(trunk.left[p]), int(trunk.right[p])]
        need = [trunk.n_rows[c] >= 2 * min_rows for c in pair]
        if not grown or not any(need):
            continue
        small, large = pair if trunk.n_rows[pair[0]] <= trunk.n_rows[pair[1]] else pair[::-1]
        derived = scale.get(p) is not None and ok(scale[p] + np.abs(stats[small]), large)
        if derived:
            asked.append(small)
            scale[small] = np.abs(stats[small])
            scale[large] = scale[p] + np.abs(stats[small])
        else:
            for c, nd in zip(pair, need, strict=True):
                if nd:
                    asked.append(c)
                    scale[c] = np.abs(stats[c])
    return sorted(asked)


# ---------------------------------------------------------------- flat-tree structure checks


def naive_check_trees(left, right, feature, threshold, offsets, n_features):
    """Oracle of ``ebf.tree_validation._check_trees``: the first violation as
    ``(code, tree, node, value)``, ``(0, 0, 0, 0)`` for well-formed trees.

    Same contract, other method: the per-node checks as boolean columns (the first failing
    node, then its first failing check), parent counts by ``np.bincount``.
    """
    from ebf import tree_validation as tv

    for t in range(len(offsets) - 1):
        a, b = int(offsets[t]), int(offsets[t + 1])
        node = np.arange(a, b)
        lt, rt, ft = left[a:b], right[a:b], feature[a:b]
        leaf = (lt == -1) & (rt == -1)
        inner = ~leaf & (lt != -1) & (rt != -1)
        l_in = (lt >= a) & (lt < b)
        r_in = (rt >= a) & (rt < b)
        forward = (lt > node) & (rt > node)
        f_in = (ft >= 0) & (ft < n_features)
        columns = [
            (tv.LEAF_FEATURE, leaf & (ft != -1), ft),
            (tv.ONE_CHILD, ~leaf & (lt == -1), rt),
            (tv.ONE_CHILD, ~leaf & (lt != -1) & (rt == -1), lt),
            (tv.LEFT_OUT, inner & ~l_in, lt),
            (tv.RIGHT_OUT, inner & l_in & ~r_in, rt),
            (tv.BACKWARD, inner & l_in & r_in & (lt <= node), lt),
            (tv.BACKWARD, inner & l_in & r_in & (lt > node) & (rt <= node), rt),
            (tv.FEATURE_OUT, inner & l_in & r_in & forward & ~f_in, ft),
            (tv.THRESHOLD, inner & l_in & r_in & forward & f_in
             & ~np.isfinite(threshold[a:b]), np.zeros(b - a, np.int64)),
        ]
        fails = np.column_stack([c for _, c, _ in columns])
        if fails.any():
            i = int(np.flatnonzero(fails.any(axis=1))[0])
            k = int(np.flatnonzero(fails[i])[0])
            return columns[k][0], t, a + i, int(columns[k][2][i])
        counts = np.bincount(np.concatenate([lt[inner], rt[inner]]) - a, minlength=b - a)
        wrong = np.flatnonzero(counts[1:] != 1)
        if wrong.size:
            i = int(wrong[0]) + 1
            return tv.PARENTS, t, a + i, int(min(counts[i], 2))
    return 0, 0, 0, 0


# ---------------------------------------------------------------- compact Mondrian trees (oracles)


def naive_preorder_structure(feature, n_features):
    """Oracle of ``mondrian._compact.preorder_structure``: ``(code, where, right)``.

    Other method: a recursive parse (a subtree is a leaf, or an internal node followed by
    its left then its right subtree), counting the subtrees still to read at the end.
    """
    n = len(feature)
    right = np.full(n, -1, np.int64)
    bad = [k for k in range(n) if not -1 <= feature[k] < n_features]

    def parse(k):  # -> index after the subtree at k, or None if the input ends first
        if k >= n:
            return None
        if feature[k] < 0:
            return k + 1
        after_left = parse(k + 1)
        if after_left is None:
            return None
        if after_left < n:
            right[k] = after_left
        return parse(after_left)

    end = parse(0)
    if end is not None and end < n and (not bad or end <= bad[0]):
        return 1, end, right
    if bad:
        return 2, bad[0], right
    if end is None:
        missing = 1 + sum(1 if f >= 0 else -1 for f in feature)
        return 3, missing, right
    return 0, 0, right


def naive_expand(feature, threshold, tau, lower, upper, counts, leaf_tau, ikn):
    """Oracle of ``mondrian._compact.expand_nodes``: per-node ``(left, right, parent,
    threshold, tau, lower, upper, counts)`` by recursion over the preorder."""
    n = len(feature)
    _, _, right = naive_preorder_structure(feature, 1 + max(int(np.max(feature)), 0))
    left = np.where(np.asarray(feature) >= 0, np.arange(n) + 1, -1)
    parent = np.full(n, -1)
    for k in range(n):
        if feature[k] >= 0:
            parent[k + 1] = parent[right[k]] = k
    internal = np.flatnonzero(np.asarray(feature) >= 0)
    leaves = np.flatnonzero(np.asarray(feature) < 0)
    thr = np.zeros(n)
    thr[internal] = threshold
    t = np.full(n, float(leaf_tau))
    t[internal] = tau
    lo = np.zeros((n, lower.shape[1]))
    up = np.zeros((n, lower.shape[1]))
    c = np.zeros((n, counts.shape[1]))

    def fill(k):
        if feature[k] < 0:
            i = int(np.searchsorted(leaves, k))
            lo[k], up[k], c[k] = lower[i], upper[i], counts[i]
            return
        a, b = k + 1, right[k]
        fill(a)
        fill(b)
        lo[k] = np.minimum(lo[a], lo[b])
        up[k] = np.maximum(up[a], up[b])
        c[k] = (np.minimum(c[a], 1) + np.minimum(c[b], 1)) if ikn else c[a] + c[b]

    fill(0)
    return left, right, parent, thr, t, lo, up, c


# ----------------------------------------------------------------------------- recalibration


def naive_crps_mixture(weights, means, variances, y):
    """CRPS of one Gaussian mixture at ``y`` in closed form, ``E|X - y| - E|X - X'| / 2``,
    with ``E|Z| = mu (2 Phi(mu / s) - 1) + 2 s phi(mu / s)`` for ``Z ~ N(mu, s^2)``
    (Grimit et al. (2006), eq. (5)); pairwise over components."""
    w, m, v = (np.asarray(a, dtype=np.float64) for a in (weights, means, variances))
    w = w / w.sum()

    def abs_mean(mu, var):
        s = np.sqrt(var)
        return mu * (2 * stats.norm.cdf(mu / s) - 1) + 2 * s * stats.norm.pdf(mu / s)

    first = np.sum(w * abs_mean(m - y, v))
    pair = np.sum(w[:, None] * w[None, :] * abs_mean(m[:, None] - m[None, :],
                                                     v[:, None] + v[None, :]))
    return float(first - 0.5 * pair)


def naive_crps_numeric(cdf, y, lo, hi, n=400_001):
    """``int (G(t) - 1{t >= y})^2 dt`` on a dense grid over ``[lo, hi]`` (``cdf`` vectorised)."""
    t = np.linspace(lo, hi, n)
    return float(np.trapezoid((cdf(t) - (t >= y)) ** 2, t))


def naive_pit_knots(u, n_knots):
    """Knots of the PIT map: the empirical ``j / K`` quantiles of ``u`` (linear between order
    statistics), pinned to 0 and 1 at the ends."""
    nominal = np.linspace(0.0, 1.0, n_knots + 1)
    levels = np.quantile(np.asarray(u, dtype=np.float64), nominal)
    levels[0], levels[-1] = 0.0, 1.0
    return nominal, levels


def naive_aci(u, nominal, levels, step):
    """Adaptive conformal inference on every interior knot (Gibbs & Candes (2021), eq. 2),
    one PIT value at a time."""
    levels = np.array(levels, dtype=np.float64)
    for ut in u:
        for j in range(1, len(levels) - 1):
            levels[j] += step * (nominal[j] - (1.0 if ut <= levels[j] else 0.0))
    return levels


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


def naive_conditional_smc(old, X, leaf_ll, n_particles, alpha_s, beta_s, seed):
    """Algorithm 4.2 with Python node lists, consuming ``RandomState(seed)`` uniforms in the
    order ``ebf.bayestrees.pgbart.csmc`` documents; returns the drawn tree's arrays.

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


# ---------------------------------------------------------------- Mondrian kernel (mondrian.kernel)

_U64 = (1 << 64) - 1


def naive_mix64(h: int) -> int:
    """splitmix64's finaliser on Python ints (mod 2^64)."""
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & _U64
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & _U64
    return h ^ (h >> 31)


def naive_kernel_cells(X, tree, lam, seed) -> np.ndarray:
    """The cell of every row at width ``lam`` by the conditional Mondrian, one row at a time
    in Python: at node j, a row at L1 distance E from the box is cut off at tau_parent +
    Exp(E) (the uniform from the hash of the row's bits, the seed and j) if that comes before
    min(tau_j, lam), into the tree's unseen column (after its cells); else a cell gives its
    preorder number (:func:`naive_cell_columns`) and a split sends the row on."""
    column, unseen = naive_cell_columns(tree, lam)
    out = np.empty(X.shape[0], np.int64)
    bits = (np.asarray(X, float) + 0.0).view(np.uint64)
    for i in range(X.shape[0]):
        h = naive_mix64(int(seed))
        for b in bits[i]:
            h = naive_mix64(h ^ ((int(b) + 0x9E3779B97F4A7C15) & _U64))
        j, tau_p = tree.root, 0.0
        while True:
            lo, hi = tree.lower[j], tree.upper[j]
            rate = float(np.sum(np.maximum(lo - X[i], 0) + np.maximum(X[i] - hi, 0)))
            if rate > 0:
                u = (naive_mix64(h ^ (((int(j) + 1) * 0x9E3779B97F4A7C15) & _U64)) >> 11) + 1
                if tau_p - np.log(u / 2.0**53) / rate < min(tree.tau[j], lam):
                    out[i] = unseen
                    break
            if tree.left[j] == -1 or tree.tau[j] > lam:
                out[i] = column[j]
                break
            tau_p = tree.tau[j]
            j = tree.left[j] if X[i, tree.feature[j]] <= tree.threshold[j] else tree.right[j]
    return out


def naive_mondrian_box_cells(X, lower, upper, lam, rng) -> np.ndarray:
    """Cell ids of the rows of ``X`` in one Mondrian partition of the whole box
    [lower, upper] with lifetime ``lam`` (Roy & Teh's generative process: a block of linear
    dimension L is cut after Exp(L), the dimension in proportion to its side, the location
    uniform on it), sampled with numpy, blocks recursively."""
    out = np.zeros(X.shape[0], np.int64)
    next_id = [0]

    def block(rows, lo, hi, t):
        side = hi - lo
        t_cut = t + rng.exponential(1 / side.sum())
        if t_cut > lam:
            out[rows] = next_id[0]
            next_id[0] += 1
            return
        d = rng.choice(side.size, p=side / side.sum())
        xi = rng.uniform(lo[d], hi[d])
        go = X[rows, d] <= xi
        hi_left, lo_right = hi.copy(), lo.copy()
        hi_left[d], lo_right[d] = xi, xi
        block(rows[go], lo, hi_left, t_cut)
        block(rows[~go], lo_right, hi, t_cut)

    block(np.arange(X.shape[0]), np.asarray(lower, float), np.asarray(upper, float), 0.0)
    return out


def naive_cell_columns(tree, lam) -> tuple[dict, int]:
    """Preorder (left first) numbers of the cells of a flat Mondrian tree at width ``lam``:
    the reachable nodes that are leaves or split after ``lam``."""
    column, stack = {}, [tree.root]
    while stack:
        j = stack.pop()
        if tree.left[j] == -1 or tree.tau[j] > lam:
            column[j] = len(column)
        else:
            stack += [tree.right[j], tree.left[j]]
    return column, len(column)


# ---------------------------------------------------------------- leaf-noise prior (oracles)


def naive_leaf_predictive_variance(y, w, s0_sq, prior_rows, n_grid=200_001):
    """Predictive variance of a new target from one CART leaf of rows ``y`` with weights
    ``w``, by quadrature over the noise variance (no conjugate algebra).

    The rows count as ``n = (sum w)^2 / sum w^2`` effective rows with sum of squares
    ``n * v`` about their weighted mean (``v`` the weighted variance). The prior is
    ``sigma^2 ~ IG(nu0 / 2, nu0 s0^2 / 2)`` and ``p(mu | sigma^2) ~ 1 / sigma`` (the flat
    limit of the normal-inverse-gamma); integrating ``mu`` out of the likelihood leaves
    ``sigma^-n exp(-SS / (2 sigma^2))``, the posterior of ``sigma^2`` is tabulated on a log
    grid, and ``Var[y_new] = E[sigma^2] (1 + 1 / n)`` (noise plus the leaf mean's variance,
    ``sigma^2 / n`` given ``sigma^2``).
    """
    y = np.asarray(y, float)
    w = np.asarray(w, float)
    W = w.sum()
    n = W * W / np.sum(w * w)
    ybar = np.sum(w * y) / W
    ss = n * np.sum(w * (y - ybar) ** 2) / W
    scale = (prior_rows * s0_sq + ss) / (prior_rows + n)
    log_s2 = np.log(scale) + np.linspace(-25.0, 25.0, n_grid)
    s2 = np.exp(log_s2)
    log_prior = -(prior_rows / 2 + 1) * log_s2 - prior_rows * s0_sq / (2 * s2)
    log_lik = -(n / 2) * log_s2 - ss / (2 * s2)
    log_post = log_prior + log_lik + log_s2  # d sigma^2 = sigma^2 d log sigma^2
    p = np.exp(log_post - log_post.max())
    e_s2 = np.sum(p * s2) / np.sum(p)
    return e_s2 * (1.0 + 1.0 / n)


def naive_pooled_leaf_variance(leaf_rows):
    """``sum_leaves n v / sum_leaves (n - 1)`` from the (y, w) rows of every leaf."""
    num = 0.0
    dof = 0.0
    for y, w in leaf_rows:
        y = np.asarray(y, float)
        w = np.asarray(w, float)
        W = w.sum()
        n = W * W / np.sum(w * w)
        ybar = np.sum(w * y) / W
        num += n * np.sum(w * (y - ybar) ** 2) / W
        dof += n - 1.0
    return num / dof


def naive_prior_centres(left, right, root, leaf_rows, min_dof, forest_centre, floor):
    """Per leaf of one tree: the pooled within-leaf variance of the smallest subtree holding
    it whose leaves have ``min_dof`` degrees of freedom (``forest_centre`` if none).

    ``leaf_rows`` maps a leaf (global node id) to its rows ``(y, w)``; subtrees are found
    by walking up a parent map, pooling with :func:`naive_pooled_leaf_variance`.
    """
    parent = {root: None}
    stack = [root]
    order = []
    while stack:
        j = stack.pop()
        order.append(j)
        if left[j] != -1:
            for c in (left[j], right[j]):
                parent[int(c)] = j
                stack.append(int(c))

    def leaves_under(j):
        if left[j] == -1:
            return [j]
        return leaves_under(int(left[j])) + leaves_under(int(right[j]))

    def dof(leaves):
        total = 0.0
        for leaf in leaves:
            w = np.asarray(leaf_rows[leaf][1], float)
            total += w.sum() ** 2 / np.sum(w * w) - 1.0
        return total

    out = {}
    for leaf in (j for j in order if left[j] == -1):
        j, centre = leaf, forest_centre
        while j is not None:
            under = leaves_under(j)
            if dof(under) >= min_dof:
                centre = max(naive_pooled_leaf_variance([leaf_rows[k] for k in under]), floor)
                break
            j = parent[j]
        out[leaf] = centre
    return out


# ---------------------------------------------------------------- Gamma test (oracle)


def naive_gamma_test(X, y, p):
    """The Gamma test's intercept from every pair distance (no neighbour index): for each
    row, the ``p`` other rows nearest in squared Euclidean distance (ties by row index), the
    means ``delta(k)`` / ``gamma(k)`` over rows, and the least-squares line's intercept."""
    X = np.asarray(X, float)
    y = np.asarray(y, float)
    n = len(y)
    delta = np.zeros(p)
    gamma = np.zeros(p)
    for i in range(n):
        d2 = [(float(np.sum((X[j] - X[i]) ** 2)), j) for j in range(n) if j != i]
        d2.sort()
        for k in range(p):
            delta[k] += d2[k][0] / n
            gamma[k] += 0.5 * (y[d2[k][1]] - y[i]) ** 2 / n
    slope, intercept = np.polyfit(delta, gamma, 1)
    return intercept


# ---------------------------------------------------------------- Laplace kernel (oracle)


def naive_laplace_kernel(A, B, lifetime):
    """``exp(-lifetime * ||a - b||_1)`` for every pair of rows, by loops."""
    A, B = np.asarray(A, float), np.asarray(B, float)
    K = np.empty((A.shape[0], B.shape[0]))
    for i in range(A.shape[0]):
        for j in range(B.shape[0]):
            K[i, j] = np.exp(-lifetime * sum(abs(a - b) for a, b in zip(A[i], B[j], strict=True)))
    return K
