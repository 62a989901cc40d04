"""What :func:`pipelines.report.evaluate.evaluate` computes per row and sums per partition.

An :class:`EvaluationJob` turns a prediction at the observed targets into one row of floats
per row (:meth:`EvaluationJob.rows`), sums a block of those into a fixed-length vector
(:meth:`EvaluationJob.reduce`: sums, counts and histograms, so partitions and branches add
up exactly whatever the partitioning or the prediction strategy) and turns the total into
the result (:meth:`EvaluationJob.result`). It runs where the prediction is made: on a
partition of a whole model, or on a branch's rows next to its shard
(:func:`ebf.dask.sharded.sharded_blocks`).

Regressors are scored from the model's own mixture ``F`` under every map of the job: the
model as it predicts (its :class:`basics.pit.PITMap` ``R``, if it has one) and, for a
recalibrated model, ``F`` itself too, so one pass gives the scores before and after
recalibration. Per map: NLPD (log-density by the change of variables), CRPS
(:func:`basics.metrics.crps_many`), the PIT ``R(F(y))`` (central-interval coverage at the
table's levels and at 5% steps, one-sided coverage ``P(u <= q)`` at 5% steps, and its
histogram in 1,000 bins, from which come the 20-bin histogram of the report and the PIT's
Kolmogorov-Smirnov distance from uniform, :func:`basics.metrics.pit_distance_binned`); for the
model as it predicts, the interval score of the central 90% interval
(:func:`basics.metrics.interval_score_rows`), its width and the absolute error of the median
(counted in fixed log-spaced width bins, merged into about ten groups of similar width for
the report).

Per branch of an EBF (``n_branches``; the rows' branches come with their block), a few sums of
the model as it predicts: rows, squared error, NLPD, CRPS and rows inside the central 90%
interval (regressors), rows, correct predictions and log loss (classifiers), for the report's
per-branch table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from basics.metrics import (
    ONE_SIDED_LEVELS,
    class_rows,
    crps_many,
    interval_score_rows,
    pit_distance_binned,
)
from basics.mixture import summarize
from basics.pit import PITMap, RecalibratedDistribution
from ebf.dask.sharded import part_output

__all__ = ["BRANCH_LEVEL", "INTERVAL_LEVEL", "ONE_SIDED", "PIT_BINS", "PIT_FINE_BINS",
           "RELIABILITY_LEVELS", "WIDTH_EDGES", "EvaluationJob", "before_after"]

#: Bins of the PIT histogram of the report, and of the one the job counts (each report bin
#: the sum of ``PIT_FINE_BINS / PIT_BINS`` of them): the PIT distance is within ``1 /
#: PIT_FINE_BINS`` of the exact one.
PIT_BINS = 20
PIT_FINE_BINS = 1000
#: Levels of the one-sided calibration table (5% steps).
ONE_SIDED: np.ndarray = np.array(ONE_SIDED_LEVELS)
#: Nominal coverage of the central interval whose interval score is reported.
INTERVAL_LEVEL = 0.9
#: Nominal coverages of the reliability diagram (5% steps).
RELIABILITY_LEVELS: np.ndarray = np.round(np.arange(1, 20) * 0.05, 2)
#: Edges of the interval-width bins: quarter powers of two (a width outside them falls in the
#: first or last bin), scale-free so that any target's units are resolved.
WIDTH_EDGES: np.ndarray = 2.0 ** (np.arange(-120, 121) / 4.0)
_WIDTH_GROUPS = 10
#: Nominal coverage of the central interval whose per-branch coverage is reported.
BRANCH_LEVEL = 0.9
_SUMMARY_LEVELS = np.array([0.05, 0.5, 0.95])


#: Score columns per map in :meth:`EvaluationJob.rows`.
_PER_ROW = 6


def _inside(u: np.ndarray, levels: np.ndarray) -> np.ndarray:
    lower, upper = (1.0 - levels) / 2.0, (1.0 + levels) / 2.0
    return (lower[None, :] <= u[:, None]) & (u[:, None] <= upper[None, :])


class EvaluationJob:
    """Per-row scores, their sums and the result of :func:`pipelines.report.evaluate.evaluate`.

    Parameters
    ----------
    levels : ndarray
        Nominal coverages of the calibration table.
    classes : ndarray or None
        ``classes_`` of a classifier; None for a regressor.
    pit_map : basics.pit.PITMap, optional
        The regressor's recalibration map: scored as predicted, and without it.
    quantiles : ndarray, optional
        Also predict: every row of :meth:`rows` starts with the prediction columns
        (:attr:`predicted` of them: a regressor's ``mean, std`` and these quantiles, as the
        model predicts them; a classifier's probabilities), the numbers
        :func:`pipelines.predict.predict_to_parquet` writes, from the same mixture as the
        scores. None: scores only.

    Classifiers: ``[correct, log loss, label never seen]`` per row from the class
    probabilities (clipped to ``[eps, 1 - eps]``, as scikit-learn does). A row whose target
    is missing is predicted, not scored.
    """

    def __init__(self, levels: np.ndarray, classes: np.ndarray | None,
                 pit_map: PITMap | None = None, quantiles: np.ndarray | None = None,
                 n_branches: int = 0) -> None:
        self.levels = np.asarray(levels, dtype=np.float64)
        self.classes = classes
        self.n_branches = int(n_branches)
        self.maps: list[PITMap | None] = [None] if pit_map is None else [pit_map, None]
        self.quantiles = None if quantiles is None else np.atleast_1d(
            np.asarray(quantiles, dtype=np.float64))

    @property
    def predicted(self) -> int:
        """How many leading columns of :meth:`rows` are predictions (0 without
        ``quantiles``)."""
        if self.quantiles is None:
            return 0
        return len(self.classes) if self.classes is not None else 2 + self.quantiles.size

    @property
    def _scores(self) -> int:
        """Score columns of :meth:`rows` after the predictions (the first: target known)."""
        return 4 if self.classes is not None else 2 + _PER_ROW * len(self.maps)

    # ------------------------------------------------------------------ per row

    def rows(self, output: Any, y: Any) -> np.ndarray:
        """One row of floats per row: the :attr:`predicted` prediction columns, then
        ``[target known (1/0), scores]``: regressors ``[squared error, then per map: -log p,
        CRPS, PIT, 90% width, |error of the median|, 90% interval score]``, classifiers as the
        class says. The scores of a row without a target are NaN."""
        y = np.asarray(y)
        known = ~pd.isna(y)
        out = np.full((y.shape[0], self.predicted + self._scores), np.nan)
        out[:, self.predicted] = known
        if self.classes is not None:
            proba = np.asarray(output, dtype=np.float64)
            out[:, :self.predicted] = proba[:, :self.predicted]
            if known.any():
                out[known, self.predicted + 1:] = np.column_stack(
                    class_rows(proba[known], self.classes, y[known]))
            return out
        base = output.base if isinstance(output, RecalibratedDistribution) else output
        every = bool(known.all())
        scored = base if every else base[known]
        k = 0 if self.quantiles is None else self.quantiles.size
        asked = _SUMMARY_LEVELS if not k else np.concatenate([self.quantiles, _SUMMARY_LEVELS])
        # the 90% interval and the median as predicted, and the prediction's quantiles, in
        # one solve, each level once (quantile solves are costly: the default quantiles are
        # the summary's own levels; the width against error of the model's own mixture is
        # not redone for a recalibrated one). A level's solve does not depend on the others.
        first = self.maps[0]
        distinct, where = np.unique(asked, return_inverse=True)
        mean, std, q = summarize(base if k else scored,
                                 distinct if first is None else first.inverse(distinct))
        q = q[:, where]
        if k:
            out[:, 0], out[:, 1], out[:, 2:2 + k] = mean, std, q[:, :k]
            if not every:
                mean, q = mean[known], q[known]
        if not known.any():
            return out
        y = y[known].astype(np.float64)
        f = np.clip(scored.cdf(y), 0.0, 1.0)
        logpdf = scored.logpdf(y)
        crps = crps_many(scored, y, self.maps)
        width, abs_err = q[:, k + 2] - q[:, k], np.abs(y - q[:, k + 1])
        score = interval_score_rows(y, q[:, k], q[:, k + 2], INTERVAL_LEVEL)
        cols = [(y - mean) ** 2]
        for j, r in enumerate(self.maps):
            cols += [-logpdf if r is None else -(logpdf + r.log_slope(f)), crps[:, j],
                     f if r is None else r(f)]
            cols += [width, abs_err, score] if j == 0 else [np.full(y.shape, np.nan)] * 3
        out[known, self.predicted + 1:] = np.column_stack(cols)
        return out

    def row_scores(self, block: np.ndarray | None) -> np.ndarray:
        """The main per-row score of a block of :meth:`rows`, in row order, for the rows with
        a target: ``-log p(y)`` of the model as it predicts (regressors; its mean is the
        result's ``nlpd``) or the log loss (classifiers; ``log_loss``)."""
        if block is None:
            return np.empty(0)
        known = block[:, self.predicted] == 1.0
        return block[known, self.predicted + 2]  # after [target known, squared error | correct]

    def part_rows(self, part: Any, A: np.ndarray, y: Any) -> np.ndarray:
        """:meth:`rows` of one part's (an EBF branch's) output on its rows ``A``."""
        return self.rows(part_output(part, A), y)

    # ------------------------------------------------------------------ sums

    @property
    def _per_map(self) -> int:
        return 3 + self.levels.size + RELIABILITY_LEVELS.size + ONE_SIDED.size + \
            PIT_FINE_BINS + 3 * (WIDTH_EDGES.size + 1)

    @property
    def _totals(self) -> int:
        """Length of the sums over all rows, before the per-branch ones."""
        if self.classes is not None:
            return 5
        return 3 + len(self.maps) * self._per_map

    @property
    def _per_branch(self) -> int:
        return 3 if self.classes is not None else 5

    @property
    def size(self) -> int:
        """Length of :meth:`reduce`'s vector: ``[scored rows, rows without a target]``, then
        the sums, then ``n_branches`` rows of per-branch sums."""
        return self._totals + self.n_branches * self._per_branch

    def reduce(self, block: np.ndarray | None, branch: np.ndarray | None = None) -> np.ndarray:
        """Row counts, sums and histograms of a block of :meth:`rows` (None: no rows), and
        per branch if the job has branches and ``branch`` gives every row's."""
        out = np.zeros(self.size)
        if block is None or block.shape[0] == 0:
            return out
        known = block[:, self.predicted] == 1.0
        out[0], out[1] = known.sum(), (~known).sum()
        block = block[known, self.predicted + 1:]
        if self.n_branches and branch is not None:
            out[self._totals:] = self._branch_sums(block, np.asarray(branch)[known]).ravel()
        if self.classes is not None:
            out[2:self._totals] = block.sum(axis=0)
            return out
        out[2] = block[:, 0].sum()
        at = 3
        for j in range(len(self.maps)):
            nll, crps, u, width, err, score = block[:, 1 + _PER_ROW * j: 1 + _PER_ROW * (j + 1)].T
            pit_bin = np.minimum((u * PIT_FINE_BINS).astype(np.int64), PIT_FINE_BINS - 1)
            seen = ~np.isnan(width)
            width, err = width[seen], err[seen]
            width_bin = np.searchsorted(WIDTH_EDGES, width, side="right")
            nb = WIDTH_EDGES.size + 1
            parts = [
                [nll.sum(), crps.sum(), score[seen].sum()],
                _inside(u, self.levels).sum(axis=0),
                _inside(u, RELIABILITY_LEVELS).sum(axis=0),
                (u[:, None] <= ONE_SIDED[None, :]).sum(axis=0),
                np.bincount(pit_bin, minlength=PIT_FINE_BINS),
                np.bincount(width_bin, minlength=nb),
                np.bincount(width_bin, weights=width, minlength=nb),
                np.bincount(width_bin, weights=err, minlength=nb),
            ]
            vec = np.concatenate([np.asarray(p, dtype=np.float64) for p in parts])
            out[at:at + vec.size] = vec
            at += vec.size
        return out

    def _branch_sums(self, scored: np.ndarray, branch: np.ndarray) -> np.ndarray:
        """``(n_branches, k)`` sums of the scored rows by branch: ``[rows, correct, log
        loss]`` or ``[rows, squared error, -log p, CRPS, inside the BRANCH_LEVEL interval]`` of
        the model as it predicts."""
        if self.classes is not None:
            cols = [scored[:, 0], scored[:, 1]]
        else:
            inside = _inside(scored[:, 3], np.array([BRANCH_LEVEL]))[:, 0]
            cols = [scored[:, 0], scored[:, 1], scored[:, 2], inside]
        branch = branch.astype(np.int64)
        return np.column_stack([np.bincount(branch, minlength=self.n_branches)] + [
            np.bincount(branch, weights=np.asarray(c, dtype=np.float64),
                        minlength=self.n_branches) for c in cols])

    # ------------------------------------------------------------------ result

    def result(self, sums: np.ndarray) -> dict[str, Any]:
        """The scores from the summed vector of :meth:`reduce` (keys of
        :func:`pipelines.report.evaluate.evaluate` after ``n`` and ``n_missing_target``; with
        branches, ``branches``: a DataFrame of :meth:`branch_table`)."""
        per_branch = {} if not self.n_branches else {"branches": self.branch_table(
            sums[self._totals:].reshape(self.n_branches, self._per_branch))}
        n, sums = sums[0], sums[2:self._totals]
        if self.classes is not None:
            return {"accuracy": float(sums[0] / n), "log_loss": float(sums[1] / n),
                    "n_unseen_labels": int(sums[2]), "classes": list(self.classes.tolist()),
                    **per_branch}
        rmse = float(np.sqrt(sums[0] / n))
        scored = [self._map_result(sums[1 + j * self._per_map: 1 + (j + 1) * self._per_map],
                                   n, rmse) for j in range(len(self.maps))]
        out = {**scored[0], "calibrated": self.maps[0] is not None}
        if len(scored) > 1:
            out["uncalibrated"] = scored[1]
        return {**out, **per_branch}

    def branch_table(self, sums: np.ndarray) -> pd.DataFrame:
        """One row per branch from its ``(n_branches, k)`` sums: ``branch``, ``n`` (rows
        scored), then ``accuracy``, ``log_loss`` (classifiers) or ``rmse``, ``nlpd``,
        ``crps``, ``coverage_90`` (the fraction of rows inside their central 90% interval;
        regressors, the model as it predicts). A branch no row reached has ``n`` 0 and NaN
        scores."""
        n = sums[:, 0]
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = sums[:, 1:] / n[:, None]
        table = {"branch": np.arange(sums.shape[0]), "n": n.astype(np.int64)}
        if self.classes is not None:
            return pd.DataFrame({**table, "accuracy": mean[:, 0], "log_loss": mean[:, 1]})
        return pd.DataFrame({**table, "rmse": np.sqrt(mean[:, 0]), "nlpd": mean[:, 1],
                             "crps": mean[:, 2], "coverage_90": mean[:, 3]})

    def _map_result(self, v: np.ndarray, n: int, rmse: float) -> dict[str, Any]:
        k, r, o = self.levels.size, RELIABILITY_LEVELS.size, ONE_SIDED.size
        observed = v[3:3 + k] / n
        reliability = v[3 + k:3 + k + r] / n
        below = v[3 + k + r:3 + k + r + o] / n
        at = 3 + k + r + o
        pit = v[at:at + PIT_FINE_BINS]
        nb = WIDTH_EDGES.size + 1
        counts, widths, errors = v[at + PIT_FINE_BINS:].reshape(3, nb)
        out = {
            "rmse": rmse,
            "nlpd": float(v[0] / n),
            "crps": float(v[1] / n),
            "calibration": _table(self.levels, observed),
            "coverage": {float(z): float(o) for z, o in zip(self.levels, observed, strict=True)},
            "max_calibration_gap": float(np.max(np.abs(observed - self.levels))),
            "intervals": "mixture",
            "reliability": _table(RELIABILITY_LEVELS, reliability),
            "one_sided": _table(ONE_SIDED, below),
            "max_one_sided_gap": float(np.max(np.abs(below - ONE_SIDED))),
            "pit_distance": pit_distance_binned(pit),
            "pit_histogram": [int(c) for c in pit.reshape(PIT_BINS, -1).sum(axis=1)],
        }
        if counts.sum():  # the model as predicted only
            out["interval_score_90"] = float(v[2] / counts.sum())
            out["width_error"] = _width_groups(counts, widths, errors)
        return out


def _table(levels: np.ndarray, observed: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"level": levels, "observed": observed,
                         "observed_minus_nominal": observed - levels})


def _width_groups(counts: np.ndarray, widths: np.ndarray, errors: np.ndarray,
                  groups: int = _WIDTH_GROUPS) -> pd.DataFrame:
    """Adjacent width bins merged into about ``groups`` groups of similar row counts."""
    total = counts.sum()
    rows: list[Sequence[float]] = []
    acc = np.zeros(3)
    for c, w, e in zip(counts, widths, errors, strict=True):
        acc += (c, w, e)
        if acc[0] and acc[0] >= total / groups:
            rows.append(acc.copy())
            acc[:] = 0
    if acc[0]:
        rows.append(acc)
    data = np.array(rows).reshape(-1, 3)
    return pd.DataFrame({"n": data[:, 0].astype(np.int64),
                         "mean_width": data[:, 1] / np.maximum(data[:, 0], 1),
                         "mean_abs_error": data[:, 2] / np.maximum(data[:, 0], 1)})


#: What the scores of a model's own mixture share with the model's result (the rows scored).
_SHARED = ("task", "target", "n", "n_missing_target")


def before_after(results: Mapping[str, Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Results with every recalibrated model shown twice: ``"<name> recalibrated"`` and
    ``"<name> uncalibrated"`` (its ``uncalibrated`` scores, with the rows scored and
    ``calibrated=False``), for tables and figures.

    Examples
    --------
    >>> list(before_after({"EBF": {"uncalibrated": {}}, "SSF": {}}))
    ['EBF recalibrated', 'EBF uncalibrated', 'SSF']
    """
    out: dict[str, Mapping[str, Any]] = {}
    for name, result in results.items():
        if "uncalibrated" in result:
            out[f"{name} recalibrated"] = result
            out[f"{name} uncalibrated"] = {
                **{k: result[k] for k in _SHARED if k in result},
                **result["uncalibrated"], "calibrated": False}
        else:
            out[name] = result
    return out
