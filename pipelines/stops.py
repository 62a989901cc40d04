"""How the ``ebf`` process stops on SIGTERM and Ctrl-C: one handler for the whole run.

The contract (``docs/cli.md``, exit statuses): once a command's output is committed (moved
into place, :mod:`basics.commit`), the command reports success whatever signal comes after;
before the commit it exits with 128 + the signal (130 for SIGINT, 143 for SIGTERM), one line
saying that nothing was written, and nothing left behind.

:func:`install` sets :func:`on_signal` for both signals, from the first line of
:func:`pipelines.entry.main` to the process's end (no window with Python's defaults, whose
``KeyboardInterrupt`` could surface anywhere and whose SIGTERM kills with status -15):

- before the commit, the first signal raises :class:`Terminated` (SIGTERM) or
  ``KeyboardInterrupt`` (SIGINT) in the main thread, so every clean-up that runs on an
  exception runs (temporary directories, the local cluster), and no commit may start after
  it; a second signal ends the process at once with the same status (what it leaves is
  removed by the next run to the same destination, see :mod:`basics.atomic`);
- during and after the commit, signals are noted and the command goes on to its end (its
  last line, closing the cluster);
- once the command has returned (:func:`finish`), a signal ends the process at once with the
  command's status.

This module is imported before the command line's heavy modules: it imports the standard
library and :mod:`basics.commit` only.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from typing import Any

from basics import commit

__all__ = ["STATUS", "Terminated", "exit_now", "finish", "install", "restore", "stop_of",
           "stop_status", "words"]

#: The exit status of a command stopped by each signal before its commit.
STATUS = {signal.SIGTERM: 128 + signal.SIGTERM, signal.SIGINT: 128 + signal.SIGINT}

logger = logging.getLogger(__name__)


class Terminated(BaseException):
    """SIGTERM arrived before the commit (raised in the main thread by :func:`on_signal`)."""


_finished: int | None = None


def _exception(signum: int) -> BaseException:
    if signum == signal.SIGTERM:
        return Terminated(f"terminated by signal {signum} (SIGTERM)")
    return KeyboardInterrupt()


def _quiet_teardown() -> None:
    # an object whose constructor the signal interrupted may fail in __del__ later
    # (distributed's Future does): log that instead of printing it after the one line
    sys.unraisablehook = _log_unraisable
    # likewise the futures of the cluster's event loop that the teardown abandons: asyncio
    # logs "Future exception was never retrieved" when they are collected
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)


def _log_unraisable(unraisable: Any) -> None:
    logger.debug("ignored after a stop signal: %r in %r", unraisable.exc_value,
                 unraisable.object)


def words(argv: list[str]) -> list[str]:
    """The words of a command line that are neither options nor the value of ``--config``:
    the command and its subcommand come first (``["predict", "m", "d"]``).

    Examples
    --------
    >>> words(["--config", "c.toml", "-v", "predict", "m", "d"])
    ['predict', 'm', 'd']
    """
    out, value = [], False
    for arg in argv:
        if value or arg.startswith("-"):
            value = arg == "--config"
            continue
        out.append(arg)
    return out


def exit_now(status: int, line: str | None = None) -> None:
    """End the process at once with ``status`` (after ``line`` on stderr), streams flushed."""
    try:
        if line:
            sys.stderr.write(line + "\n")
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
    except (OSError, ValueError):  # a closed pipe or stream: the status still tells
        pass
    os._exit(status)


def on_signal(signum: int, frame: object) -> None:
    """The handler of SIGTERM and SIGINT for the whole run (see the module docstring)."""
    if _finished is not None:  # the command has returned: its status is decided
        exit_now(_finished)
    if commit.state() != commit.OPEN:  # committing or committed: the command finishes
        commit.note_signal(signum)
        return
    if commit.stop_exception() is not None:  # a second signal before the commit
        what = "terminated (SIGTERM)" if signum == signal.SIGTERM else "interrupted"
        exit_now(STATUS[signum], f"ebf: stopped: {what} again; nothing was written")
    _quiet_teardown()
    commit.request_stop(lambda: _exception(signum))
    raise _exception(signum)


def install() -> dict[int, Any]:
    """Set :func:`on_signal` for SIGTERM and SIGINT; the previous handlers, by signal.

    SIGINT is left alone when it is ignored (``nohup``, a background job of a
    non-interactive shell). Outside the main thread nothing is set.
    """
    if threading.current_thread() is not threading.main_thread():
        return {}
    previous = {signal.SIGTERM: signal.signal(signal.SIGTERM, on_signal)}
    if signal.getsignal(signal.SIGINT) in (signal.default_int_handler, on_signal):
        previous[signal.SIGINT] = signal.signal(signal.SIGINT, on_signal)
    return previous


def restore(previous: dict[int, Any]) -> None:
    """Put back the handlers :func:`install` returned."""
    for signum, handler in previous.items():
        signal.signal(signum, handler)


def finish(status: int) -> None:
    """The command returned ``status``: from now on a signal ends the process with it."""
    global _finished
    _finished = status


def stop_of(exc: BaseException | None) -> BaseException | None:
    """The :class:`Terminated` / ``KeyboardInterrupt`` behind ``exc``, if any.

    A signal can arrive anywhere, e.g. during an import, where Python wraps it (a
    ``RuntimeError`` from ``__set_name__``); the chain of causes still holds it.
    """
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, (Terminated, KeyboardInterrupt)):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def stop_status(stop: BaseException) -> tuple[int, str]:
    """The exit status and the message of a command stopped before its commit."""
    where = commit.kept()
    done = ("nothing was written" if where is None else
            f"not finished; the steps done so far are kept in {where} (complete each)")
    if isinstance(stop, Terminated):
        return STATUS[signal.SIGTERM], f"terminated (SIGTERM); {done}"
    return STATUS[signal.SIGINT], f"interrupted; {done}"
