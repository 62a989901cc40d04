"""A local model in a Dask graph: one key every task shares, or the rows brought to it.

A model enters a graph once, as one ``dask.delayed`` key (:func:`shared_model`) every
partition task depends on: workers fetch it from each other, and if the worker holding a
copy dies the scheduler recomputes that key from the graph like any lost result, so a
killed worker costs a retry, never a hang or a lost-dependency error (data put on workers
with ``scatter`` cannot be recomputed). Small rows come to a model held in this process
instead (:func:`small_frame`). :func:`map_shared` maps a function over futures with
arguments every task shares, each entering the graph once.
"""

from __future__ import annotations

import uuid
from typing import Any

__all__ = ["GATHER_BYTES", "in_threads", "input_partitions", "map_shared", "shared_model",
           "small_frame"]

#: Rows up to this size (as float64 columns) come to a model held in this process instead of
#: the model going to the workers (:func:`small_frame`).
GATHER_BYTES = 256 * 2**20


def small_frame(frame: Any, client: Any = None, gather_bytes: int = GATHER_BYTES) -> Any:
    """``frame`` computed into this process if it is small, else None.

    A job that runs a model held in this process on a Dask DataFrame either sends the model
    to the workers (in the graph, one copy per worker: hundreds of MB for a Mondrian EBF)
    or brings the rows to the model. Rows of at most ``gather_bytes`` (rows x columns x 8
    bytes, counted in one pass) come here: a calibration slice or a holdout of a few
    thousand rows against a model of hundreds of MB.

    Parameters
    ----------
    frame : dask.dataframe.DataFrame
    client : distributed.Client, optional
    gather_bytes : int, default=GATHER_BYTES

    Returns
    -------
    pandas.DataFrame or None
    """
    def compute(collection: Any) -> Any:
        return collection.compute() if client is None else client.compute(collection).result()

    n_rows = int(compute(frame.shape[0]))
    if n_rows * frame.shape[1] * 8 > gather_bytes:
        return None
    return compute(frame)


def in_threads(fn: Any, frame: Any) -> list:
    """``[fn(block) for block in row blocks of frame]``, the blocks in this process's threads.

    Rows that came to a model held in this process (:func:`small_frame`) would otherwise be
    predicted in one thread while the cluster's cores wait; the kernels release the GIL, so
    blocks of them use every core here. For results that add up over rows (counts, sums).

    Parameters
    ----------
    fn : callable
        ``fn(pandas.DataFrame) -> result`` of one block of rows.
    frame : pandas.DataFrame

    Returns
    -------
    list
        One result per block, in row order (one block for a frame without rows).
    """
    from basics.predictive import row_blocks
    from basics.threads import thread_map

    blocks = row_blocks(len(frame), -1) or [slice(0, 0)]
    return thread_map(lambda rows: fn(frame.iloc[rows]), blocks, -1)


def shared_model(model: Any) -> Any:
    """``model`` as one key of a Dask graph, recomputable if the worker holding it dies.

    Parameters
    ----------
    model : object
        Any picklable object (a fitted local model).

    Returns
    -------
    dask.delayed.Delayed
        Pass it to ``map_partitions`` or ``dask.delayed`` calls in place of the model: the
        graph holds the pickled model once, each task holds its key.

    Examples
    --------
    >>> from dask import delayed
    >>> shared = shared_model({"scale": 2.0})
    >>> delayed(lambda m, x: m["scale"] * x)(shared, 3.0).compute()
    6.0
    """
    from dask import delayed

    return delayed(model, name=f"ebf-model-{uuid.uuid4().hex[:12]}", pure=True)


def input_partitions() -> Any:
    """A context in which Dask keeps a dataset's partitions as they are read.

    Dask's optimizer fuses the partitions of a Parquet dataset read for a few of its columns
    into fewer, larger ones (its "tune" stage), by a factor that depends on the columns
    read. A prediction job keeps one task per input partition instead: its memory is bounded
    by one partition, it writes one output file per input file, and its partitions are the
    same whatever columns it reads (``ebf predict`` and ``ebf evaluate --predictions`` write
    the same files). Build and compute the graph inside it.
    """
    import dask

    return dask.config.set({"optimization.tune.active": False})


def _value(value: Any) -> Any:
    return value


def map_shared(client: Any, fn: Any, *iterables: Any, key: Any = None, pure: bool = False,
               **shared: Any) -> list:
    """``client.map(fn, *iterables, **shared)``, each shared argument one computed future.

    ``Client.map`` (distributed 2026.7) puts a keyword argument of more than 100 kB in the
    graph as a node keyed by the argument's name, with no priority: the scheduler's
    assertion on it fails and the tasks never run (a trunk's bin edges reach that size
    from about 50 features). Here every keyword argument enters the graph once, as the
    result of a task of its own (recomputed from the graph like any lost result if its
    worker dies, unlike ``scatter``), and the mapped tasks depend on it.

    Parameters
    ----------
    client : distributed.Client
    fn : callable
    *iterables : sequences
        Mapped over, as in ``Client.map``.
    key : list of str, optional
        The tasks' keys.
    pure : bool, default=False
    **shared
        Arguments every task gets, as keyword arguments.

    Returns
    -------
    list of distributed.Future
    """
    import warnings

    token = uuid.uuid4().hex[:12]
    with warnings.catch_warnings():
        # the value is in the graph once, by design: Dask's advice not to is no news
        warnings.filterwarnings("ignore", message="Sending large graph", category=UserWarning)
        futures = {name: client.submit(_value, value, pure=False,
                                       key=f"ebf-shared-{name}-{token}")
                   for name, value in shared.items()}
    options = {} if key is None else {"key": key}
    return client.map(fn, *iterables, pure=pure, **options, **futures)
