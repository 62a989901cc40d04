"""The CART trunk: a level-by-level histogram CART grower over any histogram source.

An Empirical Bayesian Forest (paper Sec. 4) fixes the top of the tree at a single shallow
CART fit, the *trunk*, grown on all the data with a minimum leaf size (Sec. 3.2 uses
3500 of 20640 rows); its leaves are the branches. Splits minimise the weighted impurity
of Sec. 2.2 (eq. 4, Gini for classification) over quantile bins of the features.

The grower is plain Python driving numba kernels, after scikit-learn's histogram gradient
boosting ``TreeGrower``; it never touches rows. Each level it asks a *histogram source*
for the histogram of the open nodes::

    source(trunk: TrunkArrays, open_nodes: ndarray[int64]) -> ndarray
        # shape (len(open_nodes), n_features, n_bins, k), hist[i] = rows of open_nodes[i]

where ``trunk`` is the partial trunk grown so far (open nodes are leaves of it) and
``n_bins = binning.n_bins_of(bin_edges)``. :class:`BinnedSource` is the single-process
source (rows binned once, each row's node updated level by level); the Dask layer routes
each partition's binned rows with :func:`apply_binned`, calls :func:`node_histograms`
per partition and tree-reduces the sums. Both feed the same :func:`grow_trunk` and
``splitting.best_splits``, so local and distributed trunks agree.

Trunks are flat arrays (:class:`TrunkArrays`); :class:`Trunk` is the scikit-learn style
estimator.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numba
import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from mondrian.validation import (
    check_finite,
    state_array,
    state_int,
    state_names,
    unchanged_on_error,
)

from . import binning
from .config import HIST_MAX_BYTES, INDEX, JIT, MAX_BINS, NO_NODE
from .histogram import build_histograms, n_stats, row_statistics
from .splitting import best_splits
from .tree_validation import check_trunk

logger = logging.getLogger(__name__)

#: ``source(trunk, open_nodes) -> hist`` (see the module docstring).
HistogramSource = Callable[["TrunkArrays", np.ndarray], np.ndarray]


@dataclass
class TrunkArrays:
    """Flat arrays of a trunk; node 0 is the root, nodes are numbered level by level.

    ``feature``, ``threshold_bin``, ``left``, ``right``: int64, -1 at leaves;
    ``threshold``: float64, ``edges[feature][threshold_bin]`` in raw units
    (``x <= threshold`` goes left), NaN at leaves; ``depth``, ``n_rows``: int64;
    ``weight``: float64 total weight; ``stats``: float64 ``(n_nodes, k)`` statistic totals
    (the totals row of the node's histogram); ``gain``: impurity decrease of the split,
    0 at leaves; ``leaf_id``: 0 .. L-1 in preorder at leaves, -1 at internal nodes (and
    everywhere while the trunk is growing).
    """

    feature: np.ndarray
    threshold_bin: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    depth: np.ndarray
    n_rows: np.ndarray
    weight: np.ndarray
    stats: np.ndarray
    gain: np.ndarray
    leaf_id: np.ndarray

    ARRAYS = ("feature", "threshold_bin", "threshold", "left", "right", "depth", "n_rows",
              "weight", "stats", "gain", "leaf_id")

    @classmethod
    def root(cls, k: int) -> TrunkArrays:
        """A one-node trunk whose statistics are not known yet (all zero)."""
        return cls(
            feature=np.full(1, NO_NODE, INDEX), threshold_bin=np.full(1, NO_NODE, INDEX),
            threshold=np.full(1, np.nan), left=np.full(1, NO_NODE, INDEX),
            right=np.full(1, NO_NODE, INDEX), depth=np.zeros(1, INDEX),
            n_rows=np.zeros(1, INDEX), weight=np.zeros(1), stats=np.zeros((1, k)),
            gain=np.zeros(1), leaf_id=np.full(1, NO_NODE, INDEX),
        )

    @property
    def n_nodes(self) -> int:
        return int(self.feature.shape[0])

    @property
    def n_leaves(self) -> int:
        return int(np.sum(self.feature == NO_NODE))

    @property
    def nbytes(self) -> int:
        """Size of the arrays in bytes (the model size of the trunk)."""
        return int(sum(getattr(self, name).nbytes for name in self.ARRAYS))

    def leaf_nodes(self) -> np.ndarray:
        """Node of every leaf, in leaf-id order."""
        leaves = np.flatnonzero(self.leaf_id >= 0)
        out = np.empty(leaves.size, INDEX)
        out[self.leaf_id[leaves]] = leaves
        return out

    def to_dict(self) -> dict[str, np.ndarray]:
        return {name: getattr(self, name) for name in self.ARRAYS}

    @classmethod
    def from_dict(cls, arrays: dict[str, Any]) -> TrunkArrays:
        """Rebuild from :meth:`to_dict` output, checking names, dtypes and shapes (the
        structure and statistics are :func:`ebf.tree_validation.check_trunk`'s)."""
        missing = [name for name in cls.ARRAYS if name not in arrays]
        if missing:
            raise ValueError(f"trunk state is missing the arrays {missing}.")
        feature, stats = arrays["feature"], arrays["stats"]
        if not (isinstance(feature, np.ndarray) and feature.ndim == 1
                and isinstance(stats, np.ndarray) and stats.ndim == 2):
            raise ValueError("trunk state: feature must be a 1-D array and stats a 2-D array.")
        n = feature.shape[0]
        return cls(**{
            name: state_array(arrays, name, np.float64 if name in _FLOATS else INDEX,
                              (n, stats.shape[1]) if name == "stats" else (n,))
            for name in cls.ARRAYS
        })


_FLOATS = frozenset({"threshold", "weight", "stats", "gain"})


def _preorder_leaf_ids(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Leaf ids 0 .. L-1 in depth-first preorder (left first), -1 at internal nodes."""
    leaf_id = np.full(left.shape[0], NO_NODE, INDEX)
    stack = [0]
    next_id = 0
    while stack:
        j = stack.pop()
        if left[j] == NO_NODE:
            leaf_id[j] = next_id
            next_id += 1
        else:
            stack.append(int(right[j]))
            stack.append(int(left[j]))
    return leaf_id


# ------------------------------------------------------------------------------- routing


@numba.njit(**JIT)
def _descend_binned(binned, feature, threshold_bin, left, right, node_of_row):
    """Move every row from its current node down to a leaf (in place)."""
    for i in range(binned.shape[0]):
        j = node_of_row[i]
        while feature[j] >= 0:
            if binned[i, feature[j]] <= threshold_bin[j]:
                j = left[j]
            else:
                j = right[j]
        node_of_row[i] = j


@numba.njit(**JIT)
def _apply_raw(X, feature, threshold, left, right, leaf_id, out):
    for i in range(X.shape[0]):
        j = 0
        while feature[j] >= 0:
            if X[i, feature[j]] <= threshold[j]:
                j = left[j]
            else:
                j = right[j]
        out[i] = leaf_id[j]


def apply_binned(
    trunk: TrunkArrays, binned: np.ndarray, start_nodes: np.ndarray | None = None
) -> np.ndarray:
    """Node (not leaf id) that every binned row reaches in a trunk, partial or final.

    Parameters
    ----------
    trunk : TrunkArrays
        Any trunk, including a partial one handed to a histogram source.
    binned : ndarray of shape (n_samples, n_features), uint8
        Rows binned with the trunk's edges (``binning.bin_data``).
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
    >>> t = TrunkArrays.root(4)
    >>> apply_binned(t, np.zeros((3, 2), np.uint8)).tolist()
    [0, 0, 0]
    """
    binned = np.ascontiguousarray(binned)
    if start_nodes is None:
        nodes = np.zeros(binned.shape[0], INDEX)
    else:
        nodes = np.array(start_nodes, dtype=INDEX)
    _descend_binned(binned, trunk.feature, trunk.threshold_bin, trunk.left, trunk.right, nodes)
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
    >>> S = row_statistics(np.array([1.0, 3.0]))
    >>> h = node_histograms(TrunkArrays.root(4), np.array([0]), np.zeros((2, 1), np.uint8), S, 1)
    >>> h[0, 0, 0].tolist()
    [2.0, 2.0, 4.0, 10.0]
    """
    if nodes is None:
        nodes = apply_binned(trunk, binned)
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
        _descend_binned(self.binned, trunk.feature, trunk.threshold_bin, trunk.left,
                        trunk.right, self.nodes)
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
) -> TrunkArrays:
    """Grow a histogram CART trunk level by level from a histogram source (Sec. 2.2, 4).

    At each level the open nodes (leaves created by the previous level) are sent to
    ``source`` (in chunks of at most ``max_hist_bytes`` of histogram), their best splits
    are found by ``splitting.best_splits`` and applied in decreasing gain (ties by node
    id) until the leaf budget ``max_leaves`` is reached; children are numbered in the
    order of their parents' ids. Open nodes with no valid split (too few rows or weight on
    a side, or no impurity decrease), beyond the budget, or at ``max_depth`` become final
    leaves. With ``max_leaves``, ``min_leaf_rows`` and ``max_depth`` all None the trunk
    grows until no node has a valid split.

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
        Memory bound of one source call.

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

    trunk = TrunkArrays.root(k)
    open_nodes = np.zeros(1, INDEX)
    n_closed = 0
    level = 0
    while open_nodes.size:
        can_split = (max_depth is None or level < max_depth) and (
            max_leaves is None or n_closed + open_nodes.size < max_leaves
        )
        if level > 0 and not can_split:
            break
        # a node with fewer than 2 * min_rows rows has no valid split: no histogram needed
        ask = open_nodes if level == 0 else open_nodes[trunk.n_rows[open_nodes] >= 2 * min_rows]
        gain = np.zeros(ask.size)
        feat = np.full(ask.size, NO_NODE, INDEX)
        bins = np.full(ask.size, NO_NODE, INDEX)
        lefts = np.zeros((ask.size, k))
        rights = np.zeros((ask.size, k))
        for a in range(0, ask.size, chunk):
            part = ask[a:a + chunk]
            hist = np.asarray(source(trunk, part))
            if hist.shape != (part.size, d, n_bins, k):
                raise ValueError(
                    f"the histogram source returned shape {hist.shape}, expected "
                    f"{(part.size, d, n_bins, k)} for {part.size} open node(s)."
                )
            res = best_splits(hist, task, min_rows, min_weight)
            sl = slice(a, a + part.size)
            gain[sl], feat[sl], bins[sl] = res.gain, res.feature, res.bin
            lefts[sl], rights[sl] = res.left, res.right
            if level == 0:
                _set_node_stats(trunk, 0, res.total[0], task)
        if not can_split:
            break
        cand = np.flatnonzero(feat >= 0)
        cand = cand[np.lexsort((ask[cand], -gain[cand]))]
        if max_leaves is not None:
            cand = cand[: int(max_leaves) - n_closed - open_nodes.size]
        cand = np.sort(cand)  # ask is increasing, so this is node-id order
        trunk = _split_nodes(trunk, ask[cand], feat[cand], bins[cand], gain[cand],
                             lefts[cand], rights[cand], edges, task)
        logger.debug("trunk level %d: %d open nodes, %d split", level, open_nodes.size,
                     cand.size)
        n_closed += open_nodes.size - cand.size
        open_nodes = np.arange(trunk.n_nodes - 2 * cand.size, trunk.n_nodes, dtype=INDEX)
        level += 1
    trunk.leaf_id = _preorder_leaf_ids(trunk.left, trunk.right)
    return trunk


def _set_node_stats(trunk: TrunkArrays, j: int, totals: np.ndarray, task: str) -> None:
    trunk.stats[j] = totals
    trunk.n_rows[j] = int(round(totals[0]))
    trunk.weight[j] = totals[1] if task == "regression" else totals[1:].sum()


def _split_nodes(trunk, nodes, feat, bins, gain, lefts, rights, edges, task) -> TrunkArrays:
    """A new trunk with ``nodes`` split and their children appended (in node order)."""
    m = nodes.size
    n0 = trunk.n_nodes
    kids = TrunkArrays(
        feature=np.full(2 * m, NO_NODE, INDEX), threshold_bin=np.full(2 * m, NO_NODE, INDEX),
        threshold=np.full(2 * m, np.nan), left=np.full(2 * m, NO_NODE, INDEX),
        right=np.full(2 * m, NO_NODE, INDEX),
        depth=np.repeat(trunk.depth[nodes] + 1, 2).astype(INDEX),
        n_rows=np.zeros(2 * m, INDEX), weight=np.zeros(2 * m),
        stats=np.zeros((2 * m, trunk.stats.shape[1])), gain=np.zeros(2 * m),
        leaf_id=np.full(2 * m, NO_NODE, INDEX),
    )
    for i in range(m):
        _set_node_stats(kids, 2 * i, lefts[i], task)
        _set_node_stats(kids, 2 * i + 1, rights[i], task)
    out = TrunkArrays(**{
        name: np.concatenate([getattr(trunk, name), getattr(kids, name)])
        for name in TrunkArrays.ARRAYS
    })
    out.feature[nodes] = feat
    out.threshold_bin[nodes] = bins
    out.threshold[nodes] = [edges[f][b] for f, b in zip(feat, bins, strict=True)]
    out.gain[nodes] = gain
    out.left[nodes] = n0 + 2 * np.arange(m)
    out.right[nodes] = n0 + 2 * np.arange(m) + 1
    return out


# ---------------------------------------------------------------------------- estimator


class Trunk(BaseEstimator):
    """Shallow histogram CART trunk of an Empirical Bayesian Forest (paper Sec. 3.2, 4).

    A CART tree fit to all the data on quantile bins of the features, with the weighted
    squared error (eq. 4) or weighted Gini impurity and a minimum leaf size (Sec. 2.2),
    grown level by level by :func:`grow_trunk`. Its leaves are the branches of an EBF.

    Parameters
    ----------
    max_leaves : int or None, default=None
        Leaf budget: each level applies its best splits in decreasing impurity decrease
        until the trunk has ``max_leaves`` leaves.
    min_leaf_rows : int or None, default=None
        Minimum number of rows in every leaf (e.g. 3500 of 20640 in Sec. 3.2); None is 1.
    min_leaf_weight : float or None, default=None
        Minimum total sample weight in every leaf; None only asks for positive weight.
    max_depth : int or None, default=None
        Maximum depth (root at depth 0). If ``max_leaves`` and ``min_leaf_rows`` are both
        None, the trunk grows until ``max_depth`` or until no node has a valid split.
    max_bins : int, default=255
        Quantile bins per feature (at most 255); ignored when ``fit`` gets ``bin_edges``.
    task : {"regression", "classification"}, default="regression"
        Classification expects ``y`` as integer class codes ``0 .. C-1``.
    n_classes : int or None, default=None
        Number of classes ``C``; None infers ``max(y) + 1`` (classification only).

    Attributes
    ----------
    trunk_ : TrunkArrays
        The flat arrays of the trunk.
    bin_edges_ : list of ndarray
        Bin edges per feature (``binning.bin_edges`` or the ones given to ``fit``).
    n_leaves_ : int
        Number of leaves ``L``; leaf ids are ``0 .. L-1`` in preorder.
    leaf_values_ : ndarray of shape (L,) or (L, C)
        Weighted mean label (regression) or weighted class fractions per leaf.
    n_classes_ : int
        Number of classes (classification only).
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Column names, when ``X`` was a DataFrame with string column names.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((1000, 3)); y = 2.0 * (X[:, 0] > 0.5) + 0.1 * rng.normal(size=1000)
    >>> t = Trunk(min_leaf_rows=200, max_leaves=4).fit(X, y)
    >>> t.n_leaves_ <= 4, bool((np.bincount(t.apply(X)) >= 200).all())
    (True, True)
    """

    _parameter_constraints: dict = {
        "max_leaves": [Interval(Integral, 1, None, closed="left"), None],
        "min_leaf_rows": [Interval(Integral, 1, None, closed="left"), None],
        "min_leaf_weight": [Interval(Real, 0, None, closed="left"), None],
        "max_depth": [Interval(Integral, 0, None, closed="left"), None],
        "max_bins": [Interval(Integral, 2, MAX_BINS, closed="both")],
        "task": [StrOptions({"regression", "classification"})],
        "n_classes": [Interval(Integral, 1, None, closed="left"), None],
    }

    def __init__(
        self,
        max_leaves: int | None = None,
        min_leaf_rows: int | None = None,
        min_leaf_weight: float | None = None,
        max_depth: int | None = None,
        max_bins: int = MAX_BINS,
        task: str = "regression",
        n_classes: int | None = None,
    ) -> None:
        self.max_leaves = max_leaves
        self.min_leaf_rows = min_leaf_rows
        self.min_leaf_weight = min_leaf_weight
        self.max_depth = max_depth
        self.max_bins = max_bins
        self.task = task
        self.n_classes = n_classes

    # ------------------------------------------------------------------ validation

    def _check_X(self, X: Any, reset: bool) -> np.ndarray:
        X = validate_data(self, X, reset=reset, dtype=np.float64, ensure_all_finite=False)
        check_finite(X, getattr(self, "feature_names_in_", None), "X")
        return X

    def _check_y(self, y: Any, n: int) -> tuple[np.ndarray, int | None]:
        if y is None:
            raise ValueError("Trunk requires y to be passed, but the target y is None.")
        y = column_or_1d(y, warn=True)
        if y.shape[0] != n:
            raise ValueError(f"y has {y.shape[0]} rows but X has {n}.")
        if self.task == "regression":
            y = np.asarray(y, dtype=np.float64)
            check_finite(y[:, None], ["y"], "y")
            return y, None
        if y.dtype.kind not in "iub":
            yf = np.asarray(y, dtype=np.float64)
            bad = int(np.sum(~np.isfinite(yf) | (yf != np.round(yf))))
            if bad:
                raise ValueError(
                    f"classification y must hold integer class codes 0 .. C-1; {bad} of "
                    f"{n} values are not integers (encode the labels first)."
                )
        codes = np.asarray(y, dtype=np.int64)
        n_classes = int(self.n_classes) if self.n_classes is not None else int(codes.max()) + 1
        bad = int(np.sum((codes < 0) | (codes >= n_classes)))
        if bad:
            raise ValueError(
                f"y holds {bad} class code(s) outside 0 .. {n_classes - 1} "
                f"(n_classes={n_classes}); encode the labels as 0 .. C-1."
            )
        return codes, n_classes

    @staticmethod
    def _check_weight(sample_weight: Any, n: int) -> np.ndarray | None:
        if sample_weight is None:
            return None
        w = np.asarray(sample_weight, dtype=np.float64)
        if w.ndim != 1 or w.shape[0] != n:
            raise ValueError(f"sample_weight has shape {w.shape}, expected ({n},).")
        check_finite(w[:, None], ["sample_weight"], "sample_weight")
        neg = int(np.sum(w < 0))
        if neg:
            raise ValueError(f"sample_weight has {neg} negative value(s) out of {n}.")
        if not w.sum() > 0:
            raise ValueError("sample_weight sums to zero: the trunk has no weight to split.")
        return w

    # ------------------------------------------------------------------ fit / apply

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        bin_edges: Sequence[Any] | None = None,
    ) -> Trunk:
        """Grow the trunk on (X, y) (paper Sec. 2.2, 4).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Finite numeric features.
        y : array-like of shape (n_samples,)
            Labels (regression) or class codes ``0 .. C-1`` (classification).
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative weights, e.g. Bayesian-bootstrap draws for a posterior trunk.
        bin_edges : sequence of array-like, optional
            Reuse these edges (e.g. ``other.bin_edges_`` when retraining or drawing
            posterior trunks) instead of computing quantile edges from ``X``.

        Returns
        -------
        self : Trunk
        """
        self._validate_params()
        with unchanged_on_error(self):
            X = self._check_X(X, reset=True)
            n, d = X.shape
            y, n_classes = self._check_y(y, n)
            w = self._check_weight(sample_weight, n)
            if bin_edges is None:
                edges = binning.bin_edges(X, self.max_bins)
            else:
                edges = binning.check_bin_edges(bin_edges, d)
            n_bins = binning.n_bins_of(edges)
            S = row_statistics(y, w, self.task, n_classes)
            source = BinnedSource(binning.bin_data(X, edges), S, n_bins)
            trunk = grow_trunk(
                source, edges, self.task, n_classes, max_leaves=self.max_leaves,
                min_leaf_rows=self.min_leaf_rows, min_leaf_weight=self.min_leaf_weight,
                max_depth=self.max_depth,
            )
        self._set_fitted(trunk, edges, n_classes)
        return self

    def _set_fitted(self, trunk: TrunkArrays, edges: list[np.ndarray],
                    n_classes: int | None) -> None:
        self.trunk_ = trunk
        self.bin_edges_ = edges
        self.n_leaves_ = trunk.n_leaves
        stats = trunk.stats[trunk.leaf_nodes()]
        if self.task == "regression":
            self.leaf_values_ = stats[:, 2] / stats[:, 1]
        else:
            self.n_classes_ = int(n_classes)
            self.leaf_values_ = stats[:, 1:] / stats[:, 1:].sum(axis=1, keepdims=True)

    def apply(self, X: Any) -> np.ndarray:
        """Leaf id (``0 .. n_leaves_ - 1``, the branch) of every row.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)

        Returns
        -------
        leaf : ndarray of shape (n_samples,), int64
            ``x[feature] <= threshold`` goes left at every internal node.
        """
        check_is_fitted(self)
        X = self._check_X(X, reset=False)
        t = self.trunk_
        out = np.empty(X.shape[0], INDEX)
        _apply_raw(X, t.feature, t.threshold, t.left, t.right, t.leaf_id, out)
        return out

    # ------------------------------------------------------------------ rules

    def __str__(self) -> str:
        """A fitted trunk prints as its rules (:meth:`export_text`)."""
        return self.export_text() if hasattr(self, "trunk_") else repr(self)

    def export_text(self, feature_names: Sequence[str] | None = None, decimals: int = 3) -> str:
        """The trunk as readable rules, one line per node (as ``sklearn.tree.export_text``).

        Parameters
        ----------
        feature_names : sequence of str, optional
            Names of the features; default ``feature_names_in_`` or ``feature_<f>``.
        decimals : int, default=3
            Decimals of thresholds and values.

        Returns
        -------
        text : str

        Examples
        --------
        >>> import numpy as np
        >>> X = np.arange(8.0)[:, None]; y = (X[:, 0] > 3).astype(float)
        >>> print(Trunk(min_leaf_rows=2).fit(X, y).export_text(["age"]))
        |--- age <= 3.500
        |   |--- leaf 0: value 0.000 (rows 4, weight 4.000)
        |--- age >  3.500
        |   |--- leaf 1: value 1.000 (rows 4, weight 4.000)
        """
        check_is_fitted(self)
        if feature_names is None:
            names = getattr(self, "feature_names_in_", None)
            if names is None:
                names = [f"feature_{f}" for f in range(self.n_features_in_)]
        else:
            names = list(feature_names)
            if len(names) != self.n_features_in_:
                raise ValueError(
                    f"feature_names has {len(names)} names but the trunk has "
                    f"{self.n_features_in_} features."
                )
        t = self.trunk_
        fmt = f"{{:.{int(decimals)}f}}"
        lines: list[str] = []
        stack: list[tuple[int, int, bool]] = [(0, 0, False)]  # (node, depth, right header)
        while stack:
            j, depth, header = stack.pop()
            bar = "|   " * depth + "|--- "
            if header:
                lines.append(f"{bar}{names[t.feature[j]]} >  {fmt.format(t.threshold[j])}")
                stack.append((int(t.right[j]), depth + 1, False))
            elif t.feature[j] == NO_NODE:
                leaf = int(t.leaf_id[j])
                v = self.leaf_values_[leaf]
                if np.ndim(v):
                    value = "[" + ", ".join(fmt.format(x) for x in v) + "]"
                else:
                    value = fmt.format(v)
                lines.append(f"{bar}leaf {leaf}: value {value} "
                             f"(rows {t.n_rows[j]}, weight {fmt.format(t.weight[j])})")
            else:
                lines.append(f"{bar}{names[t.feature[j]]} <= {fmt.format(t.threshold[j])}")
                stack.append((j, depth, True))
                stack.append((int(t.left[j]), depth + 1, False))
        return "\n".join(lines)

    # ------------------------------------------------------------------ persistence

    def _get_state(self) -> dict:
        """Fitted state for ``model.save``: JSON scalars and numpy arrays (``LAYOUT.md``)."""
        check_is_fitted(self)
        names = getattr(self, "feature_names_in_", None)
        return {
            "n_features_in_": int(self.n_features_in_),
            "feature_names_in_": None if names is None else [str(s) for s in names],
            "n_classes_": int(self.n_classes_) if self.task == "classification" else None,
            "bin_edges_": [np.asarray(e) for e in self.bin_edges_],
            "trunk_": self.trunk_.to_dict(),
        }

    def _set_state(self, state: dict) -> None:
        """Restore the fitted state written by :meth:`_get_state`."""
        missing = [key for key in ("n_features_in_", "bin_edges_", "trunk_") if key not in state]
        if missing:
            raise ValueError(f"Trunk state is missing {missing}.")
        trunk = TrunkArrays.from_dict(state["trunk_"])
        d = state_int(state, "n_features_in_", 1)
        edges = binning.check_bin_edges(state["bin_edges_"], d)
        n_classes = state.get("n_classes_")
        if self.task == "classification":
            n_classes = state_int(state, "n_classes_", 1)
        k = n_stats(self.task, n_classes)
        if trunk.stats.shape[1] != k:
            raise ValueError(
                f"Trunk state has {trunk.stats.shape[1]} statistics per node, expected {k} "
                f"for task={self.task!r}."
            )
        check_trunk(trunk, edges, self.task)
        names = state_names(state, "feature_names_in_", d)
        self.__dict__.pop("feature_names_in_", None)
        self.__dict__.pop("n_classes_", None)
        self.n_features_in_ = d
        if names is not None:
            self.feature_names_in_ = names
        self._set_fitted(trunk, edges, n_classes)
