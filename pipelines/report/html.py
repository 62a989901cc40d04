"""Diagnostics where people look: the figures and one self-contained HTML report.

``results`` maps a model name (``"EBF"``, ``"SSF"``, ...) to a result dict of
:func:`pipelines.report.evaluate.evaluate`. :func:`write_html_report` writes one HTML file
that needs nothing else (no external CSS, script or font), so it can be mailed or attached to
a run: what was run on what (model, learner, trees, trunk leaves, version, hash, features,
data, rows, wall times), the scores, the calibration table, the figures of
:mod:`pipelines.report.figures` (re-exported here) as base64 PNG data URIs, the per-branch
table and free text sections. The tables are :mod:`pipelines.report.tables`'; every number
says its unit and the page fits a 1280-pixel-wide window.

The report reads, when present: ``n``, the scores of :data:`basics.scores.SCORES` (one
column each in the summary table), ``coverage``, ``calibration``, ``reliability``,
``pit_histogram``, ``width_error``, ``calibrated``, ``uncalibrated``, ``branches``,
``importance`` and the run facts (``model``, ``model_hash``, ``model_class``,
``model_info``, ``data``, ``target``, ``seconds``) of regressors, or ``n``, ``accuracy``,
``log_loss`` of classifiers (told apart by ``task == "classification"`` or an ``accuracy``
key). A missing score reads "not
computed", a missing fact "not recorded", and a figure without data is left out, so older
results (no ``crps``) and classifiers get a report too.
"""

from __future__ import annotations

import base64
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from basics.atomic import write_bytes
from basics.locations import REPORT_TAG, mark_output
from pipelines.report import figures
from pipelines.report.figures import *  # noqa: F403  (the figures are part of this module's API)
from pipelines.report.figures import (
    GAUSSIAN_ABS_ERROR_PER_WIDTH,
    Results,
    coverage_by_level,
    render_figures,
    save_figures,
)
from pipelines.report.metrics import before_after
from pipelines.report.tables import (
    GAP_SHADE,
    INTEGER_NOTE,
    branch_table,
    calibration_table,
    classifier_table,
    esc,
    importance_table,
    is_classifier,
    number,
    one_sided_by_level,
    regression_table,
    run_table,
    units,
)

__all__ = [*figures.__all__, "write_evaluation_report", "write_html_report"]

logger = logging.getLogger(__name__)

_STYLE = """
body { font-family: sans-serif; margin: 1.5em auto; padding: 0 1.5em; max-width: 72em;
       color: #222; line-height: 1.35; }
nav { font-size: 0.9em; margin-bottom: 1em; } nav a { margin-right: 1.2em; }
.table { max-width: 100%; overflow-x: auto; margin: 0.5em 0 1.5em; }
.table.tall { max-height: 32em; overflow-y: auto; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; vertical-align: top; }
th:first-child, td:first-child { text-align: left; }
th small { display: block; font-weight: normal; color: #666; font-size: 0.85em; }
thead th { background: #f0f0f0; vertical-align: bottom; position: sticky; top: 0; z-index: 1;
           overflow-wrap: anywhere; }
tbody th { background: #fafafa; position: sticky; left: 0; }
thead th:first-child { left: 0; z-index: 2; }
.info th, .info td { text-align: left; } .info td { max-width: 36em; overflow-wrap: break-word; }
code { font-size: 0.95em; word-break: break-all; }
td.off { background: #fde0dc; }
td:last-child .bar { background: #4c72b0; height: 0.8em; min-width: 1px; }
.importance td:last-child { width: 16em; }
.figures { display: flex; flex-wrap: wrap; gap: 1em 2em; align-items: flex-start; }
figure { margin: 0 0 1em; max-width: 100%; }
figure img { width: 100%; height: auto; border: 1px solid #eee; }
figcaption, p.note { font-size: 0.85em; color: #555; max-width: 60em; }
pre { background: #f7f7f7; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
"""

