"""How the ``ebf`` command fails: one line naming the cause and the fix, and an exit status.

:func:`describe_failure` turns any exception into ``(exit status, message)``;
:func:`report_failure` prints the message as one line on stderr (the traceback first with
``-v``). :func:`signals_raise` turns SIGTERM (what job schedulers send before killing a
job) into the exception :class:`Terminated` in the main thread, so every clean-up that runs
on an exception (temporary directories, the local cluster) runs on SIGTERM too, as it does
on Ctrl-C (``KeyboardInterrupt``). A second signal of either kind ends the process at once.

Exit statuses (also in :func:`pipelines.cli.main`):

====  =====================================================================================
0     success
1     the job failed: a missing package, no answer from the Dask scheduler, invalid data,
      model or parameters, a worker that kept dying, lost connections, out of memory, an
      I/O error, or an unexpected error
2     usage error: a bad option, an output that exists or may not be replaced, an output
      overlapping an input, a missing input (or registry version), a schema that does not fit
3     ``train`` / ``retrain`` with ``--mlflow-uri``: the model was written, but its MLflow run
      could not be logged (:mod:`pipelines.cli.tracking`)
130   interrupted (Ctrl-C, SIGINT) before the output was committed: nothing was written
141   the reader of standard output went away (``ebf registry show ... | head``): silent,
      as a command killed by SIGPIPE; whatever the command writes to files is unaffected
143   terminated (SIGTERM) before the output was committed: nothing was written
====  =====================================================================================
"""

from __future__ import annotations

import errno
import logging
import os
import select
import signal
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from pipelines.stops import Terminated, install, restore, stop_of, stop_status

__all__ = ["TRACKING_FAILED", "Terminated", "UsageError", "describe_failure", "report_failure",
           "signals_raise"]

logger = logging.getLogger(__name__)

#: Exit statuses of the ``ebf`` command.
OK, FAILED, USAGE, INTERRUPTED, TERMINATED = 0, 1, 2, 130, 128 + signal.SIGTERM
#: The status a shell gives a command that SIGPIPE ended (``cat big | head``).
READER_GONE = 128 + signal.SIGPIPE
#: Exit status of ``train`` / ``retrain`` when the model was written but its MLflow run was
#: not logged: a job that tracks its runs is told, and the model is not lost.
TRACKING_FAILED = 3

_TRACEBACK_HINT = "run with -v for the traceback"


class UsageError(Exception):
    """A bad option or environment variable found after parsing: exit status 2."""


@contextmanager
def signals_raise() -> Iterator[None]:
    """Within the block, a stop signal before the commit raises :class:`Terminated` (SIGTERM)
    or ``KeyboardInterrupt`` (SIGINT); during and after the commit it is noted only.

    The handler is :func:`pipelines.stops.on_signal` (installed by the ``ebf`` entry point
    for the whole run already; this block installs it for in-process callers of
    :func:`pipelines.cli.main` and puts their handlers back at the end). Outside the main
    thread this does nothing.
    """
    previous = install()
    try:
        yield
    finally:
        restore(previous)


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _classes(module: str, *names: str) -> tuple[type, ...]:
    """Exception classes of ``module`` if it is imported (else nothing could have raised them).

    Never imports: a signal may have stopped an import half way, leaving modules that must
    not be touched again while the failure is reported.
    """
    loaded = sys.modules.get(module)
    found = (getattr(loaded, name, None) for name in names)
    return tuple(cls for cls in found if isinstance(cls, type))


def _dask_failure(exc: BaseException) -> tuple[int, str] | None:
    """Messages for distributed's own exceptions."""
    if isinstance(exc, _classes("distributed.scheduler", "KilledWorker")):
        worker = getattr(exc.last_worker, "address", exc.last_worker)
        return FAILED, (
            f"a Dask worker died each of the {exc.allowed_failures + 1} times it ran task "
            f"{exc.task!r} (last: {worker}): it was killed, most likely for using too much "
            "memory, or crashed; give each worker more memory (fewer --n-workers, smaller "
            "partitions or, for train, a smaller --branch-memory) and read the worker logs"
        )
    if isinstance(exc, _classes("distributed.comm.core", "CommClosedError")):
        why = _one_line(exc) or "the connection was closed"
        return FAILED, (
            f"lost the connection to the Dask scheduler or a worker ({why}); check that the "
            "scheduler is still running and reachable (a restart or a network drop closes "
            "connections) and run the job again"
        )
    if isinstance(exc, _classes("distributed.client", "FutureCancelledError")):
        return FAILED, (
            f"Dask cancelled the computation ({_one_line(exc)}): the scheduler restarted or "
            "lost data it could not recompute; run the job again"
        )
    return None


def _cloud_failure(exc: BaseException) -> tuple[int, str] | None:
    """Messages for the object stores' client errors (botocore for ``s3://``, google-auth
    for ``gs://``), which fsspec lets through."""
    if isinstance(exc, _classes("botocore.exceptions", "NoCredentialsError",
                                "PartialCredentialsError")):
        return FAILED, (
            f"no usable credentials for the s3:// path ({_one_line(exc)}); set "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) where the command "
            "and the workers run")
    if isinstance(exc, _classes("botocore.exceptions", "EndpointConnectionError",
                                "ConnectTimeoutError")):
        return FAILED, (
            f"cannot reach the object store ({_one_line(exc)}); check the URL, "
            "AWS_ENDPOINT_URL and the network, then run the job again")
    if isinstance(exc, _classes("google.auth.exceptions", "DefaultCredentialsError")):
        return FAILED, (
            f"no usable credentials for the gs:// path ({_one_line(exc)}); set "
            "GOOGLE_APPLICATION_CREDENTIALS or run `gcloud auth application-default login`")
    return None


