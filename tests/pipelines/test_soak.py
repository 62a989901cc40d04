"""Soak: many mixed jobs against one registry on a shared multi-process cluster, disturbed.

Marked ``soak`` (not in the default run): ``python -m pytest -m soak tests/pipelines/test_soak.py``;
``EBF_SOAK_RUNS`` sets the number of jobs (default 200: within about 30 minutes on a loaded
2-core machine); ``EBF_SOAK_REPORT=path.json`` writes every job's command, exit status,
seconds, disturbance and outcome there (after each job) and the summary at the end.

A scheduler and two nanny-supervised workers run as separate processes, shared by every job.
Each job is an ``ebf`` command in its own process, chosen at random (seeded): ``train``,
``predict``, ``evaluate --json``, ``retrain``, and the registry's ``list``, ``show``,
``promote``, ``rollback`` and ``compare``. While it runs, one disturbance may come: a worker
killed (SIGKILL; its nanny starts a new one), or the job itself sent SIGTERM, SIGINT or
SIGKILL, at a random time or near the time the job usually ends (around its commit). After a
SIGKILLed job that may hold the registry's lock, ``ebf registry unlock`` clears it.

Each job is held to the exit-status contract of ``docs/cli.md`` (issue 45, item 3):

- 0 (10: retrain kept its champion) if and only if its output is committed and valid: the
  model verifies (:meth:`ebf.artifact.ModelReader.verify`), the predictions have every row,
  the evaluation is JSON, the registry gained the version or points where it was told, a
  read-only command printed its result;
- 130 / 143 only after SIGINT / SIGTERM, with nothing written: no output, the registry's
  versions and pointer unchanged, no temporary left;
- -9 only after SIGKILL (the output absent or complete), 1 only if a worker was killed under
  the job, 1 or 2 for a rollback with nothing to go back to.

At the end every registry version verifies (every file) and loads, the current version is
one of them, no temporary or aside folder and no lock is left except what SIGKILLed jobs
left (named by their pid), every completed train saved the same model and every completed
prediction equals the undisturbed prediction of the same model.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import statistics
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
_LEFTOVER = re.compile(r"^\..+\.(tmp|old)-[A-Za-z0-9._]+-(?P<pid>[0-9]+)-")
TEST_ROWS = 400
#: Relative weights of the jobs.
OPS = {"train": 2, "predict": 2, "evaluate": 2, "retrain": 3, "list": 1, "show": 1,
       "promote": 1, "rollback": 1, "compare": 1}
#: Jobs that take the registry's lock (a SIGKILL may leave it).
LOCKING = {"retrain", "promote", "rollback"}
STOPPED = {signal.SIGTERM: 143, signal.SIGINT: 130}


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


def _plan(rng: random.Random, usual: float) -> tuple[str | None, float]:
    """The disturbance of a job and when (seconds after its start): half of the signals
    near the usual end of such a job (``usual``), where its output is committed."""
    draw = rng.random()
    if draw < 0.5:
        return None, 0.0
    kind = ("worker" if draw < 0.6 else "SIGTERM" if draw < 0.75 else "SIGINT" if draw < 0.9
            else "SIGKILL")
    if kind != "worker" and rng.random() < 0.5:
        return kind, max(0.05, usual + rng.uniform(-0.6, 0.4))
    return kind, rng.uniform(0.2, max(0.5, 1.2 * usual))


def _run(argv: list[str], cluster_args: list[str], client, rng: random.Random,
         usual: float) -> dict:
    """Run one ``ebf`` job, disturbed as :func:`_plan` says."""
    proc = subprocess.Popen([sys.executable, "-m", "pipelines", *argv, *cluster_args],
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    kind, delay = _plan(rng, usual)
    done: list[bool] = []

    def disturb() -> None:
        if kind == "worker":
            done.append(_kill_a_worker(client, rng))
        elif proc.poll() is None:
            proc.send_signal(getattr(signal, kind))
            done.append(True)

    timer = threading.Timer(delay, disturb) if kind else None
    t0 = time.monotonic()
    if timer is not None:
        timer.start()
    out, err = proc.communicate(timeout=900)
    seconds = round(time.monotonic() - t0, 2)
    if timer is not None:
        timer.cancel()
        timer.join()
    client.wait_for_workers(2, timeout=120)  # the nanny has started a new one
    return {"argv": argv, "op": argv[1] if argv[0] == "registry" else argv[0],
            "rc": proc.returncode, "pid": proc.pid, "seconds": seconds,
            "disturbance": kind if done and done[0] else None, "at": round(delay, 2),
            "out": out.strip()[-300:], "err": err.strip()[-500:]}


def _registry_state(reg: Path) -> dict:
    from pipelines.registry.store import Registry

    if not (reg / "models").exists():
        return {"versions": [], "current": None, "history": [], "pointer": None}
    registry = Registry(reg)
    pointer = next((p for p in (reg / "models").glob("*/current.json")), None)
    try:
        current, history = registry.current(), registry.history()
    except Exception as exc:  # noqa: BLE001 - an unreadable pointer is a finding
        current, history = f"unreadable: {exc}", []
    return {"versions": registry.versions(), "current": current, "history": history,
            "pointer": None if pointer is None else pointer.read_bytes()}


def _output_valid(job: dict, out: Path | None) -> bool | None:
    """Whether the job's output exists (None: absent) and is valid."""
    if out is None or not out.exists():
        return None
    try:
        if job["op"] == "train":
            from ebf.artifact import open_model

            open_model(str(out)).verify()
        elif job["op"] == "predict":
            return len(pd.read_parquet(out)) == TEST_ROWS
        elif job["op"] == "evaluate":
            return json.loads(out.read_text())["ebf_output"] == "evaluation"
    except Exception:  # noqa: BLE001 - an invalid output is a finding
        return False
    return True


