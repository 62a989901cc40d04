"""Per-row Gaussian mixtures: the one place where predictive mixture math lives.

Every regression prediction of the package is a Gaussian mixture per row. For a Mondrian
tree the predictive distribution at ``x`` is a mixture over the nodes on the path from the
root to the leaf that ``x`` falls in, and the forest prediction is the equal-weight mixture
over trees, see Lakshminarayanan, Roy & Teh (2016), Sec. 3.3, eq. (3)-(5). Branch forests of
the Empirical Bayesian Forest build their mixtures with :meth:`GaussianMixture.concat`.

Rows are independent; all operations are vectorised over rows (no Python loop per row).
Components with weight zero are padding (so that rows with different numbers of components
fit in one rectangular array): they never influence any result. Normalisation, moments and
quantiles (:func:`summarize`) run in numba kernels (:mod:`basics.mixture_kernels`) that skip
padding, so their result for a row is bit-identical whatever the padding and the other rows.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from scipy import special

from . import mixture_kernels as _k
from .distribution_tools import central_interval, uniform_draws
from .levels import DEFAULT_QUANTILES, check_levels

__all__ = ["GaussianMixture", "MixtureSummary", "check_errors", "moments", "solver_levels",
           "summarize"]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)

#: Upper bound on the number of float64 temporaries per vectorised block (rows x values x
#: components); larger inputs are processed in blocks of rows to bound memory.
_BLOCK_ELEMENTS = 1 << 21


def _as_2d(a: Any, name: str) -> np.ndarray:
    arr = np.asarray(a, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ValueError(
            f"{name} must be a 1-D (one component per row) or 2-D (n_rows, n_components) "
            f"array; got shape {arr.shape}."
        )
    return arr


def _checked_normalised(w: np.ndarray, m: np.ndarray, v: np.ndarray) -> tuple[tuple, np.ndarray]:
    """Normalised ``(w, m, v)`` (padding: mean 0, variance 1) and the error counts."""
    w, m, v = (np.ascontiguousarray(a) for a in (w, m, v))
    out = tuple(np.empty(w.shape) for _ in range(3))
    errors = np.zeros(6, np.int64)
    _k.check_normalise(w, m, v, *out, errors)
    return out, errors


#: What :func:`check_errors` says for each problem count (``{n}``: the count).
_ERROR_MESSAGES = (
    (_k.BAD_WEIGHT, "weights contain {n} non-finite values; weights must be finite and >= 0."),
    (_k.NEGATIVE_WEIGHT, "weights contain {n} negative values; weights must be >= 0."),
    (_k.ZERO_ROWS, "{n} rows have weights summing to 0 (first: row {first}); every row needs "
                   "at least one component with positive weight."),
    (_k.BAD_MEAN, "means contain {n} non-finite values in components with positive weight."),
    (_k.BAD_VARIANCE, "variances contain {n} values that are not finite and > 0 in components "
                      "with positive weight; clip them to a small positive floor."),
)


def check_errors(errors: np.ndarray) -> None:
    """Raise the ValueError that the problem counts of :func:`basics.mixture_kernels.
    check_normalise` (or ``normalise_raw_row``) describe, if any: the first problem found."""
    for slot, message in _ERROR_MESSAGES:
        if errors[slot]:
            raise ValueError(message.format(n=int(errors[slot]),
                                            first=int(errors[_k.FIRST_ZERO_ROW])))


def moments(weights: Any, means: Any, variances: Any) -> tuple[np.ndarray, np.ndarray]:
    """Mean and variance of Gaussian mixtures, row by row.

    Law of total variance, Lakshminarayanan, Roy & Teh (2016), Sec. 3.3, eq. (4):
    ``mean = sum_k w_k m_k`` and ``var = sum_k w_k (v_k + (m_k - mean)^2)``. Weights are
    normalised per row; zero-weight (padding) components are ignored whatever their
    mean and variance. No further validation: use :class:`GaussianMixture` for that.

    Parameters
    ----------
    weights, means, variances : array-like of shape (n_rows, n_components) or (n_rows,)
        Unnormalised non-negative weights, component means and component variances.

    Returns
    -------
    mean, var : ndarray of shape (n_rows,)

    Examples
    --------
    >>> m, v = moments([[0.5, 0.5]], [[-1.0, 1.0]], [[1.0, 1.0]])
    >>> float(m[0]), float(v[0])
    (0.0, 2.0)
    """
    (w, m, v), _ = _checked_normalised(
        _as_2d(weights, "weights"), _as_2d(means, "means"), _as_2d(variances, "variances"))
    return _summary_arrays(w, m, v, np.empty(0))[:2]


def _levels(q: Any, n_rows: int | None = None) -> np.ndarray:
    """Levels as a 1-D array, or (with ``n_rows``) also a 2-D ``(n_rows, m)`` array."""
    return np.atleast_1d(check_levels(q, "q", n_rows=n_rows))


def solver_levels(levels: np.ndarray) -> _k.Levels:
    """``(levels, ndtri(levels), ndtri(min(q, 1 - q)))`` as the quantile kernels take them
    (:class:`basics.mixture_kernels.Levels`): 2-D, one row for every mixture row or one row
    of each."""
    levels = np.ascontiguousarray(levels.reshape(1, -1) if levels.ndim == 1 else levels)
    with np.errstate(divide="ignore"):  # ndtri(0) = -inf: those levels are not solved
        z_level = special.ndtri(levels)
        z_reflected = special.ndtri(np.where(levels > 0.5, 1.0 - levels, levels))
    return _k.Levels(levels, z_level, z_reflected)


def _summary_arrays(w: np.ndarray, m: np.ndarray, v: np.ndarray,
                    levels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, variance and quantiles of normalised mixture arrays (the kernel's inputs);
    ``levels`` of shape (n_levels,) for every row, or (n_rows, n_levels) per row."""
    n = w.shape[0]
    lv = solver_levels(levels)
    mean, var, qs = np.empty(n), np.empty(n), np.empty((n, lv.levels.shape[1]))
    w, m, v = (np.ascontiguousarray(a) for a in (w, m, v))
    _k.summary_kernel(w, m, v, lv, mean, var, qs)
    return mean, var, qs


