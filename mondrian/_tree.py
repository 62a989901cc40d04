"""Flat-array Mondrian trees: the arrays, their checks on load, and ``grow`` over the kernels.

The sampling kernels (batch and online) are in ``_sample.py``.

The layout is described in ``docs/families/mondrian-forests.md``. A tree never stores the
training data itself; each leaf keeps a linked list of *row ids* into the forest's shared
data buffer, because the online algorithm must be able to resample a paused block from its
points.

References
----------
Lakshminarayanan, Roy & Teh (2016), "Mondrian forests for large-scale regression when
uncertainty matters", Algorithms 1-4. Lakshminarayanan (2016), PhD thesis, Algorithms 5.1,
5.2, 5.5, 5.6 and the paused versions 5.9, 5.10 (Sec. 5.5.1, 5.5.4).
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter

import numba
import numpy as np

from basics.bounds import check_counts, check_sums
from basics.flat_tree import INDEX, NO_NODE, check_tree_structure, preorder
from basics.jit import JIT
from basics.tasks import REGRESSION_CODE, task_code
from basics.validation import state_array

from ._records import Growth, MondrianTree
from ._sample import build_tree, extend_tree


@dataclass
class TreeArrays:
    """The arrays of one Mondrian tree (the layout in ``docs/families/mondrian-forests.md``)."""

    left: np.ndarray
    right: np.ndarray
    parent: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    tau: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    stats: np.ndarray
    leaf_head: np.ndarray
    pt_next: np.ndarray
    root: int = 0
    n_nodes: int = 0

    #: The arrays, in the order of the kernels' record (``pt_next`` last: one per row).
    ARRAYS = MondrianTree._fields

    @classmethod
    def empty(cls, n_features: int, n_stats: int, n_points: int) -> TreeArrays:
        """An empty tree with room for ``n_points`` training points.

        Slots at or beyond ``n_nodes`` are never read, so they are left uninitialised
        (untouched memory costs nothing until a kernel writes a node there).
        """
        cap = max(2 * n_points, 2)
        return cls(
            left=np.empty(cap, INDEX),
            right=np.empty(cap, INDEX),
            parent=np.empty(cap, INDEX),
            feature=np.empty(cap, INDEX),
            threshold=np.empty(cap),
            tau=np.empty(cap),
            lower=np.empty((cap, n_features)),
            upper=np.empty((cap, n_features)),
            stats=np.empty((cap, n_stats)),
            leaf_head=np.empty(cap, INDEX),
            pt_next=np.full(max(n_points, 1), NO_NODE, INDEX),
        )

    def reserve(self, n_points: int) -> None:
        """Grow capacity (amortised doubling) so that ``n_points`` points fit.

        A Mondrian tree over N points has at most 2N - 1 nodes, so kernels never
        need to reallocate while inserting.
        """
        need_nodes = 2 * n_points
        cap = self.left.shape[0]
        if need_nodes > cap:
            new = max(need_nodes, 2 * cap)
            live = self.n_nodes  # slots beyond are never read: not copied, never touched
            for name in self.ARRAYS[:-1]:
                old = getattr(self, name)
                grown = np.empty((new,) + old.shape[1:], old.dtype)
                grown[:live] = old[:live]
                setattr(self, name, grown)
        if n_points > self.pt_next.shape[0]:
            old = self.pt_next
            grown = np.full(max(n_points, 2 * old.shape[0]), NO_NODE, INDEX)
            grown[: old.shape[0]] = old
            self.pt_next = grown

    def __deepcopy__(self, memo: dict) -> TreeArrays:
        """A copy of the same capacity holding the live nodes only: the slots beyond
        ``n_nodes`` are never read, so copying them (untouched memory, most of a tree
        reserved for an update) would cost time and memory for nothing."""
        live = self.n_nodes
        arrays = {}
        for name in self.ARRAYS[:-1]:
            old = getattr(self, name)
            arrays[name] = np.empty_like(old)
            arrays[name][:live] = old[:live]
        return TreeArrays(**arrays, pt_next=self.pt_next.copy(), root=self.root,
                          n_nodes=self.n_nodes)

    def trim(self) -> None:
        """Shrink node capacity to the live nodes (after a batch fit); ``reserve`` regrows."""
        cap = max(self.n_nodes, 2)
        for name in self.ARRAYS[:-1]:
            setattr(self, name, getattr(self, name)[:cap].copy())

    def record(self) -> MondrianTree:
        """The arrays as the kernels' record (:class:`mondrian._records.MondrianTree`; one
        C-level call gathers them: this is on the path of every one-row ``partial_fit``)."""
        return MondrianTree._make(_ARRAY_GETTER(self))

    def trimmed(self) -> dict[str, np.ndarray]:
        """The live part of every array (for persistence and size reports)."""
        out = {name: getattr(self, name)[: self.n_nodes] for name in self.ARRAYS[:-1]}
        out["pt_next"] = self.pt_next
        return out

    def to_state(self, n_points: int) -> dict:
        """The live tree as a persistence state (``ebf.artifact``): arrays, ``root``, ``n_nodes``.

        Node arrays are cut at ``n_nodes`` and ``pt_next`` at ``n_points`` (the rows seen);
        the rest is spare capacity, which :meth:`reserve` regrows on the next update.
        """
        out: dict = {name: getattr(self, name)[: self.n_nodes] for name in self.ARRAYS[:-1]}
        out["pt_next"] = self.pt_next[:n_points]
        out["root"] = int(self.root)
        out["n_nodes"] = int(self.n_nodes)
        return out

    @classmethod
    def from_state(
        cls, state: dict, n_features: int, n_stats: int, n_points: int, task: str
    ) -> TreeArrays:
        """Rebuild a tree from :meth:`to_state`, refusing anything a kernel could misread.

        The kernels do not bounds-check, so a state from an untrusted file is checked in
        full first: dtypes, shapes, every index in range, one tree reachable from ``root``
        with consistent parent pointers, and leaf lists that partition the ``n_points`` rows
        with lengths equal to the leaf counts, node statistics within their bounds
        (:func:`check_node_stats`). Raises ``ValueError`` naming the problem.
        """
        root, n_nodes = state["root"], state["n_nodes"]
        for name, v in (("root", root), ("n_nodes", n_nodes)):
            if not isinstance(v, int) or isinstance(v, bool):
                raise ValueError(f"{name} must be an int, got {type(v).__name__}")
        if not 1 <= n_nodes <= max(2 * n_points - 1, 1):
            raise ValueError(f"n_nodes={n_nodes} is impossible for {n_points} points")
        if not 0 <= root < n_nodes:
            raise ValueError(f"root slot {root} is not a live node")
        cap = max(n_nodes, 2)
        shapes = {"lower": (n_features,), "upper": (n_features,), "stats": (n_stats,)}
        arrays = {}
        for name in cls.ARRAYS:
            rows = n_points if name == "pt_next" else n_nodes
            dtype = INDEX if name in _INDEX_ARRAYS else np.float64
            # owned arrays (freshly read from disk) are used as they are, others copied
            a = state_array(state, name, dtype, (rows,) + shapes.get(name, ()))
            size = max(rows, 1) if name == "pt_next" else cap  # a lone root has 2 slots
            if rows < size:
                a = np.concatenate([a, np.full((size - rows,) + a.shape[1:], NO_NODE, a.dtype)])
            arrays[name] = a
        tree = cls(**arrays, root=root, n_nodes=n_nodes)
        task = task_code(task)
        _check_tree(tree, n_points, n_features, task)
        check_node_stats(tree.stats[:n_nodes], n_points, task == REGRESSION_CODE)
        return tree

    def root_stats(self) -> np.ndarray:
        """The statistics of the root: of all the tree's training points."""
        return self.stats[self.root]

    @property
    def n_leaves(self) -> int:
        return int(np.sum(self.feature[: self.n_nodes] == NO_NODE))

    @property
    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in self.trimmed().values()))


