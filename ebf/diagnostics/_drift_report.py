"""The report of a drift check and the rule that decides it (:func:`ebf.trunk_drift`).

A :class:`DriftReport` holds what the check measured on a new window (every stored split's
eq. 11 probability, the branches' shares and errors, the replicated gain; optionally a
holdout-score test, :mod:`ebf.diagnostics.performance`) and the decision. The rule tests the
counted splits, and the holdout-score test when there is one, as one family at the
family-wise level ``threshold`` (:func:`basics.familywise.rejected`), then says ``"refit"``
or ``"update"`` and one line saying why, naming the test(s) that fired.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from basics.familywise import rejected
from basics.tasks import REGRESSION

from ._window import MIN_ROWS, json_value
from .performance import PerformanceDrift

__all__ = ["COUNTED", "SPLIT_COLUMNS", "TOO_FEW", "DriftReport", "drift_summary", "gain_text",
           "split_name", "with_performance"]

#: ``status`` of a split with window rows enough to test, and of one without.
COUNTED, TOO_FEW = "counted", "too few rows"


@dataclass
class DriftReport:
    """Result of :func:`ebf.trunk_drift`.

    Attributes
    ----------
    splits : DataFrame
        One row per internal node of the stored trunk, level by level: ``path`` (``""``
        the root, then ``L`` / ``R`` moves, as :func:`ebf.diagnostics._stability.trunk_posterior`),
        ``feature`` (name), ``threshold`` (stored, raw units), ``n_window`` (window rows
        at the node), ``probability`` (eq. 11 that the stored split keeps its variable;
        NaN with too few rows), ``status`` (``"counted"`` or ``"too few rows"``),
        ``refit_feature`` / ``refit_threshold`` (the trunk refit on the window at the same
        path; None / NaN where it does not split that path) and ``same_feature``.
    branches : DataFrame
        One row per branch (trunk leaf): ``branch``, ``n_fit``, ``share_fit``, ``n``
        (window rows), ``share_window``, ``share_change`` (window minus fit), then the
        window's errors: regression ``rmse``, ``nlpd`` (of the predictive distribution the
        model gives), ``bias`` (mean of ``y - mean``); classification ``log_loss``,
        ``accuracy``. NaN for a branch without window rows.
    share_statistic, share_pvalue : float
        Pearson chi-square of the window's branch counts against the fit's shares
        (``L - 1`` degrees of freedom); informational, not part of the rule.
    threshold : float
        The rule's threshold on the split probabilities: the family-wise level of the
        ``correction``.
    correction : {"holm", "bonferroni", "none"}
        How the counted splits were tested together (:func:`basics.familywise.rejected`).
    decision : {"update", "refit"}
    reason : str
        One line saying why.
    n_rows : int
        Window rows analysed (after ``max_rows`` sub-sampling).
    failing : list of str
        Paths of the counted splits that fail the corrected test.
    task : {"regression", "classification"}
    n_unseen_labels : int
        Window rows whose label the classifier never saw (0 for regression).
    min_node_rows : int
        Window rows a node needed for its probability to count.
    replicated_gain : float
        :func:`ebf.diagnostics._drift.replicated_gain`: how much better a trunk refit on
        the window's first half predicts its second half than the stored trunk (NaN: too
        few rows).
    min_gain : float
        The rule's threshold on it.
    performance : PerformanceDrift or None
        The holdout-score test tested in the same family as the splits
        (:func:`with_performance`; its ``fired`` as the family decided), or None.
    """

    splits: pd.DataFrame
    branches: pd.DataFrame
    share_statistic: float
    share_pvalue: float
    threshold: float
    decision: str
    reason: str
    n_rows: int
    failing: list = field(default_factory=list)
    task: str = REGRESSION
    n_unseen_labels: int = 0
    min_node_rows: int = MIN_ROWS
    replicated_gain: float = math.nan
    min_gain: float = 0.0
    correction: str = "none"
    performance: PerformanceDrift | None = None

    _SCALARS = ("decision", "reason", "threshold", "n_rows", "failing", "task",
                "n_unseen_labels", "min_node_rows", "share_statistic", "share_pvalue",
                "replicated_gain", "min_gain", "correction")

    def to_dict(self) -> dict:
        """The report as JSON-ready dicts and lists (NaN becomes None).

        Returns
        -------
        dict
            The scalar attributes, ``splits`` and ``branches`` as lists of records,
            ``performance`` as :meth:`PerformanceDrift.to_dict` (or None);
            ``json.dumps(report.to_dict(), allow_nan=False)`` works, and
            :meth:`from_dict` reads it back.
        """
        out = {name: json_value(getattr(self, name)) for name in self._SCALARS}
        out["splits"] = _records(self.splits)
        out["branches"] = _records(self.branches)
        out["performance"] = None if self.performance is None else self.performance.to_dict()
        return out

    @classmethod
    def from_dict(cls, d: dict) -> DriftReport:
        """Inverse of :meth:`to_dict` (e.g. of a report read from a version record)."""
        kw = {name: d[name] for name in cls._SCALARS if name != "correction"}
        kw["correction"] = d.get("correction", "none")  # reports written before it existed
        for name in ("share_statistic", "share_pvalue", "replicated_gain"):
            kw[name] = math.nan if kw[name] is None else float(kw[name])
        if d.get("performance") is not None:  # absent from reports without the test
            kw["performance"] = PerformanceDrift.from_dict(d["performance"])
        return cls(splits=pd.DataFrame.from_records(d["splits"], columns=SPLIT_COLUMNS),
                   branches=pd.DataFrame.from_records(d["branches"]), **kw)

    def __str__(self) -> str:
        splits = self.splits.assign(path=self.splits["path"].replace("", "root"))
        return "\n".join([
            f"trunk drift: {self.decision.upper()} ({self.n_rows:,} window rows, "
            f"threshold {self.threshold:g}, {self.correction} correction)",
            self.reason,
            "splits (path: the moves from the root to the split, L left and R right):",
            splits.to_string(index=False) if len(splits) else "  (the trunk has no splits)",
            "branches:",
            self.branches.to_string(index=False),
            f"branch shares: chi-square {self.share_statistic:.4g}, "
            f"p-value {self.share_pvalue:.4g}",
            *([] if self.performance is None else [
                f"{self.performance.describe()}: "
                f"{'fired' if self.performance.fired else 'did not fire'}"]),
        ])


SPLIT_COLUMNS = ["path", "feature", "threshold", "n_window", "probability", "status",
                  "refit_feature", "refit_threshold", "same_feature"]


def split_name(path: str) -> str:
    """A split of the trunk by its path, spelled out: ``""`` is the root's split, ``"RL"`` the
    split reached from the root by its right child, then that child's left child.

    Examples
    --------
    >>> split_name(""), split_name("RL")
    ('the root split', 'the split at RL (root, then right, then left)')
    """
    if not path:
        return "the root split"
    moves = ", then ".join({"L": "left", "R": "right"}[m] for m in path)
    return f"the split at {path} (root, then {moves})"


def gain_text(gain: float | None) -> str:
    """How a trunk refit on the window's first half predicts its second half, against the
    stored trunk (:func:`ebf.diagnostics._drift.replicated_gain`): a negative gain is worse.

    Examples
    --------
    >>> gain_text(0.023)
    '2.3% better than the stored trunk'
    >>> gain_text(-0.007), gain_text(0.0)
    ('0.7% worse than the stored trunk', 'as well as the stored trunk')
    >>> gain_text(None)
    'not measured against the stored trunk (too few window rows)'
    """
    if gain is None or math.isnan(gain):
        return "not measured against the stored trunk (too few window rows)"
    shown = f"{abs(gain):.1%}"
    if shown == "0.0%":
        return "as well as the stored trunk"
    return f"{shown} {'better' if gain > 0 else 'worse'} than the stored trunk"


def drift_summary(drift: dict) -> str:
    """One line saying what the drift check of a version found (``DriftReport.to_dict()``,
    as a registry version's record holds it), in words: no drift on a stationary window,
    the splits that failed by name, a worse refit said to be worse.

    Examples
    --------
    >>> drift_summary({"decision": "update", "failing": [], "replicated_gain": -0.007})
    "no drift: no split of the trunk failed its test; a trunk refit on the window's first \
half predicts its second half 0.7% worse than the stored trunk"
    >>> drift_summary({"decision": "update", "failing": ["RL"], "replicated_gain": -0.007})
    "no drift acted on: the split at RL (root, then right, then left) failed its test, but a \
trunk refit on the window's first half predicts its second half 0.7% worse than the stored \
trunk, so the change does not carry over in time"
    """
    failing = list(drift.get("failing") or [])
    refit = drift.get("decision") == "refit"
    gain = (f"a trunk refit on the window's first half predicts its second half "
            f"{gain_text(drift.get('replicated_gain'))}")
    if not failing:
        line = f"{'drift' if refit else 'no drift'}: no split of the trunk failed its test; {gain}"
        return f"{line}; {drift.get('reason')}" if refit else line
    names = [split_name(p) for p in failing]
    names = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
    failed = f"{names} failed {'its test' if len(failing) == 1 else 'their tests'}"
    if refit:
        return f"drift: {failed}, and {gain}"
    return (f"no drift acted on: {failed}, but {gain}, so the change does not carry over in "
            "time")


def _records(df: pd.DataFrame) -> list[dict]:
    return [{k: json_value(v) for k, v in row.items()} for row in df.to_dict("records")]


def with_performance(report: DriftReport, performance: PerformanceDrift) -> DriftReport:
    """The drift check's rule over its splits and a holdout-score test together.

    The performance test (:func:`ebf.diagnostics.performance.performance_drift`: is the
    model's score on new rows worse than its reference?) joins the split tests as one more
    hypothesis of the family: the report's ``correction`` runs over the p-values of the
    counted splits and the performance test's together (Holm's step-down over all ``m + 1``
    of them, or each at ``threshold / (m + 1)`` with Bonferroni's), so on a stationary window
    the chance that any test fires stays at most ``threshold``. ``decision = "refit"`` when
    the split rule refits (a failing split whose change carries over in time, or labels the
    model never saw) or the performance test is rejected; the reason starts with which
    test fired (``"the split test fired"``, ``"the holdout-score test fired"``, ``"the
    split and holdout-score tests fired"`` or ``"no test fired"``), then says why for each.
    A performance test without rows enough (NaN p-value) is reported and not counted.

    Parameters
    ----------
    report : DriftReport
        A report of :func:`ebf.trunk_drift` without a performance test.
    performance : PerformanceDrift
        Tested at the report's ``threshold`` (``level=report.threshold``).

    Returns
    -------
    DriftReport
        A new report: ``failing``, ``decision``, ``reason`` and ``performance`` (its
        ``fired``, ``correction`` and ``tests`` those of the family) as the family decided;
        ``report`` is unchanged.

    Raises
    ------
    ValueError
        If the report already has a performance test, or ``performance`` was tested at
        another level than the report's threshold.
    """
    if not isinstance(performance, PerformanceDrift):
        raise TypeError(f"performance must be a PerformanceDrift (of performance_drift); got "
                        f"{type(performance).__name__}.")
    if report.performance is not None:
        raise ValueError("the report already has a performance test; pass the report "
                         "trunk_drift returned.")
    if performance.level != report.threshold:
        raise ValueError(f"performance was tested at level {performance.level:g}, the drift "
                         f"check at {report.threshold:g}; call performance_drift with "
                         f"level={report.threshold:g}.")
    unseen = report.reason if report.n_unseen_labels else None
    return _decided(replace(report, performance=performance), unseen)


def _unseen(labels: np.ndarray) -> str | None:
    """The reason of a refit for labels the classifier never saw (None: none)."""
    if not labels.size:
        return None
    shown = sorted({str(v) for v in labels})
    listed = ", ".join(shown[:5]) + (", ..." if len(shown) > 5 else "")
    return (f"{labels.size} window rows have labels the model never saw ({listed}); "
            "an update of the branches cannot add a class")


def _decided(report: DriftReport, unseen: str | None) -> DriftReport:
    """``report`` with ``failing``, ``decision`` and ``reason`` set by the rule over its
    counted splits and its performance test (if any) as one family; ``unseen``: the reason
    of a refit for unseen labels, or None."""
    splits = report.splits
    counted = splits[splits["status"] == COUNTED]
    perf = report.performance
    p = counted["probability"].to_numpy(dtype=np.float64)
    if perf is not None and perf.tested:
        p = np.append(p, perf.pvalue)
    out = rejected(p, report.threshold, report.correction)
    failing = counted.loc[out[:len(counted)], "path"].tolist()
    family = f"{len(counted)} tested splits"
    if perf is not None:
        perf = replace(perf, fired=bool(perf.tested and out[-1]),
                       correction=report.correction, tests=int(p.size))
        family += " and the holdout score" if perf.tested else ""
    level = (f"{report.threshold:g}" if report.correction == "none" else
             f"the {report.correction}-corrected level (family-wise {report.threshold:g} "
             f"over {family})")
    carried, why = _split_reason(splits, counted, failing, level, report.replicated_gain,
                                 report.min_gain)
    if perf is None:
        decision, reason = ("refit", unseen) if unseen else (
            "refit" if carried else "update", why)
    elif unseen:
        decision, reason = "refit", f"{unseen}; {perf.describe()}"
    else:
        fired = [name for name, f in (("split", carried), ("holdout-score", perf.fired)) if f]
        head = ("no test fired" if not fired else f"the {fired[0]} test fired"
                if len(fired) == 1 else "the split and holdout-score tests fired")
        decision, reason = ("refit" if fired else "update",
                            f"{head}: {why}; {perf.describe()}")
    return replace(report, failing=failing, decision=decision, reason=reason,
                   performance=perf)


def _split_reason(splits: pd.DataFrame, counted: pd.DataFrame, failing: list, level: str,
                  gain: float, min_gain: float) -> tuple[bool, str]:
    """The split rule of :func:`ebf.trunk_drift`: ``(refit, why)``."""
    if failing:
        worst = counted.set_index("path").loc[failing, "probability"]
        where = "; ".join(f"{split_name(p)} on {splits.set_index('path').loc[p, 'feature']}, "
                          f"probability {v:.3g}" for p, v in worst.items())
        if min_gain <= 0 or not gain < min_gain:  # NaN (too few rows to check): refit
            return True, (f"split probability below {level} at {where}: the window "
                          "is strong evidence that another variable now splits there "
                          f"better, and a trunk refit on its first half predicts its "
                          f"second half {gain_text(gain)} (at least {min_gain:.1%} better "
                          "needed)")
        return False, (f"split probability below {level} at {where}, but a trunk "
                       f"refit on the window's first half predicts its second half "
                       f"{gain_text(gain)} (less than {min_gain:.1%} better): the evidence "
                       "does not carry over in time")
    too_few = int((splits["status"] == TOO_FEW).sum())
    note = f"; {too_few} split(s) had too few window rows to test" if too_few else ""
    if counted.empty:
        if splits.empty:
            return False, "the trunk has no splits to test"
        return False, f"no split had enough window rows to test{note}"
    low = counted.loc[counted["probability"].idxmin()]
    return False, (f"every tested split holds (lowest probability "
                   f"{low['probability']:.3g}, {split_name(low['path'])}){note}")
