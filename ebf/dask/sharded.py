"""Predicting branch by branch: no process ever holds the whole model.

A model saved in format 2 (:mod:`ebf.artifact`) has a small head (encoder, trunk) and one
shard per branch (EBF) or sub-sample forest (SSF); a model fit on the cluster keeps the same
parts in its workers' memory (:class:`ebf.dask.live.LiveModel`: each part task then depends
on its part's future and runs where the part is, and a live SSF pools its forests in one
task per partition). :func:`predict_sharded` builds a lazy graph over the partitions of
``X``:

1. ``route``: every partition is encoded and routed by the head's trunk (the function the
   local EBF routes with, ``Trunk.apply``); its rows are cut into one piece per branch
   (an SSF sends every row to every sub-sample forest);
2. ``part``: one task per branch and group of partitions predicts that branch's pieces.
   It gets the branch from the worker's cache of loaded parts
   (:func:`ebf.dask.cache.cached_part`), which
   loads shard ``b`` alone (:meth:`ebf.artifact.ModelReader.load_part`: checked as a full
   load is) on first use. Groups of partitions run one after the other (:data:`GROUPS`;
   the next group is read once every part task of the last one is done), so a worker
   holds the routed rows of one group and loads each shard at most once per group;
3. ``assemble``: every partition's rows are put back in their input order, with their
   index, as the columns of :func:`ebf.frames.prediction_meta`.

The numbers are those of the local model's one-pass summary, bit for bit: a row's
summary depends only on its own mixture (EBF: its branch's mixture; SSF: the pooled
mixture of all sub-samples, concatenated in sub-sample order). The driver reads the
manifest and the head only. A worker holds the parts in its cache (:mod:`ebf.dask.cache`:
a share of its memory limit, emptied after a task whenever the process is above the share
at which Dask would spill or pause) plus the routed rows of a group and their outputs. A
group's partitions are read when the group starts (:func:`private_reads`), not as soon as
a worker is idle. A lost worker's tasks rerun elsewhere and load their shard again from
the model's URL, so every worker must be able to read it (a shared file system or an
object store).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from basics.mixture import GaussianMixture, summarize

from ..artifact import ModelReader
from ..frames import checked_levels, prediction_meta
from .cache import cached_part, relieve_memory, settle_part
from .graph import shared_model

logger = logging.getLogger(__name__)

#: Groups of partitions predicted one after the other by default: the routed rows of a
#: group are released once all parts have predicted them (fewer groups: fewer loads of
#: every part; more groups: fewer rows held at once).
GROUPS = 4
#: Fewest partitions in a group by default, so that a group's routing uses every worker
#: thread of a small cluster instead of one partition's task at a time.
MIN_GROUP = 8

# ----------------------------------------------------------------------------- jobs


class PredictJob:
    """What a part task computes per row for predictions: the summary block of a
    regressor's mixture (``mean, std, quantiles``; the quantiles recalibrated by the model's
    :class:`basics.pit.PITMap`, if given), or a classifier's probabilities (through its
    :class:`basics.class_calibration.ClassCalibrationMap`, if given: a map of each row alone).

    A job maps a part's (or, for an SSF, the pooled) output on some rows, and their targets
    (None for predictions), to one row of floats per row; :func:`sharded_blocks` runs it
    and joins an EBF's branches with :func:`join_rows`, or the job's own ``join``.
    ``pipelines.report.evaluate`` defines the evaluation job the same way.
    """

    def __init__(self, levels: np.ndarray, pit_map: Any = None, class_map: Any = None) -> None:
        # a recalibrated regressor's quantiles are its mixture's at the remapped levels
        self.levels = levels if pit_map is None else pit_map.inverse(levels)
        self.class_map = class_map

    def rows(self, output: Any, y: Any) -> np.ndarray:
        if isinstance(output, GaussianMixture):
            return self._block(*summarize(output, self.levels))
        return output if self.class_map is None else self.class_map(output)

    def part_rows(self, part: Any, A: np.ndarray, y: Any) -> np.ndarray:
        """:meth:`rows` of one part's (an EBF branch's) output on its rows ``A``: a
        regressor's summary read off the part in one pass (``summarize_mixture``)."""
        if hasattr(part, "classes_"):
            return self.rows(part.predict_proba(A), y)
        return self._block(*part.summarize_mixture(A, self.levels))

    @staticmethod
    def _block(mean: np.ndarray, std: np.ndarray, q: np.ndarray) -> np.ndarray:
        return np.column_stack([mean, std, q.reshape(len(mean), -1)])


