"""Soak: many mixed jobs against one registry on a multi-process cluster, disturbed.

Marked ``soak`` (not in the default run): ``python -m pytest -m soak tests/pipelines/test_soak.py``;
``EBF_SOAK_RUNS`` sets the number of jobs (default 200: about an hour on 2 quiet cores);
``EBF_SOAK_REPORT=path.json`` writes every job's command, exit status, seconds and
disturbances there (after each job) and the summary at the end.

A scheduler and two nanny-supervised workers run as separate processes. Each job is an
``ebf`` command in its own process (train, predict, evaluate or retrain, at random, seeded);
while it runs, a worker may be killed (SIGKILL; its nanny starts a new one) and the job may
be sent SIGTERM. At the end:

- every registry version verifies (its record's model hash) and loads (every checksum),
  and the current version is one of them;
- no temporary or aside folder (``.*.tmp-*``, ``.*.old-*``) and no lock file is left;
- every train that completed saved the same model (same data, same seed), and every
  prediction that completed equals the undisturbed prediction of the same model;
- a job ends with 0, 10 (retrain kept the champion), 143 (SIGTERM) or, only if a worker
  was killed under it, 1.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.pipelines.processes import process_cluster

pytestmark = [pytest.mark.soak, pytest.mark.timeout(0)]

ROOT = Path(__file__).resolve().parents[2]
RUNS = int(os.environ.get("EBF_SOAK_RUNS", "200"))
_LEFTOVER = re.compile(r"^\..+\.(tmp|old)-")


def _env() -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH",
                                                                                 "")]))
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    return env


def _frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(rng.random((n, 4)), columns=["a", "b", "c", "d"])
    frame["y"] = 4 * frame["a"] - 2 * frame["b"] ** 2 + rng.normal(0, 0.2, n)
    return frame


@pytest.fixture
def cluster(tmp_path):
    """A scheduler and two workers (each under a nanny), separate processes."""
    from distributed import Client

    with process_cluster(tmp_path, _env()) as address_file, \
            Client(scheduler_file=address_file, timeout=60) as client:
        yield address_file, client


def _kill_a_worker(client, rng: random.Random) -> bool:
    try:
        pids = list(client.run(os.getpid, nanny=False).values())
    except Exception:
        return False
    if not pids:
        return False
    try:
        os.kill(rng.choice(pids), signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def _run(argv: list[str], scheduler_file: str, client, rng: random.Random) -> dict:
    """Run one ``ebf`` job, disturbed at random: a worker killed, SIGTERM sent."""
    proc = subprocess.Popen([sys.executable, "-m", "pipelines", *argv, "--quiet",
                             "--scheduler-file", scheduler_file, "--timeout", "60"],
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed, termed = [], []
    plan = rng.random()
    if plan < 0.25:  # a worker dies under the job
        delay = rng.uniform(1.0, 8.0)
        timer = threading.Timer(delay, lambda: killed.append(_kill_a_worker(client, rng)))
    elif plan < 0.45:  # the job is stopped
        delay = rng.uniform(0.5, 10.0)

        def term() -> None:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                termed.append(True)

        timer = threading.Timer(delay, term)
    else:
        timer = None
    t0 = time.monotonic()
    if timer is not None:
        timer.start()
    out, err = proc.communicate(timeout=600)
    seconds = round(time.monotonic() - t0, 2)
    if timer is not None:
        timer.cancel()
    client.wait_for_workers(2, timeout=120)  # the nanny has started a new one
    return {"argv": argv, "rc": proc.returncode, "seconds": seconds, "killed": any(killed),
            "termed": bool(termed), "err": err.strip()[-500:]}


def _leftovers(root: Path) -> list[str]:
    found = []
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            if _LEFTOVER.match(name) or name == ".lock":
                found.append(os.path.join(folder, name))
    return found


def test_soak(cluster, tmp_path):
    scheduler_file, client = cluster
    rng = random.Random(26)
    data, test = tmp_path / "data", tmp_path / "test"
    for folder, frame in ((data, _frame(4000, 0)), (test, _frame(1500, 1))):
        folder.mkdir()
        for part in range(4):
            frame.iloc[part::4].to_parquet(folder / f"part-{part}.parquet")
    windows = []
    for k in range(6):
        window = tmp_path / f"window{k}"
        window.mkdir()
        _frame(1500, 10 + k).to_parquet(window / "part-0.parquet")
        windows.append(window)
    reg = tmp_path / "registry"
    report = os.environ.get("EBF_SOAK_REPORT")
    runs = []
    for i in range(RUNS):
        op = rng.choice(["train", "predict", "evaluate", "retrain", "retrain"])
        if op == "train":
            out = tmp_path / "models" / f"m{i}"
            argv = ["train", str(data), "--target", "y", "--n-estimators", "4",
                    "--trunk-leaves", "3", "--out", str(out)]
        elif op == "retrain":
            argv = ["retrain", str(reg), str(windows[i % len(windows)]), "--target", "y",
                    "--n-estimators", "3", "--trunk-leaves", "3"]
        elif not (reg / "models").exists():
            continue
        elif op == "predict":
            out = tmp_path / "predictions" / f"p{i}"
            argv = ["predict", str(reg), str(test), "--out", str(out)]
        else:
            argv = ["evaluate", str(reg), str(test), "--json", str(tmp_path / f"e{i}.json")]
        result = _run(argv, scheduler_file, client, rng)
        runs.append(result)
        if report:  # after every job, so that a soak cut short still tells what it saw
            Path(report).write_text(json.dumps({"runs": runs}, indent=1))
        rc = result["rc"]
        assert rc in (0, 10, 143) or (rc == 1 and result["killed"]), result
    (tmp_path / "soak.json").write_text(json.dumps(runs, indent=1))
    summary = verify(tmp_path, runs, ["--scheduler-file", scheduler_file])
    print(json.dumps(summary))
    if report:
        Path(report).write_text(json.dumps({"summary": summary, "runs": runs}, indent=1))


def verify(root: Path, runs: list[dict], cluster_args: list[str]) -> dict:
    """The end state of a soak in ``root`` (see the module docstring); its summary.

    Also for a soak cut short: ``python -m tests.pipelines.test_soak ROOT REPORT`` checks
    what its jobs left, from the report ``EBF_SOAK_REPORT`` wrote.
    """
    from ebf.artifact import load, model_hash
    from pipelines.io import read_parquet_metadata
    from pipelines.registry.store import Registry

    registry = Registry(root / "registry")
    versions = registry.versions()
    assert versions and registry.current() in versions
    for version in versions:
        load(registry.verified_model(version))
    assert _leftovers(root) == []
    done = [r["argv"] for r in runs if r["rc"] == 0]
    trained = [model_hash(a[a.index("--out") + 1]) for a in done if a[0] == "train"]
    assert len(set(trained)) <= 1, "completed trains of the same data and seed differ"
    predicted = [Path(a[a.index("--out") + 1]) for a in done if a[0] == "predict"]
    references: dict[str, pd.DataFrame] = {}
    for out in predicted:
        frame = pd.read_parquet(out)
        digest = read_parquet_metadata(str(out))["ebf.model_hash"]
        if digest not in references:
            version = next(v for v in versions if model_hash(registry.model_path(v)) == digest)
            ref = root / "reference" / digest[:16]
            done = subprocess.run([sys.executable, "-m", "pipelines", "predict",
                                   registry.model_path(version), str(root / "test"), "--out",
                                   str(ref), "--quiet", *cluster_args],
                                  env=_env(), capture_output=True, text=True)
            assert done.returncode == 0, done.stderr
            references[digest] = pd.read_parquet(ref)
        pd.testing.assert_frame_equal(frame, references[digest], check_exact=True)
    summary = {
        "runs": len(runs), "completed": sum(r["rc"] in (0, 10) for r in runs),
        "sigterm": sum(r["termed"] for r in runs), "worker_kills": sum(r["killed"] for r in runs),
        "failed_after_kill": sum(r["rc"] == 1 for r in runs), "versions": len(versions),
        "predictions_compared": len(predicted), "trains_compared": len(trained),
    }
    return summary


if __name__ == "__main__":
    soak_root, soak_report = Path(sys.argv[1]), Path(sys.argv[2])
    runs = json.loads(soak_report.read_text())["runs"]
    summary = verify(soak_root, runs, [])  # a local cluster for the reference predictions
    print(json.dumps(summary))
    soak_report.write_text(json.dumps({"summary": summary, "runs": runs}, indent=1))

