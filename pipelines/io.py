"""Parquet in and out: column-projected reads and atomic, metadata-stamped writes.

Paths are local paths or any fsspec URL (``s3://``, ``gs://``, ``abfs://``, ``memory://``...;
credentials in ``storage_options``). A dataset is a single file, a directory (hive-partitioned
or not) or a glob.

Atomic writes
-------------
:func:`write_parquet_atomic` (and :func:`atomic_output_dir`, which ``make_data`` uses; it is
:func:`basics.atomic.atomic_dir`) write into a hidden temporary directory next to the target
and move it into place only after every file was written, with the marker file
``_ebf_output.json`` (the kind, ``"dataset"`` or ``"predictions"``, the ebf version, the
time). A failure or an interrupt removes the temporary directory, so the target is either
absent (or the previous version, with ``overwrite=True``) or complete, never half-written.
``overwrite=True`` replaces only a directory with the marker of the same kind; see
:mod:`basics.atomic` for the rules, the clean-up of what killed writers leave and what
"atomic" means on object stores.

Files are named ``part.000000.parquet``, ``part.000001.parquet``... in row order, so any
reader (Dask, pyarrow, Spark) reads the rows back in the order they were written.
"""

from __future__ import annotations

import logging
import os
import posixpath
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import dask
import dask.dataframe as dd
import fsspec
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from basics.atomic import atomic_dir as atomic_output_dir

__all__ = [
    "atomic_output_dir",
    "part_name",
    "read_dataset",
    "read_parquet_metadata",
    "write_parquet_atomic",
]

logger = logging.getLogger(__name__)

#: Schema-metadata keys that pandas / Arrow own and callers may not set.
RESERVED_METADATA_KEYS = ("pandas",)
_RESERVED_PREFIX = "ARROW:"


def part_name(index: int) -> str:
    """File name of partition ``index``: ``part.000042.parquet`` (zero-padded: sorts in order).

    Parameters
    ----------
    index : int

    Returns
    -------
    str

    Examples
    --------
    >>> part_name(42)
    'part.000042.parquet'
    """
    return f"part.{index:06d}.parquet"


def _url_to_fs(
    url: str | os.PathLike[str], storage_options: Mapping[str, Any] | None
) -> tuple[fsspec.AbstractFileSystem, str]:
    return fsspec.core.url_to_fs(os.fspath(url), **dict(storage_options or {}))


def _check_metadata(metadata: Mapping[str, str]) -> dict[str, str]:
    """Validate user key/values for the Parquet schema metadata."""
    if not isinstance(metadata, Mapping):
        raise TypeError(f"metadata must be a dict of str to str, got {type(metadata).__name__}")
    checked: dict[str, str] = {}
    for key, value in metadata.items():
        if not isinstance(key, str) or not key:
            raise TypeError(f"metadata keys must be non-empty strings, got {key!r}")
        if not isinstance(value, str):
            raise TypeError(
                f"metadata[{key!r}] must be a string, got {type(value).__name__}; encode it "
                "first (e.g. json.dumps(value))"
            )
        if key in RESERVED_METADATA_KEYS or key.startswith(_RESERVED_PREFIX):
            raise ValueError(
                f"metadata key {key!r} is reserved (pandas / Arrow store their schema there); "
                "use another key, e.g. 'ebf.<name>'"
            )
        checked[key] = value
    return checked


def _pandas_to_dir(
    df: pd.DataFrame,
    tmp_url: str,
    metadata: dict[str, str],
    write_index: bool,
    storage_options: Mapping[str, Any] | None,
) -> None:
    table = pa.Table.from_pandas(df, preserve_index=write_index)
    schema_metadata = dict(table.schema.metadata or {})
    schema_metadata.update({k.encode(): v.encode() for k, v in metadata.items()})
    table = table.replace_schema_metadata(schema_metadata)
    fs, tmp_path = _url_to_fs(tmp_url, storage_options)
    with fs.open(posixpath.join(tmp_path, part_name(0)), "wb") as f:
        pq.write_table(table, f)


