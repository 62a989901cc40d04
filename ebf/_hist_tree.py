"""Deep histogram CART trees: the ``splitter="hist"`` trees of a Bayesian forest.

A Bayesian-forest tree (Taddy, Chen, Yu & Wyle 2015, Sec. 2.2-2.3, Algorithm 1) is a CART
tree fit to all rows with Bayesian-bootstrap weights ``theta ~ iid Exp(1)``, grown deep:
the impurity decrease of eq. (4) (weighted squared error, or weighted Gini) maximised over
candidate splits, down to ``min_samples_leaf`` rows. This module grows that tree over bins
instead of every distinct value (as scikit-learn's histogram gradient boosting does for
shallow trees), on the trunk's kernels:

- the rows are binned once per forest (``binning``; one or two bytes per value) and every
  tree of the forest reuses the codes: only the weights change from tree to tree;
- a node's histogram sums the per-row statistics ``S`` of :func:`histogram.row_statistics`
  per (feature, bin); only the smaller child of a split is histogrammed, the larger one is
  its parent's minus its sibling's (:func:`histogram.subtract_kernel`);
- a node with fewer rows than bins is searched on a compact histogram of the bins its rows
  occupy, so the deep levels (most nodes, few rows each) cost their rows, not every bin;
- the split of a node is :func:`splitting.scan_node`, the trunk's own search, over a random
  subset of ``max_features`` features (scikit-learn's rule: constant features do not count).

Where a feature has one bin per distinct value (``binning.edges_from_sample``), the edges
are the midpoints scikit-learn uses as thresholds, so the tree is exact CART
(``tests/naive/`` has the oracle): the same splits of the training rows. Where a node's
rows leave empty bins between the two sides of its split, exact CART cuts in the middle of
the gap and the histogram tree right after the occupied bins (the lowest edge, as
histogram boosting does), so a new row inside the gap may go the other way.

The tree is grown depth first, smaller child first, so at most ``log2(n / n_bins)``
histograms are alive at a time; node ``j``'s rows are ``rows[start[j]:end[j]]`` (the split
partitions each node's range in place), and children are numbered after their parent.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from basics.flat_tree import INDEX, NO_NODE
from basics.hashing import mix64, uniform53
from basics.jit import JIT

from ._routing import goes_left
from ._splitting import NodeHistogram, SplitRules, scan_node, split_scale
from .config import SPLIT_RTOL
from .histogram import range_histogram, subtract_kernel

__all__ = ["grow_tree", "node_statistics", "resolve_max_features"]

#: ``max_depth=None`` as the kernel sees it.
_NO_DEPTH_LIMIT = np.iinfo(np.int64).max


class TreeRows(NamedTuple):
    """The rows of a growing tree, in node order: every split partitions its node's range
    of the three arrays together, so histograms read memory in order.

    Attributes
    ----------
    codes : ndarray of shape (n_rows, n_features), uint8 or uint16
        Bin codes of the rows.
    S : ndarray of shape (n_rows, k), float64
        Per-row statistics (:func:`~ebf.histogram.row_statistics`).
    rows : ndarray of shape (n_rows,), int64
        Row ids.
    """

    codes: np.ndarray
    S: np.ndarray
    rows: np.ndarray


class GrowParams(NamedTuple):
    """The growth rules of :func:`grow_tree`, as its kernel reads them."""

    classification: bool
    min_rows: int
    max_depth: int
    max_features: int
    seed: np.uint64
    small_rows: int
    rtol: float


class GrownTree(NamedTuple):
    """A histogram tree's nodes (int64 arrays; -1 children and feature at leaves): split
    ``bin`` and ``missing_left`` (1: missing values go left), and the node's rows
    ``rows[start:end]`` of its :class:`TreeRows`."""

    left: np.ndarray
    right: np.ndarray
    feature: np.ndarray
    bin: np.ndarray
    missing_left: np.ndarray
    start: np.ndarray
    end: np.ndarray


class NodeStats(NamedTuple):
    """The leaf statistics of every node (see :func:`node_statistics`)."""

    value: np.ndarray
    variance: np.ndarray
    weight: np.ndarray
    weight_sq: np.ndarray
    count: np.ndarray


class CompactHistogram(NamedTuple):
    """A node's histogram over the bins its rows occupy (:func:`_compact_histogram`)."""

    hist: np.ndarray
    bin_of: np.ndarray
    n_bins_of: np.ndarray


