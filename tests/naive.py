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


def gaussian_posterior_dense(left, right, parent, tau, root, n_nodes, leaf_y, mu_h, gamma1,
                             gamma2, noise_var):
    """Posterior of every node mean by dense Gaussian conditioning (oracle of BP).

    Builds the joint Gaussian of all node means ``mu`` and all individual labels ``y``
    (Lakshminarayanan, Roy & Teh (2016), Sec. 3): ``Cov(mu_i, mu_j)`` = sum of ``phi`` along
    the path from the top to the lowest common ancestor of ``i`` and ``j`` (written as
    ``A diag(phi) A^T`` with ``A[i, k] = 1`` iff ``k`` is ``i`` or an ancestor of ``i``),
    prior mean ``mu_h``; ``y_n = mu_leaf(n) + N(0, noise_var)``. Conditions on ``y`` with
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
    cov_yy = cov_mu[np.ix_(obs_node, obs_node)] + noise_var * np.eye(len(y))
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
    """Assert every structural invariant of a flat Mondrian tree (``TREE_LAYOUT.md``).

    ``rows`` are all the rows inserted so far; ``task`` is 0 (regression) or 1
    (classification). Raises ``AssertionError`` with a message on the first violation.
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
        if task == 0:
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
            if task == 1:
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
            if task == 0:
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
