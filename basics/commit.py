"""The commit of a command: the moment its first output is moved into place.

Every output ``ebf`` writes is built aside and moved into place in one step
(:mod:`basics.atomic`): that move is the commit. Before it, nothing of the output exists;
after it, the output is complete. The process's signal handling (the command line's,
:mod:`pipelines.stops`) reads :func:`state`: a stop signal before the commit stops the
command (nothing is written), one during or after it is noted and the command finishes as
if it had not come (its output is committed: success).

Only a move to a final place commits: a move inside a temporary directory (a model saved
inside the temporary directory of a registry version, a staged model) is part of an output
that is moved later. A command with several outputs commits with the first one; the others
follow without heeding signals. A job of several steps whose outputs are kept as they finish
(``ebf demo``) runs them in :func:`staging`: their moves do not commit, a stop signal still
stops it, and its message says where the finished steps are.

Test hook: with ``EBF_TEST_COMMIT_LOG=<file>`` the process appends ``before <unix time>`` to
the file just before a commit and ``after <unix time>`` just after it; with
``EBF_TEST_COMMIT_PAUSE=<seconds>`` too, it waits that long after ``before``, still before
the commit, so that a test can send a signal at a chosen offset around it. Nothing else
reads these variables.

This module holds process-wide state and imports the standard library only.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["COMMITTED", "COMMITTING", "OPEN", "committing", "kept", "note_signal",
           "noted_signals", "request_stop", "reset", "staging", "state", "stop_exception",
           "stop_is_success"]

#: Before the commit / during it / after it.
OPEN, COMMITTING, COMMITTED = "open", "committing", "committed"

#: The test hook's variables (see the module docstring).
TEST_LOG, TEST_PAUSE = "EBF_TEST_COMMIT_LOG", "EBF_TEST_COMMIT_PAUSE"

_state = OPEN
_stop: Callable[[], BaseException] | None = None
_noted: list[int] = []
_staging: list[str] = []  # where the steps of the job being staged are kept
_kept: str | None = None


def reset() -> None:
    """Forget the commit and the signals: a new command starts (the CLI calls this first)."""
    global _state, _stop, _kept
    _state, _stop, _kept = OPEN, None, None
    _noted.clear()
    _staging.clear()


@contextmanager
def staging(where: str) -> Iterator[None]:
    """Within the block, outputs moved into place are steps kept in ``where``, no commit.

    Examples
    --------
    >>> reset()
    >>> with staging("ebf-demo"):
    ...     with committing():
    ...         pass
    >>> state(), kept()
    ('open', 'ebf-demo')
    >>> reset()
    """
    _staging.append(where)
    try:
        yield
    finally:
        _staging.pop()


def kept() -> str | None:
    """Where steps moved into place within :func:`staging` are (None: none was)."""
    return _kept


def state() -> str:
    """:data:`OPEN`, :data:`COMMITTING` or :data:`COMMITTED`."""
    return _state


def request_stop(exception: Callable[[], BaseException]) -> None:
    """A stop signal came before the commit: from now on no commit may start.

    ``exception`` makes the exception that stops the command; :func:`committing` raises it
    should the command go on regardless (an interruption swallowed by a library).
    """
    global _stop
    if _stop is None:
        _stop = exception


def stop_exception() -> BaseException | None:
    """The exception of the stop requested before the commit (None: no stop requested)."""
    return None if _stop is None else _stop()


def stop_is_success() -> None:
    """The command ends on a stop signal by design (``ebf cluster`` holds its cluster until
    Ctrl-C or SIGTERM): the stop it caught is its success, as a commit is."""
    global _state, _stop
    _state, _stop = COMMITTED, None


def note_signal(signum: int) -> None:
    """A signal came during or after the commit: it is recorded, nothing else."""
    _noted.append(signum)


def noted_signals() -> list[int]:
    """The signals :func:`note_signal` recorded, in order."""
    return list(_noted)


def _test_hook(moment: str) -> None:
    log = os.environ.get(TEST_LOG)
    if not log:
        return
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{moment} {time.time():.6f}\n".encode())
    finally:
        os.close(fd)
    if moment == "before":
        time.sleep(float(os.environ.get(TEST_PAUSE) or 0))


@contextmanager
def committing(final: bool = True) -> Iterator[None]:
    """Around the move of a finished output into place: the commit, if it is the first.

    Inside the block the state is :data:`COMMITTING` (signal handlers note signals instead
    of stopping the command), after it :data:`COMMITTED`. If the block raises, the state
    goes back to :data:`OPEN` (nothing was committed). Once committed, or for a move that is
    not ``final`` (inside a temporary directory), the block runs with no change.

    Parameters
    ----------
    final : bool, default=True
        Whether the move puts an output in its final place.

    Raises
    ------
    BaseException
        The stop requested before (:func:`request_stop`): no commit after a stop signal.

    Examples
    --------
    >>> reset(); state()
    'open'
    >>> with committing():
    ...     state()
    'committing'
    >>> state()
    'committed'
    >>> reset()
    """
    global _state, _kept
    if _state != OPEN or not final:
        yield
        return
    if _staging:
        yield
        _kept = _staging[-1]
        return
    _test_hook("before")
    if _stop is not None:
        raise _stop()
    _state = COMMITTING  # from here a signal handler notes signals: the move is not cut
    try:
        yield
    except BaseException:
        _state = OPEN
        raise
    _state = COMMITTED
    _test_hook("after")
