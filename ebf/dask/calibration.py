"""Recalibration on a cluster: PIT counts per partition on the workers, one map in the driver.

A regressor's PIT map (:mod:`basics.pit`) is learnt from a histogram of PIT values on fixed
edges (:func:`basics.pit.pit_counts`): every partition task computes the model's own PIT
``F(y|x)`` of its rows (:meth:`basics.recalibration.RecalibrationMixin.pit`, the same code as
the local :meth:`~basics.recalibration.RecalibrationMixin.recalibrate`) and returns only its
counts (about 5,800 integers, whatever the rows); the driver sums them and sets
:meth:`basics.pit.PITMap.from_counts` of the total with the model's public
``set_recalibration``. Counts add up exactly, so the map is the local one for the same rows,
whatever the partitioning or the number of workers. A model whose branches are not in
this process (fit with a stage, :func:`ebf.artifact.stage_model`) is given with its saved
copy (``saved=``): each branch's PIT values are then computed from its shard
(:func:`ebf.dask.sharded.sharded_blocks`), the same values.

:func:`calibration_rows` cuts a Dask DataFrame into the rows to fit on and the calibration rows
by their position in the whole dataset (:mod:`ebf.calibration`).
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import dask
import numpy as np
import pandas as pd

from basics.pit import PIT_EDGES, PITMap, pit_counts

from ..calibration import check_fraction, holdout_mask, recent_start
from ._predict import on_workers
from .graph import GATHER_BYTES, in_threads, shared_model, small_frame
from .live import has_live_parts, live_model
from .sharded import part_output, sharded_blocks

logger = logging.getLogger(__name__)

__all__ = ["calibration_rows", "pit_counts_dask", "recalibrate"]


_TARGET = "__ebf_target__"


def _partition_counts(part: pd.DataFrame, model: Any) -> np.ndarray:
    """``[rows without a target, PIT counts...]`` of one partition (target in ``_TARGET``)."""
    target = pd.to_numeric(part[_TARGET], errors="coerce").to_numpy(dtype=np.float64)
    ok = np.isfinite(target)
    out = np.zeros(PIT_EDGES.size, np.int64)
    out[0] = int((~ok).sum())
    if ok.any():
        out[1:] = pit_counts(model.pit(part.loc[ok].drop(columns=_TARGET), target[ok]))
    return out


class _PITJob:
    """The job of :func:`ebf.dask.sharded.sharded_blocks` giving every row's PIT value of
    the model's own mixture (NaN without a finite target), as ``model.pit`` does."""

    def rows(self, output: Any, y: Any) -> np.ndarray:
        target = pd.to_numeric(pd.Series(y), errors="coerce").to_numpy(dtype=np.float64)
        ok = np.isfinite(target)
        out = np.full((target.size, 1), np.nan)
        if ok.any():
            out[ok, 0] = np.clip(output[ok].cdf(target[ok]), 0.0, 1.0)
        return out

    def part_rows(self, part: Any, A: np.ndarray, y: Any) -> np.ndarray:
        return self.rows(part_output(part, A), y)


def _block_counts(assembled: tuple) -> np.ndarray:
    """``[rows without a target, PIT counts...]`` of one partition's :class:`_PITJob` block."""
    block = assembled[1]
    out = np.zeros(PIT_EDGES.size, np.int64)
    if block is None:
        return out
    u = block[:, 0]
    ok = ~np.isnan(u)
    out[0] = int((~ok).sum())
    out[1:] = pit_counts(u[ok])
    return out


def _sum_counts(*counts: np.ndarray) -> np.ndarray:
    return np.sum(counts, axis=0) if counts else np.zeros(PIT_EDGES.size, np.int64)


