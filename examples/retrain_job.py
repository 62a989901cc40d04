"""The nightly retraining job on a date-partitioned Parquet dataset, as plain functions.

A dataset that grows by one partition a day, one directory per day named hive style::

    ROOT/date=2013-07-01/part.0.parquet ...
    ROOT/date=2013-08-01/...

Each night the job retrains the registry's model (:func:`pipelines.registry.retrain.retrain`) on
yesterday's partition alone: the drift check decides between extending the champion's
branches online and a refit on everything seen so far, and the gate decides whether the
challenger becomes current. A re-run on the same partition is a no-op that reports the
version it made, so a scheduler may retry the job freely.

The cron wrapper (``retrain_daily.sh``, ``crontab``) runs the same job through the ``ebf
retrain`` command; the Prefect flow (``prefect_flow.py``) wraps these functions in tasks.
The key is named ``date`` rather than after a feature (``month=07`` would clash with the
flights' ``month`` column): the job reads one partition directory with the model's columns
only, so the key never becomes a feature.

Examples
--------
>>> from retrain_job import partition_path, run_retrain        # doctest: +SKIP
>>> run_retrain("registry/", "flights/", "2013-08-01", target="arr_delay")  # doctest: +SKIP
{'day': '2013-08-01', 'version': 2, 'decision': 'promoted', 'action': 'update', ...}
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from basics.atomic import atomic_dir
from basics.places import Place

__all__ = ["PARTITION_KEY", "available_days", "parse_day", "partition_path", "run_retrain",
           "summarize", "write_daily_partitions"]

logger = logging.getLogger(__name__)

#: Name of the hive partition key of the daily directories (``date=YYYY-MM-DD``).
PARTITION_KEY = "date"
_PARTITION = re.compile(rf"^{PARTITION_KEY}=(\d{{4}}-\d{{2}}-\d{{2}})$")

Day = str | dt.date | None


def parse_day(day: Day = None) -> dt.date:
    """The day a run is for: ``None`` is yesterday (local time), else an ISO date.

    Parameters
    ----------
    day : str, datetime.date or None

    Returns
    -------
    datetime.date

    Examples
    --------
    >>> parse_day("2013-07-01")
    datetime.date(2013, 7, 1)
    """
    if day is None:
        return dt.date.today() - dt.timedelta(days=1)
    if isinstance(day, dt.datetime):
        return day.date()
    if isinstance(day, dt.date):
        return day
    try:
        return dt.date.fromisoformat(str(day))
    except ValueError:
        raise ValueError(f"day must be an ISO date such as 2013-07-01; got {day!r}.") from None


def available_days(root: str | os.PathLike,
                   storage_options: Mapping[str, Any] | None = None) -> list[dt.date]:
    """The days that have a partition under ``root``, in order (empty if ``root`` is absent).

    Parameters
    ----------
    root : str or path-like
        The dataset root (a local path or an fsspec URL).
    storage_options : dict, optional

    Returns
    -------
    list of datetime.date
    """
    place = Place.of(root, storage_options)
    if not place.isdir():
        return []
    days = []
    for name in place.listdir():
        match = _PARTITION.match(name)
        if match:
            try:
                days.append(dt.date.fromisoformat(match.group(1)))
            except ValueError:  # date=2013-02-30: not a day, not a partition of ours
                continue
    return sorted(days)


def partition_path(root: str | os.PathLike, day: Day = None,
                   storage_options: Mapping[str, Any] | None = None) -> str:
    """The directory of ``day``'s partition, checked to exist.

    Parameters
    ----------
    root : str or path-like
        The dataset root (a local path or an fsspec URL).
    day : str, datetime.date or None
        The day (default: yesterday).
    storage_options : dict, optional

    Returns
    -------
    str
        ``ROOT/date=YYYY-MM-DD``, absolute for a local root (the registry records it, and
        a later refit reads it from wherever it runs).

    Raises
    ------
    FileNotFoundError
        If the partition is missing: the message names the path and the days available.
    """
    day = parse_day(day)
    place = Place.of(root, storage_options).child(f"{PARTITION_KEY}={day.isoformat()}")
    if place.isdir():
        return place.url
    days = available_days(root, storage_options)
    shown = ", ".join(d.isoformat() for d in days[-5:]) or "none"
    more = f" (last 5 of {len(days)})" if len(days) > 5 else ""
    raise FileNotFoundError(
        f"no partition for {day.isoformat()}: {place.url} does not exist. Days available "
        f"under {os.fspath(root)}: {shown}{more}. Write the day's data there first, or pass "
        "the day to retrain.")


def write_daily_partitions(root: str | os.PathLike,
                           frames: Mapping[Day, pd.DataFrame], *, files_per_day: int = 2,
                           overwrite: bool = False,
                           storage_options: Mapping[str, Any] | None = None
                           ) -> dict[dt.date, str]:
    """Write one partition per day, each atomically (a reader never sees half a day).

    Parameters
    ----------
    root : str or path-like
        The dataset root (a local path or an fsspec URL).
    frames : mapping of day to pandas.DataFrame
        The rows of each day, in time order (the retrain job holds out the most recent).
    files_per_day : int, default=2
        Parquet files per partition (consecutive slices of the rows).
    overwrite : bool, default=False
        Replace a day written before by this function.
    storage_options : dict, optional

    Returns
    -------
    dict
        Day -> the partition's path, as :func:`partition_path` gives it.
    """
    if files_per_day < 1:
        raise ValueError(f"files_per_day must be at least 1; got {files_per_day}.")
    options = dict(storage_options) if storage_options else None
    paths = {}
    for day, frame in frames.items():
        day = parse_day(day)
        if len(frame) < files_per_day:
            raise ValueError(f"the frame of {day} has {len(frame)} rows, fewer than "
                             f"files_per_day={files_per_day}; lower files_per_day.")
        url = Place.of(root, storage_options).child(f"{PARTITION_KEY}={day.isoformat()}").url
        bounds = np.linspace(0, len(frame), files_per_day + 1).astype(int)
        with atomic_dir(url, "dataset", overwrite=overwrite,
                        storage_options=storage_options) as tmp:
            for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
                frame.iloc[a:b].to_parquet(f"{tmp}/part.{i}.parquet", index=False,
                                           storage_options=options)
        logger.info("wrote %d rows for %s to %s", len(frame), day, url)
        paths[day] = url
    return paths


def summarize(result: Any, day: Day, data: str) -> dict[str, Any]:
    """A JSON-ready summary of a :class:`pipelines.registry.retrain.RetrainResult`.

    Parameters
    ----------
    result : pipelines.registry.retrain.RetrainResult
    day : str, datetime.date or None
        The day of the run's partition.
    data : str
        The partition's path.

    Returns
    -------
    dict
        ``day``, ``data``, ``version``, ``decision`` (trained / promoted / kept), ``action``
        (train / update / refit), ``exit_code`` (that of ``ebf retrain``: 0, or 10 when the
        champion is kept), ``reused`` (a re-run), ``reason``, ``drift`` (the drift check's
        decision, None for version 1) and ``metrics`` (holdout metrics of the champion and
        the challenger).
    """
    record = result.record
    drift = record.get("drift") or {}
    return {"day": parse_day(day).isoformat(), "data": data, "version": result.version,
            "decision": result.decision, "action": result.action,
            "exit_code": result.exit_code, "reused": result.reused,
            "reason": record.get("reason"), "drift": drift.get("decision"),
            "metrics": record.get("metrics")}


def run_retrain(registry: str, root: str | os.PathLike, day: Day = None, *,
                storage_options: Mapping[str, Any] | None = None,
                **options: Any) -> dict[str, Any]:
    """Retrain the registry's model on one day's partition.

    Parameters
    ----------
    registry : str
        Registry root (a local path or an fsspec URL).
    root : str or path-like
        The date-partitioned dataset.
    day : str, datetime.date or None
        The day (default: yesterday).
    storage_options : dict, optional
        fsspec options of the registry and the data.
    **options
        Keyword arguments of :func:`pipelines.registry.retrain.retrain` (``target`` and
        ``train_options`` for version 1, ``name``, ``holdout``, ``drift_threshold``,
        ``tolerances``, ``refit_on``, ``client``...). Without ``client``, the current
        default Dask client.

    Returns
    -------
    dict
        As :func:`summarize`.

    Raises
    ------
    FileNotFoundError
        If the day has no partition (before any work).
    """
    from pipelines.registry.retrain import retrain

    day = parse_day(day)
    data = partition_path(root, day, storage_options)
    result = retrain(registry, data, storage_options=storage_options, **options)
    summary = summarize(result, day, data)
    logger.info("retrain %s: version %d %s (%s)", summary["day"], result.version,
                result.decision, result.action)
    return summary