def part_output(part: Any, A: np.ndarray) -> Any:
    """A part's raw output on its rows: class probabilities or the predictive mixture."""
    return part.predict_proba(A) if hasattr(part, "classes_") else part.predict_distribution(A)


# ----------------------------------------------------------------------------- task bodies


class _Read:
    """The tasks that make one partition of a collection, run inside the task that uses
    it: so the partition is read when that task runs (after the previous group), not when
    a worker happens to be idle."""

    def __init__(self, graph: dict, key: Any) -> None:
        self.graph, self.key = graph, key

    def __dask_tokenize__(self) -> Any:
        return ("ebf-read", self.key)

    def run(self) -> pd.DataFrame:
        from dask.local import get_sync

        return get_sync(self.graph, self.key)


def private_reads(parts: list) -> list:
    """Per delayed partition (``X.to_delayed()``), a :class:`_Read` of its tasks if no
    other partition shares any of them (a file read, a projection, a filter), else the
    partition itself (a cumulative sum, a shuffle: its tasks stay in the graph, run once;
    a persisted collection: its data is on the workers already).
    """
    from dask.core import get_dependencies

    graph: dict = {}
    for g in {id(g): g for g in (p.__dask_graph__() for p in parts)}.values():
        graph.update(dict(g))
    subgraphs = []
    uses: dict = {}
    for p in parts:
        sub, stack = {}, [p.key]
        while stack:
            k = stack.pop()
            if k not in sub:
                sub[k] = graph[k]
                stack.extend(get_dependencies(graph, k))
        subgraphs.append(sub)
        for k in sub:
            uses[k] = uses.get(k, 0) + 1
    return [_Read(sub, p.key) if all(uses[k] == 1 for k in sub) and not _holds_data(sub)
            else p for p, sub in zip(parts, subgraphs, strict=True)]


def _holds_data(graph: dict) -> bool:
    """Whether a partition's tasks use data already on the cluster (a persisted collection's
    futures): there is no read to defer, and a task cannot run them in its own process."""
    from distributed import Future

    return any(isinstance(v, Future) for v in graph.values())


def _route(part: Any, head: Any, n_parts: int, target: str | None,
           after: Any = None) -> tuple:
    """Encode a partition once and cut it into one piece ``(positions, rows, y)`` per part.

    ``part`` is the partition, or its :class:`_Read`. With a ``target``, ``y`` holds its
    values (missing ones too: the job decides what a row without a target gets). ``after``
    is the previous group's completion, only waited for.
    """
    if isinstance(part, _Read):
        part = part.run()
    y = None if target is None else part[target].to_numpy()
    A = head.encoder.transform(part, caller=type(head.estimator).__name__,
                               allow_nan=getattr(head.estimator, "_missing_values", False))
    if head.trunk is None:  # SSF: every row to every sub-sample forest
        every = (np.arange(A.shape[0]), A, y)
        return part.index, [every] * n_parts
    leaf = head.trunk.apply(A) if A.shape[0] else np.empty(0, np.int64)
    order = np.argsort(leaf, kind="stable")
    bounds = np.searchsorted(leaf[order], np.arange(n_parts + 1))
    pieces = []
    for b in range(n_parts):
        pos = order[bounds[b]:bounds[b + 1]]
        pieces.append((pos, A[pos], None if y is None else y[pos]))
    return part.index, pieces


def _done(*ticks: Any) -> None:
    return None


def _piece(routed: tuple, b: int) -> tuple:
    return routed[1][b]


