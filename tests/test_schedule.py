"""The scheduled retraining examples: ``examples/retrain_job.py``, the task functions of
``examples/prefect_flow.py`` (called directly: Prefect is an optional extra, not installed
for the tests; with it, the flow's metrics artifact on a temporary Prefect server), the cron
wrapper ``examples/retrain_daily.sh`` and the lines of
``examples/crontab``, run on tiny date-partitioned datasets."""

from __future__ import annotations

import datetime as dt
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipelines.io import read_dataset
from pipelines.registry.retrain import EXIT_KEPT
from pipelines.registry.store import Registry

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
OPTIONS = {"n_estimators": 3, "trunk_leaves": 3}
DAYS = ["2024-03-01", "2024-03-02", "2024-03-03"]


@pytest.fixture
def examples(monkeypatch):
    """The example modules, imported as the scripts import each other (by file name)."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    return importlib.import_module("retrain_job"), importlib.import_module("prefect_flow")


def _frame(n: int, seed: int, target: str = "y") -> pd.DataFrame:
    """Friedman-like rows with a ``month`` feature (the name a ``month=`` key would clash
    with)."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, 3))
    y = 4 * (X[:, 0] > 0.5) + np.sin(6 * X[:, 2]) + 0.3 * rng.normal(size=n)
    return (pd.DataFrame(X, columns=["x0", "x1", "x2"])
            .assign(month=float(seed + 1), **{target: y}))


def _plain(fn):
    """The function under a Prefect task or flow (the function itself without Prefect)."""
    return getattr(fn, "fn", fn)


def test_daily_partitions_days_and_missing_day(tmp_path, examples):
    job, _ = examples
    root = tmp_path / "data"
    frames = {day: _frame(300 + 10 * i, i) for i, day in enumerate(DAYS)}
    paths = job.write_daily_partitions(root, frames, files_per_day=3)
    (root / "date=not-a-day").mkdir()  # ignored: not a partition of the job's
    (root / "date=2024-02-30").mkdir()

    assert job.available_days(root) == [dt.date.fromisoformat(d) for d in DAYS]
    assert job.available_days(tmp_path / "absent") == []
    for i, day in enumerate(DAYS):
        path = job.partition_path(str(root), day)
        assert path == str(root / f"date={day}") == paths[dt.date.fromisoformat(day)]
        assert len(list(Path(path).glob("part.*.parquet"))) == 3
        # read with the model's columns the key is no column, and `month` is the feature
        back = read_dataset(path, list(frames[day].columns)).compute()
        pd.testing.assert_frame_equal(back.reset_index(drop=True), frames[day])
        assert job.partition_path(root, dt.date.fromisoformat(day)) == path
        assert back["month"].eq(i + 1).all()

    with pytest.raises(FileNotFoundError) as err:
        job.partition_path(root, "2024-04-01")
    message = str(err.value)
    assert str(root / "date=2024-04-01") in message
    assert ", ".join(DAYS) in message
    with pytest.raises(FileNotFoundError, match="Days available under .*: none"):
        job.partition_path(tmp_path / "empty", "2024-04-01")
    with pytest.raises(FileExistsError):  # a day is written once unless overwrite=True
        job.write_daily_partitions(root, {DAYS[0]: frames[DAYS[0]]})
    job.write_daily_partitions(root, {DAYS[0]: frames[DAYS[1]]}, overwrite=True, files_per_day=1)
    assert len(read_dataset(job.partition_path(root, DAYS[0]), ["y"])) == len(frames[DAYS[1]])


def test_parse_day(examples):
    job, _ = examples
    assert job.parse_day("2013-07-01") == dt.date(2013, 7, 1)
    assert job.parse_day(dt.datetime(2013, 7, 1, 23, 59)) == dt.date(2013, 7, 1)
    yesterday = job.parse_day(None)
    assert dt.date.today() - yesterday in (dt.timedelta(days=1), dt.timedelta(0))  # midnight
    with pytest.raises(ValueError, match="ISO date.*'2013-02-30'"):
        job.parse_day("2013-02-30")


