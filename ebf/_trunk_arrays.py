"""Flat trunk arrays: the layout every trunk kernel reads, and its check for loaded trunks.

Node 0 is the root; nodes are numbered level by level as :func:`ebf.grower.grow_trunk`
creates them; leaves carry ids ``0 .. L-1`` in depth-first preorder (the branches of an
EBF). A trunk read from a model file is untrusted: :func:`ebf._tree_validation.check_trunk`
proves it well formed before a routing kernel descends it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from basics.flat_tree import INDEX, NO_NODE
from basics.validation import state_array

__all__ = ["TrunkArrays"]


@dataclass
class TrunkArrays:
    """Flat arrays of a trunk; node 0 is the root, nodes are numbered level by level.

    ``feature``, ``threshold_bin``, ``left``, ``right``: int64, -1 at leaves;
    ``threshold``: float64, ``edges[feature][threshold_bin]`` in raw units
    (``x <= threshold`` goes left; ``binning.ALL_VALUES`` for the feature's last bin),
    NaN at leaves; ``missing_left``: int64, 1 where a missing value goes left (0 at
    leaves); ``depth``, ``n_rows``: int64;
    ``weight``: float64 total weight; ``stats``: float64 ``(n_nodes, k)`` statistic totals
    (the totals row of the node's histogram); ``gain``: impurity decrease of the split,
    0 at leaves; ``leaf_id``: 0 .. L-1 in preorder at leaves, -1 at internal nodes (and
    everywhere while the trunk is growing).
    """

    feature: np.ndarray
    threshold_bin: np.ndarray
    threshold: np.ndarray
    missing_left: np.ndarray
    left: np.ndarray
    right: np.ndarray
    depth: np.ndarray
    n_rows: np.ndarray
    weight: np.ndarray
    stats: np.ndarray
    gain: np.ndarray
    leaf_id: np.ndarray

    ARRAYS = ("feature", "threshold_bin", "threshold", "missing_left", "left", "right",
              "depth", "n_rows", "weight", "stats", "gain", "leaf_id")

    @classmethod
    def root(cls, k: int) -> TrunkArrays:
        """A one-node trunk whose statistics are not known yet (all zero)."""
        return cls(
            feature=np.full(1, NO_NODE, INDEX), threshold_bin=np.full(1, NO_NODE, INDEX),
            threshold=np.full(1, np.nan), missing_left=np.zeros(1, INDEX),
            left=np.full(1, NO_NODE, INDEX),
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
        structure and statistics are :func:`ebf._tree_validation.check_trunk`'s)."""
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
