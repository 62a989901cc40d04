"""Scoring jobs: distributed prediction to Parquet and distributed evaluation of a saved model.

:func:`predict_to_parquet`
    Loads a model directory (:func:`ebf.model.load`: checksums verified, nothing
    unpickled), predicts every row of a Parquet dataset on the cluster with
    :func:`ebf.dask.predict.predict_frame` (one ``map_partitions`` task per partition, the
    local model's own numbers) and writes the result with
    :func:`pipelines.io.write_parquet_atomic`: one file per input partition, in row order
    (``part.NNNNNN.parquet``), the model's version and hash in every file's schema metadata,
    nothing at the target unless every file was written.

:func:`evaluate`
    Streams a labelled dataset through the model, partition by partition: each task reduces
    its rows to a few sums (squared errors, log densities, counts inside each central
    interval; for classifiers correct predictions and log losses) and only those sums reach
    the driver. Interval coverage needs one number per row, the predictive CDF at the
    observed value ``u = F(y)``: ``y`` lies in the central ``z`` interval
    ``[F^-1((1 - z) / 2), F^-1((1 + z) / 2)]`` exactly when ``(1 - z) / 2 <= u <= (1 + z) / 2``
    (``F`` is continuous and strictly increasing), so the exact intervals of the predictive
    mixture cost no quantile search. RMSE and NLPD equal :mod:`basics.metrics` on the
    whole dataset (``rmse``, ``nlpd`` of ``model.predict_distribution(X)``) up to the order of
    summation, and so does ``calibration_table`` except for a row whose ``y`` lies in a flat
    stretch of the CDF exactly at an interval bound (well-separated narrow components,
    mostly on training rows): the interval is not unique there, a quantile search may land
    anywhere in the stretch, while ``u`` decides it deterministically.

Both take ``client=None`` (the current client) and ``progress(done, total)`` over partitions.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dask
import dask.dataframe as dd
import distributed
import fsspec
import numpy as np
import pandas as pd
import pyarrow.dataset as pads

from basics.locations import check_destination
from basics.metrics import coverage_levels
from basics.versions import library_version
from cluster import current_client
from ebf.dask.client import Report, gather
from ebf.dask.predict import model_in_graph, shared_model, small_frame
from ebf.dask.sharded import choose_strategy, sharded_blocks, whole_model
from pipelines.artifacts import LoadedModel, ModelArtifact, load_model, open_artifact
from pipelines.diagnostics import EvaluationJob, before_after
from pipelines.evaluate import DEFAULT_LEVELS
from pipelines.footers import read_footers
from pipelines.io import read_dataset, write_parquet_atomic
from pipelines.schema import SchemaError, check_schema, inspect_schema, numeric_columns

__all__ = [
    "LoadedModel",
    "ModelArtifact",
    "PredictionResult",
    "evaluate",
    "evaluate_model",
    "format_evaluation",
    "load_model",
    "open_artifact",
    "predict_to_parquet",
]

logger = logging.getLogger(__name__)



_Source = str | os.PathLike[str] | Sequence[str] | dd.DataFrame



def _check_columns(data: _Source, features: Sequence[str], needed: Sequence[str],
                   storage_options: Any) -> None:
    """Every column in ``needed`` is in every file of ``data`` with one kind, and no numeric
    feature holds nulls (footers only), else a SchemaError / ValueError naming them."""
    footers = read_footers(data, storage_options)
    columns = inspect_schema(data, storage_options=storage_options)
    missing = [c for c in needed if c not in columns]
    if missing:
        shown = ", ".join(repr(c) for c in list(columns)[:30])
        raise SchemaError(
            f"the data lacks {len(missing)} column(s) the model needs: "
            f"{', '.join(repr(c) for c in missing)}; available columns: {shown}",
            columns=missing,
        )
    problems = footers.mismatches({c: "feature" if c in features else "kept" for c in needed
                                   if not columns[c].partition})
    if problems:
        raise SchemaError("; ".join(message for _, message in problems),
                          columns=[c for c, _ in problems])
    footers.check_no_nulls(numeric_columns(columns, features), f"the data {footers.source}")


def _read(data: _Source, columns: list[str], storage_options: Any) -> dd.DataFrame:
    if isinstance(data, dd.DataFrame):
        return data[columns]
    return read_dataset(data, columns, storage_options=storage_options)


def _describe(data: _Source) -> str:
    if isinstance(data, dd.DataFrame):
        return "<dask DataFrame>"
    if isinstance(data, (list, tuple)):
        return ", ".join(os.fspath(p) for p in data)
    return os.fspath(data)


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


def prediction_inputs(model_dir: str | os.PathLike[str], data: _Source) -> dict[str, Any]:
    """What a prediction job reads, for :func:`basics.locations.check_destination`'s ``inputs``."""
    return {"the model": model_dir, "the input data": data}