#: The caption of each figure of :data:`pipelines.report.figures.FIGURES`.
_CAPTIONS = {
    "calibration.png": (
        "Calibration (reliability diagram): observed against nominal coverage of the central "
        "prediction intervals, at 5% steps and the levels of the calibration table. On the "
        "diagonal: calibrated; above: intervals too wide (under-confident); below: too narrow "
        "(over-confident). The legend gives each model's largest |observed - nominal|."),
    "pit.png": (
        "PIT histograms: the predictive CDF at the observed target, u = F(y | x), is uniform "
        "for a calibrated model (bars at density 1, inside the grey 95% band). A U shape: "
        "predictive distributions too narrow; a hump: too wide; a slope: biased."),
    "width_error.png": (
        "Interval width against error: rows grouped by the width of their central 90% "
        "interval; mean |y - median| per group, both in the target's units. The dashed line "
        "is a calibrated Gaussian "
        f"(slope sqrt(2/pi) / (2 z_0.95) = {GAUSSIAN_ABS_ERROR_PER_WIDTH:.3f}); a line "
        "that rises with the width means the width tells which predictions to trust."),
}


@dataclass(frozen=True)
class _Page:
    """What the sections are drawn from: the results as given (one per model), as shown
    (a recalibrated model before and after, :func:`before_after`), the target's unit and
    the figures if they are drawn already."""

    models: Results
    shown: Results
    unit: str | None
    figures: Mapping[str, bytes] | None = None

    @property
    def regressors(self) -> dict[str, Mapping[str, Any]]:
        return {n: r for n, r in self.shown.items() if not is_classifier(r)}

    @property
    def classifiers(self) -> dict[str, Mapping[str, Any]]:
        return {n: r for n, r in self.shown.items() if is_classifier(r)}


def _run_section(page: _Page) -> str:
    return run_table(page.models, page.unit)


def _summary_section(page: _Page) -> str:
    if not page.regressors:
        return ""
    u = units(page.unit)
    recalibrated = (" Recalibrated: the model maps its predictive CDF by a PIT map learnt at "
                    "training; a model that does is also shown without the map (uncalibrated)."
                    if any("calibrated" in r for r in page.regressors.values()) else "")
    whole = [esc(n) for n, r in page.regressors.items() if r.get("integer_target")]
    integer = f" For {', '.join(whole)}: {esc(INTEGER_NOTE)}." if whole else ""
    return regression_table(page.regressors, page.unit) + (
        f'<p class="note">RMSE, and CRPS (continuous ranked probability score), in {esc(u)}; '
        "NLPD: mean negative log predictive density, in nats; 90% interval score: the width "
        "of the central 90% interval plus 20 times the distance by which a target falls "
        f"outside it, in {esc(u)}; lower is better for all four. max |central gap|: the "
        "largest |observed - nominal| coverage of the central intervals at the calibration "
        "table's levels (10%..90% by default); max |one-sided gap|: the largest |fraction "
        "below the predictive quantile - level| at 5%..95%."
        f"{recalibrated}{integer}</p>")


def _classifier_section(page: _Page) -> str:
    return classifier_table(page.classifiers) if page.classifiers else ""


def _calibration_section(page: _Page) -> str:
    rows = {n: r for n, r in page.regressors.items() if coverage_by_level(r) is not None}
    if not rows:
        return ""
    central = ('<p class="note">Observed minus nominal coverage of the central prediction '
               "intervals, as a fraction of the rows: 0 is calibrated, &lt; 0 over-confident "
               "(too narrow), &gt; 0 under-confident (too wide); |gap| &gt; "
               f"{GAP_SHADE} shaded.</p>" + calibration_table(rows))
    sided = {n: r for n, r in rows.items() if one_sided_by_level(r) is not None}
    if not sided:
        return central
    return central + (
        '<p class="note">One-sided: the fraction of targets below the predictive quantile '
        "of each level, minus the level. Central intervals can look calibrated while the "
        "whole distribution sits too low (gaps &lt; 0 at every level: targets above their "
        "quantiles too often) or too high (gaps &gt; 0). PIT distance: the largest of these "
        "gaps over all levels at once (Kolmogorov-Smirnov): "
        + ", ".join(f"{esc(n)} {r['pit_distance']:.3f}" for n, r in sided.items()
                    if r.get("pit_distance") is not None)
        + ".</p>" + calibration_table(sided, one_sided=True))


