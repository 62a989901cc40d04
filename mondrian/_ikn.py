"""Classification posterior of a Mondrian tree: HNSP prior with the IKN approximation.

Every node j carries a label distribution G_j with a hierarchical normalized stable process
prior, ``G_root | H ~ NSP(d_root, H)`` and ``G_j | G_parent(j) ~ NSP(d_j, G_parent(j))``, with
H uniform over the K classes and discount ``d_j = exp(-gamma * (tau_j - tau_parent(j)))``
(``tau_parent(root) = 0``). Posterior means are computed with interpolated Kneser-Ney (IKN)
smoothing: the number of tables serving class k in restaurant j is ``tab_{j,k} = min(c_{j,k}, 1)``.

Counts live in the tree's ``stats`` array (float64[C, K], see the tree layout in
``docs/families/mondrian-forests.md``): raw label counts at a leaf,
``tab_left,k + tab_right,k`` at an internal node; tables are never stored.

Reference: Lakshminarayanan (2016) thesis, Sec. 5.4-5.5, eq. (5.5), Alg. 5.3/5.4/5.7/5.8.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from basics.flat_tree import NO_NODE, preorder
from basics.jit import JIT

__all__ = [
    "branch_off_G",
    "expected_discount",
    "ikn_add",
    "ikn_counts",
    "ikn_posterior",
]


@numba.njit(**JIT)
def _discount(gamma, delta):
    """``exp(-gamma * delta)`` with the convention ``0 * inf = 0`` (so ``gamma = 0`` gives 1)."""
    if gamma == 0.0:
        return 1.0
    return math.exp(-gamma * delta)


@numba.njit(**JIT)
def ikn_counts(left, right, root, n_nodes, stats):
    """Recompute the IKN counts of every internal node from the leaves' raw label counts.

    Batch version of Lakshminarayanan (2016) thesis, Sec. 5.4-5.5, Alg. 5.3 (run for the
    whole tree at once): for an internal node j, ``c_{j,k} = tab_left(j),k + tab_right(j),k``
    with ``tab = min(c, 1)`` (IKN approximation). Feeds eq. (5.5) / Alg. 5.4/5.7/5.8.

    Parameters
    ----------
    left, right : int64[C]
        Child slots, ``-1`` at a leaf.
    root : int
        Root slot.
    n_nodes : int
        Number of live nodes (size of the work queue).
    stats : float64[C, K]
        Counts; leaf rows are read (raw label counts), internal rows are overwritten in place.

    Notes
    -----
    Slot order is not topological, so the nodes are first listed in preorder from ``root``
    and then processed in reverse (children before parents). No recursion.
    """
    K = stats.shape[1]
    order = preorder(left, right, root, n_nodes)
    tail = order.shape[0]
    for i in range(tail - 1, -1, -1):
        j = order[i]
        l = left[j]
        if l == NO_NODE:
            continue
        r = right[j]
        for k in range(K):
            stats[j, k] = min(stats[l, k], 1.0) + min(stats[r, k], 1.0)


@numba.njit(**JIT)
def ikn_add(parent, left, right, stats, leaf, k):
    """Online IKN count update after one training point of class ``k`` reaches ``leaf``.

    Lakshminarayanan (2016) thesis, Sec. 5.4-5.5, Alg. 5.7: ``c_{leaf,k} += 1``, then walk up
    recomputing ``c_{j,k} = tab_left(j),k + tab_right(j),k`` only while needed. The result
    equals a batch :func:`ikn_counts` (Alg. 5.3) over the same points.

    Parameters
    ----------
    parent, left, right : int64[C]
        Parent / child slots (``-1`` if none).
    stats : float64[C, K]
        IKN counts, updated in place.
    leaf : int
        Leaf slot the point falls in.
    k : int
        Class label of the point, ``0 <= k < K``.

    Notes
    -----
    The walk (:func:`ikn_refresh_up`) recomputes each ancestor's count from its children and
    stops at the first count that is unchanged. Alg. 5.7 as printed tests the *parent's* old
    table before recomputing the parent's count, which would leave ``c_{parent,k}`` stale
    (1 instead of 2) when the sibling already had class k; recomputing first avoids that.
    """
    stats[leaf, k] += 1.0
    ikn_refresh_up(left, right, parent, stats, parent[leaf], k)


@numba.njit(**JIT)
def ikn_refresh_up(left, right, parent, stats, a, k):
    """Recompute the IKN counts of class ``k`` from node ``a`` up to the root.

    ``c_a,k = min(c_left,k, 1) + min(c_right,k, 1)`` (thesis Alg. 5.3); the walk stops at the
    first node whose count is unchanged, since nothing above it can change then. Used after
    a leaf count grows (:func:`ikn_add`) and after an online update inserts a new node.
    """
    while a != NO_NODE:
        new = min(stats[left[a], k], 1.0) + min(stats[right[a], k], 1.0)
        if new == stats[a, k]:
            return
        stats[a, k] = new
        a = parent[a]


@numba.njit(**JIT)
def ikn_posterior(left, right, tau, stats, root, n_nodes, gamma, out_G):
    """Posterior mean label distribution G_j of every node (IKN smoothing, top-down pass).

    Lakshminarayanan (2016) thesis, Sec. 5.4-5.5, eq. (5.5), Alg. 5.4:
    ``G_{j,k} = (c_{j,k} - d_j tab_{j,k} + d_j tab_{j,.} G_parent(j),k) / c_{j,.}`` if
    ``c_{j,.} > 0`` else ``G_parent(j),k``, with ``G_parent(root) = H`` uniform and
    ``d_j = exp(-gamma (tau_j - tau_parent(j)))``, ``tau_parent(root) = 0``.

    Parameters
    ----------
    left, right : int64[C]
        Child slots, ``-1`` at a leaf.
    tau : float64[C]
        Split times; a leaf has ``tau = lifetime`` (may be ``inf``, giving ``d_j = 0``).
    stats : float64[C, K]
        IKN counts (see :func:`ikn_counts`).
    root : int
        Root slot.
    n_nodes : int
        Number of live nodes (size of the work queue).
    gamma : float
        Discount rate, ``gamma >= 0`` (``gamma = 0`` gives ``d_j = 1`` everywhere, ``0 * inf``
        taken as 0).
    out_G : float64[C, K]
        Output; the row of every node reachable from ``root`` is written, other rows untouched.
        Each written row sums to 1.
    """
    K = stats.shape[1]
    queue = np.empty(n_nodes, dtype=np.int64)
    par = np.empty(n_nodes, dtype=np.int64)
    queue[0] = root
    par[0] = NO_NODE
    head = 0
    tail = 1
    uniform = 1.0 / K
    while head < tail:
        j = queue[head]
        p = par[head]
        head += 1
        tau_p = 0.0 if p == NO_NODE else tau[p]
        d = _discount(gamma, tau[j] - tau_p)
        c_tot = 0.0
        tab_tot = 0.0
        for k in range(K):
            c_tot += stats[j, k]
            tab_tot += min(stats[j, k], 1.0)
        if c_tot > 0.0:
            inv = 1.0 / c_tot
            for k in range(K):
                gp = uniform if p == NO_NODE else out_G[p, k]
                c = stats[j, k]
                out_G[j, k] = (c - d * min(c, 1.0) + d * tab_tot * gp) * inv
        else:
            for k in range(K):
                out_G[j, k] = uniform if p == NO_NODE else out_G[p, k]
        if left[j] != NO_NODE:
            queue[tail] = left[j]
            par[tail] = j
            queue[tail + 1] = right[j]
            par[tail + 1] = j
            tail += 2


@numba.njit(**JIT)
def expected_discount(eta, delta, gamma):
    """Expected discount ``E[exp(-gamma * Delta)]``, Delta ~ Exp(rate eta) truncated to [0, delta].

    Lakshminarayanan (2016) thesis, Sec. 5.4-5.5, Alg. 5.8 line 9 (discount of the new node
    created when a test point branches off, averaged over its split time). Closed form::

        eta / (eta + gamma) * (1 - exp(-(eta + gamma) delta)) / (1 - exp(-eta delta))

    evaluated with ``expm1``. Limits: ``delta = inf`` gives ``eta / (eta + gamma)``;
    ``eta * delta -> 0`` (uniform Delta) gives ``(1 - exp(-gamma delta)) / (gamma delta)``;
    ``gamma = 0``, ``delta = 0`` or ``eta = inf`` give 1.

    Parameters
    ----------
    eta : float
        Rate of the exponential, ``eta >= 0`` (the test point's distance to the node's box).
    delta : float
        Truncation point ``tau_j - tau_parent(j) >= 0``, may be ``inf``.
    gamma : float
        Discount rate, ``gamma >= 0``.

    Returns
    -------
    float
        The expected discount in [0, 1].
    """
    if gamma == 0.0 or delta == 0.0 or eta == math.inf:
        return 1.0
    if delta == math.inf:
        if eta == 0.0:
            return 0.0  # improper uniform on [0, inf): Delta is a.s. arbitrarily large
        return eta / (eta + gamma)
    a = eta * delta
    if a < 1e-300:
        gd = gamma * delta
        return -math.expm1(-gd) / gd
    num = math.expm1(-(eta + gamma) * delta)
    den = math.expm1(-a)
    return eta / (eta + gamma) * (num / den)


@numba.njit(**JIT)
def branch_off_G(G_parent_row, c_row, dbar, out_row):
    """Posterior mean of the new node j~ created when a test point branches off above node j.

    Lakshminarayanan (2016) thesis, Sec. 5.4-5.5, eq. (5.5), Alg. 5.8 lines 10-11:
    ``c~_k = tab~_k = min(c_{j,k}, 1)`` and
    ``G~_k = (c~_k - dbar tab~_k + dbar tab~_. G_parent(j),k) / c~_.`` (``G_parent(j)`` if
    ``c~_. = 0``). The test point's own leaf has no counts, so its G equals ``G~``.

    Parameters
    ----------
    G_parent_row : float64[K]
        ``G_parent(j)``; for ``j = root`` pass the base distribution H (``np.full(K, 1 / K)``).
    c_row : float64[K]
        IKN counts ``c_{j,.}`` of node j.
    dbar : float
        Expected discount of j~ (:func:`expected_discount`).
    out_row : float64[K]
        Output ``G~``, sums to 1.
    """
    K = c_row.shape[0]
    tab_tot = 0.0
    for k in range(K):
        tab_tot += min(c_row[k], 1.0)
    if tab_tot > 0.0:
        inv = 1.0 / tab_tot
        for k in range(K):
            t = min(c_row[k], 1.0)
            out_row[k] = (t - dbar * t + dbar * tab_tot * G_parent_row[k]) * inv
    else:
        for k in range(K):
            out_row[k] = G_parent_row[k]
