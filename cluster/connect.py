"""Getting a :class:`distributed.Client`: an embedded local cluster or an existing scheduler.

:func:`connect` is the one place (with the CLI) that creates a cluster. Library code never
does: it takes ``client=None`` and resolves it with :func:`current_client` at call time.

Which scheduler :func:`connect` uses, first match wins:

1. ``address`` (``"tcp://host:8786"``, ``"host:8786"``, ...) or ``scheduler_file=`` (the JSON
   file a ``dask scheduler --scheduler-file`` writes);
2. the ``DASK_SCHEDULER_ADDRESS`` environment variable;
3. the ``scheduler-address`` key of the Dask configuration;
4. otherwise a new :class:`distributed.LocalCluster` sized to this machine (the embedded
   default): ``processes=True`` gives as many single-threaded worker processes as cores up to
   4 cores and about ``sqrt(cores)`` processes of ``cores / processes`` threads beyond
   (Dask's own split); ``processes=False`` gives one in-process worker with one thread per
   core. ``memory_limit="auto"`` splits the machine's memory (cgroup limits included) evenly
   between the workers. Closing the client closes that cluster. At most
   :data:`MAX_LOCAL_WORKERS` workers (more is refused before anything starts), and the
   cluster must start within ``timeout`` seconds (:data:`LOCAL_START_TIMEOUT` by default),
   else :class:`ClusterStartError`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import dask
import distributed
from dask.utils import format_bytes
from distributed.deploy.utils import nprocesses_nthreads
from distributed.system import MEMORY_LIMIT

from ebf.dask.client import NoClientError, current_client

__all__ = [
    "LOCAL_START_TIMEOUT",
    "MAX_LOCAL_WORKERS",
    "SCHEDULER_TIMEOUT",
    "ClusterStartError",
    "NoClientError",
    "SchedulerConnectionError",
    "connect",
    "current_client",
    "dashboard_link",
]

logger = logging.getLogger("ebf.cluster")

_ENV_ADDRESS = "DASK_SCHEDULER_ADDRESS"


class SchedulerConnectionError(ConnectionError, TimeoutError):
    """A Dask scheduler did not answer in time.

    Both a :class:`ConnectionError` and a :class:`TimeoutError` (so either ``except`` catches
    it); the message names the address, where it came from and what to check.
    """


#: Seconds to wait for a scheduler (or its scheduler file) unless told otherwise.
SCHEDULER_TIMEOUT = 10.0
#: Seconds a local cluster may take to start unless told otherwise: worker processes start
#: in a second or two, several times that on a loaded machine.
LOCAL_START_TIMEOUT = 60.0

#: The most workers a local cluster may have: each is a process (or a thread pool) with its
#: share of the machine's memory, so more than this on one machine is a typo, not a plan.
MAX_LOCAL_WORKERS = 256


class ClusterStartError(TimeoutError):
    """A local Dask cluster did not start within its timeout, or failed while starting.

    A :class:`TimeoutError`; the message names the workers asked for, the timeout and what
    to change.
    """


def _cpu_count() -> int:
    """Cores this process may use (affinity and cgroup quotas included, as Dask counts)."""
    return max(1, int(dask.system.CPU_COUNT or os.cpu_count() or 1))


def _local_sizing(
    n_workers: int | None, threads_per_worker: int | None, processes: bool
) -> tuple[int, int]:
    """Workers and threads per worker for a local cluster on this machine."""
    cores = _cpu_count()
    for name, value in (("n_workers", n_workers), ("threads_per_worker", threads_per_worker)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ValueError(f"{name} must be a positive integer or None, got {value!r}")
    if n_workers is not None and n_workers > MAX_LOCAL_WORKERS:
        raise ValueError(
            f"n_workers={n_workers} is above the cap of {MAX_LOCAL_WORKERS} local workers; "
            f"ask for at most {MAX_LOCAL_WORKERS}, or start the workers as a cluster (`dask "
            "scheduler` and `dask worker`, or ebf cluster) and connect to its scheduler")
    if n_workers is None and threads_per_worker is None:
        return nprocesses_nthreads(cores) if processes else (1, cores)
    if n_workers is None:
        assert threads_per_worker is not None
        return max(1, cores // threads_per_worker), threads_per_worker
    if threads_per_worker is None:
        return n_workers, max(1, cores // n_workers)
    return n_workers, threads_per_worker


def _free_dashboard_address(dashboard_address: str | None) -> str | None:
    """``dashboard_address`` if its port can be bound, else the same host on a free port.

    ``None`` (no dashboard) and port 0 (any free port) are returned unchanged. Checking first
    avoids Distributed's "port already in use" warning; the tiny race left is harmless
    because Distributed falls back to a free port by itself too.
    """
    if dashboard_address is None:
        return None
    host, sep, port_text = str(dashboard_address).rpartition(":")
    if not sep or not port_text.isdigit() or int(port_text) == 0:
        return dashboard_address
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host or "", int(port_text)))
        except OSError:
            logger.info("dashboard port %s is taken; using a free port", port_text)
            return f"{host}:0"
    return dashboard_address


def _configured_address() -> tuple[str | None, str]:
    """The scheduler address from the environment or the Dask config, and its source."""
    env = os.environ.get(_ENV_ADDRESS)
    if env:
        return env, f"the {_ENV_ADDRESS} environment variable"
    configured = dask.config.get("scheduler-address", None)
    if configured:
        return str(configured), "the Dask config key 'scheduler-address'"
    return None, ""


def _wait_for_scheduler_file(path: str, timeout: float) -> str:
    """Wait up to ``timeout`` seconds for a scheduler file; return the address it holds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(path) as f:
                return str(json.load(f)["address"])
        except (FileNotFoundError, json.JSONDecodeError, KeyError) as exc:
            if time.monotonic() >= deadline:
                raise SchedulerConnectionError(
                    f"no usable Dask scheduler file at {path!r} after {timeout:g} s ({exc!r}); "
                    "start the scheduler with `dask scheduler --scheduler-file "
                    f"{path}`, check the path (it must be on a file system shared with the "
                    "scheduler), or call cluster.connect() without an address for a local "
                    "cluster"
                ) from exc
            time.sleep(0.05)