def test_run_retrain_and_the_flow_tasks(tmp_path, examples, dask_client, monkeypatch,
                                        capsys):
    job, flow = examples
    root, reg_url = tmp_path / "data", str(tmp_path / "registry")
    job.write_daily_partitions(root, {day: _frame(1500, i) for i, day in enumerate(DAYS)})
    find_partition, retrain_partition = _plain(flow.find_partition), _plain(
        flow.retrain_partition)

    assert find_partition(str(root), DAYS[0]) == str(root / f"date={DAYS[0]}")
    first = retrain_partition(reg_url, str(root), DAYS[0],
                              {"target": "y", "train_options": OPTIONS})
    assert (first["version"], first["decision"], first["action"], first["exit_code"]) == (
        1, "trained", "train", 0)
    assert first["drift"] is None and first["day"] == DAYS[0]
    assert first["data"] == str(root / f"date={DAYS[0]}")
    assert first["metrics"]["challenger"]["n"] == 150  # the most recent 10% held out
    reg = Registry(reg_url)
    # the version's features are the data's columns: neither the key nor the target
    assert reg.record(1)["lineage"]["params"]["features"] == ["x0", "x1", "x2", "month"]

    second = job.run_retrain(reg_url, root, DAYS[1], client=dask_client)
    assert second["version"] == 2 and second["day"] == DAYS[1]
    assert second["action"] in ("update", "refit") and second["drift"] == second["action"]
    assert second["decision"] in ("promoted", "kept")
    assert second["exit_code"] == (EXIT_KEPT if second["decision"] == "kept" else 0)
    assert set(second["metrics"]) == {"champion", "challenger"}
    assert (reg.current() == 2) == (second["decision"] == "promoted")
    json.dumps(second, allow_nan=False)  # a summary a scheduler can store

    again = retrain_partition(reg_url, str(root), DAYS[1])  # a retried task is a no-op
    assert again["reused"] and again["version"] == 2 and again["decision"] == second["decision"]
    with pytest.raises(FileNotFoundError, match="2030-01-01"):
        retrain_partition(reg_url, str(root), "2030-01-01")
    assert reg.versions() == [1, 2]

    # the flow, run once from the command line: it connects to Dask itself (threads here)
    monkeypatch.setenv("EBF_LOCAL_PROCESSES", "0")
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    with pytest.raises(FileNotFoundError, match="2030-01-01"):
        _plain(flow.nightly_retrain)(reg_url, str(root), "2030-01-01")
    capsys.readouterr()
    status = flow.main([reg_url, str(root), "--day", DAYS[2]])
    third = json.loads(capsys.readouterr().out)
    assert third["version"] == 3 and third["day"] == DAYS[2]
    assert status == third["exit_code"] == (0 if third["decision"] == "promoted" else EXIT_KEPT)
    assert (reg.current() == 3) == (third["decision"] == "promoted")
    if flow.prefect is None:
        assert flow.main([reg_url, str(root), "--serve"]) == 2
        assert "pip install -e '.[schedule]'" in capsys.readouterr().err


_SUMMARIES = [  # the retrain task's summaries (retrain_job.summarize) of version 1 and 2
    {"day": "2024-03-01", "data": "d1", "version": 1, "decision": "trained", "action": "train",
     "exit_code": 0, "reused": False, "reason": "empty registry", "drift": None,
     "metrics": {"challenger": {"n": 150, "rmse": 1.5, "nlpd": 1.9}, "champion": None}},
    {"day": "2024-03-02", "data": "d2", "version": 2, "decision": "kept", "action": "update",
     "exit_code": EXIT_KEPT, "reused": True, "reason": "every tested split holds",
     "drift": "update", "metrics": {"champion": {"n": 160, "rmse": 1.4, "nlpd": 1.8},
                                    "challenger": {"n": 160, "rmse": 1.3, "nlpd": 1.85}}},
]


