"""The evaluation job that ``ebf evaluate`` runs: a saved model scored on a labelled dataset.

:func:`evaluate` streams a labelled dataset through the model, partition by partition: each
task reduces its rows to a few sums (squared errors, log densities, counts inside each central
interval; for classifiers correct predictions and log losses) and only those sums reach the
driver. Interval coverage needs one number per row, the predictive CDF at the observed value
``u = F(y)``: ``y`` lies in the central ``z`` interval ``[F^-1((1 - z) / 2), F^-1((1 + z) /
2)]`` exactly when ``(1 - z) / 2 <= u <= (1 + z) / 2`` (``F`` is continuous and strictly
increasing), so the exact intervals of the predictive mixture cost no quantile search. RMSE and
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

from basics.locations import check_destination
from basics.metrics import coverage_levels
from cluster import current_client
from ebf.dask.cache import settle_whole, whole_model
from ebf.dask.client import Report, gather
from ebf.dask.frames import checked_levels, prediction_meta
from ebf.dask.graph import (
    in_threads,
    input_partitions,
    model_in_graph,
    shared_model,
    small_frame,
)
from ebf.dask.sharded import (
    block_frame,
    choose_strategy,
    frame_of_parts,
    sharded_blocks,
)
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
from pipelines.report.diagnostics import EvaluationJob, before_after
from pipelines.report.metrics import DEFAULT_LEVELS
from pipelines.schema import check_schema

__all__ = ["evaluate", "evaluate_model", "format_evaluation", "model_info"]

logger = logging.getLogger(__name__)



# --------------------------------------------------------------------------- evaluation


def _model_output(model: Any, X: pd.DataFrame, job: EvaluationJob) -> Any:
    """A whole model's class probabilities, or its own mixture (the job applies the map)."""
    if job.classes is not None:
        return model.predict_proba(X)
    return model.predict_distribution(X, recalibrated=False)


def _partition_rows(part: pd.DataFrame, model: Any, features: list[str], target: str,
                    job: EvaluationJob, branch: bool) -> tuple:
    """``(index, block, branch)`` of a partition predicted by a whole model: the job's rows
    and, if ``branch``, the trunk leaf of every row (as :func:`ebf.dask.sharded.sharded_blocks`
    gives them)."""
    if len(part) == 0:
        return part.index, None, None
    X = part[features]
    whole = whole_model(model)  # a saved model: loaded once per worker
    block = job.rows(_model_output(whole, X, job), part[target].to_numpy())
    out = part.index, block, whole.apply(X) if branch else None
    settle_whole(model, whole)
    return out


def _sums(assembled: tuple, job: EvaluationJob) -> np.ndarray:
    """The job's sums of a partition's block (per branch too, if the job has branches)."""
    return job.reduce(assembled[1], assembled[2])


