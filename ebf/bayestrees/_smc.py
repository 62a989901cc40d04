"""Sequential Monte Carlo for Bayesian decision trees (thesis Sec. 3.3, Algorithm 3.1).

:func:`run_smc` runs ``n_islands`` independent particle systems of ``n_particles`` trees
each and returns their final weighted particles as :class:`~.particles.ParticleTrees`.

A particle system is one 2-D array per field, particle on axis 0: the six
tree arrays and the row segments (``start``, ``count``) of a capacity that doubles when a
stage could outgrow it (at most ``2N - 1``), the row permutation ``order`` (N), and per
particle ``n_nodes``, ``head`` (the eligible list E(t) is the slots ``head .. n_nodes - 1``:
children are appended in expansion order) and the unnormalised log weight.

One stage (Alg. 3.1 lines 7-12), one kernel call over all particles:

- node-wise expansion (C(t) a singleton, breadth first): slot ``head`` is expanded;
- layer-wise expansion (C(t) = E(t)): every slot ``head .. n_nodes - 1`` is expanded, and
  their children form the next layer;

each expansion by :func:`~.proposals.expand_node` (prior, empirical or optimal proposal),
which adds the log incremental weight of eq. (3.7). Weights start at ``l(Y | root)``
(Alg. 3.1 line 4). After a stage the weights are normalised; if the effective sample size
is below ``ess_threshold * C`` and some particle is still growing, ancestors are drawn
(multinomial or systematic) and every weight becomes their mean ``W / C`` (line 15). A
particle drawn at least once keeps its own slot, so only the extra copies move, and a stage
without resampling costs nothing but its expansions.

The log marginal likelihood estimate of an island is ``log(W / C)`` at the end: the log
mean of the unnormalised weights, which equals the sum over stages of the log of the
weighted mean incremental weight (the weights carry the running product, and resampling
preserves their mean). Islands are seeded by ``SeedSequence(entropy, spawn_key=(branch,
island))`` and run in ``n_jobs`` threads: the result does not depend on the thread count.
"""

from __future__ import annotations

import logging
import math
from numbers import Integral, Real
from typing import Any, NamedTuple

import numpy as np
from numba import njit

from basics.flat_tree import INDEX, NO_NODE
from basics.jit import JIT
from basics.seeds import resolve_entropy
from basics.threads import thread_map

from ._likelihood import LeafLikelihood, leaf_loglik, segment_stats
from ._particles import ParticleTrees
from ._prior import check_prior_params
from ._proposals import OPTIMAL, PROPOSAL_UNIFORMS, dense_ranks, expand_node, proposal_code
from ._records import Tree, data_record, model_record, scratch
from ._resampling import (
    MULTINOMIAL,
    effective_sample_size,
    normalize,
    resample,
    resampling_code,
)
from ._trees import check_X

__all__ = ["EXPANSIONS", "SMC_ALPHA_S", "SMC_BETA_S", "ParticleSet", "SMCOptions", "run_smc"]

logger = logging.getLogger(__name__)

#: The prior of the thesis' SMC experiments (Sec. 3.4.1): mean depth 5.1, 18.5 nodes.
SMC_ALPHA_S = 0.95
SMC_BETA_S = 0.5

#: Node-wise (one eligible node per stage, breadth first) or layer-wise (all of E(t)).
EXPANSIONS = ("node", "layer")

#: Node slots a particle starts with; doubled when a stage could outgrow them.
_INITIAL_CAPACITY = 63


class SMCOptions(NamedTuple):
    """Checked settings of :func:`run_smc` (see its parameters), the record :func:`_advance`
    takes: codes for the proposal and the resampling scheme, ``max_stages`` -1 for no
    limit."""

    n_particles: int
    proposal: int
    layer: bool
    ess_threshold: float
    resampling: int
    max_stages: int
    alpha_s: float
    beta_s: float

    @classmethod
    def checked(cls, n_particles: Any, proposal: str, expansion: str, ess_threshold: Any,
                resampling: str, max_stages: Any, alpha_s: Any, beta_s: Any) -> SMCOptions:
        """The options, or ``ValueError`` naming the bad one and the choices."""
        if not _is_int(n_particles) or n_particles < 1:
            raise ValueError(f"n_particles={n_particles!r} must be an integer >= 1")
        if expansion not in EXPANSIONS:
            raise ValueError(f"expansion={expansion!r} is not one of {list(EXPANSIONS)}")
        if not isinstance(ess_threshold, Real) or not 0.0 <= ess_threshold <= 1.0:
            raise ValueError(f"ess_threshold={ess_threshold!r} must be a number in [0, 1] (a "
                             "fraction of the particles; the thesis uses 0.1)")
        if max_stages is not None and (not _is_int(max_stages) or max_stages < 1):
            raise ValueError(f"max_stages={max_stages!r} must be None or an integer >= 1")
        a, b = check_prior_params(alpha_s, beta_s)
        return cls(int(n_particles), proposal_code(proposal), expansion == "layer",
                   float(ess_threshold), resampling_code(resampling),
                   -1 if max_stages is None else int(max_stages), a, b)


