"""The evaluation job: per-row scores, their sums per partition and the result, over the
score records of :mod:`basics.scores`.

An :class:`EvaluationJob` turns a prediction at the observed targets into one row of floats
per row (:meth:`EvaluationJob.rows`), sums a block of those into a fixed-length vector
(:meth:`EvaluationJob.reduce`: each score's partial sums as its record says, sums, counts and
histograms, so partitions and branches add up exactly whatever the partitioning or the
prediction strategy) and turns the total into the result (:meth:`EvaluationJob.result`). Both
the row block and the sums are laid out by name (:class:`basics.scores.Layout`), computed from
the records: a score added to :data:`basics.scores.SCORES` is computed, summed and reported
with no change here. It runs where the prediction is made: on a partition of a whole model,
or on a branch's rows next to its shard (:func:`ebf.dask.sharded.sharded_blocks`).

Regressors are scored from the model's own mixture ``F`` under every map of the job: the
model as it predicts (its :class:`basics.pit.PITMap` ``R``, if it has one) and, for a
recalibrated model, ``F`` itself too, so one pass gives the scores before and after
recalibration. One fused pass per row (:func:`basics.score_pass.score_mixture`) gives the
mean, the quantiles, ``F(y)``, ``log p(y)`` and the CRPS under every map; per map, the
records' rows (:class:`basics.scores.RegressionRows`): the log-density by the change of
variables, the CRPS (the numbers of :func:`basics.metrics.crps_many`), the PIT ``R(F(y))``;
the predictive quantiles the records ask for are solved for the model as it predicts only (a
score that needs them is reported for it alone). For an integer-valued target (``integer``,
decided once from the observed targets before the pass) the rows also hold the ranked
probability score under every map (:func:`basics.discrete.mixture_rps`), and the result says
the NLPD is not comparable there. Beside the scores, the job counts what the report draws:
central-interval coverage at 5% steps (the reliability diagram) and, for the model as it
predicts, the width of the central 90% interval against the absolute error of the median
(counted in fixed log-spaced width bins, merged into about ten groups of similar width for
the report); the calibration table, the one-sided table and the 20-bin PIT histogram come
from the sums of the gap and PIT-distance records.

Per branch of an EBF (``n_branches``; the rows' branches come with their block), a few sums of
the model as it predicts: rows, squared error, NLPD, CRPS and rows inside the central 90%
interval (regressors), rows, correct predictions and log loss (classifiers), for the report's
per-branch table.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from basics.discrete import mixture_rps
from basics.metrics import ONE_SIDED_LEVELS, class_rows
from basics.pit import PITMap, RecalibratedDistribution
from basics.score_pass import score_mixture
from basics.scores import (
    PIT_FINE_BINS,
    SCORES,
    ClassRows,
    Layout,
    RegressionRows,
    Score,
    central_inside,
    finish,
    partial_sums,
    pit_of,
    quantile_levels,
    scores_of,
)
from basics.tasks import CLASSIFICATION, REGRESSION
from basics.validation import MAX_ABS_TARGET
from ebf.dask.sharded import part_output

__all__ = ["BRANCH_LEVEL", "INTERVAL_LEVEL", "ONE_SIDED", "PIT_BINS", "PIT_FINE_BINS",
           "RELIABILITY_LEVELS", "WIDTH_EDGES", "EvaluationJob"]

#: Bins of the PIT histogram of the report (each the sum of ``PIT_FINE_BINS / PIT_BINS`` of
#: the bins the PIT-distance record counts).
PIT_BINS = 20
#: Levels of the one-sided calibration table (5% steps).
ONE_SIDED: np.ndarray = np.array(ONE_SIDED_LEVELS)
#: Nominal coverage of the central interval whose width the report sets against the error.
INTERVAL_LEVEL = 0.9
#: Nominal coverages of the reliability diagram (5% steps).
RELIABILITY_LEVELS: np.ndarray = np.round(np.arange(1, 20) * 0.05, 2)
#: Edges of the interval-width bins: quarter powers of two (a width outside them falls in the
#: first or last bin), scale-free so that any target's units are resolved.
WIDTH_EDGES: np.ndarray = 2.0 ** (np.arange(-120, 121) / 4.0)
_WIDTH_GROUPS = 10
#: Nominal coverage of the central interval whose per-branch coverage is reported.
BRANCH_LEVEL = 0.9
#: Quantile levels of the width-against-error counts: the central 90% interval and the median
#: (rounded, so that a record asking for the same level shares its solve).
_WIDTH_LEVELS = (round((1 - INTERVAL_LEVEL) / 2, 6), 0.5, round((1 + INTERVAL_LEVEL) / 2, 6))
#: Per-branch sums of the model as it predicts: the sums of these records' per-row values.
_BRANCH_SCORES = {REGRESSION: ("rmse", "nlpd", "crps"), CLASSIFICATION: ("accuracy", "log_loss")}


class EvaluationJob:
    """Per-row scores, their sums and the result of :func:`pipelines.report.evaluate.evaluate`.

    Parameters
    ----------
    levels : ndarray
        Nominal coverages of the calibration table.
    classes : ndarray or None
        ``classes_`` of a classifier; None for a regressor.
    pit_map : basics.pit.PITMap or basics.class_calibration.ClassCalibrationMap, optional
        The regressor's recalibration map: scored as predicted, and without it; or the
        classifier's class calibration map, applied to the probabilities :meth:`rows` is
        given (the model's own: ``predict_proba(X, recalibrated=False)``, or a branch's).
    quantiles : ndarray, optional
        Also predict: every row of :meth:`rows` starts with the prediction columns
        (:attr:`predicted` of them: a regressor's ``mean, std`` and these quantiles, as the
        model predicts them; a classifier's probabilities), the numbers
        :func:`pipelines.predict.predict_to_parquet` writes, from the same mixture as the
        scores. None: scores only.
    n_branches : int, default=0
        Branches of an EBF whose rows come with their branch: per-branch sums too.
    integer : bool, default=False
        The target is integer-valued (:func:`basics.discrete.integer_values` of the observed
        targets): a regressor is also scored by the ranked probability score of its
        predictive discretised to the integers (``rps``), and its result says that its NLPD
        (of a continuous density) is not comparable there (``nlpd_comparable``).

    Classifiers are scored from the class probabilities (clipped to ``[eps, 1 - eps]``, as
    scikit-learn does); a label never seen is counted. A row whose target is missing is
    predicted, not scored.
    """

    def __init__(self, levels: np.ndarray, classes: np.ndarray | None,
                 pit_map: PITMap | None = None, quantiles: np.ndarray | None = None,
                 n_branches: int = 0, integer: bool = False) -> None:
        self.levels = np.asarray(levels, dtype=np.float64)
        self.classes = classes
        self.n_branches = int(n_branches)
        self.class_map = pit_map if classes is not None else None
        self.maps: list[PITMap | None] = (
            [None] if pit_map is None or classes is not None else [pit_map, None])
        self.quantiles = None if quantiles is None else np.atleast_1d(
            np.asarray(quantiles, dtype=np.float64))
        self.task = REGRESSION if classes is None else CLASSIFICATION
        self.integer = bool(integer) and self.task == REGRESSION
        self.row_layout = Layout(self._row_fields())
        self.layout = Layout(self._sum_fields())

    # ------------------------------------------------------------------ layouts

    def _scores(self, j: int) -> list[Score]:
        """The records scored under map ``j`` (those that need quantiles: map 0 only)."""
        return [s for s in scores_of(self.task, self.integer) if j == 0 or not s.quantiles]

    @property
    def predicted(self) -> int:
        """How many leading columns of :meth:`rows` are predictions (0 without
        ``quantiles``)."""
        if self.quantiles is None:
            return 0
        return len(self.classes) if self.classes is not None else 2 + self.quantiles.size

    def _column(self, score: Score, j: int) -> str:
        """The column of :meth:`rows` that holds ``score``'s per-row values under map ``j``:
        the PIT records share the PIT's."""
        return f"pit@{j}" if score.row is pit_of else f"{score.name}@{j}"

    def _row_fields(self) -> list[tuple[str, int]]:
        fields = [("prediction", self.predicted), ("known", 1)]
        if self.classes is not None:
            return [*fields, *((f"{s.name}@0", 1) for s in self._scores(0)), ("unseen", 1)]
        fields.append(("beyond", 1))
        for j in range(len(self.maps)):
            fields += [(name, 1) for name in dict.fromkeys(
                self._column(s, j) for s in self._scores(j)) if name != f"pit@{j}"]
            fields.append((f"pit@{j}", 1))
        return [*fields, ("width", 1), ("abs_error", 1)]

    def _sum_fields(self) -> list[tuple[str, int]]:
        fields = [("n", 1), ("n_missing", 1)]
        if self.classes is not None:
            fields += [(f"{s.name}@0", s.combine.width(self.levels)) for s in self._scores(0)]
            fields.append(("unseen", 1))
            per_branch = 1 + len(_BRANCH_SCORES[CLASSIFICATION])
        else:
            for j in range(len(self.maps)):
                fields += [(f"{s.name}@{j}", s.combine.width(self.levels))
                           for s in self._scores(j)]
                fields.append((f"reliability@{j}", RELIABILITY_LEVELS.size))
            nb = WIDTH_EDGES.size + 1
            fields += [("width_rows", nb), ("width_sum", nb), ("error_sum", nb), ("beyond", 1)]
            per_branch = 2 + len(_BRANCH_SCORES[REGRESSION])
        return [*fields, ("branches", self.n_branches * per_branch)]

    @property
    def size(self) -> int:
        """Length of :meth:`reduce`'s vector."""
        return self.layout.size

    # ------------------------------------------------------------------ per row

    def rows(self, output: Any, y: Any) -> np.ndarray:
        """One row of floats per row, laid out by :attr:`row_layout`: the :attr:`predicted`
        prediction columns, whether the target is known (1/0), then every record's per-row
        value under every map (and the PIT, the 90% width and the median's absolute error).
        The scores of a row without a target are NaN."""
        y = np.asarray(y)
        known = ~pd.isna(y)
        lay = self.row_layout
        out = np.full((y.shape[0], lay.size), np.nan)
        out[:, lay.index("known")] = known
        if self.classes is not None:
            proba = np.asarray(output, dtype=np.float64)
            if self.class_map is not None:
                proba = self.class_map(proba)
            out[:, lay["prediction"]] = proba[:, :self.predicted]
            if known.any():
                correct, log_loss, unseen = class_rows(proba[known], self.classes, y[known])
                rows = ClassRows(correct, log_loss, proba[known].max(axis=1))
                for s in self._scores(0):
                    out[known, lay.index(f"{s.name}@0")] = s.row(rows)
                out[known, lay.index("unseen")] = unseen
            return out
        base = output.base if isinstance(output, RecalibratedDistribution) else output
        # a target beyond the bound a fit accepts is counted, not scored (its scores would
        # overflow): the result refuses the data (pipelines.scoring.tasks.scored_result)
        beyond = np.zeros(y.shape[0], dtype=bool)
        beyond[known] = np.abs(y[known].astype(np.float64)) > MAX_ABS_TARGET
        if beyond.any():
            known &= ~beyond
            out[:, lay.index("known")] = known
        out[:, lay.index("beyond")] = beyond
        every = bool(known.all())
        k = 0 if self.quantiles is None else self.quantiles.size
        if not k and not known.any():
            return out
        asked = np.array(sorted({*_WIDTH_LEVELS, *quantile_levels(self._scores(0))}))
        asked = asked if not k else np.concatenate([self.quantiles, asked])
        # the levels the records and the report ask of the model as predicted, and the
        # prediction's quantiles, in one solve, each level once (quantile solves are costly;
        # those of the model's own mixture are not redone for a recalibrated one). A level's
        # solve does not depend on the others.
        first = self.maps[0]
        distinct, where = np.unique(asked, return_inverse=True)
        targets = np.full(y.shape[0], np.nan)
        targets[known] = y[known].astype(np.float64)
        # one fused pass per row: summary, F(y), log p(y) and the CRPS under every map
        fused = score_mixture(base, targets, distinct if first is None else
                              first.inverse(distinct), self.maps)
        mean, q = fused.mean, fused.quantiles[:, where]
        if k:
            out[:, 0], out[:, 1], out[:, 2:2 + k] = mean, fused.std, q[:, :k]
        if not known.any():
            return out
        if not every:
            mean, q = mean[known], q[known]
        quantiles = {float(level): q[:, k + i] for i, level in enumerate(asked[k:])}
        y = targets[known]
        f = np.clip(fused.cdf[known], 0.0, 1.0)
        logpdf = fused.logpdf[known]
        crps = fused.crps[known]
        # a row too wide to sum over its integers is scored by its CRPS (basics.discrete)
        rps = mixture_rps(base if every else base[known], y, self.maps,
                          lambda rows: crps[rows]) if self.integer else None
        for j, r in enumerate(self.maps):
            rows = RegressionRows(
                y=y, point=mean, logpdf=logpdf if r is None else logpdf + r.log_slope(f),
                crps=crps[:, j], pit=f if r is None else r(f),
                quantiles=quantiles if j == 0 else None,
                rps=None if rps is None else rps[:, j])
            for s in self._scores(j):
                if s.row is not pit_of:
                    out[known, lay.index(self._column(s, j))] = s.row(rows)
            out[known, lay.index(f"pit@{j}")] = rows.pit
        lo, mid, hi = (quantiles[float(level)] for level in _WIDTH_LEVELS)
        out[known, lay.index("width")] = hi - lo
        out[known, lay.index("abs_error")] = np.abs(y - mid)
        return out

    def row_scores(self, block: np.ndarray | None) -> np.ndarray:
        """The main per-row score of a block of :meth:`rows`, in row order, for the rows with
        a target: ``-log p(y)`` of the model as it predicts (regressors; its mean is the
        result's ``nlpd``) or the log loss (classifiers; ``log_loss``)."""
        if block is None:
            return np.empty(0)
        known = block[:, self.row_layout.index("known")] == 1.0
        name = "nlpd@0" if self.classes is None else "log_loss@0"
        return block[known, self.row_layout.index(name)]

    def part_rows(self, part: Any, A: np.ndarray, y: Any) -> np.ndarray:
        """:meth:`rows` of one part's (an EBF branch's) output on its rows ``A``."""
        return self.rows(part_output(part, A), y)

    # ------------------------------------------------------------------ sums

    def reduce(self, block: np.ndarray | None, branch: np.ndarray | None = None) -> np.ndarray:
        """Row counts, the records' partial sums and the report's counts of a block of
        :meth:`rows` (None: no rows), laid out by :attr:`layout`; per branch too if the job
        has branches and ``branch`` gives every row's."""
        out = np.zeros(self.size)
        if block is None or block.shape[0] == 0:
            return out
        rl = self.row_layout
        known = block[:, rl.index("known")] == 1.0
        beyond = 0.0 if "beyond" not in rl else block[:, rl.index("beyond")].sum()
        block = block[known]

        def col(name: str) -> np.ndarray:
            return block[:, rl.index(name)]

        parts: dict[str, Any] = {"n": known.sum(), "n_missing": (~known).sum() - beyond}
        if self.classes is None:
            parts["beyond"] = beyond
        for j in range(len(self.maps) if self.classes is None else 1):
            for s in self._scores(j):
                parts[f"{s.name}@{j}"] = partial_sums(s, col(self._column(s, j)), self.levels)
            if self.classes is None:
                parts[f"reliability@{j}"] = central_inside(col(f"pit@{j}"),
                                                           RELIABILITY_LEVELS).sum(axis=0)
        if self.classes is not None:
            parts["unseen"] = col("unseen").sum()
        else:
            width, err = col("width"), col("abs_error")
            width_bin = np.searchsorted(WIDTH_EDGES, width, side="right")
            nb = WIDTH_EDGES.size + 1
            parts.update(width_rows=np.bincount(width_bin, minlength=nb),
                         width_sum=np.bincount(width_bin, weights=width, minlength=nb),
                         error_sum=np.bincount(width_bin, weights=err, minlength=nb))
        if self.n_branches and branch is not None:
            parts["branches"] = self._branch_sums(col, np.asarray(branch)[known]).ravel()
        return self.layout.pack(parts, out)

    def _branch_sums(self, col: Any, branch: np.ndarray) -> np.ndarray:
        """``(n_branches, k)`` sums of the scored rows by branch: rows, then the per-row
        values of :data:`_BRANCH_SCORES` (and, for regressors, the rows inside the
        BRANCH_LEVEL interval) of the model as it predicts."""
        cols = [col(f"{name}@0") for name in _BRANCH_SCORES[self.task]]
        if self.classes is None:
            cols.append(central_inside(col("pit@0"), np.array([BRANCH_LEVEL]))[:, 0])
        branch = branch.astype(np.int64)
        return np.column_stack([np.bincount(branch, minlength=self.n_branches)] + [
            np.bincount(branch, weights=np.asarray(c, dtype=np.float64),
                        minlength=self.n_branches) for c in cols])

    # ------------------------------------------------------------------ result

    def result(self, sums: np.ndarray) -> dict[str, Any]:
        """The scores from the summed vector of :meth:`reduce` (keys of
        :func:`pipelines.report.evaluate.evaluate` after ``n`` and ``n_missing_target``; with
        branches, ``branches``: a DataFrame of :meth:`branch_table`)."""
        lay = self.layout
        n = sums[lay.index("n")]
        per_branch = {} if not self.n_branches else {"branches": self.branch_table(
            sums[lay["branches"]].reshape(self.n_branches, -1))}
        if self.classes is not None:
            return {**{s.name: finish(s, sums[lay[f"{s.name}@0"]], n, self.levels)
                       for s in self._scores(0)},
                    "n_unseen_labels": int(sums[lay.index("unseen")]),
                    "classes": list(self.classes.tolist()), **per_branch}
        scored = [self._map_result(sums, j, n) for j in range(len(self.maps))]
        out = {**scored[0], "calibrated": self.maps[0] is not None,
               "integer_target": self.integer, "nlpd_comparable": not self.integer}
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
        table: dict[str, Any] = {"branch": np.arange(sums.shape[0]), "n": n.astype(np.int64)}
        names = _BRANCH_SCORES[self.task]
        with np.errstate(invalid="ignore", divide="ignore"):
            for i, name in enumerate(names):
                table[name] = np.array([finish(SCORES[name], sums[b, 1 + i: 2 + i], n[b])
                                        for b in range(sums.shape[0])], dtype=np.float64)
            if self.classes is None:
                table["coverage_90"] = sums[:, 1 + len(names)] / n
        return pd.DataFrame(table)

    def _map_result(self, sums: np.ndarray, j: int, n: float) -> dict[str, Any]:
        lay = self.layout
        scores = {s.name: finish(s, sums[lay[f"{s.name}@{j}"]], n, self.levels)
                  for s in self._scores(j)}
        observed = sums[lay[f"max_calibration_gap@{j}"]] / n
        below = sums[lay[f"max_one_sided_gap@{j}"]] / n
        pit = sums[lay[f"pit_distance@{j}"]]
        out = {
            **scores,
            "calibration": _table(self.levels, observed),
            "coverage": {float(z): float(o) for z, o in zip(self.levels, observed, strict=True)},
            "intervals": "mixture",
            "reliability": _table(RELIABILITY_LEVELS, sums[lay[f"reliability@{j}"]] / n),
            "one_sided": _table(ONE_SIDED, below),
            "pit_histogram": [int(c) for c in pit.reshape(PIT_BINS, -1).sum(axis=1)],
        }
        counts = sums[lay["width_rows"]]
        if j == 0 and counts.sum():  # the model as predicted only
            out["width_error"] = _width_groups(counts, sums[lay["width_sum"]],
                                               sums[lay["error_sum"]])
        return out


def _table(levels: np.ndarray, observed: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"level": levels, "observed": observed,
                         "observed_minus_nominal": observed - levels})


def _width_groups(counts: np.ndarray, widths: np.ndarray, errors: np.ndarray,
                  groups: int = _WIDTH_GROUPS) -> pd.DataFrame:
    """Adjacent width bins merged into about ``groups`` groups of similar row counts."""
    total = counts.sum()
    rows: list[np.ndarray] = []
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