def _part_task(source: Any, b: int, job: Any, pooled: bool, *pieces: tuple) -> list:
    """Part ``b`` on each piece: the job's rows (EBF), or the raw output to pool (SSF).
    ``source`` is the saved model's reader (the part comes from the worker's cache of
    loaded shards), or the part itself (a :class:`ebf.dask.live.LiveModel`'s future)."""
    if not any(len(p[0]) for p in pieces):
        return [None] * len(pieces)
    saved = isinstance(source, ModelReader)
    part = cached_part(source, b) if saved else source
    out = []
    for _, A, y in pieces:
        if A.shape[0] == 0:
            out.append(None)
            continue
        out.append(part_output(part, A) if pooled else job.part_rows(part, A, y))
    if saved:
        settle_part(source, b, part)
        del part
        relieve_memory()
    return out


def _pooled_task(routed: tuple, job: Any, pool: Any, *parts: Any) -> tuple:
    """``(index, block, None)`` of one partition of an SSF whose forests are all here (a
    :class:`ebf.dask.live.LiveModel`'s): the job's rows of the pooled outputs, in one task."""
    index, pieces = routed
    if len(index) == 0:
        return index, None, None
    _, A, y = pieces[0]
    return index, job.rows(pool([part_output(part, A) for part in parts]), y), None


def _take(outputs: list, j: int) -> Any:
    return outputs[j]


def _layout(routed: tuple) -> tuple:
    """What reassembling a partition needs of its routing, without the feature rows:
    ``(index, positions of every piece, targets of the rows)``."""
    index, pieces = routed
    y = pieces[0][2] if pieces else None
    return index, [pos for pos, _, _ in pieces], y


def _assemble(layout: tuple, job: Any, pool: Any, *outputs: Any) -> tuple:
    """``(index, block, branch)`` of one partition, rows in input order."""
    index, positions, y = layout
    n = len(index)
    if pool is not None:  # SSF: the ensemble pools its forests' outputs
        block = job.rows(pool(outputs), y) if n else None
        branch = None
    else:
        branch = np.empty(n, np.int64)
        pieces = []
        for b, (pos, rows) in enumerate(zip(positions, outputs, strict=True)):
            branch[pos] = b
            if rows is not None:
                pieces.append((pos, rows))
        block = getattr(job, "join", join_rows)(pieces, n)
    return index, block, branch


def join_rows(pieces: list, n: int) -> np.ndarray | None:
    """The block of ``n`` rows of a partition from its branches' ``(positions, rows)``: each
    branch's rows of job output at their positions (NaN where no branch predicted: only a
    corrupt trunk routes a row nowhere); None without pieces. A job whose rows are not
    arrays joins them with its own ``join(pieces, n)``."""
    if not pieces:
        return None
    block = np.full((n, pieces[0][1].shape[1]), np.nan)
    for pos, rows in pieces:
        block[pos] = rows
    return block


def block_frame(assembled: tuple, meta: pd.DataFrame, classes: Any) -> pd.DataFrame:
    """The prediction frame (columns of ``meta``) of an assembled ``(index, block, branch)``:
    a block of :class:`PredictJob` rows (or its first columns), in input order."""
    index, block, branch = assembled
    if block is None:  # no rows
        return meta.set_axis(index[:0])
    cols: dict[str, Any] = {}
    if classes is not None:
        for j, c in enumerate(classes):
            cols[f"proba_{c}"] = block[:, j]
        cols["predicted"] = classes[np.argmax(block, axis=1)]
    else:
        for j, name in enumerate(meta.columns[: block.shape[1]]):
            cols[name] = block[:, j]
    if "branch" in meta.columns:
        cols["branch"] = branch
    return pd.DataFrame({k: pd.Series(v, index=index, dtype=meta[k].dtype)
                         for k, v in cols.items()}, index=index)


# ----------------------------------------------------------------------------- the graph


