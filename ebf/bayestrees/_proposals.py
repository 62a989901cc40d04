"""Proposal kernels of the SMC for Bayesian decision trees (thesis Sec. 3.3, 3.3.1; eq. 3.5-3.7).

One call expands one eligible leaf ``j`` of one particle: it stops it or splits it with
:func:`ebf.bayestrees._trees.split_node`, and returns the new ``n_nodes`` with the log of the
incremental weight of eq. (3.7),

    log [P(T(t) | T(t-1)) / Q(T(t) | T(t-1))] + log [p(Y | T(t), X) / p(Y | T(t-1), X)],

where only the leaf's own factors of the prior (eq. 3.4) and of the likelihood (eq. 3.1)
change. Randomness is four uniforms per node (``PROPOSAL_UNIFORMS``) drawn by the caller:

- ``PRIOR`` (the Bayesian bootstrap filter): :func:`ebf.bayestrees._prior.expand_prior` with
  ``u[:3]``; P/Q = 1, so the increment is ``ll(l) + ll(r) - ll(j)`` after a split, 0 after a stop.
- ``EMPIRICAL``: stop or split and the dimension as the prior (``u[0]``, ``u[1]``); then a gap
  between adjacent distinct values of the node's rows along it, uniformly (``u[2]``), and a
  location uniform in the gap (``u[3]``). P/Q = ``(U - 1) |gap| / |e_j,d|`` for ``U`` distinct
  values, times the likelihood ratio.
- ``OPTIMAL`` (eq. 3.5): Q(stop) ∝ (1 - p_j) l(j) and Q(split on d in gap g) ∝
  ``p_j / |V_j| * |gap_g| / |e_j,d| * l(left) l(right)`` (the density of Sec. 3.3.1 integrated
  over the gap, where the likelihood is constant). The sorted linear scan of the thesis'
  footnote gives every gap's mass in one pass per dimension; ``u[0]`` picks stop or a
  dimension, ``u[2]`` a gap of that dimension, ``u[3]`` the location. The increment is
  ``log Z_j - ll(j)`` with ``Z_j`` the sum of all masses, for a stop as for a split.

Work arrays (:func:`~.records.scratch`) are allocated once per particle system and reused.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from basics.flat_tree import INDEX
from basics.jit import JIT

from ._likelihood import leaf_loglik, segment_stats
from ._prior import (
    UNIFORMS_PER_NODE,
    expand_prior,
    split_probability,
    uniform_cut,
    valid_dimension,
)
from ._trees import node_extent, split_node

__all__ = ["EMPIRICAL", "OPTIMAL", "PRIOR", "PROPOSALS", "PROPOSAL_UNIFORMS", "expand_node",
           "dense_ranks", "proposal_code", "scan_dimension", "sort_positions"]

PRIOR, EMPIRICAL, OPTIMAL = 0, 1, 2

#: Name -> code of the proposal kernels.
PROPOSALS = {"prior": PRIOR, "empirical": EMPIRICAL, "optimal": OPTIMAL}

#: Uniforms a node consumes: split-or-stop / choice, dimension, gap, location in the gap.
PROPOSAL_UNIFORMS = 4
assert PROPOSAL_UNIFORMS > UNIFORMS_PER_NODE


def proposal_code(name: str) -> int:
    """Code of a proposal, or ``ValueError`` listing the choices."""
    if name not in PROPOSALS:
        raise ValueError(f"proposal={name!r} is not one of {sorted(PROPOSALS)}")
    return PROPOSALS[name]


def dense_ranks(X: np.ndarray) -> np.ndarray:
    """Every row's rank among the distinct values of each dimension, int64 like ``X``.

    The global sort of Sec. 3.3.2, once per data set; :func:`sort_positions` sorts a node's
    rows by these integers.
    """
    ranks = np.empty(X.shape, INDEX)
    for f in range(X.shape[1]):
        ranks[:, f] = np.unique(X[:, f], return_inverse=True)[1].reshape(-1)
    return ranks


# ---------------------------------------------------------------------------------- kernels


@njit(**JIT)
def split_loglik_ratio(S, t, lchild, rchild, model, w):  # pragma: no cover - numba
    """``ll(left) + ll(right) - ll(parent)`` of a node just split into ``lchild, rchild``.

    The parent's statistics are the sum of its children's (its rows are theirs).
    """
    s_left = w.s_left
    s_right = w.s_right
    segment_stats(S, t, lchild, s_left)
    segment_stats(S, t, rchild, s_right)
    children = leaf_loglik(model.code, model.params, s_left) + leaf_loglik(
        model.code, model.params, s_right)
    for k in range(s_left.shape[0]):
        s_left[k] += s_right[k]
    return children - leaf_loglik(model.code, model.params, s_left)


@njit(**JIT)
def _sorted_values(X, t, j, f, values):  # pragma: no cover - numba
    """Node ``j``'s values along ``f``, sorted, in ``values[:count[j]]``; returns the count."""
    n = t.count[j]
    for i in range(n):
        values[i] = X[t.order[t.start[j] + i], f]
    values[:n].sort()
    return n


