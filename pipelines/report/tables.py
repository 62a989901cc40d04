"""The HTML tables of the evaluation report (:mod:`pipelines.report.html` lays out the page).

Every function takes results (a model name to a result of
:func:`pipelines.report.evaluate.evaluate`, or one read back from JSON) and returns an
escaped HTML fragment, or ``""`` when no result has what the table shows. Every number
says its unit: the target's (``unit``; "target units" when none is given), nats, seconds,
MB, or a fraction of rows. A value a result does not have says why in words ("not
computed", "not recorded", "no rows"), never "n/a".
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from basics.discrete import INTEGER_MAX_DISTINCT
from basics.scores import SCORES, Score, scores_of
from ebf.importance import LOSS_SCORES
from pipelines.report.figures import coverage_by_level
from pipelines.scoring.job import BRANCH_LEVEL

__all__ = [
    "BRANCH_ROWS_SHOWN",
    "GAP_SHADE",
    "INTEGER_NOTE",
    "branch_table",
    "calibration_table",
    "classifier_table",
    "esc",
    "is_classifier",
    "one_sided_by_level",
    "regression_table",
    "run_table",
    "units",
]

Results = Mapping[str, Mapping[str, Any]]
#: A column header: its name, or its name and unit (shown under it).
Header = str | tuple[str, str]

#: Calibration cells with ``|observed - nominal|`` above this are shaded.
GAP_SHADE = 0.05
#: Branches listed at most per model (the ``--json`` output has all of them).
BRANCH_ROWS_SHOWN = 1000
#: Feature names listed at most in the run table.
_FEATURES_SHOWN = 30
_BYTES_PER_MB = 1e6


def units(unit: str | None) -> str:
    """The target's unit as the report writes it: ``unit``, or "target units"."""
    return unit or "target units"


def esc(value: Any) -> str:
    """``value`` as escaped HTML text."""
    return html.escape(str(value), quote=True)


def number(value: Any, spec: str, missing: str = "not computed") -> str:
    """A number formatted with ``spec``; ``missing`` (escaped) for None or NaN."""
    if value is None:
        return esc(missing)
    try:
        x = float(value)
    except (TypeError, ValueError):
        return esc(value)
    if math.isnan(x):
        return esc(missing)
    return format(x, spec) if math.isfinite(x) else esc(x)


def table(header: Sequence[Header], rows: Sequence[Sequence[str]],
          cell_class: Callable[[int, int], str | None] | None = None, *,
          kind: str = "") -> str:
    """An HTML table in a container that scrolls sideways (its first column stays) if it is
    ever wider than the page. ``header`` is escaped here, the cells must already be."""
    head = "".join(f"<th>{esc(h)}</th>" if isinstance(h, str)
                   else f"<th>{esc(h[0])}<small>{esc(h[1])}</small></th>" for h in header)
    body = []
    for i, row in enumerate(rows):
        cells = []
        for j, cell in enumerate(row):
            tag = "th" if j == 0 else "td"
            cls = cell_class(i, j) if cell_class is not None else None
            attr = f' class="{cls}"' if cls else ""
            cells.append(f"<{tag}{attr}>{cell}</{tag}>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return (f'<div class="{f"table {kind}".strip()}"><table><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table></div>")


def is_classifier(result: Mapping[str, Any]) -> bool:
    """Whether a result scores a classifier."""
    return result.get("task") == "classification" or "accuracy" in result


def _coverage_90(result: Mapping[str, Any]) -> float | None:
    coverage = result.get("coverage") or {}
    for level, observed in coverage.items():
        if abs(float(level) - 0.9) < 1e-9:
            return float(observed)
    table_ = coverage_by_level(result)
    if table_ is None:
        return None
    hit = np.isclose(table_["level"], 0.9)
    return float(table_["observed"][hit].iloc[0]) if hit.any() else None


def _unit(score: Score, unit: str | None) -> str:
    """A score's unit as a header says it: the target's, or the record's (nats, fraction)."""
    return units(unit) if score.unit == "target" else score.unit


def _score_cells(r: Mapping[str, Any], scores: Sequence[Score]) -> list[str]:
    return [number(r.get(s.name), s.fmt) for s in scores]


