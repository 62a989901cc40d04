"""The branch tasks: a memory budget per branch, one task per branch (paper Sec. 4-5).

Taddy et al. (2015), Sec. 4.2: fix the trunk "only as deep as you must", i.e. set "branch
size so that the working memory required to fit a forest at each branch is slightly less
than the memory available on each machine". :func:`max_branch_rows` turns a memory
budget (``branch_memory``) into a maximum of rows per branch, which
:func:`ebf.dask.histograms.fit_trunk` grows the trunk to meet.

Sec. 4 / 5: every branch is then fit "in parallel without any communication with the other
branches": one task per branch calling ``ebf.branches.fit_branch`` on the branch's rows,
in global row order, with the seed from ``(entropy, branch)``. The model therefore depends
neither on the number of workers, nor on the partitioning, nor on retries. Every fitted
branch stays in the memory of the worker that fit it (a :class:`ebf.dask.live.LivePart`
handle in the model, which the local estimator's own seam ``_from_parts`` assembles), so
the driver receives row counts and calibration counts only. Given a model stage
(:func:`ebf.artifact.stage_model`), each task writes its branch's shard there as soon as
it is fit (:func:`ebf.artifact.write_part`) and returns only the reference: the branch's
arrays never leave the worker.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import numpy as np
import pandas as pd
from distributed import Client, Future

from basics.calibration import HeldOutCounts

from ..artifact import ModelStage, write_part
from ..branches import BranchSpec, fit_branch, fit_calibrated_branch
from ..learners import get_learner
from ..subsample import held_out_by_others, others_held_out, part_values
from ._shuffle import ROW, TARGET, WEIGHT, feature_columns
from .client import Report, gather, wait_for
from .live import LivePart

logger = logging.getLogger(__name__)

#: Retries of a branch task that raised (a worker that died is handled by the scheduler).
BRANCH_RETRIES = 2

#: Copies of a branch's rows alive while it is fit: the moved partition, the row-sorted
#: copy, the contiguous float64 matrix, and the learner's own copy (scikit-learn's float32
#: matrix plus per-tree bootstrap weights and sample indices), rounded up.
BRANCH_DATA_COPIES = 4


class BranchMemoryError(ValueError):
    """A branch does not fit the ``branch_memory`` budget and the trunk cannot split it."""


def branch_bytes_per_row(n_features: int, has_weight: bool, spec: BranchSpec) -> float:
    """Estimated working memory of a branch per row, in bytes (paper Sec. 4.2).

    ``BRANCH_DATA_COPIES`` copies of the row (``8 * n_features`` feature bytes, 8 for the
    target, 8 for the row id, 8 for a weight) plus ``n_estimators`` trees of the learner's
    ``working_bytes`` per row each (:data:`ebf.learners.LEARNERS`).

    Parameters
    ----------
    n_features : int
        Encoded features.
    has_weight : bool
        Whether rows carry a sample weight.
    spec : BranchSpec
        The branch learner and its parameters.

    Returns
    -------
    float

    Examples
    --------
    >>> from ebf.branches import BranchSpec
    >>> spec = BranchSpec("bayesian", "regression", 10, 5, 1.0, None, 0, {}, None)
    >>> branch_bytes_per_row(3, False, spec)
    800.0
    """
    row = 8.0 * n_features + 16.0 + (8.0 if has_weight else 0.0)
    tree = get_learner(spec.learner).working_bytes(spec, n_features)
    return BRANCH_DATA_COPIES * row + int(spec.n_estimators) * tree


def parse_branch_memory(branch_memory: int | str | None,
                        name: str = "branch_memory") -> int | None:
    """``branch_memory`` (or another memory budget) in bytes (None stays None).

    Parameters
    ----------
    branch_memory : int, str or None
        Bytes, or a string such as ``"2GB"`` (``dask.utils.parse_bytes``).
    name : str, default="branch_memory"
        The budget's name in the error message.

    Returns
    -------
    int or None

    Examples
    --------
    >>> parse_branch_memory("2GB"), parse_branch_memory(None)
    (2000000000, None)
    """
    if branch_memory is None:
        return None
    from dask.utils import parse_bytes

    try:
        budget = parse_bytes(branch_memory) if isinstance(branch_memory, str) else branch_memory
        ok = int(budget) == budget and budget > 0
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"{name} must be a positive number of bytes or a string such "
                         f"as '2GB', got {branch_memory!r}.")
    return int(budget)


def max_branch_rows(budget: int | None, n_features: int, has_weight: bool,
                    spec: BranchSpec) -> int | None:
    """Largest number of rows a branch may have within ``budget`` bytes (None: no limit).

    Parameters
    ----------
    budget : int or None
        :func:`parse_branch_memory` of ``branch_memory``.
    n_features, has_weight, spec :
        As in :func:`branch_bytes_per_row`.

    Returns
    -------
    int or None

    Examples
    --------
    >>> from ebf.branches import BranchSpec
    >>> spec = BranchSpec("bayesian", "regression", 10, 5, 1.0, None, 0, {}, None)
    >>> max_branch_rows(800_000, 3, False, spec)
    1000
    """
    if budget is None:
        return None
    return max(1, int(budget // branch_bytes_per_row(n_features, has_weight, spec)))


def pause_fraction() -> float:
    """Dask's ``distributed.worker.memory.pause``: above this share of its memory limit a
    worker stops taking tasks (1.0 when pausing is off).

    Examples
    --------
    >>> 0 < pause_fraction() <= 1
    True
    """
    import dask.config
    import distributed  # noqa: F401 - loads the distributed config defaults

    pause = dask.config.get("distributed.worker.memory.pause")
    return float(pause) if pause else 1.0


def layout_advice(threads: int, memory: int | None, budget: int | None) -> str:
    """How to give each branch more memory on workers of ``threads`` threads and ``memory``
    bytes (the sentence of a :class:`BranchMemoryError` after what failed).

    A worker runs a task per thread, so its ``threads`` branches share what lies below its
    pause threshold (``share`` each). With one thread the only ways out are more memory per
    worker, a larger ``branch_memory`` while it stays within the share, and smaller branches;
    with several, fewer threads per worker of the same memory also give each branch more
    (not on a batch job, whose workers split its memory: more processes, less each).

    Parameters
    ----------
    threads : int
        Threads of the most constrained worker.
    memory : int or None
        Its memory limit in bytes (None or 0: no limit).
    budget : int or None
        The ``branch_memory`` of the fit, in bytes.

    Returns
    -------
    str

    Examples
    --------
    >>> print(layout_advice(1, 4 * 2**30, 2**30))  # doctest: +NORMALIZE_WHITESPACE
    The workers run one thread each with a memory limit of 4.00 GiB (3.20 GiB for a branch
    below Dask's pause threshold): raise branch_memory (--branch-memory) up to 3.20 GiB, give
    each worker more memory (SLURM/PBS: the job's --memory; Kubernetes: --worker-memory; dask
    worker --memory-limit) and raise branch_memory with it, or make the branches smaller
    >>> "fewer threads per worker" in layout_advice(4, 16 * 2**30, 2**30)
    True
    """
    from dask.utils import format_bytes

    if not memory:
        return "Raise branch_memory (--branch-memory), or make the branches smaller"
    share = int(pause_fraction() * memory // threads)
    room = (f"raise branch_memory (--branch-memory) up to {format_bytes(share)}, "
            if budget is None or budget < share else "")
    more_memory = ("give each worker more memory (SLURM/PBS: the job's --memory; Kubernetes: "
                   "--worker-memory; dask worker --memory-limit) and raise branch_memory "
                   "with it")
    if threads == 1:
        return (f"The workers run one thread each with a memory limit of "
                f"{format_bytes(memory)} ({format_bytes(share)} for a branch below Dask's "
                f"pause threshold): {room}{more_memory}, or make the branches smaller")
    return (f"The workers run {threads} threads each, so {threads} branches share a memory "
            f"limit of {format_bytes(memory)} ({format_bytes(share)} each below Dask's pause "
            f"threshold): {room}run fewer threads per worker with the same memory "
            "(Kubernetes: --threads-per-worker; dask worker --nthreads; a SLURM or PBS job's "
            "workers share its memory, so there more --processes do not help) and raise "
            f"branch_memory to the share that frees, {more_memory}, or make the branches "
            "smaller")


def branch_memory_advice(client: Client, budget: int | None) -> str:
    """:func:`layout_advice` for the client's workers (the one with the least memory per
    thread: the first a branch outgrows).

    Parameters
    ----------
    client : distributed.Client
    budget : int or None
        The fit's ``branch_memory`` in bytes.

    Returns
    -------
    str
    """
    workers = client.scheduler_info().get("workers", {}).values()
    shapes = [(int(w.get("nthreads") or 1), int(w.get("memory_limit") or 0)) for w in workers]
    if not shapes:
        return layout_advice(1, None, budget)
    limited = [s for s in shapes if s[1]] or shapes
    threads, memory = min(limited, key=lambda s: s[1] / s[0] if s[1] else float("inf"))
    return layout_advice(threads, memory, budget)


def _fit_branch_part(part: pd.DataFrame, spec: BranchSpec, entropy: int, branch: int,
                     n_features: int, has_weight: bool,
                     stage: tuple[str, dict] | None = None, crossfit: bool = False) -> tuple:
    """Fit one branch on its moved rows (sorted by global row id); with a ``stage``
    ``(url, storage_options)``, write it there and return its reference. With ``crossfit``
    also its calibration groups' held-out counts (:func:`ebf.branches.branch_crossfit`, by
    the rows' global ids), else None."""
    if len(part) and not (np.asarray(part.index) == branch).all():
        raise RuntimeError(f"the partition of branch {branch} holds rows of other branches.")
    if not part[ROW].is_monotonic_increasing:
        part = part.sort_values(ROW, kind="stable")
    A = np.ascontiguousarray(part[feature_columns(n_features)].to_numpy(dtype=np.float64))
    y = part[TARGET].to_numpy()
    w = part[WEIGHT].to_numpy(dtype=np.float64) if has_weight else None
    if crossfit:
        fitted, held, group = fit_calibrated_branch(spec, A, y, w, entropy, branch,
                                                    part[ROW].to_numpy(dtype=np.int64))
        counts = held, group
    else:
        fitted, counts = fit_branch(spec, A, y, w, entropy, branch), None
    if stage is not None:
        fitted = write_part(stage[0], branch, fitted, stage[1])
    return fitted, len(part), counts