def _is_int(v: Any) -> bool:
    return isinstance(v, Integral) and not isinstance(v, bool)


def run_smc(X: np.ndarray, y: np.ndarray, likelihood: LeafLikelihood, *,
            n_particles: int = 100, n_islands: int = 1, proposal: str = "prior",
            expansion: str = "node", ess_threshold: float = 0.1,
            resampling: str = "multinomial", max_stages: int | None = None,
            alpha_s: float = SMC_ALPHA_S, beta_s: float = SMC_BETA_S,
            random_state: Any = None, branch: int = 0, n_jobs: int | None = None
            ) -> ParticleTrees:
    """Approximate p(T | Y, X) by SMC (Algorithm 3.1) in independent islands.

    Parameters
    ----------
    X : ndarray of shape (n_rows, n_features)
        Finite inputs.
    y : ndarray of shape (n_rows,)
        Labels in the form ``likelihood.row_stats`` takes (class codes, or real targets).
    likelihood : LeafLikelihood
        The leaf likelihood of eq. (3.1): Dirichlet-multinomial (eq. 3.2), Normal (eq. 4.9)
        or uninformative (the posterior is the prior).
    n_particles : int, default=100
        Particles C per island.
    n_islands : int, default=1
        Independent particle systems (Sec. 3.4.1.3).
    proposal : {"prior", "empirical", "optimal"}, default="prior"
        The proposal kernel Q(t) (Sec. 3.3, 3.3.1; :mod:`.proposals`).
    expansion : {"node", "layer"}, default="node"
        Node-wise breadth-first expansion (one node per stage) or layer-wise (C(t) = E(t)).
    ess_threshold : float, default=0.1
        Resample when the effective sample size falls below ``ess_threshold * C`` (the
        thesis uses C / 10, Sec. 3.4.1); 0 never resamples, 1 resamples at every stage.
    resampling : {"multinomial", "systematic"}, default="multinomial"
    max_stages : int or None, default=None
        Stop after this many stages, leaving the leaves still eligible as leaves (the
        truncated target of Sec. 3.3); None runs until every eligible list is empty (at
        most ``2 N - 1`` stages node-wise).
    alpha_s, beta_s : float, default=(0.95, 0.5)
        The prior eq. (3.3), as in the thesis' experiments (Sec. 3.4.1).
    random_state : int, RandomState, Generator or None
        Island ``i`` uses ``SeedSequence(entropy, spawn_key=(branch, i))``.
    branch : int, default=0
        The branch of an ensemble this fit is (part of every island's seed).
    n_jobs : int or None, default=None
        Threads over islands.

    Returns
    -------
    ParticleTrees
        The final trees of every island (identical particles merged), their weights
        normalised per island, and every island's log marginal likelihood estimate.

    Examples
    --------
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]]); y = np.array([0, 0, 1, 1])
    >>> lik = LeafLikelihood.dirichlet_multinomial(1.0, 2)
    >>> trees = run_smc(X, y, lik, n_particles=50, n_islands=2, random_state=0)
    >>> trees.n_islands, bool(np.isfinite(trees.log_evidence).all())
    (2, True)
    """
    opts = SMCOptions.checked(n_particles, proposal, expansion, ess_threshold, resampling,
                              max_stages, alpha_s, beta_s)
    if not _is_int(n_islands) or n_islands < 1:
        raise ValueError(f"n_islands={n_islands!r} must be an integer >= 1")
    X = check_X(X)
    S = likelihood.row_stats(y)
    if S.shape[0] != X.shape[0]:
        raise ValueError(f"y has {S.shape[0]} rows but X has {X.shape[0]}; pass one label "
                         "per row")
    entropy = resolve_entropy(random_state)
    seeds = [np.random.SeedSequence(entropy, spawn_key=(int(branch), i))
             for i in range(int(n_islands))]

    ranks = dense_ranks(X) if opts.proposal == OPTIMAL else None

    def island(seed: np.random.SeedSequence) -> dict:
        return _run_island(X, S, likelihood, opts, seed, ranks)

    return _concatenate(thread_map(island, seeds, n_jobs))


