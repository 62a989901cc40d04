"""Predictive distributions the benchmarks score that :mod:`basics` does not have, and their
scores.

Every distribution here offers the same few things, so that one scoring function
(:func:`regression_scores`) treats ours and every peer alike: ``n_rows``, ``mean``,
``cdf(y)``, ``quantile(levels)`` (shape ``(n_rows, n_levels)``), ``crps_rows(y)``,
``rps_rows(y)`` (the ranked probability score of whole-number targets,
:mod:`basics.discrete`, from the CDF at the half-integers) and, if it has a density,
``logpdf(y)`` (``has_density``).

:class:`Mixture`
    One of ours (:class:`~basics.mixture.GaussianMixture`,
    :class:`~basics.pit.RecalibratedDistribution`) or a Gaussian ``(mean, std)`` pair; every
    number comes from :mod:`basics` (exact CRPS: :func:`basics.metrics.crps_rows`).
:class:`Parametric`
    A Student-t or Laplace distribution per row (NGBoost's heavier-tailed families); CRPS in
    closed form (scoringrules' ``crps_t`` / ``crps_laplace``).
:class:`StepDistribution`
    A conformal predictive system's CDF (crepes): ``m`` equally weighted atoms
    ``loc + scale * a_j``; exact CRPS (:func:`step_crps_rows`); no density.
:class:`QuantileGrid`
    A quantile regression's predicted quantiles, read as the piecewise-linear CDF through
    them (:class:`QuantileGrid` says how the tails are closed); exact CRPS of that CDF; no
    density.
:class:`Pooled`
    Consecutive blocks of rows, each with its own distribution (the months of a rolling
    recalibration).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from basics.discrete import RPS_TAIL, is_integer_target, mixture_rps, rps_many
from basics.metrics import CALIBRATION_LEVELS, ONE_SIDED_LEVELS, as_mixture, class_rows, crps_rows
from basics.prior_choice import LOW_LOG_DENSITY
from basics.scores import (
    SCORES,
    ClassRows,
    RegressionRows,
    finish,
    partial_sums,
    quantile_levels,
    scores_of,
    values,
)

#: Central-interval levels of the coverage gaps (10%, ..., 90%).
CENTRAL_LEVELS = np.asarray(CALIBRATION_LEVELS)
_ONE_SIDED = np.asarray(ONE_SIDED_LEVELS)
#: The benchmarks' names of two score records (their tables and stored results predate the
#: records); every other score is under its record's name.
RESULT_NAMES = {"interval_score_90": "interval_score", "max_calibration_gap": "max_central_gap"}


def _rps(dist: Any, cdf_at: Any, y: np.ndarray) -> np.ndarray:
    """:func:`basics.discrete.rps_many` of a distribution of this module: ``cdf_at(rows, t)``
    its CDF of the rows ``rows`` at ``t`` (``(len(rows), m)``), the range from its quantiles;
    a row too wide to sum over gets its CRPS."""
    y = np.asarray(y, dtype=np.float64)
    bounds = dist.quantile(np.array([RPS_TAIL, 1.0 - RPS_TAIL]))
    return rps_many(cdf_at, bounds[:, 0], bounds[:, 1], y,
                    fallback=lambda rows: dist.crps_rows(y)[rows])[:, 0]


# ---------------------------------------------------------------- distributions


class Mixture:
    """One of :mod:`basics`' distributions, or a Gaussian ``(mean, std)`` pair."""

    has_density = True

    def __init__(self, dist: Any) -> None:
        self.dist = as_mixture(dist)

    @property
    def n_rows(self) -> int:
        return self.dist.n_rows

    @property
    def mean(self) -> np.ndarray:
        return np.asarray(self.dist.mean)

    @property
    def std(self) -> np.ndarray:
        return np.asarray(self.dist.std)

    def cdf(self, y: np.ndarray) -> np.ndarray:
        return self.dist.cdf(y)

    def quantile(self, levels: Any) -> np.ndarray:
        return self.dist.quantile(np.asarray(levels, dtype=np.float64))

    def logpdf(self, y: np.ndarray) -> np.ndarray:
        return self.dist.logpdf(y)

    def crps_rows(self, y: np.ndarray) -> np.ndarray:
        return crps_rows(self.dist, y)

    def rps_rows(self, y: np.ndarray) -> np.ndarray:
        return mixture_rps(self.dist, y, fallback=lambda rows: self.crps_rows(y)[rows])[:, 0]