#: What the text and HTML reports say of an integer-valued target (a result with
#: ``integer_target``).
INTEGER_NOTE = ("the target is integer-valued (whole numbers, at most "
                f"{INTEGER_MAX_DISTINCT} distinct values): RPS is the ranked probability score "
                "of the predictive discretised to the integers (the CRPS of P(k) = F(k + 1/2) - "
                "F(k - 1/2)), the score to compare models by; NLPD, of a continuous density, is "
                "not comparable for an integer target (a density narrow around the integers "
                "has no bound there) and is shown for reference only")


def regression_table(results: Results, unit: str | None) -> str:
    """Rows, every regression score of :data:`basics.scores.SCORES` (RMSE, NLPD, CRPS, the
    90% interval score, the largest central and one-sided coverage gaps, ...), the 90%
    coverage and (if any result says) whether the model recalibrates, one row per model."""
    scores = scores_of("regression", any(r.get("integer_target") for r in results.values()))
    flagged = any("calibrated" in r for r in results.values())
    header: list[Header] = ["model", "rows"]
    header += [(s.label, _unit(s, unit)) for s in scores]
    header += [("90% coverage", "fraction")] + (["recalibrated"] if flagged else [])
    rows = []
    for name, r in results.items():
        row = [esc(name), number(r.get("n"), ",.0f", "not recorded"), *_score_cells(r, scores),
               number(_coverage_90(r), ".3f")]
        if flagged:
            row.append("yes" if r.get("calibrated") else "no")
        rows.append(row)
    return table(header, rows)


def classifier_table(results: Results) -> str:
    """Rows and every classification score (accuracy, log loss), one row per classifier."""
    scores = scores_of("classification")
    rows = [[esc(name), number(r.get("n"), ",.0f", "not recorded"), *_score_cells(r, scores)]
            for name, r in results.items()]
    return table(["model", "rows", *((s.label, s.unit) for s in scores)], rows)


def calibration_table(results: Results, one_sided: bool = False) -> str:
    """Observed minus nominal coverage: one row per nominal level (the union of every
    model's levels), one column per model, so that it stays narrow whatever the levels.
    ``one_sided``: the fraction of targets below each predictive quantile instead (the
    results' ``one_sided`` tables)."""
    gaps = {}
    for name, r in results.items():
        t = one_sided_by_level(r) if one_sided else coverage_by_level(r)
        if t is not None:
            gaps[name] = dict(zip(t["level"], t["observed_minus_nominal"], strict=True))
    if not gaps:
        return ""
    levels = sorted({level for g in gaps.values() for level in g})
    names = list(gaps)
    rows = [[f"{level:.0%}" if round(level * 100, 6) == round(level * 100) else f"{level:.1%}"]
            + [number(gaps[n].get(level), "+.3f", "not computed") for n in names]
            for level in levels]

    def shade(i: int, j: int) -> str | None:
        gap = gaps[names[j - 1]].get(levels[i]) if j else None
        return "off" if gap is not None and abs(gap) > GAP_SHADE else None

    first = ("quantile level", "fraction") if one_sided else ("nominal coverage", "fraction")
    return table([first] + names, rows, shade)


def one_sided_by_level(result: Mapping[str, Any]) -> pd.DataFrame | None:
    """A result's ``one_sided`` table as a DataFrame (also one read back from JSON), or None.

    Examples
    --------
    >>> one_sided_by_level({"one_sided": {"level": [0.5], "observed": [0.4],
    ...                                   "observed_minus_nominal": [-0.1]}}).level.tolist()
    [0.5]
    """
    t = result.get("one_sided")
    return None if t is None else pd.DataFrame(t)


def _info(r: Mapping[str, Any]) -> Mapping[str, Any]:
    info = r.get("model_info")
    return info if isinstance(info, Mapping) else {}


def _parts(r: Mapping[str, Any]) -> str | None:
    n = _info(r).get("n_parts") or r.get("n_branches")
    if not n:
        return None
    kind = "branches (trunk leaves)" if "Subsample" not in str(r.get("model_class")) \
        else "sub-samples"
    return f"{int(n):,} {kind}"


def _features(r: Mapping[str, Any]) -> str | None:
    names = _info(r).get("features")
    if not names:
        return None
    shown = ", ".join(str(f) for f in names[:_FEATURES_SHOWN])
    more = f", and {len(names) - _FEATURES_SHOWN:,} more" if len(names) > _FEATURES_SHOWN else ""
    return f"{len(names):,}: {shown}{more}"