def _join_columns(pred: pd.DataFrame, kept: pd.DataFrame) -> pd.DataFrame:
    return pd.concat([kept.set_axis(pred.index), pred], axis=1)


def _count_rows(path: str, storage_options: Mapping[str, Any] | None) -> tuple[int, int]:
    """Rows and files of a written Parquet directory, from the footers only."""
    fs, fpath = fsspec.core.url_to_fs(path, **dict(storage_options or {}))
    dataset = pads.dataset(fpath, filesystem=fs, format="parquet")
    return int(dataset.count_rows()), len(dataset.files)


def predict_to_parquet(
    model_dir: str | os.PathLike[str],
    data: _Source,
    out: str | os.PathLike[str],
    *,
    quantiles: Sequence[float] = (0.05, 0.5, 0.95),
    keep_columns: Sequence[str] = (),
    overwrite: bool = False,
    client: distributed.Client | None = None,
    progress: Report | None = None,
    storage_options: Mapping[str, Any] | None = None,
    strategy: str = "auto",
) -> PredictionResult:
    """Predict every row of a dataset on the cluster and write the predictions as Parquet.

    Parameters
    ----------
    model_dir : str or path-like
        A model directory (:func:`ebf.model.save`, ``ebf train``).
    data : str, path-like, list of str or dask.dataframe.DataFrame
        Parquet dataset (file, directory, glob, fsspec URL) or a Dask DataFrame holding the
        model's feature columns (other columns are not read).
    out : str or path-like
        Output directory; it appears only when every file is written.
    quantiles : sequence of float, default=(0.05, 0.5, 0.95)
        Regressors: levels of the quantile columns (``q05``, ``q50``, ``q95``).
    keep_columns : sequence of str, default=()
        Input columns copied in front of the predictions (row ids, keys, the target...).
    overwrite : bool, default=False
        Replace an existing ``out`` that holds ebf predictions (its ``_ebf_output.json``
        marker); anything else there raises :class:`FileExistsError` before any work, as
        does an ``out`` that is, contains or lies inside the model or the data
        (:func:`basics.locations.check_destination`).
    client : distributed.Client, optional
        The current client by default.
    progress : callable ``progress(done, total)``, optional
        Called on the driver as partitions are predicted.
    storage_options : dict, optional
        fsspec options for URLs.
    strategy : {"auto", "broadcast", "sharded"}, default="auto"
        How the workers get the model (:func:`ebf.dask.predict.predict_frame`): whole on
        every worker, or one branch per task from its shard; ``"auto"`` chooses from the
        model's size and the workers' memory. The driver never loads the branches.

    Returns
    -------
    PredictionResult

    Notes
    -----
    Columns: regressors ``mean``, ``std`` and the quantiles; classifiers ``proba_<class>``
    and ``predicted``; EBF models also ``branch`` (the trunk leaf that predicted the row).
    Row ``i`` of the output (files in name order) is row ``i`` of the input. Schema
    metadata (:func:`pipelines.io.read_parquet_metadata`): ``ebf.model_hash``
    (:func:`ebf.model.model_hash`, the sha256 of the model's content),
    ``ebf.model_version`` (``ebf-model/<format> ebf/<version>``), ``ebf.model_class``,
    ``ebf.model_path``, ``ebf.features`` and ``ebf.quantiles`` (JSON),
    ``ebf.predicted_with`` (the ebf version that predicted).

    Examples
    --------
    >>> res = predict_to_parquet("models/friedman", "data/test", "predictions/")  # doctest: +SKIP
    >>> read_parquet_metadata("predictions/")["ebf.model_hash"]  # doctest: +SKIP
    '3f1c0a9b...'
    """
    from ebf.dask.predict import predict_frame

    t0 = time.perf_counter()
    client = current_client(client)
    inputs = prediction_inputs(model_dir, data)
    check_destination(out, "predictions", overwrite=overwrite, inputs=inputs,
                      storage_options=storage_options)
    loaded = open_artifact(model_dir, storage_options)
    keep = [str(c) for c in keep_columns]
    needed = list(dict.fromkeys([*loaded.features, *keep]))
    if not isinstance(data, dd.DataFrame):
        _check_columns(data, loaded.features, needed, storage_options)
    ddf = _read(data, needed, storage_options)

    pred = predict_frame(loaded.reader, ddf[loaded.features], tuple(quantiles), client=client,
                         strategy=strategy)
    if keep:
        clash = [c for c in keep if c in pred.columns]
        if clash:
            raise ValueError(f"keep_columns {clash} collide with prediction columns "
                             f"{list(pred.columns)}; rename them first")
        kept = ddf[keep]
        meta = _join_columns(pred._meta, kept._meta)
        pred = dd.map_partitions(_join_columns, pred, kept, meta=meta, align_dataframes=False)
    token = uuid.uuid4().hex[:12]
    topic = f"ebf-predict-{token}"
    pred = pred.map_partitions(_report_partition, topic, meta=pred._meta)

    metadata = {
        "ebf.model_hash": loaded.digest,
        "ebf.model_version": loaded.version,
        "ebf.model_class": loaded.model_class,
        "ebf.model_path": (str(Path(loaded.path).resolve()) if loaded.reader.store.is_local
                           else loaded.path),
        "ebf.features": json.dumps(loaded.features),
        "ebf.quantiles": json.dumps([] if loaded.is_classifier else [float(q) for q in quantiles]),
        "ebf.predicted_with": library_version(),
    }
    logger.info("predicting %s with %s (%s) -> %s, %d partitions", _describe(data),
                loaded.path, loaded.digest[:12], os.fspath(out), ddf.npartitions)
    with _partition_events(client, topic, ddf.npartitions, progress), client.as_current(), \
            model_in_graph():
        write_parquet_atomic(pred, out, metadata=metadata, kind="predictions",
                             overwrite=overwrite, inputs=inputs, storage_options=storage_options)
    rows, files = _count_rows(os.fspath(out), storage_options)
    seconds = time.perf_counter() - t0
    logger.info("wrote %d rows in %d files to %s in %.2fs", rows, files, os.fspath(out), seconds)
    return PredictionResult(os.fspath(out), rows, files, list(pred.columns), metadata, seconds)


