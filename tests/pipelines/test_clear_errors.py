"""One clear line for every bad input: the probe's cases of issue 26, item 5, end to end.

Each case runs the real ``ebf`` command in its own subprocess (a crash fails one test) on a
few rows of Parquet in ``tmp_path``, with a local cluster of threads (``EBF_LOCAL_PROCESSES=0``)
unless it is about worker processes, and checks the documented exit status (1 invalid data,
2 schema mismatch, 130 Ctrl-C) and that stderr is one line, ``ebf CMD: error: ...`` (or
``stopped``), naming the file / column / count and the fix, with no traceback and no Dask
"Compute Failed" record; ``-v`` keeps the traceback.
"""

from __future__ import annotations

import glob
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from distributed import Client

from ebf.dask import DaskEmpiricalBayesianForestRegressor
from pipelines.footers import read_footers
from pipelines.registry.files import RegistryBusyError
from pipelines.registry.store import Registry

from .conftest import TINY_FEATURES

ROOT = Path(__file__).resolve().parents[2]
INVALID, USAGE, INTERRUPTED = 1, 2, 130


def _env(processes: bool = False) -> dict:
    env = dict(os.environ, EBF_LOCAL_PROCESSES="1" if processes else "0",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    return env


def _ebf(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines", *argv], env=_env(),
                          capture_output=True, text=True, timeout=600)


def _one_line(res: subprocess.CompletedProcess, status: int, *needles: str) -> str:
    """The single stderr line of a failure with ``status``, holding every needle."""
    lines = res.stderr.strip().split("\n")
    assert res.returncode == status, res.stderr
    assert len(lines) == 1, res.stderr
    assert "Traceback" not in res.stderr and "Compute Failed" not in res.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def _frame(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.random((n, 3)), columns=TINY_FEATURES)
    return X.assign(y=3.0 * X["x0"] + 0.1 * rng.standard_normal(n))


def _train(data: Path, out: Path, *more: str) -> subprocess.CompletedProcess:
    return _ebf("train", str(data), "--target", "y", "--n-estimators", "2", "--trunk-leaves",
                "2", "--out", str(out), "--quiet", *more)


def _no_temporaries(parent: Path) -> None:
    assert glob.glob(str(parent / ".*.tmp-*")) + glob.glob(str(parent / ".*.old-*")) == []


# --------------------------------------------------------------------------- (a) schemas


@pytest.mark.parametrize("odd", ["lacks x2", "x2 as text"])
def test_files_of_one_directory_with_other_columns_are_named(tmp_path, odd):
    data = tmp_path / "data"
    data.mkdir()
    _frame(200, 0).to_parquet(data / "part.0.parquet", index=False)
    other = _frame(200, 1)
    other = other.drop(columns="x2") if odd == "lacks x2" else other.assign(x2=other["x2"]
                                                                           .astype(str))
    other.to_parquet(data / "part.1.parquet", index=False)
    line = _one_line(_train(data, tmp_path / "m"), USAGE, "ebf train: error:", "'x2'",
                     str(data / "part.1.parquet"))
    assert ("missing from 1 of 2 files" in line) == (odd == "lacks x2")
    assert "rewrite those files" in line or "one type in every file" in line
    assert not (tmp_path / "m").exists()


def test_prediction_names_the_file_lacking_a_feature(tmp_path, tiny_model_dir):
    data = tmp_path / "data"
    data.mkdir()
    _frame(50, 0).to_parquet(data / "a.parquet", index=False)
    _frame(50, 1).drop(columns="x1").to_parquet(data / "b.parquet", index=False)
    _one_line(_ebf("predict", tiny_model_dir, str(data), "--out", str(tmp_path / "p"),
                   "--quiet"), USAGE, "ebf predict: error: feature column 'x1' is missing from 1 "
              "of 2 files", str(data / "b.parquet"))


# --------------------------------------------------------------------------- (b) duplicates


def test_duplicate_column_names_name_the_file_and_column(tmp_path):
    path = tmp_path / "dup.parquet"
    rng = np.random.default_rng(0)
    pq.write_table(pa.table([pa.array(rng.random(100)) for _ in range(4)],
                            names=["x0", "x1", "x1", "y"]), path)
    _one_line(_train(path, tmp_path / "m"), USAGE, str(path), "used more than once ('x1')",
              "rename or drop the duplicates")


# --------------------------------------------------------------------------- (c) too few rows


@pytest.mark.parametrize("rows", [0, 1])
def test_too_few_rows_are_refused_with_the_count_and_the_fix(tmp_path, rows):
    path = tmp_path / "small.parquet"
    _frame(rows).to_parquet(path, index=False)
    s = "" if rows == 1 else "s"
    _one_line(_train(path, tmp_path / "m"), INVALID, f"has {rows} row{s} in 1 file(s)",
              "needs at least 491 rows", "--calibrate none")
    if rows == 0:
        _one_line(_train(path, tmp_path / "m", "--calibrate", "none"), INVALID,
                  "has 0 rows", "needs at least 1 row: add rows")
    assert not (tmp_path / "m").exists()


# --------------------------------------------------------------------------- (d) huge targets


def test_targets_beyond_1e100_are_refused_in_the_summary_pass_before_the_trunk():
    df = _frame(300).assign(y=lambda d: d["y"] * 1e150)
    phases = []
    with Client(processes=False, n_workers=1, threads_per_worker=1,
                dashboard_address=None) as client:
        model = DaskEmpiricalBayesianForestRegressor(n_estimators=2, trunk_max_leaves=2,
                                                     client=client)
        ddf = dd.from_pandas(df, npartitions=3)
        with pytest.raises(ValueError, match=r"target 'y' ranges from .*e\+150.*rescale"):
            model.fit(ddf[TINY_FEATURES], ddf["y"],
                      progress=lambda phase, done, total: phases.append(phase))
    assert "summary" in phases and "trunk" not in phases and "encode" not in phases
    assert not hasattr(model, "trunk_")


def test_targets_beyond_1e100_fail_in_one_line(tmp_path):
    path = tmp_path / "big.parquet"
    _frame(300).assign(y=lambda d: d["y"] * 1e200).to_parquet(path, index=False)
    _one_line(_train(path, tmp_path / "m", "--calibrate", "none"), INVALID,
              "target 'y' ranges from", "rescale the target")


# --------------------------------------------------------------------------- (e) NaN features


def test_nulls_in_features_at_predict_name_column_and_count_from_the_footers(tmp_path,
                                                                             tiny_model_dir):
    path = tmp_path / "nan.parquet"
    df = _frame(100)
    df.loc[::4, "x1"] = np.nan  # pandas writes NaN as null: counted in the footer
    df.to_parquet(path, index=False)
    assert read_footers(path).files[0].nulls["x1"] == 25
    _one_line(_ebf("predict", tiny_model_dir, str(path), "--out", str(tmp_path / "p"),
                   "--quiet"), INVALID, "'x1': 25 in 1 file(s)", "missing values",
              "drop or impute")
    assert not (tmp_path / "p").exists()


def test_nan_found_by_a_worker_is_one_line_and_v_keeps_the_traceback(tmp_path, tiny_model_dir):
    path = tmp_path / "nan.parquet"
    columns = {c: _frame(100)[c].to_numpy(copy=True) for c in [*TINY_FEATURES, "y"]}
    columns["x2"][::10] = np.nan  # stored as NaN, not null: only reading the rows finds it
    pq.write_table(pa.table({c: pa.array(v, from_pandas=False) for c, v in columns.items()}),
                   path)
    argv = ("predict", tiny_model_dir, str(path), "--out", str(tmp_path / "p"), "--quiet")
    _one_line(_ebf(*argv), INVALID, "ebf predict: error:", "'x2': 10 NaN", "drop or impute")
    verbose = _ebf("-v", *argv)
    assert verbose.returncode == INVALID and "Traceback" in verbose.stderr
    assert verbose.stderr.strip().split("\n")[-1].startswith("ebf predict: error:")


# --------------------------------------------------------------------------- (f) bad files


def test_a_file_that_is_not_parquet_is_named(tmp_path, tiny_model_dir):
    data = tmp_path / "data"
    data.mkdir()
    _frame(50).to_parquet(data / "part.0.parquet", index=False)
    (data / "part.1.parquet").write_bytes(b"PAR1 but not really" * 10)
    for res in (_train(data, tmp_path / "m"),
                _ebf("predict", tiny_model_dir, str(data), "--out", str(tmp_path / "p"),
                     "--quiet")):
        _one_line(res, INVALID, f"{data / 'part.1.parquet'} is not a readable Parquet file",
                  "remove it from the dataset's directory or replace it")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0,
                    reason="root reads a file whatever its permissions")