class Parametric:
    """A Student-t (``family="t"``, ``df`` per row) or Laplace distribution per row."""

    has_density = True

    def __init__(self, family: str, loc: Any, scale: Any, df: Any = None) -> None:
        from scipy import stats

        if family not in ("t", "laplace"):
            raise ValueError(f"family must be 't' or 'laplace'; got {family!r}.")
        self.family = family
        self.loc = np.asarray(loc, dtype=np.float64)
        self.scale = np.asarray(scale, dtype=np.float64)
        self.df = None if df is None else np.asarray(df, dtype=np.float64)
        self._dist = (stats.t(self.df, self.loc, self.scale) if family == "t"
                      else stats.laplace(self.loc, self.scale))

    @property
    def n_rows(self) -> int:
        return self.loc.size

    @property
    def mean(self) -> np.ndarray:
        return self.loc  # the median; a t with df <= 1 has no mean

    @property
    def std(self) -> np.ndarray:
        """The standard deviation; for a t with ``df <= 2`` (infinite) its scale."""
        if self.family == "laplace":
            return np.sqrt(2.0) * self.scale
        ratio = np.where(self.df > 2.0, self.df / np.maximum(self.df - 2.0, 1e-12), 1.0)
        return self.scale * np.sqrt(ratio)

    def cdf(self, y: np.ndarray) -> np.ndarray:
        return self._dist.cdf(y)

    def quantile(self, levels: Any) -> np.ndarray:
        q = np.asarray(levels, dtype=np.float64)
        return self._dist.ppf(q[:, None]).T  # (levels, rows) by broadcasting

    def logpdf(self, y: np.ndarray) -> np.ndarray:
        return self._dist.logpdf(y)

    def rps_rows(self, y: np.ndarray) -> np.ndarray:
        from scipy import stats

        def cdf_at(rows: np.ndarray, t: np.ndarray) -> np.ndarray:
            loc, scale = self.loc[rows, None], self.scale[rows, None]
            if self.family == "t":
                return stats.t.cdf(t, self.df[rows, None], loc, scale)
            return stats.laplace.cdf(t, loc, scale)

        return _rps(self, cdf_at, y)

    def crps_rows(self, y: np.ndarray) -> np.ndarray:
        import scoringrules as sr

        if self.family == "t":
            out = sr.crps_t(y, self.df, self.loc, self.scale, backend="numpy")
        else:
            out = sr.crps_laplace(y, self.loc, self.scale, backend="numpy")
        return np.asarray(out, dtype=np.float64)


def step_crps_rows(y: np.ndarray, loc: np.ndarray, scale: np.ndarray,
                   atoms: np.ndarray) -> np.ndarray:
    """CRPS of every row's step CDF ``F_i``, ``m`` equally weighted atoms
    ``loc_i + scale_i * atoms`` (crepes' conformal predictive distributions).

    ``CRPS(F, y) = E|X - y| - E|X - X'| / 2``; with the atoms ``a_1 <= ... <= a_m`` sorted,
    ``sum_jk |a_j - a_k| = 2 sum_j (2j - m - 1) a_j`` and ``sum_j |a_j - t|`` comes from the
    prefix sums, so the cost is ``O((n + m) log m)`` instead of crepes' ``n x m`` matrix.
    """
    a = np.sort(np.asarray(atoms, dtype=np.float64))
    m = a.size
    prefix = np.concatenate([[0.0], np.cumsum(a)])
    t = (np.asarray(y, dtype=np.float64) - loc) / scale
    k = np.searchsorted(a, t)  # atoms below t
    abs_dev = (k * t - prefix[k]) + (prefix[m] - prefix[k] - (m - k) * t)
    spread = np.dot(2.0 * np.arange(1, m + 1) - m - 1, a) / m**2  # E|A - A'| / 2
    return scale * (abs_dev / m - spread)


def step_crps(y: np.ndarray, loc: np.ndarray, scale: np.ndarray, atoms: np.ndarray) -> float:
    """Mean of :func:`step_crps_rows`."""
    return float(np.mean(step_crps_rows(y, loc, scale, atoms)))


def fit_cps(y_cal: np.ndarray, mean_cal: np.ndarray, std_cal: np.ndarray) -> Any:
    """crepes' normalized conformal predictive system: the calibration residuals
    ``y - mean`` scaled by the difficulty ``std`` (its ``alphas`` are the sorted scaled
    residuals, the atoms of :class:`StepDistribution`)."""
    from crepes import ConformalPredictiveSystem

    return ConformalPredictiveSystem().fit(np.asarray(y_cal) - mean_cal, sigmas=std_cal)


