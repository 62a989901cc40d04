"""Figures of probabilistic evaluation results: calibration (reliability), PIT, width vs error.

Every function takes ``results``, a mapping of a model name (``"EBF"``, ``"EBF recalibrated"``,
``"SSF"``, ...) to a result dict of :func:`pipelines.report.evaluate.evaluate` (or
:func:`pipelines.report.metrics.evaluate_regression`), and reads only the keys it draws:

- ``calibration`` (DataFrame ``level``, ``observed``, ``observed_minus_nominal`` at the
  levels asked for, 10%..90% by default) and ``reliability`` (the same columns at 5%..95%):
  :func:`plot_calibration`, the reliability diagram of both tables' levels
  (:func:`coverage_by_level`);
- ``pit_histogram`` (20 counts of the PIT ``u = F(y | x)`` in ``[k/20, (k+1)/20)``):
  :func:`plot_pit_histogram`;
- ``width_error`` (DataFrame ``n``, ``mean_width`` of the central 90% interval,
  ``mean_abs_error`` about the predictive median, one row per group of rows of similar
  width): :func:`plot_width_error`.

A model without the keys is left out of that figure. The figures use matplotlib's Agg canvas
directly (no pyplot, no display, the global backend is left alone); matplotlib is in the
``examples`` extra and imported only when a figure is drawn. Files are written to a temporary
name next to the target and renamed into place, so a reader never sees half a file.
:mod:`pipelines.report.html` embeds the same figures in one HTML file and re-exports these
functions.
"""

from __future__ import annotations

import io
import logging
import math
import os
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from basics.atomic import write_bytes

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "FIGURES",
    "GAUSSIAN_ABS_ERROR_PER_WIDTH",
    "coverage_by_level",
    "plot_calibration",
    "plot_pit_histogram",
    "plot_width_error",
    "render_figures",
    "require_matplotlib",
    "save_figures",
    "write_figures",
]

logger = logging.getLogger(__name__)

Results = Mapping[str, Mapping[str, Any]]

#: Mean absolute error about the median per unit width of the central 90% interval, for a
#: calibrated Gaussian predictive distribution N(mu, sigma^2): E|y - mu| = sigma sqrt(2/pi)
#: (the mean of a half-normal) and the width is 2 z_0.95 sigma, so the ratio is
#: sqrt(2/pi) / (2 z_0.95) = 0.7979 / 3.2897 = 0.2425, whatever sigma. Both sides are linear
#: in sigma, so the group means of rows of different sigma lie on the same line. The ratio
#: depends little on the shape of a calibrated predictive (Student-t with 3 d.o.f.: 0.234,
#: Laplace: 0.217, uniform: 0.278; scipy ``expect``), but scales with miscalibration:
#: intervals twice too wide put a model's points at half the slope.
GAUSSIAN_ABS_ERROR_PER_WIDTH: float = math.sqrt(2.0 / math.pi) / (2.0 * NormalDist().inv_cdf(0.95))

_MARKERS = "osd^v<>"
_EXTRA_HINT = "install the examples extra: pip install -e '.[examples]'"


def require_matplotlib() -> None:
    """Fail early, with the fix, if matplotlib (the ``examples`` extra) is missing.

    A job that ends in a figure or a report calls this before its heavy work.

    Raises
    ------
    ImportError
        If matplotlib cannot be imported; the message names the extra to install.

    Examples
    --------
    >>> require_matplotlib()  # doctest: +SKIP
    """
    _agg()


def _agg() -> tuple[type[Figure], type]:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(f"figures and reports need matplotlib; {_EXTRA_HINT}") from exc
    return Figure, FigureCanvasAgg


def _new_figure(width: float, height: float) -> Figure:
    figure, canvas = _agg()
    fig = figure(figsize=(width, height), dpi=100)
    canvas(fig)  # attaches itself: savefig renders with Agg, pyplot is never involved
    return fig


