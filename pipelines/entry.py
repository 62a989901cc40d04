"""The ``ebf`` command's entry point: signals are handled from the first line to the last.

:func:`main` installs :func:`pipelines.stops.on_signal` before anything else (importing the
command line takes seconds on a busy machine) and never takes it away: before the command's
output is committed a signal stops it with 143 (SIGTERM) or 130 (SIGINT) and one line saying
nothing was written; after the commit, or once the command has returned, a signal changes
nothing (during the interpreter's teardown it ends the process at once with the command's
status). The last exit handler ends the process with ``os._exit`` and that status, its
streams flushed: the rest of the teardown (collecting every module) is skipped, since Python
puts the default actions back during it, when a SIGTERM would end the process with -15
whatever the command did (a soak test saw that).
"""

from __future__ import annotations

import atexit
import logging
import sys

from pipelines import stops

__all__ = ["main"]


def _status_of_exit(stop: SystemExit) -> int:
    """The status ``raise SystemExit(code)`` gives (argparse's usage errors, ``--help``)."""
    if stop.code is None:
        return 0
    if isinstance(stop.code, int):
        return stop.code
    print(stop.code, file=sys.stderr)
    return 1


def main() -> int:
    """Run the ``ebf`` command line (:func:`pipelines.cli.main`) with signals handled.

    Returns
    -------
    int
        The command's status; the process ends with it.
    """
    stops.install()
    atexit.register(_end)  # the first exit handler registered runs last
    try:
        from pipelines.cli import main as run

        status = run()
    except SystemExit as stop:
        status = _status_of_exit(stop)
    except BaseException as exc:  # noqa: B036 - a signal before the command's own handling
        stop = stops.stop_of(exc)
        if stop is None:
            raise
        status, message = stops.stop_status(stop)
        label = " ".join(["ebf", *stops.words(sys.argv[1:])[:1]])
        print(f"{label}: stopped during start-up: {message}", file=sys.stderr)
    stops.finish(status)  # from here a signal ends the process with this status
    _status[:] = [status]
    return status


_status: list[int] = []


def _end() -> None:
    """The last exit handler: end the process with the command's status, now."""
    if _status:
        logging.shutdown()
        stops.exit_now(_status[0])
