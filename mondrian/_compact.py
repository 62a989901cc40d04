"""Compact, predict-only Mondrian trees: what prediction needs, in the narrowest exact dtypes.

A fitted tree (:class:`mondrian._tree.TreeArrays`) keeps the online state: parent pointers,
every node's float64 box and statistics, and per-leaf lists of rows of the forest's data
buffer, which the online algorithm resamples. Prediction needs much less. A
:class:`CompactTree` stores, in depth-first preorder (root first, a left child right after
its parent):

========== ============================== =================================================
array      dtype, shape                   meaning
========== ============================== =================================================
feature    narrowest signed int [n]       split dimension, ``-1`` at a leaf: the preorder
                                          sequence of leaf flags is the whole structure
threshold  float64 [n_internal]           split locations (float32 would move rows)
tau        float64 [n_internal]           split times (leaves: the one ``leaf_tau``)
lower,     float32 [n_leaves, D]          leaf extents rounded outward to float32, exactly
upper                                     the extents the packed predictor uses
counts     narrowest unsigned int         training points per leaf (regression) or per
           [n_leaves] or [n_leaves, K]    leaf and class (classification)
sums       float64 [n, 2]                 regression: sum y, sum y^2 below every node
========== ============================== =================================================

Everything else is derived exactly when the posterior is built (:meth:`CompactTree.expand`):
children and parents from the preorder, an internal node's extent as the union of its
children's (outward rounding to float32 is monotone, so the union of rounded boxes is the
rounded union, and a full tree's internal box is the union of its children's), its count as
the sum of its children's and its IKN counts by thesis Alg. 5.3. :func:`compact_state`
checks those identities on the full tree, so the posterior and the predictor of an expanded
compact tree are those of the full tree, bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import NamedTuple

import numba
import numpy as np

from basics.bounds import check_sums
from basics.flat_tree import INDEX, NO_NODE, preorder
from basics.jit import JIT
from basics.tasks import REGRESSION, task_code
from basics.validation import state_array

from ._records import MondrianTree
from ._tree import TreeArrays

__all__ = ["CompactNodes", "CompactTree", "PredictOnlyError", "compact_state"]


class CompactNodes(NamedTuple):
    """The arrays of a compact tree as :func:`expand_nodes` reads them: ``feature`` (int64,
    preorder, ``-1`` at leaves), ``threshold`` and ``tau`` per internal node, ``lower``,
    ``upper`` (float32) and ``counts`` (float64, one column per class; one for regression)
    per leaf."""

    feature: np.ndarray
    threshold: np.ndarray
    tau: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    counts: np.ndarray


class PredictOnlyError(ValueError):
    """An update (``partial_fit``) of a compact, predict-only Mondrian forest."""


_STRUCTURE_ERRORS = {
    1: "node {} comes after the last leaf of the tree (the preorder is complete before it)",
    2: "node {} has a feature index out of range",
    3: "the preorder ends with {} subtree(s) missing (an internal node without children)",
}


@numba.njit(**JIT)
def preorder_structure(feature, n_features, right):
    """``(0, 0)`` if ``feature`` (``-1`` at leaves) is the preorder of one binary tree whose
    internal nodes have two children, else ``(error code, node)``; fills ``right``.

    In preorder the left child of internal node ``k`` is ``k + 1``; the node after a leaf is
    the right child of the latest internal node still without one. One O(n) pass; every
    feature is range-checked, and the tree must end exactly at the last node.
    """
    n = feature.shape[0]
    stack = np.empty(n + 1, INDEX)
    top = 0
    needed = 1  # subtrees still to read
    for k in range(n):
        if needed == 0:
            return 1, k
        f = feature[k]
        if f < -1 or f >= n_features:
            return 2, k
        right[k] = NO_NODE
        if k > 0 and feature[k - 1] < 0:
            top -= 1
            right[stack[top]] = k
        if f >= 0:
            stack[top] = k
            top += 1
            needed += 1
        else:
            needed -= 1
    if needed != 0:
        return 3, needed
    return 0, 0


@numba.njit(**JIT)
def expand_nodes(nodes, leaf_tau, ikn, out):
    """Per-node arrays of a checked preorder tree ``nodes`` (:class:`CompactNodes`,
    :func:`preorder_structure`) into ``out`` (:class:`._records.MondrianTree`, whose
    ``right`` is already filled; ``stats`` receives the counts).

    Leaves take their rows of the per-leaf inputs and the split time ``leaf_tau``; internal
    nodes their rows of the per-internal-node inputs, then, bottom-up (reverse preorder),
    the union of their children's boxes and their counts: the sum of the children's, or with
    ``ikn`` the IKN counts ``min(c_left, 1) + min(c_right, 1)`` (thesis Alg. 5.3).
    """
    feature, threshold_in, tau_in, lower_in, upper_in, counts_in = nodes
    left, right, parent, threshold, tau = (out.left, out.right, out.parent, out.threshold,
                                           out.tau)
    lower, upper, counts = out.lower, out.upper, out.stats
    n = feature.shape[0]
    D = lower.shape[1]
    K = counts.shape[1]
    i = 0
    leaf = 0
    parent[0] = NO_NODE
    for k in range(n):
        if feature[k] >= 0:
            left[k] = k + 1
            parent[k + 1] = k
            parent[right[k]] = k
            threshold[k] = threshold_in[i]
            tau[k] = tau_in[i]
            i += 1
        else:
            left[k] = NO_NODE
            threshold[k] = 0.0
            tau[k] = leaf_tau
            for d in range(D):
                lower[k, d] = lower_in[leaf, d]
                upper[k, d] = upper_in[leaf, d]
            for c in range(K):
                counts[k, c] = counts_in[leaf, c]
            leaf += 1
    for k in range(n - 1, -1, -1):
        if feature[k] >= 0:
            a = k + 1
            b = right[k]
            for d in range(D):
                lower[k, d] = min(lower[a, d], lower[b, d])
                upper[k, d] = max(upper[a, d], upper[b, d])
            for c in range(K):
                if ikn:
                    counts[k, c] = min(counts[a, c], 1.0) + min(counts[b, c], 1.0)
                else:
                    counts[k, c] = counts[a, c] + counts[b, c]


def round_outward(lower: np.ndarray, upper: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``lower`` rounded down and ``upper`` up to float32: the predictor's extents."""
    lo = lower.astype(np.float32)
    up = upper.astype(np.float32)
    lo = np.where(lo > lower, np.nextafter(lo, np.float32(-np.inf)), lo)
    up = np.where(up < upper, np.nextafter(up, np.float32(np.inf)), up)
    return lo, up


