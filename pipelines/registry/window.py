"""Cutting a window of new data for a registry version (:mod:`pipelines.registry.retrain`).

A window's rows are cut by position: the most recent ``holdout`` share (or a separate
dataset) for the gate, then the calibration slice of the rest as
:func:`pipelines.train.train` cuts it; the rest is fit on. An update also takes the rows of
the parent's window its model was not fit on (:func:`carried_rows`): they are past data now.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import dask.dataframe as dd
import distributed

from ebf.dask.calibration import calibration_rows
from pipelines.io import read_dataset
from pipelines.options import TrainOptions

__all__ = ["Window", "carried_rows", "cut_window"]

logger = logging.getLogger(__name__)


@dataclass
class Window:
    """A window of data cut for one version: the rows to fit, the most recent slice of them
    to recalibrate on (``cal``, None without recalibration) and the holdout of the gate
    (``own_holdout``: the window's most recent rows rather than a separate dataset)."""

    fit: dd.DataFrame
    cal: dd.DataFrame | None
    holdout: dd.DataFrame
    n_rows: int
    own_holdout: bool

    @property
    def excluded(self) -> list[dd.DataFrame]:
        """The window's rows the version's model was not fit on, in dataset order."""
        return [d for d in (self.cal, self.holdout if self.own_holdout else None)
                if d is not None]


def cut_window(data: Any, columns: list[str], holdout: float | None, holdout_data: Any,
               options: TrainOptions, client: distributed.Client, storage_options: Any,
               persist: bool = False) -> Window:
    """Cut a window: the holdout (most recent ``holdout`` share, or ``holdout_data``), then
    the calibration slice of the rest as :func:`pipelines.train.train` cuts it; with
    ``persist``, the window is read once and kept on the workers for every pass (the
    counts, the cuts, the drift check's sample, the update: a window of new rows, small
    next to the model and its earlier data)."""
    seed = options.random_state
    ddf = read_dataset(data, columns, storage_options=storage_options)
    if persist:
        ddf = client.persist(ddf)
    if holdout_data is not None:
        rest = ddf
        hold = read_dataset(holdout_data, columns, storage_options=storage_options)
        n = int(client.compute(ddf.shape[0]).result())
    else:
        rest, hold, n = calibration_rows(ddf, "recent", holdout, seed, client)
    fit, cal = rest, None
    if options.calibrate != "none":
        fit, cal, _ = calibration_rows(rest, options.calibrate, options.calibration_fraction,
                                       seed, client)
        cal = client.persist(cal)  # small, and read by several passes
    return Window(fit, cal, client.persist(hold), n, holdout_data is None)


def carried_rows(parent_record: Mapping[str, Any], columns: list[str],
                 options: TrainOptions, client: distributed.Client,
                 storage_options: Any) -> list[dd.DataFrame]:
    """The rows of the parent's window its model was not fit on (its calibration slice and
    holdout), which an update adds: they are past data now."""
    lineage = parent_record["lineage"]
    path = lineage["new_data"]["path"]
    held = lineage["holdout"]
    try:
        parent = cut_window(path, columns, held.get("fraction"),
                            held["data"]["path"] if "data" in held else None, options,
                            client, storage_options)
    except FileNotFoundError:
        logger.warning("retrain: the parent's window %s is gone; its held-out rows are not "
                       "added", path)
        return []
    return parent.excluded