def pit_counts_dask(model: Any, X: Any, y: Any, client: Any = None,
                    gather_bytes: int = GATHER_BYTES, saved: Any = None
                    ) -> tuple[np.ndarray, int]:
    """PIT counts of a fitted regressor on a Dask DataFrame, summed over its partitions.

    Small rows come to a model whose parts are all in this process
    (:func:`ebf.dask.graph.small_frame`); otherwise each part computes its rows' values
    where it lives (:mod:`ebf.dask.live`: a Dask fit's branches, or scattered once), or,
    with ``saved``, where its shard is read. The counts are the same either way.

    Parameters
    ----------
    model : fitted regressor of ``ebf`` or ``mondrian``
    X : dask.dataframe.DataFrame
    y : dask.dataframe.Series
        Targets, from the same collection as ``X`` (they are joined into one frame: a
        Parquet reader may partition different column selections differently).
    client : distributed.Client, optional
    gather_bytes : int, default=GATHER_BYTES
        Largest size of the rows (rows x (columns + 1) x 8 bytes) brought to the model.
    saved : ebf.artifact.ModelReader, optional
        The model, saved or staged in format 2 (its branches need not be in ``model``).

    Returns
    -------
    counts : ndarray of int64, shape (len(PIT_EDGES) - 1,)
    n_missing : int
        Rows whose target is missing or not finite (not counted).
    """
    if _TARGET in X.columns:
        raise ValueError(f"X has a column named {_TARGET!r}; rename it.")
    frame = X.assign(**{_TARGET: y})
    if saved is None and has_live_parts(model):  # a Dask fit's branches: where they are
        saved = live_model(model, None)
    if saved is not None:
        blocks = [dask.delayed(_block_counts, pure=True)(b)
                  for b in sharded_blocks(saved, frame, _PITJob(), target=_TARGET)]
        total = dask.delayed(_sum_counts, pure=True)(*blocks)
        total = total.compute() if client is None else client.compute(total).result()
        return total[1:], int(total[0])
    rows = small_frame(frame, client, gather_bytes)
    if rows is not None:
        total = np.sum(in_threads(lambda block: _partition_counts(block, model), rows), axis=0)
        return total[1:], int(total[0])
    live = on_workers(model, client)
    if live is not None:
        return pit_counts_dask(model, X, y, client, gather_bytes, saved=live)
    shared = shared_model(model)
    token = uuid.uuid4().hex[:12]
    tasks = [dask.delayed(_partition_counts, pure=True)(part, shared,
                                                        dask_key_name=f"ebf-pit-{token}-{i}")
             for i, part in enumerate(frame.to_delayed())]
    parts = dask.compute(*tasks) if client is None else client.gather(client.compute(tasks))
    total = np.sum(parts, axis=0) if parts else np.zeros(PIT_EDGES.size, np.int64)
    return total[1:], int(total[0])


def recalibrate(model: Any, X: Any, y: Any, *, client: Any = None,
                n_knots: int | None = None, saved: Any = None) -> Any:
    """Learn ``model``'s PIT map from calibration rows held by the cluster.

    The distributed :meth:`basics.recalibration.RecalibrationMixin.recalibrate`: the same
    map as the local one on the same rows.

    Parameters
    ----------
    model : fitted regressor of ``ebf`` or ``mondrian``
    X : dask.dataframe.DataFrame
    y : dask.dataframe.Series
    client : distributed.Client, optional
    n_knots : int, optional
    saved : ebf.artifact.ModelReader, optional
        ``model`` saved or staged (:func:`pit_counts_dask`): its branches are read from
        their shards, so ``model`` may hold :class:`ebf.artifact.StoredPart` references.

    Returns
    -------
    model
        With its map set (unchanged if this raises).

    Raises
    ------
    ValueError
        If some targets are missing (they are counted first), or fewer than 50 rows remain.
    """
    counts, n_missing = pit_counts_dask(model, X, y, client, saved=saved)
    if n_missing:
        raise ValueError(f"{n_missing} calibration rows have a missing or infinite target; "
                         "drop them before calibrating.")
    pit_map = PITMap.from_counts(counts, n_knots)
    logger.info("recalibrated on %d rows: %r", int(counts.sum()), pit_map)
    return model.set_recalibration(pit_map)


def _ones(part: pd.Series) -> pd.Series:
    return pd.Series(np.ones(len(part), np.int64), index=part.index, name="position")


def _hashed(position: pd.Series, fraction: float, seed: int | None) -> pd.Series:
    return pd.Series(holdout_mask(position.to_numpy(), fraction, seed), index=position.index)


def calibration_rows(ddf: Any, method: str, fraction: float, random_state: int | None = 0,
                     client: Any = None) -> tuple[Any, Any, int]:
    """``(fit rows, calibration rows, n_rows)`` of a Dask DataFrame, by row position.

    The rows are those :func:`ebf.calibration.calibration_split` picks for the same
    ``n_rows``: ``"recent"`` is the last ``fraction`` in dataset order, ``"holdout"`` a
    position-hashed ``fraction``. Positions are a cumulative count inside the graph that
    uses them, so they hold whatever partitions the reader makes of the files (the count
    of partitions of a Parquet dataset can change with the columns read). Counts the rows
    once.

    Parameters
    ----------
    ddf : dask.dataframe.DataFrame
    method : {"recent", "holdout"}
    fraction : float in (0, 1)
    random_state : int or None, default=0
    client : distributed.Client, optional

    Returns
    -------
    fit, calibration : dask.dataframe.DataFrame
    n_rows : int
    """
    if method not in ("recent", "holdout"):
        raise ValueError(f"method must be 'recent' or 'holdout'; got {method!r}.")
    check_fraction(fraction)  # before any data is read
    first = ddf[ddf.columns[0]]
    n_rows = first.shape[0]
    n_rows = int(client.compute(n_rows).result() if client is not None else n_rows.compute())
    position = first.map_partitions(_ones, meta=("position", "int64")).cumsum() - 1
    if method == "recent":
        in_cal = position >= recent_start(n_rows, fraction)
    else:
        in_cal = position.map_partitions(_hashed, fraction, random_state,
                                         meta=("position", "bool"))
    return ddf[~in_cal], ddf[in_cal], n_rows
