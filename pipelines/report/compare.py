"""Several saved models scored on the same data in one pass (``ebf registry compare``).

The versions of a registry are each scored on their own holdout when made, so their
recorded metrics do not compare. :func:`compare` scores chosen models on one dataset: the
partitions are read once (every model's tasks share the same read tasks of one graph) and
each model's per-partition sums are reduced as :func:`pipelines.report.evaluate.evaluate`
reduces them, so every model's result is what ``evaluate`` gives it on that data.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import dask
import dask.dataframe as dd
import distributed
import numpy as np

from basics.metrics import coverage_levels
from cluster import current_client
from ebf.dask.client import Report
from ebf.dask.graph import input_partitions
from pipelines.artifacts import open_artifact
from pipelines.io import Source, read_columns
from pipelines.report.diagnostics import EvaluationJob
from pipelines.report.evaluate import (
    _model_parts,
    _partition_tasks,
    _run,
    _score,
    _sums,
    model_info,
)
from pipelines.report.metrics import DEFAULT_LEVELS
from pipelines.schema import check_schema

__all__ = ["compare", "format_comparison_table"]


def compare(
    model_dirs: Sequence[str | os.PathLike[str]],
    data: Source,
    *,
    target: str | None = None,
    levels: Sequence[float] = DEFAULT_LEVELS,
    client: distributed.Client | None = None,
    progress: Report | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Score every model of ``model_dirs`` on ``data``, reading the data once.

    Parameters
    ----------
    model_dirs : sequence of str or path-like
        Saved models (or registry version directories) of the same target.
    data : str, path-like or dask.dataframe.DataFrame
        A labelled dataset with every model's features and the target.
    target : str, optional
        The target column; by default the one the models record (all the same).
    levels : sequence of float, default=DEFAULT_LEVELS
    client : distributed.Client, optional
    progress : callable ``progress(done, total)``, optional
        Called as the partition tasks of all models finish.
    storage_options : mapping, optional

    Returns
    -------
    list of dict
        One :func:`pipelines.report.evaluate.evaluate` result per model, in order, each
        with its ``model`` (the directory).

    Raises
    ------
    ValueError
        If no model is given, or the models record different targets and none is given.

    Examples
    --------
    >>> results = compare(["reg/models/ebf/v0001", "reg/models/ebf/v0002"], "data/test")
    ... # doctest: +SKIP
    >>> [round(r["nlpd"], 3) for r in results]  # doctest: +SKIP
    [2.48, 2.41]
    """
    if not model_dirs:
        raise ValueError("compare needs at least one model.")
    t0 = time.perf_counter()
    client = current_client(client)
    lv = np.atleast_1d(coverage_levels(levels))
    loaded = [open_artifact(m, storage_options) for m in model_dirs]
    if target is None:
        targets = {a.training.get("target") for a in loaded}
        if len(targets) != 1 or not isinstance(next(iter(targets)), str):
            raise ValueError(f"the models record the targets {sorted(map(str, targets))}; "
                             "pass the one to score (target=, CLI: --target)")
        target = next(iter(targets))
    features = list(dict.fromkeys(f for a in loaded for f in a.features))
    if not isinstance(data, dd.DataFrame):
        check_schema(data, target, features, storage_options=storage_options)
    with input_partitions():
        ddf = read_columns(data, [*features, target], storage_options)
        jobs, tasks = [], []
        for a in loaded:
            classes, pit_map, _, whole = _model_parts(a.reader)
            job = EvaluationJob(lv, classes, pit_map)
            jobs.append(job)
            tasks.append([dask.delayed(_sums, pure=True)(p, job) for p in
                          _partition_tasks(ddf, whole, list(a.features), target, job)])
        sums = _run([t for per_model in tasks for t in per_model], client, progress)
    out, at = [], 0
    for a, job, per_model in zip(loaded, jobs, tasks, strict=True):
        parts = sums[at:at + len(per_model)]
        at += len(per_model)
        out.append(_score(parts, job, data, target, t0, model_info(a)))
    return out


def format_comparison_table(names: Sequence[str], results: Sequence[Mapping[str, Any]]) -> str:
    """One line per model: regressors RMSE, NLPD, CRPS, 90% coverage and the largest
    calibration gap; classifiers accuracy and log loss.

    Examples
    --------
    >>> r = {"task": "regression", "n": 10, "rmse": 1.0, "nlpd": 1.5, "crps": 0.5,
    ...      "coverage": {0.9: 0.88}, "max_calibration_gap": 0.04}
    >>> print(format_comparison_table(["v0001"], [r]))
    version    rows   rmse   nlpd   crps  cover 90%  max gap
    v0001        10  1.000  1.500  0.500      0.880    0.040
    """
    width = max(7, *(len(n) for n in names))
    if results and results[0]["task"] == "classification":
        lines = [f"{'version':<{width}}  {'rows':>6}  {'accuracy':>8}  {'log loss':>8}"]
        lines += [f"{n:<{width}}  {r['n']:>6}  {r['accuracy']:>8.3f}  {r['log_loss']:>8.3f}"
                  for n, r in zip(names, results, strict=True)]
        return "\n".join(lines)
    lines = [f"{'version':<{width}}  {'rows':>6}  {'rmse':>5}  {'nlpd':>5}  {'crps':>5}  "
             f"{'cover 90%':>9}  {'max gap':>7}"]
    for n, r in zip(names, results, strict=True):
        cover = r["coverage"].get(0.9, float("nan"))
        lines.append(f"{n:<{width}}  {r['n']:>6}  {r['rmse']:>5.3f}  {r['nlpd']:>5.3f}  "
                     f"{r.get('crps', float('nan')):>5.3f}  {cover:>9.3f}  "
                     f"{r['max_calibration_gap']:>7.3f}")
    return "\n".join(lines)
