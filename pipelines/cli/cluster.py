"""``ebf cluster``: the cluster recipes of :mod:`cluster` from the command line.

``ebf cluster slurm|pbs ... --print``
    The job script each batch job would run (:mod:`cluster.jobqueue`); nothing is submitted.
``ebf cluster slurm|pbs ... --jobs N [--scheduler-file PATH]``
    A Dask scheduler in this process and ``N`` batch jobs of workers connecting to it, until
    Ctrl-C or SIGTERM, which cancel the jobs. Meanwhile ``ebf train ... --scheduler-file
    PATH`` (or ``--scheduler ADDR``) runs on them, as many times as wanted.
``ebf cluster k8s --image IMAGE ... [--job "ebf train ..."] [--out FILE]``
    A ``DaskCluster`` manifest (or with ``--job`` a ``DaskJob``) for the Dask Kubernetes
    operator (:mod:`cluster.kubernetes`), on stdout or written atomically to ``FILE``, for
    ``kubectl apply -f``. The command it was made with heads the file as a comment.
``ebf cluster dockerfile [--out FILE]``
    The Dockerfile of the image those manifests run (:mod:`cluster.image`): this
    environment's Python and the versions Dask compares between a client and its cluster,
    bokeh for the dashboard, ``ebf`` from the checkout; with ``--out``, ``FILE.dockerignore``
    beside it.

dask-gateway clusters are used from Python (:mod:`cluster.gateway`): their scheduler is
reached through the gateway's proxy with credentials the gateway hands out.
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import shutil
import sys
import time
from collections.abc import Sequence
from typing import Any

from .arguments import memory_size, positive_float, positive_int
from .failures import Terminated, UsageError

__all__ = ["add_cluster_parser", "spec_command"]

#: How long submitting the jobs may take before the command gives up.
SUBMIT_TIMEOUT = 120.0
#: The scheduler's address in a printed job script (``--print``: no scheduler runs).
PLACEHOLDER_ADDRESS = "tcp://<scheduler-address>:8786"


def add_cluster_parser(sub: argparse._SubParsersAction) -> None:
    """``ebf cluster slurm|pbs|k8s|dockerfile``."""
    cl = sub.add_parser(
        "cluster",
        help="Dask clusters on SLURM, PBS or Kubernetes, sized for ebf; their image",
        description=(
            "Dask clusters beyond one machine: job scripts and a scheduler for SLURM and PBS "
            "(dask-jobqueue), manifests for the Dask Kubernetes operator and the Dockerfile "
            "of their image. Point ebf train / predict / evaluate at them with --scheduler or "
            "--scheduler-file."
        ),
    )
    kinds = cl.add_subparsers(dest="backend", metavar="BACKEND", required=True)
    for system, name in (("slurm", "SLURM"), ("pbs", "PBS Pro / OpenPBS / Torque")):
        _add_jobqueue_parser(kinds, system, name)
    _add_k8s_parser(kinds)
    _add_dockerfile_parser(kinds)


def _add_jobqueue_parser(kinds: argparse._SubParsersAction, system: str, name: str) -> None:
    jq = kinds.add_parser(
        system,
        help=f"{name}: print the job script, or run a scheduler and submit worker jobs",
        description=(
            f"Dask workers as {name} batch jobs (dask-jobqueue): one thread per worker process "
            "by default, the job's memory split evenly between them, workers retiring before "
            "the walltime. --print shows the job script; --jobs N runs the scheduler here "
            "and submits N jobs until Ctrl-C or SIGTERM. Needs pip install 'ebf[cluster]'."
        ),
    )
    add = jq.add_argument
    add("--cores", type=positive_int, required=True, help="cores per job")
    add("--memory", type=memory_size, required=True, help="memory per job, e.g. 32GiB")
    add("--processes", type=positive_int, default=None,
        help="worker processes per job, dividing --cores (default: --cores, one thread each)")
    add("--walltime", default="01:00:00", help="HH:MM:SS per job (default: 01:00:00)")
    add("--queue", default=None, help="SLURM partition (-p) or PBS queue (-q)")
    add("--account", default=None, help="account to charge (-A)")
    add("--job-extra", action="append", default=[], metavar="DIRECTIVE",
        help="another batch directive, without its prefix: --job-extra=--gres=gpu:1 "
        "(repeatable)")
    add("--worker-extra", action="append", default=[], metavar="ARG",
        help="another `dask worker` argument: --worker-extra=--resources=branch=1 (repeatable)")
    add("--prologue", action="append", default=[], metavar="LINE",
        help="a shell line run before the workers: --prologue 'module load gcc' (repeatable)")
    add("--local-directory", default=None,
        help="where workers spill (default: the job's ${TMPDIR:-/tmp})")
    add("--log-directory", default=None, help="where the jobs' output files go")
    add("--interface", default=None, help="network interface, e.g. ib0")
    add("--branch-memory", type=memory_size, default=None,
        help="the --branch-memory of the jobs to run: refuse workers too small for it")
    mode = jq.add_mutually_exclusive_group(required=True)
    mode.add_argument("--print", action="store_true",
                      help="print the job script and exit, submitting nothing (--jobs fills "
                      "in the scheduler's address and the worker's name)")
    mode.add_argument("--jobs", type=positive_int, default=None,
                      help="run the scheduler here and submit this many jobs")
    add("--scheduler-file", default=None, metavar="PATH",
        help="with --jobs: where the scheduler writes its address, for ebf ... "
        "--scheduler-file PATH (on a file system the jobs share)")
    add("--dashboard-address", default=":8787",
        help="with --jobs: the scheduler's dashboard (default: :8787)")
    add("--quiet", action="store_true", help="with --jobs: no worker count updates")
    jq.set_defaults(handler=_cmd_jobqueue, system=system)


def _add_k8s_parser(kinds: argparse._SubParsersAction) -> None:
    k8 = kinds.add_parser(
        "k8s",
        help="a DaskCluster or DaskJob manifest for the Dask Kubernetes operator",
        description=(
            "A DaskCluster manifest (with --job, a DaskJob: the command run once against a "
            "cluster made for it) for the Dask Kubernetes operator, for kubectl apply -f. "
            "Worker pods request and are limited to --worker-cores and --worker-memory, "
            "which their dask worker gets as --nthreads and --memory-limit."
        ),
    )
    add = k8.add_argument
    add("--image", required=True,
        help="a container image with ebf installed, pushed where the cluster pulls from "
        "(ebf cluster dockerfile writes its Dockerfile), e.g. registry.example.com/ebf:0.1.0")
    add("--name", default="ebf", help="the cluster's (or job's) name (default: ebf)")
    add("--namespace", default=None, help="metadata.namespace (default: kubectl's)")
    add("--workers", type=int, default=2, help="worker pods (default: 2)")
    add("--worker-cores", type=positive_int, default=1, help="CPUs per worker (default: 1)")
    add("--worker-memory", type=memory_size, default="4GiB",
        help="memory per worker (default: 4GiB)")
    add("--threads-per-worker", type=positive_int, default=None,
        help="threads per worker (default: --worker-cores)")
    add("--scheduler-cores", type=positive_float, default=1, help="default: 1")
    add("--scheduler-memory", type=memory_size, default="2GiB", help="default: 2GiB")
    add("--env", action="append", default=[], metavar="NAME=VALUE",
        help="an environment variable of every pod (repeatable)")
    add("--secret", action="append", default=[], metavar="NAME",
        help="a Secret whose keys become environment variables of the workers and the job, "
        "e.g. S3 credentials (repeatable)")
    add("--idle-timeout", type=int, default=0,
        help="seconds idle before the operator deletes the cluster (default: 0, never)")
    add("--branch-memory", type=memory_size, default=None,
        help="the --branch-memory of the jobs to run: refuse workers too small for it")
    add("--job", default=None, metavar="COMMAND",
        help="make a DaskJob running COMMAND (quoted), e.g. \"ebf train s3://b/data "
        "--target y --out s3://b/m --quiet\"")
    add("--job-cores", type=positive_float, default=1, help="with --job: default 1")
    add("--job-memory", type=memory_size, default="2GiB", help="with --job: default 2GiB")
    add("--out", default=None, metavar="FILE", help="write the YAML here (default: stdout)")
    add("--overwrite", action="store_true",
        help="replace --out if it is a manifest ebf wrote")
    k8.set_defaults(handler=_cmd_k8s, parser=k8)


def _add_dockerfile_parser(kinds: argparse._SubParsersAction) -> None:
    df = kinds.add_parser(
        "dockerfile",
        help="the Dockerfile of ebf's image, pinned to this environment's versions",
        description=(
            "The Dockerfile of the image that ebf cluster k8s --image runs: this "
            "environment's Python, numpy, numba, pyarrow, pandas, dask, distributed, "
            "scikit-learn, scipy, cloudpickle, msgpack, toolz, tornado and lz4 (what Dask "
            "compares between a client and its cluster), bokeh for the dashboard, and ebf "
            "from the checkout. Run it in the environment of the client; build the image from "
            "the repository's root: docker build -f FILE -t REGISTRY/ebf:TAG ."
        ),
    )
    df.add_argument("--out", default=None, metavar="FILE",
                    help="write the Dockerfile here and FILE.dockerignore beside it (what the "
                    "build leaves out of its context); default: the Dockerfile on stdout")
    df.add_argument("--overwrite", action="store_true",
                    help="replace --out (and its .dockerignore) if ebf wrote them")
    df.set_defaults(handler=_cmd_dockerfile)


def _cmd_dockerfile(args: argparse.Namespace) -> int:
    from basics.atomic import write_text
    from basics.locations import check_file_destination
    from cluster.image import client_versions, dockerfile_text, dockerignore_text
    from cluster.kubernetes import FILE_TAG

    ignore = None if args.out in (None, "-") else f"{args.out}.dockerignore"
    for path in filter(None, (None if ignore is None else args.out, ignore)):
        check_file_destination(path, "cluster-spec", overwrite=args.overwrite)
    versions = client_versions()
    made = "made by: ebf cluster dockerfile"
    text = f"{FILE_TAG}\n{dockerfile_text(versions, comment=made)}"
    if ignore is None:
        print(text, end="")
        return 0
    write_text(args.out, text)
    write_text(ignore, f"{FILE_TAG}\n{dockerignore_text(comment=made)}")
    err = sys.stderr
    print(f"pinned to this environment: {' '.join(f'{k}=={v}' for k, v in versions.items())}",
          file=err)
    print(f"wrote {args.out} and {ignore}; from the repository's root: docker build -f "
          f"{shlex.quote(args.out)} -t REGISTRY/ebf:TAG . && docker push REGISTRY/ebf:TAG",
          file=err)
    return 0


def _cmd_jobqueue(args: argparse.Namespace) -> int:
    from cluster.jobqueue import SYSTEMS, jobqueue_options
    from cluster.shape import optional_module

    if args.scheduler_file and not args.jobs:
        raise UsageError("--scheduler-file goes with --jobs (a running scheduler writes it)")
    options = dict(processes=args.processes, walltime=args.walltime, queue=args.queue,
                   account=args.account, job_extra_directives=args.job_extra,
                   worker_extra_args=args.worker_extra, job_script_prologue=args.prologue,
                   log_directory=args.log_directory, interface=args.interface,
                   branch_memory=args.branch_memory, scheduler_file=args.scheduler_file,
                   dashboard_address=":0" if args.print else args.dashboard_address)
    if args.local_directory is not None:
        options["local_directory"] = args.local_directory
    try:
        recipe = jobqueue_options(args.system, cores=args.cores, memory=args.memory, **options)
    except (ValueError, TypeError) as exc:
        raise UsageError(str(exc)) from None
    jobqueue = optional_module("dask_jobqueue", "dask-jobqueue", f"ebf cluster {args.system}")
    cls = getattr(jobqueue, SYSTEMS[args.system])
    if args.print:
        # no scheduler runs: its address and the worker's name are filled in by --jobs
        job = cls.job_cls(scheduler=PLACEHOLDER_ADDRESS, name="<worker-name>",
                          **_job_kwargs(recipe))
        print(job.job_script(), end="")
        return 0
    submit = cls.job_cls.submit_command
    if shutil.which(submit) is None:
        raise UsageError(f"`{submit}` is not on PATH: run ebf cluster {args.system} --jobs on "
                         f"a machine that submits {args.system.upper()} jobs (a login node)")
    return _serve(cls(**recipe), args)


def _job_kwargs(recipe: dict[str, Any]) -> dict[str, Any]:
    """The cluster's options that its job class takes (the scheduler's are the cluster's)."""
    return {k: v for k, v in recipe.items() if k != "scheduler_options"}