def write_parquet_atomic(
    data: dd.DataFrame | pd.DataFrame,
    out_dir: str | os.PathLike[str],
    *,
    metadata: Mapping[str, str],
    kind: str = "dataset",
    overwrite: bool = False,
    inputs: Mapping[str, Any] | None = None,
    write_index: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    others: Sequence[Any] = (),
    check: Callable[[list], None] | None = None,
) -> list:
    """Write a DataFrame as a Parquet directory, atomically, with key/values in its schema.

    A Dask DataFrame is written one file per partition (in parallel on the current Dask
    scheduler); a pandas DataFrame as one file. Files are ``part.NNNNNN.parquet`` in row order.
    Lazy ``others`` are computed in the same graph: a task that both the partitions and one
    of ``others`` depend on (a prediction and the scores of the same rows) runs once, and
    ``out_dir`` appears only if everything was computed.

    Parameters
    ----------
    data : dask.dataframe.DataFrame or pandas.DataFrame
    out_dir : str or path-like
        Target directory (local path or fsspec URL).
    metadata : dict of str to str
        Stored in every file's Parquet schema metadata (``custom_metadata``), e.g. the model
        version and hash; read back with :func:`read_parquet_metadata`. The key ``"pandas"``
        and keys starting with ``"ARROW:"`` are reserved.
    kind : {"dataset", "predictions"}, default="dataset"
        Recorded in the directory's marker file; ``overwrite`` replaces only this kind.
    overwrite : bool, default=False
        Replace an existing ``out_dir`` of the same kind written by ebf (see
        :mod:`basics.atomic`); otherwise it raises :class:`FileExistsError` first.
    inputs : mapping of str to path, optional
        Paths ``out_dir`` must not overlap (:func:`basics.locations.check_destination`).
    write_index : bool, default=False
        Also store the DataFrame index as a column.
    storage_options : dict, optional
        fsspec options for a URL.
    others : sequence of dask.delayed.Delayed, default=()
        Computed on the current scheduler together with the write.
    check : callable, optional
        Called with the values of ``others`` before the directory is committed: what it
        raises leaves no ``out_dir`` (e.g. scores that refuse the data).

    Returns
    -------
    list
        The values of ``others``, in order (empty without them).

    Raises
    ------
    FileExistsError
        If ``out_dir`` exists and ``overwrite`` is False or it is not this kind of output.
    ValueError, TypeError
        On reserved or non-string metadata, or unsupported ``data``;
        :class:`basics.locations.UnsafeOutputError` if ``out_dir`` overlaps an input.

    Examples
    --------
    >>> import os, tempfile, pandas as pd
    >>> out = os.path.join(tempfile.mkdtemp(), "scores")
    >>> _ = write_parquet_atomic(pd.DataFrame({"mean": [1.5, 2.5]}), out,
    ...                          metadata={"ebf.model_sha256": "ab12"})
    >>> read_parquet_metadata(out)
    {'ebf.model_sha256': 'ab12'}
    """
    checked = _check_metadata(metadata)
    if not isinstance(data, (dd.DataFrame, pd.DataFrame)):
        raise TypeError(
            f"data must be a pandas or Dask DataFrame, got {type(data).__name__}; wrap a "
            "Series with .to_frame()"
        )
    with atomic_output_dir(out_dir, kind, overwrite=overwrite, inputs=inputs,
                           storage_options=storage_options) as tmp:
        if isinstance(data, pd.DataFrame):
            _pandas_to_dir(data, tmp, checked, write_index, storage_options)
            values = list(dask.compute(*others)) if others else []
        else:
            values = _dask_to_dir(data, tmp, checked, write_index, storage_options, others)
        if check is not None:
            check(values)
    return values


def _dask_to_dir(data: dd.DataFrame, tmp: str, checked: dict, write_index: bool,
                 storage_options: Mapping[str, Any] | None, others: Sequence[Any]) -> list:
    """Write ``data`` into ``tmp`` (and compute ``others`` in the same graph)."""
    write = data.to_parquet(
        tmp,
        write_index=write_index,
        custom_metadata=checked,
        name_function=part_name,
        storage_options=dict(storage_options) if storage_options else None,
        write_metadata_file=False,
        compute=not others,
    )
    if not others:
        return []
    # one graph of delayed objects: the shared tasks run once (mixing an expression
    # collection with delayed objects would materialise them apart)
    return list(dask.compute(write.to_delayed(), *others))[1:]


def _first_parquet_file(fs: fsspec.AbstractFileSystem, path: str) -> str:
    if fs.isfile(path):
        return path
    files = [
        f
        for f in sorted(fs.find(path))
        if not any(part.startswith((".", "_")) for part in f[len(path) :].split("/") if part)
    ]
    if not files:
        raise FileNotFoundError(f"no Parquet files under {path!r}")
    return files[0]


