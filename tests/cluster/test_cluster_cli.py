"""``ebf cluster``: job scripts, a scheduler holding batch jobs of workers (against stand-ins
for sbatch and scancel that run the job script on this machine), Kubernetes manifests."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from basics.locations import file_kind
from pipelines.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_print_shows_the_slurm_job_script(capsys, monkeypatch):
    pytest.importorskip("dask_jobqueue")
    monkeypatch.delenv("PYTHONPATH", raising=False)
    assert main(["cluster", "slurm", "--cores", "8", "--memory", "32GiB", "--processes", "4",
                 "--walltime", "04:00:00", "--queue", "gpu", "--account", "proj42",
                 "--job-extra=--gres=gpu:1", "--prologue", "module load cuda",
                 "--worker-extra=--resources=branch=1", "--print"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:10] == ["#!/usr/bin/env bash", "", "#SBATCH -J ebf-worker",
                          "#SBATCH -p gpu", "#SBATCH -A proj42", "#SBATCH -n 1",
                          "#SBATCH --cpus-per-task=8", "#SBATCH --mem=32G",
                          "#SBATCH -t 04:00:00", "#SBATCH --gres=gpu:1"]
    assert lines[10] == "module load cuda"
    words = lines[11].split()
    assert words[:4] == [sys.executable, "-m", "distributed.cli.dask_worker",
                         "tcp://<scheduler-address>:8786"]
    command = " ".join(words)
    assert "--nthreads 2 --memory-limit 8.00GiB --nworkers 4" in command
    assert command.endswith("--lifetime 13800s --lifetime-stagger 300s --resources=branch=1")
    assert len(lines) == 12


def test_print_shows_the_pbs_job_script(capsys):
    pytest.importorskip("dask_jobqueue")
    assert main(["cluster", "pbs", "--cores", "2", "--memory", "8GB", "--walltime", "00:20:00",
                 "--local-directory", "/scratch", "--print"]) == 0
    script = capsys.readouterr().out
    assert "#PBS -l select=1:ncpus=2:mem=7630MB\n#PBS -l walltime=00:20:00\n" in script
    assert "--nthreads 1 --memory-limit 3.73GiB --nworkers 2" in script
    assert "--local-directory /scratch --lifetime 1080s --lifetime-stagger 60s" in script


@pytest.mark.parametrize("argv, message", [
    (["--processes", "3", "--print"], "processes (3) must divide cores (4)"),
    (["--walltime", "90m", "--print"], "walltime must be HH:MM:SS or D-HH:MM:SS for slurm"),
    (["--branch-memory", "8GiB", "--print"], "give each job at least 40GiB"),
    (["--scheduler-file", "s.json", "--print"], "--scheduler-file goes with --jobs"),
])
def test_bad_jobqueue_options_are_usage_errors(argv, message, capsys):
    assert main(["cluster", "slurm", "--cores", "4", "--memory", "16GiB", *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("processes, advice", [
    ("4", "give each job at least 40GiB (--memory: 10GiB for each of its 4 workers), or pass"),
    ("2", "give each job at least 40GiB (--memory: 20GiB for each of its 2 workers), or pass"),
])
def test_branch_memory_advice_matches_the_worker_layout(processes, advice, capsys):
    """A batch job's workers share its memory: fewer threads per worker (more processes)
    fit no larger branch, so neither layout is told to run fewer threads; the job's memory
    that fits is named."""
    assert main(["cluster", "slurm", "--cores", "4", "--memory", "16GiB", "--processes",
                 processes, "--branch-memory", "8GiB", "--print"]) == 2
    err = capsys.readouterr().err
    assert advice in err and "thread" not in err.split("):", 1)[1]


def test_pods_of_several_threads_are_told_how_many_fit(capsys):
    """A pod's memory is its worker's: fewer threads give each branch more."""
    assert main(["cluster", "k8s", "--image", "reg.example.com/ebf:1", "--worker-cores", "4",
                 "--worker-memory", "16GiB", "--branch-memory", "5GiB"]) == 2
    assert ("give each worker at least 25GiB, at most 2 threads per worker, or pass a smaller"
            in capsys.readouterr().err)
    assert main(["cluster", "k8s", "--image", "reg.example.com/ebf:1", "--worker-memory",
                 "4GiB", "--branch-memory", "5GiB"]) == 2
    err = capsys.readouterr().err
    assert "give each worker at least 7GiB, or pass a smaller" in err and "threads" not in err


def test_jobs_need_the_batch_system(capsys, monkeypatch, tmp_path):
    pytest.importorskip("dask_jobqueue")
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch
    assert main(["cluster", "slurm", "--cores", "1", "--memory", "1GiB", "--jobs", "2"]) == 2
    assert ("`sbatch` is not on PATH: run ebf cluster slurm --jobs on a machine that submits "
            "SLURM jobs") in capsys.readouterr().err


def test_missing_dask_jobqueue_names_the_extra(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "dask_jobqueue", None)
    assert main(["cluster", "pbs", "--cores", "1", "--memory", "1GiB", "--print"]) == 1
    assert ("ebf cluster pbs needs dask-jobqueue: pip install 'ebf[cluster]'"
            in capsys.readouterr().err)


def test_k8s_prints_a_manifest_with_its_command(capsys):
    assert main(["cluster", "k8s", "--image", "ebf:0.1.0", "--name", "nightly", "--workers",
                 "3", "--worker-cores", "2", "--worker-memory", "6GiB", "--env", "A=1=2",
                 "--secret", "s3-credentials", "--namespace", "science"]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[0] == "# ebf-output: cluster-spec"
    assert lines[2] == ("# ebf cluster k8s --image ebf:0.1.0 --name nightly --namespace science "
                        "--workers 3 --worker-cores 2 --worker-memory 6GiB --env A=1=2 "
                        "--secret s3-credentials")
    manifest = yaml.safe_load(text)
    assert manifest["kind"] == "DaskCluster" and manifest["metadata"] == {
        "name": "nightly", "namespace": "science"}
    worker = manifest["spec"]["worker"]["spec"]["containers"][0]
    assert manifest["spec"]["worker"]["replicas"] == 3
    assert worker["env"] == [{"name": "A", "value": "1=2"}]
    assert worker["resources"]["limits"] == {"cpu": "2", "memory": "6Gi"}


@pytest.mark.parametrize("argv, message", [
    (["--env", "NOVALUE"], "--env takes NAME=VALUE, got 'NOVALUE'"),
    (["--name", "My_Cluster"], "name must be lower-case letters"),
    (["--job", "ebf train 'unclosed"], "No closing quotation"),
])
def test_bad_k8s_options_are_usage_errors(argv, message, capsys):
    assert main(["cluster", "k8s", "--image", "ebf:0.1.0", *argv]) == 2
    assert message in capsys.readouterr().err


def test_k8s_out_follows_the_output_policy(tmp_path, capsys):
    out = tmp_path / "cluster.yaml"
    base = ["cluster", "k8s", "--image", "ebf:0.1.0", "--out", str(out)]
    assert main(base) == 0
    first = out.read_text()
    assert file_kind(out) == "cluster-spec"  # the tag on its first line says ebf wrote it
    tagged_later = tmp_path / "later.yaml"
    tagged_later.write_text("kind: Deployment\n" + first)
    assert file_kind(tagged_later) is None
    assert main(base + ["--workers", "5"]) == 2  # exists
    assert "already exists; pass --overwrite" in capsys.readouterr().err
    assert out.read_text() == first
    assert main(base + ["--workers", "5", "--overwrite"]) == 0  # an ebf manifest: replaced
    assert yaml.safe_load(out.read_text())["spec"]["worker"]["replicas"] == 5
    foreign = tmp_path / "mine.yaml"
    foreign.write_text("kind: Deployment\n")
    assert main(["cluster", "k8s", "--image", "ebf:0.1.0", "--out", str(foreign),
                 "--overwrite"]) == 2
    assert "not an ebf cluster-spec file" in capsys.readouterr().err
    assert foreign.read_text() == "kind: Deployment\n"


_SBATCH = """#!/usr/bin/env bash
# stands in for SLURM's sbatch: runs the job script here, in its own process group
id=$(( $(ls "$FAKE_SLURM" | grep -c '\\.sh$') + 1001 ))
cp "$1" "$FAKE_SLURM/$id.sh"
setsid bash "$FAKE_SLURM/$id.sh" > "$FAKE_SLURM/$id.out" 2>&1 < /dev/null &
echo $! > "$FAKE_SLURM/$id.pid"
echo "Submitted batch job $id"
"""
_SCANCEL = """#!/usr/bin/env bash
for id in "$@"; do
  echo "$id" >> "$FAKE_SLURM/cancelled"
  kill -TERM -- "-$(cat "$FAKE_SLURM/$id.pid")" 2>/dev/null || true
