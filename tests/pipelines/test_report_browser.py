"""The HTML report in a real browser: Debian's headless Chromium (``.ci/run`` installs it).

A report of three models and a recalibrated one (run facts, per-branch table, long model
names) is opened at 1280 x 2000 pixels. In a copy of it, a script run on ``load`` writes
what the page looks like into attributes of ``<html>`` (section headings, images decoded,
widths), which ``--dump-dom`` prints: every section is there, every image decoded, and
nothing is wider than the window. A screenshot of the report itself must not be blank.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib")  # the examples extra

from pipelines.report import html as report  # noqa: E402
from tests.pipelines.reports import run_results, synthetic_results  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")
WIDTH, HEIGHT = 1280, 2000

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium "
                       "(apt-get install chromium; .ci/run installs it)"),
]

#: Run on load, in a copy of the report: what the page looks like, as attributes of <html>.
PROBE = """<script>
addEventListener("load", () => {
  const root = document.documentElement, data = root.dataset;
  const images = [...document.images];
  data.headings = [...document.querySelectorAll("h2")].map(h => h.textContent).join("|");
  data.images = images.length;
  data.decoded = images.filter(i => i.complete && i.naturalWidth > 0).length;
  data.pageWidth = root.scrollWidth;
  data.viewWidth = root.clientWidth;
  data.tableRight = Math.max(0, ...[...document.querySelectorAll("table")].map(
    t => t.getBoundingClientRect().right));
  data.clipped = [...document.querySelectorAll("div.table")].filter(
    d => d.scrollWidth > d.clientWidth).length;
  data.probed = "yes";
});
</script>"""


def _chromium(tmp: Path, *args: str) -> str:
    command = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
               "--no-first-run", "--disable-background-networking",
               "--disable-component-update", "--disable-sync",
               f"--user-data-dir={tmp / 'profile'}", f"--window-size={WIDTH},{HEIGHT}", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HOME": str(tmp)})
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("browser")
    wide = synthetic_results()["too wide"]
    results = {**run_results(), "EmpiricalBayesianForestRegressor": wide,
               "SubsampleForestRegressor trained on the whole of 2013": wide}
    return Path(report.write_html_report(results, tmp / "report.html",
                                         title="Flight delays: a report in a browser",
                                         sections=[("Comparison", "a line of text\n" * 3)],
                                         target_unit="minutes"))


def test_the_rendered_report_has_every_section_and_fits_1280_pixels(page: Path) -> None:
    tmp = page.parent
    probed = tmp / "probed.html"
    probed.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"),
                      encoding="utf-8")
    dom = _chromium(tmp, "--virtual-time-budget=5000", "--dump-dom", probed.as_uri())
    root = re.search(r"<html[^>]*>", dom).group(0)
    data = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', root))
    assert data.get("probed") == "yes", root
    assert data["headings"].split("|") == ["Run and models", "Summary", "Calibration",
                                           "Figures", "Branches", "Comparison"]
    assert int(data["images"]) == 3 and int(data["decoded"]) == 3  # every figure decoded
    assert int(data["view-width"]) <= WIDTH
    assert int(data["page-width"]) <= int(data["view-width"])  # no sideways scrolling
    assert float(data["table-right"]) <= int(data["view-width"])
    assert int(data["clipped"]) == 0  # no table scrolls inside its box either


def test_the_screenshot_is_not_blank(page: Path) -> None:
    from matplotlib.image import imread

    shot = page.parent / "shot.png"
    _chromium(page.parent, f"--screenshot={shot}", page.as_uri())
    pixels = imread(shot)[..., :3]
    assert pixels.shape == (HEIGHT, WIDTH, 3)
    ink = (pixels.min(axis=2) < 0.8).mean()  # text, rules, figures: not white
    assert pixels.std() > 0.05 and 0.01 < ink < 0.6
    # the top quarter (title, links, the run table) has text too, not only the figures
    assert (pixels[: HEIGHT // 4].min(axis=2) < 0.5).mean() > 0.005
    assert np.isfinite(pixels).all()
