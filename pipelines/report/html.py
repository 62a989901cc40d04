"""Diagnostics where people look: the figures and one self-contained HTML report.

``results`` maps a model name (``"EBF"``, ``"EBF recalibrated"``, ``"SSF"``, ...) to a result
dict of :func:`pipelines.report.evaluate.evaluate`. The figures (calibration, reliability, PIT
histogram, interval width against absolute error) are drawn by :mod:`pipelines.report.figures` and
re-exported here; :func:`write_html_report` puts the summary tables, the calibration table,
the figures (as base64 PNG data URIs) and free text sections into one HTML file that needs
nothing else (no external CSS, script or font), so it can be mailed or attached to a run.

The report reads, when present: ``n``, ``rmse``, ``nlpd``, ``crps``,
``max_calibration_gap``, ``coverage``, ``calibration``, ``reliability``, ``pit_histogram``,
``width_error``, ``calibrated`` (regressors) or ``n``, ``accuracy``, ``log_loss``
(classifiers, told apart by ``task == "classification"`` or an ``accuracy`` key). A missing
key shows as "n/a" or leaves its figure out, so older results (no ``crps``) and classifiers
get a report too.
"""

from __future__ import annotations

import base64
import html
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from basics.atomic import REPORT_TAG, mark_output
from pipelines.report import figures
from pipelines.report.diagnostics import before_after
from pipelines.report.figures import *  # noqa: F403  (the figures are part of this module's API)
from pipelines.report.figures import (
    GAUSSIAN_ABS_ERROR_PER_WIDTH,
    Results,
    render_figures,
    write_atomic,
    write_figures,
)

__all__ = [*figures.__all__, "write_evaluation_report", "write_html_report"]

logger = logging.getLogger(__name__)

_STYLE = """
body { font-family: sans-serif; margin: 2em auto; max-width: 70em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
thead th { background: #f0f0f0; }
td.off { background: #fde0dc; }
figure { margin: 1em 0 2em; }
figure img { max-width: 100%; border: 1px solid #eee; }
figcaption, p.note { font-size: 0.85em; color: #555; max-width: 60em; }
pre { background: #f7f7f7; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
"""

#: Calibration cells with ``|observed - nominal|`` above this are shaded.
_GAP_SHADE = 0.05