def resolve_max_features(max_features: int | float | str | None, n_features: int) -> int:
    """Features tried per split, by scikit-learn's rules.

    Parameters
    ----------
    max_features : int, float, {"sqrt", "log2"} or None
        A count, a fraction of the features, or None for all of them.
    n_features : int

    Returns
    -------
    int
        In ``1 .. n_features``.

    Examples
    --------
    >>> [resolve_max_features(m, 10) for m in ("sqrt", 0.5, None)]
    [3, 5, 10]
    """
    if max_features is None:
        k = n_features
    elif max_features == "sqrt":
        k = int(np.sqrt(n_features))
    elif max_features == "log2":
        k = int(np.log2(n_features))
    elif isinstance(max_features, (int, np.integer)):
        if not 1 <= max_features <= n_features:
            raise ValueError(f"max_features={max_features} must be in 1 .. n_features = "
                             f"{n_features}.")
        k = int(max_features)
    else:
        k = int(float(max_features) * n_features)
    return max(1, min(k, n_features))


#: Bit index of a power of two ``2**i`` by de Bruijn multiplication (Leiserson, Prokop &
#: Randall 1998): ``_DEBRUIJN_INDEX[(2**i * _DEBRUIJN) >> 58] == i``.
_DEBRUIJN = np.uint64(0x03F79D71B4CB0A89)
_DEBRUIJN_INDEX = np.zeros(64, np.int64)
_DEBRUIJN_INDEX[[((1 << i) * 0x03F79D71B4CB0A89 % 2**64) >> 58 for i in range(64)]] = np.arange(64)
_ONE, _58 = np.uint64(1), np.uint64(58)


@numba.njit(**JIT)
def _compact_histogram(data, lo, hi, scratch, seen, compact):  # pragma: no cover - numba
    """The histogram of the rows ``lo .. hi - 1`` of ``data`` (:class:`TreeRows`) over the
    bins they occupy, per feature, into ``compact`` (:class:`CompactHistogram`).

    ``hist[f, j]`` sums the rows in the ``j``-th smallest occupied bin ``bin_of[f, j]``
    of feature ``f``, for ``j < n_bins_of[f]``. Each feature is summed into ``scratch``
    (``(n_bins, k)``, small enough for the L1 cache) while a bitmap ``seen`` (uint64
    words) marks the bins; the marked bins are then read in increasing order, one step
    per bin. ``scratch`` and ``seen`` are zero on entry and on return.
    """
    codes, S = data.codes, data.S
    hist, bin_of, n_bins_of = compact
    d = codes.shape[1]
    k = S.shape[1]
    for f in range(d):
        for i in range(lo, hi):
            b = codes[i, f]
            seen[b >> 6] |= _ONE << np.uint64(b & 63)
            for c in range(k):
                scratch[b, c] += S[i, c]
        nd = 0
        for wi in range(seen.shape[0]):
            x = seen[wi]
            while x:
                low = x & (~x + _ONE)
                b = wi * 64 + _DEBRUIJN_INDEX[(low * _DEBRUIJN) >> _58]
                bin_of[f, nd] = b
                for c in range(k):
                    hist[f, nd, c] = scratch[b, c]
                    scratch[b, c] = 0.0
                nd += 1
                x ^= low
            seen[wi] = 0
        n_bins_of[f] = nd


