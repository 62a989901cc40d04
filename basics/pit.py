"""Recalibration of predictive distributions through their probability integral transform.

If a model's predictive CDF ``F(y|x)`` is calibrated, the PIT ``u = F(y|x)`` of fresh rows
is uniform on [0, 1]. Kuleshov, Fenner & Ermon (2018), "Accurate uncertainties for deep
learning using calibrated regression" (ICML), Sec. 3, Algorithm 1, learn a monotone map
``R`` with ``R(p) = P(U <= p)`` on a calibration set (isotonic regression of the empirical
CDF of ``u``) and predict with ``R(F(y|x))``: the composed CDF is calibrated on data like the
calibration set. Because ``R`` is one function of probabilities, shared by all rows, every
derived quantity follows from the same object (:class:`RecalibratedDistribution`):

- CDF ``G(y) = R(F(y))``; quantile ``G^-1(q) = F^-1(R^-1(q))`` (so quantile levels are only
  remapped, and a model's one-pass summary still costs one kernel call);
- log-density by the change of variables, ``log g(y) = log f(y) + log R'(F(y))``;
- samples by inverse transform, ``F^-1(R^-1(V))`` with ``V ~ U(0, 1)``.

:class:`PITMap` is ``R``: piecewise linear between knots ``(base_j, nominal_j)``, from
``(0, 0)`` to ``(1, 1)``, strictly increasing, so its inverse and its (piecewise constant)
derivative exist and the recalibrated density integrates to one. It is fit from a histogram
of PIT values on fixed edges (:func:`pit_counts`): counts add up exactly, so a map learnt from
partitions summed on a cluster is the map learnt from all rows in one process, whatever the
partitioning. Knots sit at the empirical quantiles of ``u`` at equally spaced levels, which
is the isotonic fit of Algorithm 1 (the empirical CDF of ``u`` is already monotone, so the
isotonic regression of the pairs ``(u_i, rank_i / n)`` returns it) kept at bounded
resolution: one knot per :data:`ROWS_PER_KNOT` rows, at most :data:`MAX_KNOTS`.

For streams, :meth:`PITMap.updated` runs adaptive conformal inference (Gibbs & Candes (2021),
"Adaptive conformal inference under distribution shift", NeurIPS, Sec. 2, eq. (2)) on every
knot: ``a_j <- a_j + step * (nominal_j - 1{u_t <= a_j})``, which holds the long-run fraction of
targets below the level-``a_j`` quantile at ``nominal_j`` whatever the sequence.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit
from scipy import special

from .bounds import check_range
from .distribution_tools import central_interval, uniform_draws
from .jit import JIT
from .mixture import GaussianMixture, _levels

__all__ = [
    "ACI_STEP",
    "MAX_ACI_STEP",
    "MAX_KNOTS",
    "MIN_ROWS",
    "PIT_EDGES",
    "PITMap",
    "ROWS_PER_KNOT",
    "RecalibratedDistribution",
    "pit_counts",
]

#: Fewest calibration rows :meth:`PITMap.from_counts` accepts.
MIN_ROWS = 50
#: Calibration rows per knot of a fitted map, and the most knots a map has. A segment's slope
#: (the density factor) is estimated from about this many rows (about 14% noise); fewer rows
#: per knot would spend the density on noise, more leave the knots too far apart for the
#: tail levels (with 2,000 rows and 200 rows per knot, the 90% interval of Friedman #1 was
#: 0.05 off on fresh data; with 50, 0.01: benchmarks/results/issue11/noise.md).
ROWS_PER_KNOT = 50
MAX_KNOTS = 200
#: Default step of the adaptive update (Gibbs & Candes (2021) use 0.005 in Sec. 4), and the
#: largest :meth:`PITMap.updated` takes: the updates keep every level within ``[-step,
#: 1 + step]`` (their Prop. 4.1), so a stored map's levels lie within ``[-MAX_ACI_STEP,
#: 1 + MAX_ACI_STEP]``.
ACI_STEP = 0.005
MAX_ACI_STEP = 1.0


def _edges() -> np.ndarray:
    # a uniform grid (so that PIT histograms of 20 or 40 bins are sums of these bins) merged
    # with a probit grid that resolves the tails, where heavy-tailed targets put their PIT
    uniform = np.linspace(0.0, 1.0, 4001)
    probit = special.ndtr(np.linspace(-8.5, 8.5, 1701))
    return np.unique(np.concatenate([uniform, probit, [0.0, 1.0]]))


#: Fixed edges of PIT histograms: every fit and every cluster summary uses the same bins.
PIT_EDGES: np.ndarray = _edges()


def _check_pit(u: Any) -> np.ndarray:
    u = np.asarray(u, dtype=np.float64).ravel()
    bad = ~((u >= -1e-9) & (u <= 1.0 + 1e-9))  # a CDF summed in floating point may pass 1
    if np.any(bad):
        raise ValueError(f"PIT values must lie in [0, 1]; {int(bad.sum())} of {u.size} do not "
                         "(NaN targets or predictions?). Drop those rows first.")
    return np.clip(u, 0.0, 1.0)


def pit_counts(u: Any) -> np.ndarray:
    """Histogram of PIT values on :data:`PIT_EDGES` (the last bin includes 1).

    Parameters
    ----------
    u : array-like
        PIT values in [0, 1].

    Returns
    -------
    ndarray of int64, shape (len(PIT_EDGES) - 1,)

    Examples
    --------
    >>> int(pit_counts([0.1, 0.5, 1.0]).sum())
    3
    """
    u = _check_pit(u)
    bins = np.minimum(np.searchsorted(PIT_EDGES, u, side="right") - 1, PIT_EDGES.size - 2)
    return np.bincount(bins, minlength=PIT_EDGES.size - 1).astype(np.int64)


def _strictly_increasing(base: np.ndarray) -> np.ndarray:
    """``base`` (from 0 to 1, non-decreasing) with ties pulled apart by a tiny spacing."""
    if np.all(np.diff(base) > 0):
        return base
    k = base.size - 1
    delta = 1e-9
    return base * (1.0 - k * delta) + np.arange(k + 1) * delta


class PITMap:
    """A monotone map ``R`` of PIT values: piecewise linear through knots, ``R(0) = 0``,
    ``R(1) = 1`` (Kuleshov, Fenner & Ermon (2018), Sec. 3, Algorithm 1).

    Parameters
    ----------
    nominal : array-like of shape (n_knots + 1,)
        Strictly increasing probabilities from 0 to 1: the calibrated levels of the knots.
    levels : array-like of shape (n_knots + 1,)
        The PIT value (level of the model's own CDF) of every knot, with ``levels[0] = 0``
        and ``levels[-1] = 1``. The interior values of an adaptive map may leave [0, 1] (by
        at most the step, so within ``[-MAX_ACI_STEP, 1 + MAX_ACI_STEP]``) or cross (the
        recursion of :meth:`updated` needs them as they are); the map uses them clipped to
        [0, 1] and sorted (a monotone rearrangement), ties pulled apart by 1e-9.

    Attributes
    ----------
    base : ndarray
        The knots' PIT values as the map uses them (clipped, sorted, strictly increasing).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> R = PITMap.fit(rng.random(10_000))  # a calibrated model: R is about the identity
    >>> bool(np.max(np.abs(R(np.linspace(0, 1, 11)) - np.linspace(0, 1, 11))) < 0.02)
    True
    """

    __slots__ = ("nominal", "levels", "base")

    def __init__(self, nominal: Any, levels: Any) -> None:
        nominal = np.array(nominal, dtype=np.float64)
        levels = np.array(levels, dtype=np.float64)
        if nominal.ndim != 1 or levels.shape != nominal.shape or nominal.size < 2:
            raise ValueError("a PIT map needs 1-D nominal and levels arrays of the same length "
                             f">= 2; got shapes {nominal.shape} and {levels.shape}.")
        if nominal.size > 16 * MAX_KNOTS + 1:
            raise ValueError(f"a PIT map has at most {16 * MAX_KNOTS + 1} knots; got "
                             f"{nominal.size}.")
        if not (np.all(np.isfinite(nominal)) and np.all(np.isfinite(levels))):
            raise ValueError("a PIT map's knots (nominal, levels) must be finite.")
        if not (nominal[0] == 0.0 and nominal[-1] == 1.0 and np.all(np.diff(nominal) > 0)):
            raise ValueError("nominal levels must increase strictly from 0 to 1.")
        if not (levels[0] == 0.0 and levels[-1] == 1.0):
            raise ValueError("a PIT map's levels must start at 0 and end at 1.")
        # a fitted map's levels lie in [0, 1]; the adaptive updates move them to within
        # [-step, 1 + step] (Gibbs & Candes 2021, Prop. 4.1), step <= MAX_ACI_STEP
        check_range("levels", levels, -MAX_ACI_STEP, 1.0 + MAX_ACI_STEP,
                    "the reach of fits and adaptive updates (MAX_ACI_STEP)")
        self.nominal = nominal
        self.levels = levels
        self.base = _strictly_increasing(np.sort(np.clip(levels, 0.0, 1.0)))

    # ------------------------------------------------------------------ constructors

    @classmethod
    def identity(cls, n_knots: int = 20) -> PITMap:
        """The identity map with ``n_knots`` equal segments (a start for :meth:`updated`)."""
        grid = np.linspace(0.0, 1.0, int(n_knots) + 1)
        return cls(grid, grid)

    @classmethod
    def from_counts(cls, counts: Any, n_knots: int | None = None) -> PITMap:
        """The map of PIT values summarised by :func:`pit_counts` (summed over any parts).

        Knot ``j`` of ``K`` is the empirical ``j / K`` quantile of the PIT values, linear
        between histogram edges: ``R`` is the empirical CDF of ``u`` (the isotonic fit of
        Kuleshov et al. (2018), Algorithm 1) through those knots.

        Parameters
        ----------
        counts : array-like of int, shape (len(PIT_EDGES) - 1,)
        n_knots : int, optional
            Segments of the map; by default one per :data:`ROWS_PER_KNOT` rows, between 4 and
            :data:`MAX_KNOTS`.

        Returns
        -------
        PITMap

        Raises
        ------
        ValueError
            With fewer than :data:`MIN_ROWS` PIT values, or counts of the wrong shape.
        """
        counts = np.asarray(counts)
        if counts.shape != (PIT_EDGES.size - 1,) or counts.dtype.kind not in "iu" or np.any(
                counts < 0):
            raise ValueError(f"counts must be {PIT_EDGES.size - 1} non-negative integers (from "
                             f"pit_counts); got {counts.dtype} of shape {counts.shape}.")
        n = int(counts.sum())
        if n < MIN_ROWS:
            raise ValueError(f"recalibration needs at least {MIN_ROWS} calibration rows with a "
                             f"target; got {n}. Use a larger calibration fraction or window.")
        k = int(n_knots) if n_knots is not None else int(np.clip(n // ROWS_PER_KNOT, 4,
                                                                  MAX_KNOTS))
        if not 1 <= k <= 16 * MAX_KNOTS:
            raise ValueError(f"n_knots must be in [1, {16 * MAX_KNOTS}]; got {k}.")
        nominal = np.linspace(0.0, 1.0, k + 1)
        cum = np.concatenate([[0.0], np.cumsum(counts, dtype=np.float64)]) / n
        # invert the empirical CDF, linear between the upper edges of non-empty bins (an
        # empty stretch shares the rows of the bin after it: a sparse tail is smoothed)
        keep = np.concatenate([[True], counts > 0])
        levels = np.interp(nominal, cum[keep], PIT_EDGES[keep])
        levels[0], levels[-1] = 0.0, 1.0
        return cls(nominal, levels)

    @classmethod
    def fit(cls, u: Any, n_knots: int | None = None) -> PITMap:
        """The map of PIT values ``u`` (:meth:`from_counts` of :func:`pit_counts`)."""
        return cls.from_counts(pit_counts(u), n_knots)

    # ------------------------------------------------------------------ evaluation

    @property
    def n_knots(self) -> int:
        """Number of segments."""
        return self.nominal.size - 1

    def __call__(self, p: Any) -> np.ndarray:
        """``R(p)``: the calibrated probability of the model's probability ``p``."""
        return np.interp(p, self.base, self.nominal)

    def inverse(self, q: Any) -> np.ndarray:
        """``R^-1(q)``: the model's level that the calibrated level ``q`` maps to."""
        return np.interp(q, self.nominal, self.base)

    def log_slope(self, p: Any) -> np.ndarray:
        """``log R'(p)`` (right derivative; the slope of the segment holding ``p``)."""
        slopes = np.log(np.diff(self.nominal)) - np.log(np.diff(self.base))
        seg = np.clip(np.searchsorted(self.base, p, side="right") - 1, 0, slopes.size - 1)
        return slopes[seg]

    def max_deviation(self) -> float:
        """``max |R(p) - p|`` over [0, 1] (at a knot: ``R`` is piecewise linear)."""
        return float(np.max(np.abs(self.nominal - self.base)))

    # ------------------------------------------------------------------ streams

    def updated(self, u: Any, step: float = ACI_STEP) -> PITMap:
        """The map after adaptive conformal updates with the PIT values ``u``, in order.

        Every interior knot runs the recursion of Gibbs & Candes (2021), eq. (2), for the
        one-sided level ``nominal_j``: ``a_j <- a_j + step * (nominal_j - 1{u_t <= a_j})``.

        What it guarantees: for every knot and any sequence of targets (no exchangeability,
        any drift), ``|mean_t 1{u_t <= a_j,t} - nominal_j| <= (1 + 2 step) / (step T)`` after
        ``T`` updates (the ``a_j`` stay in ``[-step, 1 + step]``; Gibbs & Candes, Prop. 4.1),
        so central intervals built from two knots cover at the nominal rate in the long run,
        up to twice that. What it does not: coverage at a given time or for a given ``x``
        (only the long-run average is controlled), levels between knots (interpolated), or
        the density and NLPD (the recursion ignores them). Larger steps follow drift faster
        and fluctuate more.

        Parameters
        ----------
        u : array-like of shape (n,)
            PIT values of the model's own (not recalibrated) CDF, oldest first.
        step : float, default=ACI_STEP
            The learning rate ``gamma`` of Gibbs & Candes (2021).

        Returns
        -------
        PITMap
            A new map; this one is unchanged.
        """
        step = float(step)
        if not (0.0 < step <= MAX_ACI_STEP):
            raise ValueError(f"step must be in (0, {MAX_ACI_STEP:g}]; got {step}.")
        levels = self.levels.copy()
        aci_kernel(_check_pit(u), self.nominal, levels, step)
        return PITMap(self.nominal, levels)

    # ------------------------------------------------------------------ state

    def to_state(self) -> dict:
        """``{"nominal", "levels"}`` arrays (the model file's entry; no pickle)."""
        return {"nominal": self.nominal.copy(), "levels": self.levels.copy()}

    @classmethod
    def from_state(cls, state: Any, where: str = "recalibration") -> PITMap:
        """Rebuild from :meth:`to_state`, checking it (model files are untrusted input)."""
        if not isinstance(state, dict) or set(state) != {"nominal", "levels"}:
            raise ValueError(f"{where}: expected a dict with 'nominal' and 'levels'.")
        arrays = []
        for key in ("nominal", "levels"):
            a = state[key]
            if not isinstance(a, np.ndarray) or a.dtype != np.float64:
                raise ValueError(f"{where}.{key}: expected a float64 array.")
            arrays.append(a)
        try:
            return cls(*arrays)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, PITMap) and np.array_equal(self.nominal, other.nominal)
                and np.array_equal(self.levels, other.levels))

    __hash__ = None  # mutable arrays inside

    def __getstate__(self) -> tuple:
        return self.nominal, self.levels

    def __setstate__(self, state: tuple) -> None:
        self.__init__(*state)

    def __repr__(self) -> str:
        return f"PITMap(n_knots={self.n_knots}, max_deviation={self.max_deviation():.3f})"


