"""tests/durations.py: the measured ``slow`` marks."""

import re
from pathlib import Path

from tests.durations import SLOW_SECONDS, read_log, slow_tests

ROOT = Path(__file__).resolve().parents[1]


def test_the_durations_table_is_read_per_test_id():
    log = ["============ slowest durations ============",
           "3.10s call     tests/a.py::test_x[p q]",
           "0.50s setup    tests/a.py::test_x[p q]",
           "0.01s teardown tests/a.py::test_y",
           "(12 durations < 0.005s hidden.)"]
    assert read_log(log) == {"tests/a.py::test_x[p q]": 3.6, "tests/a.py::test_y": 0.01}


def test_every_measured_slow_test_still_exists():
    for test_id, seconds in slow_tests().items():
        assert seconds >= SLOW_SECONDS, test_id
        path, _, name = test_id.partition("::")
        function = re.sub(r"\[.*$", "", name).split("::")[-1]
        source = (ROOT / path).read_text()
        assert re.search(rf"^\s*def {function}\(", source, re.M), f"{test_id}: not found"