def dashboard_link(client: distributed.Client) -> str | None:
    """The dashboard URL of ``client``'s scheduler, or ``None`` if it serves none.

    Parameters
    ----------
    client : distributed.Client

    Returns
    -------
    str or None

    Examples
    --------
    >>> client = connect(processes=False, n_workers=1)  # doctest: +SKIP
    >>> dashboard_link(client)  # doctest: +SKIP
    'http://127.0.0.1:8787/status'
    """
    try:
        link = client.dashboard_link
    except Exception:  # no "dashboard" service (started with dashboard_address=None)
        return None
    return str(link) if link else None


class _NotAScheduler(Exception):
    """The peer accepted the connection but did not answer as a Dask scheduler."""


def _probe_scheduler(address: str, timeout: float, security: Any) -> None:
    """Speak to ``address`` once: the comm handshake and an ``identity`` call, in ``timeout`` s.

    ``distributed.Client`` waits without limit for the handshake of a peer that accepts TCP
    but never speaks, and a peer sending junk makes its decoder try to allocate absurd
    buffers (``MemoryError``); both become :class:`_NotAScheduler` (or ``TimeoutError``)
    here. The probe runs on its own event loop in its own thread, so it works inside a
    running loop (Jupyter) too. In-process addresses and temporary credentials
    (``security=True``) are left to the client.
    """
    from distributed.comm import connect as comm_connect
    from distributed.security import Security

    if address.startswith("inproc://") or security is True:
        return
    if security is None or security is False:
        security = Security()
    elif isinstance(security, dict):
        security = Security(**security)
    connection_args = security.get_connection_args("client")

    async def identity() -> Any:
        comm = await comm_connect(address, timeout=timeout, **connection_args)
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    def run() -> Any:
        return asyncio.run(asyncio.wait_for(identity(), timeout))

    with ThreadPoolExecutor(1, thread_name_prefix="ebf-probe") as pool:
        try:
            reply = pool.submit(run).result()
        except TimeoutError as exc:  # asyncio.wait_for's: connected, but no Dask answer
            raise _NotAScheduler(
                "no answer in the Dask protocol (something that is not a Dask scheduler "
                "listens there, or the network is very slow)"
            ) from exc
        except OSError:  # refused, unreachable: distributed's own message says so
            raise
        except Exception as exc:  # junk from the peer: MemoryError, decode errors, ...
            raise _NotAScheduler(
                "the peer is not a Dask scheduler: its answer is not the Dask protocol "
                f"({type(exc).__name__} while decoding it)"
            ) from exc
    if not isinstance(reply, dict) or reply.get("type") != "Scheduler":
        kind = reply.get("type") if isinstance(reply, dict) else None
        raise _NotAScheduler(
            f"the peer speaks the Dask protocol but is a {kind}, not a scheduler" if kind
            else "the peer did not answer as a Dask scheduler"
        )