# --------------------------------------------------------------------------- one island

#: Status of :func:`_advance`: finished, needs more node slots, needs more uniforms.
_DONE, _GROW, _REFILL = 0, 1, 2

#: Uniforms drawn per refill of an island's stream (at least what the next stage needs).
_UNIFORM_BLOCK = 1 << 14


class ParticleSet(NamedTuple):
    """One particle system (module docstring), the record :func:`_advance` takes.

    ``feature .. depth``, ``start``, ``count`` are (particles, capacity); ``order`` is
    (particles, rows); ``n_nodes``, ``head`` and the unnormalised ``log_w`` are per
    particle, ``w`` (normalised weights) and ``anc`` (ancestors) scratch of one slot per
    particle, ``buf`` partition scratch of one slot per row.
    """

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    parent: np.ndarray
    depth: np.ndarray
    start: np.ndarray
    count: np.ndarray
    order: np.ndarray
    n_nodes: np.ndarray
    head: np.ndarray
    log_w: np.ndarray
    w: np.ndarray
    anc: np.ndarray
    buf: np.ndarray

    #: The node-slot fields (grown together).
    SLOTS = ("feature", "threshold", "left", "right", "parent", "depth", "start", "count")

    @classmethod
    def root_only(cls, n_particles: int, n_rows: int, capacity: int,
                  log_w0: float) -> ParticleSet:
        """Every particle the root alone, holding every row, of log weight ``log_w0``."""
        arrays = {name: np.zeros((n_particles, capacity),
                                 np.float64 if name == "threshold" else INDEX)
                  for name in cls.SLOTS}
        arrays["feature"][:, 0] = NO_NODE  # the root, a leaf; children are set by split_node
        arrays["threshold"][:, 0] = np.nan
        for name in ("left", "right", "parent"):
            arrays[name][:, 0] = NO_NODE
        arrays["count"][:, 0] = n_rows
        return cls(**arrays, order=np.tile(np.arange(n_rows, dtype=INDEX), (n_particles, 1)),
                   n_nodes=np.ones(n_particles, INDEX), head=np.zeros(n_particles, INDEX),
                   log_w=np.full(n_particles, log_w0), w=np.empty(n_particles),
                   anc=np.empty(n_particles, INDEX), buf=np.empty(max(n_rows, 1), INDEX))

    @property
    def capacity(self) -> int:
        return self.feature.shape[1]

    def grown(self, capacity: int) -> ParticleSet:
        """The same particles with room for ``capacity`` nodes each (live slots kept)."""
        new = {}
        for name in self.SLOTS:
            old = getattr(self, name)
            new[name] = np.empty((old.shape[0], capacity), old.dtype)
            new[name][:, : old.shape[1]] = old
        return self._replace(**new)


def _run_island(X: np.ndarray, S: np.ndarray, likelihood: LeafLikelihood, opts: SMCOptions,
                seed: np.random.SeedSequence, ranks: np.ndarray | None) -> dict:
    """Algorithm 3.1 for one island: its distinct final particles, weights, log evidence.

    The stages run in :func:`_advance`, which returns here only to grow the node arrays or
    to take more uniforms from the island's generator (consumed in a fixed order, so the
    result is a function of the seed alone).
    """
    rng = np.random.default_rng(seed)
    c, n = opts.n_particles, X.shape[0]
    max_capacity = 2 * n - 1
    code, params = likelihood.code, likelihood.params
    p = ParticleSet.root_only(c, n, min(max_capacity, _INITIAL_CAPACITY),
                              leaf_loglik(code, params, S.sum(axis=0)))  # Alg. 3.1 line 4
    data = data_record(X, S, ranks)
    model = model_record(opts.alpha_s, opts.beta_s, code, params)
    work = scratch(n, X.shape[1], S.shape[1])
    counters = np.zeros(3, INDEX)  # stages, resampling steps, stream position
    stream = rng.random(_UNIFORM_BLOCK)
    while True:
        status, need = _advance(opts, p, data, model, stream, counters, work)
        if status == _DONE:
            break
        if status == _GROW:
            p = p.grown(min(max_capacity, max(int(need), 2 * p.capacity)))
        else:
            stream = np.concatenate([stream[counters[2]:],
                                     rng.random(max(int(need), _UNIFORM_BLOCK))])
            counters[2] = 0
    log_evidence = normalize(p.log_w, p.w) - math.log(c)
    logger.debug("SMC island: %d stages, %d resampling steps, log evidence %.6g", counters[0],
                 counters[1], log_evidence)
    return {**_distinct_particles(p, S), "log_evidence": log_evidence,
            "n_stages": int(counters[0]), "n_resampled": int(counters[1])}