def _narrow(values: np.ndarray, signed: bool) -> np.ndarray:
    """``values`` (integers) in the narrowest integer dtype that holds them."""
    top = int(values.max()) if values.size else 0
    dtype = np.min_scalar_type(-max(top + 1, 1)) if signed else np.min_scalar_type(top)
    return values.astype(dtype)


@dataclass
class CompactTree:
    """A predict-only Mondrian tree (see the module docstring for the arrays)."""

    feature: np.ndarray
    threshold: np.ndarray
    tau: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    counts: np.ndarray
    sums: np.ndarray | None
    leaf_tau: float

    @property
    def n_nodes(self) -> int:
        return int(self.feature.shape[0])

    @property
    def n_leaves(self) -> int:
        return int(self.lower.shape[0])

    @property
    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in self._arrays().values()))

    def _arrays(self) -> dict[str, np.ndarray]:
        return {f.name: getattr(self, f.name) for f in fields(self)
                if isinstance(getattr(self, f.name), np.ndarray)}

    def to_state(self) -> dict:
        """The tree as a persistence state (``ebf.artifact``)."""
        return {**self._arrays(), "leaf_tau": float(self.leaf_tau)}

    def root_stats(self) -> np.ndarray:
        """Regression ``(n, sum y, sum y^2)`` of all the tree's training points."""
        return np.array([float(self.counts.sum(dtype=np.float64)), *self.sums[0]])

    def expand(self, task: str) -> TreeArrays:
        """The tree as :class:`TreeArrays` in preorder without point lists (for the
        posterior and the predictor, which read nothing else)."""
        n = self.n_nodes
        D = self.lower.shape[1]
        feature = self.feature.astype(INDEX)
        right = np.empty(n, INDEX)
        preorder_structure(feature, D, right)
        counts_in = self.counts.astype(np.float64).reshape(self.n_leaves, -1)
        K = counts_in.shape[1]
        out = MondrianTree.of(left=np.empty(n, INDEX), right=right, parent=np.empty(n, INDEX),
                              feature=feature, threshold=np.empty(n), tau=np.empty(n),
                              lower=np.empty((n, D)), upper=np.empty((n, D)),
                              stats=np.empty((n, K)))
        nodes = CompactNodes(feature, self.threshold, self.tau, self.lower, self.upper,
                             counts_in)
        expand_nodes(nodes, float(self.leaf_tau), task != REGRESSION, out)
        stats = out.stats if self.sums is None else np.column_stack([out.stats, self.sums])
        return TreeArrays(**out._replace(stats=np.ascontiguousarray(stats))._asdict(),
                          root=0, n_nodes=n)

    @classmethod
    def from_state(cls, state: dict, n_features: int, n_stats: int, n_points: int,
                   task: str) -> CompactTree:
        """Rebuild a tree from :meth:`to_state`, refusing anything a kernel could misread.

        Checked: dtypes and shapes, the preorder structure (features in range, every
        internal node with two children), finite thresholds, split times that grow from the
        root down to ``leaf_tau``, finite leaf boxes with ``lower <= upper``, at least one
        point per leaf and ``n_points`` in all, finite sums with non-negative sums of
        squares, within their bounds (:func:`basics.bounds.check_sums`). Raises
        ``ValueError`` naming the node or the array.
        """
        regression = task_code(task) == task_code(REGRESSION)
        feature = _int_array(state, "feature", signed=True)
        n = feature.shape[0]
        if not 1 <= n <= max(2 * n_points - 1, 1):
            raise ValueError(f"feature has {n} nodes, impossible for {n_points} points")
        right = np.empty(n, INDEX)
        code, where = preorder_structure(feature.astype(INDEX), n_features, right)
        if code:
            raise ValueError(_STRUCTURE_ERRORS[code].format(where))
        n_leaves = int(np.count_nonzero(feature < 0))
        n_internal = n - n_leaves
        leaf_tau = state["leaf_tau"]
        if isinstance(leaf_tau, bool) or not isinstance(leaf_tau, (int, float)) or not (
                leaf_tau >= 0):
            raise ValueError(f"leaf_tau must be a number >= 0 (inf allowed), got {leaf_tau!r:.60}")
        tree = cls(
            feature=feature,
            threshold=state_array(state, "threshold", np.float64, (n_internal,), owned=False),
            tau=state_array(state, "tau", np.float64, (n_internal,), owned=False),
            lower=state_array(state, "lower", np.float32, (n_leaves, n_features), owned=False),
            upper=state_array(state, "upper", np.float32, (n_leaves, n_features), owned=False),
            counts=_int_array(state, "counts", signed=False),
            sums=(state_array(state, "sums", np.float64, (n, 2), owned=False)
                  if regression else None),
            leaf_tau=float(leaf_tau),
        )
        want = (n_leaves,) if regression else (n_leaves, n_stats)
        if tree.counts.shape != want:
            raise ValueError(f"counts has shape {tree.counts.shape}, expected {want}")
        _check_values(tree, right, n_points)
        return tree


