"""Conditional SMC for one BART tree: the particle Gibbs kernel of PG-BART (thesis Alg. 4.2).

``C`` particles grow trees from the root by the prior's sequential generative process
(Sec. 3.2.3, node-wise, breadth first: :func:`~ebf.bayestrees._prior.expand_prior`);
particle 0 is clamped to the old tree T*: at every stage it replays the old tree's next
slot (a tree grown breadth first stores its slots in expansion order, so slot ``head`` of
T* is the node particle 0 expands next, and the children it appends get T*'s own slot
numbers). With the prior as proposal a particle's weight is multiplied by the likelihood
ratio of eq. (4.10) when it splits a node and left alone when it stops one. After every
stage but the last, particles 1 .. C-1 are resampled multinomially from all C
(Alg. 4.2 line 16; with ``ess_threshold < 1`` only at the stages where the weights' effective
sample size has fallen to ``ess_threshold * C`` or below, the weights carrying over
otherwise: adaptive resampling, which the authors' code offers as ``--ess_threshold``; the
decision is a symmetric function of the particle system, so pi stays invariant, as the
enumerated-posterior tests check); when no particle has an eligible node left the new tree
is drawn from the final weighted particles (particle 0 included). This leaves the
conditional posterior pi(T) of eq. (4.8) invariant (Andrieu, Doucet & Holenstein 2010),
whatever C >= 1.

Rows of the particles' nodes live in one shared pool of row indices: a node owns the
segment ``pool[start:start + count]``. Resampled copies share segments, so a node is copied
to fresh pool space as it is split (copy on split: the copy, the partition and the
children's sums are one pass, :func:`~._trees.split_copy_sums`), and resampling copies only
the O(nodes) particle arrays, never rows. A stage's work is O(rows of the split nodes): a
stopped node costs nothing (its stop is decided from its first uniform before its extent is
computed), a split reads which dimensions vary (O(D) for most nodes) and the extent of the
chosen one (:func:`~._prior.prior_cut`), and the root's extent is the data's, computed once
by the caller.

Random numbers come from numba's generator, seeded by the caller: per stage three
uniforms for each free particle that has an eligible node (in particle order), then
``C - 1`` for resampling (none at a stage that does not resample), or one for the final
draw. ``tests/naive/`` (``naive_conditional_smc``) replays the same stream with NumPy.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from basics.flat_tree import INDEX, NO_NODE
from basics.jit import JIT

from ._likelihood import LeafLikelihood, leaf_loglik, segment_stats
from ._prior import (
    DEFAULT_ALPHA_S,
    DEFAULT_BETA_S,
    UNIFORMS_PER_NODE,
    prior_cut,
    split_probability,
)
from ._records import Tree, data_record, model_record, small_scratch
from ._resampling import MULTINOMIAL, effective_sample_size, normalize, resample
from ._trees import BayesTree, link_children, split_copy_sums
from .mcmc import tree_update_inputs

__all__ = ["DEFAULT_ESS_THRESHOLD", "DEFAULT_PARTICLES", "PGWork", "check_ess_threshold",
           "conditional_smc", "csmc", "pg_workspace"]

#: Particles per conditional SMC (thesis Sec. 4.4: C = 10 trades mixing against cost).
DEFAULT_PARTICLES = 10

#: Resample when ESS <= ess_threshold * C; 1.0 is the thesis' resampling at every stage.
DEFAULT_ESS_THRESHOLD = 1.0

# Fields of the particle arrays: integers (feature, children, parent, depth, row segment)
# and floats (threshold, the leaf log-likelihood of the node's rows).
FEAT, LEFT, RIGHT, PAR, DEP, START, COUNT = range(7)
N_INT_FIELDS = 7
THR, LOGLIK = range(2)
N_FLOAT_FIELDS = 2

#: Pool of row indices, in units of ``(C + 1) n_rows`` (the root and one copy of it per
#: particle): every level of splits copies up to ``C n_rows`` rows, so 3 units hold about
#: three levels before the pool is compacted (measured: a compaction in every call with 1
#: unit made the conditional SMC at 10k rows ~25% slower).
POOL_ROWS = 3

#: Initial node slots per particle; doubled when a particle needs more.
_MIN_CAPACITY = 16


class PGWork(NamedTuple):
    """The scratch of :func:`csmc`, reused across calls and grown on demand.

    ``P_int``, ``P_float``: the particle arrays (axis 0 the particle, axis 1 the field,
    axis 2 the slot); ``Q_int``, ``Q_float`` their resampling double buffer; ``pool`` the
    row indices (``POOL_ROWS (C + 1) n_rows``); ``buf`` the partition scratch of
    ``split_copy_sums``; ``lower``, ``upper`` the extent of the rows (the root's, the same for
    every call on the same rows).
    """

    P_int: np.ndarray
    P_float: np.ndarray
    Q_int: np.ndarray
    Q_float: np.ndarray
    pool: np.ndarray
    buf: np.ndarray
    lower: np.ndarray
    upper: np.ndarray


def pg_workspace(X: np.ndarray, n_particles: int, capacity: int = _MIN_CAPACITY) -> PGWork:
    """:class:`PGWork` of :func:`csmc` on the rows ``X`` with ``n_particles`` particles."""
    c, cap = int(n_particles), max(int(capacity), _MIN_CAPACITY)
    n = max(int(X.shape[0]), 1)
    return PGWork(np.zeros((c, N_INT_FIELDS, cap), INDEX), np.zeros((c, N_FLOAT_FIELDS, cap)),
                  np.zeros((c, N_INT_FIELDS, cap), INDEX), np.zeros((c, N_FLOAT_FIELDS, cap)),
                  np.empty(POOL_ROWS * (c + 1) * n, INDEX), np.empty(n, INDEX),
                  X.min(axis=0), X.max(axis=0))


def conditional_smc(tree: BayesTree, X: np.ndarray, y: np.ndarray, likelihood: LeafLikelihood,
                    n_particles: int = DEFAULT_PARTICLES, alpha_s: float = DEFAULT_ALPHA_S,
                    beta_s: float = DEFAULT_BETA_S,
                    rng: np.random.Generator | int | None = None,
                    ess_threshold: float = DEFAULT_ESS_THRESHOLD) -> BayesTree:
    """One particle Gibbs update T* -> T of a single tree given its labels (Alg. 4.2).

    Parameters
    ----------
    tree : BayesTree
        The old tree T*, a tree the prior can make on ``X`` (``log_prior > -inf``); it is
        relabelled breadth first if it is not (:func:`~ebf.bayestrees.mcmc.canonical`).
    X : ndarray of shape (n_rows, n_features)
    y : ndarray of shape (n_rows,)
        The labels the tree explains: the residual R_m of eq. (4.7) in BART.
    likelihood : LeafLikelihood
        The leaf likelihood; BART's is ``LeafLikelihood.normal(sigma2, 0, sigma_mu2)``
        (eq. 4.9).
    n_particles : int, default 10
        C; C = 1 returns T* unchanged.
    alpha_s, beta_s : float
        The prior of eq. (3.3).
    rng : numpy Generator, int seed or None
    ess_threshold : float in (0, 1], default 1.0
        Resample at a stage only when the effective sample size of the weights is at most
        ``ess_threshold * C``; 1.0 resamples at every stage, as Alg. 4.2 does. Lower values
        resample less often, so fewer free particles are lost to copies of the clamped one
        (path degeneracy) and the kernel moves further from T*.

    Returns
    -------
    BayesTree
        The new tree, its slots in breadth-first expansion order.

    Examples
    --------
    >>> X = np.arange(8.0).reshape(-1, 1); y = np.where(X[:, 0] < 4, -1.0, 1.0)
    >>> lik = LeafLikelihood.normal(0.01, 0.0, 1.0)
    >>> new = conditional_smc(BayesTree.root_only(8), X, y, lik, rng=0)
    >>> bool(new.n_leaves >= 2)
    True
    """
    if isinstance(n_particles, bool) or int(n_particles) != n_particles or n_particles < 1:
        raise ValueError(f"n_particles={n_particles!r} must be an integer >= 1 (the thesis "
                         f"uses {DEFAULT_PARTICLES})")
    check_ess_threshold(ess_threshold)
    alpha_s, beta_s, X, S, old = tree_update_inputs(tree, X, y, likelihood, alpha_s, beta_s)
    rng = np.random.default_rng(rng)
    ws = pg_workspace(X, int(n_particles), 2 * old.n_nodes)
    k, n_new, ws = csmc(data_record(X, S),
                        model_record(alpha_s, beta_s, likelihood.code, likelihood.params),
                        old.splits(), int(rng.integers(2**32)), ws, float(ess_threshold))
    P_int, P_float = ws.P_int, ws.P_float
    out = BayesTree.root_only(X.shape[0])
    n = int(n_new)
    for name, field in (("feature", FEAT), ("left", LEFT), ("right", RIGHT), ("parent", PAR),
                        ("depth", DEP)):
        getattr(out, name)[:n] = P_int[k, field, :n]
    out.threshold[:n] = P_float[k, THR, :n]
    out.n_nodes = n
    return out


def check_ess_threshold(ess_threshold: float) -> None:
    """``ValueError`` unless ``0 < ess_threshold <= 1`` (a real number, not a bool)."""
    if isinstance(ess_threshold, bool) or not isinstance(ess_threshold, int | float | np.number) \
            or not 0.0 < float(ess_threshold) <= 1.0:
        raise ValueError(f"ess_threshold={ess_threshold!r} must be a number in (0, 1] (1.0 "
                         "resamples at every stage, as the thesis does)")


# ---------------------------------------------------------------------------------- kernels


@njit(**JIT)
def grow_slots(A, cap):  # pragma: no cover - numba
    """``A`` (any leading axes, node slots last) with room for ``cap`` slots, zero-filled."""
    out = np.zeros((A.shape[0], A.shape[1], cap), A.dtype)
    out[:, :, : A.shape[2]] = A
    return out


@njit(**JIT)
def _compact(pool, top, P_int, n_nodes, need):  # pragma: no cover - numba
    """A new pool holding only the live segments (leaves and eligible nodes), each once.

    Resampled copies of a particle share segments (same start, same rows), so a segment is
    moved once and every particle's start is redirected to its new place. Returns the pool
    (room for ``need`` more rows) and its new top.
    """
    moved = np.full(top, -1, INDEX)
    live = 0
    for c in range(P_int.shape[0]):
        for k in range(n_nodes[c]):
            if P_int[c, FEAT, k] == NO_NODE and moved[P_int[c, START, k]] < 0:
                moved[P_int[c, START, k]] = 0
                live += P_int[c, COUNT, k]
    moved[:] = -1
    out = np.empty(max(pool.shape[0], live + need), INDEX)
    new_top = 0
    for c in range(P_int.shape[0]):
        for k in range(n_nodes[c]):
            if P_int[c, FEAT, k] != NO_NODE:
                continue
            s = P_int[c, START, k]
            if moved[s] < 0:
                n = P_int[c, COUNT, k]
                out[new_top: new_top + n] = pool[s: s + n]
                moved[s] = new_top
                new_top += n
            P_int[c, START, k] = moved[s]
    return out, new_top


@njit(**JIT)
def particle_tree(P_int, P_float, c, pool, buf):  # pragma: no cover - numba
    """Particle ``c`` of the particle arrays as a :class:`~.records.Tree` over the row
    ``pool`` (views, no copy)."""
    return Tree(P_int[c, FEAT], P_float[c, THR], P_int[c, LEFT], P_int[c, RIGHT],
                P_int[c, PAR], P_int[c, DEP], pool, P_int[c, START], P_int[c, COUNT], buf)


@njit(inline="always", **JIT)
def _node_loglik(S, t, j, model, stat):  # pragma: no cover - numba
    segment_stats(S, t, j, stat)
    return leaf_loglik(model.code, model.params, stat)


@njit(**JIT)
def csmc(data, model, old, seed, ws, ess_threshold):  # pragma: no cover - numba
    """Algorithm 4.2 on the :class:`~.records.Data` ``data`` (rows and the per-row
    statistics of the residual) under the :class:`~.records.Model` ``model``; seeds numba's
    generator with ``seed`` unless it is negative (the caller's stream continues).

    ``old`` holds T*'s ``feature`` and ``threshold`` slots in breadth-first order (a valid
    tree on the rows; any record with those fields); ``ws`` is a :class:`PGWork` on the
    same rows (its first axis is C); ``ess_threshold`` in (0, 1] as in
    :func:`conditional_smc` (1.0: resample at every stage). Returns ``(k, n_nodes_k, ws)``:
    the drawn particle ``k`` of the particle arrays ``ws.P_int``, ``ws.P_float``, whose leaf
    segments in ``ws.pool`` are the new tree's rows, and the (possibly grown) workspace to
    pass to the next call.
    """
    if seed >= 0:
        np.random.seed(seed)
    X = data.X
    S = data.S
    old_feature = old.feature
    old_threshold = old.threshold
    P_int, P_float, Q_int, Q_float, pool, buf, root_lower, root_upper = ws
    C = P_int.shape[0]
    N = X.shape[0]
    cap = P_int.shape[2]
    alpha_s = model.alpha_s
    beta_s = model.beta_s
    w = small_scratch(X.shape[1], S.shape[1])
    stat = w.s_left
    stat_r = w.s_right
    u = np.empty(UNIFORMS_PER_NODE)
    n_nodes = np.ones(C, INDEX)
    head = np.zeros(C, INDEX)
    n_q = np.empty(C, INDEX)
    head_q = np.empty(C, INDEX)
    log_w = np.zeros(C)  # w(0) = p(R | root) for every particle: a common factor
    wt = np.empty(C)
    anc = np.zeros(C, INDEX)
    u_res = np.empty(max(C - 1, 1))
    if pool.shape[0] < 2 * N:
        pool = np.empty(2 * N, INDEX)
    for i in range(N):
        pool[i] = i
    top = N
    for c in range(C):
        P_int[c, FEAT, 0] = NO_NODE
        P_int[c, LEFT, 0] = NO_NODE
        P_int[c, RIGHT, 0] = NO_NODE
        P_int[c, PAR, 0] = NO_NODE
        P_int[c, DEP, 0] = 0
        P_int[c, START, 0] = 0
        P_int[c, COUNT, 0] = N
        P_float[c, THR, 0] = np.nan
    root_ll = _node_loglik(S, particle_tree(P_int, P_float, 0, pool, buf), 0, model, stat)
    root_valid = 0
    for d in range(X.shape[1]):
        root_valid += root_lower[d] < root_upper[d]
    for c in range(C):
        P_float[c, LOGLIK, 0] = root_ll
    while True:
        # room for this stage: two slots per particle, the rows of every eligible node
        need = 0
        most = 0
        for c in range(C):
            most = max(most, n_nodes[c] + 2)
            if head[c] < n_nodes[c]:
                need += P_int[c, COUNT, head[c]]
        if most > cap:
            cap = max(2 * cap, most)
            P_int = grow_slots(P_int, cap)
            P_float = grow_slots(P_float, cap)
            Q_int = grow_slots(Q_int, cap)
            Q_float = grow_slots(Q_float, cap)
        if top + need > pool.shape[0]:
            pool, top = _compact(pool, top, P_int, n_nodes, need)
        for c in range(C):
            j = head[c]
            if j == n_nodes[c]:
                continue  # E(t-1) empty: T(t) = T(t-1), weight unchanged
            head[c] = j + 1
            t = particle_tree(P_int, P_float, c, pool, buf)
            if c == 0:
                f = old_feature[j]
                thr = old_threshold[j]
            else:
                for i in range(UNIFORMS_PER_NODE):
                    u[i] = np.random.random()
                if u[0] >= split_probability(P_int[c, DEP, j], alpha_s, beta_s):
                    continue  # the prior stops it: no extent needed
                if j == 0:  # the root's extent is the data's: computed once, above
                    w.lower[:] = root_lower
                    w.upper[:] = root_upper
                f, thr = prior_cut(X, t, j, u, root_valid if j == 0 else -1, w)
            if f == NO_NODE:
                continue  # a leaf of T*, or no dimension varies: the node stops
            # copy on split (the segment may be shared), partitioned and summed in one pass
            s = t.start[j]
            n_new = link_children(t, n_nodes[c], j, f, thr)
            t.start[j] = top
            split_copy_sums(X, S, t, j, s, stat, stat_r)
            top += t.count[j]
            n_nodes[c] = n_new
            ll_l = leaf_loglik(model.code, model.params, stat)
            ll_r = leaf_loglik(model.code, model.params, stat_r)
            P_float[c, LOGLIK, n_new - 2] = ll_l
            P_float[c, LOGLIK, n_new - 1] = ll_r
            log_w[c] += ll_l + ll_r - P_float[c, LOGLIK, j]  # eq. (4.10)
        normalize(log_w, wt)
        more = False
        for c in range(C):
            if head[c] < n_nodes[c]:
                more = True
        if not more:
            u_res[0] = np.random.random()
            resample(wt, u_res[:1], MULTINOMIAL, anc[:1])
            k = anc[0]
            return k, n_nodes[k], PGWork(P_int, P_float, Q_int, Q_float, pool, buf, root_lower,
                                         root_upper)
        # (1.0 never skips: 1 / sum(w^2) of equal weights can round above C)
        if ess_threshold < 1.0 and effective_sample_size(wt) > ess_threshold * C:
            continue  # the weights carry over to the next stage
        for i in range(C - 1):
            u_res[i] = np.random.random()
        anc[0] = 0  # the clamped particle keeps its own history
        if C > 1:
            resample(wt, u_res[: C - 1], MULTINOMIAL, anc[1:])
        for c in range(C):
            a = anc[c]
            n = n_nodes[a]
            Q_int[c, :, :n] = P_int[a, :, :n]
            Q_float[c, :, :n] = P_float[a, :, :n]
            n_q[c] = n
            head_q[c] = head[a]
        P_int, Q_int = Q_int, P_int
        P_float, Q_float = Q_float, P_float
        n_nodes[:] = n_q
        head[:] = head_q
        log_w[:] = 0.0  # W(t) / C each: only ratios matter
