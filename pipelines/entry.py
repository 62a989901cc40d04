"""The ``ebf`` command's entry point: signals are handled from the first line to the last.

:func:`main` installs :func:`pipelines.stops.on_signal` before anything else (importing the
command line takes seconds on a busy machine) and never takes it away: before the command's
output is committed a signal stops it with 143 (SIGTERM) or 130 (SIGINT) and one line saying
nothing was written; after the commit, or once the command has returned, a signal changes
nothing. The process then ends with ``os._exit`` and the command's status, after flushing
its streams: the interpreter's own teardown (collecting every module, seconds with a Dask
cluster's threads) is skipped, since Python puts the default actions back during it, when a
SIGTERM would end the process with -15 whatever the command did (a soak test saw that).
"""

from __future__ import annotations

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
        Never returns in fact: the process ends with the command's status.
    """
    stops.install()
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
        word = next((a for a in sys.argv[1:] if not a.startswith("-")), None)
        print(f"ebf{' ' + word if word else ''}: stopped: {message}", file=sys.stderr)
    stops.finish(status)  # from here a signal ends the process with this status
    logging.shutdown()
    stops.exit_now(status)
    return status  # pragma: no cover - exit_now does not return