def _png_size(png: bytes) -> tuple[int, int]:
    """Width and height in pixels, from the PNG's header chunk."""
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def _figures_section(page: _Page) -> str:
    if not page.regressors:
        return ""
    parts = []
    pngs = page.figures if page.figures is not None else render_figures(page.regressors,
                                                                         unit=page.unit)
    # the two square figures side by side at 1280 pixels, then the PIT panels
    order = [n for n in ("calibration.png", "width_error.png") if n in pngs]
    for name in order + [n for n in pngs if n not in order]:
        png = pngs[name]
        data = base64.b64encode(png).decode("ascii")
        caption = _CAPTIONS[name]
        width, height = _png_size(png)
        parts.append(f'<figure style="width: {width}px"><img src="data:image/png;base64,{data}" '
                     f'width="{width}" height="{height}" alt="{esc(caption.split(":")[0])}">'
                     f"<figcaption>{esc(caption)}</figcaption></figure>")
    return f'<div class="figures">{"".join(parts)}</div>' if parts else ""


def _branch_section(page: _Page) -> str:
    parts, shaded = [], False
    for name, result in page.models.items():
        table = branch_table(result, page.unit)
        if table:
            parts.append(f"<h3>{esc(name)}</h3>{table}")
            shaded = shaded or not is_classifier(result)
    if not parts:
        return ""
    coverage = (" A 90% coverage outside the 95% range of a calibrated branch with as many "
                "rows is shaded." if shaded else "")
    return ('<p class="note">One row per branch (trunk leaf) of each Empirical Bayesian '
            "Forest: its training rows, the evaluated rows the trunk routed to it, the size of "
            "its shard and its scores as the model predicts (recalibrated if the model "
            f"recalibrates).{coverage} \u201cNo rows\u201d: no evaluated row reached the "
            "branch.</p>" + "".join(parts))


def _importance_section(page: _Page) -> str:
    parts = []
    for name, result in page.models.items():
        table = importance_table(result, page.unit)
        if table:
            imp = result["importance"]
            parts.append(f"<h3>{esc(name)}</h3>" + table.replace(
                'class="table', 'class="importance table', 1) + (
                f'<p class="note">On {int(imp.get("n", 0)):,} rows, each feature shuffled '
                f'{int(imp.get("n_repeats", 1))} time(s); mean {esc(imp.get("scoring"))} '
                f'of the rows as given: {number(imp.get("baseline"), ".4g")}.</p>'))
    if not parts:
        return ""
    return ('<p class="note">Permutation importance: how much the model\'s mean loss grows '
            "when one feature's values are shuffled among the rows (breaking its link with "
            "the target); near zero or below: the model does not rely on it. Computed on "
            "the evaluated rows (ebf evaluate --importance, ebf importance).</p>"
            + "".join(parts))