class MixtureSummary(NamedTuple):
    """What :func:`summarize` returns: per-row mean, standard deviation and quantiles."""

    mean: np.ndarray
    std: np.ndarray
    quantiles: np.ndarray


def summarize(mixture: GaussianMixture, levels: Any = DEFAULT_QUANTILES) -> MixtureSummary:
    """Mean, standard deviation and quantiles of every row of a mixture, in one kernel call.

    Per row, one numba pass gathers the live components; the moments follow by the law of
    total variance (Lakshminarayanan, Roy & Teh (2016), Sec. 3.3, eq. (4)) and every level
    is solved by the safeguarded Newton iteration of :meth:`GaussianMixture.quantile`. A
    row's result depends only on its non-zero-weight components in their order: the same
    row inside a wider padded block, or among other rows, gives the same bits.

    Parameters
    ----------
    mixture : GaussianMixture
    levels : float or array-like of shape (n_levels,), default=DEFAULT_QUANTILES
        Quantile levels in [0, 1] (0 and 1 give -inf and +inf); may be empty.

    Returns
    -------
    MixtureSummary
        ``mean``, ``std`` of shape (n_rows,) and ``quantiles`` of shape (n_rows, n_levels).

    Examples
    --------
    >>> gm = GaussianMixture([[0.5, 0.5]], [[-1.0, 1.0]], [[1.0, 1.0]])
    >>> mean, std, q = summarize(gm, [0.5])
    >>> float(mean[0]), round(float(std[0] ** 2), 12), round(float(q[0, 0]), 12)
    (0.0, 2.0, 0.0)
    """
    if not isinstance(mixture, GaussianMixture):
        raise TypeError(f"summarize expects a GaussianMixture; got {type(mixture).__name__}.")
    mean, var, qs = _summary_arrays(mixture.weights, mixture.means, mixture.variances,
                                    _levels(levels))
    return MixtureSummary(mean, np.sqrt(var), qs)