def test_the_metrics_artifact_table_and_description(examples):
    """What the flow publishes as its table artifact, built without Prefect."""
    _, flow = examples
    first, second = _SUMMARIES
    assert flow.metrics_table(first) == [
        {"metric": "n", "champion": None, "challenger": 150},
        {"metric": "rmse", "champion": None, "challenger": 1.5},
        {"metric": "nlpd", "champion": None, "challenger": 1.9}]
    assert flow.metrics_table(second) == [
        {"metric": m, "champion": second["metrics"]["champion"][m],
         "challenger": second["metrics"]["challenger"][m]} for m in ("n", "rmse", "nlpd")]
    assert flow.metrics_description(first) == (
        "ebf retrain of 2024-03-01: version 1, train, **trained** (empty registry); drift "
        "check: none (version 1)")
    assert flow.metrics_description(second).endswith(
        "version 2, update, **kept** (every tested split holds); drift check: update (a "
        "re-run: the version was made before)")
    assert re.fullmatch(r"[a-z0-9-]+", flow.ARTIFACT_KEY)  # Prefect's rule for keys
    json.dumps(flow.metrics_table(second), allow_nan=False)
    if flow.prefect is None:  # the task function runs without Prefect and gives the table
        assert _plain(flow.publish_metrics)(second) == flow.metrics_table(second)


def test_the_flow_publishes_the_metrics_artifact(examples):
    """With Prefect installed (the schedule extra), on a temporary Prefect server."""
    pytest.importorskip("prefect")
    from prefect import flow as prefect_flow
    from prefect.artifacts import Artifact
    from prefect.testing.utilities import prefect_test_harness

    _, flow = examples

    @prefect_flow
    def publish(summary):
        return flow.publish_metrics(summary)

    with prefect_test_harness(server_startup_timeout=120):  # a busy machine starts it slowly
        assert publish(_SUMMARIES[1]) == flow.metrics_table(_SUMMARIES[1])
        artifact = Artifact.get(flow.ARTIFACT_KEY)
        assert artifact.type == "table" and artifact.flow_run_id is not None
        assert json.loads(artifact.data) == flow.metrics_table(_SUMMARIES[1])
        assert artifact.description == flow.metrics_description(_SUMMARIES[1])


def _crontab() -> tuple[dict[str, str], str, str]:
    """(environment lines, the active job's command, the commented alternative's command)
    of examples/crontab, each command as cron hands it to the shell (``\\%`` -> ``%``)."""
    env, jobs, alternatives = {}, [], []
    schedule = re.compile(r"^([0-9*/,-]+\s+){5}")  # minute hour day month weekday
    for line in (EXAMPLES / "crontab").read_text().splitlines():
        if re.match(r"^[A-Z_]+=", line):
            key, value = line.split("=", 1)
            env[key] = value
        elif schedule.match(line):
            jobs.append(line)
        elif line.startswith("# ") and schedule.match(line[2:]) and "ebf" in line:
            alternatives.append(line[2:])
    assert len(jobs) == 1 and len(alternatives) == 1, (jobs, alternatives)
    commands = []
    for line in (jobs[0], alternatives[0]):
        command = schedule.sub("", line)
        # cron ends the command at an unescaped %; the file must escape every one
        assert not re.search(r"(?<!\\)%", command), f"unescaped % in: {command}"
        commands.append(command.replace("\\%", "%"))
    return env, commands[0], commands[1]