def _os_fix(exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        return "free disk space or write somewhere else"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "check the permissions of the path, or use another one"
    if exc.errno == errno.EROFS:
        return "the file system is read-only: write somewhere else"
    if exc.errno in (errno.EEXIST, errno.ENOTDIR):
        return "a file is in the way of a folder on that path: choose another path"
    if exc.errno == errno.EISDIR:
        return "it is a folder: give the path of a file"
    if exc.errno == errno.ENOENT:
        return "check that the path exists"
    return "check the path and the file system"


def _os_text(exc: OSError) -> str:
    """An ``OSError``'s message without Python's ``[Errno N]`` prefix: the path, then the
    reason; the system's own wording (``File exists``) gets the fix :func:`_os_fix` adds."""
    if not exc.strerror:
        return _one_line(exc)
    where = f"{exc.filename}: " if exc.filename else ""
    text = f"{where}{_one_line(exc.strerror)}"
    if exc.errno is not None and exc.strerror == os.strerror(exc.errno):
        text = f"{text}; {_os_fix(exc)}"
    return text


def describe_failure(exc: BaseException) -> tuple[int, str]:
    """The exit status and the one-line message (without the program name) of a failure.

    Parameters
    ----------
    exc : BaseException

    Returns
    -------
    (int, str)
        See the module docstring for the statuses. The message names the cause and the fix.

    Examples
    --------
    >>> describe_failure(MemoryError())[0]
    1
    >>> describe_failure(FileExistsError("out/ exists"))
    (2, 'out/ exists')
    >>> describe_failure(FileExistsError(errno.EEXIST, "the output already exists", "out"))
    (2, 'out: the output already exists')
    >>> describe_failure(NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), "a/b"))[1]
    'a/b: Not a directory; a file is in the way of a folder on that path: choose another path'
    """
    stop = stop_of(exc)
    if stop is not None:
        return stop_status(stop)
    known = _dask_failure(exc) or _cloud_failure(exc)
    if known is not None:
        return known
    text = _os_text(exc) if isinstance(exc, OSError) else _one_line(exc)
    usage = (UsageError, FileExistsError, FileNotFoundError,
             *_classes("basics.locations", "UnsafeOutputError"),
             *_classes("pipelines.schema", "SchemaError"),
             *_classes("pipelines.registry.store", "MissingVersionError"))
    if isinstance(exc, usage):
        return USAGE, text
    if isinstance(exc, ImportError):
        return FAILED, text
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return FAILED, text
    if isinstance(exc, MemoryError):
        return FAILED, (
            "out of memory in the ebf process" + (f" ({text})" if text else "") + "; use "
            "smaller partitions (fewer rows per Parquet file) or a machine with more memory"
        )
    if isinstance(exc, OSError):
        return FAILED, text
    if isinstance(exc, _classes("ebf.artifact", "ModelFormatError")):
        return FAILED, (f"the model cannot be loaded: {text}; pass a model directory written "
                        "by `ebf train` (retrain it if it was modified or damaged)")
    if isinstance(exc, ValueError):  # bad data, model or parameters: the message says which
        return FAILED, text
    if isinstance(exc, TypeError):
        return FAILED, (f"wrong type: {text}; check the column types of the data and the "
                        f"options ({_TRACEBACK_HINT})")
    return FAILED, f"unexpected {type(exc).__name__}: {text or 'no message'} ({_TRACEBACK_HINT})"


def report_failure(exc: BaseException, program: str, verbose: int,
                   stream: TextIO | None = None) -> int:
    """Print ``<program>: error: <message>`` (with ``-v``, the traceback first); the status.

    Parameters
    ----------
    exc : BaseException
    program : str
        ``"ebf predict"``.
    verbose : int
        The count of ``-v``: 1 or more prints the traceback.
    stream : file, optional
        Default ``sys.stderr``.

    Returns
    -------
    int
        The exit status.
    """
    stream = sys.stderr if stream is None else stream
    if isinstance(exc, BrokenPipeError) and _reader_gone(sys.stdout):
        _silence(sys.stdout)  # the reader stopped reading: not a failure to report
        return READER_GONE
    try:
        status, message = describe_failure(exc)
    except Exception:  # e.g. a module left half-imported by a signal: still one line
        status, message = FAILED, f"{type(exc).__name__}: {_one_line(exc)} ({_TRACEBACK_HINT})"
    if verbose and status not in (INTERRUPTED, TERMINATED):
        traceback.print_exception(exc, file=stream)
    label = "error" if status not in (INTERRUPTED, TERMINATED) else "stopped"
    print(f"{program}: {label}: {message}", file=stream, flush=True)
    return status


def _reader_gone(stream: TextIO) -> bool:
    """Whether ``stream`` is a pipe whose reading end was closed (``| head`` has exited):
    polling its descriptor reports an error then (Linux, macOS); a broken pipe elsewhere (a
    socket to a worker) is a failure like any other."""
    try:
        fd = stream.fileno()
        poller = select.poll()
    except (AttributeError, OSError, ValueError):  # a captured stream, or no poll()
        return False
    poller.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


def _silence(stream: TextIO) -> None:
    """Point ``stream``'s descriptor at the null device, so that the interpreter's last
    flush of what is still buffered does not print a second broken pipe."""
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, stream.fileno())
    finally:
        os.close(null)