def _serve(cluster: Any, args: argparse.Namespace) -> int:
    """Submit the jobs, report, and hold the scheduler until Ctrl-C or SIGTERM."""
    err = sys.stderr
    try:
        print(f"scheduler: {cluster.scheduler_address}", flush=True)
        if args.scheduler_file:
            print(f"scheduler file: {args.scheduler_file}", flush=True)
        print(f"dashboard: {cluster.dashboard_link}", flush=True)
        cluster.scale(jobs=args.jobs)
        ids = _submitted(cluster, args.jobs)
        print(f"submitted {len(ids)} {args.system.upper()} job{'s' if len(ids) > 1 else ''}: "
              f"{' '.join(ids)}", flush=True)
        where = (f"--scheduler-file {shlex.quote(args.scheduler_file)}" if args.scheduler_file
                 else f"--scheduler {cluster.scheduler_address}")
        print(f"run ebf train/predict/evaluate ... {where}; Ctrl-C or SIGTERM cancels the jobs",
              file=err, flush=True)
        seen = -1
        while True:
            workers = len(cluster.scheduler_info.get("workers", {}))
            if workers != seen and not args.quiet:
                print(f"workers connected: {workers}", file=err, flush=True)
                seen = workers
            time.sleep(1)
    except (KeyboardInterrupt, Terminated):
        from basics import commit

        commit.stop_is_success()  # the way to end it: the jobs are cancelled, nothing is lost
        print("stopping: cancelling the jobs", file=err, flush=True)
        return 0
    finally:
        with contextlib.suppress(AssertionError):  # a job never submitted has no state to end
            cluster.close()


