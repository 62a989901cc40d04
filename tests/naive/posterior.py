"""Oracles of the Mondrian posterior (``mondrian._posterior``, ``mondrian._ikn``, the
predictor): dense Gaussian conditioning for belief propagation and branch-off moments,
IKN counts and posterior means, expected discounts."""

from __future__ import annotations

import numpy as np

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
