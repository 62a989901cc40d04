"""Quantile bin edges per feature and the numba kernel that maps raw values to bin codes.

The trunk (paper Sec. 4) is a CART fit on all the data; like scikit-learn's histogram
gradient boosting we search splits over at most ``MAX_BINS`` bins per feature instead of
every distinct value. Edges are the contract between binning, splitting and routing
(``docs/architecture.md``): ``edges[f]`` is a strictly increasing float64 array of at most
``max_bins - 1`` values and ``code = searchsorted(edges[f], x, side="left")``, so
``code <= b`` iff ``x <= edges[f][b]``. Codes are one byte while every feature has at most
``MAX_BINS`` bins (the trunk's limit), else two (the forests' histogram trees, up to
``MAX_WIDE_BINS``).

Missing values (NaN) get their own code, one past the last bin of the widest feature:
:func:`missing_code` ``= n_bins_of(edges) - 1``, the last slot of every histogram. A split
sends them to the side that decreases the impurity most (``splitting.scan_node``, as
scikit-learn's ``HistGradientBoosting``); edges are computed from the finite values only.
A split that sends every finite value left and the missing values right has the threshold
:data:`ALL_VALUES` (its bin is the feature's last, ``len(edges[f])``).

How edges are computed, in one process or on a cluster:

* a feature with at most ``max_bins`` distinct values gets the midpoints between
  consecutive distinct values (every distinct value has its own bin, so the histogram CART
  sees every threshold the exact CART would see); :func:`edges_from_sample` gives the same
  edges for a column and for its distinct values, so a distributed caller may pass the
  union of per-partition distinct values;
* otherwise the edges are the quantiles at :func:`quantile_levels` of the column (or of a
  sample of it), cleaned by :func:`edges_from_quantiles`; a distributed caller computes
  approximate quantiles at those levels and passes them to the same function.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numba
import numpy as np

from basics.jit import JIT

from .config import BIN_DTYPE, BIN_SUBSAMPLE, MAX_BINS, MAX_WIDE_BINS, WIDE_BIN_DTYPE

#: The threshold of a split whose left side holds every finite value (the missing values go
#: right): the largest float64, so ``x <= ALL_VALUES`` for every finite ``x``.
ALL_VALUES = float(np.finfo(np.float64).max)


def _check_max_bins(max_bins: int) -> int:
    if not 2 <= int(max_bins) <= MAX_WIDE_BINS:
        raise ValueError(
            f"max_bins must be an integer in [2, {MAX_WIDE_BINS}] (bin codes are at most two "
            f"bytes), got {max_bins!r}."
        )
    return int(max_bins)


def quantile_levels(max_bins: int = MAX_BINS) -> np.ndarray:
    """Probability levels at which a feature's quantiles become its bin edges.

    Parameters
    ----------
    max_bins : int, default=MAX_BINS
        Number of bins; there are ``max_bins - 1`` inner levels ``j / max_bins``.

    Returns
    -------
    levels : ndarray of shape (max_bins - 1,)
        Strictly increasing levels in (0, 1).

    Examples
    --------
    >>> quantile_levels(4)
    array([0.25, 0.5 , 0.75])
    """
    max_bins = _check_max_bins(max_bins)
    return np.arange(1, max_bins) / max_bins


def _finite_values(values: Any, what: str) -> np.ndarray:
    """``values`` as a flat float64 array; NaN or inf raise, with their count."""
    v = np.asarray(values, dtype=np.float64).ravel()
    if not np.isfinite(v).all():
        raise ValueError(
            f"{what} must be finite, got {int((~np.isfinite(v)).sum())} NaN or inf "
            f"out of {v.size}."
        )
    return v


def edges_from_quantiles(quantiles: Any, max_bins: int = MAX_BINS) -> np.ndarray:
    """Bin edges of one feature from its quantile values (exact or approximate).

    Sorts, drops repeated values (a heavy atom gives several equal quantiles) and returns
    the edges in the dtype and shape the binning contract requires. Every path to edges,
    in one process or distributed, ends here.

    Parameters
    ----------
    quantiles : array-like of shape (n_values,)
        Quantile values of one feature, e.g. at :func:`quantile_levels`; order and
        repeats do not matter. Must be finite.
    max_bins : int, default=MAX_BINS
        Number of bins; at most ``max_bins - 1`` distinct values are accepted.

    Returns
    -------
    edges : ndarray of shape (n_edges,), float64
        Strictly increasing, ``n_edges <= max_bins - 1``.

    Examples
    --------
    >>> edges_from_quantiles([2.0, 1.0, 2.0, 3.5], max_bins=8)
    array([1. , 2. , 3.5])
    """
    max_bins = _check_max_bins(max_bins)
    q = _finite_values(quantiles, "quantile values")
    edges = np.unique(q)
    if edges.size > max_bins - 1:
        raise ValueError(
            f"{edges.size} distinct quantile values give more than max_bins - 1 = "
            f"{max_bins - 1} edges; compute them at quantile_levels(max_bins)."
        )
    return np.ascontiguousarray(edges)


def edges_from_sample(values: Any, max_bins: int = MAX_BINS,
                      exact_bins: int | None = None) -> np.ndarray:
    """Bin edges of one feature from its values (the whole column or a sample of it).

    With at most ``max(max_bins, exact_bins)`` distinct values the edges are the midpoints
    between consecutive distinct values (exact bins: the result is the same for the column
    and for its set of distinct values). Otherwise they are the quantiles at
    :func:`quantile_levels` of ``max_bins`` (``method="midpoint"``, as scikit-learn's
    binner).

    Parameters
    ----------
    values : array-like of shape (n_values,)
        Values of one feature; NaN (missing) values are left out, infinities refused.
    max_bins : int, default=MAX_BINS
        Number of bins.
    exact_bins : int or None, default=None
        A feature with up to this many distinct values gets one bin per value even beyond
        ``max_bins`` (times in minutes, codes), so only continuous features are quantized.

    Returns
    -------
    edges : ndarray of shape (n_edges,), float64
        Strictly increasing, ``n_edges <= max_bins - 1`` (empty for a constant feature).

    Examples
    --------
    >>> edges_from_sample([3.0, 1.0, 1.0, 2.0])
    array([1.5, 2.5])
    """
    max_bins = _check_max_bins(max_bins)
    exact = max_bins if exact_bins is None else max(max_bins, _check_max_bins(exact_bins))
    v = np.asarray(values, dtype=np.float64).ravel()
    v = _finite_values(v[~np.isnan(v)], "feature values")
    if v.size == 0:
        return np.empty(0)
    distinct = np.unique(v)
    if distinct.size <= exact:
        return edges_from_quantiles(0.5 * (distinct[:-1] + distinct[1:]), exact)
    q = np.quantile(v, quantile_levels(max_bins), method="midpoint")
    return edges_from_quantiles(q, max_bins)


def bin_edges(
    X: Any,
    max_bins: int = MAX_BINS,
    subsample: int | None = BIN_SUBSAMPLE,
    random_state: int | np.random.Generator | None = 0,
    exact_bins: int | None = None,
) -> list[np.ndarray]:
    """Quantile bin edges of every feature of ``X``.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Finite numeric data.
    max_bins : int, default=MAX_BINS
        Number of bins per feature (at most ``MAX_WIDE_BINS``).
    subsample : int or None, default=200_000
        If ``X`` has more rows, the edges are computed on this many rows drawn without
        replacement (the same rows for every feature); None uses every row.
    random_state : int, Generator or None, default=0
        Seed of the subsample, so that edges are reproducible by default.
    exact_bins : int or None, default=None
        Features with at most this many distinct values get one bin per value
        (:func:`edges_from_sample`).

    Returns
    -------
    edges : list of ndarray
        ``edges[f]`` as in :func:`edges_from_sample`.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.0, 5.0], [1.0, 5.0], [2.0, 5.0]])
    >>> [e.tolist() for e in bin_edges(X)]
    [[0.5, 1.5], []]
    """
    max_bins = _check_max_bins(max_bins)
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D, got shape {X.shape}.")
    rows = sample_rows(X.shape[0], subsample, random_state)
    if rows is not None:
        X = X[rows]  # sampled before any float64 copy of all the rows
    X = X.astype(np.float64, copy=False)
    return [edges_from_sample(X[:, f], max_bins, exact_bins) for f in range(X.shape[1])]


def sample_rows(n: int, subsample: int | None = BIN_SUBSAMPLE,
                random_state: int | np.random.Generator | None = 0) -> np.ndarray | None:
    """Sorted row positions :func:`bin_edges` computes the edges on (None: every row).

    The distributed layer gathers the same global rows, so its edges equal the local ones.

    Examples
    --------
    >>> sample_rows(10) is None, sample_rows(10, subsample=3).size
    (True, 3)
    """
    if subsample is None or n <= subsample:
        return None
    rng = np.random.default_rng(random_state)
    return np.sort(rng.choice(n, size=int(subsample), replace=False))


def check_bin_edges(edges: Sequence[Any], n_features: int) -> list[np.ndarray]:
    """Validate user-supplied edges against the binning contract; return float64 copies.

    Parameters
    ----------
    edges : sequence of array-like
        One array of edges per feature.
    n_features : int
        Expected number of features.

    Returns
    -------
    edges : list of ndarray
        Contiguous float64 arrays.

    Examples
    --------
    >>> check_bin_edges([[0.5, 1.5]], 1)[0].dtype
    dtype('float64')
    """
    if len(edges) != n_features:
        raise ValueError(f"bin_edges has {len(edges)} features but X has {n_features}.")
    out = []
    for f, e in enumerate(edges):
        a = np.ascontiguousarray(np.asarray(e, dtype=np.float64).ravel())
        if a.size > MAX_BINS - 1:
            raise ValueError(
                f"bin_edges[{f}] has {a.size} edges; at most MAX_BINS - 1 = {MAX_BINS - 1}."
            )
        if not np.isfinite(a).all():
            raise ValueError(
                f"bin_edges[{f}] holds {int((~np.isfinite(a)).sum())} NaN or inf values."
            )
        if a.size > 1 and not (np.diff(a) > 0).all():
            raise ValueError(f"bin_edges[{f}] is not strictly increasing.")
        out.append(a)
    return out


def n_bins_of(edges: Sequence[np.ndarray]) -> int:
    """Number of slots a histogram needs for these edges: ``1 + max(len(edges[f]))`` bins
    and the missing-value slot (:func:`missing_code`).

    Parameters
    ----------
    edges : sequence of ndarray
        Bin edges per feature.

    Returns
    -------
    n_bins : int

    Examples
    --------
    >>> import numpy as np
    >>> n_bins_of([np.array([0.5]), np.array([1.0, 2.0, 3.0])])
    5
    """
    return 2 + max((len(e) for e in edges), default=0)


def missing_code(edges: Sequence[np.ndarray]) -> int:
    """The bin code of a missing value (NaN): ``n_bins_of(edges) - 1``, above every bin.

    Examples
    --------
    >>> missing_code([np.array([0.5]), np.array([1.0, 2.0, 3.0])])
    4
    """
    return n_bins_of(edges) - 1


def split_threshold(edges: Sequence[np.ndarray], feature: int, bin_: int) -> float:
    """The raw threshold of split bin ``bin_`` of ``feature``: ``edges[feature][bin_]``,
    or :data:`ALL_VALUES` for the feature's last bin (every finite value left).

    Examples
    --------
    >>> split_threshold([np.array([0.5, 1.5])], 0, 1), split_threshold([np.array([0.5])], 0, 1)
    (1.5, 1.7976931348623157e+308)
    """
    e = edges[feature]
    return float(e[bin_]) if bin_ < len(e) else ALL_VALUES


def pack_edges(edges: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Edges as one ``(n_features, max_edges)`` array padded with +inf, plus the counts.

    Parameters
    ----------
    edges : sequence of ndarray
        Bin edges per feature.

    Returns
    -------
    packed : ndarray of shape (n_features, max(1, max_edges)), float64
    n_edges : ndarray of shape (n_features,), int64

    Examples
    --------
    >>> import numpy as np
    >>> packed, n = pack_edges([np.array([0.5]), np.array([1.0, 2.0])])
    >>> n.tolist(), packed.shape
    ([1, 2], (2, 2))
    """
    n_edges = np.array([len(e) for e in edges], dtype=np.int64)
    width = max(1, int(n_edges.max(initial=0)))
    packed = np.full((len(edges), width), np.inf)
    for f, e in enumerate(edges):
        packed[f, : len(e)] = e
    return packed, n_edges