def _submitted(cluster: Any, jobs: int) -> list[str]:
    """The ids of the ``jobs`` submitted jobs, once the batch system has taken them all."""
    deadline = time.monotonic() + SUBMIT_TIMEOUT
    while True:
        ids = [str(job.job_id) for job in list(cluster.workers.values())
               if getattr(job, "job_id", None)]
        if len(ids) >= jobs:
            return ids
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"only {len(ids)} of {jobs} jobs were submitted within {SUBMIT_TIMEOUT:g} s; "
                f"run with -v to see the batch system's answer ({cluster.job_cls.submit_command}"
                " refused them, or is slow)")
        time.sleep(0.2)


def _env_pairs(values: Sequence[str]) -> dict[str, str]:
    out = {}
    for value in values:
        key, sep, text = value.partition("=")
        if not sep or not key:
            raise UsageError(f"--env takes NAME=VALUE, got {value!r}")
        out[key] = text
    return out


def spec_command(args: argparse.Namespace) -> str:
    """The ``ebf cluster k8s`` command that makes ``args``'s manifest (a manifest's header).

    Every option that differs from its default, in the parser's order, without ``--out`` and
    ``--overwrite``: the same manifest gives the same command however it was typed.

    Examples
    --------
    >>> from pipelines.cli import build_parser
    >>> args = build_parser().parse_args(["cluster", "k8s", "--workers", "2", "--image",
    ...                                   "reg.example.com/ebf:1", "--job", "ebf train d",
    ...                                   "--out", "x"])
    >>> spec_command(args)
    "ebf cluster k8s --image reg.example.com/ebf:1 --job 'ebf train d'"
    """
    words = ["ebf", "cluster", "k8s"]
    for action in args.parser._actions:
        if not action.option_strings or action.dest in ("help", "out", "overwrite",
                                                        "verbose", "config"):
            continue
        value = getattr(args, action.dest, action.default)
        if value == action.default:
            continue
        for item in value if isinstance(value, list) else [value]:
            words += [action.option_strings[-1], str(item)]
    return shlex.join(words)


