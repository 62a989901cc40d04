"""``partial_fit`` of an Empirical Bayesian Forest on the cluster.

The new rows are checked against the model (columns and kinds on the metadata, labels and
targets in the summary pass), encoded with the model's own encoder and routed by its trunk
on the workers, partition by partition (the rows are read once and kept on the workers
for the two passes). The branches the rows reach are then updated, in one of three ways:

- **on the workers** (:func:`update_live`): a Dask fit's branches are there; each branch
  the rows reach is updated in one task where it is, and stays there;
- **in memory** (:func:`update_model`): the model's branches are in this process, so the
  encoded rows come to them (a window of new rows is small next to the model: a few
  float64 columns per row), and the model's seam ``_update_encoded`` runs the local
  ``partial_fit`` on them (``ebf.updates``);
- **saved** (:func:`update_saved`): the model is saved (its reader, ``ebf.artifact``) and
  a new one is staged (:func:`ebf.artifact.stage_model`). Each branch the rows reach is
  updated in one task on a worker, which loads its shard alone, takes that branch's rows
  of every partition (in row order) and writes the updated branch's shard to the stage;
  the other branches are carried into the stage unchanged (their files linked or copied,
  :func:`ebf.artifact.carry_part`), neither loaded nor rewritten. This process holds the
  model's head and the shards' references only.

Every way, every updated branch is ``ebf.updates.update_branch`` of the branch's rows in
arrival order with the model's seed, so the result equals the local ``partial_fit`` on
``X.compute()``, bit for bit.
"""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import pandas as pd
from distributed import Client
from sklearn.base import is_classifier

from ..artifact import StoredPart, carry_part, write_part
from ..learners import get_learner, online_learners
from ._shuffle import BRANCH, TARGET, feature_columns, route_by_trunk, routed_meta
from .client import gather, wait_for
from .inputs import InputSummary, check_columns, check_inputs, check_known_labels, encode, summarize
from .live import LivePart

__all__ = ["update_live", "update_model", "update_saved"]

#: Retries of a branch update task that raised (a worker that died is handled by the
#: scheduler); the task writes its shard whole or not at all, so a retry writes it again.
UPDATE_RETRIES = 2


def _routed(client: Client, model: Any, X: Any, y: Any, phases: Any) -> tuple:
    """The new rows checked, encoded and routed by ``model``'s trunk on the workers:
    ``(routed futures, encoded data)``, one routed frame per partition."""
    if not get_learner(model.branch).online:
        raise ValueError(
            f"partial_fit on Dask extends only {online_learners()} branches online; "
            f"this model's branch={model.branch!r} (CART) forests keep no rows. Refit "
            "with fit(X, y), or update the local model with its earlier rows: "
            "to_local().partial_fit(X, y, previous=(X_old, y_old)).")
    task = "classification" if is_classifier(model) else "regression"
    classes = getattr(model, "classes_", None)
    with phases("schema"):
        frame, layout = check_inputs(X, y, None, task)
        check_columns(model, X, layout)
        # a window is small next to the model: read it once for the two passes below
        frame = client.persist(frame)
    with phases("summary"):
        summary = summarize(client, frame, layout, phases.report("summary"),
                            allow_nan=model._missing_values)
        check_known_labels(layout, summary, classes)
    with phases("encode"):
        data = encode(client, frame, layout,
                      InputSummary(summary.lengths, model.encoder_, classes,
                                   model._missing_values),
                      phases.report("encode"))
    return route_by_trunk(client, data, model.trunk_), data


def update_model(client: Client, model: Any, X: Any, y: Any, phases: Any) -> Any:
    """Update fitted local EBF ``model`` with the rows of ``(X, y)``.

    Parameters
    ----------
    client : distributed.Client
    model : EmpiricalBayesianForestRegressor or EmpiricalBayesianForestClassifier
        Fitted, with online (Mondrian) branches.
    X : dask.dataframe.DataFrame
    y : dask.dataframe.Series
    phases : callable
        ``phases(name)`` -> context manager timing a phase; ``phases.report(name)`` its
        progress callback (``ebf.dask.client.Phases``).

    Returns
    -------
    estimator
        ``model``, updated in place (its branches are all in this process; a model whose
        branches are on the workers is updated there, :func:`update_live`).

    Raises
    ------
    ValueError, TypeError
        CART branches, other columns, labels never seen, a predict-only or constant branch
        that receives rows. The model is then unchanged.
    """
    routed, data = _routed(client, model, X, y, phases)
    with phases("route"):
        frames = gather(client, routed, phases.report("route"))
        data.release()
        del routed
    with phases("branches"):
        rows = pd.concat(frames, ignore_index=True) if frames else routed_meta(data)
        A = np.ascontiguousarray(rows[feature_columns(data.n_features)].to_numpy(np.float64))
        # the cluster waits meanwhile: the branches use this machine's cores
        model._update_encoded(A, rows[TARGET].to_numpy(), rows[BRANCH].to_numpy(), n_jobs=-1)
    return model


def _take(result: tuple, i: int) -> Any:
    return result[i]


def _counts(part: pd.DataFrame, n_branches: int) -> np.ndarray:
    return np.bincount(part[BRANCH].to_numpy(), minlength=n_branches)


def _updated_branch(branch: Any, b: int, spec: Any, entropy: int, n_features: int,
                    *routed: pd.DataFrame) -> tuple:
    """Branch ``b`` updated with its rows of every routed partition (in partition order,
    so in row order; ``ebf.updates.update_branch``, which checks it can take them): the
    new branch and its count of new rows."""
    from ..updates import update_branch

    rows = pd.concat([p[p[BRANCH].to_numpy() == b] for p in routed], ignore_index=True)
    A = np.ascontiguousarray(rows[feature_columns(n_features)].to_numpy(np.float64))
    return update_branch(spec, branch, A, rows[TARGET].to_numpy(), entropy, b), len(rows)