@numba.njit(**JIT)
def _bin_kernel(X, packed, n_edges, missing, out):
    """``out[i, f] = searchsorted(packed[f, :n_edges[f]], X[i, f], side="left")``, and
    ``missing`` for NaN."""
    n, d = X.shape
    for i in range(n):
        for f in range(d):
            x = X[i, f]
            if x != x:
                out[i, f] = missing
                continue
            lo = 0
            hi = n_edges[f]
            while lo < hi:
                mid = (lo + hi) >> 1
                if packed[f, mid] < x:
                    lo = mid + 1
                else:
                    hi = mid
            out[i, f] = lo


def bin_data(X: Any, edges: Sequence[np.ndarray]) -> np.ndarray:
    """Bin codes of raw values: ``code = searchsorted(edges[f], x, side="left")``.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Raw values, NaN for missing (no infinities: validate first); float32 values are
        compared with the float64 edges exactly, as scikit-learn's trees compare them.
    edges : sequence of ndarray
        Bin edges per feature, e.g. from :func:`bin_edges`.

    Returns
    -------
    binned : ndarray of shape (n_samples, n_features), uint8 or uint16, C-contiguous
        ``binned[i, f] <= b`` iff ``X[i, f] <= edges[f][b]``; :func:`missing_code` where
        ``X[i, f]`` is NaN; uint16 if a feature has more than ``MAX_BINS - 1`` edges.

    Examples
    --------
    >>> import numpy as np
    >>> bin_data(np.array([[0.0], [0.5], [0.7], [9.0], [np.nan]]), [np.array([0.5, 1.0])]).ravel()
    array([0, 0, 1, 2, 3], dtype=uint8)
    """
    X = np.asarray(X)
    if X.dtype not in (np.float32, np.float64):  # float32 is binned as is, without a copy
        X = X.astype(np.float64)
    if X.ndim != 2 or X.shape[1] != len(edges):
        raise ValueError(
            f"X must be 2-D with {len(edges)} columns (one per edge array), got {X.shape}."
        )
    packed, n_edges = pack_edges(edges)
    wide = int(n_edges.max(initial=0)) > MAX_BINS - 1
    out = np.empty(X.shape, dtype=WIDE_BIN_DTYPE if wide else BIN_DTYPE)
    _bin_kernel(X, packed, n_edges, missing_code(edges), out)
    return out