def _distinct_particles(p: ParticleSet, S: np.ndarray) -> dict:
    """The live nodes of the distinct particles back to back (children as indices into
    them), the statistics of every node, and each one's weight summed over its copies."""
    first = _first_copies(p.feature, p.threshold.view(INDEX), p.n_nodes)
    keep = np.flatnonzero(first == np.arange(first.shape[0]))
    weight = np.zeros(first.shape[0])
    np.add.at(weight, first, p.w)
    sizes = p.n_nodes[keep]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(INDEX)
    live = np.arange(p.capacity)[None, :] < sizes[:, None]
    shift = np.broadcast_to(offsets[:-1, None], live.shape)[live]
    out = {name: getattr(p, name)[keep][live] for name in ("feature", "threshold", "left",
                                                            "right")}
    for name in ("left", "right"):
        out[name] = np.where(out[name] == NO_NODE, NO_NODE, out[name] + shift)
    stats = np.empty((int(offsets[-1]), S.shape[1]))
    _node_stats(S, p, keep, offsets, stats)
    return {**out, "stats": stats, "offsets": offsets, "weight": weight[keep]}


def _concatenate(islands: list[dict]) -> ParticleTrees:
    """One flat forest of every island's trees, children as global indices."""
    node_base = np.cumsum([0] + [int(isl["offsets"][-1]) for isl in islands])
    tree_base = np.cumsum([0] + [isl["weight"].shape[0] for isl in islands])

    def cat(name: str) -> np.ndarray:
        return np.concatenate([isl[name] for isl in islands])

    def shifted(name: str) -> np.ndarray:
        return np.concatenate([np.where(isl[name] == NO_NODE, NO_NODE, isl[name] + base)
                               for isl, base in zip(islands, node_base, strict=False)])

    offsets = np.concatenate([isl["offsets"][:-1] + base
                              for isl, base in zip(islands, node_base, strict=False)])
    return ParticleTrees(
        feature=cat("feature"), threshold=cat("threshold"), left=shifted("left"),
        right=shifted("right"), stats=cat("stats"),
        offsets=np.append(offsets, node_base[-1]).astype(INDEX), weight=cat("weight"),
        islands=tree_base.astype(INDEX),
        log_evidence=np.array([isl["log_evidence"] for isl in islands]),
        n_stages=np.array([isl["n_stages"] for isl in islands], INDEX),
        n_resampled=np.array([isl["n_resampled"] for isl in islands], INDEX),
    )


# ---------------------------------------------------------------------------------- kernels


@njit(**JIT)
def _particle(p, c):  # pragma: no cover - numba
    """Particle ``c`` of the set ``p`` as a :class:`~.records.Tree` (views, no copy)."""
    return Tree(p.feature[c], p.threshold[c], p.left[c], p.right[c], p.parent[c], p.depth[c],
                p.order[c], p.start[c], p.count[c], p.buf)


@njit(**JIT)
def _advance(opts, p, data, model, stream, counters, work):  # pragma: no cover - numba
    """Run stages of Algorithm 3.1 on the :class:`ParticleSet` ``p`` until done, or until
    the next one needs more node slots (``(_GROW, slots)``) or more uniforms than
    ``stream`` has left (``(_REFILL, count)``).

    ``counters`` = (stages run, resampling steps, position in ``stream``); a node consumes
    ``PROPOSAL_UNIFORMS`` uniforms, a resampling step ``C`` (multinomial) or 1 (systematic).
    """
    n_nodes = p.n_nodes
    head = p.head
    log_w = p.log_w
    w = p.w
    layer = opts.layer
    scheme = opts.resampling
    max_stages = opts.max_stages
    n_part = n_nodes.shape[0]
    while max_stages < 0 or counters[0] < max_stages:
        need_u = 0
        need_slots = 0
        for c in range(n_part):
            width = n_nodes[c] - head[c]
            if not layer:
                width = min(width, 1)
            need_u += width * PROPOSAL_UNIFORMS
            need_slots = max(need_slots, n_nodes[c] + 2 * width)
        if need_u == 0:
            break
        need_u += n_part if scheme == MULTINOMIAL else 1
        # a tree over N rows never has more than 2N - 1 nodes, whatever the bound above
        need_slots = min(need_slots, 2 * data.X.shape[0] - 1)
        if need_slots > p.feature.shape[1]:
            return _GROW, need_slots
        if counters[2] + need_u > stream.shape[0]:
            return _REFILL, need_u
        for c in range(n_part):  # lines 7-10: expand, update the weights
            end = n_nodes[c] if layer else min(head[c] + 1, n_nodes[c])
            n = n_nodes[c]
            t = _particle(p, c)
            for j in range(head[c], end):
                u = stream[counters[2]: counters[2] + PROPOSAL_UNIFORMS]
                counters[2] += PROPOSAL_UNIFORMS
                n, log_inc = expand_node(opts.proposal, t, n, data, j, model, u, work)
                log_w[c] += log_inc
            n_nodes[c] = n
            head[c] = end
        counters[0] += 1
        log_total = normalize(log_w, w)  # lines 11-12
        growing = False
        for c in range(n_part):
            growing = growing or n_nodes[c] > head[c]
        if growing and effective_sample_size(w) < opts.ess_threshold * n_part:  # 13-15
            m = n_part if scheme == MULTINOMIAL else 1
            resample(w, stream[counters[2]: counters[2] + m], scheme, p.anc)
            counters[2] += m
            _copy_ancestors(p.anc, p)
            log_w[:] = log_total - math.log(n_part)
            counters[1] += 1
    return _DONE, 0


