"""The Laplace kernel's other random features: the Mondrian kernel's baselines.

Balog et al. (2016), Sec. 8, compare the Mondrian kernel (:class:`MondrianKernelFeatures`)
with the two random-feature schemes of Rahimi & Recht (2007) for the same kernel,
``k(x, x') = exp(-lifetime * ||x - x'||_1)``:

- :class:`LaplaceRandomFeatures`, random Fourier features: the Laplace kernel is the
  characteristic function of a product of Cauchy distributions, so frequencies
  ``omega ~ lifetime * Cauchy(0, 1)`` per dimension give ``E[cos(omega'(x - x'))] = k``.
  scikit-learn's ``RBFSampler`` draws Gaussian frequencies: the Gaussian kernel, not this
  one.
- :class:`RandomBinningFeatures`, random binning: per repetition, a grid with a
  ``Gamma(2, 1 / lifetime)`` bin width and a uniform shift per dimension; two points share
  a bin with probability ``k`` (the Gamma(2) width is the one whose hat-kernel mixture is
  ``exp(-lifetime |delta|)``). One non-zero feature per repetition, as the Mondrian kernel.

Both scale their features so that ``Z @ Z.T`` estimates ``k``, and both are scikit-learn
transformers; the Mondrian kernel's width sweep (:mod:`mondrian.kernel_sweep`) has no
counterpart here: these must be redrawn for every width.
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted, validate_data

__all__ = ["LaplaceRandomFeatures", "RandomBinningFeatures"]



class _LaplaceFeatures(TransformerMixin, BaseEstimator):
    """The parameters both schemes share."""

    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "lifetime": [Interval(Real, 0, math.inf, closed="neither")],
        "random_state": ["random_state"],
    }

    def __init__(self, *, n_components: int = 100, lifetime: float = 1.0,
                 random_state: Any = None) -> None:
        self.n_components = n_components
        self.lifetime = lifetime
        self.random_state = random_state


class LaplaceRandomFeatures(_LaplaceFeatures):
    """Random Fourier features of the Laplace kernel ``exp(-lifetime ||x - x'||_1)``.

    ``n_components`` frequencies ``omega_j`` with independent ``lifetime * Cauchy(0, 1)``
    entries; ``transform`` returns ``[cos(X omega), sin(X omega)] / sqrt(n_components)``
    (``2 n_components`` dense columns), so ``Z @ Z.T`` is the mean of
    ``cos(omega_j'(x - x'))``, an unbiased estimate of the kernel with error
    ``O(1 / sqrt(n_components))`` (Rahimi & Recht 2007).

    Parameters
    ----------
    n_components : int, default=100
        Frequencies drawn (features per row: twice as many).
    lifetime : float, default=1.0
        The kernel's inverse width, in the units of the inputs.
    random_state : int, RandomState instance or None, default=None

    Attributes
    ----------
    frequencies_ : ndarray of shape (n_features, n_components)
    n_features_in_ : int
        Columns seen by ``fit`` (their names in ``feature_names_in_`` when given).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).random((50, 2))
    >>> Z = LaplaceRandomFeatures(n_components=4000, lifetime=2.0, random_state=0).fit_transform(X)
    >>> exact = np.exp(-2.0 * np.abs(X[:, None] - X[None]).sum(-1))
    >>> bool(np.abs(Z @ Z.T - exact).max() < 0.1)
    True
    """

    def fit(self, X: Any, y: Any = None) -> LaplaceRandomFeatures:
        """Draw the frequencies for ``X``'s number of columns (``y`` is ignored)."""
        self._validate_params()
        X = validate_data(self, X, dtype=np.float64)
        rng = check_random_state(self.random_state)
        self.frequencies_ = float(self.lifetime) * rng.standard_cauchy(
            (X.shape[1], self.n_components))
        return self

    def transform(self, X: Any) -> np.ndarray:
        """``[cos(X omega), sin(X omega)] / sqrt(n_components)``, shape (n, 2 n_components)."""
        check_is_fitted(self, "frequencies_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        proj = X @ self.frequencies_
        return np.hstack([np.cos(proj), np.sin(proj)]) / math.sqrt(self.n_components)


class RandomBinningFeatures(_LaplaceFeatures):
    """Random binning features of the Laplace kernel ``exp(-lifetime ||x - x'||_1)``.

    Each of ``n_components`` repetitions draws per dimension a bin width
    ``w ~ Gamma(2, 1 / lifetime)`` and a shift ``u ~ U(0, w)``; a row's bin is
    ``ceil((x - u) / w)`` in every dimension. ``fit`` numbers the non-empty bins of the
    training rows (repetition after repetition, each followed by one "unseen" column that
    rows in a bin no training row occupies get); ``transform`` returns a CSR matrix with
    exactly ``n_components`` non-zeros per row, each ``1 / sqrt(n_components)``. Two rows
    share a bin of one repetition with probability equal to the kernel, so ``Z @ Z.T`` is
    unbiased for it (Rahimi & Recht 2007, Sec. 4) wherever both rows are in training bins.

    Parameters
    ----------
    n_components : int, default=100
        Repetitions (non-zero features per row).
    lifetime : float, default=1.0
    random_state : int, RandomState instance or None, default=None

    Attributes
    ----------
    widths_, shifts_ : ndarray of shape (n_components, n_features)
    n_bins_ : ndarray of shape (n_components,)
        Non-empty training bins per repetition.
    n_features_out_ : int
        ``n_bins_.sum() + n_components``.
    n_features_in_ : int
        Columns seen by ``fit`` (their names in ``feature_names_in_`` when given).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).random((50, 2))
    >>> Z = RandomBinningFeatures(n_components=2000, lifetime=2.0, random_state=0).fit_transform(X)
    >>> exact = np.exp(-2.0 * np.abs(X[:, None] - X[None]).sum(-1))
    >>> bool(np.abs((Z @ Z.T).toarray() - exact).max() < 0.1), int(Z.getnnz(axis=1).min())
    (True, 2000)
    """

    def _bins(self, X: np.ndarray) -> np.ndarray:
        """Integer bin coordinates, shape (n_components, n_rows, n_features)."""
        return np.ceil((X[None] - self.shifts_[:, None]) / self.widths_[:, None]).astype(np.int64)

    def fit(self, X: Any, y: Any = None) -> RandomBinningFeatures:
        """Draw the grids and number the bins the rows of ``X`` occupy (``y`` is ignored)."""
        self._validate_params()
        X = validate_data(self, X, dtype=np.float64)
        rng = check_random_state(self.random_state)
        shape = (self.n_components, X.shape[1])
        self.widths_ = rng.gamma(2.0, 1.0 / float(self.lifetime), shape)
        self.shifts_ = rng.uniform(0.0, 1.0, shape) * self.widths_
        self._keys = [np.unique(b, axis=0) for b in self._bins(X)]
        self.n_bins_ = np.array([k.shape[0] for k in self._keys])
        self._offsets = np.concatenate([[0], np.cumsum(self.n_bins_ + 1)])
        return self

    @property
    def n_features_out_(self) -> int:
        check_is_fitted(self, "widths_")
        return int(self._offsets[-1])

    def transform(self, X: Any) -> sp.csr_matrix:
        """The bins of ``X``'s rows, shape (n, ``n_features_out_``), CSR."""
        check_is_fitted(self, "widths_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        n, m = X.shape[0], self.n_components
        cols = np.empty((n, m), np.int64)
        for t, (coords, keys) in enumerate(zip(self._bins(X), self._keys, strict=True)):
            cols[:, t] = self._offsets[t] + _row_index(keys, coords)
        data = np.full(n * m, 1.0 / math.sqrt(m))
        indptr = np.arange(0, n * m + 1, m)
        return sp.csr_matrix((data, cols.ravel(), indptr), shape=(n, self.n_features_out_))


def _row_index(keys: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Index of every row of ``rows`` among the sorted unique rows ``keys``, or
    ``len(keys)`` (the unseen column) where it is not one of them."""
    view = np.dtype((np.void, keys.dtype.itemsize * keys.shape[1]))
    k = np.ascontiguousarray(keys).view(view).ravel()
    r = np.ascontiguousarray(rows).view(view).ravel()
    order = np.argsort(k)
    pos = np.minimum(np.searchsorted(k[order], r), k.size - 1)
    found = k[order][pos] == r
    return np.where(found, order[pos], keys.shape[0])