def _trained(r: Mapping[str, Any]) -> str | None:
    info = _info(r)
    if info.get("trained_on") is None:
        return None
    rows = info.get("training_rows")
    when = info.get("trained_utc")
    extra = ", ".join(x for x in (f"{int(rows):,} rows" if rows is not None else None,
                                  f"{when} UTC" if when else None) if x)
    return f"{info['trained_on']}" + (f" ({extra})" if extra else "")


def _target(r: Mapping[str, Any], unit: str | None) -> str | None:
    if r.get("target") is None:
        return None
    if is_classifier(r):
        return f"{r['target']} (classes)"
    return f"{r['target']} ({unit or 'unit not given: target units'})"


def _rows_scored(r: Mapping[str, Any]) -> str | None:
    if r.get("n") is None:
        return None
    skipped = r.get("n_missing_target") or 0
    return f"{int(r['n']):,}" + (f" ({int(skipped):,} without a target skipped)"
                                 if skipped else "")


def _seconds(value: Any) -> str | None:
    return None if value is None else f"{float(value):,.2f}"


def _megabytes(value: Any) -> str | None:
    return None if value is None else f"{float(value) / _BYTES_PER_MB:,.3f}"


def _recalibration(r: Mapping[str, Any]) -> str | None:
    method = _info(r).get("calibration")
    if method is None:
        return None if "calibrated" not in r else ("yes" if r["calibrated"] else "none")
    groups = _info(r).get("calibration_groups")
    if method == "auto" and isinstance(groups, Mapping):
        return (f"auto: on all {groups['rows']:,} training rows, each predicted by "
                f"{groups['group_trees']}-tree calibration forests fit without it "
                f"({groups['folds']} folds; the model has {groups['model_trees']} trees)")
    return "none" if method == "none" else f"{method} (PIT map learnt at training)"


#: The run table's rows: label, whether the value is code (a path, a hash), and its value
#: from a result and the target's unit (None: the result does not record it).
_RUN_ROWS: list[tuple[str, bool, Callable[[Mapping[str, Any], str | None], Any]]] = [
    ("model class", False, lambda r, u: str(r.get("model_class") or "").rsplit(".", 1)[-1]
     or None),
    ("branch learner", False, lambda r, u: _info(r).get("learner")),
    ("trees per branch / sub-sample", False, lambda r, u: _info(r).get("n_estimators")
     or r.get("n_estimators")),
    ("trunk leaves / sub-samples", False, lambda r, u: _parts(r)),
    ("features", False, lambda r, u: _features(r)),
    ("recalibration", False, lambda r, u: _recalibration(r)),
    ("model path", True, lambda r, u: r.get("model") or r.get("model_dir")),
    ("model version (format, ebf)", False, lambda r, u: _info(r).get("version")),
    ("model hash (sha256)", True, lambda r, u: r.get("model_hash")),
    ("model size (MB)", False, lambda r, u: _megabytes(_info(r).get("bytes"))),
    ("trained on", False, lambda r, u: _trained(r)),
    ("fit wall time (seconds)", False, lambda r, u: _seconds(
        _info(r).get("fit_seconds", r.get("fit_seconds")))),
    ("evaluated on", True, lambda r, u: r.get("data")),
    ("target", False, _target),
    ("rows scored", False, lambda r, u: _rows_scored(r)),
    ("evaluation wall time (seconds)", False, lambda r, u: _seconds(r.get("seconds"))),
]


def run_table(results: Results, unit: str | None) -> str:
    """What was run on what: one column per model, one row per fact (model class, branch
    learner, trees, trunk leaves, features, recalibration, path, version, hash, size,
    training data, fit time, evaluated data, target and its unit, rows, evaluation time).
    A fact no model records is left out; one that some record reads "not recorded"."""
    names = list(results)
    rows = []
    for label, code, value in _RUN_ROWS:
        values = [value(results[n], unit) for n in names]
        if all(v is None for v in values):
            continue
        cells = [esc("not recorded") if v is None
                 else f"<code>{esc(v)}</code>" if code else esc(v) for v in values]
        rows.append([esc(label)] + cells)
    return table(["", *names], rows, kind="info") if rows else ""