# --------------------------------------------------------------------------- evaluation


def _partition_sums(part: pd.DataFrame, model: Any, features: list[str], target: str,
                    job: EvaluationJob) -> np.ndarray:
    """``[rows, missing targets, the job's sums]`` of a partition scored by a whole model."""
    ok = part[target].notna().to_numpy()
    out = np.zeros(2 + job.size)
    out[0], out[1] = ok.sum(), (~ok).sum()
    if ok.any():
        X = part.loc[ok, features]
        output = model.predict_proba(X) if job.classes is not None else (
            model.predict_distribution(X, recalibrated=False))  # the job applies the map
        out[2:] = job.reduce(job.rows(output, part.loc[ok, target].to_numpy()))
    return out


def _block_sums(assembled: tuple, job: EvaluationJob) -> np.ndarray:
    """The same sums from a partition predicted branch by branch."""
    index, block, _, n_missing = assembled
    out = np.zeros(2 + job.size)
    out[0], out[1] = len(index), n_missing
    out[2:] = job.reduce(block)
    return out


def evaluate(
    model_dir: str | os.PathLike[str],
    data: _Source,
    *,
    target: str | None = None,
    levels: Sequence[float] = DEFAULT_LEVELS,
    client: distributed.Client | None = None,
    progress: Report | None = None,
    storage_options: Mapping[str, Any] | None = None,
    strategy: str = "auto",
) -> dict[str, Any]:
    """Score a saved model on a labelled dataset, streaming it through the cluster.

    Parameters
    ----------
    model_dir : str or path-like
        A model directory.
    data : str, path-like, list of str or dask.dataframe.DataFrame
        Parquet dataset or Dask DataFrame with the model's features and the target.
    target : str, optional
        Target column; by default the one recorded at training (``ebf train`` stores it).
    levels : sequence of float, default=pipelines.evaluate.DEFAULT_LEVELS
        Nominal coverages of the central intervals of the calibration table (0.1 .. 0.9).
    client : distributed.Client, optional
        The current client by default.
    progress : callable ``progress(done, total)``, optional
        Called on the driver as partitions are scored.
    storage_options : dict, optional
    strategy : {"auto", "broadcast", "sharded"}, default="auto"
        As in :func:`predict_to_parquet`: the whole model on every worker, or every branch
        scoring its own rows next to its shard. The sums are the same up to rounding.

    Returns
    -------
    dict
        Always ``task``, ``n`` (scored rows), ``n_missing_target`` (rows skipped), ``target``,
        ``model_hash``, ``model_class``, ``seconds``. Regressors: ``rmse``, ``nlpd`` (mean
        negative log predictive density), ``calibration`` (DataFrame ``level``,
        ``observed``, ``observed_minus_nominal``, as :func:`basics.metrics.calibration_table`
        with the exact mixture intervals), ``coverage`` (level -> observed fraction),
        ``max_calibration_gap`` (max ``|observed - nominal|``), ``intervals="mixture"``,
        ``crps`` (mean CRPS), ``reliability`` (the table at 5% steps), ``pit_histogram``
        (20 counts of the PIT), ``width_error`` (DataFrame ``n``, ``mean_width`` of the
        central 90% interval, ``mean_abs_error`` of the median, about ten groups by width),
        ``calibrated`` (whether the model recalibrates its CDF) and, if it does,
        ``uncalibrated`` (the same scores of the model's own mixture, from the same pass);
        see :mod:`pipelines.diagnostics`. Classifiers: ``accuracy``,
        ``log_loss`` (mean, probabilities clipped to ``[eps, 1 - eps]`` as scikit-learn
        does), ``n_unseen_labels`` (labels absent from ``classes_``: scored as wrong with
        probability ``eps``) and ``classes``.

    Raises
    ------
    ValueError
        If no target is given and the model does not record one, or ``levels`` is invalid.
    pipelines.schema.SchemaError
        If the data lacks a feature or the target.

    Examples
    --------
    >>> res = evaluate("models/friedman", "data/test")  # doctest: +SKIP
    >>> round(res["rmse"], 3), round(res["nlpd"], 3)  # doctest: +SKIP
    (1.52, 1.84)
    """
    t0 = time.perf_counter()
    client = current_client(client)
    lv = np.atleast_1d(coverage_levels(levels))
    loaded = open_artifact(model_dir, storage_options)
    if target is None:
        target = loaded.training.get("target")
        if not isinstance(target, str):
            raise ValueError(
                f"the model at {loaded.path!r} does not record its target (it was not saved by "
                "ebf train / pipelines.train); pass target= (CLI: --target)"
            )
    features = loaded.features
    if not isinstance(data, dd.DataFrame):
        check_schema(data, target, features, storage_options=storage_options)
    ddf = _read(data, [*features, target], storage_options)

    strategy = choose_strategy(loaded.reader, client) if strategy == "auto" else strategy
    if loaded.reader.n_parts:
        head = loaded.reader.head()
        classes, pit_map = head.classes, head.recalibration
        whole = whole_model(loaded.reader)  # loaded by a worker if broadcast
    else:  # a format 1 model or a single forest: loaded here, small
        model = loaded.reader.load()
        classes = getattr(model, "classes_", None)
        pit_map = getattr(model, "recalibration_", None)
        whole = shared_model(model)
    job = EvaluationJob(lv, classes, pit_map)
    token = uuid.uuid4().hex[:12]
    if strategy == "sharded" and loaded.reader.n_parts:
        tasks = [dask.delayed(_block_sums, pure=True)(
            b, job, dask_key_name=f"ebf-evaluate-{token}-{i}")
            for i, b in enumerate(sharded_blocks(loaded.reader, ddf, job, target=target))]
    else:
        tasks = _partition_tasks(ddf, whole, features, target, job)
    logger.info("evaluating %s on %s (%d partitions, target %r, %s)", loaded.path,
                _describe(data), len(tasks), target, strategy)
    return _score(_run(tasks, client, progress), job, data, target, t0,
                  {"model_hash": loaded.digest, "model_class": loaded.model_class})


