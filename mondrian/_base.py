"""What the Mondrian forest estimators share: the data buffer, scaling, seeds, growing trees
in threads, the rows of the predictive API, the lazy posterior cache and persistence.

The public estimators are in :mod:`mondrian._forest`.
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from basics.bounds import check_locations
from basics.flat_tree import INDEX, preorder
from basics.seeds import resolve_entropy
from basics.tasks import REGRESSION
from basics.threads import N_JOBS, thread_map
from basics.validation import (
    NAN_FIX,
    check_classes,
    check_finite,
    check_numeric_columns,
    state_array,
    state_int,
    state_names,
)

from . import _predict
from ._compact import CompactTree, PredictOnlyError, compact_state
from ._config import NODE_REG_STATS
from ._tree import TreeArrays, grow


class TreePosteriors(list):
    """The lazy per-tree posterior cache: one entry per tree, None until a prediction needs
    it. ``fused`` holds what the one-pass kernels read of all trees at once (a numba typed
    list of the entries and each tree's :func:`._predict.path_bound`), built on first use and
    dropped whenever an entry changes."""

    fused: Any = None

    def __setitem__(self, key: Any, value: Any) -> None:
        self.fused = None
        super().__setitem__(key, value)

    @classmethod
    def empty(cls, n: int) -> TreePosteriors:
        return cls([None] * n)

    def __reduce__(self) -> tuple:  # copies and pickles leave the fused record behind
        return type(self), (list(self),)


#: Prediction keeps the given row order below this many rows, or when the first tree's
#: predictor is smaller than this (it stays in a 1 MiB L2 cache): sorting would not pay.
LOCALITY_MIN_ROWS = 4096
LOCALITY_MIN_TREE_BYTES = 1 << 20


def classes_entry(classes: np.ndarray) -> Any:
    """``classes_`` as a state entry: object arrays (e.g. strings from pandas) cannot be
    stored as ``.npy`` without pickle, so they become a list."""
    if classes.dtype.hasobject:
        return [c.item() if isinstance(c, np.generic) else c for c in classes]
    return classes


def classes_from_entry(entry: Any) -> np.ndarray:
    """Inverse of :func:`classes_entry`, checked (sorted, distinct, strings or numbers)."""
    if isinstance(entry, list):
        if not all(isinstance(c, (str, int, float)) for c in entry):
            raise ValueError("classes_ must hold strings or numbers")
        classes = np.array(entry, dtype=object)
    elif not isinstance(entry, np.ndarray):
        raise ValueError(f"classes_ must be a list or an array, got {entry!r:.60}")
    else:
        classes = np.require(entry, None, ["C", "W", "O"])
    check_classes(classes)
    return classes


def append_rows(buffers: tuple[np.ndarray, ...], start: int,
                rows: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """Write ``rows[i]`` into ``buffers[i]`` from row ``start`` on, growing every buffer by
    amortised doubling when it is too short (one row at a time then costs O(1) on
    average); returns the buffers, new or the same."""
    stop = start + rows[0].shape[0]
    out = []
    for buf, new in zip(buffers, rows, strict=True):
        if stop > buf.shape[0]:
            grown = np.empty((max(stop, 2 * buf.shape[0]),) + buf.shape[1:], buf.dtype)
            grown[:start] = buf[:start]
            buf = grown
        buf[start:stop] = new
        out.append(buf)
    return tuple(out)


def _sigmoid(t: Any) -> Any:
    """Logistic function, exact at +inf (the leaf time of an infinite lifetime)."""
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-np.asarray(t, dtype=np.float64)))


class _BaseMondrianForest(BaseEstimator):
    """Shared machinery: data buffer, scaling, seeds, growing trees in threads."""

    _task: str = REGRESSION

    _parameter_constraints: dict = {
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "lifetime": [Interval(Real, 0, math.inf, closed="right")],
        "min_samples_split": [Interval(Integral, 2, None, closed="left")],
        "random_state": ["random_state"],
        "n_jobs": N_JOBS,
    }

    # ------------------------------------------------------------------ fitting

    def _n_stats(self) -> int:
        return NODE_REG_STATS

    def _check_target(self, y: Any) -> np.ndarray:
        """``y`` as a 1-D array (a column vector warns, as in scikit-learn)."""
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None."
            )
        y = np.asarray(y)
        if y.ndim == 1 and y.dtype.kind in "fiub":
            return y  # nothing for column_or_1d to do (fast path for one-row partial_fit)
        if y.ndim == 1 or (y.ndim == 2 and y.shape[1] == 1):
            return column_or_1d(y, warn=True)
        raise ValueError(f"y should be a 1d array, got an array of shape {y.shape} instead.")

    def _check_X(self, X: Any, reset: bool) -> np.ndarray:
        if (
            not reset
            and type(X) is np.ndarray
            and X.dtype == np.float64
            and X.ndim == 2
            and X.shape[0] > 0
            and X.shape[1] == getattr(self, "n_features_in_", -1)
            and not hasattr(self, "feature_names_in_")
        ):
            # fast path for online use (one row per call): nothing for validate_data to do
            check_finite(X, None, "X", fix=NAN_FIX)
            return X
        check_numeric_columns(X, type(self).__name__)  # strings, datetimes: name the column
        X = validate_data(self, X, reset=reset, dtype=np.float64, ensure_all_finite=False)
        check_finite(X, getattr(self, "feature_names_in_", None), "X", fix=NAN_FIX)
        return X

    def _init_state(self, X: np.ndarray) -> None:
        lo = X.min(axis=0)
        span = X.max(axis=0) - lo
        span[span <= 0] = 1.0
        self.x_min_ = lo
        self.x_scale_ = span
        self._entropy = resolve_entropy(self.random_state)
        self._n_updates = 0
        self.n_samples_seen_ = 0
        self.compact_ = False
        d = X.shape[1]
        self._X = np.empty((0, d))
        self._y = np.empty(0)
        self._labels = np.empty(0, INDEX)
        self.trees_ = [TreeArrays.empty(d, self._n_stats(), 0) for _ in range(self.n_estimators)]
        self._posterior = TreePosteriors.empty(self.n_estimators)

    def _scale(self, X: np.ndarray) -> np.ndarray:
        return (X - self.x_min_) / self.x_scale_

    def _append(self, Xs: np.ndarray, y: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """Append rows to the shared data buffer (amortised doubling); return their ids."""
        start = self.n_samples_seen_
        self._X, self._y, self._labels = append_rows(
            (self._X, self._y, self._labels), start, (Xs, y, labels))
        self.n_samples_seen_ = start + Xs.shape[0]
        return np.arange(start, self.n_samples_seen_, dtype=INDEX)

    def _check_updatable(self) -> None:
        """Refuse to update a compact (predict-only) forest, before anything else."""
        if getattr(self, "compact_", False):
            raise PredictOnlyError(
                f"This {type(self).__name__} is compact, a predict-only model: compact() "
                "dropped the training points that online updates resample, so partial_fit "
                "cannot extend it. Keep the full model for updates (call partial_fit on it "
                "and compact() afterwards, or save it without compacting), or refit with fit."
            )

    def _update(self, X: np.ndarray, y: np.ndarray, labels: np.ndarray) -> None:
        """Grow every tree with the new rows (batch sampling on an empty tree)."""
        rows = self._append(self._scale(X), y, labels)
        n_total = self.n_samples_seen_
        update = self._n_updates
        seeds = np.random.SeedSequence(self._entropy, spawn_key=(update,)).generate_state(
            self.n_estimators
        )
        lifetime = float(self.lifetime)

        def work(t: int) -> None:
            tree = self.trees_[t]
            batch = tree.n_nodes == 0
            tree.reserve(n_total)
            grow(tree, self._X, self._y, self._labels, rows, self._task,
                 int(self.min_samples_split), lifetime, int(seeds[t]))
            if batch:
                tree.trim()

        self._map(work, range(self.n_estimators))
        self._n_updates = update + 1
        self._posterior = TreePosteriors.empty(self.n_estimators)

    def _map(self, fn, items) -> list:
        return thread_map(fn, items, self.n_jobs)

    # ------------------------------------------------------------------ prediction helpers

    def _ensure_posterior(self) -> None:
        """Recompute lazily the per-node posterior of the trees that changed."""
        stale = [t for t, p in enumerate(self._posterior) if p is None]
        if not stale:
            return
        context = self._posterior_context()

        def work(t: int) -> None:
            self._posterior[t] = self._tree_posterior(self._tree_arrays(t), context)

        self._map(work, stale)

    def _tree_arrays(self, t: int) -> TreeArrays:
        """The node arrays of tree ``t`` (a compact tree expanded, in preorder)."""
        tree = self.trees_[t]
        return tree.expand(self._task) if isinstance(tree, CompactTree) else tree

    def _scaled_rows(self, X: Any) -> tuple[np.ndarray, np.ndarray | None]:
        """Validated, scaled rows in locality order, and the permutation (None: as given).

        Prediction walks every tree for every row; rows sorted by their leaf in the first
        tree's preorder walk the same paths one after another, so nodes stay in cache
        (about 20% faster on trees of 10^5 rows). Trees that fit in cache anyway keep the
        given order. Each row's result is computed exactly as before; the predictive API
        (:mod:`basics.predictive`) puts rows back in the order of ``X``.
        """
        Xs = self._scale(self._check_X(X, reset=False))
        self._ensure_posterior()
        R0 = self._posterior[0][0]  # the first tree's predictor
        small_tree = _predict.predictor_nbytes(R0) < LOCALITY_MIN_TREE_BYTES
        if Xs.shape[0] < LOCALITY_MIN_ROWS or small_tree:
            return Xs, None
        leaf = np.empty(Xs.shape[0], INDEX)
        _predict.leaf_positions(Xs, R0, leaf)
        perm = np.argsort(leaf, kind="stable")
        return Xs[perm], perm

    def _predict_rows(self, X: Any) -> tuple[np.ndarray, np.ndarray | None]:
        """The rows of the predictive API (:mod:`basics.predictive`): scaled, in locality
        order, and their permutation."""
        check_is_fitted(self)
        return self._scaled_rows(X)

    @staticmethod
    def _predictor(tree: TreeArrays) -> tuple[np.ndarray, tuple]:
        """Preorder of the live slots and the packed predictor record ``R``."""
        order = preorder(tree.left, tree.right, tree.root, tree.n_nodes)
        R = _predict.pack_predictor(tree.record(), order)
        return order, R

    def apply(self, X: Any) -> np.ndarray:
        """Leaf slot of every row in every tree, shape (n_samples, n_estimators).

        A compact forest numbers its nodes in depth-first preorder: the slots of a tree grown
        in one batch (which are in preorder), not those of a tree updated online.
        """
        check_is_fitted(self)
        Xs = self._scale(self._check_X(X, reset=False))
        out = np.empty((Xs.shape[0], self.n_estimators), INDEX)
        for t in range(len(self.trees_)):
            tree = self._tree_arrays(t)
            col = np.empty(Xs.shape[0], INDEX)
            _predict.apply_tree(Xs, tree.record(), tree.root, col)
            out[:, t] = col
        return out

    @property
    def n_leaves_(self) -> np.ndarray:
        """Number of leaves of every tree."""
        check_is_fitted(self)
        return np.array([t.n_leaves for t in self.trees_])

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        return tags

    # ------------------------------------------------------------------ persistence

    def __getstate__(self) -> dict:
        """Pickle without the lazy per-tree posterior cache (rebuilt at the next predict).

        The cache is several times the size of the trees; shipping a model to Dask workers
        must not carry it.
        """
        state = super().__getstate__()
        if state.get("_posterior") is not None:
            state = {**state, "_posterior": TreePosteriors.empty(len(state["_posterior"]))}
        return state

    def _get_state(self) -> dict:
        """Every fitted attribute as a persistence state (``ebf.artifact`` writes it to disk).

        Includes the data buffer (the online algorithm resamples paused blocks from it), the
        seed entropy and update counter (so a later ``partial_fit`` draws the same numbers),
        and the live part of every tree. The lazy posterior cache is left out. Arrays are
        views of the model's own buffers, not copies.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If the forest has not been fitted (a ``ValueError``).
        """
        check_is_fitted(self, "trees_")
        if self.compact_:
            return self._common_state({"compact_": True,
                                       "trees_": [tree.to_state() for tree in self.trees_]})
        n = int(self.n_samples_seen_)
        return self._common_state({
            "_entropy": int(self._entropy),
            "_n_updates": int(self._n_updates),
            "_X": self._X[:n],
            "_y": self._y[:n],
            "_labels": self._labels[:n],
            "trees_": [tree.to_state(n) for tree in self.trees_],
        })

    def _common_state(self, state: dict) -> dict:
        """``state`` plus what full and compact states share: sizes, scaling, names, task."""
        state = {"n_features_in_": int(self.n_features_in_),
                 "n_samples_seen_": int(self.n_samples_seen_),
                 "x_min_": self.x_min_, "x_scale_": self.x_scale_, **state}
        if hasattr(self, "feature_names_in_"):
            state["feature_names_in_"] = [str(name) for name in self.feature_names_in_]
        state.update(self._task_state())
        return state

    def compact(self) -> _BaseMondrianForest:
        """A new, predict-only copy of the fitted forest that stores what prediction needs.

        The copy drops the online state (the data buffer, the per-leaf lists of its rows,
        parent pointers, the seed of later updates) and keeps every tree in depth-first
        preorder with the narrowest exact dtypes (see :mod:`mondrian._compact`): its
        predictions equal the full model's bit for bit, in a few times less memory. It
        cannot be updated: ``partial_fit`` raises :class:`mondrian.PredictOnlyError`. This
        model is unchanged.

        Returns
        -------
        estimator
            Of the same class and parameters, with ``compact_ = True``.

        Raises
        ------
        sklearn.exceptions.NotFittedError
            If the forest has not been fitted.

        Examples
        --------
        >>> import numpy as np
        >>> from mondrian import MondrianForestRegressor
        >>> X = np.random.default_rng(0).random((300, 2)); y = X[:, 0]
        >>> full = MondrianForestRegressor(n_estimators=3, random_state=0).fit(X, y)
        >>> small = full.compact()
        >>> bool(np.array_equal(small.predict(X), full.predict(X))), small.compact_
        (True, True)
        """
        check_is_fitted(self, "trees_")
        if self.compact_:
            state = self._get_state()
        else:
            trees = []
            for t, tree in enumerate(self.trees_):
                try:
                    trees.append(compact_state(tree, self._task))
                except ValueError as exc:
                    raise ValueError(f"trees_[{t}]: {exc}") from exc
            state = self._common_state({"compact_": True, "trees_": trees})
        out = clone(self)
        out._set_state(state)  # the checks of a loaded compact model, on this one too
        return out

    def _set_state(self, state: dict) -> None:
        """Restore the fitted attributes saved by :meth:`_get_state`.

        Everything is validated before any attribute is set (the tree arrays in full, since
        the numba kernels do not bounds-check), so a bad state raises ``ValueError`` /
        ``KeyError`` and leaves the estimator unchanged. Arrays are copied unless the state
        owns them (as arrays freshly loaded from disk do).
        """
        d = state_int(state, "n_features_in_", 1)
        n = state_int(state, "n_samples_seen_", 1)
        compact = state.get("compact_", False)
        if not isinstance(compact, bool):
            raise ValueError(f"compact_ must be true or false, got {compact!r:.60}")
        task_attrs, n_stats = self._task_from_state(state)
        attrs: dict = {
            "n_features_in_": d,
            "n_samples_seen_": n,
            "compact_": compact,
            "x_min_": state_array(state, "x_min_", np.float64, (d,)),
            "x_scale_": state_array(state, "x_scale_", np.float64, (d,)),
            **task_attrs,
        }
        if not compact:
            attrs.update({
                "_entropy": state_int(state, "_entropy", 0),
                "_n_updates": state_int(state, "_n_updates", 0),
                "_X": state_array(state, "_X", np.float64, (n, d)),
                "_y": state_array(state, "_y", np.float64, (n,)),
                "_labels": state_array(state, "_labels", INDEX, (n,)),
            })
            labels = attrs["_labels"]
            if np.any(labels < 0) or np.any(labels >= n_stats):
                raise ValueError(f"_labels has codes outside [0, {n_stats})")
        for key in ("x_min_", "x_scale_", "_X", "_y"):
            if key in attrs and not np.isfinite(attrs[key]).all():
                raise ValueError(f"{key} holds NaN or inf")
        if "_y" in attrs:  # targets (zeros for a classifier; basics.bounds)
            check_locations("_y", attrs["_y"])
        if not (attrs["x_scale_"] > 0).all():
            raise ValueError("x_scale_ must be positive (the training span of every feature)")
        trees = state["trees_"]
        if not isinstance(trees, list) or len(trees) != self.n_estimators:
            raise ValueError(
                f"trees_ must be a list of n_estimators={self.n_estimators} tree states, got "
                f"{len(trees) if isinstance(trees, list) else type(trees).__name__}"
            )
        attrs["trees_"] = []
        for t, tree_state in enumerate(trees):
            if not isinstance(tree_state, dict):
                raise ValueError(f"trees_[{t}] must be a tree state, got {tree_state!r:.60}")
            tree_class = CompactTree if compact else TreeArrays
            try:
                tree = tree_class.from_state(tree_state, d, n_stats, n, self._task)
            except KeyError as exc:
                raise ValueError(f"trees_[{t}]: missing entry {exc}") from exc
            except (TypeError, ValueError) as exc:
                raise ValueError(f"trees_[{t}]: {exc}") from exc
            attrs["trees_"].append(tree)
        names = state_names(state, "feature_names_in_", d)
        if names is not None:
            attrs["feature_names_in_"] = names
        self.__dict__.pop("feature_names_in_", None)
        if compact:  # a full model's online state would outlive the compact trees
            for name in ("_entropy", "_n_updates", "_X", "_y", "_labels"):
                self.__dict__.pop(name, None)
        self.__dict__.update(attrs)
        self._posterior = TreePosteriors.empty(self.n_estimators)

    def _task_state(self) -> dict:
        """Task-specific fitted attributes for :meth:`_get_state` (none for regression)."""
        return {}

    def _task_from_state(self, state: dict) -> tuple[dict, int]:
        """Task-specific attributes from a state, and the number of statistics per node."""
        return {}, NODE_REG_STATS
