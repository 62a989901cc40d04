"""Which tests are ``slow``: measured, not guessed.

A test is marked ``slow`` when it took 3 s or more (setup, call and teardown) in the last
measured run of the README's test command on a quiet 2-core machine, with numba's kernel
cache warm (``tests/conftest.py`` warms it before the workers start, so no test pays a
compiler). The measured tests and their seconds are in ``tests/durations.json``;
``tests/conftest.py`` marks them at collection, and every ``soak`` test too. To measure
again::

    python -m pytest -q -n 2 --dist loadfile --durations=0 > durations.log
    python -m tests.durations durations.log

which rewrites ``tests/durations.json`` from that run's durations table.
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

#: Seconds from which a test is slow.
SLOW_SECONDS = 3.0
FILE = Path(__file__).with_name("durations.json")
_LINE = re.compile(r"^(\d+(?:\.\d+)?)s (?:setup|call|teardown)\s+(\S.*)$")


def read_log(lines: list[str]) -> dict[str, float]:
    """Seconds per test id (setup + call + teardown) from pytest's ``--durations`` table."""
    seconds: dict[str, float] = defaultdict(float)
    for line in lines:
        m = _LINE.match(line.rstrip("\n"))
        if m:
            seconds[m.group(2)] += float(m.group(1))
    return dict(seconds)


def slow_tests() -> dict[str, float]:
    """The measured slow tests: test id -> seconds."""
    return json.loads(FILE.read_text())["tests"]


def main(log: str) -> None:
    seconds = read_log(Path(log).read_text().splitlines())
    if not seconds:
        raise SystemExit(f"{log} has no durations table: run pytest with --durations=0")
    slow = {k: round(v, 2) for k, v in sorted(seconds.items()) if v >= SLOW_SECONDS}
    FILE.write_text(json.dumps({"slow_seconds": SLOW_SECONDS, "tests": slow}, indent=1) + "\n")
    print(f"{len(slow)} of {len(seconds)} timed tests take {SLOW_SECONDS:g} s or more")


if __name__ == "__main__":
    main(*sys.argv[1:])
