"""Figures and the HTML report of evaluation results (pipelines.report.figures,
pipelines.report.tables, pipelines.report.html).

The result dicts are built with NumPy (tests/pipelines/reports.py), from Gaussian predictions
of data whose noise is known: a calibrated model (the true scale) and a miscalibrated one
(twice the true scale: intervals too wide, as the flight-delay demo's are).
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("matplotlib")  # the examples extra

from scipy.special import ndtri  # noqa: E402

from basics.scores import scores_of  # noqa: E402
from pipelines.report import figures  # noqa: E402
from pipelines.report import html as report  # noqa: E402
from pipelines.report.metrics import before_after  # noqa: E402
from tests.pipelines.reports import EBF_HASH, run_results, synthetic_results  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def results() -> dict[str, dict]:
    return synthetic_results()


def _pngs_ok(paths: list[Path]) -> None:
    from matplotlib.image import imread

    for path in paths:
        assert path.read_bytes()[:8] == PNG_MAGIC, path
        image = imread(path)
        assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100, path


def test_fixture_is_what_it_claims(results: dict[str, dict]) -> None:
    # The miscalibration the figures have to show is in the data (and not in the calibrated).
    assert results["calibrated"]["max_calibration_gap"] < 0.03
    assert results["too wide"]["max_calibration_gap"] > 0.2
    assert sum(results["calibrated"]["pit_histogram"]) == 6000


def test_width_error_reference_is_the_calibrated_gaussian(results: dict[str, dict]) -> None:
    assert figures.GAUSSIAN_ABS_ERROR_PER_WIDTH == pytest.approx(
        math.sqrt(2 / math.pi) / (2 * ndtri(0.95)), rel=1e-12)
    assert figures.GAUSSIAN_ABS_ERROR_PER_WIDTH == pytest.approx(0.2425, abs=5e-5)
    for name, expected in (("calibrated", 1.0), ("too wide", 0.5)):
        t = results[name]["width_error"]
        # Every group of similar width lies on the reference line (times the scale error).
        ratio = t["mean_abs_error"] / t["mean_width"]
        assert np.allclose(ratio, expected * figures.GAUSSIAN_ABS_ERROR_PER_WIDTH, rtol=0.12)
        pooled = (t["n"] * t["mean_abs_error"]).sum() / (t["n"] * t["mean_width"]).sum()
        assert pooled == pytest.approx(expected * figures.GAUSSIAN_ABS_ERROR_PER_WIDTH, rel=0.03)


def test_write_figures_writes_valid_pngs_atomically(tmp_path: Path,
                                                    results: dict[str, dict]) -> None:
    out = tmp_path / "figs"
    written = report.write_figures(results, out, title="synthetic")
    assert list(written) == ["calibration.png", "pit.png", "width_error.png"]
    assert {Path(p) for p in written.values()} == {out / name for name in written}
    _pngs_ok([Path(p) for p in written.values()])
    before = {name: (out / name).read_bytes() for name in written}
    report.write_figures(results, out)  # replaces the files in place
    assert sorted(os.listdir(out)) == sorted(written)  # no temporary file left behind
    assert (out / "pit.png").read_bytes() == before["pit.png"]


@pytest.mark.parametrize("plot", [report.plot_calibration, report.plot_pit_histogram,
                                  report.plot_width_error])
def test_each_plot_function_writes_one_png(tmp_path: Path, results: dict[str, dict],
                                           plot) -> None:
    path = tmp_path / "sub" / "figure.png"
    assert plot(results, path) == str(path)
    assert os.listdir(path.parent) == ["figure.png"]
    _pngs_ok([path])


def test_calibration_figure_draws_both_tables_levels(results: dict[str, dict]) -> None:
    # One reliability diagram: every model's 5% steps and the levels it was asked for (a
    # 99% level only the calibration table has), the legend with its largest gap over them.
    asked = dict(results["too wide"])
    extra = pd.DataFrame({"level": [0.99], "observed": [1.0], "observed_minus_nominal": [0.01]})
    asked["calibration"] = pd.concat([asked["calibration"], extra], ignore_index=True)
    shown = {"calibrated": results["calibrated"], "too wide": asked}
    fig = figures._calibration_figure(shown)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[0] == "calibrated"  # the diagonal comes first
    lines = ax.get_lines()
    assert len(lines) == 1 + len(shown)
    for name, label, line in zip(shown, labels[1:], lines[1:], strict=True):
        table = figures.coverage_by_level(shown[name])
        gap = np.max(np.abs(table["observed_minus_nominal"]))
        assert label == f"{name} (max |gap| {gap:.3f})"
        np.testing.assert_allclose(line.get_xdata(), table["level"])
        np.testing.assert_allclose(line.get_ydata(), table["observed"])
    levels = lines[2].get_xdata()
    assert len(levels) == 20 and levels[-1] == 0.99  # 5%..95% once each, and 99%
    np.testing.assert_allclose(lines[1].get_ydata()[1::2],  # 10%..90%: the same numbers
                               results["calibrated"]["calibration"]["observed"])
    # the legend is below the axes, where it hides no point
    legend = ax.get_legend().get_window_extent(fig.canvas.get_renderer())
    assert legend.y1 <= ax.get_window_extent().y0


def test_pit_figure_has_one_panel_of_densities_per_model(results: dict[str, dict]) -> None:
    fig = figures._pit_figure(results)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == len(results)
    for ax, (name, r) in zip(panels, results.items(), strict=True):
        counts = np.array(r["pit_histogram"])
        heights = [p.get_height() for p in ax.patches if p.get_width() == pytest.approx(0.05)]
        np.testing.assert_allclose(heights, counts * 20 / counts.sum())
        assert ax.get_title().startswith(name)
    # The too-wide model's PIT piles up in the middle: that is what the panel has to show.
    wide = np.array(results["too wide"]["pit_histogram"])
    assert wide[8:12].sum() > 2 * wide[:4].sum()


def test_models_without_a_key_are_left_out(tmp_path: Path, results: dict[str, dict]) -> None:
    old = {k: v for k, v in results["too wide"].items() if k not in (
        "calibration", "reliability", "pit_histogram")}
    only_10 = {k: v for k, v in results["too wide"].items() if k != "reliability"}
    mixed = {"new": results["calibrated"], "old": old, "10% steps": only_10}
    lines = figures._calibration_figure(mixed).axes[0].get_lines()
    assert len(lines) == 3 and len(lines[2].get_xdata()) == 9  # the diagonal, new, 10% steps
    with pytest.raises(ValueError, match="'pit_histogram'"):
        report.plot_pit_histogram({"old": old}, tmp_path / "pit.png")
    with pytest.raises(ValueError, match="'calibration' or 'reliability'"):
        report.plot_calibration({"old": old}, tmp_path / "c.png")
    assert report.write_figures({"old": old}, tmp_path) == {
        "width_error.png": str(tmp_path / "width_error.png")}
    with pytest.raises(ValueError, match="empty"):
        report.plot_pit_histogram({"x": {"pit_histogram": [0] * 20}}, tmp_path / "e.png")
    assert sorted(os.listdir(tmp_path)) == ["width_error.png"]


def _text(page: str) -> str:
    """The page without its images (whose base64 may hold any three letters)."""
    return re.sub(r'base64,[^"]+', "", page)


def _data_uris(page: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([^"]+)"', page)]


def test_html_report_is_self_contained_and_escaped(tmp_path: Path,
                                                   results: dict[str, dict]) -> None:
    nasty = "<b>& $\\frac{$"  # HTML markup, and a broken mathtext formula for the legends
    models = {nasty: results["calibrated"], "too wide": results["too wide"]}
    path = tmp_path / "report.html"
    sections = [("Command <line>", "ebf evaluate --x 'a&b' </pre>")]
    assert report.write_html_report(models, path, title="Test < set", sections=sections) \
        == str(path)
    assert os.listdir(tmp_path) == ["report.html"]
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert 'src="http' not in page and "<link" not in page and "<script" not in page
    assert "url(" not in page and "@import" not in page
    images = _data_uris(page)
    assert len(images) == 3  # the reliability diagram, PIT, width-error
    assert all(png[:8] == PNG_MAGIC for png in images)
    assert "&lt;b&gt;&amp; $\\frac{$" in page and "<b>" not in page
    assert "<title>Test &lt; set</title>" in page
    assert '<h2 id="section-1">Command &lt;line&gt;</h2>' in page
    assert "&#x27;a&amp;b&#x27; &lt;/pre&gt;</pre>" in page
    for r in models.values():  # the summary table has every model's numbers
        for key, spec in (("rmse", ".4f"), ("nlpd", ".4f"), ("crps", ".4f"),
                          ("max_calibration_gap", ".3f"), ("interval_score_90", ".4g"),
                          ("max_one_sided_gap", ".3f")):
            assert f"<td>{r[key]:{spec}}</td>" in page
        assert f"<td>{r['coverage'][0.9]:.3f}</td>" in page
    assert "<td>yes</td>" in page and "<td>no</td>" in page
    # The calibration table has the union of the 10% and 5% levels, shaded where off; the
    # one-sided table the 5% levels, after it, and the PIT distances.
    central = page[page.index('id="calibration"'):page.index("One-sided")]
    assert central.count("<th>5%</th>") == 1 and central.count("<th>95%</th>") == 1
    gap = results["too wide"]["reliability"]["observed_minus_nominal"].iloc[9]
    assert f'<td class="off">{gap:+.3f}</td>' in central
    sided = page[page.index("One-sided"):page.index('id="figures"')]
    assert sided.count("<th>5%</th>") == 1 and sided.count("<th>95%</th>") == 1
    low = results["too wide"]["one_sided"]["observed_minus_nominal"].iloc[1]
    assert f'<td class="off">{low:+.3f}</td>' in sided  # 10% quantile far too low
    assert f"too wide {results['too wide']['pit_distance']:.3f}" in sided


def test_html_report_of_a_run(tmp_path: Path) -> None:
    """The run and its models, with units; the recalibrated model before and after; the
    calibration table one row per level; the EBF's branches."""
    runs = run_results()
    page = Path(report.write_html_report(runs, tmp_path / "r.html", title="t",
                                         target_unit="minutes")).read_text(encoding="utf-8")
    headings = re.findall(r'<h2 id="([a-z]+)">', page)
    assert headings == ["run", "summary", "calibration", "figures", "branches"]
    for anchor in headings:
        assert f'href="#{anchor}"' in page
    run = page[page.index('id="run"'):page.index('id="summary"')]
    for fact in (f"<code>{EBF_HASH}</code>", "<code>models/ebf</code>", "ebf-model/2 ebf/0.1.0",
                 "<td>mondrian</td>", "<td>10</td>", "<td>4 branches (trunk leaves)</td>",
                 "<td>4 sub-samples</td>", "40: x0, x1", "x29, and 10 more", "<td>2.500</td>",
                 "<td>data/train (24,000 rows, 2026-01-02T03:04:05Z UTC)</td>",
                 "<td>7.25</td>", "<td>12.50</td>", "<td>30.00</td>", "<code>data/test</code>",
                 "<td>y (minutes)</td>", "<td>6,000</td>", "<td>none</td>",
                 "<td>recent (PIT map learnt at training)</td>",
                 "<th>model size (MB)</th>", "<th>evaluation wall time (seconds)</th>",
                 "<th>EBF</th>", "<th>SSF</th>"):
        assert fact in run, fact
    assert "uncalibrated" not in run  # one column per model
    summary = page[page.index('id="summary"'):page.index('id="calibration"')]
    # one column per score record in the target's units (RMSE, CRPS, interval score, ...)
    in_target_units = [s for s in scores_of("regression") if s.unit == "target"]
    assert summary.count("<small>minutes</small>") == len(in_target_units) >= 3
    assert "<small>nats</small>" in summary and "in minutes" in summary
    for name, r in before_after(runs).items():  # both rows of the EBF count their rows
        row = summary[summary.index(f"<th>{name}</th>"):].split("</tr>")[0]
        assert "<td>6,000</td>" in row and f"<td>{r['nlpd']:.4f}</td>" in row
        assert row.endswith("<td>yes</td>" if name == "EBF recalibrated" else "<td>no</td>")
    calibration = page[page.index('id="calibration"'):page.index('id="figures"')]
    assert calibration.count("<tr>") == 2 * (1 + 19)  # central, one-sided: header, 5%..95%
    branches = page[page.index('id="branches"'):]
    assert "<h3>EBF</h3>" in branches and "<h3>SSF</h3>" not in branches
    assert branches.count("<tr>") == 1 + 4
    assert '<td class="off">0.500</td>' in branches and '<td class="off">' not in \
        branches.replace('<td class="off">0.500</td>', "")
    assert "<td>0.625</td>" in branches  # MB
    assert "n/a" not in _text(page)
    unnamed = Path(report.write_html_report(runs, tmp_path / "u.html", title="t")).read_text()
    assert "<small>target units</small>" in unnamed and "y (unit not given" in unnamed