def _update_part(reader: Any, b: int, spec: Any, entropy: int, n_features: int,
                 stage: tuple[str, dict], *routed: pd.DataFrame) -> tuple:
    """Branch ``b`` loaded from its shard, updated (:func:`_updated_branch`) and written
    to the stage: its reference and its count of new rows."""
    new, n = _updated_branch(reader.load_part(b), b, spec, entropy, n_features, *routed)
    return write_part(stage[0], b, new, stage[1]), n


def _reached(client: Client, model: Any, X: Any, y: Any, phases: Any) -> tuple:
    """The new rows routed on the workers and counted per branch: ``(routed futures,
    n_features, counts, spec, branches reached)``; every branch reached that is in this
    process is checked to take rows before any work."""
    from ..updates import check_updatable

    routed, data = _routed(client, model, X, y, phases)
    n_branches = len(model.branches_)
    with phases("route"):
        counts = np.sum(gather(client, client.map(_counts, routed, n_branches=n_branches,
                                                  pure=False), phases.report("route")),
                        axis=0, dtype=np.int64) if routed else np.zeros(n_branches, np.int64)
        data.release()
    spec = model._fit_plan(model.encoder_, getattr(model, "classes_", None), 1).spec
    reached = [b for b in range(n_branches) if counts[b]]
    for b in reached:  # every branch that gets rows can take them, before any work
        if not isinstance(model.branches_[b], (StoredPart, LivePart)):
            check_updatable(spec, model.branches_[b], b)
    return routed, data.n_features, counts, spec, reached


def update_live(client: Client, model: Any, X: Any, y: Any, phases: Any) -> Any:
    """Update EBF ``model``, whose branches are on the workers (a Dask fit's
    :class:`ebf.dask.live.LivePart`), with the rows of ``(X, y)`` where the branches are:
    one task per branch the rows reach (:func:`_updated_branch`, the local update), the new
    branch kept on its worker. Returns the updated model (``model._with_parts``, the update
    recorded by ``_take_updates``); ``model`` is not modified, and a branch that cannot
    take rows raises before the model changes.
    """
    routed, n_features, counts, spec, reached = _reached(client, model, X, y, phases)
    token = uuid.uuid4().hex[:12]
    parts = list(model.branches_)
    with phases("branches"):
        futures = [client.submit(
            _updated_branch, p.future if isinstance(p, LivePart) else p, b, spec,
            int(model.entropy_), n_features, *routed, pure=False,
            key=f"ebf-update-{b}-{token}", retries=UPDATE_RETRIES)
            for b, p in ((b, parts[b]) for b in reached)]
        del routed
        rows = gather(client, [client.submit(_take, f, 1, pure=False) for f in futures],
                      phases.report("branches"))
        updates = {b: LivePart(client.submit(_take, f, 0, key=f"ebf-part-{b}-{token}",
                                             pure=False), b)
                   for b, f in zip(reached, futures, strict=True)}
        wait_for(client, [p.future for p in updates.values()])
    updated = model._with_parts([updates.get(b, p) for b, p in enumerate(parts)])
    return updated._take_updates(updates, dict(zip(reached, rows, strict=True)))


def update_saved(client: Client, model: Any, reader: Any, X: Any, y: Any, stage: Any,
                 phases: Any) -> Any:
    """Update the saved EBF ``reader`` with the rows of ``(X, y)`` into ``stage``, on the
    workers; the updated model, its branches :class:`ebf.artifact.StoredPart` references.

    Parameters
    ----------
    client : distributed.Client
    model : EmpiricalBayesianForestRegressor or EmpiricalBayesianForestClassifier
        The saved model's head: its encoder, trunk, classes and update record are read
        (its branches may be the loaded ones or references: they are not used, but every
        branch that receives rows is checked to be updatable, unless it is a reference).
        It is not modified.
    reader : ebf.artifact.ModelReader
        The saved model (format 2): the branches are read from its shards.
    X : dask.dataframe.DataFrame
    y : dask.dataframe.Series
    stage : ebf.artifact.ModelStage
        Where the new model is written: every shard here, the head by the caller
        (``stage.write(updated, metadata)``).
    phases : callable
        As in :func:`update_model`.

    Returns
    -------
    estimator
        A new model (``model._with_parts``) with the update recorded (``branch_rows_``,
        ``branch_updates_``, ``n_updates_``) and every branch a ``StoredPart`` of
        ``stage``.

    Raises
    ------
    ValueError, TypeError
        As :func:`update_model`, before any shard is written.
    """
    routed, n_features, counts, spec, reached = _reached(client, model, X, y, phases)
    n_branches = len(model.branches_)
    token = uuid.uuid4().hex[:12]
    where = (stage.url, stage.storage_options)
    with phases("branches"):
        futures = [client.submit(_update_part, reader, b, spec, int(model.entropy_),
                                 n_features, where, *routed, pure=False,
                                 key=f"ebf-update-{b}-{token}", retries=UPDATE_RETRIES)
                   for b in reached]
        del routed
        # meanwhile the branches the rows do not reach go to the stage as they are
        parts = {b: carry_part(stage.url, b, reader, stage.storage_options)
                 for b in range(n_branches) if not counts[b]}
        done = gather(client, futures, phases.report("branches"))
    updates = {b: r[0] for b, r in zip(reached, done, strict=True)}
    updated = model._with_parts([parts.get(b, updates.get(b)) for b in range(n_branches)])
    return updated._take_updates(updates, {b: r[1] for b, r in zip(reached, done, strict=True)})
