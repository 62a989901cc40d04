"""The column-kind vocabulary of every layer: Parquet schema checks and model input alike.

A column has one *kind*, read off its dtype without reading values:

- usable: ``"float"``, ``"integer"``, ``"boolean"``, ``"string"``, ``"categorical"``;
- not usable, each with its fix in :data:`FIXES`: ``"datetime"``, ``"duration"``,
  ``"nested"``, ``"binary"``, ``"decimal"``, ``"null"``, ``"other"``.

Models see a usable kind through its :func:`encoding`: numbers as they are (``"numeric"``),
everything else as ordinal codes of its categories (``"categorical"``). ``pipelines.schema``
reads kinds off Parquet footers (:func:`arrow_kind`) before any row is read; the estimators
read them off pandas dtypes (:func:`pandas_kind`) and refuse the rest with the same fixes.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

__all__ = ["CATEGORICAL", "FIXES", "NUMERIC", "USABLE_KINDS", "arrow_kind", "encoding",
           "kind_encoding", "pandas_kind"]

#: Column kinds a model can use as a feature or a target.
USABLE_KINDS: frozenset[str] = frozenset({"float", "integer", "boolean", "string", "categorical"})

#: How a model encodes a column: its values (``NUMERIC``) or codes of its categories.
NUMERIC = "numeric"
CATEGORICAL = "categorical"
_ENCODING = {"float": NUMERIC, "integer": NUMERIC, "boolean": CATEGORICAL,
             "string": CATEGORICAL, "categorical": CATEGORICAL}

#: What to do with a column of an unusable kind.
FIXES: dict[str, str] = {
    "datetime": (
        "convert it to numbers before training (e.g. epoch seconds with .astype('int64'), "
        "or hour / day-of-week / month columns)"
    ),
    "duration": "convert it to a number of seconds (e.g. .dt.total_seconds())",
    "nested": "flatten it into scalar columns",
    "binary": "decode it to strings (categorical) or numbers",
    "decimal": "cast it to float64 (e.g. .astype('float64'))",
    "null": "it holds only nulls",
    "other": "convert it to a numeric, boolean, string or category column",
}


def arrow_kind(dtype: Any) -> str:
    """Kind of an Arrow type (a Parquet column).

    Examples
    --------
    >>> import pyarrow as pa
    >>> arrow_kind(pa.float32()), arrow_kind(pa.dictionary(pa.int8(), pa.string()))
    ('float', 'categorical')
    """
    import pyarrow.types as pat

    def has(predicate: str) -> bool:  # predicates of newer pyarrow versions
        test = getattr(pat, predicate, None)
        return bool(test(dtype)) if test is not None else False

    if pat.is_floating(dtype):
        return "float"
    if pat.is_integer(dtype):
        return "integer"
    if pat.is_boolean(dtype):
        return "boolean"
    if pat.is_dictionary(dtype):
        return "categorical"
    if pat.is_string(dtype) or pat.is_large_string(dtype) or has("is_string_view"):
        return "string"
    if pat.is_timestamp(dtype) or pat.is_date(dtype) or pat.is_time(dtype):
        return "datetime"
    if pat.is_duration(dtype) or pat.is_interval(dtype):
        return "duration"
    if pat.is_nested(dtype):
        return "nested"
    if (pat.is_binary(dtype) or pat.is_large_binary(dtype) or pat.is_fixed_size_binary(dtype)
            or has("is_binary_view")):
        return "binary"
    if pat.is_decimal(dtype):
        return "decimal"
    if pat.is_null(dtype):
        return "null"
    return "other"


def pandas_kind(dtype: Any) -> str:
    """Kind of a pandas / NumPy dtype.

    ``object`` columns count as ``"string"``: they must hold strings, which is checked when
    their values are coded.

    Examples
    --------
    >>> import numpy as np
    >>> pandas_kind(np.dtype("int16")), pandas_kind(np.dtype("datetime64[ns]"))
    ('integer', 'datetime')
    """
    if isinstance(dtype, pd.ArrowDtype):
        return arrow_kind(dtype.pyarrow_dtype)
    if isinstance(dtype, pd.CategoricalDtype):
        return "categorical"
    if pd.api.types.is_bool_dtype(dtype):
        return "boolean"
    if isinstance(dtype, pd.StringDtype):
        return "string"
    if isinstance(dtype, (pd.DatetimeTZDtype, pd.PeriodDtype)):
        return "datetime"
    kind = getattr(dtype, "kind", "")
    if kind == "M":
        return "datetime"
    if kind == "m":
        return "duration"
    if pd.api.types.is_float_dtype(dtype):
        return "float"
    if pd.api.types.is_integer_dtype(dtype):
        return "integer"
    if kind in ("O", "U"):
        return "string"
    if kind == "S":
        return "binary"
    return "other"


def kind_encoding(kind: str) -> str:
    """How a model encodes a column of a usable ``kind``; an unusable kind as it is.

    Examples
    --------
    >>> kind_encoding("integer"), kind_encoding("string"), kind_encoding("datetime")
    ('numeric', 'categorical', 'datetime')
    """
    return _ENCODING.get(kind, kind)


def encoding(name: str, dtype: Any) -> str:
    """``NUMERIC`` or ``CATEGORICAL`` for a column, else a ``TypeError`` naming it and the fix.

    Parameters
    ----------
    name : str
        Column name, for the message.
    dtype : pandas or NumPy dtype

    Returns
    -------
    str

    Examples
    --------
    >>> import numpy as np
    >>> encoding("age", np.dtype("float64")), encoding("city", np.dtype(object))
    ('numeric', 'categorical')
    """
    kind = pandas_kind(dtype)
    if kind in _ENCODING:
        return _ENCODING[kind]
    raise TypeError(
        f"Column {name!r} has dtype {dtype} ({kind}), which the model cannot use: "
        f"{FIXES.get(kind, FIXES['other'])}, or drop it."
    )
