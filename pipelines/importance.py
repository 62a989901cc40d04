"""The job behind ``ebf importance``: permutation importance of a saved model on held-out
Parquet data, on Dask.

Each partition task takes a seeded Bernoulli sample of its rows (at most ``max_rows`` in
all, the share read from the Parquet footers), drops rows without a target, and returns
:func:`ebf.importance.permuted_losses`: its loss sums as given and with each feature
shuffled within the sample, ``n_repeats`` times. Only those sums reach the driver, which
adds them and forms the table (:func:`ebf.importance.importance_table`). The model goes to
the workers as a saved model, each worker loading it once (the evaluation job's way).

A shuffle within a partition draws another row of the same partition, so the result depends
on the seed and on the partitioning, as any shuffle's does; with the same data, partitions
and seed it is the same whatever the number of workers.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping
from typing import Any

import dask
import dask.dataframe as dd
import distributed
import numpy as np
import pandas as pd

from basics.tasks import CLASSIFICATION, REGRESSION
from cluster import current_client
from ebf.dask.cache import settle_whole, whole_model
from ebf.dask.client import Report
from ebf.dask.graph import input_partitions
from ebf.importance import check_scoring, importance_table, permuted_losses
from pipelines.artifacts import open_artifact
from pipelines.footers import read_footers
from pipelines.io import Source, describe_source, read_columns
from pipelines.schema import check_schema
from pipelines.scoring.tasks import model_parts, run_tasks

__all__ = ["DEFAULT_MAX_ROWS", "DEFAULT_REPEATS", "format_importances",
           "permutation_importance"]

logger = logging.getLogger(__name__)

#: Rows scored by default: each is predicted ``1 + n_features * n_repeats`` times.
DEFAULT_MAX_ROWS = 20_000
#: Shuffles per feature by default.
DEFAULT_REPEATS = 3


def _partition_losses(part: pd.DataFrame, model: Any, features: list[str], target: str,
                      scoring: str, n_repeats: int, share: float, entropy: int,
                      index: int) -> np.ndarray:
    rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(index,)))
    keep = (rng.random(len(part)) < share) & part[target].notna().to_numpy()
    rows = part.loc[keep]
    whole = whole_model(model)  # a saved model: loaded once per worker
    out = permuted_losses(whole, rows[features], rows[target].to_numpy(), scoring, n_repeats,
                          rng)
    settle_whole(model, whole)
    return out


def permutation_importance(
    model_dir: str,
    data: Source,
    *,
    target: str | None = None,
    scoring: str | None = None,
    n_repeats: int = DEFAULT_REPEATS,
    max_rows: int | None = DEFAULT_MAX_ROWS,
    random_state: int = 0,
    client: distributed.Client | None = None,
    progress: Report | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Permutation importance of a saved model on a labelled Parquet dataset, on Dask.

    Parameters
    ----------
    model_dir : str or path-like
        A model directory (local or fsspec URL).
    data : str, path-like, list of str or dask.dataframe.DataFrame
        Held-out rows with the model's features and the target.
    target : str, optional
        Target column; by default the one recorded at training.
    scoring : str, optional
        A loss of :data:`ebf.importance.SCORINGS` (``crps``, ``nlpd``, ``squared_error``;
        ``log_loss``, ``error``); CRPS or log loss by default.
    n_repeats : int, default=3
        Shuffles per feature.
    max_rows : int or None, default=20_000
        About this many rows are scored (a seeded sample); None scores every row. The cost
        is ``1 + n_features * n_repeats`` predictions per scored row.
    random_state : int, default=0
    client : distributed.Client, optional
    progress : callable ``progress(done, total)``, optional
    storage_options : dict, optional

    Returns
    -------
    dict
        ``importances`` (DataFrame ``feature``, ``importance``, ``std``: the increase of the
        mean loss, most important first), ``scoring``, ``baseline`` (mean loss), ``n``
        (rows scored), ``n_repeats``, ``target``, ``model_hash``, ``seconds``.

    Raises
    ------
    ValueError
        For a bad option (before any data is read) or when no row has a target.
    pipelines.schema.SchemaError
        If the data lacks a feature or the target.
    """
    t0 = time.perf_counter()
    if int(n_repeats) < 1:
        raise ValueError(f"n_repeats must be >= 1, got {n_repeats!r}.")
    if max_rows is not None and int(max_rows) < 1:
        raise ValueError(f"max_rows must be >= 1 (or None for every row), got {max_rows!r}.")
    loaded = open_artifact(model_dir, storage_options)
    target = target or loaded.training.get("target")
    if not isinstance(target, str):
        raise ValueError(f"the model at {loaded.path!r} does not record its target; pass "
                         "target= (CLI: --target)")
    classes, _, _, whole = model_parts(loaded.reader)
    scoring = check_scoring(REGRESSION if classes is None else CLASSIFICATION, scoring)
    features = list(loaded.features)
    share = 1.0
    if not isinstance(data, dd.DataFrame):
        footers = read_footers(data, storage_options)
        check_schema(data, target, features, storage_options=storage_options, footers=footers,
                     allow_nulls=loaded.missing_values)
        if max_rows is not None and footers.rows > int(max_rows):
            share = int(max_rows) / footers.rows
    elif max_rows is not None:
        n = int(current_client(client).compute(data.shape[0]).result())
        share = min(1.0, int(max_rows) / max(n, 1))
    client = current_client(client)
    with input_partitions():
        ddf = read_columns(data, [*features, target], storage_options)
    token = uuid.uuid4().hex[:12]
    tasks = [dask.delayed(_partition_losses, pure=True)(
        part, whole, features, target, scoring, int(n_repeats), share, int(random_state), i,
        dask_key_name=f"ebf-importance-{token}-{i}") for i, part in enumerate(ddf.to_delayed())]
    logger.info("permutation importance of %s on %s (%d partitions, %s, share %.3g)",
                loaded.path, describe_source(data), len(tasks), scoring, share)
    sums = np.sum(run_tasks(tasks, client, progress, span="ebf-importance"), axis=0)
    table = importance_table(sums, features, int(n_repeats))
    return {"importances": table, "scoring": scoring, "baseline": table.attrs["baseline"],
            "n": table.attrs["n"], "n_repeats": int(n_repeats), "target": target,
            "model_hash": loaded.digest, "seconds": time.perf_counter() - t0}


def format_importances(res: dict) -> str:
    """The importance table of :func:`permutation_importance`'s result (its ``importances``
    a DataFrame or records) as text, most important first."""
    table = pd.DataFrame(res["importances"])
    width = max(7, *(len(f) for f in table["feature"]))
    lines = [f"permutation importance: increase of the mean {res['scoring']} over "
             f"{res['n']:,} rows ({res['n_repeats']} shuffles per feature; baseline "
             f"{res['baseline']:.4g})",
             f"{'feature':<{width}}  {'importance':>11}  {'std':>9}"]
    lines += [f"{r.feature:<{width}}  {r.importance:>11.4g}  {r.std:>9.2g}"
              for r in table.itertuples()]
    return "\n".join(lines)
