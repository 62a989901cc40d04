"""One record per score: what every scorer of the project reads (the evaluation job, the
report, ``ebf registry compare``, the retrain gate, permutation importance, MLflow logging and
the benchmarks).

A :class:`Score` names a per-row function of the scored rows (:class:`RegressionRows` or
:class:`ClassRows`: the targets and the prediction's numbers at them), how the per-row values
become partial sums (:data:`SUM`, :data:`CENTRAL`, :data:`BELOW`, :data:`HISTOGRAM`,
:data:`CONFIDENCE_BINS`: sums,
counts and histograms, so the sums of partitions and branches add up exactly whatever the
partitioning), the finishing step from the summed vector to the value, which direction is
better (the retrain gate), its unit and format. The plain metric functions it calls live in
:mod:`basics.metrics`; this module is the registry of scorers over them, as scikit-learn's
``metrics/_scorer.py`` is.

Adding a score is adding a record to :data:`SCORES`: every scorer lists the records of its
task. A record with a ``tolerance`` is gated by default by ``ebf retrain``; the tolerances are
part of a retraining run's key, so a new score comes without one.

Examples
--------
>>> import numpy as np
>>> rows = RegressionRows(y=np.array([0.0, 2.0]), point=np.zeros(2), logpdf=None,
...                       crps=np.array([0.5, 1.5]), pit=np.array([0.5, 0.99]),
...                       quantiles=None)
>>> value("crps", rows), value("rmse", rows)
(1.0, 1.4142135623730951)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from .metrics import (
    CALIBRATION_LEVELS,
    ECE_BINS,
    ONE_SIDED_LEVELS,
    confidence_bins,
    ece_binned,
    interval_score_rows,
    pit_distance_binned,
)
from .tasks import CLASSIFICATION, REGRESSION

__all__ = ["BELOW", "CENTRAL", "CONFIDENCE_BINS", "HISTOGRAM", "PIT_FINE_BINS", "SCORES", "SUM",
           "ClassRows", "Combine", "Layout", "RegressionRows", "Score", "central_inside", "finish",
           "gate_check", "partial_sums", "pit_of", "quantile_levels", "scores_of",
           "signed_confidence", "value", "values"]

#: Bins of the PIT histogram the scores count: the PIT distance is within ``1 /
#: PIT_FINE_BINS`` of the exact one (:func:`basics.metrics.pit_distance`).
PIT_FINE_BINS = 1000
_ONE_SIDED = np.asarray(ONE_SIDED_LEVELS)


class RegressionRows(NamedTuple):
    """A regressor's scored rows: what every regression score's per-row function reads.

    Attributes
    ----------
    y : ndarray of shape (n_rows,)
        Targets.
    point : ndarray of shape (n_rows,)
        The point prediction (the predictive mean).
    logpdf : ndarray of shape (n_rows,) or None
        ``log p(y)``; None for a prediction without a density.
    crps : ndarray of shape (n_rows,)
        CRPS of every row (:func:`basics.metrics.crps_rows`).
    pit : ndarray of shape (n_rows,)
        ``F(y)`` in [0, 1].
    quantiles : mapping of float to ndarray, or None
        The predictive quantiles at (at least) :func:`quantile_levels` of the scores asked,
        level to ``(n_rows,)``; None: not solved (a score that needs them is left out).
    rps : ndarray of shape (n_rows,) or None, default=None
        The ranked probability score of every row (:func:`basics.discrete.rps_many`), for an
        integer-valued target; None: not one (the :attr:`Score.discrete` records are left
        out).
    """

    y: np.ndarray
    point: np.ndarray
    logpdf: np.ndarray | None
    crps: np.ndarray
    pit: np.ndarray
    quantiles: Mapping[float, np.ndarray] | None
    rps: np.ndarray | None = None


class ClassRows(NamedTuple):
    """A classifier's scored rows (:func:`basics.metrics.class_rows`).

    Attributes
    ----------
    correct, log_loss : ndarray of shape (n_rows,)
        As :func:`basics.metrics.class_rows` gives them.
    confidence : ndarray of shape (n_rows,) or None
        The largest class probability of every row; None: not given (the ECE is left out).
    """

    correct: np.ndarray
    log_loss: np.ndarray
    confidence: np.ndarray | None = None


class Combine(NamedTuple):
    """How a score's per-row values become partial sums that add up over partitions.

    ``width(levels)`` is the length of the sums for the calibration ``levels``; ``add(values,
    levels)`` the partial sums of a block of per-row values.
    """

    name: str
    width: Callable[[np.ndarray], int]
    add: Callable[[np.ndarray, np.ndarray], np.ndarray]


def central_inside(u: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """``(n_rows, n_levels)``: whether each PIT value lies in the central ``z`` interval,
    ``(1 - z) / 2 <= u <= (1 + z) / 2`` (``y`` inside ``[F^-1((1 - z) / 2), F^-1((1 + z) /
    2)]`` for a continuous, strictly increasing ``F``: no quantile search)."""
    levels = np.asarray(levels, dtype=np.float64)
    lower, upper = (1.0 - levels) / 2.0, (1.0 + levels) / 2.0
    return (lower[None, :] <= u[:, None]) & (u[:, None] <= upper[None, :])


def _sum(values: np.ndarray, levels: np.ndarray) -> np.ndarray:
    return np.array([values.sum()])


def _central(u: np.ndarray, levels: np.ndarray) -> np.ndarray:
    return central_inside(u, levels).sum(axis=0).astype(np.float64)


def _below(u: np.ndarray, levels: np.ndarray) -> np.ndarray:
    return (u[:, None] <= _ONE_SIDED[None, :]).sum(axis=0).astype(np.float64)


def _histogram(u: np.ndarray, levels: np.ndarray) -> np.ndarray:
    bins = np.minimum((u * PIT_FINE_BINS).astype(np.int64), PIT_FINE_BINS - 1)
    return np.bincount(bins, minlength=PIT_FINE_BINS).astype(np.float64)


#: The sum of the per-row values.
SUM = Combine("sum", lambda levels: 1, _sum)
#: Per calibration level ``z``, the rows whose PIT lies in the central ``z`` interval.
CENTRAL = Combine("central", lambda levels: int(np.size(levels)), _central)
#: Per level ``q`` of :data:`basics.metrics.ONE_SIDED_LEVELS`, the rows with PIT ``<= q``.
BELOW = Combine("below", lambda levels: _ONE_SIDED.size, _below)
#: The PIT's histogram in :data:`PIT_FINE_BINS` equal bins of [0, 1].
HISTOGRAM = Combine("histogram", lambda levels: PIT_FINE_BINS, _histogram)


def _confidence_bins(signed: np.ndarray, levels: np.ndarray) -> np.ndarray:
    return confidence_bins(np.abs(signed), ~np.signbit(signed))


#: Per bin of the top-class probability (:data:`basics.metrics.ECE_BINS` equal bins), the rows,
#: the correct predictions and the summed probability (:func:`basics.metrics.confidence_bins`),
#: from per-row values that carry both: the top-class probability, negated when the prediction
#: is wrong (:func:`signed_confidence`).
CONFIDENCE_BINS = Combine("confidence_bins", lambda levels: 3 * ECE_BINS, _confidence_bins)


@dataclass(frozen=True)
class Score:
    """One score: how it is computed, combined, finished, compared and shown.

    Attributes
    ----------
    name : str
        Its key in every result (``ebf evaluate --json``, the registry's metrics, MLflow).
    task : {"regression", "classification"}
    label : str
        Its name in tables.
    unit : {"target", "nats", "fraction"}
        The target's units, nats or a fraction of rows.
    fmt : str
        Its format spec in tables.
    better : {"lower", "higher"}
        Which direction is better (the retrain gate).
    row : callable
        ``row(rows) -> ndarray (n_rows,)``: the per-row values; None when the prediction
        cannot give them (no density).
    combine : Combine
        How the per-row values become partial sums.
    finish : callable
        ``finish(sums, n, levels) -> float``: the value from the summed partial sums of
        ``n`` rows.
    quantiles : tuple of float
        Predictive quantile levels ``row`` reads from ``rows.quantiles``.
    tolerance : float or None
        The retrain gate's default tolerance (None: not gated unless asked).
    relative : bool
        Whether the tolerance is relative to the champion's value.
    discrete : bool
        Scored for an integer-valued target only (:func:`basics.discrete.integer_values`):
        :func:`scores_of` lists it with ``integer=True``.
    """

    name: str
    task: str
    label: str
    unit: str
    fmt: str
    better: str
    row: Callable[[Any], np.ndarray | None]
    combine: Combine
    finish: Callable[[np.ndarray, float, np.ndarray], float]
    quantiles: tuple[float, ...] = ()
    tolerance: float | None = None
    relative: bool = False
    discrete: bool = False


def _mean(sums: np.ndarray, n: float, levels: np.ndarray) -> float:
    return float(sums[0] / n)


def _root_mean(sums: np.ndarray, n: float, levels: np.ndarray) -> float:
    return float(np.sqrt(sums[0] / n))


def _max_central_gap(sums: np.ndarray, n: float, levels: np.ndarray) -> float:
    return float(np.max(np.abs(sums / n - levels)))


def _max_below_gap(sums: np.ndarray, n: float, levels: np.ndarray) -> float:
    return float(np.max(np.abs(sums / n - _ONE_SIDED)))


def _pit_distance(sums: np.ndarray, n: float, levels: np.ndarray) -> float:
    return pit_distance_binned(sums)


def _interval_score(level: float) -> Callable[[RegressionRows], np.ndarray]:
    lo, hi = round((1.0 - level) / 2.0, 6), round((1.0 + level) / 2.0, 6)

    def rows_score(rows: RegressionRows) -> np.ndarray:
        return interval_score_rows(rows.y, rows.quantiles[lo], rows.quantiles[hi], level)

    return rows_score


def pit_of(rows: RegressionRows) -> np.ndarray:
    """The PIT of every row: the per-row values of the coverage and PIT records (a scorer
    that keeps per-row values keeps it once for all of them)."""
    return rows.pit


def _negative_log(rows: RegressionRows) -> np.ndarray | None:
    return None if rows.logpdf is None else -rows.logpdf


def signed_confidence(rows: ClassRows) -> np.ndarray | None:
    """The per-row values of the ECE record: the top-class probability, negated (a set sign
    bit, so exact, even for 0) when the most probable class is not the label; None without
    ``rows.confidence``."""
    if rows.confidence is None:
        return None
    return np.where(rows.correct, 1.0, -1.0) * np.asarray(rows.confidence, dtype=np.float64)


def _ece(sums: np.ndarray, n: float, levels: np.ndarray) -> float:
    return ece_binned(sums)


_RECORDS = [
    Score("rmse", REGRESSION, "RMSE", "target", ".4f", "lower",
          lambda r: (r.y - r.point) ** 2, SUM, _root_mean, tolerance=0.01, relative=True),
    Score("nlpd", REGRESSION, "NLPD", "nats", ".4f", "lower", _negative_log, SUM, _mean,
          tolerance=0.01),
    Score("crps", REGRESSION, "CRPS", "target", ".4f", "lower", lambda r: r.crps, SUM, _mean),
    Score("rps", REGRESSION, "RPS", "target", ".4f", "lower", lambda r: r.rps, SUM, _mean,
          discrete=True),
    Score("interval_score_90", REGRESSION, "90% interval score", "target", ".4g", "lower",
          _interval_score(0.9), SUM, _mean, quantiles=(0.05, 0.95)),
    Score("interval_score_50", REGRESSION, "50% interval score", "target", ".4g", "lower",
          _interval_score(0.5), SUM, _mean, quantiles=(0.25, 0.75)),
    Score("max_calibration_gap", REGRESSION, "max |calibration gap|", "fraction", ".3f", "lower",
          pit_of, CENTRAL, _max_central_gap, tolerance=0.02),
    Score("max_one_sided_gap", REGRESSION, "max |one-sided gap|", "fraction", ".3f", "lower",
          pit_of, BELOW, _max_below_gap, tolerance=0.02),
    Score("pit_distance", REGRESSION, "PIT distance", "fraction", ".3f", "lower",
          pit_of, HISTOGRAM, _pit_distance),
    Score("log_loss", CLASSIFICATION, "log loss", "nats", ".4f", "lower",
          lambda r: r.log_loss, SUM, _mean, tolerance=0.01),
    Score("accuracy", CLASSIFICATION, "accuracy", "fraction", ".4f", "higher",
          lambda r: r.correct.astype(np.float64), SUM, _mean, tolerance=0.005),
    Score("ece", CLASSIFICATION, "ECE", "fraction", ".4f", "lower", signed_confidence,
          CONFIDENCE_BINS, _ece),
]

#: Every score, by name, in the order tables show them.
SCORES: dict[str, Score] = {s.name: s for s in _RECORDS}


def scores_of(task: str, integer: bool = False) -> list[Score]:
    """The scores of ``task`` (``"regression"`` or ``"classification"``), in order; with
    ``integer``, for an integer-valued target, also the :attr:`Score.discrete` ones (the
    ranked probability score).

    Examples
    --------
    >>> [s.name for s in scores_of("classification")]
    ['log_loss', 'accuracy', 'ece']
    >>> [s.name for s in scores_of("regression", integer=True)][:4]
    ['rmse', 'nlpd', 'crps', 'rps']
    """
    if task not in (REGRESSION, CLASSIFICATION):
        raise ValueError(f"task must be {REGRESSION!r} or {CLASSIFICATION!r}; got {task!r}.")
    return [s for s in SCORES.values() if s.task == task and (integer or not s.discrete)]


def quantile_levels(scores: Iterable[Score]) -> tuple[float, ...]:
    """The predictive quantile levels ``scores`` read, sorted, each once."""
    return tuple(sorted({q for s in scores for q in s.quantiles}))


def partial_sums(score: Score, values: np.ndarray, levels: Any = CALIBRATION_LEVELS
                 ) -> np.ndarray:
    """The partial sums of a block of ``score``'s per-row values (what partitions add up)."""
    return np.asarray(score.combine.add(np.asarray(values, dtype=np.float64),
                                        np.asarray(levels, dtype=np.float64)),
                      dtype=np.float64)


def finish(score: Score, sums: np.ndarray, n: float, levels: Any = CALIBRATION_LEVELS
           ) -> float:
    """``score``'s value from its summed partial sums over ``n`` rows."""
    return score.finish(np.asarray(sums, dtype=np.float64), float(n),
                        np.asarray(levels, dtype=np.float64))


def value(name: str, rows: RegressionRows | ClassRows, levels: Any = CALIBRATION_LEVELS
          ) -> float | None:
    """The score ``name`` of rows held in this process (None: the rows cannot give it)."""
    score = SCORES[name]
    per_row = score.row(rows)
    if per_row is None:
        return None
    per_row = np.asarray(per_row, dtype=np.float64)
    return finish(score, partial_sums(score, per_row, levels), per_row.shape[0], levels)


def values(rows: RegressionRows | ClassRows, levels: Any = CALIBRATION_LEVELS
           ) -> dict[str, float | None]:
    """Every score of the rows' task, by name (None where the rows cannot give it: NLPD
    without a density, a quantile score without ``rows.quantiles``); the RPS too where the
    rows have it (an integer-valued target)."""
    task = CLASSIFICATION if isinstance(rows, ClassRows) else REGRESSION
    integer = task == REGRESSION and rows.rps is not None
    out: dict[str, float | None] = {}
    for s in scores_of(task, integer):
        if s.quantiles and rows.quantiles is None:
            out[s.name] = None
            continue
        out[s.name] = value(s.name, rows, levels)
    return out


def gate_check(name: str, champion: float, challenger: float, tolerance: float
               ) -> tuple[float, bool]:
    """The limit the challenger's ``name`` score must stay within, and whether it does:
    the champion's value worsened by ``tolerance`` in the record's direction (relative to
    the champion's value if the record says so).

    Examples
    --------
    >>> gate_check("accuracy", 0.9, 0.896, 0.005)
    (0.895, True)
    >>> gate_check("rmse", 10.0, 10.2, 0.01)
    (10.1, False)
    """
    score = SCORES[name]
    step = abs(champion) * tolerance if score.relative else tolerance
    if score.better == "higher":
        limit = champion - step
        return limit, bool(challenger >= limit)
    limit = champion * (1 + tolerance) if score.relative else champion + step
    return limit, bool(challenger <= limit)


class Layout:
    """Named slices of a flat vector of floats: a column layout computed from names and
    widths, so no reader keeps offsets by hand.

    Examples
    --------
    >>> lay = Layout([("n", 1), ("pit", 3)])
    >>> lay.size, lay["pit"]
    (4, slice(1, 4, None))
    >>> lay.pack({"n": [2.0], "pit": [1.0, 0.0, 1.0]}).tolist()
    [2.0, 1.0, 0.0, 1.0]
    """

    def __init__(self, fields: Sequence[tuple[str, int]]) -> None:
        self._slices: dict[str, slice] = {}
        at = 0
        for name, width in fields:
            if name in self._slices:
                raise ValueError(f"the layout names {name!r} twice.")
            self._slices[name] = slice(at, at + int(width))
            at += int(width)
        self.size = at

    def __getitem__(self, name: str) -> slice:
        return self._slices[name]

    def __contains__(self, name: object) -> bool:
        return name in self._slices

    @property
    def names(self) -> list[str]:
        """The fields, in order."""
        return list(self._slices)

    def index(self, name: str) -> int:
        """The position of a field of width one."""
        return self._slices[name].start

    def pack(self, parts: Mapping[str, Any], out: np.ndarray | None = None) -> np.ndarray:
        """A vector of :attr:`size` with every named part in its slice (zeros elsewhere)."""
        out = np.zeros(self.size) if out is None else out
        for name, part in parts.items():
            out[self._slices[name]] = part
        return out

