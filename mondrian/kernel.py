"""The Mondrian kernel: random features of the Laplace kernel from Mondrian partitions.

Balog, Lakshminarayanan, Ghahramani, Roy & Teh (2016), "The Mondrian kernel" (formulas in
``../shared/papers/README.md``): M independent Mondrian partitions of lifetime lambda give
the feature map phi(x), the one-hot indicator of x's cell in every partition scaled by
1 / sqrt(M), and phi(x)^T phi(x') = the fraction of partitions in which x and x' share a
cell, which converges to the Laplace kernel exp(-lambda ||x - x'||_1) as M grows
(Propositions 1-2).

The partitions are Mondrian trees of the forest core (``_tree.grow``; ``TREE_LAYOUT.md``)
grown on the raw inputs without a stopping rule but the lifetime (Sec. 2-3), and extended
online by the conditional Mondrian (Sec. 5). The kernels are in ``_kernel.py``.
"""

from __future__ import annotations

import copy
import math
from numbers import Integral, Real
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, TransformerMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from basics.mixture import GaussianMixture
from basics.seeds import resolve_entropy
from basics.threads import N_JOBS, thread_map
from basics.validation import (
    check_finite,
    check_numeric_columns,
    check_regression_target,
    state_array,
    state_int,
    state_names,
    unchanged_on_error,
)

from . import _kernel
from ._base import append_rows, classes_entry, classes_from_entry
from ._order import preorder
from ._tree import TreeArrays, grow
from .config import INDEX, NO_NODE, NODE_REG_STATS

__all__ = ["MondrianKernelClassifier", "MondrianKernelFeatures", "MondrianKernelRegressor"]

#: ``SeedSequence`` spawn key of the hash seeds of :func:`_kernel.cells` (updates use their
#: counter 0, 1, 2, ... as key, so this one is out of their range).
HASH_KEY = 2**31 - 1


def cell_columns(tree: TreeArrays, lam: float) -> np.ndarray:
    """The cells of ``tree``'s partition at width ``lam``, numbered in preorder.

    A cell is a node reached by time ``lam`` (the root, or its parent split at or before
    ``lam``) that is a leaf or splits after ``lam``. Returns, per node slot, its cell number
    or ``NO_NODE``.
    """
    n = tree.n_nodes
    order = preorder(tree.left, tree.right, tree.root, n)
    parent = tree.parent[order]
    reached = (parent == NO_NODE) | (tree.tau[np.maximum(parent, 0)] <= lam)
    cell = reached & ((tree.left[order] == NO_NODE) | (tree.tau[order] > lam))
    column = np.full(n, NO_NODE, INDEX)
    column[order[cell]] = np.arange(int(cell.sum()))
    return column


