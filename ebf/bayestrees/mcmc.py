"""Metropolis-Hastings moves on one tree: the CGM and GrowPrune samplers of BART (thesis 4.3.2).

CGM (Chipman, George & McCulloch 1998) picks one of four moves, each with probability 1/4
as in the thesis' implementation; GrowPrune (Pratola et al.) picks grow or prune, 1/2 each:

- grow: a leaf uniformly among the L(T) leaves, split as the prior splits it (dimension
  uniform over V_j, location uniform on the extent; :func:`~ebf.bayestrees._prior.draw_split`);
  a leaf whose rows are all equal cannot split and the move stays put;
- prune: a node uniformly among the NOG(T) internal nodes whose children are both leaves,
  its children removed;
- change: an internal node uniformly among the I(T), a new rule drawn as grow draws one;
- swap: an internal non-root node c uniformly, its rule swapped with its parent's (with
  both children's if c's sibling has the same rule).

The acceptance ratio is ``pi(T') q(T | T') / (pi(T) q(T' | T))`` with pi of eq. (4.8): the
prior eq. (3.4) (:func:`~ebf.bayestrees._prior.node_log_prior` summed over the nodes a move
touches) times the leaf likelihoods (eq. 4.9, or any :class:`LeafLikelihood`). A move that
is impossible (no leaf / NOG / internal node to act on) proposes T itself. Change and swap
re-partition only the rows of the subtree they touch: a move costs O(rows of its top node
x D).

Trees are kept **canonical**: slots in breadth-first order, no holes. Grow appends children
after every other node and prune leaves two dead slots, so an accepted move relabels the
tree breadth first (:func:`relabel`, O(nodes)); a canonical tree is what the conditional SMC
of :mod:`.pgbart` replays, so a chain may mix the samplers.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from basics.flat_tree import INDEX, NO_NODE
from basics.jit import JIT

from ._likelihood import LeafLikelihood, leaf_loglik, segment_stats
from ._prior import (
    DEFAULT_ALPHA_S,
    DEFAULT_BETA_S,
    check_prior_params,
    draw_split,
    leaf_log_prior,
    log_prior,
    node_log_prior,
    split_log_prior,
)
from ._records import data_record, model_record, small_scratch
from ._trees import (
    BayesTree,
    check_X,
    node_extent,
    node_varies,
    partition_rows,
    split_node,
    split_segment,
)

__all__ = ["CHANGE", "GROW", "MOVES", "PRUNE", "SAMPLERS", "SWAP", "canonical", "mh_step",
           "mh_update", "relabel", "UNIFORMS_PER_MOVE"]

GROW, PRUNE, CHANGE, SWAP = range(4)
MOVES = ("grow", "prune", "change", "swap")

#: Move probabilities (grow, prune, change, swap) of each Metropolis-Hastings sampler.
SAMPLERS = {"cgm": np.array([0.25, 0.25, 0.25, 0.25]),
            "growprune": np.array([0.5, 0.5, 0.0, 0.0])}

#: Uniforms one move consumes: move, node, dimension, location, acceptance.
UNIFORMS_PER_MOVE = 5


def canonical(tree: BayesTree) -> BayesTree:
    """A copy of ``tree`` relabelled breadth first (slot order = expansion order, no holes)."""
    out = tree.copy()
    out.n_nodes = int(relabel(out.record(1), out.n_nodes))  # no rows: a partition of one
    return out


def tree_update_inputs(tree: BayesTree, X: np.ndarray, y: np.ndarray,
                       likelihood: LeafLikelihood, alpha_s: float,
                       beta_s: float) -> tuple[float, float, np.ndarray, np.ndarray, BayesTree]:
    """Checked inputs of a single-tree update: ``(alpha_s, beta_s, X, S, T)`` with ``S`` the
    per-row statistics of ``y`` and ``T`` a canonical copy of ``tree``.

    Raises ``ValueError`` naming the bad prior parameter, a row-count mismatch, or a tree
    the prior cannot make on ``X`` (a split leaving a child empty).
    """
    alpha_s, beta_s = check_prior_params(alpha_s, beta_s)
    X = check_X(X)
    S = likelihood.row_stats(y)
    if S.shape[0] != X.shape[0]:
        raise ValueError(f"y has {S.shape[0]} rows but X has {X.shape[0]}; pass one label per row")
    if log_prior(tree, X, alpha_s, beta_s) == -np.inf:
        raise ValueError("the tree is not one the prior can make on X (a split leaves a child "
                         "without rows or cuts a dimension the node does not vary in)")
    return alpha_s, beta_s, X, S, canonical(tree)


def mh_update(tree: BayesTree, X: np.ndarray, y: np.ndarray, likelihood: LeafLikelihood,
              sampler: str = "cgm", alpha_s: float = DEFAULT_ALPHA_S,
              beta_s: float = DEFAULT_BETA_S, n_steps: int = 1,
              rng: np.random.Generator | int | None = None) -> tuple[BayesTree, np.ndarray]:
    """``n_steps`` Metropolis-Hastings moves of one tree given its labels (Sec. 4.3.2).

    Parameters
    ----------
    tree : BayesTree
        The current tree, one the prior can make on ``X``.
    X : ndarray of shape (n_rows, n_features)
    y : ndarray of shape (n_rows,)
        The labels (BART: the residual R_m of eq. 4.7).
    likelihood : LeafLikelihood
    sampler : {"cgm", "growprune"}
    alpha_s, beta_s : float
        The prior of eq. (3.3).
    n_steps : int, default 1
    rng : numpy Generator, int seed or None

    Returns
    -------
    tree : BayesTree
        The new tree, canonical (breadth first).
    moves : ndarray of shape (n_steps, 3)
        Per step the move (``GROW`` ..), whether it was accepted and log of the acceptance
        ratio (``-inf`` for a move that proposed nothing new).

    Examples
    --------
    >>> X = np.arange(8.0).reshape(-1, 1); y = np.where(X[:, 0] < 4, -1.0, 1.0)
    >>> lik = LeafLikelihood.normal(0.01, 0.0, 1.0)
    >>> new, moves = mh_update(BayesTree.root_only(8), X, y, lik, n_steps=50, rng=0)
    >>> bool(new.n_leaves >= 2)
    True
    """
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler={sampler!r} is not one of {sorted(SAMPLERS)}")
    alpha_s, beta_s, X, S, out = tree_update_inputs(tree, X, y, likelihood, alpha_s, beta_s)
    t = out.record(X.shape[0], *partition_rows(out, X))
    data = data_record(X, S)
    model = model_record(alpha_s, beta_s, likelihood.code, likelihood.params)
    w = small_scratch(X.shape[1], S.shape[1])
    u = np.random.default_rng(rng).random((int(n_steps), UNIFORMS_PER_MOVE))
    log = np.empty((int(n_steps), 3))
    out.n_nodes = int(_mh_steps(t, out.n_nodes, data, model, SAMPLERS[sampler], u, w, log))
    return out, log


# ---------------------------------------------------------------------------------- kernels


class Rules(NamedTuple):
    """A change or swap proposal: the ``nodes`` (under ``top``) get the rules ``(feature,
    threshold)``; ``log_q`` is ``log q(T | T') - log q(T' | T)``."""

    top: int
    nodes: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    log_q: float


@njit(**JIT)
def relabel(t, n_nodes):  # pragma: no cover - numba
    """Renumber the tree of the :class:`~.records.Tree` ``t`` reachable from slot 0 breadth
    first, in place; return its n_nodes.

    A FIFO queue from the root: a node's children get the next two numbers when it is
    popped, which is the order the sequential generative process appends them in. Slots not
    reachable from the root (pruned children) are dropped. ``start``, ``count`` (a row
    partition of the tree) move with their nodes.
    """
    feature = t.feature
    threshold = t.threshold
    left = t.left
    right = t.right
    parent = t.parent
    depth = t.depth
    start = t.start
    count = t.count
    old_at = np.empty(n_nodes, INDEX)
    new_of = np.full(n_nodes, NO_NODE, INDEX)
    old_at[0] = 0
    new_of[0] = 0
    tail = 1
    for k in range(n_nodes):
        if k == tail:
            break
        o = old_at[k]
        if feature[o] != NO_NODE:
            for c in (left[o], right[o]):
                old_at[tail] = c
                new_of[c] = tail
                tail += 1
    f = feature[:n_nodes].copy()
    th = threshold[:n_nodes].copy()
    lc = left[:n_nodes].copy()
    rc = right[:n_nodes].copy()
    pa = parent[:n_nodes].copy()
    de = depth[:n_nodes].copy()
    st = start[:n_nodes].copy()
    co = count[:n_nodes].copy()
    for k in range(tail):
        o = old_at[k]
        feature[k] = f[o]
        threshold[k] = th[o]
        left[k] = new_of[lc[o]] if lc[o] != NO_NODE else NO_NODE
        right[k] = new_of[rc[o]] if rc[o] != NO_NODE else NO_NODE
        parent[k] = new_of[pa[o]] if pa[o] != NO_NODE else NO_NODE
        depth[k] = de[o]
        start[k] = st[o]
        count[k] = co[o]
    return tail


@njit(inline="always", **JIT)
def _acts_on(feature, left, right, j, kind):  # pragma: no cover - numba
    """Whether a move of ``kind`` can act on node ``j``: a leaf (grow), a NOG node (prune,
    both children leaves), an internal node (change), an internal non-root node (swap)."""
    if kind == GROW:
        return feature[j] == NO_NODE
    if kind == PRUNE:
        return (feature[j] != NO_NODE and feature[left[j]] == NO_NODE
                and feature[right[j]] == NO_NODE)
    return feature[j] != NO_NODE and (kind == CHANGE or j > 0)


@njit(**JIT)
def _count(feature, left, right, n_nodes, kind):  # pragma: no cover - numba
    """Nodes a move of ``kind`` can act on."""
    total = 0
    for j in range(n_nodes):
        total += _acts_on(feature, left, right, j, kind)
    return total


@njit(**JIT)
def _pick(feature, left, right, n_nodes, kind, u):  # pragma: no cover - numba
    """The ``floor(u n)``-th of the ``n`` nodes of ``kind`` (slot order)."""
    n = _count(feature, left, right, n_nodes, kind)
    k = min(int(u * n), n - 1)
    for j in range(n_nodes):
        if _acts_on(feature, left, right, j, kind):
            if k == 0:
                return j
            k -= 1
    return NO_NODE


@njit(inline="always", **JIT)
def _loglik(S, t, j, model, stat):  # pragma: no cover - numba
    segment_stats(S, t, j, stat)
    return leaf_loglik(model.code, model.params, stat)


@njit(**JIT)
def _split_gain(t, data, model, j, n_valid, width, w):  # pragma: no cover - numba
    """log pi(j split into its leaves) - log pi(j a leaf), eq. (4.8): the prior factors
    of eq. (3.4) that differ (j's, the children's) and the leaves' likelihoods.

    ``n_valid`` > 0 and ``width`` are j's |V_j| and the extent along its cut; a child's
    factor only needs whether its rows vary (:func:`~ebf.bayestrees._trees.node_varies`),
    and j's statistics are its children's sum, so the rows of j are read once.
    """
    a = model.alpha_s
    b = model.beta_s
    d = t.depth[j]
    lc = t.left[j]
    rc = t.right[j]
    lp = (split_log_prior(d, n_valid, width, a, b)
          - leaf_log_prior(d, True, a, b)
          + leaf_log_prior(d + 1, node_varies(data.X, t, lc), a, b)
          + leaf_log_prior(d + 1, node_varies(data.X, t, rc), a, b))
    stat = w.s_left
    total = np.zeros(stat.shape[0])
    ll = 0.0
    for k in (lc, rc):
        segment_stats(data.S, t, k, stat)
        ll += leaf_loglik(model.code, model.params, stat)
        total += stat
    return lp + ll - leaf_loglik(model.code, model.params, total)


@njit(**JIT)
def _subtree(parent, n_nodes, top, mask):  # pragma: no cover - numba
    """``mask[k]``: is slot k in the subtree of ``top`` (children come after parents)."""
    mask[:n_nodes] = False
    mask[top] = True
    for k in range(top + 1, n_nodes):
        mask[k] = mask[parent[k]]


@njit(**JIT)
def _subtree_terms(t, n_nodes, data, model, mask, w):  # pragma: no cover - numba
    """(log prior, log likelihood) of the subtree's nodes: eq. (3.4) and (4.8) restricted."""
    feature = t.feature
    lp = 0.0
    ll = 0.0
    for k in range(n_nodes):
        if not mask[k]:
            continue
        lp += node_log_prior(t, data.X, k, model, w)
        if lp == -np.inf:
            return lp, ll
        if feature[k] == NO_NODE:
            ll += _loglik(data.S, t, k, model, w.s_left)
    return lp, ll