def sharded_blocks(reader: Any, X: Any, job: Any, target: str | None = None,
                   group: int | None = None) -> list:
    """Per partition of ``X``, a lazy ``(index, block, branch)``: the job's rows for every
    row (input order), each part predicted from its own shard, or where it lives
    (``branch``: the part of every row of an EBF, None for an SSF).

    Parameters
    ----------
    reader : ebf.artifact.ModelReader or ebf.dask.live.LiveModel
        A format 2 EBF or SSF (:func:`ebf.artifact.open_model`), or a model whose parts
        are on the workers (every part task then depends on its part's future, and runs
        where it is).
    X : dask.dataframe.DataFrame
        The model's features by name (and ``target`` if given).
    job : object
        ``job.rows(output, y) -> ndarray (n_rows, k)`` and ``job.part_rows(part, A, y)``
        (:class:`PredictJob`).
    target : str, optional
        Column passed to the job as ``y`` (missing values too).
    group : int, optional
        Partitions per group (default: a :data:`GROUPS`-th of them, at least
        :data:`MIN_GROUP`). Groups run one after
        the other, parts one after the other within a group; an EBF part predicts its rows
        of a group in one task, an SSF part one partition per task (a live SSF: one task
        per partition with all its forests, which Dask brings to it, so that the forests'
        mixtures are pooled where they are made).

    Returns
    -------
    list of dask.delayed.Delayed
    """
    from dask import delayed

    head = reader.head()
    head.encoder.transform(X._meta, caller=type(head.estimator).__name__)  # schema first
    pooled = head.trunk is None
    n_parts = head.n_parts
    shared_head = shared_model(head)
    live = not isinstance(reader, ModelReader)
    # a saved model's parts come from its shards; a live model's are its futures: a part
    # task runs on the worker holding its part
    sources = list(reader.parts) if live else [shared_model(reader)] * n_parts
    parts = X.to_delayed()
    reads = private_reads(parts)  # a group's partitions are read when the group starts
    token = uuid.uuid4().hex[:12]
    step = max(1, int(group or max(-(-len(parts) // GROUPS), MIN_GROUP)))
    groups = [list(range(a, min(a + step, len(parts)))) for a in range(0, len(parts), step)]
    routed: list[Any] = [None] * len(parts)
    assembled: list[Any] = [None] * len(parts)
    outputs: list[list[Any]] = [[None] * n_parts for _ in parts]
    after = None  # groups one after the other: a group is read once the last one is done
    for g in groups:
        for i in g:
            routed[i] = delayed(_route, pure=True)(reads[i], shared_head, n_parts, target, after)
        ticks = []
        if pooled and live:  # every part where its partition is: no mixture moves
            for i in g:
                assembled[i] = delayed(_pooled_task, pure=True)(
                    routed[i], job, head.estimator._pool, *sources,
                    dask_key_name=f"ebf-pooled-{token}-{i}")
                ticks.append(delayed(_done, pure=True)(assembled[i]))
            after = delayed(_done, pure=True)(*ticks)
            continue
        for b in range(n_parts):
            if pooled:  # every row goes to every part: a task per partition
                tasks = [(delayed(_part_task, pure=True)(
                    sources[b], b, job, pooled, delayed(_piece, pure=True)(routed[i], b),
                    dask_key_name=f"ebf-part-{token}-{b}-{i}"), [i]) for i in g]
            else:
                pieces = [delayed(_piece, pure=True)(routed[i], b) for i in g]
                tasks = [(delayed(_part_task, pure=True)(
                    sources[b], b, job, pooled, *pieces,
                    dask_key_name=f"ebf-part-{token}-{b}-{g[0]}"), g)]
            for task, rows in tasks:
                ticks.append(delayed(len, pure=True)(task))  # tiny: no output moves for it
                for j, i in enumerate(rows):
                    outputs[i][b] = delayed(_take, pure=True)(task, j)
        after = delayed(_done, pure=True)(*ticks)
    logger.info("sharded graph: %d partition(s), %d part(s) of %s", len(parts), n_parts,
                reader.url or "the workers")
    pool = head.estimator._pool if pooled else None
    return [assembled[i] if assembled[i] is not None else
            delayed(_assemble, pure=True)(delayed(_layout, pure=True)(routed[i]), job, pool,
                                          *outputs[i])
            for i in range(len(parts))]


def predict_sharded(reader: Any, X: Any, quantiles: Sequence[float],
                    group: int | None = None) -> Any:
    """Lazy predictions of a saved ensemble, each branch predicted from its own shard (or
    where it lives).

    Parameters
    ----------
    reader : ebf.artifact.ModelReader or ebf.dask.live.LiveModel
        A format 2 EBF or SSF (:func:`ebf.artifact.open_model`), or a model whose parts
        are on the workers.
    X : dask.dataframe.DataFrame
        Features by name (extra columns are ignored).
    quantiles : sequence of float
        Levels of the quantile columns (regressors).
    group : int, optional
        As in :func:`sharded_blocks`.

    Returns
    -------
    dask.dataframe.DataFrame
        The columns of :func:`ebf.frames.prediction_meta`, with the index, partitions and
        row order of ``X``.
    """
    from dask import delayed

    levels = checked_levels(quantiles)
    head = reader.head()
    meta = prediction_meta(head.classes, head.trunk is not None, levels)
    job = PredictJob(levels, head.recalibration, head.class_calibration)
    blocks = sharded_blocks(reader, X, job, group=group)
    frames = [delayed(block_frame, pure=True)(b, meta, head.classes) for b in blocks]
    return frame_of_parts(frames, meta, X)


def frame_of_parts(frames: list, meta: pd.DataFrame, X: Any) -> Any:
    """A Dask DataFrame of lazy per-partition ``frames`` of ``X`` (from ``X.to_delayed()``),
    with ``X``'s divisions. ``to_delayed`` may combine the small partitions of a Parquet
    dataset whose divisions are unknown: those stay unknown."""
    import dask.dataframe as dd

    divisions = X.divisions if len(X.divisions) == len(frames) + 1 else None
    return dd.from_delayed(frames, meta=meta, divisions=divisions, verify_meta=False)


# ----------------------------------------------------------------------------- choosing


#: A sharded SSF is broadcast (every worker holds it whole) when its files take at most
#: this share of the smallest worker's memory limit; otherwise it is predicted by shards.
BROADCAST_FRACTION = 0.25
#: The broadcast bound when the workers have no memory limit.
BROADCAST_BYTES = 2 * 2**30


def worker_memory_limits(client: Any) -> list[int]:
    """Memory limit of every worker of ``client`` (0: no limit)."""
    info = client.scheduler_info()
    return [int(w.get("memory_limit") or 0) for w in info.get("workers", {}).values()]


def choose_strategy(reader: ModelReader, client: Any) -> str:
    """``"broadcast"`` or ``"sharded"`` for predicting with a saved model on ``client``.

    An EBF is always predicted by shards: each branch is loaded once, by the worker its
    rows go to, and no worker ever holds more than its cache of branches. An SSF (every
    row needs every sub-sample forest) is broadcast when its files take at most
    :data:`BROADCAST_FRACTION` of the smallest worker memory limit (at most
    :data:`BROADCAST_BYTES` when no limit is set): every worker loads it and every
    partition is one task, instead of every forest's mixture of every row moving to be
    pooled; sharded otherwise. A model without shards (format 1, a single forest) is
    broadcast. All give the same bits.

    Parameters
    ----------
    reader : ebf.artifact.ModelReader
    client : distributed.Client

    Returns
    -------
    str
    """
    if reader.format_version == 1 or reader.n_parts == 0:
        return "broadcast"
    if reader.head().trunk is not None:
        logger.info("an EBF of %d bytes in %d shards: sharded prediction", reader.nbytes,
                    reader.n_parts)
        return "sharded"
    limits = worker_memory_limits(client)
    bound = BROADCAST_FRACTION * min(limits) if limits and min(limits) > 0 else BROADCAST_BYTES
    strategy = "broadcast" if reader.nbytes <= bound else "sharded"
    logger.info("model of %d bytes in %d shards, worker memory limits %s: %s prediction",
                reader.nbytes, reader.n_parts, limits, strategy)
    return strategy