#: Which figure of :data:`pipelines.report.figures.FIGURES` the report shows, with its caption. The
#: reliability diagram holds the calibration figure's points and more, so the calibration
#: figure is shown only for results without one.
_CAPTIONS = {
    "reliability.png": (
        "Reliability: observed against nominal coverage of the central prediction intervals "
        "at 5% steps. On the diagonal: calibrated; above: intervals too wide "
        "(under-confident); below: too narrow (over-confident)."),
    "calibration.png": (
        "Calibration: observed against nominal coverage of the central prediction intervals "
        "at 10% steps. On the diagonal: calibrated; above: too wide; below: too narrow."),
    "pit.png": (
        "PIT histograms: the predictive CDF at the observed target, u = F(y | x), is uniform "
        "for a calibrated model (bars at density 1, inside the grey 95% band). A U shape: "
        "predictive distributions too narrow; a hump: too wide; a slope: biased."),
    "width_error.png": (
        "Interval width against error: rows grouped by the width of their central 90% "
        "interval; mean |y - median| per group. The dashed line is a calibrated Gaussian "
        f"(slope sqrt(2/pi) / (2 z_0.95) = {GAUSSIAN_ABS_ERROR_PER_WIDTH:.3f}); a line "
        "that rises with the width means the width tells which predictions to trust."),
}


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _number(value: Any, spec: str) -> str:
    if value is None:
        return "n/a"
    try:
        x = float(value)
    except (TypeError, ValueError):
        return _esc(value)
    return format(x, spec) if np.isfinite(x) else _esc(x)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], cell_class: Any = None) -> str:
    """An HTML table; ``header`` is escaped here, the cells must already be escaped."""
    head = "".join(f"<th>{_esc(h)}</th>" for h in header)
    body = []
    for i, row in enumerate(rows):
        cells = []
        for j, cell in enumerate(row):
            tag = "th" if j == 0 else "td"
            cls = cell_class(i, j) if cell_class is not None else None
            attr = f' class="{cls}"' if cls else ""
            cells.append(f"<{tag}{attr}>{cell}</{tag}>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _is_classifier(result: Mapping[str, Any]) -> bool:
    return result.get("task") == "classification" or "accuracy" in result


def _level_gaps(result: Mapping[str, Any]) -> dict[float, float]:
    """Nominal level -> observed minus nominal, from ``calibration`` and ``reliability``."""
    gaps: dict[float, float] = {}
    for key in ("calibration", "reliability"):
        table = result.get(key)
        if table is not None:
            for level, gap in zip(table["level"], table["observed_minus_nominal"], strict=True):
                gaps[round(float(level), 6)] = float(gap)
    return gaps


def _coverage_90(result: Mapping[str, Any]) -> float | None:
    coverage = result.get("coverage") or {}
    for level, observed in coverage.items():
        if abs(float(level) - 0.9) < 1e-9:
            return float(observed)
    gap = _level_gaps(result).get(0.9)
    return None if gap is None else 0.9 + gap


def _regression_table(results: Results) -> str:
    flagged = any("calibrated" in r for r in results.values())
    header = ["model", "rows", "RMSE", "NLPD", "CRPS", "max |gap| 10-90%", "90% coverage"]
    header += ["recalibrated"] if flagged else []
    rows = []
    for name, r in results.items():
        row = [_esc(name), _number(r.get("n"), ",.0f"), _number(r.get("rmse"), ".4f"),
               _number(r.get("nlpd"), ".4f"), _number(r.get("crps"), ".4f"),
               _number(r.get("max_calibration_gap"), ".3f"), _number(_coverage_90(r), ".3f")]
        if flagged:
            row.append({True: "yes", False: "no"}.get(r.get("calibrated"), "n/a"))
        rows.append(row)
    return _table(header, rows)


def _classifier_table(results: Results) -> str:
    rows = [[_esc(name), _number(r.get("n"), ",.0f"), _number(r.get("accuracy"), ".4f"),
             _number(r.get("log_loss"), ".4f")] for name, r in results.items()]
    return _table(["model", "rows", "accuracy", "log loss"], rows)


def _calibration_table(results: Results) -> str:
    gaps = {name: _level_gaps(r) for name, r in results.items()}
    levels = sorted({level for g in gaps.values() for level in g})
    rows = [[_esc(name)] + [_number(g.get(level), "+.3f") for level in levels]
            for name, g in gaps.items()]
    names = list(gaps)

    def shade(i: int, j: int) -> str | None:
        gap = gaps[names[i]].get(levels[j - 1]) if j else None
        return "off" if gap is not None and abs(gap) > _GAP_SHADE else None

    return _table(["model"] + [f"{level:.0%}" for level in levels], rows, shade)


def _figures_html(results: Results) -> str:
    pngs = render_figures(results)
    if "reliability.png" in pngs:
        pngs.pop("calibration.png", None)
    parts = []
    for name, png in pngs.items():
        data = base64.b64encode(png).decode("ascii")
        caption = _CAPTIONS[name]
        parts.append(f'<figure><img src="data:image/png;base64,{data}" '
                     f'alt="{_esc(caption.split(":")[0])}">'
                     f"<figcaption>{_esc(caption)}</figcaption></figure>")
    return "\n".join(parts)


def _check_sections(sections: Sequence[tuple[str, str]] | None) -> list[tuple[str, str]]:
    checked = []
    for i, section in enumerate(sections or ()):
        if (not isinstance(section, tuple | list) or len(section) != 2
                or not all(isinstance(s, str) for s in section)):
            raise TypeError(f"sections[{i}] is {section!r}; each section must be a pair of "
                            "strings (heading, preformatted text)")
        checked.append((section[0], section[1]))
    return checked


def write_html_report(
    results: Results,
    path: str | os.PathLike[str],
    *,
    title: str,
    sections: Sequence[tuple[str, str]] | None = None,
) -> str:
    """Write one self-contained HTML report of evaluation results, atomically.

    In order: the title; a summary table of the regressors (rows, RMSE, NLPD, CRPS, the
    largest ``|observed - nominal|`` coverage gap at 10-90%, the 90% interval coverage and,
    if any result says, whether a recalibration map was applied); a table of the
    classifiers (rows, accuracy, log loss); the calibration table (observed minus nominal
    coverage per level, from ``calibration`` and ``reliability``; gaps above 0.05 shaded);
    the figures of :func:`pipelines.report.figures.render_figures` (the reliability diagram, or the
    calibration figure for results without one, the PIT histograms, width against error)
    embedded as base64 PNG data URIs; then ``sections``. Every string from the arguments is
    HTML-escaped. Nothing is fetched when the file is opened.

    Parameters
    ----------
    results : mapping of str to dict
        Model name to a result of :func:`pipelines.report.evaluate.evaluate` (regression or
        classification); missing keys show as "n/a" or leave their figure out.
    path : str or path-like
        HTML file to write (local; its directory is created if missing).
    title : str
        Heading and ``<title>`` of the page.
    sections : sequence of (str, str), optional
        Extra sections after the figures: a heading and preformatted text each (e.g. the
        CLI's text report, the command line, timings).

    Returns
    -------
    str
        ``path``.

    Raises
    ------
    ValueError
        If ``results`` is empty.
    TypeError
        If a section is not a pair of strings.
    ImportError
        If a result has figure data and matplotlib (the ``examples`` extra) is missing.

    Examples
    --------
    >>> write_html_report({"EBF": res_ebf, "SSF": res_ssf}, "report.html",
    ...                   title="Flight delays, test months")  # doctest: +SKIP
    'report.html'
    """
    if not results:
        raise ValueError("write_html_report needs at least one result; results is empty")
    extra = _check_sections(sections)
    classifiers = {n: r for n, r in results.items() if _is_classifier(r)}
    regressors = {n: r for n, r in results.items() if n not in classifiers}
    body = [f"<h1>{_esc(title)}</h1>"]
    if regressors:
        body += ["<h2>Summary</h2>", _regression_table(regressors),
                 '<p class="note">CRPS: continuous ranked probability score, in the units of '
                 "the target (lower is better). NLPD: mean negative log predictive density. "
                 "max |gap|: the largest |observed - nominal| coverage of the central "
                 "intervals at 10%..90%.</p>"]
    if classifiers:
        body += ["<h2>Classifiers</h2>", _classifier_table(classifiers)]
    if any(_level_gaps(r) for r in regressors.values()):
        body += ["<h2>Calibration</h2>",
                 '<p class="note">Observed minus nominal coverage of the central prediction '
                 "intervals: 0 is calibrated, &lt; 0 over-confident (too narrow), &gt; 0 "
                 f"under-confident (too wide); |gap| &gt; {_GAP_SHADE} shaded.</p>",
                 _calibration_table({n: r for n, r in regressors.items() if _level_gaps(r)})]
    figures = _figures_html(regressors) if regressors else ""
    if figures:
        body += ["<h2>Figures</h2>", figures]
    for heading, text in extra:
        body += [f"<h2>{_esc(heading)}</h2>", f"<pre>{_esc(text)}</pre>"]
    page = "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        REPORT_TAG.decode("ascii"),  # marks the file as ebf's (basics.atomic.file_kind)
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_esc(title)}</title><style>{_STYLE}</style></head><body>",
        *body,
        "</body></html>",
        "",
    ])
    write_atomic(path, page.encode("utf-8"))
    logger.info("wrote the HTML report %s (%d model(s), %d bytes)", path, len(results), len(page))
    return str(path)


