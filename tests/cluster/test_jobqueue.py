"""cluster.jobqueue: SLURM and PBS job scripts carry the resources asked for, line by line."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys

import pytest
from dask.utils import parse_bytes

from cluster.jobqueue import jobqueue_options, walltime_seconds, worker_lifetime

pytest.importorskip("dask_jobqueue", reason="needs dask-jobqueue (pip install 'ebf[cluster]')")

from cluster.jobqueue import pbs_cluster, slurm_cluster  # noqa: E402


def _split_script(script: str, prefix: str) -> tuple[list[str], list[str], list[str]]:
    """(directive lines, other shell lines, the worker command's words) of a job script."""
    lines = [line for line in script.splitlines() if line.strip()]
    assert lines[0] == "#!/usr/bin/env bash"
    directives = [line for line in lines[1:] if line.startswith(prefix)]
    rest = [line for line in lines[1:] if not line.startswith("#")]
    command = shlex.split(rest[-1], posix=False)  # keeps ${TMPDIR:-/tmp} as written
    return directives, rest[:-1], command


def _flags(words: list[str]) -> dict[str, str | None]:
    """``--flag value`` pairs (and bare ``--flag`` -> None) of a command."""
    out: dict[str, str | None] = {}
    i = 0
    while i < len(words):
        if words[i].startswith("--"):
            has_value = i + 1 < len(words) and not words[i + 1].startswith("--")
            out[words[i]] = words[i + 1] if has_value else None
            i += 2 if has_value else 1
        else:
            i += 1
    return out


@pytest.fixture
def pythonpath(monkeypatch, tmp_path):
    """A PYTHONPATH with a space in it, as the job script must export it."""
    path = f"{tmp_path / 'my src'}:/opt/ebf"
    monkeypatch.setenv("PYTHONPATH", path)
    return path


def test_slurm_job_script_has_the_resources_asked(pythonpath):
    cluster = slurm_cluster(cores=8, memory="32GiB", walltime="02:00:00", queue="compute",
                            account="proj42", job_extra_directives=["--gres=gpu:1"],
                            job_script_prologue=["module load gcc"], branch_memory="2GiB",
                            dashboard_address=":0")
    try:
        script = cluster.job_script()
        address = cluster.scheduler_address
    finally:
        cluster.close()
    directives, shell, command = _split_script(script, "#SBATCH")
    assert directives == [
        "#SBATCH -J ebf-worker",
        "#SBATCH -p compute",
        "#SBATCH -A proj42",
        "#SBATCH -n 1",
        "#SBATCH --cpus-per-task=8",
        "#SBATCH --mem=32G",
        "#SBATCH -t 02:00:00",
        "#SBATCH --gres=gpu:1",
    ]
    assert shell == [f"export PYTHONPATH={shlex.quote(pythonpath)}", "module load gcc"]
    assert command[:4] == [sys.executable, "-m", "distributed.cli.dask_worker", address]
    flags = _flags(command)
    assert flags["--nthreads"] == "1" and flags["--nworkers"] == "8"  # one thread per worker
    assert parse_bytes(flags["--memory-limit"]) == 4 * 2**30  # 32GiB / 8 workers
    assert flags["--local-directory"] == "${TMPDIR:-/tmp}"
    assert flags["--lifetime"] == "6600s" and flags["--lifetime-stagger"] == "300s"
    assert "--nanny" in flags


def test_pbs_job_script_has_the_resources_asked(monkeypatch):
    monkeypatch.delenv("PYTHONPATH", raising=False)
    cluster = pbs_cluster(cores=4, memory="16GiB", processes=2, walltime="00:30:00",
                          queue="workq", account="proj42", local_directory="/scratch/me",
                          worker_extra_args=["--resources", "branch=1"], dashboard_address=":0")
    try:
        script = cluster.job_script()
    finally:
        cluster.close()
    directives, shell, command = _split_script(script, "#PBS")
    assert directives == [
        "#PBS -N ebf-worker",
        "#PBS -q workq",
        "#PBS -A proj42",
        "#PBS -l select=1:ncpus=4:mem=16GB",
        "#PBS -l walltime=00:30:00",
    ]
    assert shell == []  # no PYTHONPATH to pass on
    flags = _flags(command)
    assert flags["--nthreads"] == "2" and flags["--nworkers"] == "2"
    assert parse_bytes(flags["--memory-limit"]) == 8 * 2**30
    assert flags["--local-directory"] == "/scratch/me"
    # the recipe's lifetime first (30 min: a 3 min margin), then the caller's arguments
    assert command[-6:] == ["--lifetime", "1620s", "--lifetime-stagger", "90s", "--resources",
                            "branch=1"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("make", [slurm_cluster, pbs_cluster])
def test_job_scripts_are_valid_bash(make, tmp_path, pythonpath):
    cluster = make(cores=2, memory="4GiB", job_script_prologue=["echo start"],
                   dashboard_address=":0")
    try:
        path = tmp_path / "job.sh"
        path.write_text(cluster.job_script())
    finally:
        cluster.close()
    proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_extra_keywords_go_to_the_cluster_class(tmp_path):
    cluster = slurm_cluster(cores=2, memory="4GiB", job_directives_skip=["-n 1"],
                            dashboard_address=":0", scheduler_file=str(tmp_path / "s.json"),
                            scheduler_options={"host": "127.0.0.1"})
    try:
        assert "#SBATCH -n 1" not in cluster.job_script()
        # the caller's scheduler options merged with the recipe's (the scheduler file)
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        assert cluster.scheduler_address in (tmp_path / "s.json").read_text()
    finally:
        cluster.close()


def test_options_are_a_pure_recipe(monkeypatch):
    monkeypatch.delenv("PYTHONPATH", raising=False)
    options = jobqueue_options("slurm", cores=6, memory=6 * 10**9, processes=3,
                               walltime="1-00:00:00", scheduler_file="~/dask/s.json",
                               interface="ib0", python="/opt/py/bin/python")
    assert options["memory"] == "6GB" and options["processes"] == 3
    assert options["python"] == "/opt/py/bin/python" and options["interface"] == "ib0"
    assert options["job_script_prologue"] == []
    assert options["worker_extra_args"] == ["--lifetime", "85800s", "--lifetime-stagger", "300s"]
    scheduler = options["scheduler_options"]
    assert scheduler["scheduler_file"].endswith("/dask/s.json")
    assert not scheduler["scheduler_file"].startswith("~")
    assert "queue" not in options and "account" not in options  # unset stays unset


@pytest.mark.parametrize("kwargs, error, match", [
    ({"system": "sge"}, ValueError, "system must be one of"),
    ({"cores": 0}, ValueError, "cores must be a positive integer"),
    ({"processes": 3}, ValueError, r"processes \(3\) must divide cores \(4\)"),
    ({"memory": "lots"}, ValueError, "memory must be a positive number of bytes"),
    ({"walltime": "2h"}, ValueError, "walltime must be HH:MM:SS or D-HH:MM:SS for slurm"),
    ({"system": "pbs", "walltime": "1-00:00:00"}, ValueError,
     "walltime must be HH:MM:SS for pbs"),
    ({"job_extra_directives": "--gres=gpu:1"}, TypeError, "job_extra_directives must be a "
     "sequence of strings"),
    ({"branch_memory": "4GiB"}, ValueError, "a worker of 1 thread with a memory limit of 4GiB "
     "fits 1 branch of 4GiB only above Dask's pause threshold"),
])
def test_bad_options_say_what_to_do(kwargs, error, match):
    given = {"system": "slurm", "cores": 4, "memory": "16GiB", **kwargs}
    system = given.pop("system")
    with pytest.raises(error, match=match):
        jobqueue_options(system, **given)


def test_walltimes_and_lifetimes():
    assert walltime_seconds("00:09:59") == 599 and walltime_seconds("48:00:00") == 172800
    assert worker_lifetime(599) == []  # too short for a margin
    assert worker_lifetime(600) == ["--lifetime", "480s", "--lifetime-stagger", "60s"]
    # the margin grows with the walltime up to 10 minutes; a worker never outlives its job
    for walltime in (600, 1800, 7200, 86400):
        args = worker_lifetime(walltime)
        lifetime, stagger = int(args[1][:-1]), int(args[3][:-1])
        assert lifetime + stagger < walltime and 60 <= stagger <= 300
    with pytest.raises(ValueError, match="walltime must be positive"):
        walltime_seconds("00:00:00")


def test_missing_dask_jobqueue_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "dask_jobqueue", None)  # import fails
    with pytest.raises(ImportError, match=r"slurm_cluster needs dask-jobqueue: pip install "
                       r"'ebf\[cluster\]' \(or pip install dask-jobqueue\)"):
        slurm_cluster(cores=1, memory="1GiB")
    with pytest.raises(ImportError, match="pbs_cluster needs dask-jobqueue"):
        pbs_cluster(cores=1, memory="1GiB")