def _label(name: str) -> str:
    # A "$" would start matplotlib's mathtext and a bad formula fails at draw time.
    return str(name).replace("$", r"\$")


def _with(results: Results, keys: tuple[str, ...]) -> dict[str, Mapping[str, Any]]:
    return {name: r for name, r in results.items()
            if any(r.get(key) is not None for key in keys)}


def _require(results: Results, keys: tuple[str, ...], what: str) -> dict[str, Mapping[str, Any]]:
    chosen = _with(results, keys)
    if not chosen:
        named = " or ".join(repr(k) for k in keys)
        raise ValueError(
            f"no result among {sorted(results)!r} has {named}, so there is no {what} to draw; "
            f"pass results of pipelines.report.evaluate.evaluate that include {named}"
        )
    return chosen


def _units(unit: str | None) -> str:
    return unit or "target units"


def coverage_by_level(result: Mapping[str, Any]) -> pd.DataFrame | None:
    """Observed coverage of the central intervals at every level a result has: its
    ``calibration`` table (the levels asked for) and ``reliability`` table (5% steps), each
    level once (the calibration table's where both have it).

    Parameters
    ----------
    result : mapping
        A result of :func:`pipelines.report.evaluate.evaluate`, or one read back from JSON
        (tables as dicts of lists).

    Returns
    -------
    pandas.DataFrame or None
        ``level``, ``observed``, ``observed_minus_nominal`` by increasing level; None if the
        result has neither table.

    Examples
    --------
    >>> coverage_by_level({"calibration": {"level": [0.5], "observed": [0.4],
    ...                                    "observed_minus_nominal": [-0.1]}})
       level  observed  observed_minus_nominal
    0    0.5       0.4                    -0.1
    """
    found: dict[float, tuple[float, float]] = {}
    for key in ("reliability", "calibration"):  # the calibration table's level wins
        table = result.get(key)
        if table is not None:
            for level, observed, gap in zip(table["level"], table["observed"],
                                            table["observed_minus_nominal"], strict=True):
                found[round(float(level), 6)] = (float(observed), float(gap))
    if not found:
        return None
    levels = sorted(found)
    return pd.DataFrame({"level": levels, "observed": [found[z][0] for z in levels],
                         "observed_minus_nominal": [found[z][1] for z in levels]})


def _png_bytes(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _calibration_figure(results: Results, title: str | None = None) -> Figure:
    chosen = _require(results, ("calibration", "reliability"), "coverage table")
    fig = _new_figure(5.4, 5.8)
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1], color="0.6", linestyle="--", linewidth=1, label="calibrated")
    for (name, result), marker in zip(chosen.items(), _MARKERS * len(chosen), strict=False):
        table = coverage_by_level(result)
        gap = float(np.max(np.abs(table["observed_minus_nominal"])))
        ax.plot(table["level"], table["observed"], marker=marker, markersize=4, linewidth=1.5,
                label=f"{_label(name)} (max |gap| {gap:.3f})")
    ax.text(0.03, 0.97, "above the diagonal: intervals too wide\n(under-confident)",
            transform=ax.transAxes, va="top", fontsize=7, color="0.35")
    ax.text(0.97, 0.03, "below: too narrow\n(over-confident)", transform=ax.transAxes,
            ha="right", va="bottom", fontsize=7, color="0.35")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")
    ax.set_xlabel("nominal coverage of the central prediction interval")
    ax.set_ylabel("observed coverage (fraction of rows inside)")
    ax.set_title(textwrap.fill(title or "Calibration (reliability diagram) of the central "
                               "prediction intervals", 70), fontsize=9)
    ax.grid(True, linewidth=0.5, alpha=0.5)
    # below the axes, where it hides no point
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


