"""Figures and the HTML report of evaluation results (pipelines.report.figures,
pipelines.report.html).

The result dicts are built here, with NumPy, from Gaussian predictions of data whose noise
is known: a calibrated model (the true scale) and a miscalibrated one (twice the true scale:
intervals too wide, as the flight-delay demo's are).
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

from scipy.special import ndtr, ndtri  # noqa: E402

from pipelines.report import figures  # noqa: E402
from pipelines.report import html as report  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
CALIBRATION_LEVELS = np.round(np.arange(1, 10) * 0.1, 2)
RELIABILITY_LEVELS = np.round(np.arange(1, 20) * 0.05, 2)


def _coverage_table(u: np.ndarray, levels: np.ndarray) -> pd.DataFrame:
    # y is inside the central interval of level a iff its PIT is within a/2 of 1/2.
    observed = np.array([np.mean(np.abs(u - 0.5) <= a / 2) for a in levels])
    return pd.DataFrame({"level": levels, "observed": observed,
                         "observed_minus_nominal": observed - levels})


def gaussian_result(y: np.ndarray, mean: np.ndarray, std: np.ndarray) -> dict:
    """The result dict of pipelines.report.evaluate.evaluate for Gaussian predictions, by hand."""
    z = (y - mean) / std
    u = ndtr(z)
    pdf = np.exp(-0.5 * z**2) / math.sqrt(2 * math.pi)
    crps = std * (z * (2 * u - 1) + 2 * pdf - 1 / math.sqrt(math.pi))  # Gneiting & Raftery
    calibration = _coverage_table(u, CALIBRATION_LEVELS)
    groups = np.array_split(np.argsort(std, kind="stable"), 10)
    width = 2 * ndtri(0.95) * std
    return {
        "task": "regression",
        "target": "y",
        "model_class": "synthetic.Gaussian",
        "seconds": 0.0,
        "n": int(y.size),
        "rmse": float(np.sqrt(np.mean((y - mean) ** 2))),
        "nlpd": float(np.mean(0.5 * z**2 + np.log(std) + 0.5 * math.log(2 * math.pi))),
        "crps": float(np.mean(crps)),
        "calibration": calibration,
        "coverage": dict(zip(calibration["level"].tolist(), calibration["observed"].tolist(),
                             strict=True)),
        "max_calibration_gap": float(np.max(np.abs(calibration["observed_minus_nominal"]))),
        "pit_histogram": np.histogram(u, bins=20, range=(0.0, 1.0))[0].tolist(),
        "reliability": _coverage_table(u, RELIABILITY_LEVELS),
        "width_error": pd.DataFrame({
            "n": [g.size for g in groups],
            "mean_width": [width[g].mean() for g in groups],
            "mean_abs_error": [np.abs(y - mean)[g].mean() for g in groups],
        }),
    }


@pytest.fixture(scope="module")
def results() -> dict[str, dict]:
    rng = np.random.default_rng(20240611)
    n = 6000
    x = rng.uniform(size=n)
    mean, scale = 10 * x, 0.5 + 2 * x
    y = mean + scale * rng.standard_normal(n)
    calibrated = gaussian_result(y, mean, scale)
    calibrated["calibrated"] = True
    wide = gaussian_result(y, mean, 2 * scale)
    wide["calibrated"] = False
    return {"calibrated": calibrated, "too wide": wide}


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


@pytest.mark.slow
def test_write_figures_writes_valid_pngs_atomically(tmp_path: Path,
                                                    results: dict[str, dict]) -> None:
    out = tmp_path / "figs"
    written = report.write_figures(results, out, title="synthetic")
    assert list(written) == ["calibration.png", "reliability.png", "pit.png", "width_error.png"]
    assert {Path(p) for p in written.values()} == {out / name for name in written}
    _pngs_ok([Path(p) for p in written.values()])
    before = {name: (out / name).read_bytes() for name in written}
    report.write_figures(results, out)  # replaces the files in place
    assert sorted(os.listdir(out)) == sorted(written)  # no temporary file left behind
    assert (out / "pit.png").read_bytes() == before["pit.png"]


@pytest.mark.parametrize("plot", [report.plot_calibration, report.plot_reliability,
                                  report.plot_pit_histogram, report.plot_width_error])
def test_each_plot_function_writes_one_png(tmp_path: Path, results: dict[str, dict],
                                           plot) -> None:
    path = tmp_path / "sub" / "figure.png"
    assert plot(results, path) == str(path)
    assert os.listdir(path.parent) == ["figure.png"]
    _pngs_ok([path])


def test_reliability_legend_gives_each_models_largest_gap(results: dict[str, dict]) -> None:
    fig = figures._reliability_figure(results)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[0] == "calibrated"  # the diagonal comes first
    for name, label in zip(results, labels[1:], strict=True):
        table = results[name]["reliability"]
        gap = np.max(np.abs(table["observed_minus_nominal"]))
        assert label == f"{name} (max |gap| {gap:.3f})"
    lines = ax.get_lines()
    assert len(lines) == 1 + len(results)
    np.testing.assert_allclose(lines[2].get_ydata(), results["too wide"]["reliability"]["observed"])


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
    old = {k: v for k, v in results["too wide"].items() if k not in ("reliability",
                                                                      "pit_histogram")}
    mixed = {"new": results["calibrated"], "old": old}
    fig = figures._reliability_figure(mixed)
    assert len(fig.axes[0].get_lines()) == 2  # the diagonal and "new"
    with pytest.raises(ValueError, match="'pit_histogram'"):
        report.plot_pit_histogram({"old": old}, tmp_path / "pit.png")
    assert report.write_figures({"old": old}, tmp_path) == {
        "calibration.png": str(tmp_path / "calibration.png"),
        "width_error.png": str(tmp_path / "width_error.png")}
    with pytest.raises(ValueError, match="empty"):
        report.plot_pit_histogram({"x": {"pit_histogram": [0] * 20}}, tmp_path / "e.png")
    assert sorted(os.listdir(tmp_path)) == ["calibration.png", "width_error.png"]


def _data_uris(page: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([^"]+)"', page)]


@pytest.mark.slow
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
    assert len(images) == 3  # reliability (it supersedes calibration), PIT, width-error
    assert all(png[:8] == PNG_MAGIC for png in images)
    assert "&lt;b&gt;&amp; $\\frac{$" in page and "<b>" not in page
    assert "<title>Test &lt; set</title>" in page
    assert "<h2>Command &lt;line&gt;</h2>" in page
    assert "&#x27;a&amp;b&#x27; &lt;/pre&gt;</pre>" in page
    for r in models.values():  # the summary table has every model's numbers
        for key, spec in (("rmse", ".4f"), ("nlpd", ".4f"), ("crps", ".4f"),
                          ("max_calibration_gap", ".3f")):
            assert f"<td>{r[key]:{spec}}</td>" in page
        assert f"<td>{r['coverage'][0.9]:.3f}</td>" in page
    assert "<td>yes</td>" in page and "<td>no</td>" in page
    # The calibration table has the union of the 10% and 5% levels, shaded where off.
    assert page.count("<th>5%</th>") == 1 and page.count("<th>95%</th>") == 1
    gap = results["too wide"]["reliability"]["observed_minus_nominal"].iloc[9]
    assert f'<td class="off">{gap:+.3f}</td>' in page


def test_html_report_with_older_results_and_classifiers(tmp_path: Path,
                                                        results: dict[str, dict]) -> None:
    old = {k: v for k, v in results["calibrated"].items()
           if k in ("n", "rmse", "nlpd", "calibration", "coverage", "max_calibration_gap")}
    clf = {"task": "classification", "n": 1234, "accuracy": 0.875, "log_loss": 0.3125}
    page = Path(report.write_html_report({"old": old, "clf": clf}, tmp_path / "r.html",
                                         title="mixed")).read_text(encoding="utf-8")
    assert "<td>n/a</td>" in page  # no CRPS
    assert "recalibrated" not in page  # no result says
    assert len(_data_uris(page)) == 1  # the calibration figure only
    assert "<td>0.8750</td>" in page and "<td>0.3125</td>" in page and "<td>1,234</td>" in page
    only_clf = Path(report.write_html_report({"clf": clf}, tmp_path / "c.html", title="c"))
    text = only_clf.read_text(encoding="utf-8")
    assert "<h2>Classifiers</h2>" in text and "data:image" not in text
    assert "Calibration" not in text and "RMSE" not in text


@pytest.mark.slow
def test_results_read_back_from_json_give_the_same_report(tmp_path: Path,
                                                         results: dict[str, dict]) -> None:
    # results.json stores tables as dicts of lists and the coverage levels as strings.
    from pipelines.report.metrics import result_to_json

    stored = {name: json.loads(json.dumps(result_to_json(r))) for name, r in results.items()}
    assert isinstance(stored["calibrated"]["coverage"], dict)
    a = report.write_html_report(results, tmp_path / "a.html", title="t")
    b = report.write_html_report(stored, tmp_path / "b.html", title="t")
    text = [re.sub(r"base64,[^\"]+", "", Path(p).read_text()) for p in (a, b)]
    assert text[0] == text[1]
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


@pytest.mark.slow
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


def test_demo_keeps_plot_calibration() -> None:
    from pipelines import demo

    assert demo.plot_calibration is report.plot_calibration