@njit(**JIT)
def _rearrange(t, n_nodes, data, model, rules, u_accept, w):  # pragma: no cover - numba
    """Change or swap: give ``rules.nodes`` their new rules, re-partition the subtree of
    ``rules.top`` and accept or restore; returns (accepted, log alpha)."""
    top = rules.top
    nodes = rules.nodes
    mask = np.empty(n_nodes, np.bool_)
    _subtree(t.parent, n_nodes, top, mask)
    lp_old, ll_old = _subtree_terms(t, n_nodes, data, model, mask, w)
    s, n = t.start[top], t.count[top]
    saved_rows = t.order[s: s + n].copy()
    saved_start = t.start[:n_nodes].copy()
    saved_count = t.count[:n_nodes].copy()
    saved_feature = t.feature[nodes]
    saved_threshold = t.threshold[nodes]
    t.feature[nodes] = rules.feature
    t.threshold[nodes] = rules.threshold
    feature = t.feature
    for k in range(top, n_nodes):  # parents first: each split reads its node's new rows
        if mask[k] and feature[k] != NO_NODE:
            split_segment(data.X, t, k)
    lp_new, ll_new = _subtree_terms(t, n_nodes, data, model, mask, w)
    log_alpha = -np.inf
    if lp_new > -np.inf:
        log_alpha = ll_new - ll_old + lp_new - lp_old + rules.log_q
    if u_accept < math.exp(min(log_alpha, 0.0)):
        return True, log_alpha
    t.feature[nodes] = saved_feature
    t.threshold[nodes] = saved_threshold
    t.order[s: s + n] = saved_rows
    t.start[:n_nodes] = saved_start
    t.count[:n_nodes] = saved_count
    return False, log_alpha