def write_evaluation_report(results: Mapping[str, Any], path: str | os.PathLike[str], *,
                            title: str, sections: Sequence[tuple[str, str]] | None = None
                            ) -> dict[str, str]:
    """The HTML report of evaluation results plus their figures as PNGs next to it.

    A recalibrated model shows twice, before and after (:func:`pipelines.report.diagnostics.
    before_after`); the PNGs go to the directory ``<stem>_figures`` beside ``path``.

    Parameters
    ----------
    results : mapping
        One result of :func:`pipelines.report.evaluate.evaluate` (it has ``model_class``;
        named after the class), or a mapping of model names to results.
    path : str or path-like
        The HTML file.
    title : str
    sections : sequence of (str, str), optional

    Returns
    -------
    dict of str to str
        The figures written (:func:`pipelines.report.figures.write_figures`).
    """
    if "model_class" in results:
        results = {str(results["model_class"]).rsplit(".", 1)[-1]: results}
    shown = before_after(results)
    folder = figures_dir(path)
    folder.mkdir(parents=True, exist_ok=True)
    mark_output(folder, "figures")  # an ebf output: --overwrite may replace it
    written = write_figures(shown, folder, title=title)
    write_html_report(shown, Path(path), title=title, sections=sections)
    return written


def figures_dir(report: str | os.PathLike[str]) -> Path:
    """The directory of a report's PNG figures: ``<stem>_figures`` beside it."""
    target = Path(report)
    return target.with_name(f"{target.stem}_figures")
