"""The evaluation job that ``ebf evaluate`` runs: a saved model scored on a labelled dataset.

:func:`evaluate` streams a labelled dataset through the model, partition by partition, with
the tasks of :mod:`pipelines.scoring.tasks`: each task reduces its rows to the sums of the
:class:`~pipelines.scoring.job.EvaluationJob` and only those sums reach the driver. RMSE and
NLPD equal :mod:`basics.metrics` on the whole dataset (``rmse``, ``nlpd`` of
``model.predict_distribution(X)``) up to the order of summation, and so does
``calibration_table`` except for a row whose ``y`` lies in a flat stretch of the CDF exactly at
an interval bound (well-separated narrow components, mostly on training rows): the interval is
not unique there, a quantile search may land anywhere in the stretch, while ``u`` decides it
deterministically.

With ``predictions=``, the same pass also writes every row's predictions (the files of
:func:`pipelines.predict.predict_to_parquet`): each partition is predicted once, its block
of rows holds the prediction columns and the scores, the prediction columns are written and
the scores summed, in one graph.

It takes ``client=None`` (the current client) and ``progress(done, total)`` over partitions.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import dask
import dask.dataframe as dd
import distributed
import numpy as np
import pandas as pd

from basics.levels import DEFAULT_QUANTILES
from basics.locations import check_destination
from basics.metrics import coverage_levels
from basics.scores import scores_of
from cluster import current_client
from ebf.dask.client import Report
from ebf.dask.graph import input_partitions
from ebf.dask.sharded import (
    block_frame,
    choose_strategy,
    frame_of_parts,
    sharded_blocks,
)
from ebf.frames import checked_levels, prediction_meta
from pipelines.artifacts import open_artifact
from pipelines.footers import read_footers
from pipelines.io import Source, describe_source, read_columns
from pipelines.predict import (
    check_kept,
    check_prediction_data,
    join_kept,
    prediction_inputs,
    write_predictions,
)
from pipelines.report.metrics import DEFAULT_LEVELS, before_after, format_report
from pipelines.report.tables import INTEGER_NOTE
from pipelines.schema import check_schema
from pipelines.scoring.job import EvaluationJob
from pipelines.scoring.tasks import (
    block_sums,
    check_scored_rows,
    evaluate_model,
    integer_target,
    model_parts,
    partition_tasks,
    run_tasks,
    scored_result,
)

__all__ = ["evaluate", "evaluate_model", "format_evaluation", "model_info"]

logger = logging.getLogger(__name__)


def _prediction_part(assembled: tuple, job: EvaluationJob, meta: pd.DataFrame, classes: Any,
                     part: pd.DataFrame | None, keep: list[str]) -> pd.DataFrame:
    """The predictions of a partition: the first columns of its block, the kept columns in
    front."""
    index, block, branch = assembled
    frame = block_frame((index, None if block is None else block[:, :job.predicted], branch),
                        meta, classes)
    return join_kept(frame, part[keep]) if keep else frame


def evaluate(
    model_dir: str | os.PathLike[str],
    data: Source,
    *,
    target: str | None = None,
    levels: Sequence[float] = DEFAULT_LEVELS,
    client: distributed.Client | None = None,
    progress: Report | None = None,
    storage_options: Mapping[str, Any] | None = None,
    strategy: str = "auto",
    predictions: str | os.PathLike[str] | None = None,
    quantiles: Sequence[float] = DEFAULT_QUANTILES,
    keep_columns: Sequence[str] = (),
    overwrite: bool = False,
) -> dict[str, Any]:
    """Score a saved model on a labelled dataset, streaming it through the cluster, and
    optionally write its predictions in the same pass.

    Parameters
    ----------
    model_dir : str or path-like
        A model directory.
    data : str, path-like, list of str or dask.dataframe.DataFrame
        Parquet dataset or Dask DataFrame with the model's features and the target.
    target : str, optional
        Target column; by default the one recorded at training (``ebf train`` stores it).
    levels : sequence of float, default=pipelines.report.metrics.DEFAULT_LEVELS
        Nominal coverages of the central intervals of the calibration table (0.1 .. 0.9).
    client : distributed.Client, optional
        The current client by default.
    progress : callable ``progress(done, total)``, optional
        Called on the driver as partitions are scored.
    storage_options : dict, optional
    strategy : {"auto", "broadcast", "sharded"}, default="auto"
        As in :func:`predict_to_parquet`: the whole model on every worker, or every branch
        scoring its own rows next to its shard. The sums are the same up to rounding.
    predictions : str or path-like, optional
        Also write every row's predictions there, the files
        :func:`pipelines.predict.predict_to_parquet` writes (same columns, bits, metadata and
        atomicity), from the same prediction as the scores: one pass over the data. Rows
        without a target are predicted and not scored.
    quantiles, keep_columns, overwrite
        As in :func:`pipelines.predict.predict_to_parquet`, for ``predictions``.

    Returns
    -------
    dict
        Always ``task``, ``n`` (scored rows), ``n_missing_target`` (rows skipped), ``target``,
        ``data`` (:func:`pipelines.io.describe_source`), the model's ``model``,
        ``model_hash``, ``model_class`` and ``model_info`` (:func:`model_info`),
        ``warnings`` and ``seconds`` (the wall time of the evaluation). An EBF saved with
        its branches in shards (format 2) also has ``branches``: a DataFrame of one row per
        branch, ``branch``, ``training_rows``, ``bytes`` (its shard), ``n`` (rows scored)
        and the scores of the model as it predicts
        (:meth:`pipelines.scoring.job.EvaluationJob.branch_table`).
        Regressors: ``rmse``, ``nlpd`` (mean
        negative log predictive density), ``calibration`` (DataFrame ``level``,
        ``observed``, ``observed_minus_nominal``, as :func:`basics.metrics.calibration_table`
        with the exact mixture intervals), ``coverage`` (level -> observed fraction),
        ``max_calibration_gap`` (max ``|observed - nominal|``), ``intervals="mixture"``,
        ``crps`` (mean CRPS), ``reliability`` (the table at 5% steps), ``one_sided``
        (the fraction of targets below the predictive quantile at 5%..95%, as
        :func:`basics.metrics.one_sided_table`), ``max_one_sided_gap``, ``pit_distance``
        (the PIT's Kolmogorov-Smirnov distance from uniform, from 1,000 bins: within 0.001 of
        :func:`basics.metrics.pit_distance`), ``pit_histogram`` (20 counts of the PIT),
        ``interval_score_90`` (mean interval score of the central 90% interval, the model as
        it predicts only), ``width_error`` (DataFrame ``n``, ``mean_width`` of the
        central 90% interval, ``mean_abs_error`` of the median, about ten groups by width),
        ``calibrated`` (whether the model recalibrates its CDF) and, if it does,
        ``uncalibrated`` (the same scores of the model's own mixture, from the same pass);
        see :mod:`pipelines.scoring.job` (the scores are the records of
        :mod:`basics.scores`, one key each). Classifiers, scored on the probabilities as the
        model predicts them (through its class calibration map, if it has one): ``accuracy``,
        ``log_loss`` (mean, probabilities clipped to ``[eps, 1 - eps]`` as scikit-learn
        does), ``ece`` (expected calibration error, 15 equal-width bins of the top-class
        probability: :func:`basics.metrics.expected_calibration_error`),
        ``n_unseen_labels`` (labels absent from ``classes_``: scored as wrong with
        probability ``eps``) and ``classes``. With ``predictions``: ``predictions``
        (:class:`pipelines.predict.PredictionResult`).

    Raises
    ------
    ValueError
        If no target is given and the model does not record one, or ``levels`` is invalid.
    pipelines.schema.SchemaError
        If the data lacks a feature or the target.
    FileExistsError
        If ``predictions`` exists and is not replaceable (as in ``predict_to_parquet``).

    Examples
    --------
    >>> res = evaluate("models/friedman", "data/test")  # doctest: +SKIP
    >>> round(res["rmse"], 3), round(res["nlpd"], 3)  # doctest: +SKIP
    (1.52, 1.84)
    """
    t0 = time.perf_counter()
    client = current_client(client)
    lv = np.atleast_1d(coverage_levels(levels))
    q = checked_levels(quantiles)
    if predictions is not None:
        check_destination(predictions, "predictions", overwrite=overwrite,
                          inputs=prediction_inputs(model_dir, data),
                          storage_options=storage_options)
    loaded = open_artifact(model_dir, storage_options)
    if target is None:
        target = loaded.training.get("target")
        if not isinstance(target, str):
            raise ValueError(
                f"the model at {loaded.path!r} does not record its target (it was not saved by "
                "ebf train / pipelines.train); pass target= (CLI: --target)"
            )
    features = loaded.features
    keep = [str(c) for c in keep_columns] if predictions is not None else []
    footers = None
    if not isinstance(data, dd.DataFrame):
        footers = read_footers(data, storage_options)  # once, for every check
        check_schema(data, target, features, storage_options=storage_options, footers=footers,
                     allow_nulls=loaded.missing_values)
        if keep:
            check_prediction_data(loaded, data, keep, storage_options, footers)
    with input_partitions():  # one task (and output file) per input partition
        ddf = read_columns(data, list(dict.fromkeys([*features, target, *keep])), storage_options)

        strategy = choose_strategy(loaded.reader, client) if strategy == "auto" else strategy
        classes, pit_map, has_trunk, whole = model_parts(loaded.reader)
        if classes is None and footers is not None:  # else found as the rows are scored
            footers.check_scored_target(target)
        branches = loaded.reader.n_parts if has_trunk else 0  # a sharded EBF's
        job = EvaluationJob(lv, classes, pit_map, None if predictions is None else q,
                            n_branches=branches,
                            integer=classes is None and integer_target(ddf, target, client))
        if strategy == "sharded" and loaded.reader.n_parts:
            assembled = sharded_blocks(loaded.reader, ddf, job, target=target)
        else:
            assembled = partition_tasks(ddf, whole, features, target, job, branch=has_trunk)
        token = uuid.uuid4().hex[:12]
        sums = [dask.delayed(block_sums, pure=True)(
            a, job, dask_key_name=f"ebf-evaluate-{token}-{i}") for i, a in enumerate(assembled)]
        logger.info("evaluating %s on %s (%d partitions, target %r, %s)", loaded.path,
                    describe_source(data), len(sums), target, strategy)
        info = {**model_info(loaded), "data": describe_source(data),
                "warnings": _training_overlap(loaded, data, storage_options)}
        if predictions is None:
            return _with_branch_facts(scored_result(run_tasks(sums, client, progress), job, data,
                                                    target, t0, info), loaded.reader)
        meta = prediction_meta(classes, has_trunk, q)
        check_kept(keep, meta.columns)
        rows = ddf.to_delayed()
        frames = [dask.delayed(_prediction_part, pure=True)(a, job, meta, classes,
                                                            rows[i] if keep else None, keep)
                  for i, a in enumerate(assembled)]
        pred = frame_of_parts(frames, join_kept(meta, ddf[keep]._meta) if keep else meta, ddf)
        written, parts = write_predictions(pred, predictions, loaded, q, source=data,
                                           overwrite=overwrite, client=client, progress=progress,
                                           storage_options=storage_options, others=sums,
                                           check=lambda parts: check_scored_rows(
                                               parts, job, target))
        return {**_with_branch_facts(scored_result(parts, job, data, target, t0, info),
                                     loaded.reader),
                "predictions": written}


def model_info(loaded: Any) -> dict[str, Any]:
    """What a result says of the saved model it scores (JSON-ready): ``model`` (its path),
    ``model_hash``, ``model_class`` and ``model_info``: ``version`` (format and the ebf that
    saved it), ``bytes`` (its files), ``learner`` (the branch learner), ``n_estimators``
    (trees per branch or sub-sample), ``n_parts`` (branches or sub-samples; None for a
    format 1 model), ``features``, and from the training metadata (None where the model does
    not record it): ``trained_on`` (the data), ``training_rows``, ``trained_utc``,
    ``fit_seconds``, ``calibration`` (the recalibration method) and ``calibration_groups``
    (``calibrate="auto"``: the rows, folds and trees per group of the map).

    Parameters
    ----------
    loaded : pipelines.artifacts.ModelArtifact

    Returns
    -------
    dict
    """
    training = loaded.training
    params = loaded.manifest.get("params") or {}
    try:
        size: int | None = loaded.reader.nbytes
    except OSError:  # a format 1 model behind a URL: its files are not sized here
        size = None
    timings = training.get("timings") if isinstance(training.get("timings"), dict) else {}
    calibration = training.get("calibration")
    return {"model": str(loaded.path), "model_hash": loaded.digest,
            "model_class": loaded.model_class,
            "model_info": {
                "version": loaded.version, "bytes": size, "learner": params.get("branch"),
                "n_estimators": params.get("n_estimators"),
                "n_parts": loaded.reader.n_parts or None, "features": list(loaded.features),
                "trained_on": training.get("data"), "training_rows": training.get("rows"),
                "trained_utc": training.get("trained_utc"), "fit_seconds": timings.get("fit"),
                "calibration": calibration.get("method") if isinstance(calibration, dict)
                else None,
                "calibration_groups": _groups(calibration, loaded.model_class)}}


def _groups(calibration: Any, model_class: str) -> dict[str, Any] | None:
    """The provenance of a ``calibrate="auto"`` map in the training metadata (its rows,
    folds and trees per calibration group), None for any other method."""
    if not isinstance(calibration, dict) or calibration.get("method") != "auto":
        return None
    entry = calibration.get("ssf" if "Subsample" in str(model_class) else "ebf")
    keys = ("rows", "folds", "group_trees", "model_trees")
    if not isinstance(entry, dict) or not all(isinstance(entry.get(k), int) for k in keys):
        return None
    return {k: int(entry[k]) for k in keys}


def _with_branch_facts(result: dict[str, Any], reader: Any) -> dict[str, Any]:
    """The per-branch table with each branch's training rows and bytes (from the model's head
    and manifest) after its ``branch`` column."""
    table = result.get("branches")
    if table is not None:
        rows = reader.head().attrs.get("branch_rows_")
        table.insert(1, "training_rows", np.asarray(rows, dtype=np.int64))
        table.insert(2, "bytes", np.asarray(reader.part_bytes, dtype=np.int64))
    return result


def _training_overlap(loaded: Any, data: Source,
                      storage_options: Mapping[str, Any] | None) -> list[str]:
    """A warning if ``data`` shares files with the data the model records it was trained on
    (its scores there are in-sample, so optimistic), else nothing."""
    from pipelines.registry.lineage import shared_files

    trained_on = loaded.training.get("data")
    if not isinstance(trained_on, str) or not isinstance(data, (str, os.PathLike)):
        return []
    try:
        shared = shared_files(data, trained_on, storage_options)
    except (OSError, ValueError):  # the training data is gone, or not a dataset: no check
        return []
    if not shared:
        return []
    message = (f"{len(shared)} file(s) of {describe_source(data)} are files the model was "
               f"trained on ({trained_on}): its scores there are in-sample and optimistic; "
               "evaluate on rows the model has not seen")
    # not logged as well: the result's warnings carry it and the CLI prints them, so with
    # -v (INFO logs on stderr) a log line would say it a second time
    return [message]


def _score_line(result: Mapping[str, Any]) -> str:
    """``label: value`` of every score record the result has, in the records' order."""
    task = "classification" if result.get("task") == "classification" else "regression"
    return ", ".join(f"{s.label}: {result[s.name]:{s.fmt}}"
                     for s in scores_of(task, bool(result.get("integer_target")))
                     if result.get(s.name) is not None)



