"""Prediction kernels: the branch-off mixture along the root-to-leaf path.

A test point x may "branch off" the tree just above any node j of its path, with
probability p_j(x) = 1 - exp(-Delta_j * eta_j(x)) given that it has not branched off
earlier, where Delta_j = tau_j - tau_parent(j) and eta_j(x) is the distance from x to the
data extent of j (paper Alg. 5; thesis eq. 5.6-5.7, Alg. 5.8). One descent serves both
tasks: regression writes a Gaussian component per node (``node_*`` for the leaf, ``off_*``
for a branch-off above the node), classification mixes IKN posterior rows.
"""

from __future__ import annotations

import numba
import numpy as np

from .config import JIT, NO_NODE
from .ikn import branch_off_G, expected_discount

#: Columns of the per-node parameter matrix ``P`` of regression trees.
(NODE_MEAN, NODE_VAR, OFF_MEAN, OFF_VAR, DOWN_MEAN, CAVITY_VAR, UP_LAM, UP_ETA,
 SIG_TAU, SIG_PARENT) = range(10)
N_NODE_PARAMS = 10
#: Entries of the hyperparameter vector ``h``: exact posterior flag, gamma1, gamma2,
#: noise variance, sigmoid(gamma2 * lifetime).
EXACT, GAMMA1, GAMMA2, NOISE, SIG_LIFETIME = range(5)
#: Quantile nodes of the truncated-exponential split time of a branch-off (midpoint rule).
N_TIME_NODES = 4


@numba.njit(**JIT)
def _branch_off(j, x, parent, tau, lower, upper):
    """Return ``(p_j(x), eta_j(x), Delta_j)`` for node ``j`` (paper Alg. 5 lines 5-6)."""
    eta = 0.0
    for d in range(x.shape[0]):
        if x[d] > upper[j, d]:
            eta += x[d] - upper[j, d]
        elif x[d] < lower[j, d]:
            eta += lower[j, d] - x[d]
    tau_parent = 0.0 if parent[j] == NO_NODE else tau[parent[j]]
    delta = tau[j] - tau_parent
    if eta == 0.0 or delta == 0.0:
        return 0.0, eta, delta
    return -np.expm1(-delta * eta), eta, delta


@numba.njit(**JIT)
def _off_component(j, eta, delta, tau_parent, tau, P, h):
    """Predictive Gaussian of a new leaf that branches off on the edge above node ``j``.

    With the empirical posterior (App. C) it is the moments of the parent. With the exact
    posterior (Sec. 3.3) the new node j~ sits at time tau~ = tau_parent + s, s drawn from
    the exponential of rate eta(x) truncated to [0, Delta_j] (thesis Sec. 5.5.3): its
    posterior combines the message from outside the subtree of j (mean ``DOWN_MEAN``,
    variance ``CAVITY_VAR`` + phi(tau~)) with the data below j (``UP_LAM``, ``UP_ETA``)
    passed through phi(tau_j | tau~); the new leaf adds phi(lifetime | tau~) and the noise.
    The average over tau~ is moment-matched from ``N_TIME_NODES`` quantile nodes.
    """
    if h[EXACT] == 0.0:
        return P[j, OFF_MEAN], P[j, OFF_VAR]
    g1 = h[GAMMA1]
    g2 = h[GAMMA2]
    mass = 1.0 if delta == np.inf else -np.expm1(-eta * delta)
    m1 = 0.0
    m2 = 0.0
    for q in range(N_TIME_NODES):
        u = (q + 0.5) / N_TIME_NODES
        # sigmoid(gamma2 * tau~): one exp per node; phi = gamma1 * (difference of sigmoids)
        sig_new = 1.0 / (1.0 + np.exp(-g2 * (tau_parent - np.log1p(-u * mass) / eta)))
        b_new = P[j, CAVITY_VAR] + g1 * max(sig_new - P[j, SIG_PARENT], 0.0)
        phi_below = g1 * max(P[j, SIG_TAU] - sig_new, 0.0)
        shrink = 1.0 + P[j, UP_LAM] * phi_below
        lam = P[j, UP_LAM] / shrink
        eta_info = P[j, UP_ETA] / shrink
        den = 1.0 + b_new * lam
        mean = (P[j, DOWN_MEAN] + b_new * eta_info) / den
        var = b_new / den + g1 * max(h[SIG_LIFETIME] - sig_new, 0.0) + h[NOISE]
        m1 += mean
        m2 += var + mean * mean
    m1 /= N_TIME_NODES
    return m1, m2 / N_TIME_NODES - m1 * m1


