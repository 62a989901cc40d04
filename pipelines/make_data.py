"""Synthetic data at scale: Friedman #1 with heteroskedastic noise, written by Dask in parallel.

The regression function is Friedman's #1 (Friedman 1991; scikit-learn's ``make_friedman1``),
on features ``x0 .. x{p-1}`` drawn i.i.d. ``U(0, 1)``; only the first five matter::

    f(x) = 10 sin(pi x0 x1) + 20 (x2 - 0.5)^2 + 10 x3 + 5 x4

(the paper's ``x1 .. x5`` are our ``x0 .. x4``). Unlike the classic version the noise is
**heteroskedastic**, its standard deviation growing linearly with ``x0``::

    y = f(x) + sd(x0) * eps,   sd(x0) = 0.5 + 2 x0,   eps ~ N(0, 1)

so ``sd`` runs from 0.5 to 2.5 and the noise variance for ``x0 > 0.5`` is about 3.8 times the
one for ``x0 < 0.5`` (``E[sd^2] = 49/12 vs 13/12``): a probabilistic model has to widen its
intervals with ``x0``, a homoskedastic one cannot.

Classification (``task="classification"``): the same ``z = f(x) + sd(x0) * eps`` cut into
``n_classes`` ordered classes ``0 .. n_classes - 1`` at fixed thresholds, the ``k / n_classes``
quantiles of ``z`` (computed once from a fixed reference sample, the same for every seed,
stored in the metadata), so the classes are about equally frequent and the label noise, too,
grows with ``x0``.

Reproducibility: partition ``i`` is drawn from ``SeedSequence(random_state, spawn_key=(i,))``
(features first, as a ``(p, n)`` block, then ``eps``), so the files depend on ``rows``,
``partition_rows``, ``n_features`` and ``random_state`` only, never on the number of workers
or the order tasks run in; the regression and classification datasets of one seed share
their features.
"""

from __future__ import annotations

import json
import logging
import math
import os
import posixpath
import shutil
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import distributed
import fsspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from cluster import current_client
from ebf.dask.client import wait_for
from pipelines.io import atomic_output_dir, part_name
from pipelines.sizing import DEFAULT_PARTITION_ROWS

__all__ = [
    "FRIEDMAN_MIN_FEATURES",
    "DatasetSizeError",
    "GeneratedDataset",
    "check_size",
    "friedman_mean",
    "friedman_noise_sd",
    "friedman_partition",
    "make_friedman",
]

logger = logging.getLogger(__name__)

#: Friedman #1 uses the first five features; the others are pure noise.
FRIEDMAN_MIN_FEATURES = 5
#: Schema-metadata key of the generated files (a JSON object: generator, task, sizes, seed...).
METADATA_KEY = "ebf.dataset"
_TASKS = ("regression", "classification")
_REFERENCE_ROWS = 1 << 20
_REFERENCE_SEED = 20_160_501


#: Bytes one value (a row's feature or target) takes in a task while its partition is drawn
#: and written: the float64 itself and about as much again in Parquet's write buffers.
MEMORY_PER_VALUE = 16
#: Bytes one value takes on disk: random float64s do not compress.
DISK_PER_VALUE = 8
#: Bytes the driver and the scheduler hold per partition (a future, a key, a task state).
MEMORY_PER_PARTITION = 4096
#: Most partitions (files and tasks) of one dataset: a graph of more is slow to schedule
#: and a folder of more slow to list, and 100,000 partitions of 100 rows are 10M rows.
MAX_PARTITIONS = 100_000
#: What the options are called in messages (the CLI passes its own: ``--rows``...).
_NAMES = {"rows": "rows", "n_features": "n_features", "partition_rows": "partition_rows"}


def free_memory() -> int:
    """Bytes this process may still allocate: the machine's available memory, or less under
    an address-space limit (``ulimit -v``, a batch system's memory limit)."""
    import psutil

    free = int(psutil.virtual_memory().available)
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, AttributeError, OSError):  # no such limit on this platform
        return free
    if limit == resource.RLIM_INFINITY:
        return free
    return max(0, min(free, limit - psutil.Process().memory_info().vms))


class DatasetSizeError(ValueError):
    """A dataset that cannot be made here: more than the free memory or disk."""