class MondrianKernelFeatures(TransformerMixin, BaseEstimator):
    """Sparse random features whose inner products approximate the Laplace kernel.

    ``fit`` samples ``n_mondrians`` Mondrian partitions of lifetime ``lifetime`` on the
    training points (paper Sec. 3); ``transform`` maps any rows to a CSR matrix with
    exactly ``n_mondrians`` non-zeros per row, each ``1 / sqrt(n_mondrians)``: the cell of
    the row in every partition, so ``Z @ Z.T`` approximates exp(-lifetime ||x - x'||_1).

    A row outside the training points' box may fall in a part of the space that the
    partition, extended by the conditional Mondrian (Sec. 5), cuts off from every training
    cell: it then gets the partition's "unseen" column, which no training row has. That
    draw is made from a hash of the row's values, so the same row always gets the same
    features; the kernel between a new row and a training row has the law of the process
    (as if the row had been in the fit), while two new rows cut off in the same partition
    share its unseen column.

    Parameters
    ----------
    n_mondrians : int, default=50
        Independent partitions M; the approximation error falls as 1 / sqrt(M).
    lifetime : float, default=1.0
        lambda, the inverse kernel width, in the units of the inputs (the kernel is
        exp(-lambda sum_d |x_d - x'_d|)): standardise the columns first if their units
        differ.
    random_state : int, RandomState instance or None, default=None
    n_jobs : int or None, default=None
        Threads over partitions.

    Attributes
    ----------
    trees_ : list of TreeArrays
        The partitions (flat Mondrian trees; split times ``tau`` up to ``lifetime``).
    n_cells_ : ndarray of shape (n_mondrians,)
        Cells of every partition at ``lifetime`` (its leaves).
    n_features_out_ : int
        ``n_cells_.sum() + n_mondrians``: the cells of every partition, then its unseen
        column, partition after partition.
    n_features_in_, feature_names_in_, n_samples_seen_, entropy_

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).random((100, 2))
    >>> Z = MondrianKernelFeatures(n_mondrians=500, lifetime=2.0, random_state=0).fit_transform(X)
    >>> K = (Z @ Z.T).toarray()
    >>> exact = np.exp(-2.0 * np.abs(X[:, None] - X[None]).sum(-1))
    >>> bool(np.abs(K - exact).max() < 0.15), Z.getnnz(axis=1).min()
    (True, 500)
    """

    _parameter_constraints: dict = {
        "n_mondrians": [Interval(Integral, 1, None, closed="left")],
        "lifetime": [Interval(Real, 0, math.inf, closed="neither")],
        "random_state": ["random_state"],
        "n_jobs": N_JOBS,
    }

    def __init__(self, n_mondrians: int = 50, lifetime: float = 1.0, random_state: Any = None,
                 n_jobs: int | None = None) -> None:
        self.n_mondrians = n_mondrians
        self.lifetime = lifetime
        self.random_state = random_state
        self.n_jobs = n_jobs

    # ------------------------------------------------------------------ fitting

    def _check_X(self, X: Any, reset: bool) -> np.ndarray:
        check_numeric_columns(X, type(self).__name__)
        X = validate_data(self, X, reset=reset, dtype=np.float64, ensure_all_finite=False)
        check_finite(X, getattr(self, "feature_names_in_", None), "X")
        return np.ascontiguousarray(X)

    def fit(self, X: Any, y: Any = None) -> MondrianKernelFeatures:
        """Sample the partitions on ``X`` (``y`` is ignored).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Finite numbers; NaN or inf raise an error naming the column.
        y : ignored

        Returns
        -------
        self
        """
        self._validate_params()
        with unchanged_on_error(self):
            X = self._check_X(X, reset=True)
            self.entropy_ = resolve_entropy(self.random_state)
            self._n_updates = 0
            self._X = np.empty((0, X.shape[1]))
            self.n_samples_seen_ = 0
            self.trees_ = [TreeArrays.empty(X.shape[1], NODE_REG_STATS, 0)
                           for _ in range(self.n_mondrians)]
            self._grow(X)
        return self

    def partial_fit(self, X: Any, y: Any = None) -> MondrianKernelFeatures:
        """Extend the partitions with the rows of ``X`` (paper Sec. 5); the first call fits.

        Existing cells keep their points; a new row either joins a cell or is cut off into
        a new one, so ``n_cells_`` and ``n_features_out_`` can grow.

        Returns
        -------
        self
        """
        if not hasattr(self, "trees_"):
            return self.fit(X)
        self._validate_params()
        with unchanged_on_error(self):
            self._grow(self._check_X(X, reset=False))
        return self

    def _grow(self, X: np.ndarray) -> None:
        """Append ``X`` to the data buffer and grow (or extend) every partition with it."""
        start, stop = self.n_samples_seen_, self.n_samples_seen_ + X.shape[0]
        (self._X,) = append_rows((self._X,), start, (X,))
        self.n_samples_seen_ = stop
        rows = np.arange(start, stop, dtype=INDEX)
        zeros, codes = np.zeros(stop), np.zeros(stop, INDEX)  # no labels: only the cells
        seeds = np.random.SeedSequence(self.entropy_, spawn_key=(self._n_updates,))
        seeds = seeds.generate_state(self.n_mondrians)
        lifetime = float(self.lifetime)

        def work(t: int) -> None:
            tree = self.trees_[t]
            batch = tree.n_nodes == 0
            tree.reserve(stop)
            grow(tree, self._X, zeros, codes, rows, "regression", 1, lifetime, int(seeds[t]))
            if batch:
                tree.trim()

        thread_map(work, range(self.n_mondrians), self.n_jobs)
        self._n_updates += 1
        self._columns = self.cell_layout(lifetime)

    def cell_layout(self, lam: float) -> tuple[list[np.ndarray], np.ndarray]:
        """Per partition, the cell number of every node slot at width ``lam``
        (``NO_NODE`` if not a cell), and the column offset of every partition (partition
        ``t``'s cells, then its unseen column, are columns ``offsets[t] .. offsets[t+1]-1``).
        """
        columns, counts = [], []
        for tree in self.trees_:
            columns.append(cell_columns(tree, lam))
            counts.append(int(np.sum(columns[-1] != NO_NODE)))
        offsets = np.concatenate([[0], np.cumsum(np.asarray(counts) + 1)])
        return columns, offsets

    # ------------------------------------------------------------------ features

    @property
    def rows_seen_(self) -> np.ndarray:
        """The rows the partitions were grown on, in the order seen (fit, then every
        ``partial_fit``), shape (n_samples_seen_, n_features_in_); read-only."""
        check_is_fitted(self, "trees_")
        view = self._X[: self.n_samples_seen_]
        view.flags.writeable = False
        return view

    @property
    def n_cells_(self) -> np.ndarray:
        check_is_fitted(self, "trees_")
        return np.diff(self._columns[1]) - 1

    @property
    def n_features_out_(self) -> int:
        check_is_fitted(self, "trees_")
        return int(self._columns[1][-1])

    def transform(self, X: Any, lifetime: float | None = None) -> sp.csr_matrix:
        """The features of ``X``: a CSR matrix of shape (n_samples, n_features_out_).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        lifetime : float, optional
            A width ``0 < lifetime <= self.lifetime`` to read the coarser partitions of the
            same samples at (paper Sec. 4); their columns are numbered the same way, so the
            matrix then has ``n_cells(lifetime).sum() + n_mondrians`` columns.

        Returns
        -------
        scipy.sparse.csr_matrix
            Exactly ``n_mondrians`` non-zeros per row, each ``1 / sqrt(n_mondrians)``.
        """
        check_is_fitted(self, "trees_")
        lam = float(self.lifetime) if lifetime is None else float(lifetime)
        if not 0.0 < lam <= float(self.lifetime):
            raise ValueError(f"lifetime={lifetime!r} must be in (0, {self.lifetime}], the "
                             "lifetime the partitions were sampled with; refit with a larger "
                             "lifetime to read finer partitions")
        X = self._check_X(X, reset=False)
        return self.cells_matrix(X, lam, self._columns if lifetime is None
                                 else self.cell_layout(lam))

    def cells_matrix(self, X: np.ndarray, lam: float,
                     layout: tuple[list[np.ndarray], np.ndarray]) -> sp.csr_matrix:
        """:meth:`cells` as the CSR feature matrix (values ``1 / sqrt(n_mondrians)``)."""
        out = self.cells(X, lam, *layout)
        m = self.n_mondrians
        data = np.full(out.size, 1.0 / math.sqrt(m))
        indptr = np.arange(0, out.size + 1, m, dtype=INDEX)
        return sp.csr_matrix((data, out.ravel(), indptr), shape=(X.shape[0], int(layout[1][-1])))

    def cells(self, X: np.ndarray, lam: float, columns: list[np.ndarray],
              offsets: np.ndarray) -> np.ndarray:
        """Global column of every row's cell in every partition, shape (n_rows, M).

        ``X`` is validated float64; ``columns, offsets`` come from :meth:`cell_layout`
        at ``lam``.
        """
        out = np.empty((X.shape[0], self.n_mondrians), INDEX)
        bits = (X + 0.0).view(np.uint64)  # + 0.0 turns -0.0 into 0.0: equal rows, equal bits
        seeds = np.random.SeedSequence(self.entropy_, spawn_key=(HASH_KEY,))
        seeds = seeds.generate_state(self.n_mondrians, dtype=np.uint64)

        def work(t: int) -> None:
            tree, col = self.trees_[t], np.empty(X.shape[0], INDEX)
            unseen = int(offsets[t + 1] - offsets[t] - 1)
            _kernel.cells(X, bits, tree.left, tree.right, tree.feature, tree.threshold,
                          tree.tau, tree.lower, tree.upper, tree.root, columns[t], unseen,
                          lam, seeds[t], col)
            out[:, t] = col + offsets[t]

        thread_map(work, range(self.n_mondrians), self.n_jobs)
        return out

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """``mondrian{t}_cell{k}`` for the cells of partition t, then ``mondrian{t}_unseen``."""
        check_is_fitted(self, "trees_")
        names = []
        for t, n in enumerate(self.n_cells_):
            names += [f"mondrian{t}_cell{k}" for k in range(n)] + [f"mondrian{t}_unseen"]
        return np.asarray(names, dtype=object)


    # ------------------------------------------------------------------ persistence

    def _get_state(self) -> dict:
        """Fitted state (``ebf/LAYOUT.md`` persistence contract): the rows seen (online
        updates insert into their cells), the seed and update counter, the live trees."""
        check_is_fitted(self, "trees_")
        n = int(self.n_samples_seen_)
        state = {"n_features_in_": int(self.n_features_in_), "n_samples_seen_": n,
                 "entropy_": int(self.entropy_), "_n_updates": int(self._n_updates),
                 "_X": self._X[:n], "trees_": [tree.to_state(n) for tree in self.trees_]}
        if hasattr(self, "feature_names_in_"):
            state["feature_names_in_"] = [str(c) for c in self.feature_names_in_]
        return state

    def _set_state(self, state: dict) -> None:
        """Restore :meth:`_get_state`; every tree is checked in full first
        (``TreeArrays.from_state``: the kernels do not bounds-check), and a split time past
        ``lifetime`` is refused. A bad state raises ``ValueError`` naming the entry and leaves
        the transformer unchanged."""
        d = state_int(state, "n_features_in_", 1)
        n = state_int(state, "n_samples_seen_", 1)
        X = state_array(state, "_X", np.float64, (n, d))
        if not np.isfinite(X).all():
            raise ValueError("_X holds NaN or inf")
        trees = state["trees_"]
        if not isinstance(trees, list) or len(trees) != self.n_mondrians:
            raise ValueError(f"trees_ must be a list of n_mondrians={self.n_mondrians} tree "
                             "states")
        built = []
        for t, tree_state in enumerate(trees):
            if not isinstance(tree_state, dict):
                raise ValueError(f"trees_[{t}] must be a tree state, got {tree_state!r:.60}")
            try:
                tree = TreeArrays.from_state(tree_state, d, NODE_REG_STATS, n, "regression")
            except KeyError as exc:
                raise ValueError(f"trees_[{t}]: missing entry {exc}") from exc
            except (TypeError, ValueError) as exc:
                raise ValueError(f"trees_[{t}]: {exc}") from exc
            inner = tree.left[: tree.n_nodes] != NO_NODE
            if np.any(tree.tau[: tree.n_nodes][inner] >= float(self.lifetime)):
                raise ValueError(f"trees_[{t}] splits at or after lifetime={self.lifetime}")
            built.append(tree)
        attrs = {"n_features_in_": d, "n_samples_seen_": n, "_X": X, "trees_": built,
                 "entropy_": state_int(state, "entropy_", 0),
                 "_n_updates": state_int(state, "_n_updates", 0)}
        names = state_names(state, "feature_names_in_", d)
        self.__dict__.pop("feature_names_in_", None)
        if names is not None:
            attrs["feature_names_in_"] = names
        self.__dict__.update(attrs)
        self._columns = self.cell_layout(float(self.lifetime))


