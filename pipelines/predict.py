"""The prediction job: a saved model and a Parquet dataset in, predictions as Parquet out.

:func:`predict_to_parquet` loads a model directory (:func:`ebf.artifact.load`: checksums
verified, nothing unpickled), predicts every row of a Parquet dataset on the cluster with
:func:`ebf.dask._predict.predict_frame` (one ``map_partitions`` task per partition, the local
model's own numbers) and writes the result with :func:`pipelines.io.write_parquet_atomic`: one
file per input partition, in row order (``part.NNNNNN.parquet``), the model's version and
hash in every file's schema metadata, nothing at the target unless every file was written.
It takes ``client=None`` (the current client) and ``progress(done, total)`` over partitions.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dask.dataframe as dd
import distributed
import fsspec
import pandas as pd
import pyarrow.dataset as pads

from basics.levels import DEFAULT_QUANTILES
from basics.locations import check_destination
from basics.versions import library_version
from cluster import current_client
from ebf.dask.client import Report
from ebf.dask.graph import input_partitions
from ebf.frames import checked_levels, prediction_meta
from pipelines.artifacts import open_artifact
from pipelines.footers import Footers, read_footers
from pipelines.io import Source, describe_source, read_columns, write_parquet_atomic
from pipelines.schema import SchemaError, inspect_schema, numeric_columns
from pipelines.sizing import check_partitions

__all__ = [
    "PredictionResult",
    "check_kept",
    "check_prediction_data",
    "join_kept",
    "predict_to_parquet",
    "prediction_inputs",
    "prediction_metadata",
    "write_predictions",
]

logger = logging.getLogger(__name__)



def _check_columns(data: Source, features: Sequence[str], needed: Sequence[str],
                   storage_options: Any, footers: Footers | None = None,
                   allow_nulls: bool = False) -> None:
    """Every column in ``needed`` is in every file of ``data`` with one kind, and no numeric
    feature holds nulls unless ``allow_nulls`` (footers only, read here unless given), else
    a SchemaError / ValueError naming them."""
    if footers is None:
        footers = read_footers(data, storage_options)
    columns = inspect_schema(data, storage_options=storage_options)
    missing = [c for c in needed if c not in columns]
    if missing:
        shown = ", ".join(repr(c) for c in list(columns)[:30])
        lacking = [c for c in missing if c in features]
        why = (f"{len(lacking)} column(s) the model needs: {_names(lacking)}" if lacking
               else f"{len(missing)} column(s) to keep (keep_columns, --keep): "
               f"{_names(missing)}; fix the names to keep")
        raise SchemaError(f"the data lacks {why}; available columns: {shown}",
                          columns=missing)
    problems = footers.mismatches({c: "feature" if c in features else "kept" for c in needed
                                   if not columns[c].partition})
    if problems:
        raise SchemaError("; ".join(message for _, message in problems),
                          columns=[c for c, _ in problems])
    if not allow_nulls:
        footers.check_no_nulls(numeric_columns(columns, features),
                               f"the data {footers.source}")



# --------------------------------------------------------------------------- prediction


@dataclass(frozen=True)
class PredictionResult:
    """What :func:`predict_to_parquet` wrote.

    Attributes
    ----------
    path : str
    rows : int
    files : int
    columns : list of str
    metadata : dict of str to str
        The key/values in every file's schema metadata.
    seconds : float
        Wall time of the prediction and the write.
    """

    path: str
    rows: int
    files: int
    columns: list[str]
    metadata: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def _report_partition(part: pd.DataFrame, topic: str, partition_info: Any = None) -> pd.DataFrame:
    """Identity on a partition that tells the client it is done (worker event ``topic``)."""
    number = partition_info.get("number") if isinstance(partition_info, dict) else None
    try:
        worker = distributed.get_worker()
    except ValueError:  # not on a worker (local scheduler): nobody listens
        return part
    worker.log_event(topic, {"partition": number})
    return part


@contextmanager
def _partition_events(
    client: distributed.Client, topic: str, total: int, progress: Report | None
) -> Iterator[None]:
    """Call ``progress(done, total)`` as workers report partitions on ``topic``."""
    if progress is None:
        yield
        return
    seen: set[Any] = set()

    def handler(event: Any) -> None:
        _, message = event
        if isinstance(message, dict):
            seen.add(message.get("partition"))
            progress(min(len(seen), total), total)

    progress(0, total)
    client.subscribe_topic(topic, handler)
    try:
        yield
    finally:
        client.unsubscribe_topic(topic)
    progress(total, total)


def _names(columns: Sequence[str]) -> str:
    return ", ".join(repr(c) for c in columns)


def _needed_columns(features: Sequence[str], keep_columns: Sequence[str]) -> list[str]:
    """The columns a prediction reads: the features, then the kept columns, each once;
    a column kept twice is refused (the predictions would hold it twice)."""
    keep = [str(c) for c in keep_columns]
    twice = sorted({c for c in keep if keep.count(c) > 1})
    if twice:
        raise SchemaError(f"keep_columns (--keep) names {_names(twice)} more than once; "
                          "name each column once", columns=twice)
    return list(dict.fromkeys([*features, *keep]))


def check_prediction_data(model: Any, data: Source, keep_columns: Sequence[str] = (),
                          storage_options: Mapping[str, Any] | None = None,
                          footers: Footers | None = None,
                          quantiles: Sequence[float] | None = None) -> list[str]:
    """The columns a prediction of ``data`` reads; raises before any Dask work if a file lacks
    one, holds it with another type, or has nulls in a numeric feature that the model cannot
    take (footers only), or if a kept column is named twice or (``quantiles`` given: the
    prediction's quantile levels) has the name of a prediction column.

    ``model`` is a model directory or what :func:`pipelines.artifacts.open_artifact` returned;
    the ``ebf predict`` command calls this before it starts the cluster. ``footers``: the
    dataset's footers if the caller read them already.
    """
    if not hasattr(model, "features"):
        model = open_artifact(model, storage_options)
    needed = _needed_columns(model.features, keep_columns)
    if keep_columns and quantiles is not None and model.reader.n_parts:  # else: once loaded
        head = model.reader.head()
        check_kept([str(c) for c in keep_columns], prediction_meta(
            head.classes, head.trunk is not None, checked_levels(quantiles)).columns)
    if not isinstance(data, dd.DataFrame):
        _check_columns(data, model.features, needed, storage_options, footers,
                       model.missing_values)
    return needed


def prediction_inputs(model_dir: str | os.PathLike[str], data: Source) -> dict[str, Any]:
    """What a prediction job reads, for :func:`basics.atomic.check_destination`'s ``inputs``."""
    return {"the model": model_dir, "the input data": data}


def join_kept(pred: pd.DataFrame, kept: pd.DataFrame) -> pd.DataFrame:
    """The kept input columns in front of a partition's predictions."""
    return pd.concat([kept.set_axis(pred.index), pred], axis=1)


def _count_rows(path: str, storage_options: Mapping[str, Any] | None) -> tuple[int, int]:
    """Rows and files of a written Parquet directory, from the footers only."""
    fs, fpath = fsspec.core.url_to_fs(path, **dict(storage_options or {}))
    dataset = pads.dataset(fpath, filesystem=fs, format="parquet")
    return int(dataset.count_rows()), len(dataset.files)


def predict_to_parquet(
    model_dir: str | os.PathLike[str],
    data: Source,
    out: str | os.PathLike[str],
    *,
    quantiles: Sequence[float] = DEFAULT_QUANTILES,
    keep_columns: Sequence[str] = (),
    overwrite: bool = False,
    client: distributed.Client | None = None,
    progress: Report | None = None,
    storage_options: Mapping[str, Any] | None = None,
    strategy: str = "auto",
    data_checked: bool = False,
) -> PredictionResult:
    """Predict every row of a dataset on the cluster and write the predictions as Parquet.

    Parameters
    ----------
    model_dir : str or path-like
        A model directory (:func:`ebf.artifact.save`, ``ebf train``).
    data : str, path-like, list of str or dask.dataframe.DataFrame
        Parquet dataset (file, directory, glob, fsspec URL) or a Dask DataFrame holding the
        model's feature columns (other columns are not read).
    out : str or path-like
        Output directory; it appears only when every file is written.
    quantiles : sequence of float, default=DEFAULT_QUANTILES
        Regressors: levels of the quantile columns (``q05``, ``q50``, ``q95``).
    keep_columns : sequence of str, default=()
        Input columns copied in front of the predictions (row ids, keys, the target...).
    overwrite : bool, default=False
        Replace an existing ``out`` that holds ebf predictions (its ``_ebf_output.json``
        marker); anything else there raises :class:`FileExistsError` before any work, as
        does an ``out`` that is, contains or lies inside the model or the data
        (:func:`basics.atomic.check_destination`).
    client : distributed.Client, optional
        The current client by default.
    progress : callable ``progress(done, total)``, optional
        Called on the driver as partitions are predicted.
    storage_options : dict, optional
        fsspec options for URLs.
    strategy : {"auto", "broadcast", "sharded"}, default="auto"
        How the workers get the model (:func:`ebf.dask._predict.predict_frame`): whole on
        every worker, or one branch per task from its shard; ``"auto"`` chooses from the
        model's size and the workers' memory. The driver never loads the branches.
    data_checked : bool, default=False
        The caller already ran :func:`check_prediction_data` on this model, data and
        ``keep_columns`` (``ebf predict`` does, before the cluster starts): the files'
        footers are not read again.

    Returns
    -------
    PredictionResult

    Notes
    -----
    Columns: regressors ``mean``, ``std`` and the quantiles; classifiers ``proba_<class>``
    and ``predicted``; EBF models also ``branch`` (the trunk leaf that predicted the row).
    Row ``i`` of the output (files in name order) is row ``i`` of the input. Schema
    metadata (:func:`pipelines.io.read_parquet_metadata`): ``ebf.model_hash``
    (:func:`ebf.artifact.model_hash`, the sha256 of the model's content),
    ``ebf.model_version`` (``ebf-model/<format> ebf/<version>``), ``ebf.model_class``,
    ``ebf.model_path``, ``ebf.features`` and ``ebf.quantiles`` (JSON),
    ``ebf.predicted_with`` (the ebf version that predicted).

    Examples
    --------
    >>> res = predict_to_parquet("models/friedman", "data/test", "predictions/")  # doctest: +SKIP
    >>> read_parquet_metadata("predictions/")["ebf.model_hash"]  # doctest: +SKIP
    '3f1c0a9b...'
    """
    from ebf.dask import predict_frame

    t0 = time.perf_counter()
    client = current_client(client)
    check_destination(out, "predictions", overwrite=overwrite,
                      inputs=prediction_inputs(model_dir, data), storage_options=storage_options)
    loaded = open_artifact(model_dir, storage_options)
    keep = [str(c) for c in keep_columns]
    needed = (_needed_columns(loaded.features, keep) if data_checked
              else check_prediction_data(loaded, data, keep, storage_options))
    with input_partitions():  # one task and one output file per input partition
        ddf = read_columns(data, needed, storage_options)
        check_partitions(ddf.npartitions, client, read_footers(data, storage_options).rows
                         if ddf.npartitions < sum(client.nthreads().values()) else None)
        pred = predict_frame(loaded.reader, ddf[loaded.features], tuple(quantiles),
                             client=client, strategy=strategy)
        if keep:
            check_kept(keep, pred.columns)
            kept = ddf[keep]
            meta = join_kept(pred._meta, kept._meta)
            pred = dd.map_partitions(join_kept, pred, kept, meta=meta, align_dataframes=False)
        result, _ = write_predictions(pred, out, loaded, quantiles, source=data,
                                      overwrite=overwrite, client=client, progress=progress,
                                      storage_options=storage_options, started=t0)
    return result


def check_kept(keep: Sequence[str], columns: Sequence[str]) -> None:
    """Kept input columns may not share a name with a prediction column."""
    clash = [c for c in keep if c in columns]
    if clash:
        raise SchemaError(f"keep_columns (--keep) {_names(clash)} would have the name of "
                          f"a prediction column ({_names(columns)}); leave them out, or "
                          "rename them in the data first", columns=clash)


def prediction_metadata(loaded: Any, quantiles: Sequence[float]) -> dict[str, str]:
    """The schema metadata of every predictions file (:func:`predict_to_parquet`'s Notes)."""
    return {
        "ebf.model_hash": loaded.digest,
        "ebf.model_version": loaded.version,
        "ebf.model_class": loaded.model_class,
        "ebf.model_path": (str(Path(loaded.path).resolve()) if loaded.reader.store.is_local
                           else loaded.path),
        "ebf.features": json.dumps(loaded.features),
        "ebf.quantiles": json.dumps([] if loaded.is_classifier else [float(q) for q in quantiles]),
        "ebf.predicted_with": library_version(),
    }


def write_predictions(pred: dd.DataFrame, out: str | os.PathLike[str], loaded: Any,
                      quantiles: Sequence[float], *, source: Source, overwrite: bool = False,
                      client: distributed.Client, progress: Report | None = None,
                      storage_options: Mapping[str, Any] | None = None,
                      others: Sequence[Any] = (), started: float | None = None,
                      check: Callable[[list], None] | None = None,
                      ) -> tuple[PredictionResult, list]:
    """Write a lazy prediction frame of ``loaded`` to ``out`` atomically, computing the lazy
    ``others`` in the same graph (:func:`pipelines.io.write_parquet_atomic`), with
    ``progress(done, total)`` as partitions finish (``check`` sees their values before the
    commit). Returns the result and the values of ``others``."""
    t0 = time.perf_counter() if started is None else started
    topic = f"ebf-predict-{uuid.uuid4().hex[:12]}"
    pred = pred.map_partitions(_report_partition, topic, meta=pred._meta)
    metadata = prediction_metadata(loaded, quantiles)
    logger.info("predicting %s with %s (%s) -> %s, %d partitions", describe_source(source),
                loaded.path, loaded.digest[:12], os.fspath(out), pred.npartitions)
    with _partition_events(client, topic, pred.npartitions, progress), client.as_current():
        values = write_parquet_atomic(pred, out, metadata=metadata, kind="predictions",
                                      overwrite=overwrite,
                                      inputs=prediction_inputs(loaded.path, source),
                                      storage_options=storage_options, others=others,
                                      check=check)
    rows, files = _count_rows(os.fspath(out), storage_options)
    seconds = time.perf_counter() - t0
    logger.info("wrote %d rows in %d files to %s in %.2fs", rows, files, os.fspath(out), seconds)
    return PredictionResult(os.fspath(out), rows, files, list(pred.columns), metadata,
                            seconds), values
