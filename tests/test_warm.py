"""pipelines.warm: the kernel warm-up the test suite runs before its workers start."""

import pytest

from pipelines.warm import FAMILIES, warm_kernels


def test_warm_kernels_runs_the_families_asked_for_and_refuses_unknown_ones():
    seconds = warm_kernels(("forests",))
    assert list(seconds) == ["forests"] and seconds["forests"] > 0
    with pytest.raises(ValueError, match="unknown families \\['trees'\\]"):
        warm_kernels(("forests", "trees"))
    assert set(FAMILIES) == {"forests", "mondrian", "bayesian trees"}


def test_families_warmed_in_processes_report_their_seconds():
    seconds = warm_kernels(("forests", "bayesian trees"), processes=2)
    assert list(seconds) == ["bayesian trees", "forests"]
    assert all(s > 0 for s in seconds.values())