# ---------------------------------------------------------------------------------- ridge

#: Above this many features, :func:`ridge_solve` factors on one BLAS thread (see there).
SINGLE_THREAD_CHOLESKY = 8192

#: Relative residual at which the sweep's conjugate gradients stop (``_kernel.ridge_pcg``):
#: the solution then predicts as the direct solve does to about 1e-8 relative.
CG_RTOL = 1e-10


def ridge_solve(Z: sp.csr_matrix, Y: np.ndarray, alpha: float) -> tuple[np.ndarray, ...]:
    """Ridge regression on features ``Z`` from scratch: ``W = (Z'Z + alpha I)^-1 Z'Y``.

    Returns ``(W, G_inv, log_det_G)`` with ``G = Z'Z + alpha I``, through LAPACK's Cholesky
    factor and the inverse from it (``potrf``, ``potri``: a third of the flops of a general
    inverse).
    """
    from scipy.linalg import lapack
    from threadpoolctl import threadpool_limits

    G = (Z.T @ Z).toarray()
    G[np.diag_indices_from(G)] += alpha
    # OpenBLAS' threaded Cholesky crashes (SIGSEGV in dsyrk_thread) on large matrices, seen
    # here from 16,000 rows with 2 threads (OpenBLAS issue #2821): large ones run on one.
    threads = 1 if G.shape[0] > SINGLE_THREAD_CHOLESKY else None
    with threadpool_limits(limits=threads, user_api="blas"):
        L, info = lapack.dpotrf(G, lower=True, overwrite_a=True)
        if info != 0:
            raise np.linalg.LinAlgError(f"Z'Z + alpha I is not positive definite (LAPACK "
                                        f"info {info}); raise alpha")
        log_det = 2.0 * float(np.sum(np.log(np.diag(L))))
        inv, info = lapack.dpotri(L, lower=True, overwrite_c=True)
    if info != 0:
        raise np.linalg.LinAlgError(f"inverting Z'Z + alpha I failed (LAPACK info {info})")
    G_inv = np.tril(inv)
    G_inv += np.tril(inv, -1).T
    return G_inv @ (Z.T @ Y), G_inv, log_det


