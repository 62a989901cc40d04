"""The Mondrian kernel: random features of the Laplace kernel from Mondrian partitions.

Balog, Lakshminarayanan, Ghahramani, Roy & Teh (2016), "The Mondrian kernel", UAI (the
formulas are in ``docs/families/mondrian-kernel.md``): M independent Mondrian partitions of
lifetime lambda give the feature map phi(x), the one-hot indicator of x's cell in every
partition scaled by 1 / sqrt(M), and phi(x)^T phi(x') = the fraction of partitions in which
x and x' share a cell, which converges to the Laplace kernel exp(-lambda ||x - x'||_1) as M
grows (Propositions 1-2).

The partitions are Mondrian trees of the forest core (``_tree.grow``; the layout in
``docs/families/mondrian-forests.md``) grown on the raw inputs without a stopping rule but
the lifetime (Sec. 2-3), and extended online by the conditional Mondrian (Sec. 5). The
kernels are in ``_kernel.py``.
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted, validate_data

from basics.flat_tree import INDEX, NO_NODE, preorder
from basics.seeds import resolve_entropy
from basics.threads import N_JOBS, thread_map
from basics.validation import (
    check_finite,
    check_numeric_columns,
    state_array,
    state_int,
    state_names,
    unchanged_on_error,
)

from . import _kernel
from ._base import append_rows
from ._config import NODE_REG_STATS
from ._tree import TreeArrays, grow

__all__ = ["MondrianKernelFeatures", "cell_columns", "checked_rows"]

#: ``SeedSequence`` spawn key of the hash seeds of :func:`_kernel.cells` (updates use their
#: counter 0, 1, 2, ... as key, so this one is out of their range).
HASH_KEY = 2**31 - 1


def checked_rows(estimator: BaseEstimator, X: Any, y: Any, reset: bool,
                 with_y: bool = False) -> tuple[np.ndarray, Any]:
    """``X`` validated against ``estimator`` (its feature count and names; numeric columns;
    NaN or inf named by column) as a C-contiguous float64 array, and ``y`` (``with_y``:
    required, checked for length) or None."""
    check_numeric_columns(X, type(estimator).__name__)
    if with_y:
        X, y = validate_data(estimator, X, y, reset=reset, dtype=np.float64,
                             ensure_all_finite=False, y_numeric=False)
    else:
        X = validate_data(estimator, X, reset=reset, dtype=np.float64, ensure_all_finite=False)
    check_finite(X, getattr(estimator, "feature_names_in_", None), "X")
    return np.ascontiguousarray(X), y


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
        ``exp(-lambda sum_d |x_d - x'_d|)``): standardise the columns first if their units
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
    >>> bool(np.abs(K - exact).max() < 0.15), int(Z.getnnz(axis=1).min())
    (True, 500)
    """

    _parameter_constraints: dict = {
        "n_mondrians": [Interval(Integral, 1, None, closed="left")],
        "lifetime": [Interval(Real, 0, math.inf, closed="neither")],
        "random_state": ["random_state"],
        "n_jobs": N_JOBS,
    }

    def __init__(self, *, n_mondrians: int = 50, lifetime: float = 1.0, random_state: Any = None,
                 n_jobs: int | None = None) -> None:
        self.n_mondrians = n_mondrians
        self.lifetime = lifetime
        self.random_state = random_state
        self.n_jobs = n_jobs

    # ------------------------------------------------------------------ fitting

    def _check_X(self, X: Any, reset: bool) -> np.ndarray:
        return checked_rows(self, X, None, reset)[0]

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
        ``partial_fit``), shape ``(n_samples_seen_, n_features_in_)``; read-only."""
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
        """The features of ``X``: a CSR matrix of shape ``(n_samples, n_features_out_)``.

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
            _kernel.cells(X, bits, tree.record(), tree.root,
                          _kernel.Partition(columns[t], unseen, lam, seeds[t]), col)
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
        """Fitted state (the persistence contract of ``docs/model-format.md``): the rows seen
        (online updates insert into their cells), the seed and update counter, the live trees."""
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
                raise ValueError(f"trees_[{t}] splits at or after lifetime={self.lifetime} "
                                 "(tau)")
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