@njit(**JIT)
def _expand_empirical(t, n_nodes, data, j, model, u, w):  # pragma: no cover - numba
    X = data.X
    lower = w.lower
    upper = w.upper
    values = w.values
    n_valid = node_extent(X, t, j, lower, upper)
    if n_valid == 0 or u[0] >= split_probability(t.depth[j], model.alpha_s, model.beta_s):
        return n_nodes, 0.0
    f = valid_dimension(lower, upper, n_valid, u[1])
    n = _sorted_values(X, t, j, f, values)
    n_gaps = 0
    for i in range(n - 1):
        if values[i] < values[i + 1]:
            n_gaps += 1
    g = min(int(u[2] * n_gaps), n_gaps - 1)
    lo = values[0]
    hi = values[n - 1]
    for i in range(n - 1):
        if values[i] < values[i + 1]:
            if g == 0:
                lo = values[i]
                hi = values[i + 1]
                break
            g -= 1
    thr = uniform_cut(lo, hi, u[3])
    n_new = split_node(t, n_nodes, X, j, f, thr)
    log_ratio = math.log(n_gaps) + math.log(hi - lo) - math.log(upper[f] - lower[f])
    return n_new, log_ratio + split_loglik_ratio(data.S, t, n_new - 2, n_new - 1, model, w)


@njit(**JIT)
def sort_positions(ranks, order, s, n, d, perm, counts, keys):  # pragma: no cover - numba
    """``perm[:n]``: the positions ``0 .. n - 1`` of the rows ``order[s:s + n]`` sorted by
    their value along ``d`` (by ``ranks[:, d]``, the dense rank of the value).

    A counting sort over the rank range when it is at most ``4 n`` (always at the root of
    a node with distinct values), else a sort of ``rank * n + position`` keys: O(n) or
    O(n log n) with integer keys and no indirection.
    """
    lo = ranks[order[s], d]
    hi = lo
    for i in range(1, n):
        r = ranks[order[s + i], d]
        lo = min(lo, r)
        hi = max(hi, r)
    width = hi - lo + 1
    if width <= 4 * n:
        counts[: width + 1] = 0
        for i in range(n):
            counts[ranks[order[s + i], d] - lo + 1] += 1
        for b in range(1, width + 1):
            counts[b] += counts[b - 1]
        for i in range(n):
            b = ranks[order[s + i], d] - lo
            perm[counts[b]] = i
            counts[b] += 1
        return
    for i in range(n):
        keys[i] = (ranks[order[s + i], d] - lo) * n + i
    keys[:n].sort()
    for i in range(n):
        perm[i] = keys[i] % n


@njit(**JIT)
def scan_dimension(data, t, j, d, model, w):  # pragma: no cover - numba
    """The sorted linear scan of node ``j`` along dimension ``d`` (Sec. 3.3.1, footnote 1).

    Sorts the node's rows by ``X[:, d]`` into ``w.perm`` (``w.values[:n]`` holds the
    unsorted values, so ``values[perm[:n]]`` is sorted) and sets, for every position
    ``i < n - 1`` of the sorted order, ``w.cand[i]`` to ``log(v_(i+1) - v_i) + ll(rows <=
    v_i) + ll(rows > v_i)`` if ``v_i < v_(i+1)`` (a gap: the log mass of a cut there, up to
    the node's constant ``log p_j - log|V_j| - log|e_j,d|``) and to ``-inf`` otherwise. The
    left statistics accumulate forwards and the right ones backwards, so neither side is a
    difference of sums.
    """
    X = data.X
    S = data.S
    code = model.code
    params = model.params
    s_left = w.s_left
    s_right = w.s_right
    values = w.values
    cand = w.cand
    perm = w.perm
    order = t.order
    n = t.count[j]
    s = t.start[j]
    for i in range(n):
        values[i] = X[order[s + i], d]
    sort_positions(data.ranks, order, s, n, d, perm, w.counts, w.keys)
    s_left[:] = 0.0
    for i in range(n - 1):
        row = order[s + perm[i]]
        for k in range(S.shape[1]):
            s_left[k] += S[row, k]
        lo = values[perm[i]]
        hi = values[perm[i + 1]]
        if lo < hi:
            cand[i] = math.log(hi - lo) + leaf_loglik(code, params, s_left)
        else:
            cand[i] = -np.inf
    s_right[:] = 0.0
    for i in range(n - 1, 0, -1):
        row = order[s + perm[i]]
        for k in range(S.shape[1]):
            s_right[k] += S[row, k]
        if cand[i - 1] > -np.inf:
            cand[i - 1] += leaf_loglik(code, params, s_right)