def _coverage_off(col: Mapping[str, list], column: int) -> Callable[[int, int], str | None]:
    """Shade a branch's 90% coverage (in table column ``column``) outside the 95% range of a
    calibrated branch with as many rows (binomial, normal approximation)."""
    n = np.asarray(col["n"], dtype=np.float64)
    cov = np.array([np.nan if c is None else c for c in col["coverage_90"]], dtype=np.float64)
    half = 1.96 * np.sqrt(BRANCH_LEVEL * (1 - BRANCH_LEVEL) / np.maximum(n, 1))
    off = (n > 0) & (np.abs(cov - BRANCH_LEVEL) > half)
    return lambda i, j: "off" if j == column and off[i] else None


def branch_table(result: Mapping[str, Any], unit: str | None) -> str:
    """One row per branch of ``result["branches"]``: training rows, rows scored, shard size
    and the branch's scores (""; if the result has no per-branch table)."""
    frame = result.get("branches")
    if frame is None:
        return ""
    u = units(unit)
    col = {k: list(frame[k]) for k in frame.keys()}  # a DataFrame or a dict of lists
    total = len(col["branch"])
    shown = min(total, BRANCH_ROWS_SHOWN)
    classify = "accuracy" in col
    scores: list[tuple[str, str, Header]] = (
        [("accuracy", ".4f", ("accuracy", "fraction")), ("log_loss", ".4f", ("log loss", "nats"))]
        if classify else
        [("rmse", ".4f", ("RMSE", u)), ("nlpd", ".4f", ("NLPD", "nats")),
         ("crps", ".4f", ("CRPS", u)), ("coverage_90", ".3f", ("90% coverage", "fraction"))])
    header: list[Header] = ["branch", "training rows", "rows scored", ("size", "MB")]
    header += [h for _, _, h in scores]
    rows = []
    for i in range(shown):
        row = [f"{int(col['branch'][i])}",
               number(col.get("training_rows", [None] * total)[i], ",.0f", "not recorded"),
               f"{int(col['n'][i]):,}",
               esc(_megabytes(col.get("bytes", [None] * total)[i]) or "not recorded")]
        row += [number(col[key][i], spec, "no rows") for key, spec, _ in scores]
        rows.append(row)
    note = "" if shown == total else (
        f'<p class="note">The first {shown:,} of {total:,} branches; the --json output '
        "has every branch.</p>")
    shade = None if classify else _coverage_off(col, len(header) - 1)
    return table(header, rows, shade, kind="tall" if shown > 15 else "") + note


def _loss_unit(scoring: str, unit: str | None) -> str:
    """The unit of an increase of a permutation-importance loss: its score record's
    (:data:`ebf.importance.LOSS_SCORES`), squared for the squared error."""
    name = LOSS_SCORES.get(scoring)
    if name is None:
        return units(unit)
    u = _unit(SCORES[name], unit)
    return f"{u}²" if scoring == "squared_error" else u


def importance_table(result: Mapping[str, Any], unit: str | None) -> str:
    """Permutation importances of ``result["importance"]`` (what
    :func:`pipelines.importance.permutation_importance` returns): one row per feature, the
    increase of the mean loss when it is shuffled, its spread over the repeats and a bar;
    "" if the result has none."""
    imp = result.get("importance")
    if not imp:
        return ""
    rows_in = imp["importances"]
    records = (rows_in.to_dict(orient="records") if hasattr(rows_in, "to_dict")
               else list(rows_in))
    scoring = str(imp.get("scoring", "loss"))
    u = _loss_unit(scoring, unit)
    top = max([float(r["importance"]) for r in records] + [0.0])
    rows = []
    for r in records:
        value = float(r["importance"])
        width = 0.0 if top <= 0 or value <= 0 else 100.0 * value / top
        rows.append([esc(r["feature"]), number(value, ".4g"), number(r.get("std"), ".2g"),
                     f'<div class="bar" style="width: {width:.1f}%"></div>'])
    header: list[Header] = ["feature", (f"increase of mean {scoring}", u),
                            ("std", "over repeats"), "relative"]
    return table(header, rows, kind="tall" if len(rows) > 15 else "")
