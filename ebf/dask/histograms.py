"""The passes over the partitions up to and including the trunk (paper Sec. 4-5).

An EBF's trunk is a CART fit on *all* the data (Sec. 4); Sec. 5 notes that it "can itself
be fit in distribution". This module holds every pass over the input partitions that comes
before the rows move, each calling the single-process function on the partition:

1. :func:`check_inputs` (graph metadata only, no data read): column names and kinds
   (``ebf.features._column_kind``), target among the features, dtypes of target and weight.
2. :func:`summarize` (one pass): rows per partition, categories of every categorical
   column with their counts, NaN / inf counts of numeric columns, target and weight checks.
   From these the driver builds a :class:`~ebf.features.FeatureEncoder` whose state equals
   that of ``FeatureEncoder().fit(X.compute())``, and the sorted classes.
3. :func:`encode` (one pass): every partition through ``encoder.transform`` into
   ``(A, y, w)`` held on the workers; the codes equal those of the local ``fit_transform``.
4. :func:`sample_bin_edges`: the rows ``binning.bin_edges`` would draw (200k of them with
   seed 0, or all rows), gathered by (partition, offset), then the same function.
5. :class:`DaskHistogramSource`: the trunk grower's histogram source; per level every
   partition runs ``trunk.node_histograms`` on its binned rows and the results are summed
   by a k-ary tree of tasks.

Futures are only ever *computed* (never scattered), so a worker that dies takes nothing
with it that the scheduler cannot recompute.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from dask import delayed
from distributed import Client, Future
from pandas.api.types import is_bool_dtype, is_numeric_dtype
from sklearn.utils.multiclass import check_classification_targets

from .. import binning
from .._base import check_target_not_in_features, is_missing
from ..features import _BOOL_CATEGORIES, CATEGORICAL, NUMERIC, FeatureEncoder, _column_kind
from ..features import _local_codes as local_codes
from ..histogram import row_statistics
from ..trunk import TrunkArrays, node_histograms
from .client import Report, gather, wait_for

logger = logging.getLogger(__name__)

#: Reserved names of the target and weight columns attached to the feature frame.
TARGET_COLUMN = "__ebf_target__"
WEIGHT_COLUMN = "__ebf_weight__"

#: Histograms summed per reduction task (fan-in of the reduction tree).
SPLIT_EVERY = 8

# -------------------------------------------------------------------------- input layout


@dataclass
class InputLayout:
    """What the graph metadata says about the input (no data read yet)."""

    names: list[str]
    kinds: list[str]
    dtypes: list[str]
    bools: list[bool]
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
    >>> check_inputs(df[["a"]], df["t"], None, "regression")[1].kinds
    ['numeric']
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
    names = [str(c) for c in X.columns]
    if len(set(names)) != len(names):
        dup = sorted({c for c in names if names.count(c) > 1})
        raise ValueError(f"X has duplicated column names {dup}; rename them.")
    if not names:
        raise ValueError("X has 0 feature columns while a minimum of 1 is required.")
    reserved = [c for c in names if c in (TARGET_COLUMN, WEIGHT_COLUMN)]
    if reserved:
        raise ValueError(f"X has the reserved column name(s) {reserved}; rename them.")
    kinds = [_column_kind(name, dtype) for name, dtype in zip(names, X.dtypes, strict=True)]
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
    layout = InputLayout(names, kinds, [str(t) for t in X.dtypes],
                         [is_bool_dtype(t) for t in X.dtypes], target, task,
                         sample_weight is not None)
    return frame, layout


def _check_value_dtype(name: str, dtype: Any, what: str, numeric_only: bool) -> None:
    ok = is_numeric_dtype(dtype) or is_bool_dtype(dtype) or (
        isinstance(dtype, np.dtype) and dtype.kind == "O")
    if not numeric_only:
        ok = ok or isinstance(dtype, (pd.CategoricalDtype, pd.StringDtype))
    if not ok or (isinstance(dtype, np.dtype) and dtype.kind in "cmM"):
        raise TypeError(f"{what} column {name!r} has dtype {dtype}, which cannot be used; "
                        "convert it to a numeric dtype.")


# ---------------------------------------------------------------------- summary pass


def _summarize_partition(part: pd.DataFrame, layout: InputLayout) -> dict:
    """Everything the driver needs from one partition to build the encoder and check y."""
    d = layout.n_features
    out: dict[str, Any] = {"n": len(part), "nan": np.zeros(d, np.int64),
                           "inf": np.zeros(d, np.int64), "categories": {}}
    for j, name in enumerate(layout.names):
        col = part.iloc[:, j]
        if layout.kinds[j] == NUMERIC:
            v = col.to_numpy(dtype=np.float64, na_value=np.nan)
            out["nan"][j] = np.isnan(v).sum()
            out["inf"][j] = np.isinf(v).sum()
            continue
        local, uniques, is_cat = local_codes(name, col)
        counts = np.bincount(local[local >= 0], minlength=uniques.size)
        by_value: dict[str, int] = {}
        for u, c in zip(uniques.tolist(), counts.tolist(), strict=True):
            by_value[u] = by_value.get(u, 0) + int(c)
        out["categories"][j] = (uniques.tolist() if is_cat else None, by_value,
                                int((local < 0).sum()))
    y = np.asarray(part[TARGET_COLUMN].to_numpy())
    if y.dtype == object:
        y = np.where(is_missing(y), np.nan, y)
    if layout.task == "regression":
        try:
            y = y.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"target {layout.target!r} must be numeric for regression; got "
                             f"values of dtype {y.dtype}.") from exc
    missing = is_missing(y)
    out["y_missing"] = int(missing.sum())
    out["y_inf"] = int(np.isinf(y).sum()) if y.dtype.kind == "f" else 0
    if layout.task == "classification":
        kept = y[~missing]
        out["y_values"] = np.unique(kept) if kept.size else None
    if layout.has_weight:
        w = part[WEIGHT_COLUMN].to_numpy(dtype=np.float64, na_value=np.nan)
        out["w_bad"] = int((~np.isfinite(w)).sum())
        out["w_negative"] = int((w < 0).sum())
        out["w_sum"] = float(np.sum(w[np.isfinite(w)]))
    return out


@dataclass
class InputSummary:
    """Result of the summary pass: partition lengths, the encoder, the classes."""

    lengths: np.ndarray
    encoder: FeatureEncoder
    classes: np.ndarray | None


def summarize(client: Client, frame: Any, layout: InputLayout,
              report: Report | None = None) -> InputSummary:
    """One pass over the partitions; raises every input error with global counts.

    The encoder equals ``FeatureEncoder().fit(X.compute())``: numeric columns as they are;
    a ``category`` column keeps its categories (the union in order of first appearance if
    partitions differ, as ``cat.as_known()`` and ``compute()`` build it), a bool column
    ``["False", "True"]``, a string column its sorted distinct strings; the fallback code
    is the most frequent category over all rows (ties: the smaller code).

    Parameters
    ----------
    client : distributed.Client
    frame, layout :
        From :func:`check_inputs`.
    report : callable ``report(done, total)``, optional

    Returns
    -------
    InputSummary
    """
    tasks = [delayed(_summarize_partition)(p, layout) for p in frame.to_delayed()]
    parts = gather(client, client.compute(tasks), report)
    lengths = np.array([p["n"] for p in parts], dtype=np.int64)
    n, d = int(lengths.sum()), layout.n_features
    if n == 0:
        raise ValueError(f"Found 0 rows (shape=(0, {d})) in {len(parts)} partition(s) while a "
                         "minimum of 1 is required.")
    _check_numeric(layout, parts, n)
    encoder = _encoder(layout, parts)
    classes = _check_target(layout, parts, n)
    if layout.has_weight:
        bad = sum(p["w_bad"] for p in parts)
        neg = sum(p["w_negative"] for p in parts)
        if bad or neg:
            raise ValueError(f"sample_weight has {bad} NaN or inf and {neg} negative value(s) "
                             f"out of {n} rows; weights must be finite and non-negative.")
        if not sum(p["w_sum"] for p in parts) > 0:
            raise ValueError("sample_weight sums to zero: the trunk has no weight to split.")
    return InputSummary(lengths, encoder, classes)


def _check_numeric(layout: InputLayout, parts: list[dict], n: int) -> None:
    nan = np.sum([p["nan"] for p in parts], axis=0)
    inf = np.sum([p["inf"] for p in parts], axis=0)
    msgs = []
    for j in np.flatnonzero(nan + inf):
        kinds = [f"{int(c)} {what}" for c, what in ((nan[j], "NaN"), (inf[j], "inf")) if c]
        msgs.append(f"{layout.names[j]!r}: {' and '.join(kinds)}")
    if msgs:
        raise ValueError(
            f"X contains NaN or inf in {len(msgs)} column(s) ({'; '.join(msgs)}) out of {n} "
            "rows; drop or impute those values before fitting or predicting."
        )


def _encoder(layout: InputLayout, parts: list[dict]) -> FeatureEncoder:
    """The encoder ``FeatureEncoder().fit`` would learn on the concatenated partitions."""
    cats, fallback = [], []
    for j, name in enumerate(layout.names):
        if layout.kinds[j] != CATEGORICAL:
            cats.append(np.array([], dtype=str))
            fallback.append(-1)
            continue
        counts: dict[str, int] = {}
        order: dict[str, None] = {}  # category dtype: categories in order of first appearance
        is_cat = False
        n_missing = 0
        for p in parts:
            own, by_value, missing = p["categories"][j]
            n_missing += missing
            if own is not None:
                is_cat = True
                order.update(dict.fromkeys(own))
            for value, c in by_value.items():
                counts[value] = counts.get(value, 0) + c
        if is_cat:
            categories = np.array(list(order), dtype=str)
            if np.unique(categories).size != categories.size:
                raise ValueError(f"Column {name!r} has categories that coincide as strings; "
                                 "rename them.")
        elif layout.bools[j]:
            categories = _BOOL_CATEGORIES
        else:
            categories = np.unique(np.array(list(counts), dtype=str))
        per_code = np.array([counts.get(c, 0) for c in categories.tolist()], dtype=np.int64)
        if per_code.sum() == 0:
            raise ValueError(f"Column {name!r} has no non-missing values; drop it.")
        top = int(np.argmax(per_code))
        if n_missing:
            logger.warning("Column %r: %d missing value(s) coded as the most frequent "
                           "category %r (code %d).", name, n_missing, str(categories[top]), top)
        cats.append(categories)
        fallback.append(top)
    encoder = FeatureEncoder()
    encoder._set_state({
        "names": np.array(layout.names, dtype=str), "kinds": np.array(layout.kinds, dtype=str),
        "dtypes": np.array(layout.dtypes, dtype=str), "categories": cats,
        "fallback": np.array(fallback, dtype=np.int64), "has_names": True,
    })
    return encoder


def _check_target(layout: InputLayout, parts: list[dict], n: int) -> np.ndarray | None:
    missing = [p["y_missing"] for p in parts]
    inf = sum(p["y_inf"] for p in parts)
    if sum(missing) or inf:
        where = [i for i, m in enumerate(missing) if m]
        full = [i for i in where if missing[i] == parts[i]["n"]]
        raise ValueError(
            f"target {layout.target!r} has {sum(missing)} missing (NaN / None) and {inf} "
            f"infinite value(s) out of {n} rows"
            + (f", in partition(s) {where[:10]}" if where else "")
            + (f" (partition(s) {full[:10]} entirely missing)" if full else "")
            + "; drop those rows (ddf.dropna(subset=[target])) or impute them."
        )
    if layout.task != "classification":
        return None
    values = [p["y_values"] for p in parts if p["y_values"] is not None]
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


def _encode_partition(part: pd.DataFrame, encoder: FeatureEncoder, layout: InputLayout,
                      classes: np.ndarray | None) -> tuple:
    A = encoder.transform(part, caller="ebf.dask")
    y = np.asarray(part[TARGET_COLUMN].to_numpy())
    if y.dtype == object:
        y = np.where(is_missing(y), np.nan, y)
    if classes is None:
        y = y.astype(np.float64)
    else:
        codes = np.searchsorted(classes, y).astype(np.int64)
        y = codes
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
    tasks = [delayed(_encode_partition)(p, summary.encoder, layout, summary.classes)
             for p in frame.to_delayed()]
    futures = client.compute(tasks)
    wait_for(client, futures, report)
    n_classes = 0 if summary.classes is None else len(summary.classes)
    return EncodedData(futures, summary.lengths, layout.n_features, layout.task, n_classes,
                       layout.has_weight)


# -------------------------------------------------------------------------- bin edges


def _take_rows(enc: tuple, rows: np.ndarray | None) -> np.ndarray:
    A = enc[0]
    return A if rows is None else A[rows]


def sample_bin_edges(client: Client, data: EncodedData, max_bins: int) -> list[np.ndarray]:
    """Bin edges equal to ``binning.bin_edges(A, max_bins)`` of the concatenated rows.

    Parameters
    ----------
    client : distributed.Client
    data : EncodedData
    max_bins : int

    Returns
    -------
    edges : list of ndarray
    """
    rows = binning.sample_rows(data.n)
    if rows is None:
        parts = client.gather(client.map(_take_rows, data.futures, [None] * len(data.futures),
                                          pure=False))
        return binning.bin_edges(np.concatenate(parts), max_bins)
    part_of = np.searchsorted(data.offsets, rows, side="right") - 1
    wanted = np.unique(part_of)
    take = [rows[part_of == p] - data.offsets[p] for p in wanted]
    parts = client.gather(client.map(_take_rows, [data.futures[p] for p in wanted], take,
                                     pure=False))
    return binning.bin_edges(np.concatenate(parts), max_bins, subsample=None)


# ------------------------------------------------------------------- histogram source


def _bin_partition(enc: tuple, edges: list[np.ndarray], task: str,
                   n_classes: int | None) -> tuple[np.ndarray, np.ndarray]:
    A, y, w = enc
    return binning.bin_data(A, edges), row_statistics(y, w, task, n_classes)


def _partition_histogram(binned_part: tuple, trunk: TrunkArrays, open_nodes: np.ndarray,
                         n_bins: int) -> np.ndarray:
    binned, S = binned_part
    return node_histograms(trunk, open_nodes, binned, S, n_bins)


def _sum_arrays(*arrays: np.ndarray) -> np.ndarray:
    out = np.array(arrays[0], dtype=np.float64, copy=True)
    for a in arrays[1:]:
        out += a
    return out


def tree_reduce(client: Client, futures: list[Future], split_every: int = SPLIT_EVERY,
                prefix: str = "ebf-sum") -> Future:
    """Sum of the arrays behind ``futures`` by a k-ary tree of tasks (fixed order)."""
    level = 0
    while len(futures) > 1:
        futures = [
            client.submit(_sum_arrays, *futures[i:i + split_every], pure=False,
                          key=f"{prefix}-{level}-{i // split_every}")
            for i in range(0, len(futures), split_every)
        ]
        level += 1
    return futures[0]


class DaskHistogramSource:
    """Histogram source of ``trunk.grow_trunk`` over binned partitions on a cluster.

    Every partition is binned once (``binning.bin_data``) with its per-row statistics
    (``histogram.row_statistics``) and kept on the workers. Each call is stateless: every
    partition routes its rows from the root of the partial trunk and histograms the open
    nodes (``trunk.node_histograms``), and a tree of tasks sums the partition histograms.
    A lost partition is recomputed; sums of histograms are histograms (``LAYOUT.md``).

    Parameters
    ----------
    client : distributed.Client
    data : EncodedData
    edges : list of ndarray
        Bin edges (``trunk.bin_edges_``).
    split_every : int, default=SPLIT_EVERY
        Fan-in of the reduction tree.
    report : callable ``report(n_leaves, max_leaves)``, optional
    max_leaves : int or None
        Passed to ``report`` as the total (0 when None).

    Examples
    --------
    >>> src = DaskHistogramSource(client, data, edges)  # doctest: +SKIP
    >>> arrays = grow_trunk(src, edges, min_leaf_rows=100)  # doctest: +SKIP
    """

    def __init__(self, client: Client, data: EncodedData, edges: list[np.ndarray],
                 split_every: int = SPLIT_EVERY, report: Report | None = None,
                 max_leaves: int | None = None) -> None:
        import uuid

        self.client = client
        self.n_bins = binning.n_bins_of(edges)
        self.split_every = int(split_every)
        self.report = report
        self.max_leaves = max_leaves
        self.token = uuid.uuid4().hex[:12]
        n_classes = data.n_classes if data.task == "classification" else None
        self.parts = client.map(_bin_partition, data.futures, edges=edges, task=data.task,
                                n_classes=n_classes,
                                key=[f"ebf-binned-{self.token}-{p}"
                                     for p in range(len(data.futures))])
        self.calls = 0
        self.seconds: list[float] = []

    def __call__(self, trunk: TrunkArrays, open_nodes: np.ndarray) -> np.ndarray:
        t0 = time.perf_counter()
        call = self.calls
        hists = self.client.map(
            _partition_histogram, self.parts, trunk=trunk, open_nodes=open_nodes,
            n_bins=self.n_bins,
            key=[f"ebf-hist-{self.token}-{call}-{p}" for p in range(len(self.parts))],
        )
        total = tree_reduce(self.client, hists, self.split_every,
                            prefix=f"ebf-hist-sum-{self.token}-{call}")
        out = total.result()
        self.calls += 1
        self.seconds.append(time.perf_counter() - t0)
        logger.info("trunk level (call %d): %d open node(s), %d partition(s), %.2fs", call,
                    len(open_nodes), len(self.parts), self.seconds[-1])
        if self.report is not None:
            self.report(trunk.n_leaves, int(self.max_leaves or 0))
        return out

    def release(self) -> None:
        """Drop the binned partitions (the workers free them)."""
        self.parts = []
