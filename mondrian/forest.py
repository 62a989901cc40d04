"""Mondrian forest estimators (batch and online, regression and classification).

Thin scikit-learn estimators over the numba kernels of ``_tree``, ``_predict``,
``posterior`` and ``ikn``.

References
----------
Lakshminarayanan, Roy & Teh (2016), "Mondrian forests for large-scale regression when
uncertainty matters", AISTATS (regression: Sec. 2-3, App. A-C).
Lakshminarayanan (2016), PhD thesis, ch. 5 (classification: HNSP prior, IKN smoothing,
paused Mondrians, Alg. 5.1-5.10).
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from basics.mixture import GaussianMixture
from basics.seeds import resolve_entropy
from basics.tasks import CLASSIFICATION, REGRESSION
from basics.threads import n_threads
from basics.validation import (
    check_classes,
    check_finite,
    check_numeric_columns,
    check_regression_target,
    state_array,
    state_int,
    state_names,
    unchanged_on_error,
)

from . import _predict
from ._order import preorder
from ._predict import (
    N_NODE_PARAMS,
    NODE_MEAN,
    NODE_VAR,
    OFF_MEAN,
    OFF_VAR,
)
from ._tree import TreeArrays, grow
from .config import INDEX, NODE_REG_STATS
from .ikn import ikn_posterior
from .posterior import belief_propagation, empirical_moments, hyperparameters

#: Rows per block when a full predictive mixture is built (bounds memory of quantiles).
PREDICT_BLOCK = 65_536


#: Prediction keeps the given row order below this many rows, or when the first tree's
#: predictor is smaller than this (it stays in a 1 MiB L2 cache): sorting would not pay.
LOCALITY_MIN_ROWS = 4096
LOCALITY_MIN_TREE_BYTES = 1 << 20


def _unsort(a: np.ndarray, perm: np.ndarray | None) -> np.ndarray:
    """Rows of ``a`` (computed for ``X[perm]``) back in the order of ``X``."""
    if perm is None:
        return a
    out = np.empty_like(a)
    out[perm] = a
    return out


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
        "n_jobs": [Integral, None],
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
            check_finite(X, None, "X")
            return X
        check_numeric_columns(X, type(self).__name__)  # strings, datetimes: name the column
        X = validate_data(self, X, reset=reset, dtype=np.float64, ensure_all_finite=False)
        check_finite(X, getattr(self, "feature_names_in_", None), "X")
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
        d = X.shape[1]
        self._X = np.empty((0, d))
        self._y = np.empty(0)
        self._labels = np.empty(0, INDEX)
        self.trees_ = [TreeArrays.empty(d, self._n_stats(), 0) for _ in range(self.n_estimators)]
        self._posterior = [None] * self.n_estimators

    def _scale(self, X: np.ndarray) -> np.ndarray:
        return (X - self.x_min_) / self.x_scale_

    def _append(self, Xs: np.ndarray, y: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """Append rows to the shared data buffer (amortised doubling); return their ids."""
        start = self.n_samples_seen_
        stop = start + Xs.shape[0]
        if stop > self._X.shape[0]:
            cap = max(stop, 2 * self._X.shape[0])
            for name in ("_X", "_y", "_labels"):
                old = getattr(self, name)
                new = np.empty((cap,) + old.shape[1:], old.dtype)
                new[:start] = old[:start]
                setattr(self, name, new)
        self._X[start:stop] = Xs
        self._y[start:stop] = y
        self._labels[start:stop] = labels
        self.n_samples_seen_ = stop
        return np.arange(start, stop, dtype=INDEX)

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
        self._posterior = [None] * self.n_estimators

    def _map(self, fn, items) -> list:
        items = list(items)
        n = min(n_threads(self.n_jobs), len(items))
        if n <= 1:
            return [fn(i) for i in items]
        with ThreadPoolExecutor(n) as pool:
            return list(pool.map(fn, items))

    # ------------------------------------------------------------------ prediction helpers

    def _ensure_posterior(self) -> None:
        """Recompute lazily the per-node posterior of the trees that changed."""
        stale = [t for t, p in enumerate(self._posterior) if p is None]
        if not stale:
            return
        context = self._posterior_context()

        def work(t: int) -> None:
            self._posterior[t] = self._tree_posterior(self.trees_[t], context)

        self._map(work, stale)

    def _scaled_rows(self, X: Any) -> tuple[np.ndarray, np.ndarray | None]:
        """Validated, scaled rows in locality order, and the permutation (None: as given).

        Prediction walks every tree for every row; rows sorted by their leaf in the first
        tree's preorder walk the same paths one after another, so nodes stay in cache
        (about 20% faster on trees of 10^5 rows). Trees that fit in cache anyway keep the
        given order. Each row's result is computed exactly as before; callers put rows
        back with :func:`_unsort`.
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

    def _row_blocks(self, n: int) -> list[slice]:
        k = min(n_threads(self.n_jobs), max(1, n // 1024))
        edges = np.linspace(0, n, k + 1).astype(int)
        return [slice(a, b) for a, b in zip(edges[:-1], edges[1:], strict=True)]

    @staticmethod
    def _predictor(tree: TreeArrays) -> tuple[np.ndarray, tuple]:
        """Preorder of the live slots and the packed predictor record ``R``."""
        order = preorder(tree.left, tree.right, tree.root, tree.n_nodes)
        R = _predict.pack_predictor(tree.left, tree.right, tree.parent, tree.feature,
                                    tree.threshold, tree.tau, tree.lower, tree.upper, order)
        return order, R

    def apply(self, X: Any) -> np.ndarray:
        """Leaf slot of every row in every tree, shape (n_samples, n_estimators)."""
        check_is_fitted(self)
        Xs = self._scale(self._check_X(X, reset=False))
        out = np.empty((Xs.shape[0], self.n_estimators), INDEX)
        for t, tree in enumerate(self.trees_):
            col = np.empty(Xs.shape[0], INDEX)
            _predict.apply_tree(Xs, tree.left, tree.right, tree.feature, tree.threshold,
                                tree.root, col)
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
            state = {**state, "_posterior": [None] * len(state["_posterior"])}
        return state

    def _get_state(self) -> dict:
        """Every fitted attribute as a persistence state (``ebf.model`` writes it to disk).

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
        n = int(self.n_samples_seen_)
        state: dict = {
            "n_features_in_": int(self.n_features_in_),
            "n_samples_seen_": n,
            "x_min_": self.x_min_,
            "x_scale_": self.x_scale_,
            "_entropy": int(self._entropy),
            "_n_updates": int(self._n_updates),
            "_X": self._X[:n],
            "_y": self._y[:n],
            "_labels": self._labels[:n],
            "trees_": [tree.to_state(n) for tree in self.trees_],
        }
        if hasattr(self, "feature_names_in_"):
            state["feature_names_in_"] = [str(name) for name in self.feature_names_in_]
        state.update(self._task_state())
        return state

    def _set_state(self, state: dict) -> None:
        """Restore the fitted attributes saved by :meth:`_get_state`.

        Everything is validated before any attribute is set (the tree arrays in full, since
        the numba kernels do not bounds-check), so a bad state raises ``ValueError`` /
        ``KeyError`` and leaves the estimator unchanged. Arrays are copied unless the state
        owns them (as arrays freshly loaded from disk do).
        """
        d = state_int(state, "n_features_in_", 1)
        n = state_int(state, "n_samples_seen_", 1)
        task_attrs, n_stats = self._task_from_state(state)
        attrs: dict = {
            "n_features_in_": d,
            "n_samples_seen_": n,
            "x_min_": state_array(state, "x_min_", np.float64, (d,)),
            "x_scale_": state_array(state, "x_scale_", np.float64, (d,)),
            "_entropy": state_int(state, "_entropy", 0),
            "_n_updates": state_int(state, "_n_updates", 0),
            "_X": state_array(state, "_X", np.float64, (n, d)),
            "_y": state_array(state, "_y", np.float64, (n,)),
            "_labels": state_array(state, "_labels", INDEX, (n,)),
            **task_attrs,
        }
        labels = attrs["_labels"]
        if np.any(labels < 0) or np.any(labels >= n_stats):
            raise ValueError(f"_labels has codes outside [0, {n_stats})")
        for key in ("x_min_", "x_scale_", "_X", "_y"):
            if not np.isfinite(attrs[key]).all():
                raise ValueError(f"{key} holds NaN or inf")
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
            try:
                tree = TreeArrays.from_state(tree_state, d, n_stats, n, self._task)
            except KeyError as exc:
                raise ValueError(f"trees_[{t}]: missing entry {exc}") from exc
            except (TypeError, ValueError) as exc:
                raise ValueError(f"trees_[{t}]: {exc}") from exc
            attrs["trees_"].append(tree)
        names = state_names(state, "feature_names_in_", d)
        if names is not None:
            attrs["feature_names_in_"] = names
        self.__dict__.pop("feature_names_in_", None)
        self.__dict__.update(attrs)
        self._posterior = [None] * self.n_estimators

    def _task_state(self) -> dict:
        """Task-specific fitted attributes for :meth:`_get_state` (none for regression)."""
        return {}

    def _task_from_state(self, state: dict) -> tuple[dict, int]:
        """Task-specific attributes from a state, and the number of statistics per node."""
        return {}, NODE_REG_STATS


class MondrianForestRegressor(RegressorMixin, _BaseMondrianForest):
    """Mondrian forest regressor with a hierarchical Gaussian posterior.

    Each tree is a Mondrian tree (paper Alg. 1-2) grown on inputs scaled to [0, 1] by
    the training min/max; labels follow a hierarchical Gaussian prior along the tree
    (Sec. 3) whose posterior is computed by exact belief propagation (Sec. 3.1) or by the
    fast empirical approximation (App. C). A prediction is a Gaussian mixture over the
    path nodes of every tree (eq. 3-5), so it widens away from the training data.

    Parameters
    ----------
    n_estimators : int, default=10
        Number of trees.
    lifetime : float, default=inf
        Lifetime lambda of the Mondrian process.
    min_samples_split : int, default=10
        A block with fewer points is not split (paused, and resumed online once it
        holds enough points).
    posterior : {"exact", "empirical"}, default="exact"
        ``"exact"``: belief propagation with the hyperparameter heuristic of App. B,
        recomputed lazily after ``partial_fit`` for the trees that changed.
        ``"empirical"``: node mean and variance of the labels (App. C), O(log n) updates.
    random_state : int, RandomState instance or None, default=None
        Seeds every tree: tree t at update u uses word t of ``SeedSequence(seed, spawn_key=(u,))``,
        so results do not depend on ``n_jobs``.
    n_jobs : int or None, default=None
        Threads over trees (fit) and over row blocks (predict); -1 uses all cores.

    Attributes
    ----------
    trees_ : list of TreeArrays
        Flat arrays of every tree.
    x_min_, x_scale_ : ndarray of shape (n_features,)
        The input scaling fixed by the first fit.
    hyperparameters_ : dict
        ``mu_H, gamma1, gamma2, noise_var`` of the posterior (App. B), from the data seen.
    n_samples_seen_ : int
        Training points seen so far.

    Examples
    --------
    >>> import numpy as np
    >>> from mondrian import MondrianForestRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((200, 2)); y = X[:, 0] + 0.1 * rng.normal(size=200)
    >>> reg = MondrianForestRegressor(n_estimators=5, random_state=0).fit(X, y)
    >>> mean, std = reg.predict(X[:3], return_std=True)
    >>> reg.predict_distribution(X[:3]).quantile([0.05, 0.95]).shape
    (3, 2)
    """

    _task = REGRESSION
    _parameter_constraints: dict = {
        **_BaseMondrianForest._parameter_constraints,
        "posterior": [StrOptions({"exact", "empirical"})],
    }

    def __init__(
        self,
        n_estimators: int = 10,
        lifetime: float = math.inf,
        min_samples_split: int = 10,
        posterior: str = "exact",
        random_state: Any = None,
        n_jobs: int | None = None,
    ) -> None:
        self.n_estimators = n_estimators
        self.lifetime = lifetime
        self.min_samples_split = min_samples_split
        self.posterior = posterior
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _check_y(self, y: Any) -> np.ndarray:
        name = getattr(y, "name", None)
        y = np.asarray(self._check_target(y), dtype=np.float64)
        check_regression_target(y, name)  # finite, and small enough for the sums of y^2
        return y

    def fit(self, X: Any, y: Any) -> MondrianForestRegressor:
        """Sample a fresh forest on (X, y) (paper Alg. 1-2)."""
        self._validate_params()
        with unchanged_on_error(self):
            X = self._check_X(X, reset=True)
            y = self._check_y(y)
            if y.shape[0] != X.shape[0]:
                raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]}.")
        self._init_state(X)
        self._update(X, y, np.zeros(X.shape[0], INDEX))
        return self

    def partial_fit(self, X: Any, y: Any) -> MondrianForestRegressor:
        """Extend every tree with (X, y), one point at a time (paper Alg. 3-4).

        The first call fixes the input scaling. A call that raises leaves the model
        unchanged.
        """
        first = not hasattr(self, "trees_")
        if first:
            self._validate_params()
        with unchanged_on_error(self):
            X = self._check_X(X, reset=first)
            y = self._check_y(y)
            if y.shape[0] != X.shape[0]:
                raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]}.")
        if first:
            self._init_state(X)
        self._update(X, y, np.zeros(X.shape[0], INDEX))
        return self

    # ------------------------------------------------------------------ posterior

    def _posterior_context(self) -> dict:
        root = self.trees_[0]
        n, s1, s2 = root.stats[root.root]
        mu_h, gamma1, gamma2, noise_var = hyperparameters(n, s1, s2, self.n_features_in_)
        return dict(mu_H=mu_h, gamma1=gamma1, gamma2=gamma2, noise_var=noise_var)

    @property
    def hyperparameters_(self) -> dict:
        """``mu_H, gamma1, gamma2, noise_var`` used by the posterior (App. B).

        Computed from the root statistics, so prediction never changes ``__dict__``.
        """
        check_is_fitted(self, "trees_")
        return self._posterior_context()

    def _tree_posterior(self, tree: TreeArrays, h: dict) -> tuple:
        """Predictor ``R``, per-node parameters ``P`` and hyperparameters ``h`` of a tree."""
        n = tree.n_nodes
        order, R = self._predictor(tree)
        exact = self.posterior == "exact"
        if exact:
            post_mean, post_var, down_mean, belief_var = (np.empty(n) for _ in range(4))
            up_lam, up_eta = np.zeros(n), np.zeros(n)
            belief_propagation(tree.left, tree.right, tree.parent, tree.tau, tree.stats,
                               tree.root, n, h["mu_H"], h["gamma1"], h["gamma2"],
                               h["noise_var"], post_mean, post_var, down_mean, belief_var,
                               up_lam, up_eta)
            P = _predict.exact_parameters(order, tree.parent, tree.tau, h["gamma1"],
                                          h["gamma2"], h["noise_var"], post_mean, post_var,
                                          down_mean, belief_var, up_lam, up_eta)
        else:
            P = np.zeros((n, N_NODE_PARAMS))
            parent = tree.parent[:n]
            has_parent = parent >= 0
            pidx = np.where(has_parent, parent, 0)
            empirical_moments(tree.stats, n, h["noise_var"], P[:, NODE_MEAN], P[:, NODE_VAR])
            P[:, OFF_MEAN] = np.where(has_parent, P[pidx, NODE_MEAN], P[tree.root, NODE_MEAN])
            P[:, OFF_VAR] = np.where(has_parent, P[pidx, NODE_VAR], P[tree.root, NODE_VAR])
            P = np.ascontiguousarray(P[order])
        hv = np.array([float(exact), h["gamma1"], h["gamma2"], h["noise_var"],
                       _sigmoid(h["gamma2"] * float(self.lifetime))])
        return R, P, hv

    # ------------------------------------------------------------------ prediction

    def predict(self, X: Any, return_std: bool = False):
        """Predictive mean (and standard deviation) of the forest mixture (eq. 4-5)."""
        check_is_fitted(self)
        Xs, perm = self._scaled_rows(X)
        m1 = np.zeros(Xs.shape[0])
        m2 = np.zeros(Xs.shape[0])

        def work(block: slice) -> None:
            for R, P, h in self._posterior:
                _predict.regression_moments(Xs[block], R, P, h, m1[block], m2[block])

        self._map(work, self._row_blocks(Xs.shape[0]))
        m1, m2 = _unsort(m1, perm), _unsort(m2, perm)
        mean = m1 / self.n_estimators
        if not return_std:
            return mean
        var = np.maximum(m2 / self.n_estimators - mean * mean, 0.0)
        return mean, np.sqrt(var)

    def predict_distribution(self, X: Any) -> GaussianMixture:
        """The full predictive Gaussian mixture per row: paths of all trees (eq. 3, 5)."""
        check_is_fitted(self)
        Xs, perm = self._scaled_rows(X)
        return self._mixture(Xs, perm)

    def _mixture(self, Xs: np.ndarray, perm: np.ndarray | None = None) -> GaussianMixture:
        """The mixture of the rows ``Xs``, put back in the order of ``perm`` if given."""
        n = Xs.shape[0]
        counts = np.zeros(n, INDEX)
        for R, _, _ in self._posterior:
            _predict.regression_count(Xs, R, counts)
        width = int(counts.max()) if n else 1
        W = np.zeros((n, width))
        M = np.zeros((n, width))
        V = np.ones((n, width))
        cursor = np.zeros(n, INDEX)
        w_tree = 1.0 / self.n_estimators
        for R, P, h in self._posterior:
            _predict.regression_components(Xs, R, P, h, w_tree, cursor, W, M, V)
        return GaussianMixture(_unsort(W, perm), _unsort(M, perm), _unsort(V, perm))

    def predict_quantiles(self, X: Any, q: Any = (0.05, 0.5, 0.95)) -> np.ndarray:
        """Quantiles of the predictive mixture, shape (n_samples, len(q)).

        Rows are processed in blocks so that memory stays bounded on large inputs.
        """
        check_is_fitted(self)
        Xs, perm = self._scaled_rows(X)
        q = np.atleast_1d(np.asarray(q, dtype=np.float64))
        out = np.empty((Xs.shape[0], q.shape[0]))
        for start in range(0, Xs.shape[0], PREDICT_BLOCK):
            block = slice(start, start + PREDICT_BLOCK)
            out[block] = self._mixture(Xs[block]).quantile(q).reshape(-1, q.shape[0])
        return _unsort(out, perm)


class MondrianForestClassifier(ClassifierMixin, _BaseMondrianForest):
    """Mondrian forest classifier with HNSP / interpolated Kneser-Ney smoothing.

    Trees are paused Mondrian trees (thesis Alg. 5.9-5.10): a block whose labels are all
    identical, or with fewer than ``min_samples_split`` points, is not split until that
    changes online. Predictions follow thesis Alg. 5.8: per tree a mixture over the
    branch-off points of the path with the expected discount under the truncated
    exponential, averaged over trees.

    Parameters
    ----------
    n_estimators : int, default=10
    lifetime : float, default=inf
    min_samples_split : int, default=2
    discount_scale : float or None, default=None
        gamma of the discount d_j = exp(-gamma (tau_j - tau_parent(j))); None means
        ``10 * n_features`` (thesis Sec. 5.7).
    random_state : int, RandomState instance or None, default=None
    n_jobs : int or None, default=None

    Examples
    --------
    >>> import numpy as np
    >>> from mondrian import MondrianForestClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((200, 2)); y = (X[:, 0] > 0.5).astype(int)
    >>> clf = MondrianForestClassifier(random_state=0).partial_fit(X, y, classes=[0, 1])
    >>> clf.predict_proba(X[:2]).sum(axis=1)
    array([1., 1.])
    """

    _task = CLASSIFICATION
    _parameter_constraints: dict = {
        **_BaseMondrianForest._parameter_constraints,
        "discount_scale": [Interval(Real, 0, None, closed="left"), None],
    }

    def __init__(
        self,
        n_estimators: int = 10,
        lifetime: float = math.inf,
        min_samples_split: int = 2,
        discount_scale: float | None = None,
        random_state: Any = None,
        n_jobs: int | None = None,
    ) -> None:
        self.n_estimators = n_estimators
        self.lifetime = lifetime
        self.min_samples_split = min_samples_split
        self.discount_scale = discount_scale
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _n_stats(self) -> int:
        return len(self.classes_)

    def _task_state(self) -> dict:
        # object arrays (e.g. strings from pandas) cannot be stored as .npy without pickle
        classes = self.classes_
        if classes.dtype.hasobject:
            return {"classes_": [c.item() if isinstance(c, np.generic) else c for c in classes]}
        return {"classes_": classes}

    def _task_from_state(self, state: dict) -> tuple[dict, int]:
        classes = state["classes_"]
        if isinstance(classes, list):
            if not all(isinstance(c, (str, int, float)) for c in classes):
                raise ValueError("classes_ must hold strings or numbers")
            classes = np.array(classes, dtype=object)
        elif not isinstance(classes, np.ndarray):
            raise ValueError(f"classes_ must be a list or an array, got {classes!r:.60}")
        else:
            classes = np.require(classes, None, ["C", "W", "O"])
        check_classes(classes)
        return {"classes_": classes}, int(classes.shape[0])

    def _encode(self, y: Any, classes: np.ndarray) -> np.ndarray:
        y = self._check_target(y)
        if y.dtype.kind == "f":
            check_finite(y[:, None], ["y"], "y")
        codes = np.searchsorted(classes, y)
        codes = np.clip(codes, 0, len(classes) - 1)
        unknown = classes[codes] != y
        if np.any(unknown):
            new = np.unique(y[unknown])
            raise ValueError(
                f"y has {int(unknown.sum())} rows with classes {new.tolist()[:10]} that are "
                f"not among the declared classes {classes.tolist()}; pass every class in "
                "`classes=` on the first partial_fit call (or refit)."
            )
        return codes.astype(INDEX)

    def fit(self, X: Any, y: Any) -> MondrianForestClassifier:
        """Sample a fresh forest of paused Mondrian trees (thesis Alg. 5.1, 5.9)."""
        self._validate_params()
        with unchanged_on_error(self):
            X = self._check_X(X, reset=True)
            y = self._check_target(y)
            if y.dtype.kind == "f":
                check_finite(y[:, None], ["y"], "y")
            check_classification_targets(y)
            classes = np.unique(y)
            labels = self._encode(y, classes)
            if labels.shape[0] != X.shape[0]:
                raise ValueError(f"X has {X.shape[0]} rows but y has {labels.shape[0]}.")
        self.classes_ = classes
        self._init_state(X)
        self._update(X, np.zeros(X.shape[0]), labels)
        return self

    def partial_fit(self, X: Any, y: Any, classes: Any = None) -> MondrianForestClassifier:
        """Extend every tree with (X, y) (thesis Alg. 5.5, 5.10).

        ``classes`` (all classes that will ever be seen) is required on the first call.
        A call that raises leaves the model unchanged.
        """
        first = not hasattr(self, "trees_")
        if first:
            self._validate_params()
            if classes is None:
                raise ValueError("classes must be passed on the first call to partial_fit.")
            classes = np.unique(np.asarray(classes))
        else:
            if classes is not None and not np.array_equal(np.unique(classes), self.classes_):
                raise ValueError(
                    f"classes={list(classes)} differs from the classes of the first call "
                    f"{self.classes_.tolist()}."
                )
            classes = self.classes_
        with unchanged_on_error(self):
            X = self._check_X(X, reset=first)
            labels = self._encode(y, classes)
            if labels.shape[0] != X.shape[0]:
                raise ValueError(f"X has {X.shape[0]} rows but y has {labels.shape[0]}.")
        if first:
            self.classes_ = classes
            self._init_state(X)
        self._update(X, np.zeros(X.shape[0]), labels)
        return self

    def _posterior_context(self) -> float:
        if self.discount_scale is None:
            return 10.0 * self.n_features_in_
        return float(self.discount_scale)

    def _tree_posterior(self, tree: TreeArrays, gamma: float) -> tuple:
        G = np.empty((tree.n_nodes, len(self.classes_)))
        ikn_posterior(tree.left, tree.right, tree.tau, tree.stats, tree.root, tree.n_nodes,
                      gamma, G)
        order, R = self._predictor(tree)
        parent = tree.parent[order]
        G_parent = np.where((parent >= 0)[:, None], G[np.maximum(parent, 0)],
                            1.0 / len(self.classes_))
        return R, np.ascontiguousarray(tree.stats[order]), np.ascontiguousarray(G[order]), G_parent

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities averaged over trees (thesis Alg. 5.8)."""
        check_is_fitted(self)
        Xs, perm = self._scaled_rows(X)
        gamma = self._posterior_context()
        out = np.zeros((Xs.shape[0], len(self.classes_)))

        def work(block: slice) -> None:
            for R, counts, G, G_parent in self._posterior:
                _predict.classification_proba(Xs[block], R, counts, G, G_parent, gamma,
                                              out[block])

        self._map(work, self._row_blocks(Xs.shape[0]))
        return _unsort(out, perm) / self.n_estimators

    def predict(self, X: Any) -> np.ndarray:
        """Most probable class."""
        check_is_fitted(self)
        return self.classes_[np.argmax(self.predict_proba(X), axis=1)]