def _int_array(state: dict, key: str, signed: bool) -> np.ndarray:
    """``state[key]`` as it is stored: an integer array (non-negative unless ``signed``)."""
    a = state[key]
    if not isinstance(a, np.ndarray) or a.dtype.kind not in "iu":
        found = f"a {a.dtype} array" if isinstance(a, np.ndarray) else repr(a)[:60]
        raise ValueError(f"{key} must be an integer array, got {found}")
    if a.size and (int(a.min()) < (-1 if signed else 0)):
        raise ValueError(f"{key} holds {int(a.min())}, below {-1 if signed else 0}")
    return np.require(a, None, ["C"])


def _check_values(tree: CompactTree, right: np.ndarray, n_points: int) -> None:
    """The float and count checks of :meth:`CompactTree.from_state` (structure checked)."""
    internal = np.flatnonzero(tree.feature >= 0)
    leaves = np.flatnonzero(tree.feature < 0)
    tau = np.empty(tree.n_nodes)
    tau[internal] = tree.tau
    tau[leaves] = tree.leaf_tau
    bad = ~np.isfinite(tree.threshold) | ~np.isfinite(tree.tau) | ~(tree.tau >= 0)
    bad |= (tau[internal + 1] < tree.tau) | (tau[right[internal]] < tree.tau)
    if bad.any():
        raise ValueError(f"node {internal[np.argmax(bad)]} has a non-finite threshold or "
                         "split time, or a split time after one of its children's (threshold, "
                         "tau, leaf_tau)")
    box = np.isfinite(tree.lower) & np.isfinite(tree.upper) & (tree.lower <= tree.upper)
    if not box.all():
        raise ValueError(f"leaf node {leaves[np.argmin(box.all(axis=1))]} has a box (lower, "
                         "upper) with non-finite or crossed bounds")
    per_leaf = tree.counts.reshape(tree.n_leaves, -1)
    if int(per_leaf.max()) > n_points:
        raise ValueError(f"leaf node {leaves[np.argmax(per_leaf.max(axis=1))]} counts more "
                         f"points than the {n_points} seen")
    totals = per_leaf.sum(axis=1, dtype=np.int64)
    if totals.min() < 1:
        raise ValueError(f"leaf node {leaves[np.argmin(totals)]} holds no training point")
    if int(totals.sum()) != n_points:
        raise ValueError(f"the leaves hold {int(totals.sum())} points, not the {n_points} seen")
    if tree.sums is not None:
        ok = np.isfinite(tree.sums).all(axis=1) & (tree.sums[:, 1] >= 0)
        if not ok.all():
            raise ValueError(f"node {np.argmin(ok)} has non-finite sums or a negative sum "
                             "of squares")
        # the sums of a node's rows: a leaf's count is stored, an internal node's is derived
        # (expand), at most n_points (basics.bounds; either keeps its mean finite)
        rows = np.full(tree.n_nodes, float(n_points))
        rows[leaves] = tree.counts
        check_sums("sums", tree.sums, rows)