def fit_branches(client: Client, parts: list[Future], spec: BranchSpec, entropy: int,
                 n_features: int, has_weight: bool, expected_rows: np.ndarray,
                 report: Report | None = None, stage: ModelStage | None = None,
                 crossfit: bool = False) -> tuple[list, tuple | None]:
    """One task per branch (``fit_branch``), keyed ``ebf-branch-<b>-<token>``.

    Parameters
    ----------
    client : distributed.Client
    parts : list of Future
        Branch ``b``'s rows (:func:`ebf.dask._shuffle.move_rows`).
    spec : BranchSpec
        ``estimator._branch_spec(n_classes)``.
    entropy : int
        The model's resolved seed; branch ``b`` uses ``(entropy, b)`` only.
    n_features : int
    has_weight : bool
    expected_rows : ndarray of shape (n_branches,)
        Rows every branch must have (trunk leaf sizes, sub-sample sizes): a check that
        no row was lost or duplicated on the way.
    report : callable ``report(done, total)``, optional
    stage : ebf.artifact.ModelStage, optional
        Every task writes its branch to this stage (:func:`ebf.artifact.write_part`).
    crossfit : bool, default=False
        Every task also fits its branch's calibration groups (``calibrate="auto"``).

    Returns
    -------
    branches : list
        The fitted branches in branch order: :class:`ebf.dask.live.LivePart` handles
        (each branch stays in the memory of the worker that fit it); with a ``stage``,
        their :class:`ebf.artifact.StoredPart` references.
    crossfit : tuple or None
        ``(held_out, group_trees, model_trees)`` over the branches, as the local
        ensemble's ``_fit_groups`` returns them (regression: integer PIT counts, summed
        exactly whatever the workers); None without ``crossfit``.
    """
    token = uuid.uuid4().hex[:12]
    where = None if stage is None else (stage.url, stage.storage_options)
    futures = [
        client.submit(_fit_branch_part, part, spec, int(entropy), b, n_features, has_weight,
                      where, crossfit, key=f"ebf-branch-{b}-{token}", pure=False,
                      retries=BRANCH_RETRIES)
        for b, part in enumerate(parts)
    ]
    if stage is None:  # the fitted parts stay where they were fit; the rest comes here
        fitted: list = [LivePart(client.submit(_take, f, 0, key=f"ebf-part-{b}-{token}",
                                               pure=False), b)
                        for b, f in enumerate(futures)]
        results = gather(client, [client.submit(_facts, f, key=f"ebf-facts-{b}-{token}",
                                                pure=False)
                                  for b, f in enumerate(futures)], report)
        wait_for(client, [p.future for p in fitted])
        del futures
    else:
        results = gather(client, futures, report)
        fitted = [r[0] for r in results]
    sizes = np.array([r[1] for r in results], dtype=np.int64)
    if not np.array_equal(sizes, np.asarray(expected_rows, dtype=np.int64)):
        raise RuntimeError(f"branches received {sizes.tolist()} rows, expected "
                           f"{np.asarray(expected_rows).tolist()}: rows were lost in the move.")
    logger.info("fitted %d branches (%d rows)", len(results), int(sizes.sum()))
    held_out = None
    if crossfit:  # regression: counts summed exactly; classification: the folds' rows
        total: Any = HeldOutCounts.empty() if spec.task == "regression" else []
        for r in results:
            total = total + r[2][0]
        held_out = (total, results[0][2][1] if results else spec.n_estimators,
                    spec.n_estimators)
    return fitted, held_out


