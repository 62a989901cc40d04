"""The one level check (``basics.levels.check_levels``): its rules, and that every caller
gives its message."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from basics.levels import check_levels
from basics.metrics import calibration_table, coverage
from basics.mixture import GaussianMixture, central_interval, summarize

QUANTILE = r"must hold probability levels in \[0, 1\]"
COVERAGE = r"must hold probability levels in \(0, 1\)"


@pytest.mark.parametrize(("bad", "message"), [
    (1.5, r"q must hold probability levels in \[0, 1\]: 1 of 1 value is not, q = 1.5; "
          r"pass levels such as 0.05, 0.5, 0.95\."),
    ([0.1, -0.2, 2.0], r"2 of 3 values are not, q\[1\] = -0.2"),
    ([0.5, np.nan], r"1 of 2 values is not, q\[1\] = nan"),
    ([0.5, np.inf], r"q\[1\] = inf"),
    ("half", r"q must be numbers \(probability levels such as 0.05, 0.5, 0.95\); got 'half'"),
    ([[0.1, 0.2]], r"q must be a number or a 1-D array of levels; got shape \(1, 2\)"),
])
def test_bad_levels_name_the_value_and_the_fix(bad, message):
    with pytest.raises(ValueError, match=message):
        check_levels(bad)


def test_good_levels():
    assert check_levels(0.5).ndim == 0
    np.testing.assert_array_equal(check_levels([0.0, 1.0, 0.5, 0.5]), [0.0, 1.0, 0.5, 0.5])
    assert check_levels([]).shape == (0,)
    assert check_levels([[0.1], [0.9]], n_rows=2).shape == (2, 1)  # levels per row
    with pytest.raises(ValueError, match=r"or a \(3, m\) array of levels per row"):
        check_levels([[0.1], [0.9]], n_rows=3)
    with pytest.raises(ValueError, match=r"levels\[0\] = 0.0; pass levels such as 0.5, 0.9"):
        check_levels([0.0], "levels", interior=True)


def test_every_caller_uses_it():
    gm = GaussianMixture.from_moments([0.0, 1.0], [1.0, 2.0])
    for call in (lambda: gm.quantile([0.5, 1.5]), lambda: summarize(gm, [1.5]),
                 lambda: central_interval(gm, 1.5)):
        with pytest.raises(ValueError, match=QUANTILE):
            call()
    y = np.zeros(2)
    for call in (lambda: coverage(y, gm, [0.5, 1.0]),
                 lambda: calibration_table(y, gm, levels=[0.0])):
        with pytest.raises(ValueError, match=COVERAGE):
            call()
    with pytest.raises(ValueError, match="levels is empty"):
        calibration_table(y, gm, levels=[])


def test_estimators_and_the_dask_layer_use_it():
    from ebf._forests import BayesianForestRegressor
    from ebf.dask._predict import output_meta
    from mondrian import MondrianForestRegressor

    rng = np.random.default_rng(0)
    X = rng.random((60, 2))
    y = X[:, 0] + 0.1 * rng.normal(size=60)
    for est in (BayesianForestRegressor(n_estimators=2, random_state=0),
                MondrianForestRegressor(n_estimators=2, random_state=0)):
        est.fit(X, y)
        with pytest.raises(ValueError, match=r"q\[0\] = 1.5"):
            est.predict_quantiles(X[:3], q=[1.5])
        with pytest.raises(ValueError, match=r"quantiles\[1\] = nan"):
            est.predict_summary(X[:3], quantiles=[0.5, np.nan])
        with pytest.raises(ValueError, match=r"quantiles\[0\] = -1.0"):
            output_meta(est, quantiles=[-1.0])


def test_the_command_line_uses_it():
    from pipelines.cli.arguments import level

    assert level(False)("0") == 0.0
    with pytest.raises(argparse.ArgumentTypeError, match=QUANTILE):
        level(False)("1.5")
    with pytest.raises(argparse.ArgumentTypeError, match=COVERAGE):
        level(True)("1")
    with pytest.raises(argparse.ArgumentTypeError, match="must be numbers"):
        level(False)("abc")
