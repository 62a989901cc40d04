"""The Dask session of a CLI job: connecting, announcing the cluster, progress bars, closing.

Dask subcommands of :mod:`pipelines.cli` end their parser with :func:`finish_job_parser`
(``--quiet``, the cluster options) and run in ``with job(args) as (client, bars):``.
"""

from __future__ import annotations

import argparse
import logging
import os
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from .arguments import add_cluster_arguments, local_processes
from .progress import PhaseBars, StatusLine

if TYPE_CHECKING:
    import distributed

__all__ = ["dask_client", "finish_job_parser", "job"]


@contextmanager
def dask_client(
    args: argparse.Namespace, progress: StatusLine, announce: bool = True
) -> Iterator[distributed.Client]:
    """The client of a Dask subcommand: ``with dask_client(args, progress) as client:``.

    Connects as the cluster options say (:func:`add_cluster_arguments`), prints the worker
    count and dashboard link unless ``--quiet`` (or ``announce=False``: the command prints
    them itself), and closes the client (and a local cluster it started) at the end. Dask's
    own INFO logs (start-up, shutdown) show only with ``-vv``, the p2p shuffle's notices
    (logged as warnings at every shuffle) only with ``-v``; after a failure, what Dask logs
    in this process while shutting down only with ``-v`` (it stays quiet: the command ends).
    """
    from cluster import connect, dashboard_link

    dask_logger = logging.getLogger("distributed")  # configured when distributed is imported
    shuffle_logger = logging.getLogger("distributed.shuffle")
    old_level, old_shuffle_level = dask_logger.level, shuffle_logger.level
    if getattr(args, "verbose", 0) < 2:
        dask_logger.setLevel(logging.WARNING)
    if getattr(args, "verbose", 0) < 1:
        shuffle_logger.setLevel(logging.ERROR)
    quiet = getattr(args, "verbose", 0) < 1

    def hush() -> None:
        # after a failure the command prints one line and ends; what Dask logs while shutting
        # down (cancelled tasks, closed comms, workers killed, a cluster still starting in its
        # thread, possibly after this returns) is no news, so it stays quiet from here on
        if quiet:
            dask_logger.setLevel(logging.CRITICAL)
            # and the futures of the cluster's event loop the teardown abandons: asyncio logs
            # "Future exception was never retrieved" (a comm's TimeoutError) when collected
            logging.getLogger("asyncio").setLevel(logging.CRITICAL)

    # a model (or a wide table's bin edges) enters a graph once, by design
    # (ebf.dask.graph.shared_model): Dask's advice against a graph of many MB is no news
    warnings.filterwarnings("ignore", message="Sending large graph", category=UserWarning)
    failed = False
    try:
        options = {}
        if args.scheduler_file:
            options["scheduler_file"] = args.scheduler_file
        where = args.scheduler or args.scheduler_file or os.environ.get("DASK_SCHEDULER_ADDRESS")
        progress.start(f"connecting to {where}" if where else "starting a local Dask cluster")
        processes = local_processes()
        if not where:
            options.update(_local_cluster_options(processes, quiet))
        try:
            client = connect(
                args.scheduler,
                timeout=args.timeout,
                n_workers=args.n_workers,
                threads_per_worker=args.threads_per_worker,
                processes=processes,
                **options,
            )
        except BaseException:
            progress.failed()
            raise
        progress.done()
        if announce:
            workers = client.nthreads()
            progress.note(f"dask: {len(workers)} workers, {sum(workers.values())} threads; "
                          f"dashboard: {dashboard_link(client) or 'none'}")
        with client:
            try:
                yield client
            except BaseException:
                hush()  # before the client closes the cluster
                raise
    except BaseException:
        failed = True
        hush()
        raise
    finally:
        if not failed:
            dask_logger.setLevel(old_level)
        shuffle_logger.setLevel(old_shuffle_level)


def _local_cluster_options(processes: bool, quiet: bool) -> dict:
    """What keeps a local cluster's workers from writing to this terminal on their own.

    Without ``-v``, the workers' logs go only as far as errors that end the job: a task
    that fails is reported once, as the command's one line, not also as Dask's "Compute
    Failed" record with its traceback; the dashboard port falling back to a free one is no
    news either. Worker processes are forked from a server started with SIGINT ignored, so
    Ctrl-C in the terminal (sent to every process of the job) stops this process only,
    which closes the workers, instead of printing each worker's ``KeyboardInterrupt``.
    """
    import signal

    options = {}
    if quiet:
        options["silence_logs"] = logging.CRITICAL
        warnings.filterwarnings("ignore", message="Port .* is already in use",
                                category=UserWarning)
    if processes and threading.current_thread() is threading.main_thread():
        import multiprocessing.forkserver

        import dask.config
        from distributed.utils import get_mp_context

        dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"})
        get_mp_context()  # sets distributed's preloads: workers start faster
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            multiprocessing.forkserver.ensure_running()  # a no-op if it runs already
        finally:
            signal.signal(signal.SIGINT, previous)
    return options


@contextmanager
def job(args: argparse.Namespace, announce: bool = True) -> Iterator[tuple]:
    """``with job(args) as (client, bars):`` a Dask client and the job's progress bars."""
    bars = PhaseBars(args.quiet)
    with dask_client(args, StatusLine(args.quiet), announce) as client:
        try:
            yield client, bars
        finally:
            bars.close()


def finish_job_parser(parser: argparse.ArgumentParser, handler: object) -> None:
    """The options every Dask job shares: ``--quiet`` and the cluster options."""
    parser.add_argument("--quiet", action="store_true", help="no progress bars, no dashboard link")
    add_cluster_arguments(parser)
    parser.set_defaults(handler=handler)
