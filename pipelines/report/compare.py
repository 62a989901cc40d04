"""Several saved models scored on the same data in one pass (``ebf registry compare``).

The versions of a registry are each scored on their own holdout when made, so their
recorded metrics do not compare. :func:`compare` scores chosen models on one dataset: the
partitions are read once (every model's tasks share the same read tasks of one graph) and
each model's per-partition sums are reduced as :func:`pipelines.report.evaluate.evaluate`
reduces them (:mod:`pipelines.scoring.tasks`), so every model's result is what ``evaluate``
gives it on that data, every score of :mod:`basics.scores` included.
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
from basics.scores import scores_of
from cluster import current_client
from ebf.dask.client import Report
from ebf.dask.graph import input_partitions
from pipelines.artifacts import open_artifact
from pipelines.footers import read_footers
from pipelines.io import Source, read_columns
from pipelines.report.evaluate import model_info
from pipelines.report.metrics import DEFAULT_LEVELS
from pipelines.schema import check_schema
from pipelines.scoring.job import EvaluationJob
from pipelines.scoring.tasks import (
    block_sums,
    integer_target,
    model_parts,
    partition_tasks,
    run_tasks,
    scored_result,
)

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
    models = [model_parts(a.reader) for a in loaded]
    if not isinstance(data, dd.DataFrame):
        footers = read_footers(data, storage_options)
        check_schema(data, target, features, storage_options=storage_options, footers=footers)
        if any(m[0] is None for m in models):  # a regressor scores it (else found per row)
            footers.check_scored_target(target)
    with input_partitions():
        ddf = read_columns(data, [*features, target], storage_options)
        jobs, tasks = [], []
        integer = None  # the target's, decided once for every regressor
        for a, (classes, pit_map, _, whole) in zip(loaded, models, strict=True):
            if classes is None and integer is None:
                integer = integer_target(ddf, target, client)
            job = EvaluationJob(lv, classes, pit_map, integer=classes is None and bool(integer))
            jobs.append(job)
            tasks.append([dask.delayed(block_sums, pure=True)(p, job) for p in
                          partition_tasks(ddf, whole, list(a.features), target, job)])
        sums = run_tasks([t for per_model in tasks for t in per_model], client, progress)
    out, at = [], 0
    for a, job, per_model in zip(loaded, jobs, tasks, strict=True):
        parts = sums[at:at + len(per_model)]
        at += len(per_model)
        out.append(scored_result(parts, job, data, target, t0, model_info(a)))
    return out


def format_comparison_table(names: Sequence[str], results: Sequence[Mapping[str, Any]]) -> str:
    """One line per model: its rows and every score of its task in
    :data:`basics.scores.SCORES` (regressors also the 90% coverage).

    Examples
    --------
    >>> r = {"task": "classification", "n": 10, "accuracy": 0.9, "log_loss": 0.25,
    ...      "ece": 0.031}
    >>> print(format_comparison_table(["v0001"], [r]))
    version    rows  log loss  accuracy    ECE
    v0001        10     0.250     0.900  0.031
    """
    width = max(7, *(len(n) for n in names))
    classify = bool(results) and results[0]["task"] == "classification"
    scores = scores_of("classification" if classify else "regression",
                       any(r.get("integer_target") for r in results))
    columns = [(s.label, lambda r, s=s: r.get(s.name), ".3f" if s.fmt.endswith("f")
                else s.fmt) for s in scores]
    if not classify:
        columns.append(("cover 90%", lambda r: r["coverage"].get(0.9), ".3f"))
    sizes = [max(5, len(label)) for label, _, _ in columns]
    lines = [f"{'version':<{width}}  {'rows':>6}" + "".join(
        f"  {label:>{w}}" for (label, _, _), w in zip(columns, sizes, strict=True))]
    for n, r in zip(names, results, strict=True):
        cells = []
        for (_, get, spec), w in zip(columns, sizes, strict=True):
            v = get(r)
            cells.append(f"  {'n/a' if v is None else format(v, spec):>{w}}")
        lines.append(f"{n:<{width}}  {r['n']:>6}" + "".join(cells))
    return "\n".join(lines)