class StepDistribution:
    """The step CDF of ``m`` equally weighted atoms ``loc + scale * atoms`` per row.

    ``quantile(q)`` is the smallest atom whose CDF reaches ``q`` (the empirical quantile,
    ``a_(ceil(q m))``), so ``y <= quantile(q)`` exactly when ``cdf(y) >= q`` up to ties.
    """

    has_density = False

    def __init__(self, loc: Any, scale: Any, atoms: Any) -> None:
        self.loc = np.asarray(loc, dtype=np.float64)
        self.scale = np.asarray(scale, dtype=np.float64)
        self.atoms = np.sort(np.asarray(atoms, dtype=np.float64))

    @property
    def n_rows(self) -> int:
        return self.loc.size

    @property
    def mean(self) -> np.ndarray:
        return self.loc + self.scale * self.atoms.mean()

    def cdf(self, y: np.ndarray) -> np.ndarray:
        t = (np.asarray(y, dtype=np.float64) - self.loc) / self.scale
        return np.searchsorted(self.atoms, t, side="right") / self.atoms.size

    def quantile(self, levels: Any) -> np.ndarray:
        m = self.atoms.size
        idx = np.clip(np.ceil(np.asarray(levels, dtype=np.float64) * m).astype(int) - 1, 0,
                      m - 1)
        return self.loc[:, None] + self.scale[:, None] * self.atoms[idx][None, :]

    def crps_rows(self, y: np.ndarray) -> np.ndarray:
        return step_crps_rows(y, self.loc, self.scale, self.atoms)

    def rps_rows(self, y: np.ndarray) -> np.ndarray:
        def cdf_at(rows: np.ndarray, t: np.ndarray) -> np.ndarray:
            u = (t - self.loc[rows, None]) / self.scale[rows, None]
            return np.searchsorted(self.atoms, u, side="right") / self.atoms.size

        return _rps(self, cdf_at, y)


