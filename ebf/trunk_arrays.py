"""Flat trunk arrays: the layout every trunk kernel reads, and its check for loaded trunks.

Node 0 is the root; nodes are numbered level by level as :func:`ebf.grower.grow_trunk`
creates them; leaves carry ids ``0 .. L-1`` in depth-first preorder (the branches of an
EBF). A trunk read from a model file is untrusted: :func:`check_trunk` proves it well formed
before a routing kernel descends it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from basics.validation import state_array

from .config import INDEX, NO_NODE
from .tree_validation import check_nodes, check_tree_structure

__all__ = ["TrunkArrays", "check_trunk", "preorder_leaf_ids"]


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
        structure and statistics are :func:`check_trunk`'s)."""
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


def check_trunk(trunk: TrunkArrays, edges: Sequence[np.ndarray], task: str) -> None:
    """Raise ``ValueError`` naming the node unless ``trunk`` is a well-formed grown trunk.

    For trunks read from files, before :func:`_apply_raw` descends them: the tree structure
    (:func:`~ebf.tree_validation.check_tree_structure`), split bins within the feature's
    ``edges`` with ``threshold == edges[feature][threshold_bin]``, leaf ids numbering the
    leaves in preorder, depths counting from the root, and finite statistics that are
    non-negative (rows, weights, sums of squares, class weights), with positive leaf weight.
    """
    n = trunk.n_nodes
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
    check_nodes(np.where(split, (b < 0) | (b >= n_edges[f]), b != NO_NODE), lambda j: (
        f"threshold_bin {b[j]} is not a bin of feature {trunk.feature[j]}" if split[j]
        else f"leaf with threshold_bin {b[j]} (leaves have -1)"), off, where)
    start = np.concatenate([[0], np.cumsum(n_edges)])
    edge = np.concatenate([*edges, [np.nan]])[np.where(split, start[f] + b, -1)]
    check_nodes(split & (trunk.threshold != edge), lambda j: (
        f"threshold {trunk.threshold[j]} differs from edge {b[j]} of feature "
        f"{trunk.feature[j]} ({edge[j]})"), off, where)
    leaf_id = preorder_leaf_ids(trunk.left, trunk.right)
    check_nodes(trunk.leaf_id != leaf_id, lambda j: (
        f"leaf_id {trunk.leaf_id[j]} is not the preorder leaf number {leaf_id[j]}"), off, where)
    parent_depth = np.full(n, -1, INDEX)
    for child in (trunk.left, trunk.right):
        parent_depth[child[split]] = trunk.depth[split]
    check_nodes(trunk.depth != parent_depth + 1, lambda j: (
        f"depth {trunk.depth[j]} is not its parent's depth + 1"), off, where)
    stats = trunk.stats
    finite = np.isfinite(stats).all(axis=1) & np.isfinite(trunk.weight) & np.isfinite(trunk.gain)
    check_nodes(~finite, lambda j: "holds a non-finite weight, gain or statistic", off, where)
    signed = [0, 1, 3] if task == "regression" else slice(None)  # not the sum of w*y
    negative = (stats[:, signed] < 0).any(axis=1) | (trunk.weight < 0) | (trunk.n_rows < 0)
    check_nodes(negative, lambda j: "holds a negative row count, weight or sum of squares", off,
                where)
    leaf_weight = (stats[:, 1:] if task == "classification" else stats[:, 1:2]).sum(axis=1)
    check_nodes(~split & ~(leaf_weight > 0), lambda j: "is a leaf without positive weight", off,
                where)


def preorder_leaf_ids(left: np.ndarray, right: np.ndarray) -> np.ndarray:
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
