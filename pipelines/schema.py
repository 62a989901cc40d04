"""Schema check of a training / scoring dataset, from Parquet footers only, before heavy work.

:func:`check_schema` reads the schema (the first file's footer and the directory names of hive
partitions, no row data) or a Dask DataFrame's metadata (no compute) and raises one
:class:`SchemaError` listing every problem, each naming its column and the fix:

- a feature or the target that is not in the data (with the available columns and close
  matches),
- the target listed among the features, a feature listed twice, no feature left,
- a column whose type the models cannot use: datetimes, durations, nested (list / struct /
  map), binary, decimal, all-null;
- and, from the footer of every file (:mod:`pipelines.footers`): a file that is not Parquet
  or has duplicate column names, a feature or the target that some files lack or store with
  another kind (each naming the files), nulls in a numeric feature (the count).

Usable kinds: ``float``, ``integer``, ``boolean``, ``string`` and ``categorical`` (Parquet
dictionary columns, pandas ``category``, and hive partition columns ``key=value/``, which
Dask reads back as categoricals). Strings and categoricals become ordinal codes in the
models (``ebf.features``).
"""

from __future__ import annotations

import difflib
import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dask.dataframe as dd
import pandas as pd
import pyarrow as pa

from basics.columns import FIXES, NUMERIC, USABLE_KINDS, arrow_kind, kind_encoding, pandas_kind

from .footers import Footers, SchemaError, open_dataset, read_footers