def _pit_figure(results: Results, title: str | None = None) -> Figure:
    chosen = _require(results, ("pit_histogram",), "PIT histogram")
    cols = 2 if len(chosen) == 4 else min(len(chosen), 3)  # 2 x 2, not 3 + 1
    rows = math.ceil(len(chosen) / cols)
    fig = _new_figure(3.2 * cols + 0.4, 2.7 * rows + 0.6)
    axes = fig.subplots(rows, cols, squeeze=False, sharey=True)
    for ax, (name, result) in zip(axes.flat, chosen.items(), strict=False):
        counts = np.asarray(result["pit_histogram"], dtype=np.float64)
        n, bins = counts.sum(), counts.size
        if bins == 0 or not n > 0:
            raise ValueError(f"the PIT histogram of {name!r} is empty ({bins} bins, {n:g} "
                             "rows); it needs counts of at least one row")
        # Density, so a uniform PIT (a calibrated model) is the line at 1 whatever n is; the
        # band is the 95% range of one bin's density under uniformity (binomial, normal approx.).
        density = counts * bins / n
        half = 1.96 * math.sqrt((1.0 / bins) * (1.0 - 1.0 / bins) / n) * bins
        edges = np.linspace(0.0, 1.0, bins + 1)
        ax.axhspan(1.0 - half, 1.0 + half, color="0.85", label="95% band if uniform")
        ax.bar(edges[:-1], density, width=1.0 / bins, align="edge", color="C0", alpha=0.8,
               edgecolor="white", linewidth=0.5)
        ax.axhline(1.0, color="0.3", linestyle="--", linewidth=1, label="uniform")
        ax.set_xlim(0, 1)
        ax.set_title(textwrap.fill(f"{_label(name)} ({int(n):,} rows)", 34), fontsize=8)
        ax.set_xlabel("PIT  u = F(y | x)", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in axes[:, 0]:
        ax.set_ylabel("density", fontsize=8)
    for ax in list(axes.flat)[len(chosen):]:
        ax.set_visible(False)
    # below the panels, where it hides no bar
    fig.legend(*axes.flat[0].get_legend_handles_labels(), loc="lower center", ncol=2,
               fontsize=7, frameon=False)
    fig.suptitle(title or "PIT histograms (flat = calibrated; U = too narrow, hump = too wide)",
                 fontsize=9)
    fig.tight_layout(rect=(0, 0.35 / fig.get_figheight(), 1, 1))
    return fig


def _width_error_figure(results: Results, title: str | None = None,
                        unit: str | None = None) -> Figure:
    chosen = _require(results, ("width_error",), "width-error table")
    fig = _new_figure(5.4, 5.8)
    ax = fig.add_subplot()
    top = 0.0
    for (name, result), marker in zip(chosen.items(), _MARKERS * len(chosen), strict=False):
        table = result["width_error"]
        if len(table["mean_width"]) == 0:
            raise ValueError(f"the width_error table of {name!r} has no rows; it needs at "
                             "least one group of rows")
        ax.plot(table["mean_width"], table["mean_abs_error"], marker=marker, markersize=4,
                linewidth=1.5, label=_label(name))
        top = max(top, float(np.nanmax(table["mean_width"])))
    top = top * 1.05 if top > 0 else 1.0
    ax.plot([0, top], [0, GAUSSIAN_ABS_ERROR_PER_WIDTH * top], color="0.6", linestyle="--",
            linewidth=1,
            label=f"calibrated Gaussian (slope {GAUSSIAN_ABS_ERROR_PER_WIDTH:.3f})")
    ax.set_xlim(0, top)
    ax.set_ylim(bottom=0)
    ax.set_xlabel(f"mean width of the central 90% interval ({_units(unit)}; groups of rows "
                  "of similar width)", fontsize=8)
    ax.set_ylabel(f"mean |y - predictive median| ({_units(unit)})")
    ax.set_title(title or "Interval width against absolute error (rising = width is informative)",
                 fontsize=9)
    ax.grid(True, linewidth=0.5, alpha=0.5)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


#: File name, result keys (a result with any of them is drawn) and figure builder of each
#: figure :func:`write_figures` writes.
FIGURES: dict[str, tuple[tuple[str, ...], Callable[..., Figure]]] = {
    "calibration.png": (("calibration", "reliability"), _calibration_figure),
    "pit.png": (("pit_histogram",), _pit_figure),
    "width_error.png": (("width_error",), _width_error_figure),
}


def plot_calibration(results: Results, path: str | os.PathLike[str], *,
                     title: str | None = None) -> str:
    """Reliability diagram: observed against nominal coverage of the central prediction
    intervals, one line per model, at every level of its ``calibration`` and ``reliability``
    tables (:func:`coverage_by_level`: 5% steps and the levels asked for).

    The dashed diagonal is a calibrated model; a line above it means intervals too wide
    (under-confident), below it too narrow (over-confident). The legend, below the axes,
    gives each model's largest ``|observed - nominal|`` over the levels plotted.

    Parameters
    ----------
    results : mapping of str to dict
        Model name to a result with a ``calibration`` or ``reliability`` DataFrame
        (``level``, ``observed``, ``observed_minus_nominal``), e.g.
        :func:`pipelines.report.evaluate.evaluate`'s; models with neither are left out.
    path : str or path-like
        PNG file to write (atomically).
    title : str, optional

    Returns
    -------
    str
        ``path``.

    Raises
    ------
    ValueError
        If no result has a ``calibration`` or ``reliability`` table.
    ImportError
        If matplotlib (the ``examples`` extra) is missing.

    Examples
    --------
    >>> plot_calibration({"EBF": res_ebf, "SSF": res_ssf}, "calibration.png")  # doctest: +SKIP
    'calibration.png'
    """
    return write_bytes(path, _png_bytes(_calibration_figure(results, title)))


def plot_pit_histogram(results: Results, path: str | os.PathLike[str], *,
                       title: str | None = None) -> str:
    """PIT histograms, one small panel per model, as densities with the uniform line.

    The PIT ``u = F(y | x)`` of a calibrated model is uniform on [0, 1]: every bar at
    density 1, within the grey 95% band of a uniform sample of that many rows (binomial,
    per bin). A U shape means the predictive distributions are too narrow, a hump in the
    middle too wide, a slope a biased location.

    Parameters
    ----------
    results : mapping of str to dict
        Model name to a result with ``pit_histogram`` (counts in equal bins over [0, 1]);
        models without one are left out.
    path : str or path-like
        PNG file to write (atomically).
    title : str, optional

    Returns
    -------
    str
        ``path``.

    Raises
    ------
    ValueError
        If no result has a ``pit_histogram``, or one has no counts.
    ImportError
        If matplotlib (the ``examples`` extra) is missing.

    Examples
    --------
    >>> plot_pit_histogram({"EBF": res_ebf}, "pit.png")  # doctest: +SKIP
    'pit.png'
    """
    return write_bytes(path, _png_bytes(_pit_figure(results, title)))


def plot_width_error(results: Results, path: str | os.PathLike[str], *,
                     title: str | None = None, unit: str | None = None) -> str:
    """Mean absolute error against mean 90% interval width per group of rows, one line per model.

    Rows are grouped by predicted width (``width_error``); a model whose width tells how
    wrong it is rises along the dashed reference line, the calibrated Gaussian's
    ``E|y - median| = GAUSSIAN_ABS_ERROR_PER_WIDTH x width`` (slope 0.2425; derivation at
    :data:`GAUSSIAN_ABS_ERROR_PER_WIDTH`; other calibrated shapes lie within about 15% of
    it). Points well below it: intervals wider than the errors need; above it: too narrow.
    A flat line means the width carries no information about the error.

    Parameters
    ----------
    results : mapping of str to dict
        Model name to a result with a ``width_error`` DataFrame (``n``, ``mean_width``,
        ``mean_abs_error``); models without one are left out.
    path : str or path-like
        PNG file to write (atomically).
    title : str, optional
    unit : str, optional
        The target's unit, for the axes (default: "target units").

    Returns
    -------
    str
        ``path``.

    Raises
    ------
    ValueError
        If no result has a ``width_error`` table.
    ImportError
        If matplotlib (the ``examples`` extra) is missing.

    Examples
    --------
    >>> plot_width_error({"EBF": res_ebf, "SSF": res_ssf}, "width_error.png")  # doctest: +SKIP
    'width_error.png'
    """
    return write_bytes(path, _png_bytes(_width_error_figure(results, title, unit)))


def render_figures(results: Results, *, title: str | None = None,
                   unit: str | None = None) -> dict[str, bytes]:
    """Draw every figure the results have data for, as PNG bytes.

    Parameters
    ----------
    results : mapping of str to dict
        Model name to a result of :func:`pipelines.report.evaluate.evaluate`.
    title : str, optional
        Title of the calibration figure (the others keep their explanatory titles).
    unit : str, optional
        The target's unit, for the width-error figure's axes (default: "target units").

    Returns
    -------
    dict of str to bytes
        File name (the keys of :data:`FIGURES`, in that order) to the PNG; a figure no
        result has the keys for is left out (a classifier's results give none).

    Raises
    ------
    ImportError
        If matplotlib (the ``examples`` extra) is missing and a figure has data.

    Examples
    --------
    >>> sorted(render_figures({"EBF": res_ebf}))  # doctest: +SKIP
    ['calibration.png', 'pit.png', 'width_error.png']
    """
    options: dict[str, dict[str, Any]] = {"calibration.png": {"title": title},
                                          "width_error.png": {"unit": unit}}
    return {name: _png_bytes(build(results, **options.get(name, {})))
            for name, (keys, build) in FIGURES.items() if _with(results, keys)}


def write_figures(results: Results, out_dir: str | os.PathLike[str], *,
                  title: str | None = None, unit: str | None = None) -> dict[str, str]:
    """Write every figure the results have data for, as PNGs in ``out_dir``.

    ``calibration.png`` (:func:`plot_calibration`), ``pit.png`` (:func:`plot_pit_histogram`)
    and ``width_error.png`` (:func:`plot_width_error`); a figure no result has the keys for
    is skipped (so a classifier's results write none). Each file is written atomically.

    Parameters
    ----------
    results : mapping of str to dict
        Model name to a result of :func:`pipelines.report.evaluate.evaluate`.
    out_dir : str or path-like
        Created if missing; existing files of these names are replaced.
    title : str, optional
        Title of the calibration figure (the others keep their explanatory titles).
    unit : str, optional
        The target's unit (:func:`render_figures`).

    Returns
    -------
    dict of str to str
        File name (e.g. ``"pit.png"``) to the path written, in the order above.

    Raises
    ------
    ImportError
        If matplotlib (the ``examples`` extra) is missing and a figure has data.

    Examples
    --------
    >>> write_figures({"EBF": res_ebf, "SSF": res_ssf}, "ebf-demo")  # doctest: +SKIP
    {'calibration.png': 'ebf-demo/calibration.png', 'pit.png': ..., ...}
    """
    return save_figures(render_figures(results, title=title, unit=unit), out_dir)


def save_figures(pngs: Mapping[str, bytes], out_dir: str | os.PathLike[str]) -> dict[str, str]:
    """Write figures drawn by :func:`render_figures` into ``out_dir``, each atomically (a
    report that embeds the same PNGs draws them once).

    Parameters
    ----------
    pngs : mapping of str to bytes
        File name to PNG, as :func:`render_figures` returns them.
    out_dir : str or path-like
        Created if missing; existing files of these names are replaced.

    Returns
    -------
    dict of str to str
        File name to the path written.
    """
    written = {name: write_bytes(Path(out_dir) / name, png) for name, png in pngs.items()}
    logger.info("wrote %d figure(s) to %s: %s", len(written), out_dir, ", ".join(written))
    return written
