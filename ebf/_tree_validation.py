"""Validation of the flat trees of ``ebf`` read from untrusted files (CART forests, the trunk).

The structure of every tree is :func:`basics.flat_tree.check_tree_structure`'s (``CartForest``:
tree ``t`` owns the nodes ``offsets[t] <= j < offsets[t + 1]``, its root is ``offsets[t]``;
the trunk is one tree, ``offsets = [0, n_nodes]``; children numbered after their parent, which
``cart._combine_up`` relies on). On top of the structure, :func:`checked_forest_arrays` (a
``CartForest`` state) and :func:`check_trunk` (a trunk) check dtypes, shapes and node
statistics, with vectorised NumPy passes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from basics.bounds import (
    MAX_VARIANCE,
    check_locations,
    check_range,
    check_sums,
    check_variances,
)
from basics.flat_tree import INDEX, NO_NODE, check_tree_structure, preorder_leaf_ids
from basics.validation import state_array

from .binning import ALL_VALUES

__all__ = ["check_nodes", "check_trunk", "checked_forest_arrays", "larger_child_left",
           "tree_of"]


def tree_of(offsets: np.ndarray, node: int) -> int:
    """The tree that owns ``node`` (``offsets[t] <= node < offsets[t + 1]``)."""
    return int(np.searchsorted(offsets, node, side="right")) - 1


def check_nodes(bad: np.ndarray, message: Callable[[int], str], offsets: np.ndarray,
                where: str = "tree {t} node {j}") -> None:
    """Raise ``ValueError`` at the first node ``j`` where ``bad`` holds, saying ``message(j)``.

    Examples
    --------
    >>> check_nodes(np.array([False, True]), lambda j: "negative weight", np.array([0, 2]))
    Traceback (most recent call last):
    ...
    ValueError: tree 0 node 1: negative weight
    """
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{where.format(t=tree_of(offsets, j), j=j)}: {message(j)}")


#: Leaf class fractions are scikit-learn's normalised float64 counts; their sum is one up to
#: rounding.
_FRACTION_TOL = 1e-6
_FOREST_INTS = frozenset({"left", "right", "feature", "missing_left", "count", "offsets"})


def larger_child_left(left: np.ndarray, right: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``missing_left`` of a tree stored before missing values were learned (it saw none):
    1 where the left child has at least as many training rows as the right, the rule of a
    split without missing values (:func:`ebf._splitting.scan_node`); 0 at leaves. The tree
    must be well formed.

    Examples
    --------
    >>> larger_child_left(np.array([1, -1, -1]), np.array([2, -1, -1]), np.array([5, 3, 2]))
    array([1, 0, 0])
    """
    split = left != NO_NODE
    out = np.zeros(left.shape[0], INDEX)
    out[split] = rows[left[split]] >= rows[right[split]]
    return out


def checked_forest_arrays(state: dict[str, Any], names: Sequence[str], n_features: int,
                          n_classes: int | None) -> dict[str, np.ndarray]:
    """The arrays ``names`` of a ``CartForest`` state, after checking everything a descent
    kernel or a prediction relies on (``ebf._cart.CartForest`` documents the layout).

    Dtypes and shapes (``value`` has ``n_classes`` columns, one for regression), ``offsets``
    increasing from 0 to the number of nodes, the structure of every tree
    (:func:`basics.flat_tree.check_tree_structure`), finite values with class fractions in
    [0, 1] summing to one at leaves, and finite non-negative variances, weights and counts.

    Raises
    ------
    ValueError
        Naming the array, or the tree and node, and what is wrong.
    """
    derive = "missing_left" not in state  # a model saved before missing values were learned
    if derive and "left" in state:
        state = {**state, "missing_left": np.zeros(np.shape(state["left"]), INDEX)}
    missing = [name for name in names if name not in state]
    if missing:
        raise ValueError(f"CartForest state lacks the arrays {missing}.")
    for name in ("left", "offsets"):
        if not isinstance(state[name], np.ndarray) or state[name].ndim != 1:
            raise ValueError(f"CartForest {name} must be a 1-D array.")
    n = state["left"].shape[0]
    k = 1 if n_classes is None else int(n_classes)
    shapes = {"value": (n, k), "offsets": state["offsets"].shape}
    arrs = {
        name: state_array(state, name, INDEX if name in _FOREST_INTS else np.float64,
                          shapes.get(name, (n,)), owned=False)  # never written
        for name in names
    }
    off = arrs["offsets"]
    if off.shape[0] < 2 or off[0] != 0 or off[-1] != n or np.any(np.diff(off) <= 0):
        raise ValueError("CartForest offsets must increase from 0 to the number of nodes "
                         f"({n}) in at least one step, one per tree.")
    check_tree_structure(arrs["left"], arrs["right"], arrs["feature"], arrs["threshold"], off,
                         n_features)
    value = arrs["value"]

    def says(name: str, what: str) -> Callable[[int], str]:
        return lambda j: f"{name} {arrs[name][j]} {what}"

    check_nodes(~np.isfinite(value).all(axis=1), says("value", "is not finite"), off)
    if n_classes is not None:
        check_nodes(((value < 0) | (value > 1)).any(axis=1),
                    says("value", "holds class fractions outside [0, 1]"), off)
        check_nodes((arrs["left"] == NO_NODE) & (np.abs(value.sum(axis=1) - 1) > _FRACTION_TOL),
                    says("value", "holds leaf class fractions whose sum is not 1"), off)
    for name in ("variance", "weight", "count"):
        a = arrs[name]
        check_nodes(~(np.isfinite(a) & (a >= 0)), says(name, "is negative or not finite"), off)
    if derive:
        arrs["missing_left"] = larger_child_left(arrs["left"], arrs["right"], arrs["count"])
    ml = arrs["missing_left"]
    check_nodes((ml != 0) & ((ml != 1) | (arrs["left"] == NO_NODE)),
                says("missing_left", "is not 0 or 1 (0 at leaves)"), off)
    if n_classes is None:  # weighted means and variances of the targets (basics.bounds)
        check_locations("value", value)
        check_variances("variance", arrs["variance"])
    return arrs


