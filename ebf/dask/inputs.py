"""The input passes of a distributed fit: schema checks, the summary pass, the encoding pass.

An EBF's trunk is a CART fit on *all* the data (Taddy et al. 2015, Sec. 4), so the encoder
and the checks must see every partition. Each step calls the single-process code on the
partitions and merges the results through the seams the local classes own:

1. :func:`check_inputs` (graph metadata only, no data read): the feature columns of the
   empty ``X._meta`` go through ``FeatureEncoder.summarize``, the same column-kind check
   every local fit runs; the target is not a feature; target and weight dtypes.
2. :func:`summarize` (one pass): every partition returns ``FeatureEncoder.summarize`` of
   its features plus its target and weight checks; the driver merges the summaries with
   ``FeatureEncoder.from_summaries`` (the encoder ``FeatureEncoder().fit(X.compute())``
   learns) and raises every input error with counts over all rows, before the trunk: the
   target's range too (``basics.validation.check_target_range``, as every local regressor).
3. :func:`encode` (one pass): every partition through ``encoder.transform`` into
   ``(A, y, w)``, kept on the workers; the codes equal those of the local ``fit_transform``.

Futures are only ever *computed* (never scattered), so a worker that dies takes nothing
with it that the scheduler cannot recompute.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from dask import delayed
from distributed import Client, Future
from pandas.api.types import is_bool_dtype, is_numeric_dtype
from sklearn.utils.multiclass import check_classification_targets

from basics.validation import check_target_not_in_features, check_target_range, is_missing

from ..features import ColumnSummary, FeatureEncoder
from .client import Report, gather, wait_for

logger = logging.getLogger(__name__)

#: Reserved names of the target and weight columns attached to the feature frame.
TARGET_COLUMN = "__ebf_target__"
WEIGHT_COLUMN = "__ebf_weight__"


@dataclass
class InputLayout:
    """What the graph metadata says about the input (no data read yet)."""

    names: list[str]
    target: str
    task: str
    has_weight: bool

    @property
    def n_features(self) -> int:
        return len(self.names)


def check_inputs(X: Any, y: Any, sample_weight: Any, task: str) -> tuple[Any, InputLayout]:
    """Schema checks from the metadata, then one frame holding features, target and weight.

    Parameters
    ----------
    X : dask.dataframe.DataFrame
        Features (numeric, bool, string, object-of-strings or category columns).
    y : dask.dataframe.Series
        Target, partitioned like ``X`` (e.g. a column of the same DataFrame).
    sample_weight : dask.dataframe.Series or None
        Non-negative weights, partitioned like ``X``.
    task : {"regression", "classification"}

    Returns
    -------
    frame : dask.dataframe.DataFrame
        ``X`` with the target (and weight) as extra columns under reserved names.
    layout : InputLayout

    Raises
    ------
    TypeError
        A column (named) of a dtype the model cannot use, or inputs that are not Dask
        collections.
    ValueError
        Target among the features, duplicated or reserved column names, no columns.

    Examples
    --------
    >>> import dask.dataframe as dd, pandas as pd
    >>> df = dd.from_pandas(pd.DataFrame({"a": [1.0, 2.0], "t": [0.0, 1.0]}), npartitions=1)
    >>> check_inputs(df[["a"]], df["t"], None, "regression")[1].names
    ['a']
    """
    import dask.dataframe as dd

    if not isinstance(X, dd.DataFrame):
        raise TypeError(f"X must be a dask DataFrame, got {type(X).__name__}; use the local "
                        "estimators (ebf.EmpiricalBayesianForestRegressor ...) for in-memory data.")
    if isinstance(y, dd.DataFrame) and len(y.columns) == 1:
        y = y[y.columns[0]]
    if not isinstance(y, dd.Series):
        raise TypeError(f"y must be a dask Series (e.g. ddf[target]), got {type(y).__name__}.")
    if sample_weight is not None and not isinstance(sample_weight, dd.Series):
        raise TypeError(f"sample_weight must be a dask Series or None, got "
                        f"{type(sample_weight).__name__}.")
    check_target_not_in_features(X, y)
    meta = FeatureEncoder.summarize(X._meta)  # column names and kinds, as every local fit
    if not meta.names:
        raise ValueError("X has 0 feature columns while a minimum of 1 is required.")
    reserved = [c for c in meta.names if c in (TARGET_COLUMN, WEIGHT_COLUMN)]
    if reserved:
        raise ValueError(f"X has the reserved column name(s) {reserved}; rename them.")
    target = "y" if y.name is None else str(y.name)
    _check_value_dtype(target, y.dtype, "the target", numeric_only=task == "regression")
    columns = {TARGET_COLUMN: y}
    if sample_weight is not None:
        _check_value_dtype("sample_weight", sample_weight.dtype, "sample_weight", True)
        columns[WEIGHT_COLUMN] = sample_weight
    try:
        frame = X.assign(**columns)
    except (ValueError, NotImplementedError) as exc:
        raise ValueError(
            "X, y (and sample_weight) must be partitioned alike, e.g. columns of one dask "
            f"DataFrame (ddf[features], ddf[target]); aligning them failed: {exc}"
        ) from exc
    return frame, InputLayout(meta.names, target, task, sample_weight is not None)


def _check_value_dtype(name: str, dtype: Any, what: str, numeric_only: bool) -> None:
    ok = is_numeric_dtype(dtype) or is_bool_dtype(dtype) or (
        isinstance(dtype, np.dtype) and dtype.kind == "O")
    if not numeric_only:
        ok = ok or isinstance(dtype, (pd.CategoricalDtype, pd.StringDtype))
    if not ok or (isinstance(dtype, np.dtype) and dtype.kind in "cmM"):
        raise TypeError(f"{what} column {name!r} has dtype {dtype}, which cannot be used; "
                        "convert it to a numeric dtype.")


def check_columns(model: Any, X: Any, layout: InputLayout) -> None:
    """New rows for a fitted ``model`` (``partial_fit``) must have its training columns, in
    order and of the same kinds; checked on the metadata, before any data is read."""
    names = [str(c) for c in model.encoder_.names_]
    if [str(c) for c in layout.names] != names:
        raise ValueError(
            f"X has {len(layout.names)} columns {list(layout.names)[:10]}, the model was "
            f"trained on {len(names)}: {names[:10]}; select them in that order "
            "(X[list(model.feature_names_in_)]).")
    model.encoder_.transform(X._meta, caller=type(model).__name__)  # kinds, dtypes


def check_known_labels(layout: InputLayout, summary: Any, classes: np.ndarray | None) -> None:
    """Labels of new rows must be classes the model was fitted with (``partial_fit``)."""
    if classes is None:
        return
    unknown = np.setdiff1d(summary.classes, classes)
    if unknown.size:
        raise ValueError(
            f"target {layout.target!r} has {unknown.size} label(s) the model never saw "
            f"({unknown.tolist()[:5]}); its classes are {classes.tolist()[:10]}. Refit with "
            "fit(X, y) to add a class.")


# ---------------------------------------------------------------------- summary pass


@dataclass
class PartitionSummary:
    """One partition's contribution to the summary pass."""

    columns: ColumnSummary
    y_missing: int
    y_inf: int
    y_values: np.ndarray | None = None
    y_low: float = np.inf  # regression: the smallest and largest finite targets
    y_high: float = -np.inf
    w_bad: int = 0
    w_negative: int = 0
    w_sum: float = 0.0


