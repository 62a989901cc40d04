"""The ``ebf`` command's entry point: signals are handled from the first line.

:func:`pipelines.cli.main` turns SIGTERM and Ctrl-C into one line and exit 143 / 130 once it
runs; before that, while its modules are still being imported (seconds on a busy machine),
the default action would kill the process silently. :func:`main` installs a handler first
that exits the same way (nothing has been written yet), then imports and runs the command.
Once the command has returned, a signal during the interpreter's teardown ends the process at
once with the command's status (a soak test saw SIGTERM there give -15 and no line).
"""

from __future__ import annotations

import os
import signal
import sys

__all__ = ["main"]

_STATUS = {signal.SIGTERM: 143, signal.SIGINT: 130}


def _during_start_up(signum: int, frame: object) -> None:
    signal.signal(signum, signal.SIG_DFL)  # a second signal ends the process at once
    what = "terminated (SIGTERM)" if signum == signal.SIGTERM else "interrupted"
    sys.stderr.write(f"ebf: stopped during start-up: {what}; nothing was written\n")
    raise SystemExit(_STATUS[signum])


def main() -> int:
    """Run the ``ebf`` command line (:func:`pipelines.cli.main`) with signals handled."""
    previous = {signal.SIGTERM: signal.signal(signal.SIGTERM, _during_start_up)}
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not ignored (nohup, &)
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, _during_start_up)
    from pipelines.cli import main as run

    for signum, handler in previous.items():  # main installs its own at once
        signal.signal(signum, handler)
    status = run()

    def _after_the_job(signum: int, frame: object) -> None:
        # the job is over, its outputs in place or removed: a signal during the interpreter's
        # teardown (closing the cluster's connections) ends it with the job's status
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(status)

    for signum in previous:
        signal.signal(signum, _after_the_job)
    return status