__all__ = [
    "ColumnInfo",
    "SchemaError",
    "check_schema",
    "inspect_schema",
    "numeric_columns",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ColumnInfo:
    """Name, stored type and kind of one column.

    Attributes
    ----------
    name : str
    dtype : str
        The type as stored: an Arrow type for Parquet (``"double"``, ``"timestamp[us]"``), a
        pandas dtype for a DataFrame.
    kind : str
        ``"float"``, ``"integer"``, ``"boolean"``, ``"string"``, ``"categorical"`` (usable) or
        ``"datetime"``, ``"duration"``, ``"nested"``, ``"binary"``, ``"decimal"``, ``"null"``,
        ``"other"`` (not usable).
    partition : bool
        A hive partition column (its values come from the directory names).
    """

    name: str
    dtype: str
    kind: str
    partition: bool = False

    @property
    def usable(self) -> bool:
        """Whether a model can use the column."""
        return self.kind in USABLE_KINDS

    @property
    def is_discrete(self) -> bool:
        """Whether the values are labels or counts (everything usable but ``float``)."""
        return self.usable and self.kind != "float"


def _pandas_index_columns(schema: pa.Schema) -> set[str]:
    """Columns that store a pandas index (``__index_level_0__``...): never features."""
    raw = (schema.metadata or {}).get(b"pandas")
    if not raw:
        return set()
    try:
        index_columns = json.loads(raw).get("index_columns", [])
    except (ValueError, AttributeError):
        return set()
    return {c for c in index_columns if isinstance(c, str)}


def inspect_schema(
    path_or_ddf: str | os.PathLike[str] | Sequence[str] | dd.DataFrame | pd.DataFrame,
    *,
    storage_options: Mapping[str, Any] | None = None,
) -> dict[str, ColumnInfo]:
    """Every column of a Parquet dataset or DataFrame with its type and kind, reading no rows.

    Parameters
    ----------
    path_or_ddf : str, path-like, dask.dataframe.DataFrame or pandas.DataFrame
        A Parquet file, directory (hive partitions included), glob or fsspec URL; or a
        DataFrame (only its dtypes are used).
    storage_options : dict, optional
        fsspec options (credentials...) for a URL.

    Returns
    -------
    dict of str to ColumnInfo
        In column order; hive partition columns last, with ``kind="categorical"``. Stored
        pandas index columns are left out.

    Raises
    ------
    FileNotFoundError
        If the path holds no dataset.

    Examples
    --------
    >>> import pandas as pd
    >>> info = inspect_schema(pd.DataFrame({"a": [1.0], "t": pd.to_datetime(["2020-01-01"])}))
    >>> info["a"].kind, info["t"].kind, info["t"].usable
    ('float', 'datetime', False)
    """
    if isinstance(path_or_ddf, (dd.DataFrame, pd.DataFrame)):
        return {
            str(name): ColumnInfo(str(name), str(dtype), pandas_kind(dtype))
            for name, dtype in path_or_ddf.dtypes.items()
        }
    source: str | list[str]
    if isinstance(path_or_ddf, (list, tuple)):
        source = [os.fspath(p) for p in path_or_ddf]
    else:
        source = os.fspath(path_or_ddf)
    try:
        dataset = open_dataset(source, storage_options)
    except pa.ArrowException:  # pyarrow's message names no file: find the one at fault
        read_footers(source, storage_options)
        raise
    schema = dataset.schema
    first = next(iter(dataset.get_fragments()), None)
    if first is None:
        raise FileNotFoundError(f"no Parquet files in {source!r}")
    # columns of the dataset that no file stores come from the hive directory names
    partition_names = set(schema.names) - set(first.physical_schema.names)
    skip = _pandas_index_columns(schema)
    columns = {}
    for field in schema:
        if field.name in skip:
            continue
        partition = field.name in partition_names
        kind = "categorical" if partition else arrow_kind(field.type)
        columns[field.name] = ColumnInfo(field.name, str(field.type), kind, partition)
    # hive partition columns last, as Dask returns them
    return dict(sorted(columns.items(), key=lambda item: item[1].partition))


def numeric_columns(columns: Mapping[str, ColumnInfo], names: Sequence[str]) -> list[str]:
    """The columns of ``names`` that the models read as numbers (no missing value allowed)."""
    return [n for n in names if kind_encoding(columns[n].kind) == NUMERIC]


def _available(columns: Mapping[str, ColumnInfo], limit: int = 30) -> str:
    names = list(columns)
    shown = ", ".join(repr(n) for n in names[:limit])
    more = f", ... ({len(names)} in all)" if len(names) > limit else f" ({len(names)})"
    return f"available columns: {shown}{more}"


def _missing(name: str, role: str, columns: Mapping[str, ColumnInfo]) -> str:
    close = difflib.get_close_matches(name, list(columns), n=3, cutoff=0.6)
    lower = [c for c in columns if c.lower() == name.lower() and c not in close]
    hint = close + lower
    did_you_mean = f" (did you mean {', '.join(repr(c) for c in hint)}?)" if hint else ""
    return f"{role} column {name!r} is not in the data{did_you_mean}; {_available(columns)}"


def _unusable(info: ColumnInfo, role: str, all_columns: bool) -> str:
    fix = FIXES.get(info.kind, FIXES["other"])
    if role == "target":
        leave_out = "or pick another target"
    elif all_columns:
        leave_out = (
            "or leave it out by passing features=[...] (features=None uses every column but "
            "the target)"
        )
    else:
        leave_out = "or remove it from features"
    return (
        f"{role} column {info.name!r} has type {info.dtype} ({info.kind}), which the models "
        f"cannot use: {fix}, {leave_out}"
    )


def check_schema(
    path_or_ddf: str | os.PathLike[str] | Sequence[str] | dd.DataFrame | pd.DataFrame,
    target: str,
    features: Sequence[str] | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
    footers: Footers | None = None,
    allow_nulls: bool = False,
) -> tuple[list[str], ColumnInfo]:
    """Check features and target against a dataset's schema, reading no rows.

    Run it before any heavy work: it reads Parquet footers / hive directory names (or a
    DataFrame's dtypes) and reports every problem at once. The footer of every file is read
    (:func:`pipelines.footers.read_footers`): each must be Parquet, hold the features and the
    target with the same kinds, and no null in a numeric feature (unless ``allow_nulls``).

    Parameters
    ----------
    path_or_ddf : str, path-like, dask.dataframe.DataFrame or pandas.DataFrame
        Parquet file, directory, glob or fsspec URL, or a DataFrame.
    target : str
        Target column.
    features : sequence of str, optional
        Feature columns. ``None`` means every column but the target (hive partition columns
        included, as categoricals; stored pandas index columns excluded).
    storage_options : dict, optional
        fsspec options for a URL.
    footers : pipelines.footers.Footers, optional
        The dataset's footers if the caller read them already (for their row count).
    allow_nulls : bool, default=False
        Accept nulls in numeric features (the model learns where missing values go).

    Returns
    -------
    features : list of str
        The feature columns, in the order given (or the data's order for ``None``).
    target : ColumnInfo
        The target's stored type and kind (``target.kind == "float"`` suggests regression,
        ``target.is_discrete`` a classification or count target).

    Raises
    ------
    SchemaError
        Listing every problem, each naming its column: missing (with the available columns),
        target among the features, duplicates, no features, unusable types (with the fix).
        ``SchemaError.columns`` holds the offending columns. Also a column that some files
        lack or store with another kind, and a file with duplicate column names, naming it.
    ValueError
        Nulls in a numeric feature (the count and the files), or a file that is not Parquet.
    FileNotFoundError
        If the path holds no dataset.
    TypeError
        If ``features`` is a single string.

    Examples
    --------
    >>> import pandas as pd
    >>> df = pd.DataFrame({"x0": [0.1], "x1": [0.2], "y": [1.0]})
    >>> features, target = check_schema(df, "y")
    >>> features, target.kind
    (['x0', 'x1'], 'float')
    >>> try:
    ...     check_schema(df, "y", ["x0", "x2"])
    ... except SchemaError as exc:
    ...     print(exc.columns)
    ['x2']
    """
    if isinstance(features, str):
        raise TypeError(f"features must be a list of column names, not the string {features!r}")
    if not isinstance(target, str):
        raise TypeError(f"target must be a column name (str), got {type(target).__name__}")
    if footers is None and not isinstance(path_or_ddf, (dd.DataFrame, pd.DataFrame)):
        footers = read_footers(path_or_ddf, storage_options)  # every file, before the first
    columns = inspect_schema(path_or_ddf, storage_options=storage_options)
    problems: list[tuple[str, str]] = []  # (column, message)

    target_info = columns.get(target)
    if target_info is None:
        problems.append((target, _missing(target, "target", columns)))
    elif not target_info.usable:
        problems.append((target, _unusable(target_info, "target", all_columns=False)))

    all_columns = features is None
    if features is None:
        chosen = [name for name in columns if name != target]
    else:
        chosen = [str(f) for f in features]
        if target in chosen:
            problems.append(
                (
                    target,
                    f"the target column {target!r} is also listed in features; remove it "
                    "from features",
                )
            )
        seen: set[str] = set()
        for name in chosen:
            if name in seen:
                problems.append((name, f"feature column {name!r} is listed more than once"))
            seen.add(name)
    if not chosen:
        problems.append(
            ("", f"no feature columns: the data has only the target {target!r}; add features")
        )
    for name in dict.fromkeys(chosen):
        info = columns.get(name)
        if info is None:
            problems.append((name, _missing(name, "feature", columns)))
        elif not info.usable and name != target:
            problems.append((name, _unusable(info, "feature", all_columns)))

    if footers is not None:
        roles = {name: "feature" for name in chosen if name in columns}
        if target_info is not None:
            roles[target] = "target"
        problems += footers.mismatches(
            {name: role for name, role in roles.items() if not columns[name].partition})
    if problems:
        where = (
            type(path_or_ddf).__name__
            if isinstance(path_or_ddf, (dd.DataFrame, pd.DataFrame, list, tuple))
            else repr(os.fspath(path_or_ddf))
        )
        lines = "\n".join(f"  - {message}" for _, message in problems)
        raise SchemaError(
            f"schema check failed for {where} ({len(problems)} problem"
            f"{'s' if len(problems) > 1 else ''}):\n{lines}",
            columns=[column for column, _ in problems if column],
        )
    assert target_info is not None
    if footers is not None and not allow_nulls:
        footers.check_no_nulls(numeric_columns(columns, chosen), f"the data {footers.source}")
    logger.info(
        "schema ok: %d features, target %r (%s, %s)",
        len(chosen),
        target,
        target_info.dtype,
        target_info.kind,
    )
    return chosen, target_info