def _log_client(client: distributed.Client, what: str) -> None:
    nthreads = client.nthreads()
    logger.info(
        "%s: %d workers, %d threads; dashboard: %s",
        what,
        len(nthreads),
        sum(nthreads.values()),
        dashboard_link(client) or "none",
    )


def connect(
    address: str | None = None,
    *,
    timeout: float | None = None,
    n_workers: int | None = None,
    threads_per_worker: int | None = None,
    memory_limit: str | int | float | None = "auto",
    processes: bool = True,
    dashboard_address: str | None = ":8787",
    **options: Any,
) -> distributed.Client:
    """Connect to a Dask scheduler, or start a local cluster sized to this machine.

    Parameters
    ----------
    address : str, optional
        Scheduler address, e.g. ``"tcp://10.0.0.5:8786"``. ``None`` uses
        ``DASK_SCHEDULER_ADDRESS`` or the Dask config key ``scheduler-address`` if set, else
        starts a :class:`distributed.LocalCluster` (see the module docstring).
    timeout : float, optional
        Seconds to wait for a scheduler (or for ``scheduler_file`` to appear) before raising
        :class:`SchedulerConnectionError`: for the TCP connection, and again for the
        handshake and the scheduler's first answer (a peer that accepts the connection but
        never speaks Dask, or sends something else, fails within about ``timeout`` too);
        :data:`SCHEDULER_TIMEOUT` (10) by default. For a local cluster, the seconds its
        workers may take to start (:data:`LOCAL_START_TIMEOUT`, 60, by default), else
        :class:`ClusterStartError`.
    n_workers, threads_per_worker : int, optional
        Local cluster only: workers and threads per worker. Unset values are derived from
        the number of cores. At most :data:`MAX_LOCAL_WORKERS` (256) workers.
    memory_limit : str, int, float or None, default="auto"
        Local cluster only: memory limit per worker (``"auto"``: the machine's memory divided
        by the number of workers; ``"4GiB"``, bytes, or ``0`` / ``None`` for no limit).
    processes : bool, default=True
        Local cluster only: worker processes (``True``) or threads in this process
        (``False``: starts fast, used by tests, but tasks share this process's GIL).
    dashboard_address : str or None, default=":8787"
        Local cluster only: where to serve the dashboard; if the port is taken a free one is
        used. ``None`` is passed on to Distributed, which (2026.8) still starts its HTTP
        server on the default port; use ``":0"`` for any free port.
    **options
        ``scheduler_file="path.json"`` connects to the scheduler that file names. Other
        options go to :class:`distributed.Client` (e.g. ``security=``, ``name=``) and, for a
        local cluster, on to :class:`distributed.LocalCluster` (e.g. ``local_directory=``,
        ``host=``).

    Returns
    -------
    distributed.Client
        Set as the default client. Closing it (or leaving ``with connect() as client:``)
        also closes a local cluster it started.

    Raises
    ------
    SchedulerConnectionError
        If the scheduler does not answer within ``timeout`` seconds, or the peer is not a
        Dask scheduler (a ``ConnectionError`` and a ``TimeoutError``). The message names the
        address.
    ClusterStartError
        If a local cluster does not start within ``timeout`` seconds, or fails to start (a
        ``TimeoutError``).
    ValueError
        On an invalid size (more than :data:`MAX_LOCAL_WORKERS` workers), timeout or
        address scheme.

    Examples
    --------
    >>> from cluster import connect
    >>> with connect(processes=False, n_workers=1, dashboard_address=None) as client:
    ...     client.submit(sum, [1, 2, 3]).result()
    6
    >>> client = connect("tcp://scheduler:8786", timeout=30)  # doctest: +SKIP
    """
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    scheduler_file = options.pop("scheduler_file", None)
    if address is not None and scheduler_file is not None:
        raise ValueError("pass either address or scheduler_file, not both")
    source = "the address argument"
    if address is None and scheduler_file is None and _configured_address()[0] is None:
        return _start_local(
            timeout=LOCAL_START_TIMEOUT if timeout is None else timeout,
            n_workers=n_workers,
            threads_per_worker=threads_per_worker,
            memory_limit=memory_limit,
            processes=processes,
            dashboard_address=dashboard_address,
            **options,
        )
    timeout = SCHEDULER_TIMEOUT if timeout is None else timeout
    if scheduler_file is not None:
        address = _wait_for_scheduler_file(os.fspath(scheduler_file), timeout)
        source = f"the scheduler file {os.fspath(scheduler_file)!r}"
    elif address is None:
        address, source = _configured_address()
    assert address is not None  # a local cluster was started above

    ignored = {
        name: value
        for name, value in (("n_workers", n_workers), ("threads_per_worker", threads_per_worker))
        if value is not None
    }
    if ignored:
        logger.warning(
            "connecting to an existing scheduler at %s: %s apply to local clusters only and "
            "are ignored",
            address,
            ", ".join(ignored),
        )
    try:
        _probe_scheduler(address, timeout, options.get("security"))
        client = distributed.Client(address, timeout=timeout, **options)
    except (OSError, _NotAScheduler) as exc:
        raise SchedulerConnectionError(
            f"could not connect to the Dask scheduler at {address!r} (from {source}) within "
            f"{timeout:g} s: {' '.join(str(exc).split()) or type(exc).__name__}. Check that "
            "the address is a running Dask scheduler reachable from this machine (host, port, "
            "firewall), pass a larger timeout for a slow network, or call cluster.connect() "
            f"without an address (and unset {_ENV_ADDRESS}) to start a local cluster"
        ) from exc
    _log_client(client, f"connected to the Dask scheduler at {address}")
    return client


