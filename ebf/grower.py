"""The trunk grower: level-by-level histogram CART over any histogram source.

An Empirical Bayesian Forest (paper Sec. 4) fixes the top of the tree at a single shallow
CART fit, the *trunk*, grown on all the data with a minimum leaf size (Sec. 3.2 uses
3500 of 20640 rows); its leaves are the branches. Splits minimise the weighted impurity
of Sec. 2.2 (eq. 4, Gini for classification) over quantile bins of the features.

The grower is plain Python driving numba kernels, after scikit-learn's histogram gradient
boosting ``TreeGrower``; it never touches rows. Each level it asks a *histogram source*
for the histograms of some open nodes::

    source(trunk: TrunkArrays, open_nodes: ndarray[int64]) -> ndarray
        # shape (len(open_nodes), n_features, n_bins, k), hist[i] = rows of open_nodes[i]

where ``trunk`` is the partial trunk grown so far (open nodes are leaves of it) and
``n_bins = binning.n_bins_of(bin_edges)``. :class:`BinnedSource` is the single-process
source (rows binned once, each row's node updated level by level); the Dask layer routes
each partition's binned rows with :func:`apply_binned`, calls :func:`node_histograms`
per partition and tree-reduces the sums. Both feed the same :func:`grow_trunk` and
``splitting.best_splits``, so local and distributed trunks agree.

**Sibling subtraction** (LightGBM; scikit-learn's ``HistogramBuilder``). A node's
histogram is its parent's minus its sibling's, so for every node just split the source is
asked only for the child with fewer rows and the other is derived from the parent's
histogram, kept from the previous level: half the histograms to build, sum and move per
level. A difference of sums is not the direct sum in floating point; the grower keeps the
split search from reading rounding as signal:

* ``histogram.subtract_histogram`` gives a bin without rows exact zeros and clamps the
  non-negative columns at zero (counts, column 0, are integers and exact);
* a child is derived only if the subtraction is well conditioned
  (:data:`SUBTRACT_MAX_COND`): the rounding of a difference scales with the sums it was
  made of (the parent's, which may itself be a difference, and the sibling's), while
  ``best_splits`` tells rounding from a real decrease relative to the child's own sums
  (``SPLIT_RTOL``). A pure child beside a sibling with much larger labels would otherwise
  get a spurious split; such children, and every few levels the end of a chain of
  differences, are asked for directly.

**Memory.** One source call returns at most ``max_hist_bytes`` of histograms (the open
nodes of a level are asked for in chunks). The kept histograms are bounded by
``max_kept_bytes``: half for the parents whose children are being derived, half for the
nodes of the level that will split next, the best ones in the order splits are applied
(so only nodes that do split are kept, and the choice does not depend on the chunking).
The children of a split whose histogram did not fit are asked for directly. One node
weighs ``n_features * n_bins * k * 8`` bytes (``k = 1 + n_classes`` for classification):
100 features, 255 bins and 10 classes are 2.2 MB, so the default 64 MB keeps 14 + 14.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable, Sequence

import numba
import numpy as np

from basics.flat_tree import INDEX, NO_NODE, preorder_leaf_ids
from basics.jit import JIT

from . import binning
from ._routing import leaf_of, split_trees
from ._splitting import SplitResult, best_splits
from ._trunk_arrays import TrunkArrays
from .config import HIST_MAX_BYTES
from .histogram import build_histograms, n_stats, subtract_histogram

logger = logging.getLogger(__name__)

#: ``source(trunk, open_nodes) -> hist`` (see the module docstring).
HistogramSource = Callable[["TrunkArrays", np.ndarray], np.ndarray]

#: A child's histogram is derived by subtraction only if the weight of the histograms it is
#: made of (its parent's, recursively, and its sibling's) is at most this many times its
#: own, and (regression) their ``W * sum w y**2`` at most the square times its own
#: (:func:`_well_conditioned`). The rounding of the derived split decreases grows with this
#: ratio: on a pure child beside a sibling with larger labels it stays below a quarter of
#: ``best_splits``' ``SPLIT_RTOL`` threshold up to a ratio of 65, 0.36 at 200, and crosses
#: it (spurious splits) from about 2000. A chain of derived histograms (the larger child of a
#: larger child ...) grows the ratio, about 3 / 7 / 15 / 31 for even splits, so every few
#: levels a node is asked for directly: on Friedman and flight-delay trunks of 32 to 1024
#: leaves this asks for 0 to 2% more histograms than with no bound.
SUBTRACT_MAX_COND = 32.0


# ------------------------------------------------------------------------------- routing


@numba.njit(**JIT)
def _descend_binned(trees, binned, missing, node_of_row):  # pragma: no cover - jitted
    """Move every row from its current node down to a leaf (in place); the code
    ``missing`` (a missing value) goes left where ``missing_left``."""
    for i in range(binned.shape[0]):
        node_of_row[i] = leaf_of(trees, node_of_row[i], binned, i, missing)


def _descend(trunk: TrunkArrays, binned: np.ndarray, n_bins: int, nodes: np.ndarray) -> None:
    _descend_binned(split_trees(trunk, threshold=trunk.threshold_bin), binned, int(n_bins) - 1,
                    nodes)


def apply_binned(
    trunk: TrunkArrays, binned: np.ndarray, n_bins: int,
    start_nodes: np.ndarray | None = None,
) -> np.ndarray:
    """Node (not leaf id) that every binned row reaches in a trunk, partial or final.

    Parameters
    ----------
    trunk : TrunkArrays
        Any trunk, including a partial one handed to a histogram source.
    binned : ndarray of shape (n_samples, n_features), uint8
        Rows binned with the trunk's edges (``binning.bin_data``).
    n_bins : int
        ``binning.n_bins_of(edges)``: the code ``n_bins - 1`` is a missing value.
    start_nodes : ndarray of shape (n_samples,), optional
        Current node of every row in an earlier stage of the same growing trunk; rows
        continue from there instead of the root.

    Returns
    -------
    nodes : ndarray of shape (n_samples,), int64
        A leaf of ``trunk`` per row; ``trunk.leaf_id[nodes]`` gives leaf ids once grown.

    Examples
    --------
    >>> import numpy as np
    >>> from ebf._trunk_arrays import TrunkArrays
    >>> apply_binned(TrunkArrays.root(4), np.zeros((3, 2), np.uint8), 2).tolist()
    [0, 0, 0]
    """
    binned = np.ascontiguousarray(binned)
    if start_nodes is None:
        nodes = np.zeros(binned.shape[0], INDEX)
    else:
        nodes = np.array(start_nodes, dtype=INDEX)
    _descend(trunk, binned, n_bins, nodes)
    return nodes


def node_histograms(
    trunk: TrunkArrays,
    open_nodes: np.ndarray,
    binned: np.ndarray,
    S: np.ndarray,
    n_bins: int,
    nodes: np.ndarray | None = None,
) -> np.ndarray:
    """Histogram of the rows of ``open_nodes`` in one block of rows (e.g. a partition).

    Parameters
    ----------
    trunk : TrunkArrays
        The partial trunk handed to the source.
    open_nodes : ndarray of shape (m,), int64
        Nodes to histogram, in slot order.
    binned : ndarray of shape (n_samples, n_features), uint8
    S : ndarray of shape (n_samples, k)
        Per-row statistics (``histogram.row_statistics``).
    n_bins : int
        ``binning.n_bins_of(bin_edges)``.
    nodes : ndarray of shape (n_samples,), optional
        Node of every row if already routed (:func:`apply_binned`).

    Returns
    -------
    hist : ndarray of shape (m, n_features, n_bins, k)
        Sums of these over blocks of rows give the histogram of all rows.

    Examples
    --------
    >>> import numpy as np
    >>> from ebf.histogram import row_statistics
    >>> from ebf._trunk_arrays import TrunkArrays
    >>> S = row_statistics(np.array([1.0, 3.0]))
    >>> h = node_histograms(TrunkArrays.root(4), np.array([0]), np.zeros((2, 1), np.uint8), S, 1)
    >>> h[0, 0, 0].tolist()
    [2.0, 2.0, 4.0, 10.0]
    """
    if nodes is None:
        nodes = apply_binned(trunk, binned, n_bins)
    open_nodes = np.asarray(open_nodes, dtype=INDEX)
    slot_of_node = np.full(trunk.n_nodes, -1, INDEX)
    slot_of_node[open_nodes] = np.arange(open_nodes.size)
    return build_histograms(binned, nodes, slot_of_node, S, open_nodes.size, n_bins)


class BinnedSource:
    """Single-process histogram source: rows binned once, their nodes kept up to date.

    Each call moves the rows down the (grown) trunk from their current node, which is
    exact because a trunk only grows by splitting leaves; a root-only trunk (a new growth)
    sends every row back to the root.

    Parameters
    ----------
    binned : ndarray of shape (n_samples, n_features), uint8
    S : ndarray of shape (n_samples, k)
    n_bins : int

    Examples
    --------
    >>> import numpy as np
    >>> from ebf.histogram import row_statistics
    >>> from ebf._trunk_arrays import TrunkArrays
    >>> src = BinnedSource(np.zeros((2, 1), np.uint8), row_statistics(np.ones(2)), 1)
    >>> src(TrunkArrays.root(4), np.array([0])).shape
    (1, 1, 1, 4)
    """

    def __init__(self, binned: np.ndarray, S: np.ndarray, n_bins: int) -> None:
        self.binned = np.ascontiguousarray(binned)
        self.S = np.ascontiguousarray(S, dtype=np.float64)
        self.n_bins = int(n_bins)
        self.nodes = np.zeros(self.binned.shape[0], INDEX)

    def __call__(self, trunk: TrunkArrays, open_nodes: np.ndarray) -> np.ndarray:
        if trunk.n_nodes == 1:
            self.nodes[:] = 0
        _descend(trunk, self.binned, self.n_bins, self.nodes)
        return node_histograms(trunk, open_nodes, self.binned, self.S, self.n_bins, self.nodes)


# ------------------------------------------------------------------------------- grower


def _check_growth_params(max_leaves, min_leaf_rows, min_leaf_weight, max_depth):
    if max_leaves is not None and int(max_leaves) < 1:
        raise ValueError(f"max_leaves must be >= 1 or None, got {max_leaves!r}.")
    if min_leaf_rows is not None and int(min_leaf_rows) < 1:
        raise ValueError(f"min_leaf_rows must be >= 1 or None, got {min_leaf_rows!r}.")
    if min_leaf_weight is not None and not float(min_leaf_weight) >= 0:
        raise ValueError(f"min_leaf_weight must be >= 0 or None, got {min_leaf_weight!r}.")
    if max_depth is not None and int(max_depth) < 0:
        raise ValueError(f"max_depth must be >= 0 or None, got {max_depth!r}.")


def _well_conditioned(scale: np.ndarray, child: np.ndarray, task: str) -> bool:
    """Whether a child's histogram may be derived by subtraction.

    ``scale``: the rounding scale the derived histogram would carry, the totals of every
    histogram summed or subtracted to make it (its parent's scale plus its sibling's
    totals; a histogram from the source has its own totals), against ``child``, its own
    totals: the ratio ``best_splits`` would see between rounding and ``SPLIT_RTOL``.
    """
    if task == "regression":
        w_s, s2_s, w_c, s2_c = scale[1], scale[3], child[1], child[3]
        bound = SUBTRACT_MAX_COND * w_c
        return bool(w_c > 0 and s2_c > 0 and w_s <= bound
                    and w_s * s2_s <= SUBTRACT_MAX_COND * bound * s2_c)
    w_c = child[1:].sum()
    return bool(w_c > 0 and scale[1:].sum() <= SUBTRACT_MAX_COND * w_c)


class _Kept:
    """Histograms of at most ``limit`` nodes that may split, for their children.

    Nodes are offered as their split is found; the first ``limit`` in the order splits are
    applied (gain descending, then node id) stay. So the kept set does not depend on the
    order nodes arrive in (the chunking), and every offered node that splits is kept while
    ``limit`` is at least the level's split budget.
    """

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.heap: list[tuple[float, int]] = []  # (gain, -node): the root drops first
        self.hists: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # node: (hist, scale)

    def offer(self, node: int, gain: float, hist: np.ndarray, scale: np.ndarray,
              owned: bool) -> None:
        key = (float(gain), -node)
        if len(self.heap) >= self.limit:
            if not self.heap or key < self.heap[0]:
                return
            _, worst = heapq.heapreplace(self.heap, key)
            del self.hists[-worst]
        else:
            heapq.heappush(self.heap, key)
        self.hists[node] = (hist if owned else hist.copy(), scale)


def _plan_level(trunk, open_nodes, parents, kept, min_rows):
    """The level's requests: ``(ask, request, derive)``.

    ``ask``: open nodes with enough rows for a valid split (they get a split search);
    ``request``: the nodes the source is asked for, increasing; ``derive``: ``{smaller
    child: (parent, larger child, parent's histogram, its rounding scale)}`` for every
    split whose parent's histogram was kept (``kept`` is emptied). Open nodes come in
    sibling pairs, the children of ``parents`` in order.
    """
    need = trunk.n_rows[open_nodes] >= 2 * min_rows
    request: list[int] = []
    derive: dict[int, tuple[int, int, np.ndarray, np.ndarray]] = {}
    for i, p in enumerate(parents.tolist()):
        pair = open_nodes[2 * i: 2 * i + 2].tolist()
        entry = kept.pop(p, None)
        if not (need[2 * i] or need[2 * i + 1]):
            continue
        if entry is None:
            request += [j for j, nd in zip(pair, need[2 * i: 2 * i + 2], strict=True) if nd]
            continue
        small, large = pair if trunk.n_rows[pair[0]] <= trunk.n_rows[pair[1]] else pair[::-1]
        request.append(small)
        derive[small] = (p, large, *entry)
    kept.clear()
    return open_nodes[need], np.array(request, dtype=INDEX), derive


class _LevelSplits:
    """Best split of every node of ``ask``, filled in as histograms arrive."""

    def __init__(self, ask: np.ndarray, k: int, task: str, min_rows: int, kept: _Kept) -> None:
        self.slot = {int(j): s for s, j in enumerate(ask.tolist())}
        self.gain = np.zeros(ask.size)
        self.feat = np.full(ask.size, NO_NODE, INDEX)
        self.bins = np.full(ask.size, NO_NODE, INDEX)
        self.missing_left = np.zeros(ask.size, INDEX)
        self.lefts = np.zeros((ask.size, k))
        self.rights = np.zeros((ask.size, k))
        self.task, self.min_rows, self.kept = task, min_rows, kept

    def record(self, node: int, res: SplitResult, i: int, hist: np.ndarray, owned: bool,
               scale: np.ndarray | None = None) -> None:
        """Slot ``i`` of ``res`` is ``node``'s split; ``scale`` is its histogram's rounding
        scale (see :func:`_well_conditioned`; None: from the source, its own totals)."""
        s = self.slot.get(node)
        if s is None:
            return  # asked for only to derive its sibling
        self.gain[s], self.feat[s], self.bins[s] = res.gain[i], res.feature[i], res.bin[i]
        self.missing_left[s] = res.missing_left[i]
        left, right = res.left[i], res.right[i]
        self.lefts[s], self.rights[s] = left, right
        if res.feature[i] < 0 or max(left[0], right[0]) < 2 * self.min_rows:
            return  # no split, or no child that needs a histogram
        larger, smaller = (left, right) if left[0] > right[0] else (right, left)
        scale = np.abs(res.total[i]) if scale is None else scale
        if _well_conditioned(scale + np.abs(smaller), larger, self.task):
            self.kept.offer(node, res.gain[i], hist, scale, owned)


def grow_trunk(
    source: HistogramSource,
    bin_edges: Sequence[np.ndarray],
    task: str = "regression",
    n_classes: int | None = None,
    *,
    max_leaves: int | None = None,
    min_leaf_rows: int | None = None,
    min_leaf_weight: float | None = None,
    max_depth: int | None = None,
    max_hist_bytes: int = HIST_MAX_BYTES,
    max_kept_bytes: int = HIST_MAX_BYTES,
    subtract: bool = True,
) -> TrunkArrays:
    """Grow a histogram CART trunk level by level from a histogram source (Sec. 2.2, 4).

    At each level the open nodes (leaves created by the previous level) get their best
    splits from ``splitting.best_splits``; the splits are applied in decreasing gain (ties
    by node id) until the leaf budget ``max_leaves`` is reached; children are numbered in
    the order of their parents' ids. Of the two children of a split, the source is asked
    for the one with fewer rows and the other is its parent's histogram minus it (see the
    module docstring). Open nodes with no valid split (too few rows or weight on a side,
    or no impurity decrease), beyond the budget, or at ``max_depth`` become final leaves.
    With ``max_leaves``, ``min_leaf_rows`` and ``max_depth`` all None the trunk grows
    until no node has a valid split.

    Parameters
    ----------
    source : callable ``source(trunk, open_nodes) -> hist``
        See the module docstring; ``hist`` must have shape
        ``(len(open_nodes), n_features, binning.n_bins_of(bin_edges), k)``.
    bin_edges : sequence of ndarray
        Bin edges per feature; thresholds are ``bin_edges[f][b]``.
    task : {"regression", "classification"}, default="regression"
    n_classes : int or None
        Number of classes (classification), so that ``k = 1 + n_classes``.
    max_leaves : int or None
        Leaf budget.
    min_leaf_rows : int or None
        Minimum rows per leaf (None: 1).
    min_leaf_weight : float or None
        Minimum weight per leaf (None: any positive weight), the minimum leaf
        probability of Sec. 2.2 when weights are Bayesian-bootstrap weights.
    max_depth : int or None
        Maximum depth (the root has depth 0).
    max_hist_bytes : int, default=HIST_MAX_BYTES
        Memory bound of one source call (the open nodes are asked for in chunks).
    max_kept_bytes : int, default=HIST_MAX_BYTES
        Memory bound of the histograms kept for subtraction: half for the parents whose
        children are being derived, half for the nodes that split next; the children of
        a split whose histogram found no room are asked for directly. 0 keeps none. The
        grower holds at most ``max_hist_bytes + max_kept_bytes`` of histograms.
    subtract : bool, default=True
        Derive one child of every split by subtraction; False asks the source for the
        histogram of every open node that can split (twice the histograms per level).

    Returns
    -------
    TrunkArrays
        The grown trunk with leaf ids in preorder.

    Examples
    --------
    >>> import numpy as np
    >>> from ebf.binning import bin_data, bin_edges, n_bins_of
    >>> from ebf.histogram import row_statistics
    >>> X = np.arange(8.0)[:, None]; y = (X[:, 0] > 3).astype(float)
    >>> edges = bin_edges(X)
    >>> src = BinnedSource(bin_data(X, edges), row_statistics(y), n_bins_of(edges))
    >>> t = grow_trunk(src, edges, min_leaf_rows=2)
    >>> float(t.threshold[0]), t.n_leaves
    (3.5, 2)
    """
    _check_growth_params(max_leaves, min_leaf_rows, min_leaf_weight, max_depth)
    edges = [np.asarray(e, dtype=np.float64) for e in bin_edges]
    d = len(edges)
    n_bins = binning.n_bins_of(edges)
    k = n_stats(task, n_classes)
    min_rows = 1 if min_leaf_rows is None else int(min_leaf_rows)
    min_weight = 0.0 if min_leaf_weight is None else float(min_leaf_weight)
    per_node = max(1, d * n_bins * k * 8)
    chunk = max(1, int(max_hist_bytes) // per_node)
    keep_limit = int(max_kept_bytes) // (2 * per_node) if subtract else 0

    trunk = TrunkArrays.root(k)
    open_nodes = np.zeros(1, INDEX)
    parents = np.zeros(0, INDEX)
    kept: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    n_closed = 0
    level = 0
    while open_nodes.size:
        budget = np.inf if max_leaves is None else int(max_leaves) - n_closed - open_nodes.size
        can_split = (max_depth is None or level < max_depth) and budget > 0
        if level > 0 and not can_split:
            break
        if level == 0:  # the root is asked for even if it cannot split: its totals
            ask, request, derive = open_nodes, open_nodes, {}
        else:
            ask, request, derive = _plan_level(trunk, open_nodes, parents, kept, min_rows)
        n_derived = len(derive)
        splits_next = can_split and (max_depth is None or level + 1 < max_depth)
        found = _LevelSplits(ask, k, task, min_rows,
                             _Kept(min(keep_limit, budget) if splits_next else 0))
        for a in range(0, request.size, chunk):
            part = request[a:a + chunk]
            hist = np.ascontiguousarray(source(trunk, part), dtype=np.float64)
            if hist.shape != (part.size, d, n_bins, k):
                raise ValueError(
                    f"the histogram source returned shape {hist.shape}, expected "
                    f"{(part.size, d, n_bins, k)} for {part.size} open node(s)."
                )
            res = best_splits(hist, task, min_rows, min_weight)
            if level == 0:
                _set_node_stats(trunk, 0, res.total[0], task)
            for i, j in enumerate(part.tolist()):
                found.record(j, res, i, hist[i], owned=False)
                if j in derive:
                    p, large, buf, scale = derive.pop(j)
                    bad = subtract_histogram(buf, hist[i], task)
                    if bad:
                        raise ValueError(
                            f"the histogram source counted more rows in node {j} than in "
                            f"its parent node {p} in {bad} bin(s); it must histogram the "
                            "same rows at every call."
                        )
                    found.record(large, best_splits(buf[None], task, min_rows, min_weight),
                                 0, buf, owned=True, scale=scale + np.abs(res.total[i]))
        if not can_split:
            break
        feat, gain = found.feat, found.gain
        cand = np.flatnonzero(feat >= 0)
        cand = cand[np.lexsort((ask[cand], -gain[cand]))]
        if max_leaves is not None:
            cand = cand[: int(budget)]
        cand = np.sort(cand)  # ask is increasing, so this is node-id order
        trunk = _split_nodes(trunk, ask[cand], feat[cand], found.bins[cand],
                             found.missing_left[cand], gain[cand], found.lefts[cand],
                             found.rights[cand], edges, task)
        logger.debug("trunk level %d: %d open nodes, %d asked for, %d derived, %d split",
                     level, open_nodes.size, request.size, n_derived, cand.size)
        parents = ask[cand]
        kept = found.kept.hists
        n_closed += open_nodes.size - cand.size
        open_nodes = np.arange(trunk.n_nodes - 2 * cand.size, trunk.n_nodes, dtype=INDEX)
        level += 1
    trunk.leaf_id = preorder_leaf_ids(trunk.left, trunk.right)
    return trunk


def _set_node_stats(trunk: TrunkArrays, j: int, totals: np.ndarray, task: str) -> None:
    trunk.stats[j] = totals
    trunk.n_rows[j] = int(round(totals[0]))
    trunk.weight[j] = totals[1] if task == "regression" else totals[1:].sum()


def _split_nodes(trunk, nodes, feat, bins, missing_left, gain, lefts, rights, edges,
                 task) -> TrunkArrays:
    """A new trunk with ``nodes`` split and their children appended (in node order)."""
    m = nodes.size
    n0 = trunk.n_nodes
    kids = type(trunk)(
        feature=np.full(2 * m, NO_NODE, INDEX), threshold_bin=np.full(2 * m, NO_NODE, INDEX),
        threshold=np.full(2 * m, np.nan), missing_left=np.zeros(2 * m, INDEX),
        left=np.full(2 * m, NO_NODE, INDEX),
        right=np.full(2 * m, NO_NODE, INDEX),
        depth=np.repeat(trunk.depth[nodes] + 1, 2).astype(INDEX),
        n_rows=np.zeros(2 * m, INDEX), weight=np.zeros(2 * m),
        stats=np.zeros((2 * m, trunk.stats.shape[1])), gain=np.zeros(2 * m),
        leaf_id=np.full(2 * m, NO_NODE, INDEX),
    )
    for i in range(m):
        _set_node_stats(kids, 2 * i, lefts[i], task)
        _set_node_stats(kids, 2 * i + 1, rights[i], task)
    out = type(trunk)(**{
        name: np.concatenate([getattr(trunk, name), getattr(kids, name)])
        for name in trunk.ARRAYS
    })
    out.feature[nodes] = feat
    out.threshold_bin[nodes] = bins
    out.threshold[nodes] = [binning.split_threshold(edges, f, b)
                            for f, b in zip(feat, bins, strict=True)]
    out.missing_left[nodes] = missing_left
    out.gain[nodes] = gain
    out.left[nodes] = n0 + 2 * np.arange(m)
    out.right[nodes] = n0 + 2 * np.arange(m) + 1
    return out