@njit(**JIT)
def aci_kernel(u, nominal, levels, step):  # pragma: no cover - jitted
    """Adaptive conformal updates of the interior knots, one PIT value at a time, in order."""
    for t in range(u.shape[0]):
        for j in range(1, levels.shape[0] - 1):
            below = 1.0 if u[t] <= levels[j] else 0.0
            levels[j] += step * (nominal[j] - below)


class RecalibratedDistribution:
    """A predictive distribution with a recalibrated CDF ``G = R o F`` (module docstring).

    Parameters
    ----------
    base : GaussianMixture
        The model's own predictive mixture ``F`` per row.
    pit_map : PITMap
        ``R``, shared by all rows.

    Notes
    -----
    ``mean`` and ``std`` are the base mixture's: the recalibration changes probabilities,
    not the point prediction (RMSE is unchanged by construction) nor the reported scale;
    intervals, quantiles, CDF, density and samples are the recalibrated ones.

    Examples
    --------
    >>> base = GaussianMixture.from_moments([0.0], [4.0])  # too wide for N(0, 1) targets
    >>> y = np.random.default_rng(0).normal(size=20_000)
    >>> R = PITMap.fit(special.ndtr(y / 2.0))  # the PIT of N(0, 1) targets under N(0, 4)
    >>> lo, hi = RecalibratedDistribution(base, R).interval(0.9)
    >>> round(float(hi[0]), 1)  # N(0, 1): 1.64
    1.6
    """

    __slots__ = ("base", "pit_map")

    def __init__(self, base: GaussianMixture, pit_map: PITMap) -> None:
        if not isinstance(base, GaussianMixture) or not isinstance(pit_map, PITMap):
            raise TypeError("RecalibratedDistribution needs a GaussianMixture and a PITMap; got "
                            f"{type(base).__name__} and {type(pit_map).__name__}.")
        self.base = base
        self.pit_map = pit_map

    @property
    def n_rows(self) -> int:
        return self.base.n_rows

    def __len__(self) -> int:
        return self.base.n_rows

    def __getitem__(self, rows: Any) -> RecalibratedDistribution:
        return RecalibratedDistribution(self.base[rows], self.pit_map)

    def __repr__(self) -> str:
        return f"RecalibratedDistribution({self.base!r}, {self.pit_map!r})"

    @property
    def mean(self) -> np.ndarray:
        """The base mixture's mean (the point prediction; see the class notes)."""
        return self.base.mean

    @property
    def var(self) -> np.ndarray:
        return self.base.var

    @property
    def std(self) -> np.ndarray:
        return self.base.std

    def cdf(self, y: Any) -> np.ndarray:
        """``R(F(y))``; shapes as :meth:`GaussianMixture.cdf`."""
        return self.pit_map(self.base.cdf(y))

    def logpdf(self, y: Any) -> np.ndarray:
        """``log f(y) + log R'(F(y))`` (change of variables)."""
        return self.base.logpdf(y) + self.pit_map.log_slope(self.base.cdf(y))

    def pdf(self, y: Any) -> np.ndarray:
        return np.exp(self.logpdf(y))

    def quantile(self, q: Any) -> np.ndarray:
        """``F^-1(R^-1(q))``; shapes as :meth:`GaussianMixture.quantile`."""
        out = self.base.quantile(self.pit_map.inverse(_levels(q, self.n_rows)))  # checked
        return out[:, 0] if np.ndim(q) == 0 else out

    def interval(self, level: Any = 0.9) -> tuple[np.ndarray, np.ndarray]:
        """Central interval ``[G^-1((1 - level) / 2), G^-1((1 + level) / 2)]``."""
        return central_interval(self, level)

    def sample(self, n_samples: int = 1, random_state: Any = None) -> np.ndarray:
        """Draws by inverse transform, ``F^-1(R^-1(V))``, shape (n_rows, n_samples)."""
        _, v = uniform_draws(random_state, self.n_rows, n_samples)
        return self.base.quantile(self.pit_map.inverse(v)) if v.size else v