def _start_local(
    *,
    timeout: float,
    n_workers: int | None,
    threads_per_worker: int | None,
    memory_limit: str | int | float | None,
    processes: bool,
    dashboard_address: str | None,
    **options: Any,
) -> distributed.Client:
    """Start a LocalCluster owned by the returned client (closing the client closes it)."""
    workers, threads = _local_sizing(n_workers, threads_per_worker, processes)
    if memory_limit == "auto":
        memory_limit = int(MEMORY_LIMIT // workers)
    dashboard = _free_dashboard_address(dashboard_address)
    # Client() without an address starts the LocalCluster itself and closes it on close().
    client = _start_within(timeout, workers, lambda: distributed.Client(
        timeout=timeout,
        n_workers=workers,
        threads_per_worker=threads,
        memory_limit=memory_limit,
        processes=processes,
        dashboard_address=dashboard,
        **options,
    ))
    if not memory_limit:
        memory = "no"
    elif isinstance(memory_limit, int):
        memory = format_bytes(memory_limit)
    else:
        memory = str(memory_limit)
    _log_client(
        client,
        f"started a local Dask cluster ({'processes' if processes else 'threads'}, {memory} "
        "memory limit per worker)",
    )
    return client


def _start_within(timeout: float, workers: int,
                  start: Callable[[], distributed.Client]) -> distributed.Client:
    """``start()`` (a client starting its local cluster), given ``timeout`` seconds.

    Distributed waits without limit for the workers of a local cluster to start: a worker
    that never starts (a stuck preload, a machine out of processes) hangs the caller, and a
    failure while closing the half-started cluster hung it too. The start runs in a daemon
    thread: past ``timeout``, or on an error, :class:`ClusterStartError` is raised here
    and whatever started is left to end with this process.
    """
    result: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            result["client"] = start()
        except BaseException as exc:  # reported in the caller's thread
            result["error"] = exc
        finally:
            done.set()

    from distributed.deploy.spec import SpecCluster

    before = set(SpecCluster._instances)
    threading.Thread(target=run, name="ebf-cluster-start", daemon=True).start()
    what = f"the local Dask cluster ({workers} worker{'s' if workers > 1 else ''})"
    if not done.wait(timeout):
        for cluster in set(SpecCluster._instances) - before:
            # Distributed closes every cluster at exit, waiting 10 s for workers that never
            # started; its worker processes end with this one anyway (daemon processes)
            cluster.shutdown_on_close = False
        raise ClusterStartError(
            f"{what} did not start within {timeout:g} s; a worker may be unable to start "
            "(run with -v to see its log): ask for fewer workers, give it a larger timeout, "
            "or connect to a running scheduler")
    if "error" in result:
        exc = result["error"]
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise exc
        raise ClusterStartError(
            f"{what} failed to start: {' '.join(str(exc).split()) or type(exc).__name__}; "
            "run with -v to see the workers' log, ask for fewer workers, or connect to a "
            "running scheduler") from exc
    return result["client"]