def check_trunk(trunk: Any, edges: Sequence[np.ndarray], task: str) -> None:
    """Raise ``ValueError`` naming the node unless a trunk's arrays are a well-formed grown
    trunk (``ebf.trunk.TrunkArrays``, already of the right dtypes and shapes).

    For trunks read from files, before a descent kernel sees them: the structure
    (:func:`basics.flat_tree.check_tree_structure`), split bins within the feature's
    ``edges`` with ``threshold == edges[feature][threshold_bin]`` (``ALL_VALUES`` for the
    bin past the last edge), ``missing_left`` 0 or 1 (0 at leaves), leaf ids numbering the
    leaves in preorder (left first), depths counting from the root, and finite statistics that are
    non-negative (rows, weights, sums of squares, class weights), with positive leaf weight.
    """
    n = trunk.feature.shape[0]
    if n < 1:
        raise ValueError("the trunk has no nodes.")
    off = np.array([0, n], INDEX)
    where = "trunk node {j}"
    check_tree_structure(trunk.left, trunk.right, trunk.feature, trunk.threshold, off,
                         len(edges), where)
    split = trunk.left != NO_NODE
    f = np.where(split, trunk.feature, 0)
    b = trunk.threshold_bin
    n_edges = np.array([e.size for e in edges], INDEX)
    check_nodes(np.where(split, (b < 0) | (b > n_edges[f]), b != NO_NODE), lambda j: (
        f"threshold_bin {b[j]} is not a bin of feature {trunk.feature[j]}" if split[j]
        else f"leaf with threshold_bin {b[j]} (leaves have -1)"), off, where)
    # a feature's last bin (every value left, the missing ones right): ALL_VALUES
    start = np.concatenate([[0], np.cumsum(n_edges + 1)])
    edge = np.concatenate([*(np.append(e, ALL_VALUES) for e in edges), [np.nan]])[
        np.where(split, start[f] + b, -1)]
    check_nodes(split & (trunk.threshold != edge), lambda j: (
        f"threshold {trunk.threshold[j]} differs from edge {b[j]} of feature "
        f"{trunk.feature[j]} ({edge[j]})"), off, where)
    ml = trunk.missing_left
    check_nodes((ml != 0) & ((ml != 1) | ~split), lambda j: (
        f"missing_left {ml[j]} is not 0 or 1 (0 at leaves)"), off, where)
    leaf_id = preorder_leaf_ids(trunk.left, trunk.right)  # a valid tree: every node, once
    check_nodes(trunk.leaf_id != leaf_id, lambda j: (
        f"leaf_id {trunk.leaf_id[j]} is not the preorder leaf number {leaf_id[j]}"), off, where)
    parent_depth = np.full(n, -1, INDEX)
    for child in (trunk.left, trunk.right):
        parent_depth[child[split]] = trunk.depth[split]
    check_nodes(trunk.depth != parent_depth + 1, lambda j: (
        f"depth {trunk.depth[j]} is not its parent's depth + 1"), off, where)
    stats = trunk.stats
    finite = np.isfinite(stats).all(axis=1) & np.isfinite(trunk.weight) & np.isfinite(trunk.gain)
    check_nodes(~finite, lambda j: "holds a non-finite weight, gain or statistic (stats)", off,
                where)
    signed = [0, 1, 3] if task == "regression" else slice(None)  # not the sum of w*y
    negative = (stats[:, signed] < 0).any(axis=1) | (trunk.weight < 0) | (trunk.n_rows < 0)
    check_nodes(negative, lambda j: "holds a negative row count (n_rows), weight or sum of "
                "squares (stats)", off, where)
    # [1, w, w*y, w*y^2] per row summed (ebf/LAYOUT.md): sums of the weight's multiples of
    # bounded targets; a gain is a decrease of a weighted sum of squares (basics.bounds)
    if task == "regression":
        check_sums("trunk_.stats", stats[:, 2:4], stats[:, 1])
    check_range("trunk_.gain", trunk.gain, 0.0, trunk.weight * MAX_VARIANCE,
                "weight * MAX_VARIANCE")
    leaf_weight = (stats[:, 1:] if task == "classification" else stats[:, 1:2]).sum(axis=1)
    check_nodes(~split & ~(leaf_weight > 0), lambda j: "is a leaf without positive weight", off,
                where)
