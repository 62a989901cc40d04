"""Flat binary trees: the index dtype, the missing-node mark, the one traversal order and
the one structure check, shared by the Mondrian trees of ``mondrian`` and the CART, trunk
and Bayesian trees of ``ebf``.

A flat tree stores node ``j``'s children in ``left[j]``, ``right[j]`` (``NO_NODE`` at a
leaf, both or neither), its split feature in ``feature[j]`` (``NO_NODE`` at a leaf) and its
threshold in ``threshold[j]`` (finite at internal nodes; leaves are not read). Several
trees may be stored back to back: tree ``t`` owns the nodes ``offsets[t] <= j <
offsets[t + 1]`` and is rooted at ``roots[t]``; child indices are global.

The descent kernels follow child indices without bounds checks and loop until they reach a
leaf, so a tree from a file must be proven well formed before any of them sees it: an index
out of range reads out of bounds, a cycle never ends. :func:`check_tree_structure` is that
proof. A tree on the nodes ``[a, b)`` is valid iff

1. every node ``j`` is a leaf (``left == right == feature == -1``) or an internal node
   (both children in ``[a, b)``, numbered after ``j`` when ``forward``,
   ``0 <= feature < n_features``, a finite threshold);
2. every node but the root is the child of exactly one node, the root of none;
3. every node is reached from the root.

With ``forward`` (how scikit-learn's builders and the trunk grower number nodes) child
links only go forward, so 3. follows from 2.; otherwise (Mondrian trees, whose slots are
not in topological order after online updates) a depth-first walk from the root counts the
nodes it reaches: with 2., a node it misses lies on a cycle cut off from the root.

The first violation is reported: the first tree, then the first node in index order for 1.,
then for 2., then 3. Sequential O(nodes) passes in one kernel; plain NumPy oracle
``tests/naive/cart.py::naive_check_trees``.
"""

from __future__ import annotations

import numba
import numpy as np

from .jit import JIT

__all__ = ["INDEX", "NO_NODE", "check_tree_structure", "check_trees", "preorder",
           "preorder_leaf_ids"]

#: Index dtype of the flat tree arrays; ``NO_NODE`` marks a missing child, parent or feature.
INDEX = np.int64
NO_NODE = -1

OK, LEAF_FEATURE, ONE_CHILD, LEFT_OUT, RIGHT_OUT = range(5)
BACKWARD, FEATURE_OUT, THRESHOLD, PARENTS, ROOT_CHILD, UNREACHED = range(5, 11)

_MESSAGES = {
    LEAF_FEATURE: "a leaf (no children) that splits on feature {v}; leaves have feature -1",
    ONE_CHILD: "one child ({v}) and one missing (-1); children are both -1 (a leaf) or both "
               "valid",
    LEFT_OUT: "left child {v} is outside the tree's nodes [{a}, {b})",
    RIGHT_OUT: "right child {v} is outside the tree's nodes [{a}, {b})",
    BACKWARD: "child {v} is not numbered after it (a link back forms a cycle)",
    FEATURE_OUT: "split feature {v} is outside the model's features [0, {n_features})",
    THRESHOLD: "non-finite split threshold {threshold}",
    ROOT_CHILD: "the root is the child of another node (a link back forms a cycle)",
    UNREACHED: "only {v} of the tree's {n} nodes are reached from it (the others form a "
               "cycle)",
}

#: Parent counts saturate (uint8): 0, 1, "2 or more".
_MANY = 2


@numba.njit(**JIT)
def preorder(left, right, root, n_nodes):
    """Slots reached from ``root`` in depth-first preorder, left subtrees first: parents
    before children (explicit stack of ``n_nodes + 1``: the tree must be well formed).

    The one traversal order of flat trees: top-down passes walk it forwards, bottom-up
    passes backwards (slot order itself is not topological after online updates).
    """
    order = np.empty(n_nodes, INDEX)
    stack = np.empty(n_nodes + 1, INDEX)
    stack[0] = root
    top = 1
    k = 0
    while top > 0:
        top -= 1
        j = stack[top]
        order[k] = j
        k += 1
        if left[j] != NO_NODE:
            stack[top] = right[j]
            stack[top + 1] = left[j]
            top += 2
    return order[:k]


def preorder_leaf_ids(left: np.ndarray, right: np.ndarray, root: int = 0) -> np.ndarray:
    """Leaf ids 0 .. L-1 in depth-first preorder (left first), -1 at internal nodes.

    Examples
    --------
    >>> preorder_leaf_ids(np.array([1, -1, -1]), np.array([2, -1, -1])).tolist()
    [-1, 0, 1]
    """
    order = preorder(left, right, root, left.shape[0])
    leaves = order[left[order] == NO_NODE]
    leaf_id = np.full(left.shape[0], NO_NODE, INDEX)
    leaf_id[leaves] = np.arange(leaves.size)
    return leaf_id


