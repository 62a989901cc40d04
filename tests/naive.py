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