def log_evidence(yy: np.ndarray, BW: np.ndarray, log_det_G: float, n: int, n_features: int,
                 alpha: float) -> float:
    """log p(Y) of Bayesian linear regression on the features (paper Sec. 4.2.1), weights
    ~ N(0, sigma^2 / alpha I), noise sigma^2 set per output to its maximum-likelihood value
    ``(y'y - b'A b) / n``; summed over the outputs.

    ``yy`` and ``BW`` are per output ``y'y`` and ``b'A b``; ``log det(I + Phi Phi'/alpha) =
    log det G - n_features log alpha``.
    """
    s2 = np.maximum(yy - BW, 1e-300) / n
    k = yy.shape[0]
    return float(np.sum(-0.5 * n * (np.log(2 * np.pi * s2) + 1.0))
                 - 0.5 * k * (log_det_G - n_features * math.log(alpha)))


class _MondrianKernelRidge(BaseEstimator):
    """What the regressor and the classifier share: the width sweep, the ridge on the
    features at the chosen width, and online updates."""

    _parameter_constraints: dict = {
        "n_mondrians": [Interval(Integral, 1, None, closed="left")],
        "lifetime": [StrOptions({"auto"}), Interval(Real, 0, math.inf, closed="neither")],
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "max_features": [Interval(Integral, 2, None, closed="left")],
        "n_widths": [Interval(Integral, 1, None, closed="left")],
        "select": [StrOptions({"validation", "evidence"})],
        "solver": [StrOptions({"exact", "cg"})],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "random_state": ["random_state"],
        "n_jobs": N_JOBS,
    }

    def __init__(self, n_mondrians: int = 50, lifetime: Any = "auto", alpha: float = 0.1,
                 max_features: int = 2000, n_widths: int = 40, select: str = "validation",
                 solver: str = "exact", validation_fraction: float = 0.2,
                 random_state: Any = None, n_jobs: int | None = None) -> None:
        self.n_mondrians = n_mondrians
        self.lifetime = lifetime
        self.alpha = alpha
        self.max_features = max_features
        self.n_widths = n_widths
        self.select = select
        self.solver = solver
        self.validation_fraction = validation_fraction
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _check_input(self, X: Any, y: Any, reset: bool,
                     with_y: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """``X`` validated against this estimator (its names), as the float64 array the
        partitions (fitted on arrays) take, and ``y`` (``with_y``: required)."""
        check_numeric_columns(X, type(self).__name__)
        if not with_y:
            X = validate_data(self, X, reset=reset, dtype=np.float64, ensure_all_finite=False)
        else:
            X, y = validate_data(self, X, y, reset=reset, dtype=np.float64,
                                 ensure_all_finite=False, y_numeric=False)
        check_finite(X, getattr(self, "feature_names_in_", None), "X")
        return np.ascontiguousarray(X), y

    def fit(self, X: Any, y: Any):
        """Fit the partitions, learn the width (``lifetime="auto"``) and solve the ridge.

        Returns
        -------
        self
        """
        self._validate_params()
        if self.select == "evidence" and self.solver != "exact":
            raise ValueError("select='evidence' needs solver='exact' (conjugate gradients "
                             "give no log determinant); use select='validation' with 'cg'")
        X, y = self._check_input(X, y, reset=True)
        Y, task = self._encode(y)
        entropy = resolve_entropy(self.random_state)
        features = MondrianKernelFeatures(self.n_mondrians, 1.0, entropy, self.n_jobs)
        sweep = None
        if self.lifetime == "auto":
            if X.shape[0] < 4:
                raise ValueError(f"lifetime='auto' holds out rows to choose the width and "
                                 f"needs at least 4 rows, got n_samples={X.shape[0]}; pass a "
                                 "lifetime")
            fit_rows, val_rows = self._split(X.shape[0], entropy)
            lam_max = probe_lifetime(X[fit_rows], self.max_features / self.n_mondrians,
                                     entropy)
            features.set_params(lifetime=lam_max).fit(X[fit_rows])
            sweep = width_sweep(features, Y[fit_rows], X[val_rows], Y[val_rows],
                                float(self.alpha), int(self.max_features),
                                int(self.n_widths), self.solver)
            best = (np.argmin(sweep["validation_mse"]) if self.select == "validation"
                    else np.argmax(sweep["log_evidence"]))
            lam = float(sweep["lifetime"][best])
            features.partial_fit(X[val_rows])
            order = np.concatenate([fit_rows, val_rows])  # the partitions' row order
            X, Y = X[order], Y[order]
        else:
            lam = float(self.lifetime)
            features.set_params(lifetime=lam).fit(X)
        self.__dict__.update(task, **self._solve(features, lam, X, Y), sweep_=sweep)
        return self

    def partial_fit(self, X: Any, y: Any):
        """Add rows (paper Sec. 5): the partitions are extended by the conditional Mondrian
        (a new row joins a cell or is cut off into a new one; at ``lifetime_`` the earlier
        rows keep their cells), and the ridge is solved again, exactly, on every row seen.
        The width stays ``lifetime_``. The first call fits.

        Returns
        -------
        self
        """
        if not hasattr(self, "coef_"):
            return self.fit(X, y)
        X, y = self._check_input(X, y, reset=False)
        Y = self._encode_more(y)
        with unchanged_on_error(self):
            self.features_ = copy.deepcopy(self.features_)
            self.features_.partial_fit(X)
            X_all = self.features_.rows_seen_
            Y_all = np.vstack([self._Y, Y])
            self.__dict__.update(self._solve(self.features_, self.lifetime_, X_all, Y_all))
        return self

    def _split(self, n: int, entropy: int) -> tuple[np.ndarray, np.ndarray]:
        """A seeded random hold-out of ``validation_fraction`` of the rows (at least one)."""
        perm = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(HASH_KEY - 1,)))
        perm = perm.permutation(n)
        n_val = min(max(1, int(round(self.validation_fraction * n))), n - 2)
        return np.sort(perm[n_val:]), np.sort(perm[:n_val])

    def _solve(self, features: MondrianKernelFeatures, lam: float, X: np.ndarray,
               Y: np.ndarray) -> dict[str, Any]:
        """The ridge on the features of ``X`` (the partitions' rows, in their order) at
        width ``lam``: every fitted attribute but the task's."""
        layout = features.cell_layout(lam)
        n_out = int(layout[1][-1])
        if n_out > 2 * self.max_features + self.n_mondrians:
            raise ValueError(
                f"lifetime={lam:.4g} splits the {X.shape[0]} rows into {n_out} cells over the "
                f"{self.n_mondrians} partitions, more than 2 x max_features="
                f"{self.max_features} (the ridge holds a dense matrix of side the cell count:"
                f" {8 * n_out**2 / 2**30:.1f} GiB); pass a smaller lifetime (the kernel is "
                "exp(-lifetime * L1 distance); standardised inputs want about 1 / typical "
                "L1 distance), lifetime='auto', or a larger max_features")
        Z = features.cells_matrix(X, lam, layout)
        W, G_inv, _ = ridge_solve(Z, Y, float(self.alpha))
        resid = Y - Z @ W
        noise = (np.einsum("ij,ij->j", resid, resid) + self.alpha * np.einsum("ij,ij->j", W, W))
        floor = 1e-12 * max(float(np.max(np.var(Y, axis=0))), 1.0)
        return {"features_": features, "lifetime_": lam,
                "lifetime_max_": float(features.lifetime), "_layout": layout,
                "_G_inv": G_inv, "coef_": W, "_Y": Y,
                "noise_variance_": np.maximum(noise / X.shape[0], floor)}

    def _cells(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "coef_")
        X, _ = self._check_input(X, None, reset=False, with_y=False)
        return self.features_.cells(X, self.lifetime_, *self._layout)

    def _scores(self, cols: np.ndarray) -> np.ndarray:
        """Posterior mean of every output, shape (n_rows, n_outputs)."""
        return self.intercept_ + self.coef_[cols].sum(axis=1) / math.sqrt(self.n_mondrians)

    def _quad(self, cols: np.ndarray) -> np.ndarray:
        """``phi(x)' G^-1 phi(x)`` of every row (blocks of rows: M^2 reads each)."""
        quad = np.empty(cols.shape[0])
        for a in range(0, cols.shape[0], 1024):
            c = cols[a:a + 1024]
            quad[a:a + 1024] = self._G_inv[c[:, :, None], c[:, None, :]].sum(axis=(1, 2))
        return quad / self.n_mondrians


    # ------------------------------------------------------------------ persistence

    def _get_state(self) -> dict:
        """Fitted state: the partitions (nested), the width, the ridge (weights, the inverse
        of G for the predictive variance, the targets seen for online updates), the noise,
        the centre and the sweep's curves."""
        check_is_fitted(self, "coef_")
        state = {"features": self.features_._get_state(), "lifetime_": float(self.lifetime_),
                 "lifetime_max_": float(self.lifetime_max_), "coef_": self.coef_,
                 "G_inv": self._G_inv, "Y": self._Y, "noise_variance_": self.noise_variance_,
                 "intercept_": self.intercept_,
                 "sweep_": None if self.sweep_ is None else dict(self.sweep_),
                 **self._task_state()}
        if hasattr(self, "feature_names_in_"):
            state["feature_names_in_"] = [str(c) for c in self.feature_names_in_]
        return state

    def _set_state(self, state: dict) -> None:
        """Restore :meth:`_get_state`, checking every shape against the partitions' cells at
        ``lifetime_`` (the kernels index ``coef_`` and ``G_inv`` by cell) before anything is
        set; a bad state raises ``ValueError`` naming the entry."""
        lam_max, lam = state["lifetime_max_"], state["lifetime_"]
        for key, v in (("lifetime_max_", lam_max), ("lifetime_", lam)):
            if not isinstance(v, float) or not 0.0 < v < math.inf:
                raise ValueError(f"{key} must be a finite positive float, got {v!r:.60}")
        if lam > lam_max:
            raise ValueError(f"lifetime_={lam} is past lifetime_max_={lam_max}")
        if not isinstance(state["features"], dict):
            raise ValueError("features must be the partitions' state")
        features = MondrianKernelFeatures(self.n_mondrians, lam_max, None, self.n_jobs)
        features._set_state(state["features"])
        task = self._task_from_state(state)
        k = len(task["intercept_"])
        layout = features.cell_layout(lam)
        f, n = int(layout[1][-1]), features.n_samples_seen_
        attrs = {"features_": features, "lifetime_": lam, "lifetime_max_": lam_max,
                 "_layout": layout, "coef_": state_array(state, "coef_", np.float64, (f, k)),
                 "_G_inv": state_array(state, "G_inv", np.float64, (f, f)),
                 "_Y": state_array(state, "Y", np.float64, (n, k)),
                 "noise_variance_": state_array(state, "noise_variance_", np.float64, (k,)),
                 **task}
        for key in ("coef_", "_G_inv", "_Y", "noise_variance_"):
            if not np.isfinite(attrs[key]).all():
                raise ValueError(f"{key.strip('_')} holds NaN or inf")
        if not (attrs["noise_variance_"] > 0).all():
            raise ValueError("noise_variance_ must be positive")
        sweep = state.get("sweep_")
        if sweep is not None:
            if not isinstance(sweep, dict) or set(sweep) != {
                    "lifetime", "n_features", "validation_mse", "log_evidence"}:
                raise ValueError("sweep_ must be None or the four curves of the sweep")
            m = np.asarray(sweep["lifetime"]).shape
            sweep = {key: state_array(sweep, key, np.float64 if key != "n_features"
                                      else INDEX, m) for key in sweep}
        attrs["sweep_"] = sweep
        names = state_names(state, "feature_names_in_", features.n_features_in_)
        self.__dict__.pop("feature_names_in_", None)
        if names is not None:
            attrs["feature_names_in_"] = names
        attrs["n_features_in_"] = features.n_features_in_
        self.__dict__.update(attrs)