def test_a_file_without_read_permission_is_named(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    _frame(300, 0).to_parquet(data / "part.0.parquet", index=False)
    _frame(300, 1).to_parquet(data / "part.1.parquet", index=False)
    os.chmod(data / "part.1.parquet", 0)
    try:
        _one_line(_train(data, tmp_path / "m"), INVALID, str(data / "part.1.parquet"),
                  "permission")
    finally:
        os.chmod(data / "part.1.parquet", 0o644)


# --------------------------------------------------------------------------- (g) stale lock

_HOLDER = """
import sys, time
from pipelines.registry.store import Registry
with Registry(sys.argv[1]).lock():
    print("locked", flush=True)
    time.sleep(600)
"""


def _lock_holder(root: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(root)], env=_env(),
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_stale_lock_of_a_killed_writer_is_removed_by_registry_unlock(tmp_path):
    root = tmp_path / "reg"
    holder = _lock_holder(root)
    holder.kill()
    holder.wait(timeout=60)
    lock = root / "models" / "ebf" / ".lock"
    assert lock.exists()
    _one_line(_ebf("registry", "rollback", str(root)), INVALID, f"process {holder.pid}",
              "no longer running", f"ebf registry unlock {root / 'models' / 'ebf'}")
    res = _ebf("registry", "unlock", str(root))
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert f"removed the stale lock of process {holder.pid}" in res.stdout
    assert not lock.exists()
    res = _ebf("registry", "unlock", str(root))
    assert res.returncode == 0 and "not locked" in res.stdout


def test_registry_unlock_refuses_while_the_holder_runs(tmp_path):
    root = tmp_path / "reg"
    holder = _lock_holder(root)
    try:
        _one_line(_ebf("registry", "unlock", str(root)), INVALID,
                  f"process {holder.pid} on host", "is still running", "not unlocking")
        assert (root / "models" / "ebf" / ".lock").exists()
        with pytest.raises(RegistryBusyError, match="still running"):
            Registry(root).unlock()
    finally:
        holder.kill()
        holder.wait(timeout=60)


# --------------------------------------------------------------------------- (h) Ctrl-C


def _as_in_a_terminal() -> None:
    """Ctrl-C as in an interactive terminal: a test runner's worker (pytest-xdist) may ignore
    SIGINT, and an ignored signal stays ignored in its children (as under ``nohup``), which
    ``ebf`` respects."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt(argv: list[str], ready, processes: bool) -> tuple[int, str]:
    """Start ``ebf argv`` in its own process group, wait for ``ready(pid, stderr so far)``,
    send SIGINT to the group (what Ctrl-C in a terminal does) and return status and stderr."""
    proc = subprocess.Popen([sys.executable, "-m", "pipelines", *argv], env=_env(processes),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True, preexec_fn=_as_in_a_terminal)
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.extend(iter(
        lambda: proc.stderr.read1(4096), b"")), daemon=True)
    reader.start()
    deadline = time.monotonic() + 300
    while not ready(proc.pid, b"".join(chunks).decode(errors="replace")):
        assert proc.poll() is None, b"".join(chunks).decode()
        assert time.monotonic() < deadline, "the job never reached the point"
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGINT)
    proc.wait(timeout=300)
    reader.join(timeout=60)
    return proc.returncode, b"".join(chunks).decode(errors="replace")


def _imports_numpy(pid: int, _: str) -> bool:
    """Whether the process is importing what the parser needs (numpy's core is mapped)."""
    try:
        return "_multiarray_umath" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


STOPPED = "ebf train: stopped: interrupted; nothing was written"


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/PID/maps")
def test_ctrl_c_during_start_up_exits_130_in_one_line(tmp_path):
    path = tmp_path / "d.parquet"
    _frame(600).to_parquet(path, index=False)
    out = tmp_path / "m"
    status, err = _interrupt(["train", str(path), "--target", "y", "--out", str(out),
                              "--quiet"], _imports_numpy, processes=False)
    assert status == INTERRUPTED, err
    assert err.strip().split("\n") == [STOPPED], err
    assert not out.exists()
    _no_temporaries(tmp_path)


def test_ctrl_c_during_a_fit_on_worker_processes_exits_130_in_one_line(tmp_path):
    path = tmp_path / "d.parquet"
    # a fit of many seconds after the trunk: the interrupt lands before it ends even when a
    # loaded machine delays it (a fit of 20,000 rows and 100 trees took 2 s, and once ended
    # before the signal came)
    _frame(40_000).to_parquet(path, index=False)
    out = tmp_path / "m"
    status, err = _interrupt(
        ["train", str(path), "--target", "y", "--n-estimators", "400", "--trunk-leaves", "2",
         "--out", str(out), "--n-workers", "1"],
        lambda pid, err: "growing the trunk" in err, processes=True)
    assert status == INTERRUPTED, err
    lines = [line for line in err.strip().split("\n") if line.strip()]
    assert lines[-1] == STOPPED, err
    progress = ("starting a local Dask cluster", "dask: ", "reading partitions",
                "encoding partitions", "\rencoding", "\rreading", "growing the trunk",
                "\rgrowing", "\rmoving", "moving rows", "fitting branches", "\rfitting", " ")
    # stderr is a pipe: progress lines start with the time
    bodies = [re.sub(r"^\d\d:\d\d:\d\d ", "", line) for line in lines[:-1]]
    assert all(body.startswith(progress) for body in bodies), err  # no log, no traceback
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert not out.exists()
    _no_temporaries(tmp_path)


_SLOW_IMPORT = """
import importlib.abc, sys, time
class Slow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "pipelines.cli":  # the command's modules take long to import
            print("importing", flush=True)
            time.sleep(60)
        return None
sys.meta_path.insert(0, Slow())
from pipelines.entry import main
raise SystemExit(main())
"""


@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_while_the_command_is_still_importing_is_one_line(signum, status):
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_IMPORT, "train"], env=_entry_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_as_in_a_terminal)
    assert proc.stdout.readline() == "importing\n"
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == status
    assert err.strip().splitlines() == [err.strip()] and "start-up" in err, err


_SLOW_TEARDOWN = """
import atexit, sys, time, types
def teardown():  # the interpreter's teardown takes long
    print("tearing down", flush=True)
    time.sleep(60)
command = types.ModuleType("pipelines.cli")  # a command that succeeds at once, and leaves
command.main = lambda: atexit.register(teardown) and 0  # an exit handler (as Dask's import)
sys.modules["pipelines.cli"] = command
from pipelines.entry import main
raise SystemExit(main())
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_after_the_command_ends_with_its_status(signum):
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_TEARDOWN], env=_entry_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_as_in_a_terminal)
    assert proc.stdout.readline() == "tearing down\n"
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and err == ""


def _entry_env() -> dict:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
