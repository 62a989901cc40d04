"""Kept posterior draws of a BART model: every draw's trees back to back, flat arrays.

Draw ``s`` owns trees ``s M .. (s + 1) M - 1`` (M trees per draw); tree ``t`` owns the node
slots ``offsets[t] <= j < offsets[t + 1]`` with children as global slots (the
:class:`ebf._cart.CartForest` layout), ``value`` the leaf means (scaled labels, 0 at internal
nodes), and ``sigma2[s]`` the draw's noise variance. A draw's prediction at ``x`` is the
sum of its trees' leaf means (eq. 4.2). A state read from a file is proven well formed
(:func:`basics.flat_tree.check_tree_structure`) before the descent kernel sees it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from basics.bounds import MAX_ABS_LOCATION, check_range
from basics.flat_tree import INDEX, NO_NODE, check_tree_structure
from basics.jit import JIT
from basics.validation import state_array

from .._tree_validation import check_nodes
from ._records import Splits
from ._trees import descend

__all__ = ["ForestDraws"]


@dataclass(frozen=True, eq=False)
class ForestDraws:
    """The kept draws of a BART chain (layout in the module docstring).

    Attributes
    ----------
    feature, left, right : ndarray of shape (n_nodes,), int64
    threshold, value : ndarray of shape (n_nodes,), float64
    offsets : ndarray of shape (n_draws * n_trees + 1,), int64
    sigma2 : ndarray of shape (n_draws,), float64
    n_trees : int
    """

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray
    offsets: np.ndarray
    sigma2: np.ndarray
    n_trees: int

    ARRAYS = ("feature", "threshold", "left", "right", "value", "offsets", "sigma2")

    @property
    def n_draws(self) -> int:
        return self.sigma2.shape[0]

    @property
    def n_nodes(self) -> np.ndarray:
        """Nodes of every tree, shape (n_draws * n_trees,) (the model size)."""
        return np.diff(self.offsets)

    @classmethod
    def from_packed(cls, draws: list, sigma2: np.ndarray, n_trees: int) -> ForestDraws:
        """Concatenate the per-draw packs of :func:`ebf.bayestrees.backfitting.backfit`."""
        base = 0
        parts: dict[str, list] = {k: [] for k in ("feature", "threshold", "left", "right",
                                                   "value")}
        sizes = []
        for feature, threshold, left, right, value, n_nodes in draws:
            for name, a in (("feature", feature), ("threshold", threshold), ("value", value)):
                parts[name].append(a)
            for name, a in (("left", left), ("right", right)):
                parts[name].append(np.where(a >= 0, a + base, NO_NODE))
            sizes.append(n_nodes)
            base += feature.shape[0]
        offsets = np.concatenate([[0], np.cumsum(np.concatenate(sizes))]).astype(INDEX)
        return cls(**{k: np.concatenate(v) for k, v in parts.items()}, offsets=offsets,
                   sigma2=np.asarray(sigma2, np.float64), n_trees=int(n_trees))

    def get_state(self) -> dict[str, np.ndarray]:
        """The arrays by name (the persistence contract, ``docs/model-format.md``)."""
        return {name: getattr(self, name) for name in self.ARRAYS}

    @classmethod
    def from_state(cls, state: dict[str, Any], *, n_features: int, n_trees: int,
                   n_draws: int, scale: float) -> ForestDraws:
        """Rebuild from :meth:`get_state`, refusing anything the descent kernel could misread
        or a prediction could overflow with.

        ``scale`` is the model's ``y_scale`` (target units per scaled unit): a leaf mean
        times it is a location, a noise variance times its square a variance, in the
        target's units (:mod:`basics.bounds`).

        Raises
        ------
        ValueError
            Naming the entry, or the tree and node: dtypes and shapes (``n_draws`` noise
            variances, ``n_draws * n_trees`` trees), ``offsets`` increasing from 0 to the
            number of nodes, the structure of every tree, finite leaf means, finite positive
            variances, both within their bounds.
        """
        sigma2 = state_array(state, "sigma2", np.float64, (n_draws,))
        if not np.all(np.isfinite(sigma2) & (sigma2 > 0)):
            raise ValueError("sigma2 must hold finite, positive noise variances")
        top = MAX_ABS_LOCATION / scale  # inf for a tiny scale: no bound then, not 0
        check_range("draws.sigma2", sigma2, 0.0, top * top,
                    "(MAX_ABS_LOCATION / y_scale)**2")
        offsets = state_array(state, "offsets", INDEX, (n_draws * n_trees + 1,))
        n = state["feature"].shape[0] if isinstance(state.get("feature"), np.ndarray) else -1
        if offsets[0] != 0 or offsets[-1] != n or np.any(np.diff(offsets) < 1):
            raise ValueError(f"offsets must increase from 0 to the {n} nodes, at least one "
                             "node per tree")
        arrays = {name: state_array(state, name, dtype, (n,)) for name, dtype in (
            ("feature", INDEX), ("left", INDEX), ("right", INDEX), ("threshold", np.float64),
            ("value", np.float64))}
        check_tree_structure(arrays["left"], arrays["right"], arrays["feature"],
                             arrays["threshold"], offsets, n_features)
        check_nodes(~np.isfinite(arrays["value"]), lambda j: "non-finite leaf mean (value)",
                    offsets)
        check_range("draws.value", arrays["value"], -top, top, "MAX_ABS_LOCATION / y_scale")
        return cls(**arrays, offsets=offsets, sigma2=sigma2, n_trees=int(n_trees))

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Every draw's sum of trees at every row (scaled labels), shape (n_rows, n_draws).

        ``X`` is float64 of shape (n_rows, n_features) with the training columns.
        """
        out = np.zeros((X.shape[0], self.n_draws))
        _predict(np.ascontiguousarray(X, dtype=np.float64),
                 Splits(self.feature, self.threshold, self.left, self.right), self.value,
                 self.offsets, self.n_trees, out)
        return out


@njit(**JIT)
def _predict(X, splits, value, offsets, n_trees, out):  # pragma: no cover - numba
    """``out[i, s] = sum over draw s's trees of the leaf mean of row i``; rows outer, so a
    row stays in cache while every tree descends it."""
    n_draws = out.shape[1]
    for i in range(X.shape[0]):
        for s in range(n_draws):
            total = 0.0
            for t in range(s * n_trees, (s + 1) * n_trees):
                total += value[descend(splits, X, i, offsets[t])]
            out[i, s] = total