class QuantileGrid:
    """The piecewise-linear CDF through predicted quantiles (a quantile regression's).

    Row ``i`` has quantiles ``q_i1, ..., q_iL`` at the levels ``t_1 < ... < t_L`` in (0, 1),
    sorted per row first (crossing quantiles are rearranged, Chernozhukov et al. 2010). The
    CDF is linear between them and the first and last segments are continued to levels 0
    and 1 (a bounded support), so its quantile function ``Q(t)`` is piecewise linear over
    the knots ``0, t_1, ..., t_L, 1``.

    CRPS: the exact CRPS of that CDF, ``int_0^1 2 (1{y < Q(t)} - t) (Q(t) - y) dt``
    (Gneiting & Raftery 2007, eq. (21): the CRPS is twice the pinball loss integrated over
    the levels), integrated in closed form segment by segment (a cubic in ``t`` on each side
    of the level where ``Q(t) = y``): not the mean pinball loss at the given levels, which
    converges to it as the grid gets fine. The PIT ``F(y)`` is the same CDF, interpolated
    between the knots.
    """

    has_density = False

    def __init__(self, levels: Any, quantiles: Any) -> None:
        t = np.asarray(levels, dtype=np.float64)
        q = np.sort(np.asarray(quantiles, dtype=np.float64), axis=1)
        if t.ndim != 1 or t.size < 2 or np.any(np.diff(t) <= 0) or t[0] <= 0 or t[-1] >= 1:
            raise ValueError("levels must be 2 or more increasing values in (0, 1); got "
                             f"{t.tolist()}.")
        if q.ndim != 2 or q.shape[1] != t.size:
            raise ValueError(f"quantiles must have shape (n_rows, {t.size}); got {q.shape}.")
        low = q[:, 0] - (q[:, 1] - q[:, 0]) / (t[1] - t[0]) * t[0]
        high = q[:, -1] + (q[:, -1] - q[:, -2]) / (t[-1] - t[-2]) * (1.0 - t[-1])
        self.knots = np.concatenate([[0.0], t, [1.0]])
        self.values = np.column_stack([low, q, high])  # Q at the knots, non-decreasing

    @property
    def n_rows(self) -> int:
        return self.values.shape[0]

    @property
    def mean(self) -> np.ndarray:
        """``int_0^1 Q(t) dt``, exact for a piecewise-linear ``Q``."""
        v, dt = self.values, np.diff(self.knots)
        return ((v[:, :-1] + v[:, 1:]) / 2 * dt).sum(axis=1)

    def quantile(self, levels: Any) -> np.ndarray:
        t = np.asarray(levels, dtype=np.float64)
        j = np.clip(np.searchsorted(self.knots, t, side="right") - 1, 0, self.knots.size - 2)
        frac = (t - self.knots[j]) / (self.knots[j + 1] - self.knots[j])
        return self.values[:, j] + frac * (self.values[:, j + 1] - self.values[:, j])

    def cdf(self, y: np.ndarray) -> np.ndarray:
        return self._cdf(self.values, np.asarray(y, dtype=np.float64))

    def rps_rows(self, y: np.ndarray) -> np.ndarray:
        def cdf_at(rows: np.ndarray, t: np.ndarray) -> np.ndarray:
            v = self.values[rows]
            return np.column_stack([self._cdf(v, t[:, j]) for j in range(t.shape[1])])

        return _rps(self, cdf_at, y)

    def _cdf(self, v: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The CDF of the rows with quantiles ``v`` at the knots, at ``y`` (one per row)."""
        j = (v <= y[:, None]).sum(axis=1) - 1  # the knot at or below y (-1: below all)
        inside = (j >= 0) & (j < v.shape[1] - 1)
        jj = np.clip(j, 0, v.shape[1] - 2)
        rows = np.arange(v.shape[0])
        lo, hi = v[rows, jj], v[rows, jj + 1]
        width = hi - lo
        frac = np.where(width > 0, (y - lo) / np.where(width > 0, width, 1.0), 1.0)
        u = self.knots[jj] + np.clip(frac, 0.0, 1.0) * (self.knots[jj + 1] - self.knots[jj])
        return np.where(inside, u, np.where(j < 0, 0.0, 1.0))

    def crps_rows(self, y: np.ndarray) -> np.ndarray:
        y = np.asarray(y, dtype=np.float64)[:, None]
        a, length = self.knots[:-1][None, :], np.diff(self.knots)[None, :]
        qa = self.values[:, :-1]
        slope = (self.values[:, 1:] - qa) / length
        d0 = qa - y  # Q(t) - y at the segment's start, rising with slope
        # Q(t) <= y on [a, a + x_star], > y after
        x_star = np.where(slope > 0, np.clip(-d0 / np.where(slope > 0, slope, 1.0), 0.0,
                                              length), np.where(d0 <= 0, length, 0.0))

        def integral(c: float, x1: np.ndarray, x2: np.ndarray) -> np.ndarray:
            """``int 2 (c - a - x) (d0 + slope x) dx`` from ``x1`` to ``x2``."""
            ca = c - a
            return 2.0 * (ca * d0 * (x2 - x1) + (ca * slope - d0) * (x2**2 - x1**2) / 2
                          - slope * (x2**3 - x1**3) / 3)

        zero = np.zeros_like(x_star)
        return (integral(0.0, zero, x_star) + integral(1.0, x_star, length + zero)).sum(axis=1)


def conformal_quantile_shifts(levels: Any, q_cal: np.ndarray, y_cal: np.ndarray
                              ) -> np.ndarray:
    """Conformalized quantile regression level by level (one-sided CQR, Romano et al.
    2019): the shift of each level's quantile that makes it cover its level on the
    calibration rows, the ``ceil(t (n + 1))``-th smallest residual ``y - Q_t(x)``.

    Add the shifts to the predicted quantiles (a column each).
    """
    t = np.asarray(levels, dtype=np.float64)
    resid = np.sort(np.asarray(y_cal, dtype=np.float64)[:, None] - q_cal, axis=0)
    n = resid.shape[0]
    k = np.clip(np.ceil(t * (n + 1)).astype(int), 1, n)
    return resid[k - 1, np.arange(t.size)]


class Pooled:
    """Consecutive row blocks, each with its own distribution (:mod:`benchmarks.predictive`
    protocol), as one distribution of all their rows."""

    def __init__(self, blocks: Sequence[Any]) -> None:
        if not blocks:
            raise ValueError("Pooled needs at least one block.")
        self.blocks = list(blocks)
        self.has_density = all(b.has_density for b in self.blocks)
        self._cuts = np.cumsum([0] + [b.n_rows for b in self.blocks])

    @property
    def n_rows(self) -> int:
        return int(self._cuts[-1])

    def _each(self, name: str, *args: Any, y: np.ndarray | None = None) -> np.ndarray:
        parts = []
        for b, lo, hi in zip(self.blocks, self._cuts[:-1], self._cuts[1:], strict=True):
            part_args = args if y is None else (y[lo:hi], *args)
            parts.append(getattr(b, name)(*part_args))
        return np.concatenate(parts, axis=0)

    @property
    def mean(self) -> np.ndarray:
        return np.concatenate([b.mean for b in self.blocks])

    def cdf(self, y: np.ndarray) -> np.ndarray:
        return self._each("cdf", y=np.asarray(y))

    def quantile(self, levels: Any) -> np.ndarray:
        return self._each("quantile", levels)

    def logpdf(self, y: np.ndarray) -> np.ndarray:
        return self._each("logpdf", y=np.asarray(y))

    def crps_rows(self, y: np.ndarray) -> np.ndarray:
        return self._each("crps_rows", y=np.asarray(y))

    def rps_rows(self, y: np.ndarray) -> np.ndarray:
        return self._each("rps_rows", y=np.asarray(y))


# ---------------------------------------------------------------- scores


def regression_scores(y: np.ndarray, dist: Any, point: np.ndarray | None = None,
                      integer: bool | None = None) -> dict[str, Any]:
    """Every regression score of :data:`basics.scores.SCORES` of one predictive distribution
    on the test rows, as the evaluation job computes them (the same records, per-row functions,
    sums and finishing steps), under :data:`RESULT_NAMES`.

    ``rmse`` is of ``point`` (else of the distribution's mean), ``nlpd`` None without a
    density; the coverage gaps come from the PIT ``F(y)`` (``y`` inside the central ``z``
    interval when ``(1 - z) / 2 <= F(y) <= (1 + z) / 2``, below the ``q`` quantile when
    ``F(y) <= q``) and the PIT distance from its 1,000-bin histogram, as for a model of ours.
    ``rps``: the ranked probability score (:func:`basics.discrete.rps_many`) when the target
    is integer-valued (``integer``; None: :func:`basics.discrete.is_integer_target` of
    ``y``), else None; ``nlpd_comparable`` is False there. Also ``central_gaps`` (observed
    minus nominal coverage of the central intervals at :data:`CENTRAL_LEVELS`),
    ``one_sided_gaps`` (at :data:`basics.metrics.ONE_SIDED_LEVELS`) and, with a density,
    ``low_density_rows`` (rows whose log density is below :data:`LOW_LOG_DENSITY`) and
    ``min_logpdf`` (None without a density).
    """
    y = np.asarray(y, dtype=np.float64)
    integer = is_integer_target(y) if integer is None else bool(integer)
    scores = scores_of("regression", integer=True)  # rps None where the target is not
    levels = quantile_levels(scores)
    q = dist.quantile(np.asarray(levels))
    logpdf = dist.logpdf(y) if dist.has_density else None
    rows = RegressionRows(
        y=y, point=np.asarray(dist.mean if point is None else point, dtype=np.float64),
        logpdf=logpdf, crps=dist.crps_rows(y), pit=np.clip(dist.cdf(y), 0.0, 1.0),
        quantiles={float(level): q[:, j] for j, level in enumerate(levels)},
        rps=dist.rps_rows(y) if integer else None)
    out: dict[str, Any] = {}
    for s in scores:
        values = s.row(rows)
        out[RESULT_NAMES.get(s.name, s.name)] = None if values is None else finish(
            s, partial_sums(s, values, CENTRAL_LEVELS), y.size, CENTRAL_LEVELS)
    n = float(y.size)
    central = partial_sums(SCORES["max_calibration_gap"], rows.pit, CENTRAL_LEVELS) / n
    below = partial_sums(SCORES["max_one_sided_gap"], rows.pit, CENTRAL_LEVELS) / n
    return {**out, "nlpd_comparable": not integer,
            "low_density_rows": None if logpdf is None else int(np.sum(
                logpdf < LOW_LOG_DENSITY)),
            "min_logpdf": None if logpdf is None else float(np.min(logpdf)),
            "central_gaps": (central - CENTRAL_LEVELS).tolist(),
            "one_sided_gaps": (below - _ONE_SIDED).tolist()}


def classification_scores(y: np.ndarray, proba: np.ndarray) -> dict[str, float]:
    """Log loss and accuracy (the records of :mod:`basics.scores` over
    :func:`basics.metrics.class_rows`), Brier score (the squared error of the
    positive class's probability, scikit-learn's binary one; ``y`` are codes 0 / 1) and the
    ECE (the record over :func:`basics.metrics.expected_calibration_error`'s bins)."""
    proba = np.asarray(proba, dtype=np.float64)
    y = np.asarray(y)
    if proba.shape[1] != 2:
        raise ValueError(f"classification_scores is for binary tasks; got {proba.shape[1]} "
                         "classes.")
    correct, log_loss, _ = class_rows(proba, np.arange(2), y)
    scores = values(ClassRows(correct, log_loss, proba.max(axis=1)))  # by their records
    return {"log_loss": scores["log_loss"],
            "brier": float(np.mean((proba[:, 1] - y) ** 2)),
            "ece": scores["ece"], "accuracy": scores["accuracy"]}
