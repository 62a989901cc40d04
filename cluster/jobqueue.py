"""SLURM and PBS clusters for ``ebf`` through dask-jobqueue.

dask-jobqueue runs the Dask scheduler in the process that creates the cluster (a login node,
or the first job of an allocation) and submits batch jobs that each start Dask workers which
connect back to it. :func:`jobqueue_options` is the recipe, a pure function: the keyword
arguments of ``SLURMCluster`` / ``PBSCluster`` sized for ``ebf``. :func:`slurm_cluster` and
:func:`pbs_cluster` create the cluster from them, with no job submitted until
``cluster.scale(jobs=N)``; ``cluster.job_script()`` shows what will be submitted.

What the recipe chooses, and why:

- **One thread per worker process** (``processes=cores``): a branch task holds a whole
  branch's data and forest, so a worker process should fit one branch at a time; a branch
  that outgrows its worker then kills one single-threaded worker and is retried elsewhere.
  Ask for ``processes`` below ``cores`` to give each worker threads and more memory instead.
- **Memory per worker** is the job's ``memory / processes``, checked against
  ``branch_memory`` when given (:meth:`cluster.shape.WorkerShape.check_branch_memory`).
- **Workers retire before the walltime**: ``--lifetime`` ends each worker a margin before the
  batch system would kill it (10 % of the walltime, between 2 and 10 minutes, staggered by half
  of it), so its results move to other workers instead of being lost with the job.
- **The same Python**: workers start with ``sys.executable -m distributed.cli.dask_worker``
  (the interpreter that runs the recipe, on a shared file system), and the job script exports
  this process's ``PYTHONPATH`` if it has one, so the workers import the same ``ebf``.
- **Spill to node-local disk**: ``--local-directory ${TMPDIR:-/tmp}`` (the job's scratch).

Examples
--------
>>> options = jobqueue_options("slurm", cores=8, memory="32GiB", walltime="02:00:00",
...                            queue="compute")
>>> options["processes"], options["worker_extra_args"]
(8, ['--lifetime', '6600s', '--lifetime-stagger', '300s'])
>>> cluster = slurm_cluster(cores=8, memory="32GiB", walltime="02:00:00")  # doctest: +SKIP
>>> cluster.scale(jobs=4)                                                  # doctest: +SKIP
>>> cluster.scheduler_address   # for `ebf train --scheduler ...`         # doctest: +SKIP
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Sequence
from typing import Any

from cluster.shape import WorkerShape, memory_bytes, memory_text, optional_module

__all__ = ["SYSTEMS", "jobqueue_options", "pbs_cluster", "slurm_cluster", "walltime_seconds",
           "worker_lifetime"]

#: The batch systems of the recipe: name -> dask-jobqueue's cluster class.
SYSTEMS = {"slurm": "SLURMCluster", "pbs": "PBSCluster"}

#: Where workers spill: the job's node-local scratch (the shell expands it on the node).
LOCAL_DIRECTORY = "${TMPDIR:-/tmp}"

_WALLTIME = re.compile(r"^(?:(?P<days>\d+)-)?(?P<hours>\d+):(?P<minutes>[0-5]\d):"
                       r"(?P<seconds>[0-5]\d)$")


def walltime_seconds(walltime: str, system: str = "slurm") -> int:
    """The seconds of a walltime ``HH:MM:SS`` (SLURM also takes ``D-HH:MM:SS``).

    Examples
    --------
    >>> walltime_seconds("01:30:00"), walltime_seconds("1-00:00:00")
    (5400, 86400)
    """
    match = _WALLTIME.match(str(walltime))
    if match is None or (match["days"] is not None and system != "slurm"):
        forms = "HH:MM:SS or D-HH:MM:SS" if system == "slurm" else "HH:MM:SS"
        raise ValueError(f"walltime must be {forms} for {system}, e.g. '02:00:00', "
                         f"got {walltime!r}")
    days = int(match["days"] or 0)
    seconds = ((days * 24 + int(match["hours"])) * 60 + int(match["minutes"])) * 60
    seconds += int(match["seconds"])
    if seconds <= 0:
        raise ValueError(f"walltime must be positive, got {walltime!r}")
    return seconds


def worker_lifetime(walltime: int) -> list[str]:
    """``dask worker`` arguments that retire a worker before a walltime of ``walltime`` s.

    The margin is 10 % of the walltime, between 2 and 10 minutes; the lifetime is staggered
    by half the margin, so workers do not all leave at once and none outlives the job.
    Walltimes under 10 minutes get none (the margin would eat them).

    Examples
    --------
    >>> worker_lifetime(3600)
    ['--lifetime', '3240s', '--lifetime-stagger', '180s']
    >>> worker_lifetime(300)
    []
    """
    if walltime < 600:
        return []
    margin = min(600, max(120, walltime // 10))
    return ["--lifetime", f"{walltime - margin}s", "--lifetime-stagger", f"{margin // 2}s"]


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def jobqueue_options(
    system: str,
    *,
    cores: int,
    memory: int | str,
    processes: int | None = None,
    walltime: str = "01:00:00",
    queue: str | None = None,
    account: str | None = None,
    job_extra_directives: Sequence[str] = (),
    worker_extra_args: Sequence[str] = (),
    job_script_prologue: Sequence[str] = (),
    local_directory: str | None = LOCAL_DIRECTORY,
    log_directory: str | None = None,
    job_name: str = "ebf-worker",
    python: str | None = None,
    interface: str | None = None,
    branch_memory: int | str | None = None,
    scheduler_file: str | None = None,
    dashboard_address: str = ":8787",
) -> dict[str, Any]:
    """Keyword arguments of ``SLURMCluster`` / ``PBSCluster`` for ``ebf`` (see the module).

    Parameters
    ----------
    system : {"slurm", "pbs"}
    cores : int
        Cores of one job (``#SBATCH --cpus-per-task``, PBS ``ncpus``).
    memory : int or str
        Memory of one job (``#SBATCH --mem``, PBS ``mem``), e.g. ``"32GiB"``.
    processes : int, optional
        Worker processes per job; they share the job's cores and memory evenly (default:
        ``cores``, one thread per worker). Must divide ``cores``.
    walltime : str, default="01:00:00"
        ``HH:MM:SS`` (SLURM also ``D-HH:MM:SS``); workers retire a margin before it.
    queue, account : str, optional
        SLURM partition (``-p``) or PBS queue (``-q``); account to charge (``-A``).
    job_extra_directives : sequence of str
        More directives, without the prefix: ``["--gres=gpu:1"]`` (``#SBATCH --gres=...``),
        ``["-l place=scatter"]``.
    worker_extra_args : sequence of str
        More ``dask worker`` arguments, after the recipe's ``--lifetime``.
    job_script_prologue : sequence of str
        Shell lines run before the workers start (``module load ...``), after the export of
        ``PYTHONPATH``.
    local_directory : str or None, default="${TMPDIR:-/tmp}"
        Where workers spill to disk (expanded by the job's shell); ``None``: Dask's default.
    log_directory : str, optional
        Where the batch system writes the jobs' output and error files.
    job_name : str, default="ebf-worker"
    python : str, optional
        The workers' interpreter (default: ``sys.executable``).
    interface : str, optional
        Network interface of the workers and the scheduler (``"ib0"``: InfiniBand).
    branch_memory : int or str, optional
        The ``--branch-memory`` of the jobs to run: fail now if a worker cannot fit its
        threads' branches.
    scheduler_file : str, optional
        Where the scheduler writes its address (``ebf ... --scheduler-file PATH``).
    dashboard_address : str, default=":8787"

    Returns
    -------
    dict
        For ``dask_jobqueue.SLURMCluster(**options)`` (or ``PBSCluster``).

    Examples
    --------
    >>> options = jobqueue_options("pbs", cores=4, memory="16GiB", processes=2)
    >>> options["memory"], options["processes"], options["local_directory"]
    ('16GiB', 2, '${TMPDIR:-/tmp}')
    """
    if system not in SYSTEMS:
        raise ValueError(f"system must be one of {sorted(SYSTEMS)}, got {system!r}")
    cores = _positive_int(cores, "cores")
    processes = cores if processes is None else _positive_int(processes, "processes")
    if cores % processes:
        raise ValueError(f"processes ({processes}) must divide cores ({cores}): every worker "
                         "process gets cores / processes threads")
    job_memory = memory_bytes(memory, "memory")
    shape = WorkerShape.of(cores // processes, job_memory // processes)
    shape.check_branch_memory(branch_memory, workers_per_job=processes)
    seconds = walltime_seconds(walltime, system)
    for name, value in (("job_extra_directives", job_extra_directives),
                        ("worker_extra_args", worker_extra_args),
                        ("job_script_prologue", job_script_prologue)):
        if isinstance(value, str) or not all(isinstance(v, str) for v in value):
            raise TypeError(f"{name} must be a sequence of strings, got {value!r}")
    prologue = []
    if os.environ.get("PYTHONPATH"):
        prologue.append(f"export PYTHONPATH={shlex.quote(os.environ['PYTHONPATH'])}")
    scheduler_options: dict[str, Any] = {"dashboard_address": dashboard_address}
    if scheduler_file is not None:
        scheduler_options["scheduler_file"] = os.path.abspath(os.path.expanduser(
            scheduler_file))
    options: dict[str, Any] = {
        "cores": cores,
        "memory": memory_text(job_memory),
        "processes": processes,
        "walltime": walltime,
        "job_name": job_name,
        "python": python or sys.executable,
        "local_directory": local_directory,
        "job_extra_directives": list(job_extra_directives),
        "worker_extra_args": worker_lifetime(seconds) + list(worker_extra_args),
        "job_script_prologue": prologue + list(job_script_prologue),
        "scheduler_options": scheduler_options,
    }
    for key, value in (("queue", queue), ("account", account),
                       ("log_directory", log_directory), ("interface", interface)):
        if value is not None:
            options[key] = value
    return options


def _cluster(system: str, options: dict[str, Any], extra: dict[str, Any]) -> Any:
    name = SYSTEMS[system]
    jobqueue = optional_module("dask_jobqueue", "dask-jobqueue", f"{system}_cluster")
    return getattr(jobqueue, name)(**options, **extra)


def slurm_cluster(*, cores: int, memory: int | str, **options: Any) -> Any:
    """A ``dask_jobqueue.SLURMCluster`` sized for ``ebf``, its scheduler in this process.

    No job is submitted until ``cluster.scale(jobs=N)`` (or ``cluster.adapt(...)``);
    ``cluster.job_script()`` shows the script each job runs.

    Parameters
    ----------
    cores, memory : int, int or str
        Per job (see :func:`jobqueue_options`).
    **options
        The other parameters of :func:`jobqueue_options`; anything else (``security=``,
        ``job_directives_skip=``, ...) goes to ``SLURMCluster`` as is, and
        ``scheduler_options=`` (``{"host": ...}``) is merged with the recipe's.

    Returns
    -------
    dask_jobqueue.SLURMCluster

    Raises
    ------
    ImportError
        If dask-jobqueue is not installed (``pip install 'ebf[cluster]'``).

    Examples
    --------
    >>> cluster = slurm_cluster(cores=8, memory="32GiB", queue="compute")  # doctest: +SKIP
    >>> print(cluster.job_script())                                       # doctest: +SKIP
    """
    return _cluster("slurm", *_split("slurm", cores, memory, options))


def pbs_cluster(*, cores: int, memory: int | str, **options: Any) -> Any:
    """A ``dask_jobqueue.PBSCluster`` sized for ``ebf``, its scheduler in this process.

    As :func:`slurm_cluster`, for PBS Pro / OpenPBS / Torque (``qsub``, ``qdel``).

    Returns
    -------
    dask_jobqueue.PBSCluster

    Raises
    ------
    ImportError
        If dask-jobqueue is not installed (``pip install 'ebf[cluster]'``).
    """
    return _cluster("pbs", *_split("pbs", cores, memory, options))


def _split(system: str, cores: int, memory: int | str,
           options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The recipe's options built, and the rest passed through to the cluster class."""
    import inspect

    ours = set(inspect.signature(jobqueue_options).parameters) - {"system", "cores", "memory"}
    recipe = {k: v for k, v in options.items() if k in ours}
    extra = {k: v for k, v in options.items() if k not in ours}
    built = jobqueue_options(system, cores=cores, memory=memory, **recipe)
    # the caller's scheduler options (host=, port=, ...) on top of the recipe's
    built["scheduler_options"].update(extra.pop("scheduler_options", None) or {})
    return built, extra
