"""The trunk over all the partitions: bin edges, histograms, a tree reduction (Sec. 4-5).

An EBF's trunk is a CART fit on *all* the data (Taddy et al. 2015, Sec. 4); Sec. 5 notes
that it "can itself be fit in distribution". Every step calls the single-process function:

1. :func:`sample_bin_edges`: the rows ``binning.bin_edges`` would draw (200k of them with
   seed 0, or all rows), gathered by (partition, offset), then the same function.
2. :class:`DaskHistogramSource`: the histogram source of ``grower.grow_trunk``; per level
   every partition runs ``grower.node_histograms`` on its binned rows and the results are
   summed by a k-ary tree of tasks (:func:`tree_reduce`).
3. :func:`fit_trunk`: ``grow_trunk`` over that source, regrown with a larger leaf budget
   while a branch exceeds the memory budget (Sec. 4.2), returned as a fitted
   :class:`~ebf.trunk.Trunk` built by its seam ``Trunk._from_arrays``.

Futures are only ever *computed* (never scattered), so a worker that dies takes nothing
with it that the scheduler cannot recompute.
"""

from __future__ import annotations

import logging
import math
import time
import uuid

import numpy as np
from distributed import Client, Future

from .. import binning
from ..grower import grow_trunk, node_histograms
from ..histogram import row_statistics
from ..trunk import Trunk, TrunkArrays
from .branches import BranchMemoryError, branch_memory_advice
from .client import Report
from .graph import map_shared
from .inputs import EncodedData

logger = logging.getLogger(__name__)

#: The key prefix of the trunk's histogram tasks: the Dask dashboard groups tasks by it, so
#: the trunk's levels show as ``ebf-trunk-level`` (its binning as ``ebf-trunk-binned``).
TRUNK_LEVEL = "ebf-trunk-level"

#: Histograms summed per reduction task (fan-in of the reduction tree).
SPLIT_EVERY = 8


# -------------------------------------------------------------------------- bin edges


def _take_rows(enc: tuple, rows: np.ndarray | None) -> np.ndarray:
    A = enc[0]
    return A if rows is None else A[rows]


def sample_bin_edges(client: Client, data: EncodedData, max_bins: int) -> list[np.ndarray]:
    """Bin edges equal to ``binning.bin_edges(A, max_bins)`` of the concatenated rows.

    Parameters
    ----------
    client : distributed.Client
    data : EncodedData
    max_bins : int

    Returns
    -------
    edges : list of ndarray
    """
    rows = binning.sample_rows(data.n)
    if rows is None:
        parts = client.gather(client.map(_take_rows, data.futures, [None] * len(data.futures),
                                          pure=False))
        return binning.bin_edges(np.concatenate(parts), max_bins)
    part_of = np.searchsorted(data.offsets, rows, side="right") - 1
    wanted = np.unique(part_of)
    take = [rows[part_of == p] - data.offsets[p] for p in wanted]
    parts = client.gather(client.map(_take_rows, [data.futures[p] for p in wanted], take,
                                     pure=False))
    return binning.bin_edges(np.concatenate(parts), max_bins, subsample=None)


# ------------------------------------------------------------------- histogram source


def bin_partition(enc: tuple, edges: list[np.ndarray], task: str,
                  n_classes: int | None) -> tuple[np.ndarray, np.ndarray]:
    """One encoded partition ``(A, y, w)`` to its bin codes and per-row statistic matrix
    (the per-partition step of the histogram source; ``benchmarks/`` times it alone)."""
    A, y, w = enc
    return binning.bin_data(A, edges), row_statistics(y, w, task, n_classes)


def partition_histogram(binned_part: tuple, trunk: TrunkArrays, open_nodes: np.ndarray,
                        n_bins: int) -> np.ndarray:
    """The histograms of the ``open_nodes`` of ``trunk`` over one binned partition."""
    binned, S = binned_part
    return node_histograms(trunk, open_nodes, binned, S, n_bins)


def _sum_arrays(*arrays: np.ndarray) -> np.ndarray:
    out = np.array(arrays[0], dtype=np.float64, copy=True)
    for a in arrays[1:]:
        out += a
    return out


def tree_reduce(client: Client, futures: list[Future], split_every: int = SPLIT_EVERY,
                prefix: str = "ebf-sum") -> Future:
    """Sum of the arrays behind ``futures`` by a k-ary tree of tasks (fixed order)."""
    level = 0
    while len(futures) > 1:
        futures = [
            client.submit(_sum_arrays, *futures[i:i + split_every], pure=False,
                          key=f"{prefix}-{level}-{i // split_every}")
            for i in range(0, len(futures), split_every)
        ]
        level += 1
    return futures[0]