@njit(**JIT)
def _log_sum_exp(a):  # pragma: no cover - numba
    top = -np.inf
    for v in a:
        top = max(top, v)
    if top == -np.inf:
        return top
    total = 0.0
    for v in a:
        total += math.exp(v - top)
    return top + math.log(total)


@njit(**JIT)
def _pick(log_mass, top, target):  # pragma: no cover - numba
    """First index whose cumulative ``exp(log_mass - top)`` exceeds ``target`` (the last
    positive one if rounding leaves ``target`` past the total)."""
    acc = 0.0
    last = -1
    for i in range(log_mass.shape[0]):
        if log_mass[i] > -np.inf:
            acc += math.exp(log_mass[i] - top)
            last = i
            if target < acc:
                return i
    return last


@njit(**JIT)
def optimal_masses(data, t, j, model, w):  # pragma: no cover - numba
    """The one-step optimal proposal's log masses at node ``j`` (eq. 3.5, Sec. 3.3.1).

    Returns ``(log_stop, ll_j, n_valid)`` and fills ``w.dim_mass[d]`` with the log of the
    total mass of splits along ``d`` (``-inf`` outside V_j); ``log Z_j`` is the log sum of
    ``log_stop`` and ``dim_mass``.
    """
    X = data.X
    lower = w.lower
    upper = w.upper
    s_left = w.s_left
    cand = w.cand
    dim_mass = w.dim_mass
    n_valid = node_extent(X, t, j, lower, upper)
    segment_stats(data.S, t, j, s_left)
    ll_j = leaf_loglik(model.code, model.params, s_left)
    dim_mass[:] = -np.inf
    if n_valid == 0:
        return ll_j, ll_j, 0
    p = split_probability(t.depth[j], model.alpha_s, model.beta_s)
    base = math.log(p) - math.log(n_valid)
    n = t.count[j]
    for d in range(X.shape[1]):
        if lower[d] < upper[d]:
            scan_dimension(data, t, j, d, model, w)
            dim_mass[d] = base - math.log(upper[d] - lower[d]) + _log_sum_exp(cand[: n - 1])
    return math.log1p(-p) + ll_j, ll_j, n_valid


@njit(**JIT)
def _expand_optimal(t, n_nodes, data, j, model, u, w):  # pragma: no cover - numba
    values = w.values
    cand = w.cand
    dim_mass = w.dim_mass
    perm = w.perm
    log_stop, ll_j, n_valid = optimal_masses(data, t, j, model, w)
    if n_valid == 0:
        return n_nodes, 0.0
    top = log_stop
    for d in range(dim_mass.shape[0]):
        top = max(top, dim_mass[d])
    total = math.exp(log_stop - top)
    for d in range(dim_mass.shape[0]):
        if dim_mass[d] > -np.inf:
            total += math.exp(dim_mass[d] - top)
    log_z = top + math.log(total)
    target = u[0] * total - math.exp(log_stop - top)
    if target < 0.0:
        return n_nodes, log_z - ll_j
    f = _pick(dim_mass, top, target)
    n = t.count[j]
    scan_dimension(data, t, j, f, model, w)
    top_gap = -np.inf
    for i in range(n - 1):
        top_gap = max(top_gap, cand[i])
    gap_total = 0.0
    for i in range(n - 1):
        if cand[i] > -np.inf:
            gap_total += math.exp(cand[i] - top_gap)
    i = _pick(cand[: n - 1], top_gap, u[2] * gap_total)
    thr = uniform_cut(values[perm[i]], values[perm[i + 1]], u[3])
    n_new = split_node(t, n_nodes, data.X, j, f, thr)
    return n_new, log_z - ll_j


@njit(**JIT)
def expand_node(proposal, t, n_nodes, data, j, model, u, w):  # pragma: no cover - numba
    """Stop or split the eligible leaf ``j`` of the :class:`~.records.Tree` ``t`` with
    ``proposal``; return ``(n_nodes, log w)``.

    ``u`` holds the node's ``PROPOSAL_UNIFORMS`` uniforms, ``data`` the
    :class:`~.records.Data` (rows, per-row statistics, and dense ranks for ``OPTIMAL``),
    ``model`` the :class:`~.records.Model`, ``w`` a :class:`~.records.Scratch`; ``log w``
    is the log incremental weight of eq. (3.7).
    """
    if proposal == OPTIMAL:
        return _expand_optimal(t, n_nodes, data, j, model, u, w)
    if proposal == EMPIRICAL:
        return _expand_empirical(t, n_nodes, data, j, model, u, w)
    n_new = expand_prior(t, n_nodes, data.X, j, model, u, w)
    if n_new == n_nodes:
        return n_nodes, 0.0
    return n_new, split_loglik_ratio(data.S, t, n_new - 2, n_new - 1, model, w)
