"""The CART trunk: flat arrays, routing of raw rows, and the :class:`Trunk` estimator.

An Empirical Bayesian Forest (paper Sec. 4) fixes the top of the tree at a single shallow
CART fit, the *trunk*, grown on all the data with a minimum leaf size (Sec. 3.2 uses
3500 of 20640 rows); its leaves are the branches. Splits minimise the weighted impurity
of Sec. 2.2 (eq. 4, Gini for classification) over quantile bins of the features.

Trunks are flat arrays (:class:`TrunkArrays`), grown level by level over any histogram
source by :func:`ebf.grower.grow_trunk` (the single-process :class:`~ebf.grower.BinnedSource`
or the Dask layer's); :class:`Trunk` is the scikit-learn style estimator.
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral, Real
from typing import Any

import numba
import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from basics.flat_tree import INDEX, NO_NODE
from basics.jit import JIT
from basics.validation import (
    check_finite,
    state_int,
    state_names,
    unchanged_on_error,
)

from . import binning
from ._routing import leaf_of, split_trees
from ._tree_validation import check_trunk, larger_child_left
from ._trunk_arrays import TrunkArrays
from .config import MAX_BINS
from .grower import BinnedSource, grow_trunk
from .histogram import n_stats, row_statistics

__all__ = ["Trunk", "TrunkArrays"]


# ------------------------------------------------------------------------------- routing


@numba.njit(**JIT)
def _apply_raw(trees, leaf_id, X, out):  # pragma: no cover - jitted
    for i in range(X.shape[0]):
        out[i] = leaf_id[leaf_of(trees, 0, X, i, np.nan)]


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
    max_bins : int, default=MAX_BINS
        Quantile bins per feature (at most ``MAX_BINS``); ignored when ``fit`` gets ``bin_edges``.
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
    max_leaves_ : int or None
        The leaf budget the trunk was grown with (None: no budget).
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
        *,
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
        # a missing value (NaN) has its own bin and goes where the split search sends it
        check_finite(X, getattr(self, "feature_names_in_", None), "X", allow_nan=True)
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
        *,
        sample_weight: Any = None,
        bin_edges: Sequence[Any] | None = None,
    ) -> Trunk:
        """Grow the trunk on (X, y) (paper Sec. 2.2, 4).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Numeric features, NaN for a missing value (no infinities).
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
        self._set_fitted(trunk, edges, n_classes, self.max_leaves)
        return self

    @classmethod
    def _from_arrays(cls, params: dict, arrays: TrunkArrays, bin_edges: Sequence[Any],
                     n_features: int) -> Trunk:
        """A fitted trunk from arrays grown elsewhere (a seam used by ``ebf.dask``).

        The distributed fit grows the trunk with :func:`grow_trunk` over a histogram source
        of its own; this builds the estimator ``Trunk(**params).fit`` would give for the same
        arrays, without touching its private state from outside.

        Parameters
        ----------
        params : dict
            Constructor parameters (``Trunk.get_params()``); ``max_leaves`` is the leaf
            budget the arrays were grown with.
        arrays : TrunkArrays
            Output of :func:`grow_trunk` with these parameters and edges.
        bin_edges : sequence of ndarray
            The bin edges the arrays were grown on.
        n_features : int
            Number of (encoded) features.

        Returns
        -------
        Trunk
        """
        trunk = cls(**params)
        trunk._validate_params()
        if arrays.n_leaves and arrays.leaf_id.max() != arrays.n_leaves - 1:
            raise ValueError("trunk arrays must come from grow_trunk (leaf ids 0 .. L-1).")
        n_classes = int(trunk.n_classes) if trunk.task == "classification" else None
        trunk.n_features_in_ = int(n_features)
        trunk._set_fitted(arrays, binning.check_bin_edges(bin_edges, int(n_features)),
                          n_classes, trunk.max_leaves)
        return trunk

    def _set_fitted(self, trunk: TrunkArrays, edges: list[np.ndarray],
                    n_classes: int | None, max_leaves: int | None) -> None:
        self.trunk_ = trunk
        self.max_leaves_ = None if max_leaves is None else int(max_leaves)
        self.bin_edges_ = edges
        self.n_leaves_ = trunk.n_leaves
        stats = trunk.stats[trunk.leaf_nodes()]
        if self.task == "regression":
            self.leaf_values_ = stats[:, 2] / stats[:, 1]
        else:
            self.n_classes_ = int(n_classes)
            self.leaf_values_ = stats[:, 1:] / stats[:, 1:].sum(axis=1, keepdims=True)

    @property
    def leaf_rows_(self) -> np.ndarray:
        """Training rows per leaf, in leaf-id order (the branch sizes of an EBF)."""
        check_is_fitted(self, "trunk_")
        return self.trunk_.n_rows[self.trunk_.leaf_nodes()]

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
        _apply_raw(split_trees(t), t.leaf_id, X, out)
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
            A split of the missing values from all others reads ``x is not missing`` /
            ``x is missing``; at the other splits missing values go where
            ``trunk_.missing_left`` says.

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
            every = header and t.threshold[j] == binning.ALL_VALUES
            if header:
                rule = "is missing" if every else f">  {fmt.format(t.threshold[j])}"
                lines.append(f"{bar}{names[t.feature[j]]} {rule}")
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
                rule = ("is not missing" if t.threshold[j] == binning.ALL_VALUES
                        else f"<= {fmt.format(t.threshold[j])}")
                lines.append(f"{bar}{names[t.feature[j]]} {rule}")
                stack.append((j, depth, True))
                stack.append((int(t.left[j]), depth + 1, False))
        return "\n".join(lines)

    # ------------------------------------------------------------------ persistence

    def _get_state(self) -> dict:
        """Fitted state for ``model.save``: JSON scalars and numpy arrays."""
        check_is_fitted(self)
        names = getattr(self, "feature_names_in_", None)
        return {
            "n_features_in_": int(self.n_features_in_),
            "feature_names_in_": None if names is None else [str(s) for s in names],
            "n_classes_": int(self.n_classes_) if self.task == "classification" else None,
            "bin_edges_": [np.asarray(e) for e in self.bin_edges_],
            "trunk_": self.trunk_.to_dict(),
            "max_leaves_": self.max_leaves_,
        }

    def _set_state(self, state: dict) -> None:
        """Restore the fitted state written by :meth:`_get_state`."""
        missing = [key for key in ("n_features_in_", "bin_edges_", "trunk_") if key not in state]
        if missing:
            raise ValueError(f"Trunk state is missing {missing}.")
        derive = isinstance(state["trunk_"], dict) and "missing_left" not in state["trunk_"]
        if derive:  # saved before missing values were learned: placeholder, derived below
            n = len(state["trunk_"].get("feature", ()))
            state = {**state, "trunk_": {**state["trunk_"],
                                         "missing_left": np.zeros(n, INDEX)}}
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
        if derive:
            trunk.missing_left = larger_child_left(trunk.left, trunk.right, trunk.n_rows)
        max_leaves = state.get("max_leaves_", self.max_leaves)
        if "max_leaves_" in state and max_leaves is not None:  # a JSON inf must not reach int()
            max_leaves = state_int(state, "max_leaves_", 1)
        names = state_names(state, "feature_names_in_", d)
        self.__dict__.pop("feature_names_in_", None)
        self.__dict__.pop("n_classes_", None)
        self.n_features_in_ = d
        if names is not None:
            self.feature_names_in_ = names
        self._set_fitted(trunk, edges, n_classes, max_leaves)