@njit(**JIT)
def _copy_row(a, src, dst, n):  # pragma: no cover - numba
    for j in range(n):
        a[dst, j] = a[src, j]


@njit(**JIT)
def _copy_ancestors(anc, p):  # pragma: no cover - numba
    """Make the particles of ``p`` copies of their ancestors ``anc`` (Alg. 3.1 line 15), in
    place.

    Particles are exchangeable, so a particle drawn ``k >= 1`` times keeps its slot and its
    ``k - 1`` extra copies go to the slots of particles drawn zero times; a donor is never
    overwritten. Only the live slots are copied. Returns the number of copies made.
    """
    n_part = anc.shape[0]
    copies = np.zeros(n_part, INDEX)
    for a in anc:
        copies[a] += 1
    free = 0
    made = 0
    for src in range(n_part):
        for _ in range(copies[src] - 1):
            while copies[free] != 0:
                free += 1
            n = p.n_nodes[src]
            for arr in (p.feature, p.left, p.right, p.parent, p.depth, p.start, p.count):
                _copy_row(arr, src, free, n)
            _copy_row(p.threshold, src, free, n)
            _copy_row(p.order, src, free, p.order.shape[1])
            p.n_nodes[free] = n
            p.head[free] = p.head[src]
            copies[free] = 1  # taken: a copy gives no further copies
            made += 1
    return made


@njit(**JIT)
def _first_copies(feature, threshold_bits, n_nodes):  # pragma: no cover - numba
    """``first[c]``: the first particle whose tree is identical to particle ``c``'s.

    Trees are compared by their live ``feature`` and ``threshold`` slots (bit patterns;
    the child links follow from them, children being appended in expansion order), after
    bucketing by a hash of them.
    """
    n_part = n_nodes.shape[0]
    key = np.empty(n_part, np.uint64)
    for c in range(n_part):
        h = np.uint64(1469598103934665603)
        for j in range(n_nodes[c]):
            h = (h ^ np.uint64(feature[c, j] + 1)) * np.uint64(1099511628211)
            if feature[c, j] != NO_NODE:
                h = (h ^ np.uint64(threshold_bits[c, j])) * np.uint64(1099511628211)
        key[c] = h
    by_key = np.argsort(key, kind="mergesort")  # stable: the first copy comes first
    first = np.arange(n_part)
    for a in range(n_part):
        c = by_key[a]
        b = a - 1
        while b >= 0 and key[by_key[b]] == key[c]:
            r = by_key[b]
            if first[r] == r and _same_tree(feature, threshold_bits, n_nodes, r, c):
                first[c] = r
                break
            b -= 1
    return first


@njit(**JIT)
def _same_tree(feature, threshold_bits, n_nodes, r, c):  # pragma: no cover - numba
    if n_nodes[r] != n_nodes[c]:
        return False
    for j in range(n_nodes[c]):
        if feature[r, j] != feature[c, j]:
            return False
        if feature[c, j] != NO_NODE and threshold_bits[r, j] != threshold_bits[c, j]:
            return False
    return True


@njit(**JIT)
def _node_stats(S, p, keep, offsets, out):  # pragma: no cover - numba
    """Summed per-row statistics of every live node of the particles ``keep`` of ``p``,
    into the rows ``offsets[i] ..`` of ``out``."""
    for i in range(keep.shape[0]):
        t = _particle(p, keep[i])
        for j in range(offsets[i + 1] - offsets[i]):
            segment_stats(S, t, j, out[offsets[i] + j])