def _shell(command: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(["/bin/sh", "-c", command], env=env, capture_output=True, text=True,
                          timeout=150)


def _job_env(tmp_path: Path, cron_env: dict[str, str], **extra: str) -> dict[str, str]:
    """cron's environment for the job, pointed at this checkout, the test's Python's ebf and
    tiny data; the local cluster in threads."""
    env = {k: v for k, v in os.environ.items() if k != "DASK_SCHEDULER_ADDRESS"}
    env.update(cron_env)
    bin_dir = os.path.dirname(sys.executable)
    env.update(
        PATH=os.pathsep.join([bin_dir, "/usr/bin", "/bin"]), HOME=str(tmp_path),
        EBF_REPO=str(REPO), REGISTRY=str(tmp_path / "registry"), DATA=str(tmp_path / "data"),
        PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(
            os.pathsep),
        EBF_LOCAL_PROCESSES="0", **extra)
    return env


def _last_version(text: str) -> dict:
    """The last ``version N: ACTION, DECISION`` line of ebf retrain's report in the log."""
    found = re.findall(r"^version (\d+): [a-z-]+, ([a-z]+)$", text, flags=re.M)
    assert found, text
    return {"version": int(found[-1][0]), "decision": found[-1][1]}


def _gnu_yesterday() -> str | None:
    """``date -d yesterday +%F`` as the crontab line runs it (None without GNU date)."""
    if shutil.which("date") is None:
        return None
    done = subprocess.run(["date", "-d", "yesterday", "+%F"], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else None


def test_crontab_lines_and_the_wrapper_run_the_job(tmp_path, examples):
    job, _ = examples
    if not os.path.exists(os.path.join(os.path.dirname(sys.executable), "ebf")):
        pytest.skip("the ebf command is not installed beside this Python (pip install -e .)")
    yesterday = _gnu_yesterday()
    if yesterday is None:
        pytest.skip("the crontab line needs GNU date (date -d yesterday)")
    cron_env, wrapped, plain = _crontab()
    first_day = (dt.date.fromisoformat(yesterday) - dt.timedelta(days=7)).isoformat()
    job.write_daily_partitions(tmp_path / "data", {
        first_day: _frame(1200, 0, "arr_delay"), yesterday: _frame(1200, 1, "arr_delay")})
    log = tmp_path / "ebf-retrain.log"

    # the active line (the wrapper) on a backfilled day: version 1
    done = _shell(wrapped, _job_env(tmp_path, cron_env, EBF_RETRAIN_DAY=first_day))
    assert done.returncode == 0 and not done.stdout, (done.stdout, log.read_text())
    assert _last_version(log.read_text()) == {"version": 1, "decision": "trained"}

    # the line without the wrapper, on yesterday's partition: exit 0 for promoted and kept
    done = _shell(plain, _job_env(tmp_path, cron_env))
    assert done.returncode == 0 and not done.stdout, (done.stdout, log.read_text())
    second = _last_version(log.read_text())
    assert second["version"] == 2 and second["decision"] in ("promoted", "kept")
    assert Registry(tmp_path / "registry").versions() == [1, 2]

    # the wrapper again on yesterday (its default day): a no-op, a healthy night
    env = _job_env(tmp_path, cron_env)
    # (with the crontab's options: the run's key includes them)
    wrapper = [str(EXAMPLES / "retrain_daily.sh"), env["REGISTRY"], env["DATA"], "--target",
               "arr_delay"]
    done = subprocess.run(wrapper, env=env, capture_output=True, text=True, timeout=150)
    assert done.returncode == 0, done.stderr
    assert "version 2 was made from the same inputs" in done.stdout
    assert ("champion kept" in done.stdout) == (second["decision"] == "kept")

    # a day without data: exit 2 before ebf runs, naming the path and the days there;
    # through the crontab line cron gets the one failure line to mail
    done = _shell(wrapped, _job_env(tmp_path, cron_env, EBF_RETRAIN_DAY="2030-01-01"))
    assert done.returncode == 0 and done.stdout.startswith("ebf retrain failed (exit 2)")
    assert f"{env['DATA']}/date=2030-01-01" in log.read_text()
    assert f"{first_day} {yesterday}" in log.read_text()
    assert Registry(tmp_path / "registry").versions() == [1, 2]


@pytest.mark.parametrize("status, expected", [(0, 0), (EXIT_KEPT, 0), (1, 1), (2, 2), (143, 143)])
def test_wrapper_exit_statuses(tmp_path, status, expected):
    """ebf's exit 10 (champion kept) is a healthy night; every other failure passes through."""
    (tmp_path / "data" / "date=2024-03-01").mkdir(parents=True)
    fake = tmp_path / "ebf"
    fake.write_text(f'#!/bin/sh\necho "$@" > "{tmp_path}/args"\nexit {status}\n')
    fake.chmod(0o755)
    env = dict(os.environ, EBF=str(fake), EBF_RETRAIN_DAY="2024-03-01")
    done = subprocess.run([str(EXAMPLES / "retrain_daily.sh"), "reg", f"{tmp_path}/data/",
                           "--target", "y"], env=env, capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == expected
    assert (tmp_path / "args").read_text().split() == [
        "retrain", "reg", f"{tmp_path}/data/date=2024-03-01", "--quiet", "--target", "y"]
    assert ("FAILED with exit status" in done.stderr) == (expected != 0)
    assert ("champion kept" in done.stdout) == (status == EXIT_KEPT)

    usage = subprocess.run([str(EXAMPLES / "retrain_daily.sh"), "reg"], env=env,
                           capture_output=True, text=True, timeout=30)
    assert usage.returncode == 2 and "usage:" in usage.stderr