def compact_state(tree: TreeArrays, task: str) -> dict:
    """The state of the :class:`CompactTree` of a full tree.

    Raises ``ValueError`` naming the slot if the full tree breaks an identity the compact
    form derives (leaves share one split time; an internal node's box is the union of its
    children's; its counts follow from theirs): then no compact form predicts exactly alike.
    """
    order = preorder(tree.left, tree.right, tree.root, tree.n_nodes)
    feature = tree.feature[order]
    is_leaf = feature < 0
    leaves, internal = order[is_leaf], order[~is_leaf]
    leaf_tau = float(tree.tau[leaves[0]])
    odd = tree.tau[leaves] != leaf_tau
    if odd.any():
        raise ValueError(f"leaf slot {leaves[np.argmax(odd)]} has split time "
                         f"{tree.tau[leaves[np.argmax(odd)]]}, the leaf before {leaf_tau}")
    lower, upper = round_outward(tree.lower[order], tree.upper[order])
    stats = tree.stats[order]
    regression = task_code(task) == task_code(REGRESSION)
    counts = stats[is_leaf, 0] if regression else stats[is_leaf]
    if not np.array_equal(counts, np.round(counts)):
        raise ValueError("leaf counts must be whole numbers")
    state = {
        "feature": _narrow(feature, signed=True),
        "threshold": tree.threshold[internal].copy(),
        "tau": tree.tau[internal].copy(),
        "lower": lower[is_leaf],
        "upper": upper[is_leaf],
        "counts": _narrow(counts.astype(np.int64), signed=False),
        "leaf_tau": leaf_tau,
    }
    if regression:
        state["sums"] = np.ascontiguousarray(stats[:, 1:3])
    derived = CompactTree(**{f.name: state.get(f.name) for f in fields(CompactTree)}).expand(task)
    same = ((derived.lower == lower).all(axis=1) & (derived.upper == upper).all(axis=1)
            & (derived.stats == stats).all(axis=1))
    if not same.all():
        raise ValueError(f"slot {order[np.argmin(same)]}: its box or counts are not those of "
                         "its children combined")
    return state
