"""The Dask client of a call: the one passed, else the current default; never a new cluster.

Every function of :mod:`ebf.dask` takes ``client=None`` and resolves it here at call time,
as dask-ml and xgboost.dask do; ``cluster.connect`` (a layer above) is how users start one.
``wait_for`` and ``gather`` follow futures of that client as they finish, with progress;
:class:`Phases` times, logs and names the phases of a fit.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext

import distributed

logger = logging.getLogger("ebf.dask._fitting")  # the fit phases' log, as documented

__all__ = ["NoClientError", "PhaseReport", "Phases", "Report", "current_client", "gather",
           "wait_for"]

#: ``report(done, total)``: progress of one phase.
Report = Callable[[int, int], None]

#: ``report(phase, done, total)``: progress of a job with named phases (``total`` 0: unknown).
PhaseReport = Callable[[str, int, int], None]


class NoClientError(RuntimeError):
    """No usable Dask client: none is running, or the one given is closed."""


def current_client(client: distributed.Client | None = None) -> distributed.Client:
    """The client to use: ``client`` if given, else the current default Dask client.

    Parameters
    ----------
    client : distributed.Client, optional

    Returns
    -------
    distributed.Client

    Raises
    ------
    NoClientError
        If ``client`` is None and no client is running (or ``client`` is closed); the message
        says to call ``cluster.connect()`` first.

    Examples
    --------
    >>> current_client()  # doctest: +SKIP
    <Client: ...>
    """
    if client is None:
        try:
            client = distributed.get_client()
        except ValueError as exc:
            raise NoClientError(
                "no Dask client is running; start one first with "
                "`from cluster import connect; client = connect()` (a local cluster, or "
                "connect('tcp://host:8786') for an existing scheduler), or pass client="
            ) from exc
    if client.status in ("closing", "closed"):
        raise NoClientError(
            "the Dask client is closed; call cluster.connect() for a new one and pass it as client="
        )
    return client


def _as_completed(client: distributed.Client, futures: list, with_results: bool = False):
    # ``as_completed`` defaults to the *default* client's event loop, which is another
    # client's (or none) when ``client`` was made with ``set_as_default=False``: waiting on
    # futures from a foreign loop can hang forever, so the futures' own loop is passed.
    return distributed.as_completed(futures, loop=client.loop, with_results=with_results)


def wait_for(client: distributed.Client, futures: Sequence[distributed.Future],
             report: Report | None = None) -> None:
    """Wait for ``futures`` of ``client``, calling ``report(done, total)`` as they finish.

    The first error cancels the futures not yet finished and is raised; results stay on
    the workers.
    """
    futures = list(futures)
    if report is not None:
        report(0, len(futures))
    try:
        for done, fut in enumerate(_as_completed(client, futures), 1):
            if fut.status != "finished":
                fut.result()
            if report is not None:
                report(done, len(futures))
    except BaseException:
        client.cancel(futures)
        raise


def gather(client: distributed.Client, futures: Sequence[distributed.Future],
           report: Report | None = None) -> list:
    """Results of ``futures`` of ``client`` in their order, each fetched as it finishes.

    Fetching while the other tasks still run overlaps the transfers (e.g. of fitted
    branches) with the remaining work; the first error cancels the futures not yet
    finished and is raised.
    """
    futures = list(futures)
    index = {fut.key: i for i, fut in enumerate(futures)}
    out: list = [None] * len(futures)
    if report is not None:
        report(0, len(futures))
    try:
        for done, (fut, result) in enumerate(_as_completed(client, futures, True), 1):
            out[index[fut.key]] = result
            if report is not None:
                report(done, len(futures))
    except BaseException:
        client.cancel(futures)
        raise
    return out


class Phases:
    """Times, logs and names (``distributed.span``) the phases of one fit
    (:mod:`ebf.dask._fitting`); ``report(name)`` turns them into a :data:`Report`."""

    def __init__(self, progress: PhaseReport | None) -> None:
        self.progress = progress
        self.timings: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        try:
            from distributed import span
        except ImportError:  # pragma: no cover - older distributed
            span = None
        logger.info("fit phase %r started", name)
        t0 = time.perf_counter()
        with span(f"ebf-{name}") if span is not None else nullcontext(), \
                warnings.catch_warnings():
            # dask-expr collections built inside a span warn that they drop annotations;
            # the span still names the tasks submitted through the client
            warnings.filterwarnings("ignore", message="Dask annotations", category=UserWarning)
            yield
        self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - t0
        logger.info("fit phase %r done in %.2fs", name, self.timings[name])

    def report(self, name: str) -> Report | None:
        if self.progress is None:
            return None
        progress = self.progress
        return lambda done, total: progress(name, int(done), int(total))