def _target_values(part: pd.DataFrame) -> np.ndarray:
    y = np.asarray(part[TARGET_COLUMN].to_numpy())
    if y.dtype == object:
        y = np.where(is_missing(y), np.nan, y)
    return y


def _summarize_partition(part: pd.DataFrame, layout: InputLayout) -> PartitionSummary:
    """Everything the driver needs from one partition to build the encoder and check y."""
    columns = FeatureEncoder.summarize(part.iloc[:, :layout.n_features])
    y = _target_values(part)
    if layout.task == "regression":
        try:
            y = y.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"target {layout.target!r} must be numeric for regression; got "
                             f"values of dtype {y.dtype}.") from exc
    missing = is_missing(y)
    out = PartitionSummary(columns, int(missing.sum()),
                           int(np.isinf(y).sum()) if y.dtype.kind == "f" else 0)
    if layout.task == "classification":
        kept = y[~missing]
        out.y_values = np.unique(kept) if kept.size else None
    else:
        finite = y[np.isfinite(y)]
        if finite.size:
            out.y_low, out.y_high = float(finite.min()), float(finite.max())
    if layout.has_weight:
        w = part[WEIGHT_COLUMN].to_numpy(dtype=np.float64, na_value=np.nan)
        out.w_bad = int((~np.isfinite(w)).sum())
        out.w_negative = int((w < 0).sum())
        out.w_sum = float(np.sum(w[np.isfinite(w)]))
    return out


@dataclass
class InputSummary:
    """Result of the summary pass: partition lengths, the encoder, the classes, and whether
    the model takes missing values in ``X`` (the encoder then keeps them as NaN)."""

    lengths: np.ndarray
    encoder: FeatureEncoder
    classes: np.ndarray | None
    allow_nan: bool = False

    @property
    def n(self) -> int:
        return int(self.lengths.sum())