_INDEX_ARRAYS = frozenset({"left", "right", "parent", "feature", "leaf_head", "pt_next"})


def check_node_stats(stats: np.ndarray, n_points: int, regression: bool) -> None:
    """Raise ``ValueError`` unless the node statistics of a loaded tree are within what a
    fit on ``n_points`` rows produces (:mod:`basics.bounds`).

    Regression ``(n_j, sum y, sum y^2)``: ``n_j`` a whole count of rows in ``[0, n_points]``
    and the sums those of ``n_j`` bounded targets (:func:`basics.bounds.check_sums`);
    classification: whole counts of rows in ``[0, n_points]`` (raw label counts at leaves,
    the IKN counts of thesis Alg. 5.3 at internal nodes: never more than the rows).
    """
    check_counts("stats (counts)", stats[:, 0] if regression else stats, float(n_points))
    if regression:
        check_sums("stats", stats[:, 1:3], stats[:, 0])


_STRUCTURE_ERRORS = {
    1: "root slot {} has a parent",
    2: "node {} has a parent slot out of range",
    5: "node {} has a leaf_head out of range, or is internal and stores points",
    6: "node {}: children whose parent pointers do not point back",
    7: "row {} has a pt_next out of range",
    9: "leaf {}: its point list revisits a row",
    10: "leaf {}: its point list length differs from its count statistics (stats)",
    12: "the leaf lists hold {} rows, not every row seen",
    14: "node {} has a split time (tau) that is negative, not finite at a split, or after one "
        "of its children's",
    15: "node {} has a box (lower, upper) with non-finite or crossed bounds",
    16: "node {} has non-finite or negative statistics (stats)",
}