def _sums_and_scores(assembled: tuple, job: EvaluationJob) -> tuple[np.ndarray, np.ndarray]:
    """The job's sums of a partition's block, and its rows' main score
    (:meth:`EvaluationJob.row_scores`)."""
    return job.reduce(assembled[1]), job.row_scores(assembled[1])


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
    quantiles: Sequence[float] = (0.05, 0.5, 0.95),
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
        (:meth:`pipelines.report.diagnostics.EvaluationJob.branch_table`).
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
        see :mod:`pipelines.report.diagnostics`. Classifiers: ``accuracy``,
        ``log_loss`` (mean, probabilities clipped to ``[eps, 1 - eps]`` as scikit-learn
        does), ``n_unseen_labels`` (labels absent from ``classes_``: scored as wrong with
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
    if not isinstance(data, dd.DataFrame):
        footers = read_footers(data, storage_options)  # once, for both checks
        check_schema(data, target, features, storage_options=storage_options, footers=footers,
                     allow_nulls=loaded.missing_values)
        if keep:
            check_prediction_data(loaded, data, keep, storage_options, footers)
    with input_partitions():  # one task (and output file) per input partition
        ddf = read_columns(data, list(dict.fromkeys([*features, target, *keep])), storage_options)

        strategy = choose_strategy(loaded.reader, client) if strategy == "auto" else strategy
        classes, pit_map, has_trunk, whole = _model_parts(loaded.reader)
        branches = loaded.reader.n_parts if has_trunk else 0  # a sharded EBF's
        job = EvaluationJob(lv, classes, pit_map, None if predictions is None else q,
                            n_branches=branches)
        if strategy == "sharded" and loaded.reader.n_parts:
            assembled = sharded_blocks(loaded.reader, ddf, job, target=target)
        else:
            assembled = _partition_tasks(ddf, whole, features, target, job, branch=has_trunk)
        token = uuid.uuid4().hex[:12]
        sums = [dask.delayed(_sums, pure=True)(a, job, dask_key_name=f"ebf-evaluate-{token}-{i}")
                for i, a in enumerate(assembled)]
        logger.info("evaluating %s on %s (%d partitions, target %r, %s)", loaded.path,
                    describe_source(data), len(sums), target, strategy)
        info = {**model_info(loaded), "data": describe_source(data),
                "warnings": _training_overlap(loaded, data, storage_options)}
        if predictions is None:
            return _with_branch_facts(_score(_run(sums, client, progress), job, data, target,
                                             t0, info), loaded.reader)
        meta = prediction_meta(classes, has_trunk, q)
        check_kept(keep, meta.columns)
        rows = ddf.to_delayed()
        frames = [dask.delayed(_prediction_part, pure=True)(a, job, meta, classes,
                                                            rows[i] if keep else None, keep)
                  for i, a in enumerate(assembled)]
        pred = frame_of_parts(frames, join_kept(meta, ddf[keep]._meta) if keep else meta, ddf)
        written, parts = write_predictions(pred, predictions, loaded, q, source=data,
                                           overwrite=overwrite, client=client, progress=progress,
                                           storage_options=storage_options, others=sums)
        return {**_with_branch_facts(_score(parts, job, data, target, t0, info), loaded.reader),
                "predictions": written}


def model_info(loaded: Any) -> dict[str, Any]:
    """What a result says of the saved model it scores (JSON-ready): ``model`` (its path),
    ``model_hash``, ``model_class`` and ``model_info``: ``version`` (format and the ebf that
    saved it), ``bytes`` (its files), ``learner`` (the branch learner), ``n_estimators``
    (trees per branch or sub-sample), ``n_parts`` (branches or sub-samples; None for a
    format 1 model), ``features``, and from the training metadata (None where the model does
    not record it): ``trained_on`` (the data), ``training_rows``, ``trained_utc``,
    ``fit_seconds``, ``calibration`` (the recalibration method).

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
                else None}}


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
    logger.warning("evaluate: %s", message)
    return [message]


def _model_parts(reader: Any) -> tuple:
    """``(classes or None, recalibration map or None, whether it has a trunk, the model for
    the tasks)``: from the head of a sharded model (its reader: every worker loads it, once,
    if it is broadcast), or from the model loaded here (format 1 or a single forest: small,
    one graph key)."""
    if reader.n_parts:
        head = reader.head()
        return head.classes, head.recalibration, head.trunk is not None, reader
    model = reader.load()
    return (*_model_facts(model), shared_model(model))


def _model_facts(model: Any) -> tuple:
    """``(classes or None, recalibration map or None, whether it has a trunk)`` of a model
    held in this process."""
    return (getattr(model, "classes_", None), getattr(model, "recalibration_", None),
            hasattr(model, "trunk_"))


def _partition_tasks(ddf: dd.DataFrame, whole: Any, features: list[str], target: str,
                     job: EvaluationJob, branch: bool = False) -> list:
    token = uuid.uuid4().hex[:12]
    return [dask.delayed(_partition_rows, pure=True)(
        part, whole, features, target, job, branch, dask_key_name=f"ebf-rows-{token}-{i}")
        for i, part in enumerate(ddf.to_delayed())]


def _run(tasks: list, client: distributed.Client, progress: Report | None,
         span: str = "ebf-evaluate") -> list:
    """The evaluation tasks' sums, in partition order (``span`` names them on the
    dashboard)."""
    with distributed.span(span):
        with model_in_graph():
            futures = client.compute(tasks)
    try:
        return gather(client, futures, progress)
    finally:
        del futures, tasks  # release the model on the workers


def _score(parts: list, job: EvaluationJob, data: Source, target: str, t0: float,
           model_info: dict) -> dict[str, Any]:
    """Reduce the partitions' sums to :func:`evaluate`'s result."""
    sums = np.sum(parts, axis=0) if parts else np.zeros(job.size)
    n, missing = int(sums[0]), int(sums[1])
    if n == 0:
        raise ValueError(f"no row of {describe_source(data)} has a value in the target {target!r}; "
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
        **job.result(sums),
    }
    if classify and result["n_unseen_labels"]:
        logger.warning("evaluate: %d row(s) have labels the model never saw",
                       result["n_unseen_labels"])
    result["seconds"] = time.perf_counter() - t0
    return result


def evaluate_model(
    model: Any,
    data: Source,
    *,
    target: str,
    features: Sequence[str],
    levels: Sequence[float] = DEFAULT_LEVELS,
    client: distributed.Client | None = None,
    progress: Report | None = None,
    storage_options: Mapping[str, Any] | None = None,
    row_scores: bool = False,
) -> dict[str, Any]:
    """Score a fitted model held in this process, as :func:`evaluate` scores a saved one.

    Small data comes to the model (:func:`ebf.dask.predict.small_frame`), else the model
    travels in the graph to the workers (one copy per worker); the sums and the result are
    those of :func:`evaluate` (``model_hash`` is None). For a model not saved
    yet, e.g. the challenger of :func:`pipelines.registry.retrain.retrain`.

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
    row_scores : bool, default=False
        Also return every scored row's main score from the same pass (8 bytes a row come
        to this process): ``-log p(y)`` of the model as it predicts (regressors) or the
        log loss (classifiers), whose mean is the result's ``nlpd`` / ``log_loss``.

    Returns
    -------
    dict
        As :func:`evaluate`; with ``row_scores``, also ``row_scores``: ndarray of shape
        ``(n,)`` in the data's row order.
    """
    t0 = time.perf_counter()
    client = current_client(client)
    lv = np.atleast_1d(coverage_levels(levels))
    features = list(features)
    if not isinstance(data, dd.DataFrame):
        check_schema(data, target, features, storage_options=storage_options)
    ddf = read_columns(data, [*features, target], storage_options)
    job = EvaluationJob(lv, *_model_facts(model)[:2])
    reduce = _sums_and_scores if row_scores else _sums
    rows = small_frame(ddf, client)  # a holdout comes to the model, a big set does not
    if rows is not None:
        parts = in_threads(lambda block: reduce(_partition_rows(block, model, features, target,
                                                                 job, False), job), rows)
    else:
        parts = _run([dask.delayed(reduce, pure=True)(a, job) for a in _partition_tasks(
            ddf, shared_model(model), features, target, job)], client, progress)
    info = {"model_hash": None, "model_class": f"ebf.{type(model).__name__}"}
    if not row_scores:
        return _score(parts, job, data, target, t0, info)
    result = _score([p[0] for p in parts], job, data, target, t0, info)
    return {**result, "row_scores": np.concatenate([p[1] for p in parts])}


def format_evaluation(result: Mapping[str, Any], *, title: str | None = None) -> str:
    """Format :func:`evaluate`'s result as text.

    Regressors: :func:`pipelines.report.metrics.format_report` (RMSE, NLPD, the calibration table),
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
    from pipelines.report.metrics import format_report

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
                 f"90% interval score: {result['interval_score_90']:.4g}"]
        gaps = [f"max |calibration gap|: {result['max_calibration_gap']:.3f}, "
                f"max |one-sided gap|: {result['max_one_sided_gap']:.3f}, "
                f"PIT distance: {result['pit_distance']:.3f}"]
        if "uncalibrated" in result:
            own = result["uncalibrated"]
            gaps.append(f"(uncalibrated: {own['max_calibration_gap']:.3f}, "
                        f"{own['max_one_sided_gap']:.3f}, {own['pit_distance']:.3f}; the "
                        "model recalibrates its predictive CDF)")
        return "\n".join([*lines, " ".join(gaps)])
    width = max(5, len(name))
    header = f"{'model':<{width}}  {'rows':>10}  {'accuracy':>8}  {'log loss':>8}"
    lines = [head, "", header, "-" * len(header),
             f"{name:<{width}}  {result['n']:>10,}  {result['accuracy']:>8.4f}  "
             f"{result['log_loss']:>8.4f}"]
    if result["n_unseen_labels"]:
        lines.append(f"{result['n_unseen_labels']:,} rows have labels the model never saw")
    return "\n".join(lines)