def test_html_report_with_older_results_and_classifiers(tmp_path: Path,
                                                        results: dict[str, dict]) -> None:
    old = {k: v for k, v in results["calibrated"].items()
           if k in ("n", "rmse", "nlpd", "calibration", "coverage", "max_calibration_gap")}
    clf = {"task": "classification", "n": 1234, "accuracy": 0.875, "log_loss": 0.3125}
    page = Path(report.write_html_report({"old": old, "clf": clf}, tmp_path / "r.html",
                                         title="mixed")).read_text(encoding="utf-8")
    assert "<td>not computed</td>" in page and "n/a" not in _text(page)  # no CRPS
    assert "recalibrated" not in page.lower()  # no result says
    assert len(_data_uris(page)) == 1  # the calibration figure only
    assert "<td>0.8750</td>" in page and "<td>0.3125</td>" in page and "<td>1,234</td>" in page
    clf.update(target="label", branches=pd.DataFrame({
        "branch": [0, 1], "training_rows": [700, 300], "bytes": [1000, 2000], "n": [1000, 234],
        "accuracy": [0.9, 0.75], "log_loss": [0.25, 0.5]}))
    only_clf = Path(report.write_html_report({"clf": clf}, tmp_path / "c.html", title="c"))
    text = only_clf.read_text(encoding="utf-8")
    assert re.findall(r'<h2 id="([a-z]+)">', text) == ["run", "classifiers", "branches"]
    assert "data:image" not in text and "<td>label (classes)</td>" in text
    assert "Calibration" not in text and "RMSE" not in text and "coverage" not in text
    assert "<tr><th>1</th><td>300</td><td>234</td><td>0.002</td><td>0.7500</td>" \
        "<td>0.5000</td></tr>" in text


