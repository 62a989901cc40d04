"""Flat Bayesian decision trees grown node by node (thesis Sec. 3.2.3 and 4.2.4).

A tree is a handful of arrays of a capacity ``C`` (node slots) and a count ``n_nodes`` of
live nodes; slot 0 is the root and the two children of a node are appended together, after
their parent, so slot order is topological (a single forward pass over the slots sees every
parent before its children). See ``docs/families/bayesian-trees.md`` for the layout and for how a
sequential Monte Carlo particle reuses it.

| array | dtype | meaning |
|---|---|---|
| ``feature`` | int64[C] | split dimension delta_j, ``-1`` at a leaf |
| ``threshold`` | float64[C] | split location xi_j (``x[feature] <= xi_j`` left), NaN at leaves |
| ``left``, ``right``, ``parent`` | int64[C] | child / parent slot, ``-1`` if none |
| ``depth`` | int64[C] | depth of the node (root 0), the exponent of eq. (3.3) |

The data extent of a node is never stored: it is the extent of the node's rows, which
:func:`partition_rows` lays out as one contiguous segment per node of a row permutation
(``order[start[j]:start[j] + count[j]]`` are the rows of node ``j``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from basics.flat_tree import INDEX, NO_NODE, check_tree_structure
from basics.jit import JIT
from basics.validation import NAN_FIX, check_finite

from ._records import Splits, Tree

__all__ = ["BayesTree", "apply", "check_X", "partition_rows"]


@dataclass
class BayesTree:
    """The arrays of one Bayesian decision tree (layout in the module docstring).

    Parameters
    ----------
    feature, threshold, left, right, parent, depth : ndarray of shape (capacity,)
        Node arrays; slots from ``n_nodes`` on are never read.
    n_nodes : int
        Live nodes (slots ``0 .. n_nodes - 1``).
    """

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    parent: np.ndarray
    depth: np.ndarray
    n_nodes: int = 1

    ARRAYS = ("feature", "threshold", "left", "right", "parent", "depth")

    @classmethod
    def root_only(cls, n_rows: int) -> BayesTree:
        """The trivial tree T(0) = {root}, with room for every tree over ``n_rows`` rows.

        Every split sends at least one row to each side (eq. 3.3-3.4), so a tree over N rows
        has at most N leaves and 2N - 1 nodes: kernels never reallocate.
        """
        cap = max(2 * int(n_rows) - 1, 1)
        tree = cls(
            feature=np.full(cap, NO_NODE, INDEX), threshold=np.full(cap, np.nan),
            left=np.full(cap, NO_NODE, INDEX), right=np.full(cap, NO_NODE, INDEX),
            parent=np.full(cap, NO_NODE, INDEX), depth=np.zeros(cap, INDEX), n_nodes=1,
        )
        return tree

    def args(self) -> tuple[np.ndarray, ...]:
        """The node arrays in kernel-argument order (``ARRAYS``)."""
        return tuple(getattr(self, name) for name in self.ARRAYS)

    def splits(self) -> Splits:
        """The links as a :class:`~.records.Splits` record (what a descent reads)."""
        return Splits(self.feature, self.threshold, self.left, self.right)

    def record(self, n_rows: int, order: np.ndarray | None = None,
               start: np.ndarray | None = None, count: np.ndarray | None = None) -> Tree:
        """The node arrays (shared, not copied) and a row partition as a
        :class:`~.records.Tree` record.

        Without ``order``, ``start``, ``count``: every row in the root (the partition
        :func:`partition_rows` starts from).
        """
        cap = self.feature.shape[0]
        if order is None:
            order = np.arange(n_rows, dtype=INDEX)
            start = np.zeros(cap, INDEX)
            count = np.zeros(cap, INDEX)
            count[0] = n_rows
        return Tree(*self.args(), order, start, count, np.empty(max(int(n_rows), 1), INDEX))

    def copy(self) -> BayesTree:
        """A copy of the same capacity (an SMC particle's tree after resampling)."""
        return BayesTree(*(a.copy() for a in self.args()), n_nodes=self.n_nodes)

    def trimmed(self) -> dict[str, np.ndarray]:
        """The live part of every array (persistence, size reports, oracles)."""
        return {name: getattr(self, name)[: self.n_nodes] for name in self.ARRAYS}

    @property
    def is_leaf(self) -> np.ndarray:
        """Boolean mask of the live nodes that are leaves."""
        return self.feature[: self.n_nodes] == NO_NODE

    @property
    def n_leaves(self) -> int:
        return int(self.is_leaf.sum())

    @property
    def max_depth(self) -> int:
        return int(self.depth[: self.n_nodes].max())

    def check(self, n_features: int) -> None:
        """Raise ``ValueError`` naming the node unless the live arrays are one valid tree.

        Children after their parent, indices and features in range, finite thresholds
        (:func:`basics.flat_tree.check_tree_structure`), parent pointers and depths
        consistent with the child links.
        """
        a = self.trimmed()
        n = self.n_nodes
        if not 1 <= n <= self.feature.shape[0]:
            raise ValueError(f"n_nodes={n} is outside [1, capacity={self.feature.shape[0]}]")
        check_tree_structure(a["left"], a["right"], a["feature"], a["threshold"],
                             np.array([0, n], INDEX), n_features, where="node {j}")
        inner = np.flatnonzero(a["feature"] != NO_NODE)
        expected_parent = np.full(n, NO_NODE, INDEX)
        expected_depth = np.zeros(n, INDEX)
        for j in inner:  # forward order: a parent's depth is final before its children's
            for c in (a["left"][j], a["right"][j]):
                expected_parent[c] = j
                expected_depth[c] = expected_depth[j] + 1
        bad = np.flatnonzero((a["parent"] != expected_parent) | (a["depth"] != expected_depth))
        if bad.size:
            j = int(bad[0])
            raise ValueError(
                f"node {j}: parent {a['parent'][j]} / depth {a['depth'][j]} disagree with the "
                f"child links (parent {expected_parent[j]}, depth {expected_depth[j]}); "
                f"{bad.size} node(s) affected, rebuild the tree with split_node"
            )


def check_X(X: np.ndarray) -> np.ndarray:
    """``X`` as a C-contiguous float64 matrix of at least one row and one column, all finite.

    Raises ``ValueError`` naming the columns with NaN or inf, or the empty dimension.
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D array (rows, features), got {X.ndim} dimension(s); "
                         "reshape a single feature with X.reshape(-1, 1)")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"X is empty (shape {X.shape}); a tree prior needs at least one row "
                         "and one feature")
    check_finite(X, None, "X", fix=NAN_FIX)
    return X


def partition_rows(tree: BayesTree, X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every node's rows as one contiguous segment of a row permutation.

    ``tree`` is a :class:`BayesTree` and ``X`` its training rows, float64 of shape
    (n_rows, n_features) (:func:`check_X`).

    Returns
    -------
    order : ndarray of shape (n_rows,), int64
        A permutation of the rows; node ``j`` owns ``order[start[j]:start[j] + count[j]]``,
        and the segments of a node's children split its own (left child first).
    start, count : ndarray of shape (capacity,), int64
        Segment of every live node (slots beyond ``n_nodes`` are zero).
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    t = tree.record(X.shape[0])
    _partition(t, tree.n_nodes, X)
    return t.order, t.start, t.count


def apply(tree: BayesTree, X: np.ndarray) -> np.ndarray:
    """Leaf slot of every row of ``X`` (``x[feature] <= threshold`` goes left).

    Parameters
    ----------
    tree : BayesTree
    X : ndarray of shape (n_rows, n_features), float64

    Returns
    -------
    ndarray of shape (n_rows,), int64
    """
    return _apply(tree.splits(), np.ascontiguousarray(X, dtype=np.float64))


# ---------------------------------------------------------------------------------- kernels


@njit(**JIT)
def descend(t, X, i, j):  # pragma: no cover - numba
    """The leaf row ``i`` of ``X`` reaches from node ``j`` of the flat tree ``t`` (any record
    with the fields of :class:`~.records.Splits`; ``x[feature] <= threshold`` goes left):
    the one descent of every Bayesian-tree kernel."""
    # fields bound once: read through the record in the loop, the descent is ~25% slower
    feature = t.feature
    threshold = t.threshold
    left = t.left
    right = t.right
    while feature[j] != NO_NODE:
        j = left[j] if X[i, feature[j]] <= threshold[j] else right[j]
    return j


@njit(**JIT)
def _apply(t, X):  # pragma: no cover - numba
    out = np.empty(X.shape[0], INDEX)
    for i in range(X.shape[0]):
        out[i] = descend(t, X, i, 0)
    return out


@njit(inline="always", **JIT)
def _close_split(t, j, s, nl, nr):  # pragma: no cover - numba
    """End a stable partition of node ``j``'s segment (from ``s``): its ``nl`` left rows
    are in place, its ``nr`` right rows in ``t.buf`` follow them; set the children's
    segments."""
    order = t.order
    for i in range(nr):
        order[s + nl + i] = t.buf[i]
    t.start[t.left[j]] = s
    t.count[t.left[j]] = nl
    t.start[t.right[j]] = s + nl
    t.count[t.right[j]] = nr


@njit(inline="always", **JIT)
def split_segment(X, t, j):  # pragma: no cover - numba
    """Stable in-place partition of node ``j``'s row segment by its rule
    ``X[:, feature[j]] <= threshold[j]`` between its children ``left[j]``, ``right[j]``.

    The left rows keep their order at the front, the right rows follow in order (through
    ``t.buf``); sets the children's segments.
    """
    order = t.order
    buf = t.buf
    f = t.feature[j]
    thr = t.threshold[j]
    s = t.start[j]
    nl = 0
    nr = 0
    for i in range(s, s + t.count[j]):
        row = order[i]
        if X[row, f] <= thr:
            order[s + nl] = row  # s + nl <= i: never overwrites a row not yet read
            nl += 1
        else:
            buf[nr] = row
            nr += 1
    _close_split(t, j, s, nl, nr)


@njit(**JIT)
def _partition(t, n_nodes, X):  # pragma: no cover - numba
    feature = t.feature
    for j in range(n_nodes):  # parents before children: a node's segment is set first
        if feature[j] != NO_NODE:
            split_segment(X, t, j)


@njit(**JIT)
def split_node(t, n_nodes, X, j, f, thr):  # pragma: no cover - numba
    """Turn leaf ``j`` of the :class:`~.records.Tree` ``t`` into an internal node split at
    ``x[f] <= thr``; return the new ``n_nodes``.

    Appends the two children (left at ``n_nodes``, right at ``n_nodes + 1``) and splits
    ``j``'s row segment between them: the grow step of the generative process (Sec. 3.2.3)
    and of every SMC proposal.
    """
    n_new = link_children(t, n_nodes, j, f, thr)
    split_segment(X, t, j)
    return n_new


@njit(inline="always", **JIT)
def link_children(t, n_nodes, j, f, thr):  # pragma: no cover - numba
    """The links of :func:`split_node` without the rows: leaf ``j`` becomes the split
    ``x[f] <= thr`` with two leaf children at ``n_nodes`` (left) and ``n_nodes + 1``;
    returns ``n_nodes + 2``."""
    lchild = n_nodes
    rchild = n_nodes + 1
    t.feature[j] = f
    t.threshold[j] = thr
    t.left[j] = lchild
    t.right[j] = rchild
    for c in (lchild, rchild):
        t.feature[c] = NO_NODE
        t.threshold[c] = np.nan
        t.left[c] = NO_NODE
        t.right[c] = NO_NODE
        t.parent[c] = j
        t.depth[c] = t.depth[j] + 1
    return n_nodes + 2


@njit(inline="always", **JIT)
def split_copy_sums(X, S, t, j, src, s_left, s_right):  # pragma: no cover - numba
    """Node ``j``'s rows, read from ``order[src:src + count[j]]``, partitioned by its rule
    into its own segment (``order[start[j]:]``, which must not overlap the source unless it
    is the source), with the sums of the per-row statistics ``S`` of each child into
    ``s_left``, ``s_right`` (branch free, in scalars, for three statistics such as the
    Normal's ``[1, y, y^2]``; a plain loop for other widths).

    The copy on split of the conditional SMC, the stable partition of
    :func:`split_segment` and :func:`~._likelihood.segment_stats` of both children in one
    pass: the rows keep their order on each side and are summed in it, so the sums are
    those of ``segment_stats`` bit for bit. Sets the children's segments.
    """
    order = t.order
    buf = t.buf
    f = t.feature[j]
    thr = t.threshold[j]
    s = t.start[j]
    nl = 0
    nr = 0
    l0 = 0.0
    l1 = 0.0
    l2 = 0.0
    r0 = 0.0
    r1 = 0.0
    r2 = 0.0
    normal = S.shape[1] == 3
    if not normal:
        s_left[:] = 0.0
        s_right[:] = 0.0
    if normal:
        # Branch free (3x faster: the side of a row is a coin flip, so a branch on it is
        # mispredicted half the time). A row is written to both places and only its side's
        # count moves; its statistics are added to both sides, times 1 or 0. Adding a zero
        # leaves a sum of finite values as it was, and scalar sums stay in registers.
        for i in range(src, src + t.count[j]):
            row = order[i]
            go_left = X[row, f] <= thr
            order[s + nl] = row  # s + nl <= i when in place: never a row not yet read
            buf[nr] = row
            nl += go_left
            nr += 1 - go_left
            m = 1.0 if go_left else 0.0
            a0 = S[row, 0]
            a1 = S[row, 1]
            a2 = S[row, 2]
            l0 += a0 * m
            l1 += a1 * m
            l2 += a2 * m
            r0 += a0 - a0 * m
            r1 += a1 - a1 * m
            r2 += a2 - a2 * m
    else:
        for i in range(src, src + t.count[j]):
            row = order[i]
            if X[row, f] <= thr:
                order[s + nl] = row
                nl += 1
                for k in range(S.shape[1]):
                    s_left[k] += S[row, k]
            else:
                buf[nr] = row
                nr += 1
                for k in range(S.shape[1]):
                    s_right[k] += S[row, k]
    _close_split(t, j, s, nl, nr)
    if normal:
        s_left[0] = l0
        s_left[1] = l1
        s_left[2] = l2
        s_right[0] = r0
        s_right[1] = r1
        s_right[2] = r2


@njit(inline="always", **JIT)
def node_extent(X, t, j, lower, upper):  # pragma: no cover - numba
    """Extent of node ``j``'s rows per dimension into ``lower``, ``upper``; return |V_j|.

    V_j is the set of dimensions along which the rows vary (``lower < upper``), eq. (3.4).
    """
    order = t.order
    s = t.start[j]
    n = t.count[j]
    n_valid = 0
    for d in range(X.shape[1]):  # dimension outer: the running extent stays in registers
        lo = np.inf
        hi = -np.inf
        for i in range(s, s + n):
            v = X[order[i], d]
            lo = min(lo, v)
            hi = max(hi, v)
        lower[d] = lo
        upper[d] = hi
        if lo < hi:
            n_valid += 1
    return n_valid


@njit(inline="always", **JIT)
def varying_dims(X, t, j, lower, upper):  # pragma: no cover - numba
    """|V_j| of node ``j`` (eq. 3.4), reading each dimension only up to the first row that
    differs from the segment's first: ``lower[d] < upper[d]`` exactly for the dimensions
    in V_j, but the values are the extent of those two rows only (:func:`dim_extent`
    completes a chosen dimension). O(D) for most nodes where :func:`node_extent` reads every
    row D times."""
    order = t.order
    s = t.start[j]
    n = t.count[j]
    first = order[s]
    n_valid = 0
    for d in range(X.shape[1]):
        v0 = X[first, d]
        lower[d] = v0
        upper[d] = v0
        for i in range(s + 1, s + n):
            v = X[order[i], d]
            if v != v0:
                lower[d] = min(v0, v)
                upper[d] = max(v0, v)
                n_valid += 1
                break
    return n_valid


@njit(inline="always", **JIT)
def dim_extent(X, t, j, d, lower, upper):  # pragma: no cover - numba
    """The extent of node ``j``'s rows along dimension ``d`` into ``lower[d]``,
    ``upper[d]`` (the values :func:`node_extent` gives there)."""
    order = t.order
    lo = np.inf
    hi = -np.inf
    for i in range(t.start[j], t.start[j] + t.count[j]):
        v = X[order[i], d]
        lo = min(lo, v)
        hi = max(hi, v)
    lower[d] = lo
    upper[d] = hi


@njit(inline="always", **JIT)
def node_varies(X, t, j):  # pragma: no cover - numba
    """Whether node ``j``'s rows vary along some dimension (|V_j| > 0 of eq. 3.4).

    Stops at the first row that differs from the segment's first: O(D) for most nodes, where
    :func:`node_extent` always reads every row.
    """
    order = t.order
    s = t.start[j]
    if t.count[j] < 2:
        return False
    first = order[s]
    for i in range(s + 1, s + t.count[j]):
        row = order[i]
        for d in range(X.shape[1]):
            if X[row, d] != X[first, d]:
                return True
    return False