@njit(**JIT)
def _make_leaf(t, j):  # pragma: no cover - numba
    t.feature[j] = NO_NODE
    t.threshold[j] = np.nan
    t.left[j] = NO_NODE
    t.right[j] = NO_NODE


@njit(**JIT)
def _mh_steps(t, n_nodes, data, model, move_p, u, w, log):  # pragma: no cover - numba
    """:func:`mh_step` with every row of ``u``, in one call (a call from Python unpacks
    the records, which costs more than a move); ``log[i]`` gets step i's move, acceptance
    and log alpha. Returns ``n_nodes``."""
    for i in range(u.shape[0]):
        n_nodes, move, accepted, log_alpha = mh_step(t, n_nodes, data, model, move_p, u[i], w)
        log[i, 0] = move
        log[i, 1] = accepted
        log[i, 2] = log_alpha
    return n_nodes


@njit(**JIT)
def mh_step(t, n_nodes, data, model, move_p, u, w):  # pragma: no cover - numba
    """One Metropolis-Hastings move of the canonical :class:`~.records.Tree` ``t`` (its row
    partition kept in step); returns ``(n_nodes, move, accepted, log alpha)``.

    ``data`` is the :class:`~.records.Data` (rows, per-row statistics), ``model`` the
    :class:`~.records.Model`, ``move_p`` the probabilities of (grow, prune, change, swap)
    and ``u`` the move's five uniforms (``UNIFORMS_PER_MOVE``), ``w`` an
    :class:`~.records.Extent` (:func:`~.records.small_scratch`). The node arrays need room
    for two more nodes.
    """
    X = data.X
    lower = w.lower
    upper = w.upper
    feature = t.feature
    threshold = t.threshold
    left = t.left
    right = t.right
    move = 0
    cum = move_p[0]
    while move < 3 and u[0] >= cum:
        move += 1
        cum += move_p[move]
    n_kind = _count(feature, left, right, n_nodes, move)
    if n_kind == 0:
        return n_nodes, move, False, -np.inf
    j = _pick(feature, left, right, n_nodes, move, u[1])
    if move == GROW:
        n_valid = node_extent(X, t, j, lower, upper)
        if n_valid == 0:
            return n_nodes, move, False, -np.inf
        f, thr = draw_split(n_valid, lower, upper, u[2], u[3])
        width = upper[f] - lower[f]
        log_q_fwd = math.log(move_p[GROW]) - math.log(n_kind) - math.log(n_valid) - math.log(
            width)
        n_new = split_node(t, n_nodes, X, j, f, thr)
        log_q_rev = math.log(move_p[PRUNE]) - math.log(_count(feature, left, right, n_new, PRUNE))
        log_alpha = _split_gain(t, data, model, j, n_valid, width, w) + log_q_rev - log_q_fwd
        if u[4] < math.exp(min(log_alpha, 0.0)):
            return relabel(t, n_new), move, True, log_alpha
        _make_leaf(t, j)
        return n_nodes, move, False, log_alpha
    if move == PRUNE:
        f = feature[j]
        n_valid = node_extent(X, t, j, lower, upper)
        width = upper[f] - lower[f]
        n_leaves = _count(feature, left, right, n_nodes, GROW)
        log_q_rev = (math.log(move_p[GROW]) - math.log(n_leaves - 1) - math.log(n_valid)
                     - math.log(width))
        log_q_fwd = math.log(move_p[PRUNE]) - math.log(n_kind)
        log_alpha = log_q_rev - log_q_fwd - _split_gain(t, data, model, j, n_valid, width, w)
        if u[4] < math.exp(min(log_alpha, 0.0)):
            _make_leaf(t, j)
            return relabel(t, n_nodes), move, True, log_alpha
        return n_nodes, move, False, log_alpha
    if move == CHANGE:
        n_valid = node_extent(X, t, j, lower, upper)
        f_old = feature[j]
        f, thr = draw_split(n_valid, lower, upper, u[2], u[3])
        # q(T'|T) = P_change / I(T) / |V_j| / |e_jf'|: only the extents differ backwards
        log_q = math.log(upper[f] - lower[f]) - math.log(upper[f_old] - lower[f_old])
        accepted, log_alpha = _rearrange(
            t, n_nodes, data, model,
            Rules(j, np.array([j]), np.array([f]), np.array([thr]), log_q), u[4], w)
        return n_nodes, move, accepted, log_alpha
    p = t.parent[j]
    sib = t.left[p] if t.right[p] == j else t.right[p]
    both = (feature[sib] != NO_NODE and feature[sib] == feature[j]
            and threshold[sib] == threshold[j])
    n_swap = 3 if both else 2
    rules = Rules(p, np.array([p, j, sib])[:n_swap],
                  np.array([feature[j], feature[p], feature[p]])[:n_swap],
                  np.array([threshold[j], threshold[p], threshold[p]])[:n_swap], 0.0)
    accepted, log_alpha = _rearrange(t, n_nodes, data, model, rules, u[4], w)
    return n_nodes, move, accepted, log_alpha