def _take(result: tuple, i: int) -> Any:
    return result[i]


def _facts(result: tuple) -> tuple:
    """A branch task's result but the fitted branch: ``(None, rows, crossfit)``."""
    return None, result[1], result[2]


def _rows_of(part: pd.DataFrame, n_features: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(features, targets, global row ids)`` of a moved sub-sample's rows, in row order."""
    if not part[ROW].is_monotonic_increasing:
        part = part.sort_values(ROW, kind="stable")
    A = np.ascontiguousarray(part[feature_columns(n_features)].to_numpy(dtype=np.float64))
    return A, part[TARGET].to_numpy(), part[ROW].to_numpy(dtype=np.int64)


def _values_task(part: pd.DataFrame, fitted: Any, reader: Any, q: int, n_features: int,
                 task: str) -> np.ndarray:
    """Sub-sample ``q``'s :func:`ebf.subsample.part_values` on another's rows (the forest
    given, or read from the staged model's shard ``q``)."""
    A, y, _ = _rows_of(part, n_features)
    forest = fitted if reader is None else reader.load_part(q)
    return part_values(forest, A, y, task)


def _held_out_task(part: pd.DataFrame, n_features: int, task: str, *values: np.ndarray) -> Any:
    _, y, rows = _rows_of(part, n_features)
    return held_out_by_others(list(values), y, rows, task)


def held_out_by_subsamples(client: Client, parts: list[Future], fitted: list, reader: Any,
                           n_features: int, task: str, report: Report | None = None) -> tuple:
    """What the other sub-samples of an SSF say of every row (:func:`ebf.subsample.
    held_out_by_others`), on the workers: ``(held_out, group, model, "subsamples")`` for
    the model's ``_set_auto_map``, as the local SSF's fit returns it.

    Task ``(p, q)`` takes sub-sample ``p``'s moved rows and forest ``q`` (on its worker, or
    read from the stage by ``reader`` when the forests were written there) and returns its CDF
    at their targets (or its class probabilities): one number (or one per class) per row.
    Task ``p`` turns those into PIT counts (regression) or held-out probabilities.
    """
    token = uuid.uuid4().hex[:12]
    forests = [None] * len(fitted) if reader is not None else [f.future for f in fitted]
    held = []
    for p, part in enumerate(parts):
        values = [client.submit(_values_task, part, forests[q], reader, q, n_features, task,
                                key=f"ebf-heldout-{p}-{q}-{token}", pure=False)
                  for q in range(len(parts)) if q != p]
        held.append(client.submit(_held_out_task, part, n_features, task, *values,
                                  key=f"ebf-heldout-{p}-{token}", pure=False))
    return others_held_out(gather(client, held, report), task, len(parts))