def _partition_tasks(ddf: dd.DataFrame, whole: Any, features: list[str], target: str,
                     job: EvaluationJob) -> list:
    token = uuid.uuid4().hex[:12]
    return [dask.delayed(_partition_sums, pure=True)(
        part, whole, features, target, job, dask_key_name=f"ebf-evaluate-{token}-{i}")
        for i, part in enumerate(ddf.to_delayed())]


def _run(tasks: list, client: distributed.Client, progress: Report | None) -> list:
    """The evaluation tasks' sums, in partition order."""
    with distributed.span("ebf-evaluate"):
        with model_in_graph():
            futures = client.compute(tasks)
    try:
        return gather(client, futures, progress)
    finally:
        del futures, tasks  # release the model on the workers


def _score(parts: list, job: EvaluationJob, data: _Source, target: str, t0: float,
           model_info: dict) -> dict[str, Any]:
    """Reduce the partitions' sums to :func:`evaluate`'s result."""
    sums = np.sum(parts, axis=0) if parts else np.zeros(2 + job.size)
    n, missing = int(sums[0]), int(sums[1])
    if n == 0:
        raise ValueError(f"no row of {_describe(data)} has a value in the target {target!r}; "
                         "nothing to score")
    if missing:
        logger.warning("evaluate: %d row(s) with a missing %r were skipped", missing, target)
    classify = job.classes is not None
    result: dict[str, Any] = {
        "task": "classification" if classify else "regression",
        "target": target,
        "n": n,
        "n_missing_target": missing,
        **model_info,
        **job.result(sums[2:], n),
    }
    if classify and result["n_unseen_labels"]:
        logger.warning("evaluate: %d row(s) have labels the model never saw",
                       result["n_unseen_labels"])
    result["seconds"] = time.perf_counter() - t0
    return result