def _part_scales(weights: Any, n_parts: int, n: int) -> list:
    """Factor of every part of :meth:`GaussianMixture.concat`: its normalised part weight."""
    if weights is None:
        return [1.0 / n_parts] * n_parts
    pw = np.asarray(weights, dtype=np.float64)
    if pw.ndim == 1:
        pw = np.broadcast_to(pw[:, None], (pw.shape[0], n))
    if pw.shape != (n_parts, n):
        raise ValueError(f"weights must have shape ({n_parts},) or ({n_parts}, {n}); got "
                         f"{np.shape(weights)}.")
    bad = ~(np.isfinite(pw) & (pw >= 0))
    if np.any(bad):
        raise ValueError(f"part weights contain {int(bad.sum())} negative or non-finite "
                         "values; weights must be finite and >= 0.")
    total = pw.sum(axis=0)
    if np.any(total <= 0):
        zero = np.flatnonzero(total <= 0)
        raise ValueError(f"{zero.size} rows have weights summing to 0 (first: row "
                         f"{int(zero[0])}); give every row a part with positive weight.")
    return list((pw / total)[:, :, None])


def _blocks(n_rows: int, per_row: int):
    step = max(1, _BLOCK_ELEMENTS // max(per_row, 1))
    for start in range(0, n_rows, step):
        yield slice(start, min(start + step, n_rows))


def _pad_columns(a: np.ndarray, width: int, fill: float) -> np.ndarray:
    """Right-pad the component columns of a mixture's array (zero-weight padding)."""
    if a.shape[1] == width:
        return a
    out = np.full((a.shape[0], width), fill)
    out[:, : a.shape[1]] = a
    return out


class GaussianMixture:
    """A Gaussian mixture predictive distribution per row.

    Row ``i`` has density ``p_i(y) = sum_k w_ik N(y; m_ik, v_ik)``, as in the Mondrian
    regression forest, Lakshminarayanan, Roy & Teh (2016), Sec. 3.3, eq. (3)-(5) (a tree's
    prediction is a mixture over path nodes, the forest the equal-weight mixture over trees).

    Parameters
    ----------
    weights : array-like of shape (n_rows, n_components) or (n_rows,)
        Non-negative mixture weights; each row is normalised to sum to one. A 1-D array means
        one component per row. A weight of zero marks a padding component.
    means : array-like, same shape as ``weights``
        Component means (finite for every non-zero weight).
    variances : array-like, same shape as ``weights``
        Component variances (strictly positive for every non-zero weight).

    Attributes
    ----------
    weights, means, variances : ndarray of shape (n_rows, n_components)
        Normalised weights and component parameters. Padding components are stored with
        mean 0 and variance 1 so that they stay harmless in every formula.

    Raises
    ------
    ValueError
        On mismatched shapes, negative or non-finite weights, rows whose weights sum to zero,
        or non-finite means / non-positive variances of non-zero-weight components.

    Examples
    --------
    >>> gm = GaussianMixture([[0.5, 0.5]], [[-1.0, 1.0]], [[1.0, 1.0]])
    >>> float(gm.mean[0]), float(gm.var[0])
    (0.0, 2.0)
    >>> round(float(gm.quantile(0.5)[0]), 12)
    0.0
    """

    __slots__ = ("weights", "means", "variances", "_std")

    def __init__(self, weights: Any, means: Any, variances: Any) -> None:
        w = _as_2d(weights, "weights")
        m = _as_2d(means, "means")
        v = _as_2d(variances, "variances")
        if not (w.shape == m.shape == v.shape):
            raise ValueError(
                "weights, means and variances must have the same shape; got "
                f"{w.shape}, {m.shape} and {v.shape}."
            )
        if w.shape[1] == 0:
            raise ValueError("A mixture needs at least one component per row; got 0 columns.")
        arrays, errors = _checked_normalised(w, m, v)
        check_errors(errors)
        self._set(*arrays)

    def _set(self, w: np.ndarray, m: np.ndarray, v: np.ndarray) -> None:
        self.weights = w
        self.means = m
        self.variances = v
        self._std = None

    @property
    def _std_k(self) -> np.ndarray:
        """Component standard deviations, computed on first use (the kernels take ``v``)."""
        if self._std is None:
            self._std = np.sqrt(self.variances)
        return self._std

    @classmethod
    def _trusted(cls, w: np.ndarray, m: np.ndarray, v: np.ndarray) -> GaussianMixture:
        """Build from arrays that are already validated and normalised."""
        obj = cls.__new__(cls)
        obj._set(w, m, v)
        return obj

    # ------------------------------------------------------------------ constructors

    @classmethod
    def from_moments(cls, mean: Any, var: Any) -> GaussianMixture:
        """A single Gaussian per row.

        Parameters
        ----------
        mean, var : array-like of shape (n_rows,)
            Mean and (strictly positive) variance per row.

        Returns
        -------
        GaussianMixture

        Examples
        --------
        >>> gm = GaussianMixture.from_moments([0.0, 1.0], [1.0, 4.0])
        >>> gm.std.tolist()
        [1.0, 2.0]
        """
        mean = np.asarray(mean, dtype=np.float64)
        var = np.asarray(var, dtype=np.float64)
        if mean.ndim != 1 or var.shape != mean.shape:
            raise ValueError(
                f"mean and var must be 1-D arrays of the same length; got shapes {mean.shape} "
                f"and {var.shape}."
            )
        return cls(np.ones_like(mean), mean, var)

    @classmethod
    def concat(
        cls, mixtures: Sequence[GaussianMixture], weights: Any = None
    ) -> GaussianMixture:
        """Combine mixtures over the same rows into one mixture (a mixture of mixtures).

        With the default equal weights this is the forest prediction of
        Lakshminarayanan, Roy & Teh (2016), Sec. 3.3, eq. (5): the average of the trees'
        predictive mixtures.

        Parameters
        ----------
        mixtures : sequence of GaussianMixture
            Parts, all with the same number of rows.
        weights : array-like of shape (n_parts,) or (n_parts, n_rows), optional
            Non-negative weight of each part (per row if 2-D); equal by default. Each row is
            normalised.

        Returns
        -------
        GaussianMixture
            Components of all parts side by side, weighted by the part weights.

        Examples
        --------
        >>> a = GaussianMixture.from_moments([0.0], [1.0])
        >>> b = GaussianMixture.from_moments([2.0], [1.0])
        >>> float(GaussianMixture.concat([a, b]).mean[0])
        1.0
        """
        parts = list(mixtures)
        if not parts:
            raise ValueError("concat needs at least one mixture.")
        for p in parts:
            if not isinstance(p, GaussianMixture):
                raise TypeError(f"concat expects GaussianMixture parts; got {type(p).__name__}.")
        n = parts[0].n_rows
        sizes = [p.n_rows for p in parts]
        if any(s != n for s in sizes):
            raise ValueError(f"All mixtures must have the same number of rows; got {sizes}.")
        scales = _part_scales(weights, len(parts), n)
        width = sum(p.n_components for p in parts)
        w, m, v = np.empty((n, width)), np.empty((n, width)), np.empty((n, width))
        start = 0
        # The parts are normalised already: scaling each by its share of the part weights
        # normalises the whole, with one write per component and no second validation.
        for p, scale in zip(parts, scales, strict=True):
            cols = slice(start, start + p.n_components)
            np.multiply(p.weights, scale, out=w[:, cols])
            m[:, cols] = p.means
            v[:, cols] = p.variances
            start = cols.stop
        if weights is not None:  # parts of weight 0 become padding: mean 0, variance 1
            dropped = w == 0
            m[dropped] = 0.0
            v[dropped] = 1.0
        return cls._trusted(w, m, v)

    @classmethod
    def stack(cls, mixtures: Sequence[GaussianMixture]) -> GaussianMixture:
        """The rows of ``mixtures`` (at least one), one mixture after the other: the blocks
        of one prediction, or the partitions of a Dask one. Narrower mixtures are padded with
        zero-weight components (``max(n_components)`` columns), which change no value.

        >>> a = GaussianMixture.from_moments([0.0], [1.0])
        >>> GaussianMixture.stack([a, GaussianMixture([[.5, .5]], [[1, 3]], [[1, 1]])]).mean
        array([0., 2.])
        """
        parts = list(mixtures)
        if not parts:
            raise ValueError("stack needs at least one mixture.")
        if len(parts) == 1:
            return parts[0]
        width = max(p.n_components for p in parts)
        return cls._trusted(*(
            np.concatenate([_pad_columns(getattr(p, k), width, fill) for p in parts])
            for k, fill in (("weights", 0.0), ("means", 0.0), ("variances", 1.0))
        ))

    # ------------------------------------------------------------------ container protocol

    @property
    def n_rows(self) -> int:
        """Number of rows (predictive distributions)."""
        return self.weights.shape[0]

    @property
    def n_components(self) -> int:
        """Number of component columns (including padding)."""
        return self.weights.shape[1]

    def __len__(self) -> int:
        return self.n_rows

    def __getitem__(self, rows: Any) -> GaussianMixture:
        """Row selection (int, slice, boolean mask or integer array); always a mixture."""
        if isinstance(rows, tuple):
            raise IndexError("GaussianMixture supports row indexing only.")
        if np.isscalar(rows) and not isinstance(rows, (bool, np.bool_)):
            rows = [int(rows)]
        return GaussianMixture._trusted(
            self.weights[rows], self.means[rows], self.variances[rows]
        )

    def __repr__(self) -> str:
        return f"GaussianMixture(n_rows={self.n_rows}, n_components={self.n_components})"

    def __getstate__(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.weights, self.means, self.variances

    def __setstate__(self, state: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        self._set(*state)

    # ------------------------------------------------------------------ moments

    @property
    def mean(self) -> np.ndarray:
        """Predictive mean per row, shape (n_rows,) (eq. (4))."""
        return _summary_arrays(self.weights, self.means, self.variances, np.empty(0))[0]

    @property
    def var(self) -> np.ndarray:
        """Predictive variance per row by the law of total variance, shape (n_rows,) (eq. (4))."""
        return _summary_arrays(self.weights, self.means, self.variances, np.empty(0))[1]

    @property
    def std(self) -> np.ndarray:
        """Predictive standard deviation per row, shape (n_rows,)."""
        return np.sqrt(self.var)

    # ------------------------------------------------------------------ densities

    def _values(self, y: Any) -> tuple[np.ndarray, bool]:
        """``y`` as (n_rows, m) plus whether to squeeze the last axis."""
        y = np.asarray(y, dtype=np.float64)
        n = self.n_rows
        if y.ndim == 0:
            return np.full((n, 1), float(y)), True
        if y.ndim == 1:
            if y.shape[0] != n:
                raise ValueError(f"y has {y.shape[0]} values but the mixture has {n} rows.")
            return y[:, None], True
        if y.ndim == 2:
            if y.shape[0] != n:
                raise ValueError(f"y has {y.shape[0]} rows but the mixture has {n} rows.")
            return y, False
        raise ValueError(f"y must be a scalar, (n_rows,) or (n_rows, m); got shape {y.shape}.")

    def cdf(self, y: Any) -> np.ndarray:
        """Cumulative distribution function ``P(Y_i <= y_i)``.

        Parameters
        ----------
        y : float or array-like of shape (n_rows,) or (n_rows, m)
            One value for all rows, one per row, or ``m`` values per row.

        Returns
        -------
        ndarray of shape (n_rows,) or (n_rows, m)
        """
        yy, squeeze = self._values(y)
        out = np.empty(yy.shape)
        for b in _blocks(self.n_rows, yy.shape[1] * self.n_components):
            z = (yy[b, :, None] - self.means[b, None, :]) / self._std_k[b, None, :]
            out[b] = np.einsum("imk,ik->im", special.ndtr(z), self.weights[b])
        return out[:, 0] if squeeze else out

    def logpdf(self, y: Any) -> np.ndarray:
        """Log predictive density, computed with log-sum-exp (stable far in the tails).

        Parameters
        ----------
        y : float or array-like of shape (n_rows,) or (n_rows, m)

        Returns
        -------
        ndarray of shape (n_rows,) or (n_rows, m)
        """
        yy, squeeze = self._values(y)
        out = np.empty(yy.shape)
        with np.errstate(divide="ignore", invalid="ignore"):
            logw = np.log(self.weights) - np.log(self._std_k) - _LOG_SQRT_2PI
            for b in _blocks(self.n_rows, yy.shape[1] * self.n_components):
                z = (yy[b, :, None] - self.means[b, None, :]) / self._std_k[b, None, :]
                a = logw[b, None, :] - 0.5 * z * z
                amax = a.max(axis=2)
                finite = np.isfinite(amax)
                shift = np.where(finite, amax, 0.0)
                s = np.exp(a - shift[:, :, None]).sum(axis=2)
                out[b] = np.where(finite, shift + np.log(s), -np.inf)
        out[np.isnan(yy)] = np.nan
        return out[:, 0] if squeeze else out

    def pdf(self, y: Any) -> np.ndarray:
        """Predictive density, ``exp(logpdf(y))``; same shapes as :meth:`logpdf`."""
        return np.exp(self.logpdf(y))

    # ------------------------------------------------------------------ quantiles

    def quantile(self, q: Any) -> np.ndarray:
        """Quantiles (inverse CDF) of every row.

        Safeguarded Newton iteration per (row, level) in a numba kernel (:func:`summarize`),
        in the bracket
        ``[min_k Q_k(q), max_k Q_k(q)]`` where ``Q_k`` is the quantile function of component
        ``k`` (the mixture CDF is a convex combination of component CDFs, so its root lies
        between them; this also holds for levels in the extreme tails). Levels above 1/2 are
        solved on the reflected mixture with the survival function, so upper-tail quantiles are
        as accurate as lower-tail ones. Rows with one live component use ``m + s * ndtri(q)``
        exactly. Converges to about ``1e-13`` relative in ``y``.

        Parameters
        ----------
        q : float or array-like of shape (n_levels,) or (n_rows, n_levels)
            Levels in [0, 1] (0 and 1 give -inf and +inf): the same for every row, or 2-D
            with the levels of each row (inverse-transform sampling).

        Returns
        -------
        ndarray of shape (n_rows,) for scalar ``q``, else (n_rows, n_levels)

        Examples
        --------
        >>> gm = GaussianMixture.from_moments([0.0], [1.0])
        >>> round(float(gm.quantile(0.975)[0]), 6)
        1.959964
        """
        qa = np.asarray(q, dtype=np.float64)
        out = _summary_arrays(self.weights, self.means, self.variances,
                              _levels(q, self.n_rows))[2]
        return out[:, 0] if qa.ndim == 0 else out

    def interval(self, level: Any = 0.9) -> tuple[np.ndarray, np.ndarray]:
        """Central predictive interval ``[Q((1 - level) / 2), Q((1 + level) / 2)]``.

        Parameters
        ----------
        level : float or array-like of shape (n_levels,), default 0.9
            Probability mass inside the interval, in [0, 1].

        Returns
        -------
        lower, upper : ndarray of shape (n_rows,), or (n_rows, n_levels) for array ``level``
        """
        return central_interval(self, level)

    # ------------------------------------------------------------------ sampling

    def sample(
        self, n_samples: int = 1, random_state: int | np.random.RandomState | np.random.Generator
        | None = None
    ) -> np.ndarray:
        """Draw from every row's mixture: pick a component by weight, then draw the normal.

        Parameters
        ----------
        n_samples : int, default 1
            Draws per row.
        random_state : int, RandomState, Generator or None
            Seed or generator (``sklearn.utils.check_random_state`` unless a Generator).

        Returns
        -------
        ndarray of shape (n_rows, n_samples)
        """
        rng, u = uniform_draws(random_state, self.n_rows, n_samples)
        n, k = u.shape[0], self.n_components
        eps = rng.standard_normal(u.shape)
        cum = np.cumsum(self.weights, axis=1)
        cum /= cum[:, -1:]  # last entry exactly 1, so u < 1 never selects trailing padding
        comp = np.empty((n, n_samples), dtype=np.intp)
        for b in _blocks(n, n_samples * k):
            # number of cumulative weights <= u: zero-weight components are never selected.
            comp[b] = (u[b, :, None] >= cum[b, None, :-1]).sum(axis=2)
        r = np.arange(n)[:, None]
        return self.means[r, comp] + self._std_k[r, comp] * eps