def _committed(job: dict, out: Path | None, before: dict, after: dict) -> bool | None:
    """Whether the job's output is committed and valid (None: nothing committed; False: an
    output or a registry change that is not valid)."""
    op = job["op"]
    if op in ("train", "predict", "evaluate"):
        return _output_valid(job, out)
    if op == "retrain":
        new = [v for v in after["versions"] if v not in before["versions"]]
        if new:
            from pipelines.registry.store import Registry

            try:
                Registry(Path(job["argv"][1])).verified_model(new[-1], every_file=True)
            except Exception:  # noqa: BLE001
                return False
            return True
        return True if "nothing to do" in job["out"] else None
    if op in ("promote", "rollback"):
        if after["pointer"] == before["pointer"]:
            wanted = int(job["argv"][2].rsplit("@", 1)[1]) if op == "promote" else None
            return True if wanted is not None and before["current"] == wanted else None
        if op == "promote":
            return after["current"] == int(job["argv"][2].rsplit("@", 1)[1])
        return bool(before["history"]) and after["current"] == before["history"][-1]
    return True if job["out"] else None  # list, show, compare: the result printed


def _violations(job: dict, committed: bool | None, before: dict, after: dict) -> list[str]:
    """How the job broke the exit-status contract (nothing: it kept it)."""
    rc, what, op = job["rc"], job["disturbance"], job["op"]
    found = []
    if committed is False:
        found.append("an output or registry change that is not valid")
    if rc in (0, 10):
        if not committed:
            found.append(f"status {rc} but nothing committed")
    elif rc in (130, 143):
        if what not in ("SIGINT", "SIGTERM") or STOPPED[getattr(signal, what)] != rc:
            found.append(f"status {rc} without its signal")
        if committed is not None or before["pointer"] != after["pointer"]:
            found.append(f"status {rc} but the output or the registry changed")
        if "nothing was written" not in job["err"]:
            found.append(f"status {rc} without the line saying nothing was written")
    elif rc == -signal.SIGKILL:
        if what != "SIGKILL":
            found.append("killed without SIGKILL")
    elif rc in (1, 2) and op == "rollback" and not before["history"]:
        pass  # nothing to go back to: refused
    elif rc == 1:
        if what != "worker":
            found.append("status 1 without a worker killed")
    else:
        found.append(f"status {rc} is not in the contract")
    return found


def _leftovers(root: Path, killed: set[int]) -> tuple[list[str], list[str]]:
    """Temporaries and locks: those of SIGKILLed jobs (allowed), and any other."""
    allowed, other = [], []
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            match = _LEFTOVER.match(name)
            if match is None and name != ".lock":
                continue
            path = os.path.join(folder, name)
            pid = int(match["pid"]) if match else _lock_pid(path)
            (allowed if pid in killed else other).append(path)
    return allowed, other