def format_evaluation(result: Mapping[str, Any], *, title: str | None = None) -> str:
    """Format :func:`evaluate`'s result as text.

    Regressors: :func:`pipelines.report.metrics.format_report` (RMSE, NLPD, CRPS, the
    calibration table), the coverage per level and below the predictive quantiles, then every
    score of :data:`basics.scores.SCORES` (and of the model's own mixture, for a model that
    recalibrates); for an integer-valued target also the RPS, and a note that its NLPD is
    not comparable (:data:`pipelines.report.tables.INTEGER_NOTE`). Classifiers: rows and
    every classification score.

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
    name = str(result["model_class"]).rsplit(".", 1)[-1]
    head = f"target {result['target']!r}, {result['n']:,} rows"
    if result["n_missing_target"]:
        head += f" ({result['n_missing_target']:,} without a target skipped)"
    head = f"{title}: {head}" if title else head
    if result["task"] != "classification":
        cover = ", ".join(f"{z:.0%}: {o:.3f}" for z, o in result["coverage"].items())
        below = ", ".join(f"{q:.0%}: {o:.3f}" for q, o in zip(
            result["one_sided"]["level"], result["one_sided"]["observed"], strict=True)
            if round(q * 100) in (5, 25, 50, 75, 95))
        lines = [format_report(before_after({name: result}), title=head), "",
                 f"interval coverage (nominal: observed): {cover}",
                 f"below the predictive quantile (level: observed): {below}",
                 _score_line(result)]
        if "uncalibrated" in result:
            own = {"task": result["task"], "integer_target": result.get("integer_target"),
                   **result["uncalibrated"]}
            lines.append(f"uncalibrated (the model recalibrates its predictive CDF): "
                         f"{_score_line(own)}")
        if result.get("integer_target"):
            lines.append(f"note: {INTEGER_NOTE}.")
        return "\n".join(lines)
    width = max(5, len(name))
    scores = scores_of("classification")
    header = f"{'model':<{width}}  {'rows':>10}" + "".join(
        f"  {s.label:>{max(8, len(s.label))}}" for s in scores)
    row = f"{name:<{width}}  {result['n']:>10,}" + "".join(
        f"  {result[s.name]:>{max(8, len(s.label))}{s.fmt}}" for s in scores)
    lines = [head, "", header, "-" * len(header), row]
    if result["n_unseen_labels"]:
        lines.append(f"{result['n_unseen_labels']:,} rows have labels the model never saw")
    return "\n".join(lines)
