"""The update of a registry's champion, on the workers, while the gate scores the champion.

:func:`pipelines.registry.retrain.retrain` decides between an update and a refit only after
the champion is scored on the holdout and the drift check has run. A champion that can be
updated (online branches, not predict-only, saved in format 2) is therefore updated
*meanwhile*: :func:`start_update` submits the update (:meth:`ebf.dask.DaskEmpiricalBayesian
ForestRegressor.partial_fit` with a stage) from a thread of this process and returns at once;
the workers encode and route the new rows, and each branch they reach is loaded from the
champion's shard, updated and written to the stage on a worker; the other branches are
carried into the stage unchanged (their files linked). :func:`finish_update` collects it
when the decision is ``update``, :func:`discard_update` drops it when it is ``refit``. The
update depends on nothing the scoring or the drift check compute, so the model is the one a
sequential update makes.

The gate then scores the challenger in this process, as the champion: its branches are the
champion's where no row reached them (the same objects) and the updated ones read from
their staged shards, so only those are loaded.
"""

from __future__ import annotations

import copy
import logging
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import distributed

from basics.threads import thread_map
from ebf.artifact import ModelReader, ModelStage
from ebf.dask.client import PhaseReport

__all__ = ["StagedUpdate", "discard_update", "finish_update", "start_update"]

logger = logging.getLogger(__name__)


@dataclass
class StagedUpdate:
    """An update running on the workers, written to ``stage``.

    Attributes
    ----------
    future : concurrent.futures.Future
        ``(updated model with StoredPart branches, its phase timings)``.
    stage : ebf.artifact.ModelStage
    pool : ThreadPoolExecutor
        The thread that waits for the workers.
    """

    future: Future
    stage: ModelStage
    pool: ThreadPoolExecutor = field(repr=False)


def start_update(client: distributed.Client, champion: Any, reader: ModelReader, X: Any, y: Any,
                 stage_url: str, branch_memory: Any, progress: PhaseReport | None,
                 storage_options: Any) -> StagedUpdate:
    """Submit the update of the saved ``champion`` (``reader``) with the rows ``(X, y)``,
    written to the stage ``stage_url``; returns at once.

    Parameters
    ----------
    client : distributed.Client
    champion : EmpiricalBayesianForestRegressor or EmpiricalBayesianForestClassifier
        The champion, loaded (read only: it is not modified).
    reader : ebf.artifact.ModelReader
        The same model, saved in format 2.
    X : dask.dataframe.DataFrame
    y : dask.dataframe.Series
    stage_url : str
        An empty directory the new model's files go to.
    branch_memory, progress, storage_options :
        As for the Dask estimator's fit.

    Returns
    -------
    StagedUpdate
    """
    from ebf import dask as ebf_dask

    classes = {c._local_class: c for c in (ebf_dask.DaskEmpiricalBayesianForestRegressor,
                                           ebf_dask.DaskEmpiricalBayesianForestClassifier)}
    est = classes[type(champion)].from_local(champion, client=client,
                                             branch_memory=branch_memory)
    stage = ModelStage(stage_url, storage_options)

    def run() -> tuple[Any, dict]:
        est.partial_fit(X, y, progress=progress, stage=stage, saved=reader)
        return est.model_, dict(est.fit_timings_)

    pool = ThreadPoolExecutor(1, thread_name_prefix="ebf-retrain-update")
    return StagedUpdate(pool.submit(run), stage, pool)


def finish_update(update: StagedUpdate, champion: Any) -> tuple[Any, Any, dict]:
    """Wait for the update; the model to write, the same model in memory, and the timings.

    Returns
    -------
    staged : estimator
        The updated model, every branch a :class:`ebf.artifact.StoredPart` of the stage:
        write its head with ``update.stage.write(staged, metadata)`` (after copying the
        recalibration of ``challenger``).
    challenger : estimator
        The updated model with its branches in this process: the champion's where no row
        reached them, the updated ones read from the stage (in threads).
    timings : dict
        Seconds per phase of the update.

    Raises
    ------
    Exception
        Whatever the update raised (nothing is then written but to the stage).
    """
    try:
        staged, timings = update.future.result()
    finally:
        update.pool.shutdown(wait=False)
    reader = update.stage.write(staged)  # a head, to read the updated branches back
    reached = [b for b in range(len(staged.branches_))
               if staged.branch_updates_[b] == staged.n_updates_ != champion.n_updates_]
    reader.head()  # once, before the threads read parts against it
    loaded = dict(zip(reached, thread_map(reader.load_part, reached, -1), strict=True))
    challenger = copy.copy(staged)
    challenger.__dict__["branches_"] = [loaded.get(b, part)
                                        for b, part in enumerate(champion.branches_)]
    return staged, challenger, timings


def discard_update(update: StagedUpdate, wait: bool = True) -> None:
    """Drop an update no longer wanted: a refit was decided (``wait``: for it to end, so
    that the refit has the workers), or the run failed (not waiting: the stage is removed
    with the scratch directory, and again once the cluster is closed,
    :func:`basics.atomic.remove_abandoned`). What it raised is logged, not raised."""
    if not wait:
        update.pool.shutdown(wait=False, cancel_futures=True)
        return
    try:
        update.future.result()
    except Exception as exc:  # noqa: BLE001 - the refit goes on; the update is moot
        logger.info("retrain: the update started before the refit decision failed: %s", exc)
    finally:
        update.pool.shutdown(wait=False)