_RIDGE_DOC = """With ``lifetime="auto"`` the fit holds out ``validation_fraction`` of the rows,
    samples the partitions on the rest up to the lifetime at which they hold about ``max_features``
    cells, and sweeps the cuts in time order (paper Sec. 4.2): each cut replaces one feature
    by two and the ridge is updated (``solver``). At ``n_widths`` points of the sweep it
    records the validation MSE and (exact solver) the log marginal likelihood; the width
    that minimises the first (``select="validation"``) or maximises the second
    (``"evidence"``) is kept. The held-out rows are then added to the partitions (the
    conditional Mondrian, Sec. 5) and the ridge is solved on all rows at that width.
    ``partial_fit`` adds rows the same way.

    Parameters
    ----------
    n_mondrians : int, default=50
    lifetime : "auto" or float, default="auto"
        lambda of the kernel exp(-lambda ||x - x'||_1), in the units of the inputs.
    alpha : float, default=0.1
        Ridge penalty (noise-to-prior variance ratio; the kernel's diagonal is 1).
    max_features : int, default=2000
        Largest number of cells the sweep reaches (the exact solver's memory is 8
        max_features^2 bytes; the final solve is dense too).
    n_widths : int, default=40
        Widths evaluated along the sweep, at geometrically spaced feature counts.
    select : {"validation", "evidence"}, default="validation"
        The evidence needs ``solver="exact"``.
    solver : {"exact", "cg"}, default="exact"
        How the sweep solves the ridge: per-cut updates of the inverse of ``G = Phi'Phi +
        alpha I`` (Sec. 4.2.1; O(features^2) per cut, the fastest up to a few thousand
        features) or conjugate gradients warm-started by copying a cut cell's weights to
        both children (Sec. 4.2.2; O(rows x n_mondrians) per iteration).
    validation_fraction : float, default=0.2
    random_state, n_jobs
        As :class:`MondrianKernelFeatures`.

    Attributes
    ----------
    lifetime_ : float
        The width used.
    features_ : MondrianKernelFeatures
        The partitions (sampled up to ``lifetime_max_``, read at ``lifetime_``).
    coef_ : ndarray of shape (n_features_out, n_outputs)
        Ridge weights of the features at ``lifetime_`` (of centred targets; the centre is
        ``intercept_``).
    noise_variance_ : ndarray of shape (n_outputs,)
        sigma^2 per output: the penalised residual sum of squares over the rows.
    sweep_ : dict of ndarray or None
        With ``lifetime="auto"``: ``lifetime``, ``n_features``, ``validation_mse`` and
        ``log_evidence`` at every evaluated width."""