#: The report's sections in order: heading, anchor and builder (its HTML, or "" to leave the
#: section out). A new section is one more builder here: a function of the page returning
#: its tables or figures.
_SECTIONS: list[tuple[str, str, Callable[[_Page], str]]] = [
    ("Run and models", "run", _run_section),
    ("Summary", "summary", _summary_section),
    ("Classifiers", "classifiers", _classifier_section),
    ("Calibration", "calibration", _calibration_section),
    ("Figures", "figures", _figures_section),
    ("Branches", "branches", _branch_section),
    ("Feature importance", "importance", _importance_section),
]


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
    target_unit: str | None = None,
    figures: Mapping[str, bytes] | None = None,
) -> str:
    """Write one self-contained HTML report of evaluation results, atomically.

    In order, after the title and links to the sections (:data:`_SECTIONS`): *Run and
    models* (one column per model: class, branch learner, trees, trunk leaves, features,
    recalibration, path, version, hash, size, training data, fit time, evaluated data,
    target and its unit, rows, evaluation time); *Summary* of the regressors (rows, RMSE,
    NLPD, CRPS, the largest ``|observed - nominal|`` coverage gap, the 90% coverage and, if
    any result says, whether it is recalibrated), a recalibrated model before and after
    (:func:`pipelines.report.metrics.before_after`); *Classifiers* (rows, accuracy, log
    loss); *Calibration* (observed minus nominal coverage, one row per level of
    ``calibration`` and ``reliability``, one column per model; gaps above 0.05 shaded);
    *Figures* (:func:`pipelines.report.figures.render_figures`: the reliability diagram, the
    PIT histograms, width against error, as base64 PNG data URIs); *Branches* (one table per
    model with ``branches``); *Feature importance* (the permutation importances of a
    result's ``importance``, a table with bars); then ``sections``. A section with nothing
    to show is left out. Every string from the arguments is HTML-escaped. Nothing is fetched
    when the file is opened.

    Parameters
    ----------
    results : mapping of str to dict
        Model name to a result of :func:`pipelines.report.evaluate.evaluate` (regression or
        classification), one per model: a recalibrated model's ``uncalibrated`` scores are
        shown here; missing keys read "not computed" / "not recorded" or leave their figure
        out.
    path : str or path-like
        HTML file to write (local; its directory is created if missing).
    title : str
        Heading and ``<title>`` of the page.
    sections : sequence of (str, str), optional
        Extra sections after the others: a heading and preformatted text each (e.g. the
        CLI's text report, the command line, timings).
    target_unit : str, optional
        The target's unit (``"minutes"``), for RMSE, CRPS and the width-error axes; "target
        units" when not given.
    figures : mapping of str to bytes, optional
        The figures to embed, already drawn by :func:`pipelines.report.figures.render_figures`
        of ``before_after(results)`` (e.g. for PNG files too); drawn here if not given.

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
    ...                   title="Flight delays, test months", target_unit="minutes")
    ... # doctest: +SKIP
    'report.html'
    """
    if not results:
        raise ValueError("write_html_report needs at least one result; results is empty")
    extra = _check_sections(sections)
    page = _Page(results, before_after(results), target_unit, figures)
    drawn = [(heading, anchor, build(page)) for heading, anchor, build in _SECTIONS]
    drawn = [d for d in drawn if d[2]]
    drawn += [(heading, f"section-{i}", f"<pre>{esc(text)}</pre>")
              for i, (heading, text) in enumerate(extra, 1)]
    links = " ".join(f'<a href="#{anchor}">{esc(heading)}</a>' for heading, anchor, _ in drawn)
    body = [f"<h1>{esc(title)}</h1>", f"<nav>{links}</nav>"]
    for heading, anchor, content in drawn:
        body += [f'<h2 id="{anchor}">{esc(heading)}</h2>', content]
    html_page = "\n".join([
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        REPORT_TAG.decode("ascii"),  # marks the file as ebf's (basics.locations.file_kind)
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title><style>{_STYLE}</style></head><body>",
        *body,
        "</body></html>",
        "",
    ])
    write_bytes(path, html_page.encode("utf-8"))
    logger.info("wrote the HTML report %s (%d model(s), %d bytes)", path, len(results),
                len(html_page))
    return str(path)


def write_evaluation_report(results: Mapping[str, Any], path: str | os.PathLike[str], *,
                            title: str, sections: Sequence[tuple[str, str]] | None = None,
                            target_unit: str | None = None) -> dict[str, str]:
    """The HTML report of evaluation results plus their figures as PNGs next to it.

    A recalibrated model shows twice, before and after (:func:`pipelines.report.metrics.
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
    target_unit : str, optional
        As in :func:`write_html_report`.

    Returns
    -------
    dict of str to str
        The figures written (:func:`pipelines.report.figures.write_figures`).
    """
    if "model_class" in results:
        results = {str(results["model_class"]).rsplit(".", 1)[-1]: results}
    folder = figures_dir(path)
    folder.mkdir(parents=True, exist_ok=True)
    mark_output(folder, "figures")  # an ebf output: --overwrite may replace it
    pngs = render_figures(before_after(results), unit=target_unit)  # once, for both
    written = save_figures(pngs, folder)
    write_html_report(results, Path(path), title=title, sections=sections,
                      target_unit=target_unit, figures=pngs)
    return written


def figures_dir(report: str | os.PathLike[str]) -> Path:
    """The directory of a report's PNG figures: ``<stem>_figures`` beside it."""
    target = Path(report)
    return target.with_name(f"{target.stem}_figures")
