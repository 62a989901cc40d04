"""A local cluster asks for at most ``MAX_LOCAL_WORKERS`` workers, refused before anything
starts, and a cluster that cannot start ends the command within its timeout (issue 45)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from cluster.connect import MAX_LOCAL_WORKERS, _local_sizing
from pipelines.cli import main


def test_the_worker_cap_is_checked_before_anything_starts():
    assert MAX_LOCAL_WORKERS == 256  # the cap docs/cli.md names
    assert _local_sizing(MAX_LOCAL_WORKERS, 1, processes=True) == (MAX_LOCAL_WORKERS, 1)
    with pytest.raises(ValueError, match="cap of 256 local workers"):
        _local_sizing(MAX_LOCAL_WORKERS + 1, None, processes=True)


@pytest.mark.parametrize("command", [["make-data", "friedman", "--rows", "100"],
                                     ["train", "data.parquet", "--target", "y"]])
def test_too_many_workers_is_a_usage_error_naming_the_cap(command, tmp_path, capsys):
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as stop:
        main([*command, "--out", str(out), "--n-workers", "100000", "--quiet"])
    assert stop.value.code == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--n-workers" in line and "100000" in line and "256" in line
    assert "--scheduler" in line  # the fix: a cluster of its own
    assert not out.exists()


def test_a_cluster_that_cannot_start_ends_the_command_within_its_timeout(tmp_path):
    """A worker that never starts (its preload sleeps): one line, status 1, no output,
    and the process ends soon after the timeout instead of waiting for ever."""
    (tmp_path / "stuck_worker.py").write_text(
        "import time\n\ndef dask_setup(worker):\n    time.sleep(600)\n")
    data = tmp_path / "data.parquet"
    rng = np.random.default_rng(0)
    pd.DataFrame({"x": rng.random(50), "y": rng.random(50)}).to_parquet(data)
    out = tmp_path / "model"
    env = dict(os.environ, EBF_LOCAL_PROCESSES="1",
               DASK_DISTRIBUTED__WORKER__PRELOAD=f'["{tmp_path / "stuck_worker.py"}"]')
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "pipelines", "train", str(data), "--target", "y", "--out",
         str(out), "--n-workers", "1", "--timeout", "3", "--quiet"],
        env=env, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("ebf train: error: the local Dask cluster (1 worker) did "
                                "not start within 3 s"), proc.stderr
    assert "fewer workers" in lines[-1] and "larger timeout" in lines[-1]
    assert not out.exists()
    assert elapsed < 120  # start-up and teardown on a loaded machine; it used never to end