def _size(n: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == "PB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def _existing_folder(out_dir: str) -> str | None:
    """The nearest existing local folder at or above ``out_dir`` (None for a URL)."""
    if "://" in out_dir and not out_dir.startswith("file://"):
        return None
    path = os.path.abspath(out_dir.removeprefix("file://"))
    while not os.path.isdir(path):
        up = os.path.dirname(path)
        if up == path:
            return None
        path = up
    return path


def check_size(out_dir: str | os.PathLike[str], rows: int, n_features: int,
               partition_rows: int, *, worker_memory: int | None = None,
               names: Mapping[str, str] | None = None) -> None:
    """Refuse, before any work, a dataset that cannot be made here.

    The estimates: one partition takes ``min(partition_rows, rows) x (n_features + 1) x``
    :data:`MEMORY_PER_VALUE` bytes in the task that writes it, which must fit in
    ``worker_memory``; every partition :data:`MEMORY_PER_PARTITION` bytes in the driver,
    which must fit in this machine's free memory; the files ``rows x (n_features + 1) x``
    :data:`DISK_PER_VALUE` bytes, and one file per partition, which must fit in the free
    space and the free inodes of the file system of a local ``out_dir`` (not checked for a
    URL).

    Parameters
    ----------
    out_dir : str or path-like
    rows, n_features, partition_rows : int
        As for :func:`make_friedman`.
    worker_memory : int, optional
        The memory a task may use (a worker's memory limit, or the free memory of this
        machine for a local cluster yet to start); None: not checked.
    names : mapping of str to str, optional
        What ``rows``, ``n_features`` and ``partition_rows`` are called in the message.

    Raises
    ------
    DatasetSizeError
        (a ``ValueError``) naming the option, the estimate, what is free and the fix.

    Examples
    --------
    >>> import tempfile
    >>> check_size(tempfile.mkdtemp(), 1000, 10, 100)
    >>> check_size(tempfile.mkdtemp(), 10**13, 10, 10**9)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    pipelines.make_data.DatasetSizeError: rows=10,000,000,000,000 x 11 columns ... 880.0 TB ...
    """
    name = {**_NAMES, **(names or {})}
    columns = n_features + 1
    n_partitions = -(-rows // partition_rows)
    shape = f"{name['rows']}={rows:,} x {columns:,} columns"
    if n_partitions > MAX_PARTITIONS:
        raise DatasetSizeError(
            f"{shape} in partitions of {name['partition_rows']}={partition_rows:,} make "
            f"{n_partitions:,} partitions (a file and a task each), more than the "
            f"{MAX_PARTITIONS:,} a dataset may have; raise {name['partition_rows']} to at "
            f"least {-(-rows // MAX_PARTITIONS):,}")
    free = free_memory()
    driver = n_partitions * MEMORY_PER_PARTITION
    if driver > free:
        raise DatasetSizeError(
            f"{shape} in {n_partitions:,} partitions of {name['partition_rows']}="
            f"{partition_rows:,} need about {_size(driver)} of memory to track the tasks, "
            f"but {_size(free)} is free; raise {name['partition_rows']} or lower "
            f"{name['rows']}")
    task = min(partition_rows, rows) * columns * MEMORY_PER_VALUE
    if worker_memory is not None and task > worker_memory:
        raise DatasetSizeError(
            f"{name['partition_rows']}={min(partition_rows, rows):,} rows x {columns:,} columns "
            f"({name['n_features']}={n_features:,}) need about {_size(task)} of memory per "
            f"partition, but a task has {_size(worker_memory)}; lower "
            f"{name['partition_rows']} or {name['n_features']}")
    folder = _existing_folder(os.fspath(out_dir))
    if folder is None:
        return
    disk = rows * columns * DISK_PER_VALUE
    room = shutil.disk_usage(folder)
    if disk > room.free:
        raise DatasetSizeError(
            f"{shape} ({name['n_features']}={n_features:,}) make about {_size(disk)} of "
            f"Parquet, but the file system of {folder} has {_size(room.free)} free; lower "
            f"{name['rows']} or {name['n_features']}, or write to a larger disk")
    vfs = os.statvfs(folder) if hasattr(os, "statvfs") else None
    if vfs is not None and vfs.f_files and n_partitions + 1 > vfs.f_favail:  # 0: no limit
        raise DatasetSizeError(
            f"{shape} in partitions of {name['partition_rows']}={partition_rows:,} make "
            f"{n_partitions + 1:,} files, but the file system of {folder} has room for "
            f"{vfs.f_favail:,} more; raise {name['partition_rows']}")


@dataclass(frozen=True)
class GeneratedDataset:
    """What :func:`make_friedman` wrote.

    Attributes
    ----------
    path : str
        The output directory (as given).
    rows : int
    n_partitions : int
        Number of files, ``part.000000.parquet`` ...
    columns : tuple of str
        ``("x0", ..., "x{p-1}", "y")``.
    target : str
        ``"y"``.
    task : str
    metadata : dict of str to str
        The key/values stored in every file's Parquet schema metadata.
    """

    path: str
    rows: int
    n_partitions: int
    columns: tuple[str, ...]
    target: str
    task: str
    metadata: dict[str, str] = field(default_factory=dict)


def friedman_mean(x: np.ndarray) -> np.ndarray:
    """Friedman #1 regression function ``f`` of the rows (or, transposed, columns) of ``x``.

    Parameters
    ----------
    x : ndarray of shape (n, p) with p >= 5
        Features in [0, 1]; only the first five columns are used.

    Returns
    -------
    ndarray of shape (n,)
        ``10 sin(pi x0 x1) + 20 (x2 - 0.5)^2 + 10 x3 + 5 x4``.

    Examples
    --------
    >>> import numpy as np
    >>> float(friedman_mean(np.full((1, 5), 0.5))[0])  # 10 sin(pi/4) + 0 + 5 + 2.5
    14.571067811865476
    """
    x = np.asarray(x, dtype=np.float64)
    return _mean_of_columns(x[:, 0], x[:, 1], x[:, 2], x[:, 3], x[:, 4])


def _mean_of_columns(
    x0: np.ndarray, x1: np.ndarray, x2: np.ndarray, x3: np.ndarray, x4: np.ndarray
) -> np.ndarray:
    return 10.0 * np.sin(np.pi * x0 * x1) + 20.0 * (x2 - 0.5) ** 2 + 10.0 * x3 + 5.0 * x4


def friedman_noise_sd(x0: np.ndarray) -> np.ndarray:
    """Noise standard deviation ``0.5 + 2 x0`` of the heteroskedastic Friedman data.

    Parameters
    ----------
    x0 : ndarray
        The first feature, in [0, 1].

    Returns
    -------
    ndarray
        Same shape as ``x0``, values in [0.5, 2.5].

    Examples
    --------
    >>> import numpy as np
    >>> friedman_noise_sd(np.array([0.0, 1.0])).tolist()
    [0.5, 2.5]
    """
    return 0.5 + 2.0 * np.asarray(x0, dtype=np.float64)


def _draw(rng: np.random.Generator, n_rows: int, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """Features ``(p, n)`` (one contiguous row per column) and the noisy signal ``z``."""
    x = rng.random((n_features, n_rows))
    eps = rng.standard_normal(n_rows)
    z = _mean_of_columns(x[0], x[1], x[2], x[3], x[4]) + friedman_noise_sd(x[0]) * eps
    return x, z


@lru_cache(maxsize=16)
def _class_thresholds(n_classes: int) -> tuple[float, ...]:
    """The ``k / n_classes`` quantiles of ``z``, from a fixed reference sample (any seed)."""
    rng = np.random.default_rng(np.random.SeedSequence(_REFERENCE_SEED))
    _, z = _draw(rng, _REFERENCE_ROWS, FRIEDMAN_MIN_FEATURES)
    levels = np.arange(1, n_classes) / n_classes
    return tuple(float(t) for t in np.quantile(z, levels))


def _check_args(rows: int, n_features: int, task: str, n_classes: int, partition_rows: int) -> None:
    for name, value, low in (
        ("rows", rows, 1),
        ("n_features", n_features, FRIEDMAN_MIN_FEATURES),
        ("n_classes", n_classes, 2),
        ("partition_rows", partition_rows, 1),
    ):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            extra = " (Friedman #1 uses x0..x4)" if name == "n_features" else ""
            raise ValueError(f"{name} must be an integer >= {low}{extra}, got {value!r}")
    if task not in _TASKS:
        raise ValueError(f"task must be one of {_TASKS}, got {task!r}")


def _partition_table(
    partition: int,
    n_rows: int,
    n_features: int,
    task: str,
    n_classes: int,
    entropy: int,
) -> pa.Table:
    rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(partition,)))
    x, z = _draw(rng, n_rows, n_features)
    columns: dict[str, np.ndarray] = {f"x{j}": x[j] for j in range(n_features)}
    if task == "regression":
        columns["y"] = z
    else:
        thresholds = np.asarray(_class_thresholds(n_classes))
        columns["y"] = np.searchsorted(thresholds, z, side="right").astype(np.int64)
    return pa.table(columns)


def friedman_partition(
    partition: int,
    n_rows: int,
    *,
    n_features: int = 10,
    task: str = "regression",
    n_classes: int = 3,
    random_state: int = 0,
) -> pd.DataFrame:
    """One partition of the Friedman data in memory, exactly as :func:`make_friedman` writes it.

    Parameters
    ----------
    partition : int
        Partition index ``i`` (seeds ``SeedSequence(random_state, spawn_key=(i,))``).
    n_rows : int
        Rows of this partition.
    n_features, task, n_classes, random_state
        As in :func:`make_friedman`.

    Returns
    -------
    pandas.DataFrame
        Columns ``x0 .. x{p-1}`` (float64) and ``y`` (float64, or int64 classes).

    Examples
    --------
    >>> df = friedman_partition(0, 1000, n_features=5)
    >>> list(df.columns), df.shape
    (['x0', 'x1', 'x2', 'x3', 'x4', 'y'], (1000, 6))
    """
    _check_args(n_rows, n_features, task, n_classes, 1)
    table = _partition_table(partition, n_rows, n_features, task, n_classes, random_state)
    return table.to_pandas()


def _write_partition(
    partition: int,
    n_rows: int,
    *,
    directory: str,
    n_features: int,
    task: str,
    n_classes: int,
    entropy: int,
    metadata: dict[str, str],
    storage_options: dict[str, Any] | None,
) -> int:
    """Worker task: draw partition ``partition`` and write it into ``directory``."""
    table = _partition_table(partition, n_rows, n_features, task, n_classes, entropy)
    table = table.replace_schema_metadata({k.encode(): v.encode() for k, v in metadata.items()})
    fs, path = fsspec.core.url_to_fs(directory, **(storage_options or {}))
    # no makedirs: if the driver removed the directory (failure elsewhere), this fails cleanly
    with fs.open(posixpath.join(path, part_name(partition)), "wb") as f:
        pq.write_table(table, f)
    return n_rows


def make_friedman(
    out_dir: str | os.PathLike[str],
    rows: int,
    *,
    n_features: int = 10,
    task: str = "regression",
    n_classes: int = 3,
    partition_rows: int = DEFAULT_PARTITION_ROWS,
    random_state: int | None = 0,
    client: distributed.Client | None = None,
    overwrite: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> GeneratedDataset:
    """Write the heteroskedastic Friedman #1 dataset as partitioned Parquet, in parallel.

    One Dask task per partition draws its rows (seeded by the partition index, see the
    module docstring) and writes ``part.NNNNNN.parquet`` into a temporary directory, moved
    to ``out_dir`` when all are written (:func:`pipelines.io.atomic_output_dir`): a failure
    leaves no ``out_dir``. The workers write the files themselves, so ``out_dir`` must be on
    storage they reach (a shared file system or an object store URL).

    Parameters
    ----------
    out_dir : str or path-like
        Output directory (local path or fsspec URL).
    rows : int
        Total number of rows.
    n_features : int, default=10
        Number of features ``x0 .. x{p-1}`` (at least 5; the ones past ``x4`` are noise).
    task : {"regression", "classification"}, default="regression"
        ``y`` is ``f(x) + (0.5 + 2 x0) * eps`` (float64) or that value cut into
        ``n_classes`` ordered classes (int64).
    n_classes : int, default=3
        Classification only.
    partition_rows : int, default=DEFAULT_PARTITION_ROWS
        Rows per partition (the last one holds the rest); one file and one task each, here
        and in every pass of ``ebf train`` / ``ebf predict`` over the files.
    random_state : int or None, default=0
        Seed. ``None`` draws fresh entropy, which is stored in the metadata so the data can
        be made again.
    client : distributed.Client, optional
        Defaults to the current client (:func:`cluster.current_client`); none is created.
    overwrite : bool, default=False
        Replace an existing ``out_dir`` that holds an ebf dataset (its ``_ebf_output.json``
        marker) or is empty; anything else there raises before any work
        (:mod:`basics.atomic`).
    storage_options : dict, optional
        fsspec options for a URL (they are sent to the workers).
    progress : callable, optional
        Called as ``progress(done, total)`` on the driver after each partition is written
        (the CLI draws its progress bar with it).

    Returns
    -------
    GeneratedDataset
        Path, sizes, columns and the metadata stored in the files (key ``"ebf.dataset"``:
        JSON with generator, task, rows, partition_rows, n_features, seed, noise model and
        class thresholds).

    Raises
    ------
    ValueError
        On invalid sizes or task.
    DatasetSizeError
        (a ``ValueError``) if the data would not fit in the free memory or disk
        (:func:`check_size`), before any work.
    FileExistsError
        If ``out_dir`` exists and ``overwrite`` is False or it is not an ebf dataset.
    cluster.NoClientError
        If no client is given and none is running.

    Examples
    --------
    >>> from cluster import connect
    >>> client = connect()  # doctest: +SKIP
    >>> info = make_friedman("data/friedman", 1_000_000)  # doctest: +SKIP
    >>> info.n_partitions  # doctest: +SKIP
    10
    """
    _check_args(rows, n_features, task, n_classes, partition_rows)
    rows, partition_rows = int(rows), int(partition_rows)
    if random_state is None:
        entropy = int(np.random.SeedSequence().entropy)  # type: ignore[arg-type]
    else:
        entropy = int(random_state)
        if entropy < 0:
            raise ValueError(f"random_state must be a non-negative integer, got {random_state}")
    client = current_client(client)
    limits = [w.get("memory_limit") or 0 for w in client.scheduler_info()["workers"].values()]
    check_size(out_dir, rows, n_features, partition_rows,
               worker_memory=max(limits) if limits and min(limits) > 0 else None)

    n_partitions = math.ceil(rows / partition_rows)
    sizes = [min(partition_rows, rows - i * partition_rows) for i in range(n_partitions)]
    description: dict[str, Any] = {
        "generator": "friedman1",
        "task": task,
        "rows": rows,
        "partition_rows": partition_rows,
        "n_partitions": n_partitions,
        "n_features": n_features,
        "random_state": entropy,
        "seeding": "SeedSequence(random_state, spawn_key=(partition,))",
        "mean": "10 sin(pi x0 x1) + 20 (x2 - 0.5)^2 + 10 x3 + 5 x4",
        "noise_sd": "0.5 + 2 x0",
    }
    if task == "classification":
        description["n_classes"] = n_classes
        description["class_thresholds"] = list(_class_thresholds(n_classes))
    metadata = {METADATA_KEY: json.dumps(description, sort_keys=True)}
    columns = tuple(f"x{j}" for j in range(n_features)) + ("y",)
    logger.info(
        "make_friedman: %d rows x %d features (%s) in %d partitions -> %s",
        rows,
        n_features,
        task,
        n_partitions,
        out_dir,
    )

    options = dict(storage_options) if storage_options else None
    with atomic_output_dir(out_dir, overwrite=overwrite, storage_options=options) as tmp:
        token = uuid.uuid4().hex[:8]
        with distributed.span("make-friedman"):
            futures = client.map(
                _write_partition,
                range(n_partitions),
                sizes,
                key=[f"make-friedman-{token}-{i}" for i in range(n_partitions)],
                directory=tmp,
                n_features=n_features,
                task=task,
                n_classes=n_classes,
                entropy=entropy,
                metadata=metadata,
                storage_options=options,
                pure=False,
            )
        wait_for(client, futures, progress)
    return GeneratedDataset(
        path=os.fspath(out_dir),
        rows=rows,
        n_partitions=n_partitions,
        columns=columns,
        target="y",
        task=task,
        metadata=metadata,
    )