def read_parquet_metadata(
    path: str | os.PathLike[str], *, storage_options: Mapping[str, Any] | None = None
) -> dict[str, str]:
    """The custom key/values of a Parquet file or directory's schema (first file's footer).

    Parameters
    ----------
    path : str or path-like
        A Parquet file or a directory of them (local or fsspec URL).
    storage_options : dict, optional

    Returns
    -------
    dict of str to str
        Schema metadata without the reserved ``"pandas"`` / ``"ARROW:*"`` keys.

    Examples
    --------
    >>> read_parquet_metadata("predictions/")  # doctest: +SKIP
    {'ebf.model_sha256': 'ab12'}
    """
    fs, fpath = _url_to_fs(path, storage_options)
    first = _first_parquet_file(fs, fpath.rstrip("/") or fpath)
    with fs.open(first, "rb") as f:
        schema = pq.read_schema(f)
    raw = schema.metadata or {}
    decoded = {k.decode(): v.decode() for k, v in raw.items()}
    return {
        k: v
        for k, v in decoded.items()
        if k not in RESERVED_METADATA_KEYS and not k.startswith(_RESERVED_PREFIX)
    }


def read_dataset(
    path: str | os.PathLike[str] | Sequence[str],
    columns: Sequence[str] | None,
    *,
    storage_options: Mapping[str, Any] | None = None,
    filters: Any = None,
) -> dd.DataFrame:
    """Read a Parquet dataset lazily, only the columns asked for.

    Parameters
    ----------
    path : str, path-like or list of str
        A file, a directory (hive partitions ``key=value/`` are read as columns), a glob
        (``"data/*.parquet"``) or a list of files; local or any fsspec URL.
    columns : sequence of str or None
        Columns to read (projection pushed into the Parquet reader); ``None`` reads all. Run
        :func:`pipelines.schema.check_schema` first for errors that name the column.
    storage_options : dict, optional
        fsspec options (credentials...) for a URL.
    filters : list of tuples, optional
        Row filters in pyarrow's DNF form, e.g. ``[("year", "==", 2013)]``; filters on hive
        partition columns skip whole files.

    Returns
    -------
    dask.dataframe.DataFrame
        Columns in the order asked for; hive partition columns are ``category`` with known
        categories (the same codes in every partition). The index is a per-partition default
        index (any stored pandas index is ignored). Partitions follow the files / row groups
        but the optimiser may merge them.

    Examples
    --------
    >>> ddf = read_dataset("s3://bucket/flights/", ["distance", "year", "arr_delay"],
    ...                    storage_options={"anon": True})  # doctest: +SKIP
    """
    if isinstance(columns, str):
        raise TypeError(f"columns must be a list of names, not the string {columns!r}")
    source: str | list[str]
    if isinstance(path, (list, tuple)):
        source = [os.fspath(p) for p in path]
    else:
        source = os.fspath(path)
    ddf = dd.read_parquet(
        source,
        columns=list(columns) if columns is not None else None,
        filters=filters,
        storage_options=dict(storage_options) if storage_options else None,
        index=False,
    )
    for name, dtype in ddf.dtypes.items():
        if isinstance(dtype, pd.CategoricalDtype) and not ddf[name].cat.known:
            logger.debug("making the categories of %r known (one pass over the column)", name)
            ddf[name] = ddf[name].cat.as_known()
    return ddf


#: A dataset a job reads: a Parquet file, directory, glob or URL, a list of them, or a Dask
#: DataFrame.
Source = str | os.PathLike[str] | Sequence[str] | dd.DataFrame


def read_columns(data: Source, columns: list[str],
                 storage_options: Mapping[str, Any] | None = None) -> dd.DataFrame:
    """``columns`` of ``data``: projected from a Dask DataFrame, or read with projection
    (:func:`read_dataset`)."""
    if isinstance(data, dd.DataFrame):
        return data[columns]
    return read_dataset(data, columns, storage_options=storage_options)


def describe_source(data: Source) -> str:
    """``data`` for messages and metadata: its path(s), or ``"<dask DataFrame>"``."""
    if isinstance(data, dd.DataFrame):
        return "<dask DataFrame>"
    if isinstance(data, (list, tuple)):
        return ", ".join(os.fspath(p) for p in data)
    return os.fspath(data)