class DaskHistogramSource:
    """Histogram source of ``grower.grow_trunk`` over binned partitions on a cluster.

    Every partition is binned once (``binning.bin_data``) with its per-row statistics
    (``histogram.row_statistics``) and kept on the workers. Each call is stateless: every
    partition routes its rows from the root of the partial trunk and histograms the open
    nodes (``grower.node_histograms``), and a tree of tasks sums the partition histograms.
    A lost partition is recomputed; sums of histograms are histograms.

    Parameters
    ----------
    client : distributed.Client
    data : EncodedData
    edges : list of ndarray
        Bin edges (``trunk.bin_edges_``).
    split_every : int, default=SPLIT_EVERY
        Fan-in of the reduction tree.
    report : callable ``report(n_leaves, max_leaves)``, optional
    max_leaves : int or None
        Passed to ``report`` as the total (0 when None).

    Examples
    --------
    >>> src = DaskHistogramSource(client, data, edges)  # doctest: +SKIP
    >>> arrays = grow_trunk(src, edges, min_leaf_rows=100)  # doctest: +SKIP
    """

    def __init__(self, client: Client, data: EncodedData, edges: list[np.ndarray],
                 split_every: int = SPLIT_EVERY, report: Report | None = None,
                 max_leaves: int | None = None) -> None:
        self.client = client
        self.n_bins = binning.n_bins_of(edges)
        self.split_every = int(split_every)
        self.report = report
        self.max_leaves = max_leaves
        self.token = uuid.uuid4().hex[:12]
        n_classes = data.n_classes if data.task == "classification" else None
        self.parts = map_shared(client, bin_partition, data.futures, edges=edges,
                                task=data.task, n_classes=n_classes, pure=True,
                                key=[f"ebf-trunk-binned-{self.token}-{p}"
                                     for p in range(len(data.futures))])
        self.calls = 0
        self.seconds: list[float] = []

    def __call__(self, trunk: TrunkArrays, open_nodes: np.ndarray) -> np.ndarray:
        t0 = time.perf_counter()
        call = self.calls
        hists = map_shared(
            self.client, partition_histogram, self.parts, trunk=trunk, open_nodes=open_nodes,
            n_bins=self.n_bins, pure=True,
            key=[f"{TRUNK_LEVEL}-{self.token}-{call}-{p}" for p in range(len(self.parts))],
        )
        total = tree_reduce(self.client, hists, self.split_every,
                            prefix=f"{TRUNK_LEVEL}-sum-{self.token}-{call}")
        out = total.result()
        self.calls += 1
        self.seconds.append(time.perf_counter() - t0)
        logger.info("trunk level (call %d): %d open node(s), %d partition(s), %.2fs", call,
                    len(open_nodes), len(self.parts), self.seconds[-1])
        if self.report is not None:
            self.report(trunk.n_leaves, int(self.max_leaves or 0))
        return out

    def release(self) -> None:
        """Drop the binned partitions (the workers free them)."""
        self.parts = []


def fit_trunk(client: Client, data: EncodedData, trunk: Trunk, edges: list[np.ndarray],
              max_rows: int | None = None, grow_budget: bool = False,
              report: Report | None = None, budget_bytes: int | None = None) -> Trunk:
    """Grow a trunk with the parameters of ``trunk`` (unfitted) on the encoded partitions.

    The same ``grow_trunk`` as ``Trunk.fit``, with the trunk's parameters and the given
    edges, over a :class:`DaskHistogramSource`. With ``max_rows``, a trunk whose largest
    leaf has more rows is regrown with twice the leaf budget (when ``grow_budget``: the
    user did not fix ``trunk_max_leaves``) until every leaf fits, else
    :class:`~ebf.dask.branches.BranchMemoryError`.

    Parameters
    ----------
    client : distributed.Client
    data : EncodedData
    trunk : Trunk
        Unfitted; its parameters are used, it is not changed.
    edges : list of ndarray
        From :func:`sample_bin_edges`.
    max_rows : int or None
        Largest rows per branch (:func:`ebf.dask.branches.max_branch_rows`).
    grow_budget : bool
        Whether the leaf budget may be raised above ``trunk.max_leaves`` to meet ``max_rows``.
    report : callable ``report(n_leaves, max_leaves)``, optional
    budget_bytes : int, optional
        The ``branch_memory`` behind ``max_rows``, for the error's advice
        (:func:`~ebf.dask.branches.branch_memory_advice`).

    Returns
    -------
    Trunk
        A new fitted trunk (``Trunk._from_arrays``); its ``max_leaves`` (and
        ``max_leaves_``) is the budget actually used.
    """
    params = trunk.get_params()
    budget = params["max_leaves"]
    n_classes = int(trunk.n_classes) if trunk.task == "classification" else None
    if max_rows is not None and grow_budget and budget is not None:
        budget = max(int(budget), math.ceil(data.n / max_rows))
    source = DaskHistogramSource(client, data, edges, report=report, max_leaves=budget)
    try:
        while True:
            arrays = grow_trunk(
                source, edges, trunk.task, n_classes, max_leaves=budget,
                min_leaf_rows=trunk.min_leaf_rows, min_leaf_weight=trunk.min_leaf_weight,
                max_depth=trunk.max_depth,
            )
            largest = int(arrays.n_rows[arrays.leaf_nodes()].max())
            if max_rows is None or largest <= max_rows:
                break
            full = budget is not None and arrays.n_leaves >= budget
            if not (grow_budget and full):
                why = ("trunk_max_leaves is fixed" if not grow_budget and full else
                       "no leaf of the trunk has a valid split left (trunk_min_leaf_rows, "
                       "max_depth or no impurity decrease)")
                raise BranchMemoryError(
                    f"The largest branch has {largest} rows, more than the {max_rows} rows "
                    f"that fit branch_memory, and the trunk cannot split it further "
                    f"({why}; {arrays.n_leaves} leaves). "
                    f"{branch_memory_advice(client, budget_bytes)}"
                    " (lower trunk_min_leaf_rows, raise or unset trunk_max_leaves, or use fewer"
                    " trees, n_estimators, or a larger min_samples_leaf)."
                )
            budget = 2 * int(budget)
            source.max_leaves = budget
            logger.info("largest branch %d rows > %d: regrowing the trunk with max_leaves=%d",
                        largest, max_rows, budget)
    finally:
        source.release()
    return Trunk._from_arrays({**params, "max_leaves": budget}, arrays, edges, data.n_features)