@numba.njit(**JIT)
def _partition(data, lo, hi, f, b, missing_left, missing):  # pragma: no cover
    """Partition rows ``lo .. hi - 1`` of ``data`` in place (codes, statistics and ids
    together): those with ``codes[:, f] <= b`` (and the code ``missing`` if
    ``missing_left``) first (Hoare's scheme, no scratch). Returns where the others start."""
    codes, S, rows = data
    d = codes.shape[1]
    k = S.shape[1]
    a = lo
    z = hi - 1
    while True:
        while a <= z and goes_left(codes[a, f], b, missing_left, missing):
            a += 1
        while a <= z and not goes_left(codes[z, f], b, missing_left, missing):
            z -= 1
        if a >= z:
            return a
        for g in range(d):
            t = codes[a, g]
            codes[a, g] = codes[z, g]
            codes[z, g] = t
        for c in range(k):
            v = S[a, c]
            S[a, c] = S[z, c]
            S[z, c] = v
        r = rows[a]
        rows[a] = rows[z]
        rows[z] = r
        a += 1
        z -= 1


@numba.njit(**JIT)
def _node_totals(h, n_bins0, miss0, total):
    """Statistic totals of a node: the sum over the bins of feature 0 and its missing
    values (slot ``miss0``, -1: none)."""
    for c in range(h.shape[2]):
        acc = 0.0
        for b in range(n_bins0):
            acc += h[0, b, c]
        total[c] = acc + h[0, miss0, c] if miss0 >= 0 else acc