@numba.njit(**JIT)
def regression_moments(
    X, left, right, parent, feature, threshold, tau, lower, upper, root, P, h, out_m1, out_m2,
):
    """Add one tree's predictive first and second moments, eq. (3)-(4), to the outputs."""
    for i in range(X.shape[0]):
        x = X[i]
        j = root
        not_separated = 1.0
        m1 = 0.0
        m2 = 0.0
        while True:
            p, eta, delta = _branch_off(j, x, parent, tau, lower, upper)
            if p > 0.0:
                w = not_separated * p
                tp = 0.0 if parent[j] == NO_NODE else tau[parent[j]]
                om, ov = _off_component(j, eta, delta, tp, tau, P, h)
                m1 += w * om
                m2 += w * (ov + om * om)
            if left[j] == NO_NODE:
                w = not_separated * (1.0 - p)
                m1 += w * P[j, NODE_MEAN]
                m2 += w * (P[j, NODE_VAR] + P[j, NODE_MEAN] ** 2)
                break
            not_separated *= 1.0 - p
            j = left[j] if x[feature[j]] <= threshold[j] else right[j]
        out_m1[i] += m1
        out_m2[i] += m2


@numba.njit(**JIT)
def regression_count(X, left, right, parent, feature, threshold, tau, lower, upper, root, out):
    """Add one tree's number of non-zero mixture components per row to ``out``."""
    for i in range(X.shape[0]):
        x = X[i]
        j = root
        count = 0
        while True:
            p, eta, delta = _branch_off(j, x, parent, tau, lower, upper)
            if p > 0.0:
                count += 1
            if left[j] == NO_NODE:
                if p < 1.0:
                    count += 1
                break
            j = left[j] if x[feature[j]] <= threshold[j] else right[j]
        out[i] += count


@numba.njit(**JIT)
def regression_components(
    X, left, right, parent, feature, threshold, tau, lower, upper, root, P, h,
    tree_weight, cursor, W, M, V,
):
    """Write one tree's mixture components (eq. 3) into rows of ``W, M, V``.

    ``cursor[i]`` is the next free column of row i; components get weight
    ``tree_weight * w_j`` (eq. 5 with equal tree weights).
    """
    for i in range(X.shape[0]):
        x = X[i]
        j = root
        not_separated = 1.0
        c = cursor[i]
        while True:
            p, eta, delta = _branch_off(j, x, parent, tau, lower, upper)
            if p > 0.0:
                tp = 0.0 if parent[j] == NO_NODE else tau[parent[j]]
                W[i, c] = tree_weight * not_separated * p
                M[i, c], V[i, c] = _off_component(j, eta, delta, tp, tau, P, h)
                c += 1
            if left[j] == NO_NODE:
                if p < 1.0:
                    W[i, c] = tree_weight * not_separated * (1.0 - p)
                    M[i, c] = P[j, NODE_MEAN]
                    V[i, c] = P[j, NODE_VAR]
                    c += 1
                break
            not_separated *= 1.0 - p
            j = left[j] if x[feature[j]] <= threshold[j] else right[j]
        cursor[i] = c


@numba.njit(**JIT)
def classification_proba(
    X, left, right, parent, feature, threshold, tau, lower, upper, root, stats, G, gamma, out,
):
    """Add one tree's class probabilities (thesis Alg. 5.8) to ``out``."""
    n_classes = stats.shape[1]
    uniform = np.full(n_classes, 1.0 / n_classes)
    g_new = np.empty(n_classes)
    for i in range(X.shape[0]):
        x = X[i]
        j = root
        not_separated = 1.0
        while True:
            p, eta, delta = _branch_off(j, x, parent, tau, lower, upper)
            if p > 0.0:
                dbar = expected_discount(eta, delta, gamma)
                g_parent = uniform if parent[j] == NO_NODE else G[parent[j]]
                branch_off_G(g_parent, stats[j], dbar, g_new)
                w = not_separated * p
                for k in range(n_classes):
                    out[i, k] += w * g_new[k]
            if left[j] == NO_NODE:
                w = not_separated * (1.0 - p)
                for k in range(n_classes):
                    out[i, k] += w * G[j, k]
                break
            not_separated *= 1.0 - p
            j = left[j] if x[feature[j]] <= threshold[j] else right[j]


@numba.njit(**JIT)
def apply_tree(X, left, right, feature, threshold, root, out):
    """Leaf slot of every row (plain descent, ignoring branch-off)."""
    for i in range(X.shape[0]):
        j = root
        while left[j] != NO_NODE:
            j = left[j] if X[i, feature[j]] <= threshold[j] else right[j]
        out[i] = j
