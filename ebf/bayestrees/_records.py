"""The records the Bayesian-tree kernels take: typed tuples of arrays and scalars.

numba compiles a ``typing.NamedTuple`` natively (fields by name, no boxing), and a tuple of
arrays pickles, so a kernel takes a handful of records instead of a long row of loose
arrays. Kernels read the fields they need by name, so any record with those fields will do
(a :class:`Tree` where only the node links are read, say).

- :class:`Splits` (``feature, threshold, left, right``): the flat-tree links of
  :mod:`basics.flat_tree`, what a descent reads;
- :class:`Tree`: the links, ``parent`` and ``depth`` of one tree being grown, and its row
  partition ``order, start, count`` (node ``j`` owns ``order[start[j]:start[j] +
  count[j]]``) with ``buf``, partition scratch of ``n_rows`` slots;
- :class:`Data` (``X, S, ranks``): the training rows, their per-row leaf statistics and
  their dense ranks (the optimal proposal's sort; else empty);
- :class:`Model` (``alpha_s, beta_s, code, params``): the tree prior of eq. (3.3) and the
  leaf likelihood (:class:`~.likelihood.LeafLikelihood`);
- :class:`Scratch`: the work arrays of one thread; :class:`Extent` the part of them the
  prior, the Metropolis-Hastings moves and the conditional SMC use (any record with the
  fields a kernel reads will do).

The small per-node kernels that take a record (``split_segment``, ``node_extent``,
``segment_stats``, ...) are inlined (``inline="always"``): called in a loop over nodes, a
call that passes a record of ten arrays costs more than the node's own work (measured: the
Metropolis-Hastings moves 2.5x slower without).

Node slots of a :class:`Tree` beyond its ``n_nodes`` (passed beside it: a scalar the
kernels return updated) are never read.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from basics.flat_tree import INDEX
from basics.jit import JIT

__all__ = ["Data", "Extent", "Model", "Scratch", "Splits", "Tree", "data_record",
           "model_record", "scratch", "small_scratch"]


class Splits(NamedTuple):
    """The links of flat trees (``basics.flat_tree`` vocabulary): what a descent reads."""

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray


class Tree(NamedTuple):
    """One tree being grown (node arrays of one capacity) and its row partition."""

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    parent: np.ndarray
    depth: np.ndarray
    order: np.ndarray
    start: np.ndarray
    count: np.ndarray
    buf: np.ndarray


class Data(NamedTuple):
    """Training rows (float64, n_rows x n_features), per-row statistics (n_rows x n_stats)
    and the dense ranks of the rows (int64 like ``X``, or empty)."""

    X: np.ndarray
    S: np.ndarray
    ranks: np.ndarray


class Model(NamedTuple):
    """The prior of eq. (3.3) and the leaf likelihood's code and parameters."""

    alpha_s: float
    beta_s: float
    code: int
    params: np.ndarray


class Scratch(NamedTuple):
    """Work arrays: a node's extent (``n_features``), two statistic vectors (``n_stats``),
    a node's values, the log mass of every gap (``n_rows``), the log mass of every
    dimension (``n_features``), a sorted order and two sorting scratch arrays (int64,
    ``n_rows``, ``n_rows + 1``, ``n_rows``)."""

    lower: np.ndarray
    upper: np.ndarray
    s_left: np.ndarray
    s_right: np.ndarray
    values: np.ndarray
    cand: np.ndarray
    dim_mass: np.ndarray
    perm: np.ndarray
    counts: np.ndarray
    keys: np.ndarray


def data_record(X: np.ndarray, S: np.ndarray, ranks: np.ndarray | None = None) -> Data:
    """:class:`Data` of checked rows ``X``, statistics ``S`` and optional dense ranks."""
    return Data(X, S, np.empty((0, 0), INDEX) if ranks is None else ranks)


def model_record(alpha_s: float, beta_s: float, code: int = 0,
                 params: np.ndarray | None = None) -> Model:
    """:class:`Model` of checked prior parameters; by default the uninformative likelihood
    (code 0), for kernels that only read the prior."""
    return Model(float(alpha_s), float(beta_s), int(code),
                 np.zeros(0) if params is None else np.asarray(params, np.float64))


def scratch(n_rows: int, n_features: int, n_stats: int) -> Scratch:
    """:class:`Scratch` for data of this shape (one per thread)."""
    n, d = max(int(n_rows), 1), max(int(n_features), 1)
    return Scratch(np.empty(d), np.empty(d), np.empty(n_stats), np.empty(n_stats), np.empty(n),
                   np.empty(n), np.empty(d), np.empty(n, INDEX), np.empty(n + 1, INDEX),
                   np.empty(n, INDEX))


class Extent(NamedTuple):
    """The part of :class:`Scratch` the prior and the Metropolis-Hastings moves use."""

    lower: np.ndarray
    upper: np.ndarray
    s_left: np.ndarray
    s_right: np.ndarray


@njit(**JIT)
def small_scratch(n_features, n_stats):  # pragma: no cover - numba
    """:class:`Extent`: what the prior and the Metropolis-Hastings moves use."""
    return Extent(np.empty(n_features), np.empty(n_features), np.empty(n_stats),
                  np.empty(n_stats))