def test_results_read_back_from_json_give_the_same_report(tmp_path: Path,
                                                         results: dict[str, dict]) -> None:
    # results.json stores tables as dicts of lists and the coverage levels as strings.
    from pipelines.report.metrics import result_to_json

    results = {**results, **run_results()}
    no_rows = results["EBF"]["branches"].copy()  # a branch no evaluated row reached
    no_rows.loc[3, ["n", "rmse", "nlpd", "crps", "coverage_90"]] = [0, np.nan, np.nan, np.nan,
                                                                    np.nan]
    results["EBF"] = {**results["EBF"], "branches": no_rows}
    stored = {name: json.loads(json.dumps(result_to_json(r), allow_nan=False))
              for name, r in results.items()}  # strict JSON: NaN is null
    assert isinstance(stored["calibrated"]["coverage"], dict)
    assert stored["EBF"]["branches"]["rmse"][3] is None
    a = report.write_html_report(results, tmp_path / "a.html", title="t")
    b = report.write_html_report(stored, tmp_path / "b.html", title="t")
    text = [re.sub(r"base64,[^\"]+", "", Path(p).read_text()) for p in (a, b)]
    assert text[0] == text[1]
    assert text[0].count("<td>no rows</td>") == 4
    assert len(_data_uris(Path(b).read_text())) == 3
    with pytest.raises(ValueError, match="no rows"):
        report.plot_width_error({"x": {"width_error": {"n": [], "mean_width": [],
                                                       "mean_abs_error": []}}},
                                tmp_path / "w.png")