done
"""


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its parent to reap it does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


@pytest.mark.timeout(120)
@pytest.mark.skipif(not (shutil.which("bash") and shutil.which("setsid")),
                    reason="the stand-in sbatch needs bash and setsid")
def test_jobs_hold_a_cluster_that_ebf_connects_to(tmp_path):
    """``ebf cluster slurm --jobs 1 --scheduler-file F``: the job script, run by a stand-in
    sbatch, starts a worker that joins the scheduler and imports this ebf; a client connects
    by the scheduler file; SIGTERM cancels the job (scancel) and exits 0."""
    pytest.importorskip("dask_jobqueue")
    from cluster import connect

    bin_dir, jobs = tmp_path / "bin", tmp_path / "jobs"
    bin_dir.mkdir()
    jobs.mkdir()
    for name, text in (("sbatch", _SBATCH), ("scancel", _SCANCEL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    scheduler_file = tmp_path / "scheduler.json"
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "FAKE_SLURM": str(jobs), "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "pipelines", "cluster", "slurm", "--cores", "1",
               "--memory", "1GiB", "--walltime", "00:15:00", "--jobs", "1",
               "--scheduler-file", str(scheduler_file), "--dashboard-address", ":0",
               "--local-directory", str(tmp_path / "spill")]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path)
    try:
        with connect(scheduler_file=str(scheduler_file), timeout=60) as client:
            client.wait_for_workers(1, timeout=60)
            (worker,) = client.scheduler_info()["workers"].values()
            assert worker["nthreads"] == 1 and worker["memory_limit"] == 2**30
            where = client.submit(lambda: __import__("importlib.util").util.find_spec(
                "ebf").origin, pure=False).result()  # where, without loading numba
            assert Path(where).resolve().parent == ROOT / "ebf"
        job_pid = int((jobs / "1001.pid").read_text())
        assert _alive(job_pid)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert out.splitlines()[3] == "submitted 1 SLURM job: 1001"
    assert f"--scheduler-file {shlex.quote(str(scheduler_file))}" in err
    assert "stopping: cancelling the jobs" in err
    assert (jobs / "cancelled").read_text().split() == ["1001"]
    script = (jobs / "1001.sh").read_text()
    assert "#SBATCH --mem=1G" in script and "#SBATCH -t 00:15:00" in script
    deadline = time.monotonic() + 30
    while _alive(job_pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(job_pid), "the cancelled job's processes are still running"