def evaluate_model(
    model: Any,
    data: _Source,
    *,
    target: str,
    features: Sequence[str],
    levels: Sequence[float] = DEFAULT_LEVELS,
    client: distributed.Client | None = None,
    progress: Report | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Score a fitted model held in this process, as :func:`evaluate` scores a saved one.

    Small data comes to the model (:func:`ebf.dask.predict.small_frame`), else the model
    travels in the graph to the workers (one copy per worker); the sums and the result are
    those of :func:`evaluate` (``model_hash`` is None). For a model not saved
    yet, e.g. the challenger of :func:`pipelines.retrain.retrain`.

    Parameters
    ----------
    model : estimator
        A fitted EBF / SSF (or any model with ``predict_distribution`` / ``predict_proba``).
    data : str, path-like, list of str or dask.dataframe.DataFrame
    target : str
    features : sequence of str
        The model's feature columns.
    levels, client, progress, storage_options
        As in :func:`evaluate`.

    Returns
    -------
    dict
        As :func:`evaluate`.
    """
    t0 = time.perf_counter()
    client = current_client(client)
    lv = np.atleast_1d(coverage_levels(levels))
    features = list(features)
    if not isinstance(data, dd.DataFrame):
        check_schema(data, target, features, storage_options=storage_options)
    ddf = _read(data, [*features, target], storage_options)
    job = EvaluationJob(lv, getattr(model, "classes_", None),
                        getattr(model, "recalibration_", None))
    rows = small_frame(ddf, client)  # a holdout comes to the model, a big set does not
    parts = ([_partition_sums(rows, model, features, target, job)] if rows is not None else
             _run(_partition_tasks(ddf, shared_model(model), features, target, job), client,
                  progress))
    info = {"model_hash": None, "model_class": f"ebf.{type(model).__name__}"}
    return _score(parts, job, data, target, t0, info)


def format_evaluation(result: Mapping[str, Any], *, title: str | None = None) -> str:
    """Format :func:`evaluate`'s result as text.

    Regressors: :func:`pipelines.evaluate.format_report` (RMSE, NLPD, the calibration table),
    then the coverage per level and the largest calibration gap. Classifiers: rows,
    accuracy and log loss.

    Parameters
    ----------
    result : mapping
        From :func:`evaluate`.
    title : str, optional
        First line; the target and row count are appended.

    Returns
    -------
    str
        Without a trailing newline.

    Examples
    --------
    >>> res = evaluate("model/", "data/test")  # doctest: +SKIP
    >>> print(format_evaluation(res, title="test set"))  # doctest: +SKIP
    """
    from pipelines.evaluate import format_report

    name = str(result["model_class"]).rsplit(".", 1)[-1]
    head = f"target {result['target']!r}, {result['n']:,} rows"
    if result["n_missing_target"]:
        head += f" ({result['n_missing_target']:,} without a target skipped)"
    head = f"{title}: {head}" if title else head
    if result["task"] != "classification":
        cover = ", ".join(f"{z:.0%}: {o:.3f}" for z, o in result["coverage"].items())
        lines = [format_report(before_after({name: result}), title=head), "",
                 f"interval coverage (nominal: observed): {cover}",
                 f"max |calibration gap|: {result['max_calibration_gap']:.3f}"]
        if "uncalibrated" in result:
            lines[-1] += (f" (uncalibrated: {result['uncalibrated']['max_calibration_gap']:.3f}"
                          "; the model recalibrates its predictive CDF)")
        return "\n".join(lines)
    width = max(5, len(name))
    header = f"{'model':<{width}}  {'rows':>10}  {'accuracy':>8}  {'log loss':>8}"
    lines = [head, "", header, "-" * len(header),
             f"{name:<{width}}  {result['n']:>10,}  {result['accuracy']:>8.4f}  "
             f"{result['log_loss']:>8.4f}"]
    if result["n_unseen_labels"]:
        lines.append(f"{result['n_unseen_labels']:,} rows have labels the model never saw")
    return "\n".join(lines)