def _cmd_k8s(args: argparse.Namespace) -> int:
    from basics.atomic import write_text
    from basics.locations import check_file_destination
    from cluster.kubernetes import daskcluster_manifest, daskjob_manifest, manifest_yaml

    if args.out is not None and args.out != "-":
        check_file_destination(args.out, "cluster-spec", overwrite=args.overwrite)
    try:
        manifest = daskcluster_manifest(
            args.name, image=args.image, n_workers=args.workers, worker_cores=args.worker_cores,
            worker_memory=args.worker_memory, threads_per_worker=args.threads_per_worker,
            scheduler_cores=args.scheduler_cores, scheduler_memory=args.scheduler_memory,
            env=_env_pairs(args.env), secrets=args.secret, namespace=args.namespace,
            idle_timeout=args.idle_timeout, branch_memory=args.branch_memory)
        if args.job is not None:
            manifest = daskjob_manifest(args.name, args.job, cluster=manifest,
                                        cores=args.job_cores, memory=args.job_memory,
                                        secrets=args.secret)
    except (ValueError, TypeError) as exc:
        raise UsageError(str(exc)) from None
    what = "a DaskJob" if args.job is not None else "a DaskCluster"
    text = manifest_yaml(manifest, comment=f"{what} for the Dask Kubernetes operator, made by:\n"
                         f"{spec_command(args)}")
    if args.out is None or args.out == "-":
        print(text, end="")
    else:
        write_text(args.out, text)
        print(f"wrote {args.out}: kubectl apply -f {shlex.quote(args.out)}", file=sys.stderr)
    return 0