def test_missing_matplotlib_names_the_extra(tmp_path: Path, results: dict[str, dict],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    for module in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ImportError, match=re.escape("pip install -e '.[examples]'")):
        report.require_matplotlib()
    with pytest.raises(ImportError, match="examples"):
        report.write_html_report(results, tmp_path / "r.html", title="t")
    assert not (tmp_path / "r.html").exists()
    clf = {"task": "classification", "n": 10, "accuracy": 0.5, "log_loss": 0.7}
    report.write_html_report({"clf": clf}, tmp_path / "c.html", title="t")  # draws nothing
    assert sorted(os.listdir(tmp_path)) == ["c.html"]


def test_failed_write_keeps_the_old_file(tmp_path: Path, results: dict[str, dict],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "report.html"
    path.write_text("old report")

    def fail(src: object, dst: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(figures.os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        report.write_html_report(results, path, title="t")
    assert path.read_text() == "old report"
    assert os.listdir(tmp_path) == ["report.html"]


def test_bad_arguments(tmp_path: Path, results: dict[str, dict]) -> None:
    with pytest.raises(ValueError, match="empty"):
        report.write_html_report({}, tmp_path / "r.html", title="t")
    with pytest.raises(TypeError, match=r"sections\[1\]"):
        report.write_html_report(results, tmp_path / "r.html", title="t",
                                 sections=[("ok", "text"), ("heading only",)])
    assert os.listdir(tmp_path) == []


def test_before_after_keeps_the_rows_and_says_uncalibrated(results: dict[str, dict]) -> None:
    recal = {**results["calibrated"], "n_missing_target": 3,
             "uncalibrated": {"rmse": 1.0, "nlpd": 2.0}, "model_hash": "abc"}
    shown = before_after({"m": recal, "other": results["too wide"]})
    assert list(shown) == ["m recalibrated", "m uncalibrated", "other"]
    assert shown["m recalibrated"] is recal and shown["other"] is results["too wide"]
    assert shown["m uncalibrated"] == {"task": "regression", "target": "y", "n": 6000,
                                       "n_missing_target": 3, "rmse": 1.0, "nlpd": 2.0,
                                       "calibrated": False}


def test_demo_keeps_plot_calibration() -> None:
    from pipelines import demo

    assert demo.plot_calibration is report.plot_calibration