def _lock_pid(path: str) -> int | None:
    try:
        return int(json.loads(Path(path).read_text())["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _job(op: str, i: int, root: Path, reg: Path, state: dict, rng: random.Random) -> tuple:
    """The argv of job ``i`` and its output path (None where the registry is the output)."""
    data, test = str(root / "data"), str(root / "test")
    small = ["--n-estimators", "2", "--trunk-leaves", "2"]
    if op == "train":
        out = root / "models" / f"m{i}"
        return ["train", data, "--target", "y", *small, "--out", str(out), "--quiet"], out
    if op == "retrain":
        return ["retrain", str(reg), str(root / f"window{i % 4}"), "--target", "y", *small,
                "--quiet"], None
    if op == "predict":
        out = root / "predictions" / f"p{i}"
        return ["predict", str(reg), test, "--out", str(out), "--quiet"], out
    if op == "evaluate":
        out = root / "evaluations" / f"e{i}.json"
        return ["evaluate", str(reg), test, "--json", str(out), "--quiet"], out
    if op == "promote":
        return ["registry", "promote", f"{reg}@{rng.choice(state['versions'])}"], None
    if op == "compare":
        versions = [str(v) for v in state["versions"][-2:]]
        return ["registry", "compare", str(reg), test, "--target", "y", "--versions",
                *versions, "--quiet"], None
    return ["registry", op, str(reg), *(["--json"] if op in ("list", "show") else [])], None


def test_soak(cluster, tmp_path):
    scheduler_file, client = cluster
    cluster_args = ["--scheduler-file", scheduler_file, "--timeout", "60"]
    rng = random.Random(45)
    for name, frame in (("data", _frame(1200, 0)), ("test", _frame(TEST_ROWS, 1))):
        (tmp_path / name).mkdir()
        for part in range(2):
            frame.iloc[part::2].to_parquet(tmp_path / name / f"part-{part}.parquet")
    for k in range(4):
        (tmp_path / f"window{k}").mkdir()
        _frame(800, 10 + k).to_parquet(tmp_path / f"window{k}" / "part-0.parquet")
    for folder in ("models", "predictions", "evaluations"):
        (tmp_path / folder).mkdir()
    reg = tmp_path / "registry"
    report = os.environ.get("EBF_SOAK_REPORT")
    runs, killed, durations = [], set(), {op: [] for op in OPS}
    t_start = time.monotonic()
    for i in range(RUNS):
        state = _registry_state(reg)
        choices = [op for op in OPS if op in ("train", "retrain") or state["versions"]]
        op = rng.choices(choices, weights=[OPS[o] for o in choices])[0]
        argv, out = _job(op, i, tmp_path, reg, state, rng)
        usual = statistics.median(durations[op]) if durations[op] else 6.0
        job = _run(argv, cluster_args if op not in ("list", "show", "promote", "rollback")
                   else [], client, rng, usual)
        after = _registry_state(reg)
        committed = _committed(job, out, state, after)
        job.update(committed=committed, violations=_violations(job, committed, state, after))
        if job["disturbance"] is None and job["rc"] in (0, 10):
            durations[op].append(job["seconds"])
        if job["disturbance"] == "SIGKILL":
            killed.add(job["pid"])
            if op in LOCKING and (reg / "models").exists():  # it may hold the registry's lock
                unlock = subprocess.run([sys.executable, "-m", "pipelines", "registry",
                                         "unlock", str(reg)], env=_env(), capture_output=True,
                                        text=True)
                job["unlock_rc"] = unlock.returncode
                if unlock.returncode != 0:
                    job["violations"].append(f"unlock failed: {unlock.stderr.strip()}")
        runs.append(job)
        if report:  # after every job, so that a soak cut short still tells what it saw
            Path(report).write_text(json.dumps({"runs": runs}, indent=1, default=str))
    minutes = (time.monotonic() - t_start) / 60
    summary = verify(tmp_path, runs, killed, ["--scheduler-file", scheduler_file])
    summary["minutes"] = round(minutes, 1)
    print(json.dumps(summary))
    if report:
        Path(report).write_text(json.dumps({"summary": summary, "runs": runs}, indent=1,
                                           default=str))
    assert not summary["violations"], summary["violations"]
    assert not summary["leftovers"], summary["leftovers"]


def verify(root: Path, runs: list[dict], killed: set[int], cluster_args: list[str]) -> dict:
    """The end state of a soak in ``root`` (see the module docstring); its summary."""
    from ebf.artifact import load, model_hash
    from pipelines.io import read_parquet_metadata
    from pipelines.registry.store import Registry

    registry = Registry(root / "registry")
    versions = registry.versions()
    assert versions and registry.current() in versions
    for version in versions:
        load(registry.verified_model(version, every_file=True))
    allowed, other = _leftovers(root, killed)
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
            ran = subprocess.run([sys.executable, "-m", "pipelines", "predict",
                                  registry.model_path(version), str(root / "test"), "--out",
                                  str(ref), "--quiet", *cluster_args],
                                 env=_env(), capture_output=True, text=True)
            assert ran.returncode == 0, ran.stderr
            references[digest] = pd.read_parquet(ref)
        pd.testing.assert_frame_equal(frame, references[digest], check_exact=True)
    by_op: dict[str, dict[str, int]] = {}
    for r in runs:
        cell = by_op.setdefault(r["op"], {})
        cell[str(r["rc"])] = cell.get(str(r["rc"]), 0) + 1
    disturbances: dict[str, int] = {}
    for r in runs:
        key = r["disturbance"] or "none"
        disturbances[key] = disturbances.get(key, 0) + 1
    return {
        "runs": len(runs), "by_op_and_status": by_op, "disturbances": disturbances,
        "committed": sum(bool(r["committed"]) for r in runs), "versions": len(versions),
        "predictions_compared": len(predicted), "trains_compared": len(trained),
        "leftovers_of_sigkilled_jobs": len(allowed), "leftovers": other,
        "violations": [{"argv": r["argv"], "rc": r["rc"], "disturbance": r["disturbance"],
                        "at": r["at"], "why": r["violations"], "err": r["err"][-200:]}
                       for r in runs if r["violations"]],
    }