@numba.njit(**JIT)
def _check_nodes(left, right, feature, threshold, a, b, n_features, forward, parents):
    """Checks 1. of the nodes ``[a, b)``, counting parents: ``(code, node, value)``."""
    for j in range(a, b):
        lj = left[j]
        rj = right[j]
        fj = feature[j]
        if lj == NO_NODE and rj == NO_NODE:
            if fj != NO_NODE:
                return LEAF_FEATURE, j, fj
            continue
        if lj == NO_NODE:
            return ONE_CHILD, j, rj
        if rj == NO_NODE:
            return ONE_CHILD, j, lj
        if lj < a or lj >= b:
            return LEFT_OUT, j, lj
        if rj < a or rj >= b:
            return RIGHT_OUT, j, rj
        if forward and lj <= j:
            return BACKWARD, j, lj
        if forward and rj <= j:
            return BACKWARD, j, rj
        if fj < 0 or fj >= n_features:
            return FEATURE_OUT, j, fj
        if not np.isfinite(threshold[j]):
            return THRESHOLD, j, 0
        parents[lj] = min(parents[lj] + 1, _MANY)
        parents[rj] = min(parents[rj] + 1, _MANY)
    return OK, 0, 0


@numba.njit(**JIT)
def check_trees(left, right, feature, threshold, offsets, roots, n_features,
                forward):  # pragma: no cover
    """``(code, tree, node, value)`` of the first violation, ``(OK, 0, 0, 0)`` if none.

    ``roots[t]`` must lie in ``[offsets[t], offsets[t + 1])`` (checked by the caller).
    """
    parents = np.zeros(left.shape[0], np.uint8)
    for t in range(offsets.shape[0] - 1):
        a = offsets[t]
        b = offsets[t + 1]
        root = roots[t]
        code, j, v = _check_nodes(left, right, feature, threshold, a, b, n_features, forward,
                                  parents)
        if code != OK:
            return code, t, j, v
        for j in range(a, b):
            if j == root and parents[j] != 0:
                return ROOT_CHILD, t, j, parents[j]
            if j != root and parents[j] != 1:
                return PARENTS, t, j, parents[j]
        if not forward:  # one parent each: the walk meets every node at most once
            reached = preorder(left, right, root, b - a).shape[0]
            if reached != b - a:
                return UNREACHED, t, root, reached
    return OK, 0, 0, 0


def describe(code: int, t: int, j: int, v: int, offsets: np.ndarray, n_features: int,
             threshold: np.ndarray) -> str:
    """What is wrong with node ``j`` for a violation ``(code, t, j, v)`` of
    :func:`check_trees`."""
    a, b = int(offsets[t]), int(offsets[t + 1])
    if code != PARENTS:
        return _MESSAGES[code].format(v=v, a=a, b=b, n=b - a, n_features=n_features,
                                      threshold=threshold[j])
    if v == 0:
        return "no node has it as a child: it is unreachable from the root"
    return "the child of more than one node (reached twice from the root)"


def check_tree_structure(
    left: np.ndarray,
    right: np.ndarray,
    feature: np.ndarray,
    threshold: np.ndarray,
    offsets: np.ndarray,
    n_features: int,
    where: str = "tree {t} node {j}",
    *,
    roots: np.ndarray | None = None,
    forward: bool = True,
) -> None:
    """Raise ``ValueError`` naming the tree and node unless the trees are well formed.

    Parameters
    ----------
    left, right, feature : ndarray of shape (n_slots,), int64
        Child indices (global, ``-1`` at leaves) and split features (``-1`` at leaves).
    threshold : ndarray of shape (n_slots,), float64
        Split thresholds (finite at internal nodes; leaves are not read).
    offsets : ndarray of shape (n_trees + 1,), int64
        Increasing from 0 (checked by the caller); slots from ``offsets[-1]`` on are unused.
    n_features : int
        Number of input features.
    where : str, default "tree {t} node {j}"
        How the message names the place, formatted with the tree ``t`` and node ``j``.
    roots : ndarray of shape (n_trees,), int64, optional
        The root of every tree, within its nodes (checked by the caller); by default the
        first node of each tree (``offsets[:-1]``).
    forward : bool, default=True
        Children must be numbered after their parent.

    Raises
    ------
    ValueError
        E.g. ``"tree 3 node 517: left child 1000000000000 is outside the tree's nodes
        [510, 530)"``.

    Examples
    --------
    >>> i = lambda *v: np.array(v, np.int64)
    >>> check_tree_structure(i(1, -1, -1), i(2, -1, -1), i(0, -1, -1),
    ...                      np.array([0.5, np.nan, np.nan]), i(0, 3), 1)
    >>> check_tree_structure(i(1, 0, -1), i(2, 0, -1), i(0, 0, -1),
    ...                      np.array([0.5, 0.5, np.nan]), i(0, 3), 1)
    Traceback (most recent call last):
    ...
    ValueError: tree 0 node 1: child 0 is not numbered after it (a link back forms a cycle)
    """
    roots = offsets[:-1] if roots is None else roots
    code, t, j, v = check_trees(left, right, feature, threshold, offsets, roots,
                                int(n_features), bool(forward))
    if code != OK:
        what = describe(code, t, j, v, offsets, n_features, threshold)
        raise ValueError(f"{where.format(t=t, j=j)}: {what}")
