"""Quantile column names: exact, each level once, never a rounded 0 or 100."""

from __future__ import annotations

import numpy as np
import pytest

from ebf.frames import quantile_columns


def test_names_are_the_percent_to_six_decimals():
    assert quantile_columns([0.0, 0.001, 0.5, 0.999999, 1.0]) == [
        "q00", "q0_1", "q50", "q99_9999", "q100"]


@pytest.mark.parametrize("level, near", [(1e-9, 0), (1 - 1e-10, 1)])
def test_a_level_that_would_be_named_as_0_or_1_is_refused(level, near):
    with pytest.raises(ValueError, match=rf"too close to {near} to name its column.*"
                                         r"at least 1e-08 away"):
        quantile_columns([0.5, level])


def test_repeated_levels_are_named_as_numbers():
    with pytest.raises(ValueError, match=r"levels \[0\.5, 0\.5\] give the columns "
                                         r"\['q50', 'q50'\], some twice") as err:
        quantile_columns(np.array([0.5, 0.5]))
    assert "np.float64" not in str(err.value)
