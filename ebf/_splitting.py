"""Best split of every node from a summed histogram (a pure function).

Paper Sec. 2.2: within a node, every split candidate is scored by the decrease of the
theta-weighted impurity, weighted squared error (eq. 4) for regression and weighted Gini
for classification, and candidates must leave enough rows and enough weight
(the minimum leaf size / probability) on both sides. With the statistics of
``histogram.row_statistics`` the impurity of a node is

* regression: ``I = sum w y**2 - (sum w y)**2 / sum w`` (eq. 4),
* classification: ``I = W (1 - sum_c (W_c / W)**2) = W - sum_c W_c**2 / W``,

so the decrease of a split ``P -> (L, R)`` is ``I_P - I_L - I_R = q_L + q_R - q_P`` with
``q = (sum w y)**2 / sum w`` resp. ``q = sum_c W_c**2 / W``; the ``sum w y**2`` (resp.
``W``) terms cancel exactly and are never subtracted in floating point.

The Dask layer sums per-partition histograms and calls :func:`best_splits` on the driver,
so the split choice is identical to the single-process one up to the rounding of the sums.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from basics.flat_tree import INDEX, NO_NODE
from basics.jit import JIT

from .config import ROW_REG_STATS, SPLIT_RTOL


class SplitResult(NamedTuple):
    """Best split of every node of a histogram (one row per histogram slot).

    Attributes
    ----------
    gain : ndarray of shape (n_nodes,)
        Impurity decrease ``I_P - I_L - I_R`` of the best valid split; 0 if none.
    feature : ndarray of shape (n_nodes,), int64
        Split feature, ``-1`` if the node has no valid split with a positive decrease.
    bin : ndarray of shape (n_nodes,), int64
        Split bin ``b``: rows with ``code <= b`` (``x <= edges[feature][b]``) go left; -1.
    missing_left : ndarray of shape (n_nodes,), int64
        1 if the missing values (the histogram's last slot) go left, else 0.
    left, right : ndarray of shape (n_nodes, k)
        Statistic totals of the two children of the best split (zeros if none).
    total : ndarray of shape (n_nodes, k)
        Statistic totals of the node (sum over the bins of feature 0).
    """

    gain: np.ndarray
    feature: np.ndarray
    bin: np.ndarray
    missing_left: np.ndarray
    left: np.ndarray
    right: np.ndarray
    total: np.ndarray


class NodeHistogram(NamedTuple):
    """One node's histogram as the split search reads it.

    Attributes
    ----------
    h : ndarray of shape (n_features, n_slots, k)
        Statistic sums per feature and slot.
    n_bins : ndarray of shape (n_features,), int64
        Feature ``f`` has its bins in the slots ``0 .. n_bins[f] - 1``.
    missing_slot : ndarray of shape (n_features,), int64
        The slot of feature ``f``'s missing values, -1 if none.
    """

    h: np.ndarray
    n_bins: np.ndarray
    missing_slot: np.ndarray


class SplitRules(NamedTuple):
    """What makes a split valid: Gini or squared error, and the least rows and weight of
    each child."""

    classification: bool
    min_rows: float
    min_weight: float


@numba.njit(inline="always", **JIT)
def _weight_and_q(v, extra, use_extra, classification):
    """Total weight ``W`` and ``q`` (see module docstring) of the statistic vector ``v``,
    plus ``extra`` (a node's missing-value bin) if ``use_extra``."""
    if classification:
        w = 0.0
        sq = 0.0
        for c in range(1, v.shape[0]):
            x = v[c] + extra[c] if use_extra else v[c]
            w += x
            sq += x * x
        return w, (sq / w if w > 0.0 else 0.0)
    w = v[1] + extra[1] if use_extra else v[1]
    s = v[2] + extra[2] if use_extra else v[2]
    return w, (s * s / w if w > 0.0 else 0.0)


@numba.njit(**JIT)
def scan_node(hist, features, max_features, rules, q_p, suffix, cur):
    """Best split of one node's histogram ``hist`` (:class:`NodeHistogram`) under ``rules``
    (:class:`SplitRules`).

    The features are tried in the order of ``features``; once ``max_features`` of them
    hold rows in two groups or more (bins, or the missing values; features constant in the
    node do not count, as in scikit-learn), the search stops. A candidate "bin ``b``"
    sends the bins ``<= b`` left and the missing values to the side that decreases the
    impurity more (tried right first; left only beside some values, so that the split of
    the missing values from all others has one form: every value left, the missing ones
    right, at the lowest bin that holds them all, which may be the last bin).
    With no missing values in the node, they go at prediction to the side with more rows
    (scikit-learn's ``HistGradientBoosting`` rule). ``suffix`` (``(n_slots + 1, k)``) and
    ``cur`` (``(k,)``) are scratch. Returns ``(gain, feature, j, missing_left)``: bins
    ``<= j`` go left; ``feature`` is -1 if no candidate is valid. Ties keep the earlier
    feature, then the lower bin, then missing values right.
    """
    h, n_bins_f, miss_f = hist
    classification, min_rows, min_weight = rules
    k = h.shape[2]
    best = -np.inf
    best_f = -1
    best_b = -1
    best_ml = False
    tried = 0
    for t in range(features.shape[0]):
        if tried >= max_features:
            break
        f = features[t]
        nb = n_bins_f[f]
        ms = miss_f[f]
        has_m = ms >= 0 and h[f, ms, 0] > 0.0
        miss = h[f, ms] if ms >= 0 else h[f, 0]  # read only when has_m
        m0 = miss[0] if has_m else 0.0
        # suffix[b] = sum of bins >= b (right child of split b - 1), summed from the
        # top so that an empty right side is exactly zero
        for c in range(k):
            suffix[nb, c] = 0.0
        filled = 1 if has_m else 0
        for b in range(nb - 1, -1, -1):
            if h[f, b, 0] > 0.0:
                filled += 1
            for c in range(k):
                suffix[b, c] = suffix[b + 1, c] + h[f, b, c]
        if filled < 2:
            continue  # constant in the node: no split, and not counted
        tried += 1
        for c in range(k):
            cur[c] = 0.0
        for b in range(nb if has_m else nb - 1):
            for c in range(k):
                cur[c] += h[f, b, c]
            n_l = cur[0]
            n_r = suffix[b + 1, 0]
            if n_r + m0 < min_rows:
                break  # the right side only shrinks from here on
            if n_l >= min_rows:  # missing values right
                w_l, q_l = _weight_and_q(cur, miss, False, classification)
                w_r, q_r = _weight_and_q(suffix[b + 1], miss, has_m, classification)
                if w_l > 0.0 and w_r > 0.0 and w_l >= min_weight and w_r >= min_weight:
                    g = q_l + q_r - q_p
                    if g > best:  # strict: ties keep the earlier feature, then the lower bin
                        best = g
                        best_f = f
                        best_b = b
                        best_ml = (not has_m) and n_l >= n_r
            # missing values left, beside some values (the split of the missing values
            # from all others is the candidate above at the last occupied bin)
            if has_m and b < nb - 1 and n_l > 0.0 and n_l + m0 >= min_rows and n_r >= min_rows:
                w_l, q_l = _weight_and_q(cur, miss, True, classification)
                w_r, q_r = _weight_and_q(suffix[b + 1], miss, False, classification)
                if w_l > 0.0 and w_r > 0.0 and w_l >= min_weight and w_r >= min_weight:
                    g = q_l + q_r - q_p
                    if g > best:
                        best = g
                        best_f = f
                        best_b = b
                        best_ml = True
    return best, best_f, best_b, best_ml


@numba.njit(**JIT)
def split_scale(total, classification):
    """``(q, scale)`` of a node's statistic totals: ``q`` of the module docstring and the
    size of the sums that cancel in a decrease (a decrease below ``rtol * scale`` is
    rounding noise)."""
    w_p, q_p = _weight_and_q(total, total, False, classification)
    return q_p, (w_p if classification else total[3])


@numba.njit(**JIT)
def _best_splits_kernel(hist, classification, min_rows, min_weight, rtol, out):
    gain, feature, bin_, missing_left, left, right, total = out
    m, d, n_slots, k = hist.shape
    nb = n_slots - 1  # the last slot holds the missing values
    suffix = np.zeros((n_slots + 1, k))
    cur = np.zeros(k)
    n_bins_f = np.full(d, nb, np.int64)
    miss_f = np.full(d, nb, np.int64)
    features = np.arange(d)
    rules = SplitRules(classification, min_rows, min_weight)
    for j in range(m):
        for c in range(k):
            acc = 0.0
            for b in range(n_slots):
                acc += hist[j, 0, b, c]
            total[j, c] = acc
        q_p, scale = split_scale(total[j], classification)
        best, best_f, best_b, best_ml = scan_node(
            NodeHistogram(hist[j], n_bins_f, miss_f), features, d, rules, q_p, suffix, cur)
        if best_f < 0 or not best > rtol * scale:
            gain[j] = 0.0
            feature[j] = NO_NODE
            bin_[j] = NO_NODE
            missing_left[j] = 0
            continue
        gain[j] = best
        feature[j] = best_f
        bin_[j] = best_b
        missing_left[j] = 1 if best_ml else 0
        # the children totals, summed in the same order as during the search
        for c in range(k):
            acc = 0.0
            for b in range(best_b + 1):
                acc += hist[j, best_f, b, c]
            left[j, c] = acc + hist[j, best_f, nb, c] if best_ml else acc
            acc = 0.0
            for b in range(nb - 1, best_b, -1):
                acc += hist[j, best_f, b, c]
            right[j, c] = acc if best_ml else acc + hist[j, best_f, nb, c]


def best_splits(
    hist: np.ndarray,
    task: str = "regression",
    min_leaf_rows: int = 1,
    min_leaf_weight: float = 0.0,
    rtol: float = SPLIT_RTOL,
) -> SplitResult:
    """Best valid split of every node of a (summed) histogram (paper Sec. 2.2, eq. 4).

    A candidate "feature f, bin b" sends the rows with ``code <= b`` left, and the rows
    with a missing value to the side where the decrease is larger (:func:`scan_node`). It
    is valid if
    both children have at least ``min_leaf_rows`` rows and a positive weight of at least
    ``min_leaf_weight``. The best valid candidate maximises the impurity decrease; exact
    ties go to the lowest feature, then the lowest bin. A node whose best decrease is not
    above ``rtol`` times the scale of the cancelling sums (rounding noise, e.g. all labels
    equal) gets no split.

    Parameters
    ----------
    hist : ndarray of shape (n_nodes, n_features, n_bins, k)
        Histogram from ``histogram.build_histograms`` (or a sum of such); its last bin
        holds the missing values (``binning.missing_code``).
    task : {"regression", "classification"}, default="regression"
        Weighted squared error (``k = 4``) or weighted Gini (``k = 1 + C``).
    min_leaf_rows : int, default=1
        Minimum number of rows in each child (column 0 of the statistics).
    min_leaf_weight : float, default=0.0
        Minimum weight in each child; the weight must also be positive.
    rtol : float, default=SPLIT_RTOL
        Relative tolerance below which a decrease counts as zero.

    Returns
    -------
    SplitResult
        Per node: ``gain``, ``feature``, ``bin``, ``missing_left``, children totals
        ``left``, ``right`` and the node's ``total``.

    Examples
    --------
    >>> import numpy as np
    >>> from ebf.histogram import build_histograms, row_statistics
    >>> binned = np.array([[0], [0], [1], [1], [2]], dtype=np.uint8)  # code 2: missing
    >>> S = row_statistics(np.array([0.0, 0.0, 1.0, 1.0, 0.0]))
    >>> h = build_histograms(binned, np.zeros(5, np.int64), np.zeros(1, np.int64), S, 1, 3)
    >>> res = best_splits(h)
    >>> res.feature.tolist(), res.bin.tolist(), res.missing_left.tolist(), res.gain.tolist()
    ([0], [0], [1], [1.2])
    """
    hist = np.ascontiguousarray(hist, dtype=np.float64)
    if hist.ndim != 4:
        raise ValueError(f"hist must be 4-D (nodes, features, bins, k), got {hist.shape}.")
    m, d, n_bins, k = hist.shape
    if task == "regression":
        if k != ROW_REG_STATS:
            raise ValueError(f"a regression histogram has k = {ROW_REG_STATS} statistics, got {k}.")
        classification = False
    elif task == "classification":
        if k < 2:
            raise ValueError(f"a classification histogram has k = 1 + n_classes >= 2, got {k}.")
        classification = True
    else:
        raise ValueError(f"task must be 'regression' or 'classification', got {task!r}.")
    if d < 1 or n_bins < 2:
        raise ValueError(f"hist needs at least one feature, one bin and the missing-value "
                         f"bin, got {hist.shape}.")
    if int(min_leaf_rows) < 1:
        raise ValueError(f"min_leaf_rows must be >= 1, got {min_leaf_rows!r}.")
    if not float(min_leaf_weight) >= 0.0:
        raise ValueError(f"min_leaf_weight must be >= 0, got {min_leaf_weight!r}.")
    out = SplitResult(
        gain=np.zeros(m),
        feature=np.full(m, NO_NODE, INDEX),
        bin=np.full(m, NO_NODE, INDEX),
        missing_left=np.zeros(m, INDEX),
        left=np.zeros((m, k)),
        right=np.zeros((m, k)),
        total=np.zeros((m, k)),
    )
    _best_splits_kernel(hist, classification, float(min_leaf_rows), float(min_leaf_weight),
                        float(rtol), out)
    return out
