"""Progress output of the command line: status lines and text progress bars on stderr.

Only the CLI prints (``docs/architecture.md``); library code reports progress through callbacks
(``progress(phase, done, total)``) that the classes here turn into bars. ``quiet``
silences everything. On a terminal a bar is redrawn in place (``\r``); anywhere else (a
pipe, a file, a job's log) every message is a whole line starting with the time, and a bar
prints a line per tenth of its total (or every :data:`LINE_SECONDS`), so logs hold no
``\r``.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from pipelines.progress import phase_label

#: Without a terminal, a bar prints a line at least this often while it moves.
LINE_SECONDS = 10.0


def is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal (bars redrawn in place) rather than a pipe or file."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except ValueError:  # closed
        return False


def stamp() -> str:
    """The time a log line starts with: ``HH:MM:SS``."""
    return time.strftime("%H:%M:%S")


class StatusLine:
    """Phase messages on stderr (``--quiet`` silences them); the report goes to stdout."""

    def __init__(self, quiet: bool, stream: TextIO | None = None) -> None:
        self.quiet = quiet
        self.stream = stream if stream is not None else sys.stderr
        self.terminal = is_terminal(self.stream)
        self._t0 = 0.0
        self._message = ""

    def start(self, message: str) -> None:
        self._t0, self._message = time.perf_counter(), message
        if self.quiet:
            return
        if self.terminal:
            print(f"{message} ...", end="", flush=True, file=self.stream)
        else:
            print(f"{stamp()} {message} ...", flush=True, file=self.stream)

    def done(self) -> float:
        elapsed = time.perf_counter() - self._t0
        if self.quiet:
            return elapsed
        if self.terminal:
            print(f" {elapsed:.2f}s", flush=True, file=self.stream)
        else:
            print(f"{stamp()} {self._message}: done in {elapsed:.2f}s", flush=True,
                  file=self.stream)
        return elapsed

    def failed(self) -> None:
        """End the started message with ``failed``."""
        if not self.quiet:
            print(" failed" if self.terminal else f"{stamp()} {self._message}: failed",
                  flush=True, file=self.stream)

    def note(self, text: str) -> None:
        """A line of its own (starting with the time when not on a terminal)."""
        if not self.quiet:
            print(text if self.terminal else f"{stamp()} {text}", flush=True, file=self.stream)


class ProgressBar:
    """A text progress bar on stderr, ``progress(done, total)``; ``--quiet`` silences it."""

    def __init__(
        self, label: str, quiet: bool, stream: TextIO | None = None, width: int = 30
    ) -> None:
        self.label = label
        self.quiet = quiet
        self.stream = stream if stream is not None else sys.stderr
        self.terminal = is_terminal(self.stream)
        self.width = width
        self._t0 = time.perf_counter()
        self._line = (-1, 0.0)  # done and time of the last line printed (no terminal)

    def __call__(self, done: int, total: int) -> None:
        if self.quiet or total <= 0:
            return
        if not self.terminal:
            self._log_line(done, total)
            return
        filled = self.width * done // total
        bar = "#" * filled + "." * (self.width - filled)
        elapsed = time.perf_counter() - self._t0
        end = "\n" if done >= total else ""
        print(
            f"\r{self.label} [{bar}] {done}/{total} {elapsed:.1f}s",
            end=end,
            flush=True,
            file=self.stream,
        )


    def _log_line(self, done: int, total: int) -> None:
        now = time.perf_counter()
        last, when = self._line
        if done == last or not (done >= total or done - last >= -(-total // 10)
                                or now - when >= LINE_SECONDS):
            return
        self._line = (done, now)
        print(f"{stamp()} {self.label}: {done}/{total} {now - self._t0:.1f}s", flush=True,
              file=self.stream)


class PhaseBars:
    """``progress(phase, done, total)``: one stderr line per phase, a bar if ``total > 0``.

    The trunk reports ``(leaves, max_leaves)`` once per level. Thread-safe: prediction
    progress arrives on the client's event-loop thread.
    """

    def __init__(self, quiet: bool, stream: TextIO | None = None) -> None:
        self.quiet = quiet
        self.stream = stream if stream is not None else sys.stderr
        self.terminal = is_terminal(self.stream)
        self._lock = threading.Lock()
        self._phase: str | None = None
        self._bar: ProgressBar | None = None
        self._open = False  # a line was started and not ended
        self._finished = False  # the current phase's bar reached its total
        self._levels = 0

    def _print(self, text: str, end: str = "") -> None:
        print(text, end=end, flush=True, file=self.stream)

    def _end_line(self) -> None:
        if self._open and self._bar is not None:
            elapsed = time.perf_counter() - self._bar._t0
            if self.terminal:
                self._print(f" {elapsed:.1f}s", end="\n")
            else:
                self._print(f"{stamp()} {self._bar.label}: done in {elapsed:.1f}s", end="\n")
        self._open = False

    def _status(self, text: str) -> None:
        """A phase's message: redrawn in place on a terminal, else a line of its own."""
        if self.terminal:
            self._print(f"\r{text}")
        else:
            self._print(f"{stamp()} {text}", end="\n")

    def __call__(self, phase: str, done: int, total: int) -> None:
        if self.quiet:
            return
        with self._lock:
            if phase != self._phase:
                self._end_line()
                self._phase, self._levels = phase, 0
                self._bar = ProgressBar(phase_label(phase), False, self.stream)
                self._finished = False
            if self._finished:
                return
            assert self._bar is not None
            label = self._bar.label
            # the state first, then the text: a Ctrl-C between the two must still let
            # close() end the line before the one-line failure message
            if phase.endswith("trunk"):
                self._levels += 1
                most = f" (at most {total} leaves)" if total > 0 else ""
                self._open = True
                self._status(f"{label}: level {self._levels}, splitting {done} leaves{most}")
            elif total <= 0:
                if self._open and not self.terminal:
                    return  # said once
                self._open = True
                self._status(f"{label} ...")
            else:
                self._finished = done >= total  # the bar ends its line
                self._open = not self._finished and self.terminal  # else lines are whole
                self._bar(done, total)

    def close(self) -> None:
        """End the current line (call when the job is over)."""
        with self._lock:
            self._end_line()
            self._phase = None
