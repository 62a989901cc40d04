"""The evaluation job's tasks on a cluster, and the public seam every scorer builds on.

``ebf evaluate`` (:func:`pipelines.report.evaluate.evaluate`), ``ebf registry compare``
(:func:`pipelines.report.compare.compare`), the retrain gate
(:func:`pipelines.registry.retrain.retrain`, through :func:`evaluate_model`) and ``ebf
importance`` (:func:`pipelines.importance.permutation_importance`) all take a model's parts
(:func:`model_parts`), build one task per partition (:func:`partition_tasks`), reduce each to
the :class:`~pipelines.scoring.job.EvaluationJob`'s sums (:func:`block_sums`), run them
(:func:`run_tasks`) and turn the summed vector into a result (:func:`scored_result`).

Each task reduces its rows to a few sums (squared errors, log densities, counts inside each
central interval; for classifiers correct predictions and log losses) and only those sums
reach the driver. Interval coverage needs one number per row, the predictive CDF at the
observed value ``u = F(y)``: ``y`` lies in the central ``z`` interval ``[F^-1((1 - z) / 2),
F^-1((1 + z) / 2)]`` exactly when ``(1 - z) / 2 <= u <= (1 + z) / 2`` (``F`` is continuous
and strictly increasing), so the exact intervals of the predictive mixture cost no quantile
search.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import dask
import dask.dataframe as dd
import distributed
import numpy as np
import pandas as pd

from basics.discrete import integer_values, merge_integer_values
from basics.metrics import CALIBRATION_LEVELS, coverage_levels
from basics.validation import refuse_scored_targets
from cluster import current_client
from ebf.dask.cache import settle_whole, whole_model
from ebf.dask.client import Report, gather
from ebf.dask.graph import in_threads, shared_model, small_frame
from pipelines.footers import read_footers
from pipelines.io import Source, describe_source, read_columns
from pipelines.schema import check_schema
from pipelines.scoring.job import EvaluationJob

__all__ = ["block_sums", "evaluate_model", "integer_target", "model_facts", "model_output",
           "model_parts", "partition_rows", "partition_tasks", "run_tasks", "scored_result",
           "sums_and_scores"]

logger = logging.getLogger(__name__)


def model_output(model: Any, X: pd.DataFrame, job: EvaluationJob) -> Any:
    """A whole model's own class probabilities or mixture (the job applies the map)."""
    if job.classes is not None:
        return model.predict_proba(X, recalibrated=False)
    return model.predict_distribution(X, recalibrated=False)


def partition_rows(part: pd.DataFrame, model: Any, features: list[str], target: str,
                   job: EvaluationJob, branch: bool) -> tuple:
    """``(index, block, branch)`` of a partition predicted by a whole model: the job's rows
    and, if ``branch``, the trunk leaf of every row (as :func:`ebf.dask.sharded.sharded_blocks`
    gives them)."""
    if len(part) == 0:
        return part.index, None, None
    X = part[features]
    whole = whole_model(model)  # a saved model: loaded once per worker
    block = job.rows(model_output(whole, X, job), part[target].to_numpy())
    out = part.index, block, whole.apply(X) if branch else None
    settle_whole(model, whole)
    return out


def integer_target(ddf: dd.DataFrame, target: str, client: distributed.Client) -> bool:
    """Whether the observed targets of ``ddf`` are integer-valued
    (:func:`basics.discrete.integer_values`): one task per partition gives its distinct
    values (at most a hundred, or None), and their union decides, as on all rows at once.
    A pass over the target column only, before the scoring pass, which needs the answer."""
    token = uuid.uuid4().hex[:12]
    tasks = [dask.delayed(integer_values, pure=True)(
        part, dask_key_name=f"ebf-integer-{token}-{i}")
        for i, part in enumerate(ddf[target].to_delayed())]
    return merge_integer_values(client.gather(client.compute(tasks))) is not None


def block_sums(assembled: tuple, job: EvaluationJob) -> np.ndarray:
    """The job's sums of a partition's block (per branch too, if the job has branches)."""
    return job.reduce(assembled[1], assembled[2])


def sums_and_scores(assembled: tuple, job: EvaluationJob) -> tuple[np.ndarray, np.ndarray]:
    """The job's sums of a partition's block, and its rows' main score
    (:meth:`EvaluationJob.row_scores`)."""
    return job.reduce(assembled[1]), job.row_scores(assembled[1])


def model_parts(reader: Any) -> tuple:
    """``(classes or None, calibration map or None, whether it has a trunk, the model for
    the tasks)``: from the head of a sharded model (its reader: every worker loads it, once,
    if it is broadcast), or from the model loaded here (format 1 or a single forest: small,
    one graph key)."""
    if reader.n_parts:
        head = reader.head()
        cal_map = head.recalibration if head.classes is None else head.class_calibration
        return head.classes, cal_map, head.trunk is not None, reader
    model = reader.load()
    return (*model_facts(model), shared_model(model))


def model_facts(model: Any) -> tuple:
    """``(classes or None, calibration map or None, whether it has a trunk)`` of a model
    held in this process: the map is a regressor's ``recalibration_`` or a classifier's
    ``class_calibration_``."""
    classes = getattr(model, "classes_", None)
    cal_map = getattr(model, "recalibration_" if classes is None else "class_calibration_",
                      None)
    return classes, cal_map, hasattr(model, "trunk_")


