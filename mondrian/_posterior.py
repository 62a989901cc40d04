"""Regression posterior of a Mondrian tree: hierarchical Gaussian belief propagation.

Model (Lakshminarayanan, Roy & Teh (2016), Sec. 3): every node ``j`` has a mean parameter
``mu_j`` with the hierarchical prior

    mu_root | mu_H ~ N(mu_H, phi_root),      mu_j | mu_parent(j) ~ N(mu_parent(j), phi_j),
    phi_j = gamma1 * sigmoid(gamma2 * tau_j) - gamma1 * sigmoid(gamma2 * tau_parent(j)),

with ``tau_parent(root) = 0`` and leaves carrying ``tau = lifetime`` (``inf`` by default,
``sigmoid(inf) = 1``). Labels are ``y_n ~ N(mu_leaf(x_n), noise_var)``, with one
``noise_var`` per forest (the paper's model) or, as our extension, one per node
(:func:`node_noise_variance`); every kernel here takes either (:func:`noise_at`).

This module holds

* :func:`gaussian_posterior` -- exact Gaussian belief propagation over the flat tree arrays
  (see ``docs/families/mondrian-forests.md``), O(n_nodes), no recursion (Sec. 3.1);
* :func:`hyperparameters` -- the closed-form hyperparameter heuristic of App. B;
* :func:`empirical_moments` -- the fast per-node empirical approximation of App. C;
* :func:`node_noise_variance` -- heteroskedastic per-node noise variances (ours, not the
  paper's: see its docstring).

Numerical conventions of :func:`gaussian_posterior`
---------------------------------------------------
* Upward messages (likelihood of the data below a node, as a function of that node's mean)
  are kept in *information form* ``(lam, eta)`` (``lam`` = precision, ``eta`` = precision *
  mean), so a subtree without data is simply ``(0, 0)`` (an infinite-variance message).
  Passing a message through an edge of variance ``phi`` is
  ``(lam, eta) / (1 + lam * phi)``, which needs no division by ``phi``.
* Downward messages ("prior from above": the distribution of ``mu_j`` given all data outside
  the subtree of ``j``) are kept in *moment form* ``(a, b)`` (mean, variance). Combining with
  an information-form message is ``var = b / (1 + b * lam)``,
  ``mean = (a + b * eta) / (1 + b * lam)``, which again never divides by ``phi``.
* Hence ``phi = 0`` (``tau_j == tau_parent(j)``, including ``tau_root == 0``) is handled
  *exactly* as the equality constraint ``mu_j = mu_parent(j)``; no flooring of ``phi`` is
  needed. ``phi`` is computed with the cancellation-free identity
  ``sigmoid(a) - sigmoid(b) = sigmoid(a) * sigmoid(-b) * (-expm1(-(a - b)))`` so that children
  whose ``tau`` is within ~1e-12 of the parent's get an accurate tiny ``phi`` rather than
  rounding noise, and is clamped at ``0`` if ``tau_j <= tau_parent(j)`` (invalid input).
* All denominators are ``>= 1``, so the recursion is stable for arbitrarily deep trees.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import types
from numba.extending import overload

from basics.flat_tree import preorder
from basics.jit import JIT
from basics.leaf_noise import LEAF_PRIOR_ROWS

from ._records import Messages

__all__ = [
    "edge_variance", "gaussian_posterior", "belief_propagation",
    "hyperparameters", "empirical_moments", "node_noise_variance", "noise_at",
    "NOISE_PRIOR_SHAPE",
]

#: Shape ``a0`` of the inverse-gamma prior of a node's noise variance (our extension, see
#: :func:`node_noise_variance`): the prior weighs as ``2 * (a0 + 1) = 10`` rows
#: (:data:`basics.leaf_noise.LEAF_PRIOR_ROWS`, the package's one leaf-prior weight) at the
#: forest's variance, as many as ``min_samples_split``. A leaf of a batch-grown tree holds
#: at most ``min_samples_split - 1`` rows, whose spread is a poor estimate (a chi-square of
#: at most 8 degrees of freedom), so no leaf outweighs the prior; a node of hundreds of
#: rows is its own spread. Chosen among a0 in {0.5, 1, 3, 9} on synthetic validation data
#: (seeds the tests and benchmarks do not use): larger a0 gave better NLPD and calibration
#: on Friedman #1, a0 = 3 the best NLPD on the heteroskedastic sine; 4 sits between.
NOISE_PRIOR_SHAPE = LEAF_PRIOR_ROWS / 2.0 - 1.0


def noise_at(noise_var, j):
    """The noise variance of node ``j``: ``noise_var[j]`` (per node) or ``noise_var`` (one
    per forest). In plain Python; in numba kernels the overload below picks the form at
    compile time, so one kernel serves both and the forest form computes what it always
    did."""
    return noise_var[j] if np.ndim(noise_var) else noise_var


@overload(noise_at, jit_options=JIT)
def _noise_at_numba(noise_var, j):
    if isinstance(noise_var, types.Array):
        return lambda noise_var, j: noise_var[j]
    return lambda noise_var, j: noise_var


@numba.njit(**JIT)
def edge_variance(tau_child, tau_parent, gamma1, gamma2):
    """Prior variance ``phi`` of the edge parent -> child.

    Lakshminarayanan, Roy & Teh (2016), Sec. 3.

    Parameters
    ----------
    tau_child, tau_parent : float
        Split times; ``tau_child`` may be ``inf`` (leaf lifetime), ``tau_parent`` is ``0`` for
        the edge above the root.
    gamma1, gamma2 : float
        Prior scale and time-scale hyperparameters.

    Returns
    -------
    float
        ``gamma1 * (sigmoid(gamma2 * tau_child) - sigmoid(gamma2 * tau_parent))`` computed as
        ``gamma1 * sigmoid(a) * sigmoid(-b) * (-expm1(-(a - b)))`` (no cancellation); ``0`` if
        ``tau_child <= tau_parent`` (equality constraint) or the difference is undefined.
    """
    a = gamma2 * tau_child
    b = gamma2 * tau_parent
    d = a - b
    if not d > 0.0:  # also catches nan (inf - inf)
        return 0.0
    if a == np.inf:
        sig_a = 1.0
    else:
        sig_a = 1.0 / (1.0 + math.exp(-a))
    sig_mb = 1.0 / (1.0 + math.exp(b))  # sigmoid(-b); exp overflow -> inf -> 0
    return gamma1 * sig_a * sig_mb * (-math.expm1(-d))


@numba.njit(**JIT)
def gaussian_posterior(tree, root, n_nodes, prior, noise_var, post_mean, post_var):
    """Posterior mean and variance of every node (see :func:`belief_propagation`) into
    ``post_mean`` and ``post_var``."""
    m = max(n_nodes, 0)
    belief_propagation(tree, root, n_nodes, prior, noise_var,
                       Messages(post_mean, post_var, np.empty(m), np.empty(m), np.zeros(m),
                                np.zeros(m)))


@numba.njit(**JIT)
def belief_propagation(tree, root, n_nodes, prior, noise_var, out):
    """Exact Gaussian belief propagation over one Mondrian regression tree.

    Lakshminarayanan, Roy & Teh (2016), Sec. 3 and 3.1: computes the marginal posterior
    ``p(mu_j | D) = N(post_mean[j], post_var[j])`` of every node mean under the hierarchical
    Gaussian prior, with one upward pass (likelihood messages, information form) and one
    downward pass (moment form) over the parents-before-children order of
    ``_order.preorder`` (slot order is not topological). O(n_nodes) time and memory, no
    recursion.

    Parameters
    ----------
    tree : mondrian._records.MondrianTree
        Reads ``left``, ``right``, ``parent`` (structure, ``-1`` for none, see
        ``docs/families/mondrian-forests.md``), ``tau`` (split times; leaves hold their
        lifetime, ``inf`` allowed) and ``stats`` (``(n_j, sum y, sum y^2)``; only the rows of
        *leaves* are read: internal rows, which hold subtree totals, are ignored; leaves with
        ``n_j = 0`` send no data message).
    root, n_nodes : int
        Root slot and live node count (slots ``0 .. n_nodes-1``).
    prior : mondrian._records.Prior
        Hyperparameters ``mu_h, gamma1, gamma2`` (see :func:`hyperparameters`).
    noise_var : float or float64[>= n_nodes]
        Label noise variance, ``> 0``: one for the forest (App. B), or one per node
        (:func:`node_noise_variance`), of which only the leaves' enter the data messages.
    out : mondrian._records.Messages
        Outputs, float64[>= n_nodes] each: ``mean``, ``var``, the posterior mean and
        variance of ``mu_j`` for every live node (slots ``< n_nodes`` not reachable from
        ``root`` are set to ``nan``); ``down_mean``, ``down_var``, the downward message, mean
        and variance of ``mu_j`` given the data *outside* the subtree of ``j`` (edge
        ``phi_j`` included); ``up_lam``, ``up_eta`` (zero-filled), the likelihood of the data
        *below* ``j`` as a function of ``mu_j``, in information form (precision, precision *
        mean). With the downward message they give the posterior of a node inserted on the
        edge above ``j`` (the branch-off of a test point).

    Notes
    -----
    ``phi_j = 0`` (``tau_j == tau_parent(j)``, or ``tau_root == 0``) is an exact equality
    constraint: no division by ``phi`` ever happens (module docstring), so ``post_var`` of
    such a root is exactly ``0`` and its mean ``mu_h``.
    """
    left, right, parent, tau, stats = tree.left, tree.right, tree.parent, tree.tau, tree.stats
    mu_h, gamma1, gamma2 = prior
    post_mean, post_var, a, b, lam, eta = out
    for j in range(n_nodes):
        post_mean[j] = np.nan
        post_var[j] = np.nan
    if n_nodes <= 0 or root < 0:
        return

    # ---- parents-before-children order
    order = preorder(left, right, root, n_nodes)
    n_reach = order.shape[0]

    phi = np.zeros(n_nodes)
    up_lam = np.zeros(n_nodes)  # message j -> parent(j) (through edge phi_j)
    up_eta = np.zeros(n_nodes)

    # ---- edge variances
    for k in range(n_reach):
        j = order[k]
        p = parent[j]
        tp = 0.0 if (j == root or p < 0) else tau[p]
        phi[j] = edge_variance(tau[j], tp, gamma1, gamma2)

    # ---- upward pass (children before parents: reverse preorder)
    for k in range(n_reach - 1, -1, -1):
        j = order[k]
        lj = left[j]
        rj = right[j]
        if lj < 0 and rj < 0:
            n = stats[j, 0]
            if n > 0.0:
                inv_noise = 1.0 / noise_at(noise_var, j)
                lam[j] = n * inv_noise
                eta[j] = stats[j, 1] * inv_noise
        else:
            s_lam = 0.0
            s_eta = 0.0
            if lj >= 0:
                s_lam += up_lam[lj]
                s_eta += up_eta[lj]
            if rj >= 0:
                s_lam += up_lam[rj]
                s_eta += up_eta[rj]
            lam[j] = s_lam
            eta[j] = s_eta
        den = 1.0 + lam[j] * phi[j]
        up_lam[j] = lam[j] / den
        up_eta[j] = eta[j] / den

    # ---- downward pass: (a, b) = mean/variance of mu_j given the data outside subtree(j)
    a[root] = mu_h
    b[root] = phi[root]
    for k in range(n_reach):
        j = order[k]
        aj = a[j]
        bj = b[j]
        den = 1.0 + bj * lam[j]
        post_var[j] = bj / den
        post_mean[j] = (aj + bj * eta[j]) / den
        lj = left[j]
        rj = right[j]
        if lj >= 0:
            s_lam = up_lam[rj] if rj >= 0 else 0.0
            s_eta = up_eta[rj] if rj >= 0 else 0.0
            den = 1.0 + bj * s_lam
            a[lj] = (aj + bj * s_eta) / den
            b[lj] = bj / den + phi[lj]
        if rj >= 0:
            s_lam = up_lam[lj] if lj >= 0 else 0.0
            s_eta = up_eta[lj] if lj >= 0 else 0.0
            den = 1.0 + bj * s_lam
            a[rj] = (aj + bj * s_eta) / den
            b[rj] = bj / den + phi[rj]


def hyperparameters(n, sum_y, sum_y2, n_features):
    """Hyperparameter heuristic of Lakshminarayanan, Roy & Teh (2016), Sec. 3.2 / App. B.

    Parameters
    ----------
    n : float
        Number of training labels ``N`` (``> 0``).
    sum_y, sum_y2 : float
        Sum of the labels and of their squares.
    n_features : int
        Input dimension ``D`` (inputs scaled to ``[0, 1]^D``).

    Returns
    -------
    mu_h, gamma1, gamma2, noise_var : float
        ``mu_H = mean(y)``; ``K = min(2000, 2N)``; ``gamma1 * (1/2 + 1/K) = var(y)``
        (population variance); ``noise_var = gamma1 / K``;
        ``gamma2 = D / (20 log2 max(N, 2))``. Constant targets (``var(y) <= 0`` after the
        ``sum_y2/N - mean^2`` formula) get ``gamma1 = 1e-12 * max(1, mu_H^2)`` so that every
        variance stays finite and positive; the same floor applies to any smaller ``gamma1``.
    """
    n = float(n)
    if not n > 0:
        raise ValueError("hyperparameters need at least one training label (n > 0)")
    mu_h = float(sum_y) / n
    var_y = max(float(sum_y2) / n - mu_h * mu_h, 0.0)
    k = min(2000.0, 2.0 * n)
    floor = 1e-12 * max(1.0, mu_h * mu_h)
    gamma1 = max(var_y / (0.5 + 1.0 / k), floor)
    noise_var = gamma1 / k
    gamma2 = float(n_features) / (20.0 * np.log2(max(n, 2.0)))
    return mu_h, float(gamma1), float(gamma2), float(noise_var)


@numba.njit(**JIT)
def empirical_moments(stats, n_nodes, noise_var, out_mean, out_var):
    """Fast approximation of Lakshminarayanan, Roy & Teh (2016), Sec. 5.3 / App. C.

    The Gaussian at each node is approximated by the empirical mean and (population) variance
    of the labels below it, read from ``stats``; no ``mu_H, gamma1, gamma2`` are needed.

    Parameters
    ----------
    stats : float64[C, 3]
        ``(n_j, sum y, sum y^2)`` per node (internal nodes hold subtree totals).
    n_nodes : int
        Live node count.
    noise_var : float or float64[>= n_nodes]
        Label noise variance ``sigma_y^2`` added to the empirical variance: one for the
        forest, or one per node (:func:`node_noise_variance`).
    out_mean, out_var : float64[>= n_nodes]
        Outputs: ``out_mean[j] = sum_y / n``,
        ``out_var[j] = max(sum_y2 / n - out_mean[j]^2, 0) + noise_var[j]`` (predictive
        variance).
        Nodes with ``n_j = 0`` get ``nan`` in both (callers never use them).
    """
    for j in range(n_nodes):
        n = stats[j, 0]
        if n > 0.0:
            m = stats[j, 1] / n
            v = stats[j, 2] / n - m * m
            if v < 0.0:
                v = 0.0
            out_mean[j] = m
            out_var[j] = v + noise_at(noise_var, j)
        else:
            out_mean[j] = np.nan
            out_var[j] = np.nan


@numba.njit(**JIT)
def node_noise_variance(stats, n_nodes, noise_var, shape, out):
    """Per-node noise variances shrunk toward the forest's: heteroskedastic leaves.

    **Our extension** of the model of Lakshminarayanan, Roy & Teh (2016), Sec. 3 eq. (1),
    which has one noise variance ``sigma_y^2`` for all leaves (set by the heuristic of
    App. B). Here node ``j`` has its own ``sigma_j^2`` with the inverse-gamma prior
    ``IG(a0, b0)``, ``a0 = shape`` and ``b0 = noise_var * (a0 + 1)`` so that its mode is
    the forest's ``noise_var``; treating the node's labels as ``N(mean_j, sigma_j^2)``
    about their own mean, the posterior mode is

        sigma_j^2 = (b0 + SS_j / 2) / (a0 + n_j / 2 + 1)
                  = (2 (a0 + 1) noise_var + SS_j) / (2 (a0 + 1) + n_j),

    ``SS_j = sum_y2 - sum_y^2 / n_j`` (the sum of squares about the node's mean, from the
    node statistics; ``0`` for an empty node, clamped at ``0`` against rounding): a weighted
    mean of the forest's variance, worth ``2 (a0 + 1)`` rows, and the node's own spread.
    A node with few rows stays near ``noise_var``, one with many tracks its local spread.
    Like the node sums it is computed from, it loses digits when the labels' mean is far
    larger than their spread (shift such targets first).

    Parameters
    ----------
    stats, n_nodes
        Node statistics and live node count, as for :func:`empirical_moments`.
    noise_var : float
        The forest's noise variance (App. B), ``> 0``: the prior mode.
    shape : float
        ``a0 > 0`` (see :data:`NOISE_PRIOR_SHAPE`).
    out : float64[>= n_nodes]
        Output: ``sigma_j^2`` for every live node, ``> 0``.
    """
    w0 = 2.0 * (shape + 1.0)
    for j in range(n_nodes):
        n = stats[j, 0]
        ss = 0.0
        if n > 0.0:
            ss = stats[j, 2] - stats[j, 1] * stats[j, 1] / n
            if ss < 0.0:
                ss = 0.0
        out[j] = (w0 * noise_var + ss) / (w0 + n)