def summarize(client: Client, frame: Any, layout: InputLayout,
              report: Report | None = None, allow_nan: bool = False) -> InputSummary:
    """One pass over the partitions; raises every input error with global counts.

    The encoder is ``FeatureEncoder.from_summaries`` of the partitions' summaries, which
    equals ``FeatureEncoder().fit(X.compute())``.

    Parameters
    ----------
    client : distributed.Client
    frame, layout :
        From :func:`check_inputs`.
    report : callable ``report(done, total)``, optional
    allow_nan : bool, default=False
        The model takes missing values in numeric features (its ``_missing_values``).

    Returns
    -------
    InputSummary
    """
    tasks = [delayed(_summarize_partition)(p, layout) for p in frame.to_delayed()]
    parts: list[PartitionSummary] = gather(client, client.compute(tasks), report)
    lengths = np.array([p.columns.n_rows for p in parts], dtype=np.int64)
    n = int(lengths.sum())
    if n == 0:
        raise ValueError(f"no rows to fit on: the data has 0 rows in {len(parts)} "
                         "partition(s) and a fit needs at least 1; add rows.")
    encoder = FeatureEncoder.from_summaries([p.columns for p in parts], allow_nan)
    classes = _check_target(layout, parts, n)
    if layout.has_weight:
        bad = sum(p.w_bad for p in parts)
        neg = sum(p.w_negative for p in parts)
        if bad or neg:
            raise ValueError(f"sample_weight has {bad} NaN or inf and {neg} negative value(s) "
                             f"out of {n} rows; weights must be finite and non-negative.")
        if not sum(p.w_sum for p in parts) > 0:
            raise ValueError("sample_weight sums to zero: the trunk has no weight to split.")
    return InputSummary(lengths, encoder, classes, allow_nan)


def _check_target(layout: InputLayout, parts: list[PartitionSummary],
                  n: int) -> np.ndarray | None:
    missing = [p.y_missing for p in parts]
    inf = sum(p.y_inf for p in parts)
    if sum(missing) or inf:
        where = [i for i, m in enumerate(missing) if m]
        full = [i for i in where if missing[i] == parts[i].columns.n_rows]
        raise ValueError(
            f"target {layout.target!r} has {sum(missing)} missing (NaN / None) and {inf} "
            f"infinite value(s) out of {n} rows"
            + (f", in partition(s) {where[:10]}" if where else "")
            + (f" (partition(s) {full[:10]} entirely missing)" if full else "")
            + "; drop those rows (ddf.dropna(subset=[target])) or impute them."
        )
    if layout.task != "classification":  # the range every local regressor checks too
        check_target_range(min(p.y_low for p in parts), max(p.y_high for p in parts),
                           layout.target)
        return None
    values = [p.y_values for p in parts if p.y_values is not None]
    classes = np.unique(np.concatenate(values))
    check_classification_targets(classes)
    return classes


# ----------------------------------------------------------------------- encoded rows


@dataclass
class EncodedData:
    """Encoded partitions ``(A, y, w)`` held on the workers, in partition order.

    ``A``: float64 ``(rows, n_features)``; ``y``: float64 (regression) or int64 class codes;
    ``w``: float64 weights or None. Row ``i`` of partition ``p`` has the global row id
    ``offsets[p] + i``, its position in ``X.compute()``.
    """

    futures: list[Future]
    lengths: np.ndarray
    n_features: int
    task: str
    n_classes: int
    has_weight: bool
    offsets: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths)[:-1]]).astype(np.int64)

    @property
    def n(self) -> int:
        return int(self.lengths.sum())

    def release(self) -> None:
        """Drop the encoded partitions (the workers free them once nothing depends on them)."""
        self.futures = []


def encode_partition(part: pd.DataFrame, encoder: FeatureEncoder, layout: InputLayout,
                     classes: np.ndarray | None, allow_nan: bool = False) -> tuple:
    """One partition to ``(A, y, w)``: encoded features, targets (class codes if
    ``classes``) and weights, as every later pass reads them."""
    A = encoder.transform(part, caller="ebf.dask", allow_nan=allow_nan)
    y = _target_values(part)
    if classes is None:
        y = y.astype(np.float64)
    else:
        y = np.searchsorted(classes, y).astype(np.int64)
    w = None
    if layout.has_weight:
        w = part[WEIGHT_COLUMN].to_numpy(dtype=np.float64)
    return A, y, w


def encode(client: Client, frame: Any, layout: InputLayout, summary: InputSummary,
           report: Report | None = None) -> EncodedData:
    """Encode every partition on the workers with the summary's encoder (second pass).

    Parameters
    ----------
    client : distributed.Client
    frame, layout :
        From :func:`check_inputs`.
    summary : InputSummary
        From :func:`summarize`.
    report : callable ``report(done, total)``, optional

    Returns
    -------
    EncodedData
    """
    tasks = [delayed(encode_partition)(p, summary.encoder, layout, summary.classes,
                                       summary.allow_nan)
             for p in frame.to_delayed()]
    futures = client.compute(tasks)
    wait_for(client, futures, report)
    n_classes = 0 if summary.classes is None else len(summary.classes)
    return EncodedData(futures, summary.lengths, layout.n_features, layout.task, n_classes,
                       layout.has_weight)
