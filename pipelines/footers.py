"""Every file of a Parquet dataset checked from its footer, on the driver, before any row is read.

Dask reads the schema of one file and finds out about the others only when a worker reads
them, deep in a job. :func:`read_footers` lists the files a dataset holds (a file, a
directory with hive partitions, a glob or a list; local or fsspec) and reads the footer of
each (its schema, row count and per-column null counts), in parallel threads. Its errors and
those of :class:`Footers`' checks name the file, the column, the count and the fix:

- a file that is not Parquet or cannot be read (:class:`UnreadableFileError`, or the
  ``OSError`` naming the file);
- a file with two columns of one name (:class:`DuplicateColumnsError`);
- a column that some files lack or store with another kind (:meth:`Footers.mismatches`);
- missing values in numeric features (:meth:`Footers.check_no_nulls`);
- too few rows (:meth:`Footers.check_rows`).
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import fsspec
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from basics.columns import arrow_kind, kind_encoding

__all__ = [
    "DuplicateColumnsError",
    "FileFooter",
    "Footers",
    "SchemaError",
    "UnreadableFileError",
    "open_dataset",
    "read_footers",
]

logger = logging.getLogger(__name__)

#: Footers read at once (object stores answer each in one or two requests).
_THREADS = 16
#: Files named in a message, at most.
_SHOWN = 3


class SchemaError(ValueError):
    """The dataset does not fit the requested features / target.

    Attributes
    ----------
    columns : list of str
        The columns the problems are about, in the order reported.
    """

    def __init__(self, message: str, columns: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.columns = list(columns)


class UnreadableFileError(ValueError):
    """A file of the dataset is not a Parquet file (or is damaged): the message names it."""


class DuplicateColumnsError(SchemaError):
    """A file of the dataset has two columns of one name: the message names file and column."""


def open_dataset(path: str | list[str], storage_options: Mapping[str, Any] | None,
                 schema: pa.Schema | None = None) -> ds.Dataset:
    """A pyarrow dataset over a file, directory, glob or list of files.

    Without ``schema`` pyarrow reads the first file's footer for it; with one it reads none
    (listing the files only).
    """
    if isinstance(path, list):
        if not path:
            raise FileNotFoundError("an empty list of files holds no dataset")
        fs, _, files = fsspec.core.get_fs_token_paths(path, storage_options=storage_options)
        return ds.dataset(files, filesystem=fs, format="parquet", schema=schema)
    fs, fpath = fsspec.core.url_to_fs(path, **dict(storage_options or {}))
    if any(ch in fpath for ch in "*?["):
        files = sorted(f for f in fs.glob(fpath) if fs.isfile(f))
        if not files:
            raise FileNotFoundError(f"no files match {path!r}")
        base = fpath[: min(fpath.find(ch) for ch in "*?[" if ch in fpath)].rsplit("/", 1)[0]
        return ds.dataset(
            files,
            filesystem=fs,
            format="parquet",
            partitioning=ds.HivePartitioning.discover(),
            partition_base_dir=base or "/",
            schema=schema,
        )
    if not fs.exists(fpath):
        raise FileNotFoundError(
            f"no Parquet dataset at {path!r} (neither a file nor a directory); check the path "
            "or URL and storage_options"
        )
    return ds.dataset(fpath, filesystem=fs, format="parquet", partitioning="hive", schema=schema)


@dataclass(frozen=True)
class FileFooter:
    """What one file's footer says.

    Attributes
    ----------
    path : str
    schema : pyarrow.Schema
        The columns the file stores (not the hive partition columns of its directories).
    rows : int
    nulls : dict of str to int or None
        Null values per top-level column, summed over the row groups; ``None`` where a row
        group does not record the count.
    ranges : dict of str to (float, float) or None
        ``(min, max)`` per top-level numeric column over the row groups' statistics (NaN
        aside); ``None`` where a row group does not record them.
    """

    path: str
    schema: pa.Schema
    rows: int
    nulls: dict[str, int | None]
    ranges: dict[str, tuple[float, float] | None] = field(default_factory=dict)


def _null_counts(meta: pq.FileMetaData) -> dict[str, int | None]:
    counts: dict[str, int | None] = {}
    for i in range(meta.num_columns):
        path = meta.schema.column(i).path
        if "." in path:  # a leaf of a nested column: not a feature the models can use
            continue
        total: int | None = 0
        for g in range(meta.num_row_groups):
            stats = meta.row_group(g).column(i).statistics
            if stats is None or not stats.has_null_count or total is None:
                total = None
                break
            total += stats.null_count
        counts[path] = total
    return counts


def _ranges(meta: pq.FileMetaData) -> dict[str, tuple[float, float] | None]:
    ranges: dict[str, tuple[float, float] | None] = {}
    for i in range(meta.num_columns):
        column = meta.schema.column(i)
        if "." in column.path or column.physical_type not in (
                "INT32", "INT64", "FLOAT", "DOUBLE") or column.logical_type.type not in (
                "NONE", "INT"):  # plain numbers only: not times, decimals...
            continue
        low, high = float("inf"), float("-inf")
        for g in range(meta.num_row_groups):
            stats = meta.row_group(g).column(i).statistics
            if stats is None or not stats.has_min_max:
                if meta.row_group(g).num_rows:  # an empty row group has nothing to record
                    break
                continue
            low, high = min(low, float(stats.min)), max(high, float(stats.max))
        else:
            ranges[column.path] = (low, high)
            continue
        ranges[column.path] = None
    return ranges


def _read_footer(fs: pafs.FileSystem, path: str) -> FileFooter:
    try:
        with fs.open_input_file(path) as f:
            meta = pq.ParquetFile(f).metadata
            schema = meta.schema.to_arrow_schema()
    except pa.ArrowException as exc:
        raise UnreadableFileError(
            f"{path} is not a readable Parquet file ({' '.join(str(exc).split())}); remove it "
            "from the dataset's directory or replace it with a complete Parquet file"
        ) from exc
    except OSError as exc:
        if not exc.filename:
            exc.filename = path
        raise
    return FileFooter(path, schema, int(meta.num_rows), _null_counts(meta), _ranges(meta))


def _shown(paths: Sequence[str]) -> str:
    more = f", ... ({len(paths)} in all)" if len(paths) > _SHOWN else ""
    return ", ".join(paths[:_SHOWN]) + more


@dataclass(frozen=True)
class Footers:
    """The footers of every file of a dataset (:func:`read_footers`).

    Attributes
    ----------
    source : str
        The dataset, as given.
    files : list of FileFooter
        In the order the dataset reads them.
    filesystem : pyarrow.fs.FileSystem, optional
        Where the files are (to read a column of some of them).
    """

    source: str
    files: list[FileFooter]
    filesystem: Any = None

    @property
    def rows(self) -> int:
        """Rows in all files."""
        return sum(f.rows for f in self.files)

    def mismatches(self, columns: Mapping[str, str]) -> list[tuple[str, str]]:
        """Columns that some files lack or store with another kind, with the message.

        Parameters
        ----------
        columns : dict of str to str
            Column name -> its role in messages (``"feature"``, ``"target"``); hive
            partition columns (stored in no file) must be left out.

        Returns
        -------
        list of (column, message)
            The kind of the first file that has the column is the reference; integer and
            float (and string and dictionary) columns go together.
        """
        problems = []
        n = len(self.files)
        for name, role in columns.items():
            kinds: dict[str, list[tuple[str, str]]] = {}
            lacking = []
            for f in self.files:
                index = f.schema.get_field_index(name)
                if index < 0:
                    lacking.append(f.path)
                    continue
                dtype = f.schema.field(index).type
                kinds.setdefault(kind_encoding(arrow_kind(dtype)), []).append((f.path, str(dtype)))
            if lacking:
                problems.append((name, (
                    f"{role} column {name!r} is missing from {len(lacking)} of {n} files "
                    f"({_shown(lacking)}); every file must hold it: rewrite those files with "
                    f"the column or move them out of the dataset")))
            if len(kinds) > 1:
                (first, [(where, dtype), *_]), *others = kinds.items()
                odd = [path for _, found in others for path, _ in found]
                other = ", ".join(f"{group} ({found[0][1]})" for group, found in others)
                problems.append((name, (
                    f"{role} column {name!r} is {first} ({dtype}) in {where} but {other} in "
                    f"{len(odd)} file(s) ({_shown(odd)}); give it one type in every file "
                    "(cast it when writing them)")))
        return problems

    def check_no_nulls(self, numeric: Sequence[str], what: str) -> None:
        """Refuse missing values (nulls) in the numeric feature columns ``numeric``.

        Only counts the footers record; NaN stored as a number is found when the rows are
        read.

        Raises
        ------
        ValueError
            Naming each column, its count of missing values, the files and the fix.
        """
        parts = []
        for name in numeric:
            counts = [(f.path, f.nulls.get(name) or 0) for f in self.files]
            bad = [path for path, count in counts if count]
            if bad:
                total = sum(count for _, count in counts)
                parts.append(f"{name!r}: {total} in {len(bad)} file(s) ({_shown(bad)})")
        if parts:
            raise ValueError(
                f"{what}: {len(parts)} numeric feature column(s) have missing values (null) "
                f"out of {self.rows} rows: {'; '.join(parts)}; this model cannot use missing "
                "numbers: drop or impute those rows first, or train with --branch bayesian "
                "or random, whose trees learn where missing values go")

    def check_scored_target(self, target: str) -> bool:
        """Refuse regression targets beyond ``±basics.validation.MAX_ABS_TARGET`` from the
        footers' statistics, before any row is scored: a file whose range reaches beyond the
        bound has its target column read to count the rows
        (:func:`basics.validation.refuse_scored_targets`).

        Returns
        -------
        bool
            Whether every file's statistics cover the column (if not, the rows must be
            checked as they are read).

        Raises
        ------
        ValueError
            Naming the column, the count of rows beyond the bound, the files and the fix.
        """
        import numpy as np

        from basics.validation import MAX_ABS_TARGET, refuse_scored_targets

        ranges = [(f, f.ranges.get(target)) for f in self.files]
        beyond = [f.path for f, r in ranges
                  if r is not None and max(abs(r[0]), abs(r[1])) > MAX_ABS_TARGET]
        if beyond:
            count, low, high = 0, float("inf"), float("-inf")
            for path in beyond:
                y = pq.read_table(path, columns=[target], filesystem=self.filesystem)
                y = y.column(0).to_numpy(zero_copy_only=False).astype(np.float64)
                count += int((np.abs(y) > MAX_ABS_TARGET).sum())
                low, high = min(low, float(np.nanmin(y))), max(high, float(np.nanmax(y)))
            try:
                refuse_scored_targets(count, target, self.rows, low, high)
            except ValueError as exc:
                raise ValueError(f"{exc} (in {len(beyond)} file(s): {_shown(beyond)})") from None
        return all(r is not None for _, r in ranges)

    def check_rows(self, minimum: int, why: str) -> None:
        """Refuse fewer than ``minimum`` rows; ``why`` says what needs them and the fix."""
        if self.rows < minimum:
            raise ValueError(
                f"{self.source} has {self.rows} row{'s' if self.rows != 1 else ''} in "
                f"{len(self.files)} file(s); {why}")


def read_footers(path: str | os.PathLike[str] | Sequence[str],
                 storage_options: Mapping[str, Any] | None = None) -> Footers:
    """Read the footer of every file of a Parquet dataset (no row data).

    Parameters
    ----------
    path : str, path-like or list of str
        A file, a directory (hive partitions too), a glob or a list of files; local or any
        fsspec URL.
    storage_options : dict, optional

    Returns
    -------
    Footers

    Raises
    ------
    FileNotFoundError
        If the path holds no dataset or no file.
    UnreadableFileError
        Naming the files that are not Parquet (the first few) and the fix.
    OSError
        A file that cannot be opened (permissions...), naming it.
    DuplicateColumnsError
        Naming the file and the columns that appear twice in it.

    Examples
    --------
    >>> footers = read_footers("data/")  # doctest: +SKIP
    >>> footers.rows, len(footers.files)  # doctest: +SKIP
    (1000000, 8)
    """
    source = [os.fspath(p) for p in path] if isinstance(path, (list, tuple)) else os.fspath(path)
    dataset = open_dataset(source, storage_options, schema=pa.schema([]))
    files = list(dataset.files)
    if not files:
        raise FileNotFoundError(f"no Parquet files in {source!r}")
    fs = dataset.filesystem

    def read(file: str) -> FileFooter | Exception:
        try:
            return _read_footer(fs, file)
        except (UnreadableFileError, OSError) as exc:
            return exc

    with ThreadPoolExecutor(min(_THREADS, len(files))) as pool:
        found = list(pool.map(read, files))
    failed = [r for r in found if isinstance(r, Exception)]
    if failed:
        if len(failed) > 1 and all(isinstance(r, UnreadableFileError) for r in failed):
            raise UnreadableFileError(f"{len(failed)} of {len(files)} files: {failed[0]}")
        raise failed[0]
    footers: list[FileFooter] = found  # type: ignore[assignment]
    for f in footers:
        twice = sorted(name for name, k in Counter(f.schema.names).items() if k > 1)
        if twice:
            raise DuplicateColumnsError(
                f"{f.path} has {len(twice)} column name(s) used more than once "
                f"({', '.join(repr(n) for n in twice[:10])}); every column needs its own name: "
                "rename or drop the duplicates when writing the file", columns=twice)
    logger.debug("read %d footers of %s: %d rows", len(files), source, sum(f.rows for f in
                                                                            footers))
    return Footers(source if isinstance(source, str) else ", ".join(source), footers, fs)