@numba.njit(**JIT)
def _grow_kernel(data, n_bins_f, params, tree):  # pragma: no cover
    codes, S, rows = data
    classification, min_rows, max_depth, max_features, seed, small_rows, rtol = params
    left, right, feature, bin_, missing_left, start, end = tree
    n_rows = rows.shape[0]
    d = codes.shape[1]
    k = S.shape[1]
    # int64 from the start: a literal 1 would have numba compile _partition once more,
    # for the literal type it sees before the loop widens nb
    nb = np.int64(1)
    for f in range(d):
        nb = max(nb, n_bins_f[f])
    missing = nb  # the code of a missing value (binning.missing_code), the pool's last slot
    nb += 1
    pool_miss = np.full(d, missing, np.int64)
    cmiss = np.full(d, -1, np.int64)
    creal = np.zeros(d, np.int64)
    signed_col = -1 if classification else 2
    # histograms of the open nodes with at least ``small_rows`` rows: a pool of slots, none
    # if the root is small (every node is then): on a wide table of few rows (10,000
    # features) the unused pool's allocation took most of a tree's time
    slots = 4 if n_rows >= small_rows else 0
    pool = np.zeros((slots, d, nb, k))
    free = np.arange(slots - 1, -1, -1)
    n_free = slots
    # compact histograms of smaller nodes; never read beyond what a node writes
    width = max(1, min(small_rows, n_rows))
    chist = np.empty((d, width, k))
    cbin = np.zeros((d, width), np.int64)
    cnb = np.zeros(d, np.int64)
    compact = CompactHistogram(chist, cbin, cnb)
    scratch = np.zeros((nb, k))
    seen = np.zeros((nb + 63) // 64, np.uint64)
    suffix = np.zeros((max(nb, width) + 1, k))
    cur = np.zeros(k)
    # float like _best_splits_kernel's (the same comparisons with the float counts), so
    # scan_node is compiled once for both
    rules = SplitRules(classification, float(min_rows), 0.0)
    total = np.zeros(k)
    features = np.arange(d)
    shuffle = max_features < d
    h_tree = mix64(seed)
    draws = 0
    # depth-first stack of (node, depth, slot)
    cap = 64
    st_node = np.empty(cap, np.int64)
    st_depth = np.empty(cap, np.int64)
    st_slot = np.empty(cap, np.int64)
    sp = 0

    n_nodes = 1
    start[0] = 0
    end[0] = n_rows
    slot0 = -1
    if n_rows >= small_rows:
        n_free -= 1
        slot0 = free[n_free]
        # start[0], end[0] (0, n_rows), not literals: one compiled range_histogram
        range_histogram(codes, start[0], end[0], S, pool, slot0)
    st_node[0] = 0
    st_depth[0] = 0
    st_slot[0] = slot0
    sp = 1
    while sp > 0:
        sp -= 1
        j = st_node[sp]
        depth = st_depth[sp]
        slot = st_slot[sp]
        lo = start[j]
        hi = end[j]
        m = hi - lo
        best_f = -1
        best_b = -1
        best_ml = False
        if m >= 2 * min_rows and depth < max_depth:
            if slot >= 0:
                h = pool[slot]
                nbf = n_bins_f
                mf = pool_miss
            else:
                _compact_histogram(data, lo, hi, scratch, seen, compact)
                for f in range(d):  # a missing value is the largest code: the last slot
                    has = cnb[f] > 0 and cbin[f, cnb[f] - 1] == missing
                    cmiss[f] = cnb[f] - 1 if has else -1
                    creal[f] = cnb[f] - 1 if has else cnb[f]
                h = chist
                nbf = creal
                mf = cmiss
            _node_totals(h, nbf[0], mf[0], total)
            q_p, scale = split_scale(total, classification)
            if shuffle:  # Fisher-Yates from the tree's counter-based stream
                for a in range(d - 1, 0, -1):
                    c = int(uniform53(h_tree, draws) * (a + 1))
                    draws += 1
                    if c > a:
                        c = a
                    features[a], features[c] = features[c], features[a]
            best, f, jb, ml = scan_node(NodeHistogram(h, nbf, mf), features, max_features,
                                        rules, q_p, suffix, cur)
            if f >= 0 and best > rtol * scale:
                best_f = f
                best_b = jb if slot >= 0 else cbin[f, jb]
                best_ml = ml
        if best_f < 0:
            if slot >= 0:
                free[n_free] = slot
                n_free += 1
            continue
        mid = _partition(data, lo, hi, best_f, best_b, best_ml, missing)
        lc = n_nodes
        rc = n_nodes + 1
        n_nodes += 2
        left[j] = lc
        right[j] = rc
        feature[j] = best_f
        bin_[j] = best_b
        missing_left[j] = 1 if best_ml else 0
        start[lc] = lo
        end[lc] = mid
        start[rc] = mid
        end[rc] = hi
        if mid - lo <= hi - mid:
            small, large = lc, rc
        else:
            small, large = rc, lc
        m_small = end[small] - start[small]
        m_large = end[large] - start[large]
        slot_small = -1
        slot_large = -1
        if m_large >= small_rows:  # so m >= small_rows and the node had a histogram
            if n_free == 0:  # double the pool
                old = pool.shape[0]
                grown = np.zeros((2 * old, d, nb, k))
                # element by element: a slice assignment compiles numba's shape-mismatch
                # message (string formatting, seconds of compilation) for a copy
                for a in range(old):
                    for f in range(d):
                        for b in range(nb):
                            for c in range(k):
                                grown[a, f, b, c] = pool[a, f, b, c]
                pool = grown
                free = np.empty(2 * old, np.int64)
                for a in range(old):
                    free[a] = 2 * old - 1 - a
                n_free = old
            n_free -= 1
            tmp_slot = free[n_free]
            pool[tmp_slot] = 0.0
            range_histogram(codes, start[small], end[small], S, pool, tmp_slot)
            subtract_kernel(pool[slot], pool[tmp_slot], signed_col)
            slot_large = slot
            if m_small >= small_rows:
                slot_small = tmp_slot
            else:
                free[n_free] = tmp_slot
                n_free += 1
        elif slot >= 0:
            free[n_free] = slot
            n_free += 1
        if sp + 2 > cap:
            cap *= 2
            st_node = np.concatenate((st_node, np.empty(cap - st_node.shape[0], np.int64)))
            st_depth = np.concatenate((st_depth, np.empty(cap - st_depth.shape[0], np.int64)))
            st_slot = np.concatenate((st_slot, np.empty(cap - st_slot.shape[0], np.int64)))
        # the larger child waits; the smaller one is grown first
        st_node[sp] = large
        st_depth[sp] = depth + 1
        st_slot[sp] = slot_large
        st_node[sp + 1] = small
        st_depth[sp + 1] = depth + 1
        st_slot[sp + 1] = slot_small
        sp += 2
    return n_nodes


def grow_tree(
    binned: np.ndarray,
    S: np.ndarray,
    rows: np.ndarray,
    n_bins: np.ndarray,
    *,
    classification: bool,
    min_samples_leaf: int = 1,
    max_depth: int | None = None,
    max_features: int | None = None,
    seed: int = 0,
    small_rows: int | None = None,
    rtol: float = SPLIT_RTOL,
) -> dict[str, np.ndarray]:
    """Grow one histogram CART tree on the rows ``rows`` (paper Sec. 2.2, eq. 4).

    A node with at least ``2 * min_samples_leaf`` rows, above ``max_depth``, is split at
    the candidate of largest impurity decrease among ``max_features`` features drawn for
    it; both children must keep ``min_samples_leaf`` rows and a positive weight, and the
    decrease must exceed rounding noise (``rtol``, as in the trunk).

    Parameters
    ----------
    binned : ndarray of shape (n_samples, n_features), uint8, C-contiguous
        Bin codes (``binning.bin_data``); ``binned[:, f] < n_bins[f]``, or
        ``max(n_bins)`` for a missing value (``binning.missing_code``).
    S : ndarray of shape (n_rows, k), float64, C-contiguous
        Per-row statistics (:func:`~ebf.histogram.row_statistics`) of the rows ``rows``, in
        that order, column 0 the row count; permuted in place into node order.
    rows : ndarray of int64
        The rows of the tree (those of positive weight), each once.
    n_bins : ndarray of shape (n_features,), int64
        Bins per feature (edges + 1).
    classification : bool
        Gini (``S`` one-hot weights) instead of squared error (``S = [1, w, wy, wy^2]``).
    min_samples_leaf : int, default=1
    max_depth : int or None, default=None
    max_features : int or None, default=None
        Features tried per node (None: all, in their order, so ties keep the lowest).
    seed : int, default=0
        Seed of the features' order (used only if ``max_features < n_features``).
    small_rows : int or None, default=None
        Nodes with fewer rows use a compact histogram; None: the largest ``n_bins``.
    rtol : float, default=SPLIT_RTOL

    Returns
    -------
    dict
        ``left``, ``right``, ``feature``, ``bin``, ``missing_left``, ``start``, ``end``:
        int64 arrays of length ``n_nodes`` (-1 children and feature at leaves; ``bin`` is
        the split bin, ``missing_left`` 1 where the missing values go left), and ``rows``,
        the rows in node order: node ``j`` holds ``rows[start[j]:end[j]]``.

    Examples
    --------
    >>> from ebf.histogram import row_statistics
    >>> binned = np.array([[0], [0], [1], [1]], np.uint8)
    >>> S = row_statistics(np.array([0.0, 0.0, 1.0, 1.0]))
    >>> t = grow_tree(binned, S, np.arange(4), np.array([2]), classification=False)
    >>> t["feature"].tolist(), t["bin"].tolist(), t["left"].tolist()
    ([0, -1, -1], [0, -1, -1], [1, -1, -1])
    """
    n, d = binned.shape
    rows = np.array(rows, dtype=INDEX)  # a copy: permuted into node order
    if S.dtype != np.float64 or not S.flags.c_contiguous or not S.flags.writeable:
        raise ValueError("S must be a writeable C-contiguous float64 array (it is permuted).")
    n_bins = np.ascontiguousarray(n_bins, dtype=INDEX)
    if rows.size == 0:
        raise ValueError("a tree needs at least one row of positive weight.")
    if S.shape[0] != rows.size or n_bins.shape != (d,):
        raise ValueError(f"binned {binned.shape}, {rows.size} rows, S {S.shape} and n_bins "
                         f"{n_bins.shape} do not agree.")
    min_rows = max(1, int(min_samples_leaf))
    cap = 2 * (rows.size // min_rows) + 1  # a binary tree with leaves of >= min_rows rows
    out = GrownTree(*(np.zeros(cap, INDEX) if name == "missing_left"
                      else np.full(cap, NO_NODE, INDEX) for name in GrownTree._fields))
    codes = np.take(binned, rows, axis=0)  # the tree's own copies, kept in node order
    missing = int(n_bins.max(initial=1))
    if codes.size and np.any((codes.max(axis=0) >= n_bins) & (codes.max(axis=0) != missing)):
        raise ValueError("binned holds codes >= n_bins for some feature (other than the "
                         "missing-value code max(n_bins)).")
    params = GrowParams(
        classification=bool(classification), min_rows=min_rows,
        max_depth=_NO_DEPTH_LIMIT if max_depth is None else int(max_depth),
        max_features=d if max_features is None else int(max_features),
        seed=np.uint64(int(seed) % 2**64),
        small_rows=int(n_bins.max(initial=1)) if small_rows is None else int(small_rows),
        rtol=float(rtol))
    n_nodes = _grow_kernel(TreeRows(codes, S, rows), n_bins, params, out)
    return {**{name: a[:n_nodes] for name, a in out._asdict().items()}, "rows": rows}


@numba.njit(**JIT)
def _node_statistics_kernel(tree, rows, y, w, classification, stats):  # pragma: no cover
    # leaves by two passes over their rows; internal nodes (numbered before their
    # children) combined from the children, backwards (Chan et al.'s pairwise update)
    left, right, start, end = tree.left, tree.right, tree.start, tree.end
    value, variance, weight, weight_sq, count = stats
    for j in range(left.shape[0] - 1, -1, -1):
        a = left[j]
        if a == NO_NODE:
            wsum = 0.0
            wsq = 0.0
            for t in range(start[j], end[j]):
                i = rows[t]
                wsum += w[i]
                wsq += w[i] * w[i]
                if classification:
                    value[j, int(y[i])] += w[i]
                else:
                    value[j, 0] += w[i] * y[i]
            weight[j] = wsum
            weight_sq[j] = wsq
            count[j] = end[j] - start[j]
            if classification:
                for c in range(value.shape[1]):
                    value[j, c] /= wsum
                continue
            mu = value[j, 0] / wsum
            m2 = 0.0
            for t in range(start[j], end[j]):
                i = rows[t]
                dev = y[i] - mu
                m2 += w[i] * dev * dev
            value[j, 0] = mu
            variance[j] = m2  # M2 until the end
            continue
        b = right[j]
        wt = weight[a] + weight[b]
        weight[j] = wt
        weight_sq[j] = weight_sq[a] + weight_sq[b]
        count[j] = count[a] + count[b]
        if classification:
            for c in range(value.shape[1]):
                value[j, c] = (weight[a] * value[a, c] + weight[b] * value[b, c]) / wt
            continue
        delta = value[b, 0] - value[a, 0]
        value[j, 0] = value[a, 0] + delta * weight[b] / wt
        variance[j] = variance[a] + variance[b] + delta * delta * weight[a] * weight[b] / wt
    if not classification:
        for j in range(left.shape[0]):
            variance[j] = variance[j] / weight[j]


def node_statistics(tree: dict[str, np.ndarray], y: np.ndarray, w: np.ndarray,
                    n_classes: int) -> dict[str, np.ndarray]:
    """The leaf statistics of ``ebf._cart`` for every node of a grown tree.

    Parameters
    ----------
    tree : dict
        From :func:`grow_tree` (its node arrays and ``rows``).
    y : ndarray of shape (n_samples,), float64
        Target, or class codes (classification).
    w : ndarray of shape (n_samples,), float64
        Row weights (positive on ``rows``).
    n_classes : int
        0 for regression, else the number of classes (the width of ``value``).

    Returns
    -------
    dict
        ``value`` (weighted mean, shape (n_nodes, 1); or weighted class fractions, shape
        (n_nodes, n_classes)), ``variance`` (weighted within-node variance; zeros for
        classification), ``weight`` (sum of weights), ``weight_sq`` (sum of squared
        weights), ``count`` (rows).
    """
    n_nodes = tree["left"].shape[0]
    classification = n_classes > 0
    stats = NodeStats(
        value=np.zeros((n_nodes, n_classes if classification else 1)),
        variance=np.zeros(n_nodes),
        weight=np.zeros(n_nodes),
        weight_sq=np.zeros(n_nodes),
        count=np.zeros(n_nodes, INDEX),
    )
    _node_statistics_kernel(GrownTree(*(tree[name] for name in GrownTree._fields)),
                            tree["rows"], np.ascontiguousarray(y, dtype=np.float64),
                            np.ascontiguousarray(w, dtype=np.float64), classification, stats)
    return stats._asdict()
