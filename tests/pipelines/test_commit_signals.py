"""One exit-status contract around the commit (issue 45, item 3).

SIGTERM and SIGINT are sent to a real ``ebf`` process at many offsets around the moment its
output is committed (:mod:`basics.commit`'s test hook, ``tests/pipelines/signal_sweep.py``).
Whatever the offset, either the command exits 0 with its normal last line and its complete
output, or it exits 128 + the signal with the one line saying nothing was written, and
neither its output nor any temporary sibling exists. Never another status, never -15 or -2.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SWEEP = Path(__file__).with_name("signal_sweep.py")
STOPPED = {signal.SIGTERM: (143, "stopped: terminated (SIGTERM); nothing was written"),
           signal.SIGINT: (130, "stopped: interrupted; nothing was written")}


def _sweep(tmp_path: Path, runs: list[dict], pause: float) -> list[dict]:
    spec = tmp_path / "spec.json"
    work = tmp_path / "work"
    work.mkdir()
    spec.write_text(json.dumps({"work": str(work), "runs": runs, "pause": pause}))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, str(SWEEP), str(spec)], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _make_data(out: Path) -> list[str]:
    return ["make-data", "friedman", "--rows", "200", "--partition-rows", "100", "--out",
            str(out), "--quiet"]


def _check_make_data(out: Path) -> None:
    import pyarrow.parquet as pq

    from basics.locations import output_kind

    assert output_kind(str(out)) == "dataset"
    assert pq.read_table(out).num_rows == 200


def _check_k8s(out: Path) -> None:
    assert out.read_text().startswith("#")  # the command it was made with heads the file


def _runs(where: Path, argv, offsets: list[float]) -> list[dict]:
    runs = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        for i, offset in enumerate(offsets):
            out = where / f"{signum.name}-{i}" / "out"
            out.parent.mkdir(parents=True)
            runs.append({"argv": argv(out), "out": str(out), "signal": int(signum),
                         "offset": offset})
    return runs


def _assert_contract(results: list[dict], check, last_line: str) -> dict[int, int]:
    """Every run kept the contract; the count of each status."""
    counts: dict[int, int] = {}
    for r in results:
        out = Path(r["out"])
        signum = signal.Signals(r["signal"])
        what = f"{signum.name} at {r['offset']:+.3f}s: status {r['status']}, {r}"
        counts[r["status"]] = counts.get(r["status"], 0) + 1
        if r["status"] == 0:
            check(out)
            assert r["after"] is not None, what  # committed
            said = r["stdout"] + r["stderr"]  # ebf cluster k8s --out says it on stderr
            assert last_line in said and "stopped" not in said and "error" not in said, what
            assert r["listing"] == ["out"], what  # no temporary sibling
        else:
            status, line = STOPPED[signum]
            assert r["status"] == status, what
            assert not out.exists() and r["listing"] == [], what  # nothing left behind
            assert r["after"] is None, what  # the commit never happened
            lines = r["stderr"].splitlines()
            assert len(lines) == 1 and lines[0].endswith(line), what
            assert r["stdout"] == "", what
        if r["after"] is not None and r["sent"] is not None and r["sent"] > r["after"]:
            assert r["status"] == 0, what  # signalled after the commit: success
        if r["sent"] is not None and r["sent"] < r["before"]:
            pytest.fail(f"the signal went before the hook: {what}")
    return counts


def test_signal_sweep_around_the_commit(tmp_path):
    """make-data (a directory moved into place) signalled at 9 offsets from -0.5 s to
    +0.5 s around its commit, SIGTERM and SIGINT: each run exits 0 with the dataset or
    130 / 143 with nothing, and both kinds of end occur."""
    offsets = [-0.5, -0.1, -0.02, -0.005, 0.0, 0.005, 0.02, 0.1, 0.5]
    results = _sweep(tmp_path, _runs(tmp_path / "runs", _make_data, offsets), pause=0.5)
    assert len(results) == 2 * len(offsets)
    counts = _assert_contract(results, _check_make_data, "wrote 200 rows")
    assert counts.get(0) and (counts.get(143) or counts.get(130)), counts


@pytest.mark.soak  # on demand (-m soak), with the soak: CI runs the sweep above
@pytest.mark.timeout(900)
def test_signal_sweep_dense(tmp_path):
    """More offsets: the move of a directory (make-data) within 20 ms of its commit, and
    a single file (``ebf cluster k8s --out``: the file moved over its destination, no
    cluster: cheap) from -0.5 s to +0.5 s."""
    fine = [0.0005, 0.001, 0.002, 0.004, 0.008, 0.016]
    results = _sweep(tmp_path, _runs(tmp_path / "dirs", _make_data,
                                     sorted({0.0, *fine, *(-x for x in fine)})), pause=0.3)
    _assert_contract(results, _check_make_data, "wrote 200 rows")
    near = [0.0, 0.001, 0.003, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5]
    offsets = sorted({*near, *(-x for x in near)})

    def k8s(out: Path) -> list[str]:
        return ["cluster", "k8s", "--image", "ebf:0", "--out", str(out)]

    (tmp_path / "k8s").mkdir()
    results = _sweep(tmp_path / "k8s", _runs(tmp_path / "files", k8s, offsets), pause=0.5)
    _assert_contract(results, _check_k8s, "wrote ")