def partition_tasks(ddf: dd.DataFrame, whole: Any, features: list[str], target: str,
                    job: EvaluationJob, branch: bool = False) -> list:
    """One delayed :func:`partition_rows` per partition of ``ddf``."""
    token = uuid.uuid4().hex[:12]
    return [dask.delayed(partition_rows, pure=True)(
        part, whole, features, target, job, branch, dask_key_name=f"ebf-rows-{token}-{i}")
        for i, part in enumerate(ddf.to_delayed())]


def run_tasks(tasks: list, client: distributed.Client, progress: Report | None,
              span: str = "ebf-evaluate") -> list:
    """The tasks' results, in order (``span`` names them on the dashboard); a model
    that travels in the graph is released on the workers afterwards."""
    with distributed.span(span):
        futures = client.compute(tasks)
    try:
        return gather(client, futures, progress)
    finally:
        del futures, tasks  # release the model on the workers


def check_scored_rows(parts: list, job: EvaluationJob, target: str) -> None:
    """Refuse the scores if the partitions' sums count targets beyond ``±MAX_ABS_TARGET``
    (found as the rows were read: data without footer statistics), naming the column and
    the count (:func:`basics.validation.refuse_scored_targets`)."""
    if parts and "beyond" in job.layout:
        sums = np.sum(parts, axis=0)
        lay = job.layout
        beyond = int(sums[lay.index("beyond")])
        refuse_scored_targets(beyond, target, int(sums[lay.index("n")] + sums[
            lay.index("n_missing")]) + beyond)


def scored_result(parts: list, job: EvaluationJob, data: Source, target: str, t0: float,
                  model_info: dict) -> dict[str, Any]:
    """Reduce the partitions' sums to an evaluation result: ``task``, ``target``, ``n``,
    ``n_missing_target``, the facts of ``model_info``, the job's result and ``seconds``
    (since ``t0``)."""
    check_scored_rows(parts, job, target)
    sums = np.sum(parts, axis=0) if parts else np.zeros(job.size)
    n, missing = int(sums[job.layout.index("n")]), int(sums[job.layout.index("n_missing")])
    if n == 0:
        raise ValueError(f"no row of {describe_source(data)} has a value in the target {target!r}; "
                         "nothing to score")
    if missing:
        logger.warning("evaluate: %d row(s) with a missing %r were skipped", missing, target)
    classify = job.classes is not None
    result: dict[str, Any] = {
        "task": job.task,
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
    levels: Sequence[float] = CALIBRATION_LEVELS,
    client: distributed.Client | None = None,
    progress: Report | None = None,
    storage_options: Mapping[str, Any] | None = None,
    row_scores: bool = False,
) -> dict[str, Any]:
    """Score a fitted model held in this process, as :func:`pipelines.report.evaluate.evaluate`
    scores a saved one.

    Small data comes to the model (:func:`ebf.dask.graph.small_frame`), else the model
    travels in the graph to the workers (one copy per worker); the sums and the result are
    those of ``evaluate`` (``model_hash`` is None). For a model not saved yet, e.g. the
    challenger of :func:`pipelines.registry.retrain.retrain`.

    Parameters
    ----------
    model : estimator
        A fitted EBF / SSF (or any model with ``predict_distribution`` / ``predict_proba``).
    data : str, path-like, list of str or dask.dataframe.DataFrame
    target : str
    features : sequence of str
        The model's feature columns.
    levels : sequence of float, default=basics.metrics.CALIBRATION_LEVELS
        Nominal coverages of the central intervals of the calibration table.
    client, progress, storage_options
        As in ``evaluate``.
    row_scores : bool, default=False
        Also return every scored row's main score from the same pass (8 bytes a row come
        to this process): ``-log p(y)`` of the model as it predicts (regressors) or the
        log loss (classifiers), whose mean is the result's ``nlpd`` / ``log_loss``.

    Returns
    -------
    dict
        As ``evaluate``; with ``row_scores``, also ``row_scores``: ndarray of shape
        ``(n,)`` in the data's row order.
    """
    t0 = time.perf_counter()
    client = current_client(client)
    lv = np.atleast_1d(coverage_levels(levels))
    features = list(features)
    classes, cal_map = model_facts(model)[:2]
    if not isinstance(data, dd.DataFrame):
        footers = read_footers(data, storage_options)
        check_schema(data, target, features, storage_options=storage_options, footers=footers)
        if classes is None:
            footers.check_scored_target(target)
    ddf = read_columns(data, [*features, target], storage_options)
    job = EvaluationJob(lv, classes, cal_map,
                        integer=classes is None and integer_target(ddf, target, client))
    reduce = sums_and_scores if row_scores else block_sums
    rows = small_frame(ddf, client)  # a holdout comes to the model, a big set does not
    if rows is not None:
        parts = in_threads(lambda block: reduce(partition_rows(block, model, features, target,
                                                                job, False), job), rows)
    else:
        parts = run_tasks([dask.delayed(reduce, pure=True)(a, job) for a in partition_tasks(
            ddf, shared_model(model), features, target, job)], client, progress)
    info = {"model_hash": None, "model_class": f"ebf.{type(model).__name__}"}
    if not row_scores:
        return scored_result(parts, job, data, target, t0, info)
    result = scored_result([p[0] for p in parts], job, data, target, t0, info)
    return {**result, "row_scores": np.concatenate([p[1] for p in parts])}