class MondrianKernelRegressor(RegressorMixin, _MondrianKernelRidge):
    __doc__ = f"""Ridge regression on Mondrian kernel features, the width learned by one sweep.

    {_RIDGE_DOC}

    The model is Bayesian linear regression in feature space (weights N(0, sigma^2 /
    alpha), sigma^2 estimated), so a prediction is Gaussian with variance ``sigma^2 (1 +
    phi(x)' G^-1 phi(x))``: larger away from the data, where rows are cut off into cells
    no training row shares.
    """

    def _encode(self, y: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        y = np.asarray(y, dtype=np.float64)
        check_regression_target(y)
        center = float(np.mean(y))
        return (y - center)[:, None], {"intercept_": np.array([center])}

    def _encode_more(self, y: np.ndarray) -> np.ndarray:
        y = np.asarray(y, dtype=np.float64)
        check_regression_target(y)
        return (y - self.intercept_[0])[:, None]

    def _task_state(self) -> dict:
        return {"intercept_": self.intercept_}

    def _task_from_state(self, state: dict) -> dict:
        centre = state_array(state, "intercept_", np.float64, (1,))
        if not np.isfinite(centre).all():
            raise ValueError("intercept_ holds NaN or inf")
        return {"intercept_": centre}

    def predict(self, X: Any, return_std: bool = False):
        """Posterior mean (and standard deviation of the Gaussian predictive)."""
        cols = self._cells(X)
        mean = self._scores(cols)[:, 0]
        if not return_std:
            return mean
        return mean, np.sqrt(self.noise_variance_[0] * (1.0 + self._quad(cols)))

    def predict_distribution(self, X: Any) -> GaussianMixture:
        """The Gaussian predictive of every row (one component)."""
        mean, std = self.predict(X, return_std=True)
        return GaussianMixture.from_moments(mean, std**2)


class MondrianKernelClassifier(ClassifierMixin, _MondrianKernelRidge):
    __doc__ = f"""Least-squares classification on Mondrian kernel features, the width learned by
    one sweep (the classifier counterpart of :class:`MondrianKernelRegressor`).

    {_RIDGE_DOC}

    The targets are the one-hot codes of the classes (centred); the width is chosen by the
    validation MSE of those codes (the Brier score) or the evidence; a row's class is the
    largest score, and ``predict_proba`` clips the scores at 0 and normalises them.

    classes_ : ndarray of shape (n_classes,)
    """

    def partial_fit(self, X: Any, y: Any, classes: Any = None) -> MondrianKernelClassifier:
        """As :meth:`_MondrianKernelRidge.partial_fit`; ``classes`` (all the labels there
        will be) may be given on the first call, as scikit-learn's online classifiers take
        it."""
        if not hasattr(self, "coef_") and classes is not None:
            self._classes = np.unique(np.asarray(classes))
            try:
                return self.fit(X, y)
            finally:
                del self._classes
        return super().partial_fit(X, y)

    def _encode(self, y: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        check_classification_targets(y)
        classes = getattr(self, "_classes", None)
        if classes is None:
            classes, codes = np.unique(y, return_inverse=True)
        else:
            codes = np.searchsorted(classes, y)
            bad = (codes >= classes.size) | (classes[np.minimum(codes, classes.size - 1)] != y)
            if bad.any():
                raise ValueError(f"y holds {int(bad.sum())} label(s) not in classes")
        if classes.size < 2:
            raise ValueError(f"y holds one class ({classes[0]!r}); a classifier needs at "
                             "least 2")
        onehot = np.eye(classes.size)[codes]
        center = onehot.mean(axis=0)
        return onehot - center, {"classes_": classes, "intercept_": center}

    def _encode_more(self, y: np.ndarray) -> np.ndarray:
        y = np.asarray(y)
        codes = np.searchsorted(self.classes_, y)
        codes = np.minimum(codes, self.classes_.size - 1)
        unknown = self.classes_[codes] != y
        if unknown.any():
            raise ValueError(f"y holds {int(unknown.sum())} label(s) not seen at fit (first: "
                             f"{y[np.argmax(unknown)].item()!r}); refit with every class")
        return np.eye(self.classes_.size)[codes] - self.intercept_

    def _task_state(self) -> dict:
        return {"intercept_": self.intercept_, "classes_": classes_entry(self.classes_)}

    def _task_from_state(self, state: dict) -> dict:
        classes = classes_from_entry(state["classes_"])
        centre = state_array(state, "intercept_", np.float64, (classes.size,))
        if not np.isfinite(centre).all():
            raise ValueError("intercept_ holds NaN or inf")
        return {"classes_": classes, "intercept_": centre}

    def decision_function(self, X: Any) -> np.ndarray:
        """The one-hot scores (posterior means), shape (n_samples, n_classes); with two
        classes the second's score minus the first's, shape (n_samples,)."""
        scores = self._scores(self._cells(X))
        return scores[:, 1] - scores[:, 0] if scores.shape[1] == 2 else scores

    def predict_proba(self, X: Any) -> np.ndarray:
        p = np.clip(self._scores(self._cells(X)), 0.0, None)
        total = p.sum(axis=1, keepdims=True)
        return np.where(total > 0, p / np.where(total > 0, total, 1.0), 1.0 / p.shape[1])

    def predict(self, X: Any) -> np.ndarray:
        scores = self._scores(self._cells(X))
        return self.classes_[np.argmax(scores, axis=1)]


def probe_lifetime(X: np.ndarray, cells_per_partition: float, entropy: int) -> float:
    """A lifetime at which a Mondrian partition of ``X`` holds about twice
    ``cells_per_partition`` cells: read off one partition sampled to the end (its internal
    nodes' split times, in order, are the times its cell count grows by one)."""
    tree = TreeArrays.empty(X.shape[1], NODE_REG_STATS, X.shape[0])
    seed = int(np.random.SeedSequence(entropy, spawn_key=(HASH_KEY - 2,)).generate_state(1)[0])
    grow(tree, np.ascontiguousarray(X), np.zeros(X.shape[0]), np.zeros(X.shape[0], INDEX),
         np.arange(X.shape[0], dtype=INDEX), "regression", 1, math.inf, seed)
    n = tree.n_nodes
    times = np.sort(tree.tau[:n][tree.left[:n] != NO_NODE])
    if times.size == 0:
        return 1.0
    k = min(int(math.ceil(2 * cells_per_partition)) - 1, times.size) - 1
    return float(times[max(k, 0)]) * (1.0 + 1e-9) if k < times.size - 1 else \
        float(times[-1]) * 2.0


def width_sweep(features: MondrianKernelFeatures, Y: np.ndarray, X_val: np.ndarray,
                Y_val: np.ndarray, alpha: float, max_features: int, n_widths: int,
                solver: str = "exact") -> dict[str, np.ndarray]:
    """Sweep the cuts of the fitted partitions in time order (paper Sec. 4.2).

    Starts from one cell per partition and applies every cut until ``max_features`` cells;
    at ``n_widths`` geometrically spaced feature counts solves the ridge and records the
    validation MSE (rows of ``X_val`` placed by the conditional Mondrian). ``solver``:

    - ``"exact"`` (Sec. 4.2.1): every cut updates the inverse of ``G = Phi'Phi + alpha I``
      (``_kernel.sweep_cuts``, O(features^2) per cut); the log evidence is recorded too.
    - ``"cg"`` (Sec. 4.2.2): a cut copies the cell's weights to both children (predictions
      unchanged) and at each width Jacobi-preconditioned conjugate gradients continue from
      there (``_kernel.ridge_pcg``); O(rows x partitions) per iteration, no evidence (NaN).

    Returns
    -------
    dict with ``lifetime``, ``n_features``, ``validation_mse``, ``log_evidence`` (arrays).
    """
    trees, m, n = features.trees_, features.n_mondrians, Y.shape[0]
    if n != features.n_samples_seen_:
        raise ValueError(f"Y has {n} rows but the partitions were grown on "
                         f"{features.n_samples_seen_}; pass the labels of the rows they saw")
    sizes = np.array([t.n_nodes for t in trees])
    off = np.concatenate([[0], np.cumsum(sizes)])
    left = np.concatenate([np.where(t.left[:k] >= 0, t.left[:k] + o, NO_NODE)
                           for t, k, o in zip(trees, sizes, off, strict=False)])
    right = np.concatenate([np.where(t.right[:k] >= 0, t.right[:k] + o, NO_NODE)
                            for t, k, o in zip(trees, sizes, off, strict=False)])
    tau = np.concatenate([t.tau[:k] for t, k in zip(trees, sizes, strict=True)])
    rows = np.empty((m, n), INDEX)
    start, stop = np.empty(off[-1], INDEX), np.empty(off[-1], INDEX)
    for t, tree in enumerate(trees):
        k = sizes[t]
        _kernel.node_row_ranges(tree.left, tree.right, tree.root, k, tree.leaf_head,
                                tree.pt_next, rows[t], start[off[t]:off[t] + k],
                                stop[off[t]:off[t] + k])
    internal = np.flatnonzero(left != NO_NODE)
    order = internal[np.argsort(tau[internal], kind="stable")]
    ev_node = order[: max(0, max_features - m)]
    ev_tree = np.searchsorted(off, ev_node, side="right") - 1
    # the start: every row in the root cell of every partition
    roots = np.array([o + t.root for t, o in zip(trees, off, strict=False)])
    node_slot = np.full(off[-1], NO_NODE, INDEX)
    node_slot[roots] = np.arange(m)
    cell_of = np.tile(np.arange(m, dtype=INDEX), (n, 1))
    cap = m + ev_node.size
    yy = np.einsum("ij,ij->j", Y, Y)
    if solver == "exact":
        A = np.zeros((cap + 1, cap + 1))
        G0 = np.full((m, m), n / m) + alpha * np.eye(m)
        A[:m, :m] = np.linalg.inv(G0)
        log_det = float(np.linalg.slogdet(G0)[1])
        B = np.zeros((cap + 1, Y.shape[1]))
        B[:m] = Y.sum(axis=0) / math.sqrt(m)
        work = np.zeros((8, cap + 1))
    W = np.zeros((cap + 1, Y.shape[1]))  # the last row: the unseen cells weigh nothing
    checkpoints = np.unique(np.geomspace(1, max(ev_node.size, 1), n_widths).astype(int))
    checkpoints = checkpoints[checkpoints <= ev_node.size] if ev_node.size else np.zeros(1, int)
    bits = (X_val + 0.0).view(np.uint64)
    seeds = np.random.SeedSequence(features.entropy_, spawn_key=(HASH_KEY,))
    seeds = seeds.generate_state(m, dtype=np.uint64)
    out = {k: [] for k in ("lifetime", "n_features", "validation_mse", "log_evidence")}
    done, n_active = 0, m
    for stop_at in checkpoints:
        if solver == "exact":
            n_active, d = _kernel.sweep_cuts(ev_tree, ev_node, done, stop_at, left, right,
                                             rows, start, stop, cell_of, node_slot, A, B, Y,
                                             n_active, alpha, work)
            log_det += d
            W[:n_active] = A[:n_active, :n_active] @ B[:n_active]
            bw = np.einsum("ij,ij->j", B[:n_active], W[:n_active])
            evidence = log_evidence(yy, bw, log_det, n, n_active, alpha)
        else:
            n_active = _kernel.relabel_cuts(ev_tree, ev_node, done, stop_at, left, right,
                                            rows, start, stop, cell_of, node_slot, W,
                                            n_active)
            _kernel.ridge_pcg(cell_of, n_active, Y, alpha, W, CG_RTOL, 10 * n_active)
            evidence = np.nan
        done = stop_at
        lam = float(tau[ev_node[stop_at - 1]]) if stop_at else float(np.min(tau[roots]))
        W[n_active] = 0.0
        pred = np.zeros(Y_val.shape)
        col = np.empty(X_val.shape[0], INDEX)
        for t, tree in enumerate(trees):
            _kernel.cells(X_val, bits, tree.left, tree.right, tree.feature, tree.threshold,
                          tree.tau, tree.lower, tree.upper, tree.root,
                          node_slot[off[t]:off[t + 1]], n_active, lam, seeds[t], col)
            pred += W[col]
        pred /= math.sqrt(m)
        out["lifetime"].append(lam)
        out["n_features"].append(n_active)
        out["validation_mse"].append(float(np.mean((pred - Y_val) ** 2)))
        out["log_evidence"].append(evidence)
    return {k: np.asarray(v) for k, v in out.items()}