#: ``TreeArrays.record``: all arrays at once.
_ARRAY_GETTER = attrgetter(*TreeArrays.ARRAYS)


def _check_tree(tree: TreeArrays, n_points: int, n_features: int, task: int) -> None:
    """Raise ``ValueError`` naming the node unless ``tree`` is one valid tree: the flat-tree
    structure (:func:`basics.flat_tree.check_tree_structure`, slots in any order), then the
    Mondrian arrays (:func:`_check_mondrian`)."""
    root, n = tree.root, tree.n_nodes
    check_tree_structure(tree.left, tree.right, tree.feature, tree.threshold,
                         np.array([0, n], INDEX), n_features, "node {j}",
                         roots=np.array([root], INDEX), forward=False)
    code, where = _check_mondrian(
        tree.record()._replace(pt_next=tree.pt_next[:n_points]), root, n, task)
    if code:
        raise ValueError(_STRUCTURE_ERRORS[code].format(where))


@numba.njit(**JIT)
def _check_mondrian(tree, root, n_nodes, task):
    """``(0, 0)`` if the Mondrian arrays of a tree of valid structure are valid, else
    ``(error code, slot or row)``.

    Codes index ``_STRUCTURE_ERRORS``. O(n_nodes + n_points); every index is range-checked
    before it is followed, so a corrupt state cannot make this kernel read out of bounds.
    Parent pointers point back from every child; the leaf lists partition the rows with
    lengths equal to the leaf counts. The floats must be what the kernels can compute with
    (codes 14 to 16): split times that grow from the root down (leaves: the lifetime,
    possibly inf), finite boxes with ``lower <= upper``, finite statistics with non-negative
    counts (regression: all but the sum of y).
    """
    left, right, parent, leaf_head = tree.left, tree.right, tree.parent, tree.leaf_head
    stats, pt_next = tree.stats, tree.pt_next
    n_points = pt_next.shape[0]
    if parent[root] != NO_NODE:
        return 1, root
    for j in range(n_nodes):
        lj, rj, pj, hj = left[j], right[j], parent[j], leaf_head[j]
        if pj < -1 or pj >= n_nodes:
            return 2, j
        if hj < -1 or hj >= n_points or (lj != NO_NODE and hj != NO_NODE):
            return 5, j
        if lj != NO_NODE and (parent[lj] != j or parent[rj] != j):
            return 6, j
        code = _finite_node(tree, j, task)
        if code:
            return code, j
    for r in range(n_points):
        if pt_next[r] < -1 or pt_next[r] >= n_points:
            return 7, r
    row_seen = np.zeros(n_points, np.bool_)
    n_rows = 0
    for j in preorder(left, right, root, n_nodes):
        if left[j] != NO_NODE:
            continue
        length = 0
        r = leaf_head[j]
        while r != NO_NODE:
            if row_seen[r]:
                return 9, j
            row_seen[r] = True
            length += 1
            r = pt_next[r]
        count = stats[j, 0] if task == REGRESSION_CODE else np.sum(stats[j])
        if count != length:
            return 10, j
        n_rows += length
    if n_rows != n_points:
        return 12, n_rows
    return 0, 0


@numba.njit(inline="always", **JIT)
def _finite_node(tree, j, task):
    """The float checks of ``_check_mondrian`` for node ``j``: 0, or the code (14 to 16) of
    the array that fails them (thresholds are the structure check's)."""
    lj, rj, tau, lower, upper, stats = (tree.left[j], tree.right[j], tree.tau, tree.lower,
                                        tree.upper, tree.stats)
    tj = tau[j]
    if not tj >= 0 or (lj != NO_NODE and not (np.isfinite(tj) and tau[lj] >= tj
                                               and tau[rj] >= tj)):
        return 14
    for f in range(lower.shape[1]):
        lo = lower[j, f]
        up = upper[j, f]
        if not (np.isfinite(lo) and np.isfinite(up) and lo <= up):
            return 15
    for k in range(stats.shape[1]):
        v = stats[j, k]
        if not np.isfinite(v) or (v < 0 and (task != REGRESSION_CODE or k != 1)):
            return 16
    return 0


# --------------------------------------------------------------------------- small helpers


def grow(tree: TreeArrays, X, y, labels, rows, task: str, min_samples_split, lifetime,
         seed) -> None:
    """Batch-sample (empty tree) or extend ``tree`` with ``rows`` of the data buffer."""
    task = task_code(task)
    rows = np.ascontiguousarray(rows, dtype=INDEX)
    if rows.shape[0] == 0:
        return
    lifetime = float(lifetime)
    g = Growth(X, y, labels, task, int(min_samples_split), lifetime)
    if tree.n_nodes == 0:
        tree.root, tree.n_nodes = build_tree(g, tree.record(), rows, seed)
    else:
        tree.root, tree.n_nodes = extend_tree(g, tree.record(), rows, seed, tree.root,
                                              tree.n_nodes)
