"""The Mondrian sampling kernels: batch sampling (paper Alg. 1-2) and online extension (Alg. 3-4).

Plain numba functions over the flat arrays of :class:`mondrian._tree.TreeArrays` (layout in
``docs/families/mondrian-forests.md``): :func:`build_tree` samples a Mondrian tree over a
block of rows, :func:`extend_tree` inserts rows one at a time with new parents above existing
nodes, and paused leaves (thesis Alg. 5.9-5.10) resume splitting when their labels stop
being pure.
"""

from __future__ import annotations

import numba
import numpy as np

from basics.flat_tree import INDEX, NO_NODE
from basics.jit import JIT
from basics.tasks import CLASSIFICATION_CODE, REGRESSION_CODE

from .ikn import ikn_add, ikn_refresh_up


@numba.njit(inline="always", **JIT)
def _paused(stats, j, task, min_samples_split):
    """Whether a block is paused (thesis Sec. 5.5.1): too few points, or one label only."""
    if task == REGRESSION_CODE:
        return stats[j, 0] < min_samples_split
    total = 0.0
    distinct = 0
    for k in range(stats.shape[1]):
        total += stats[j, k]
        if stats[j, k] > 0:
            distinct += 1
    return total < min_samples_split or distinct <= 1


@numba.njit(inline="always", **JIT)
def _add_point_stats(stats, j, yv):
    """Add one label to the regression statistics ``(n, sum y, sum y^2)`` of node ``j``."""
    stats[j, 0] += 1.0
    stats[j, 1] += yv
    stats[j, 2] += yv * yv


@numba.njit(inline="always", **JIT)
def _sample_dimension(extent, total):
    """Pick d with probability extent[d] / total (Alg. 2 line 5)."""
    u = np.random.random() * total
    acc = 0.0
    last = 0
    for d in range(extent.shape[0]):
        if extent[d] > 0:
            last = d
            acc += extent[d]
            if u < acc:
                return d
    return last


# --------------------------------------------------------------------------- batch sampling


#: Blocks of at most this many rows are summarised one feature at a time, with the running
#: min / max in registers: their rows (8 MiB at 8 features) stay in the last-level cache
#: across the passes. Larger blocks are read row by row, each row once. Measured at 1M
#: rows x 8 features: a tree build takes about 25% less time than row by row throughout.
SMALL_BLOCK_ROWS = 131072


@numba.njit(inline="always", **JIT)
def _block_summary(node, idx, first, stop, step, X, y, labels, task, lower, upper, stats,
                   lo_acc, hi_acc):
    """Extent and statistics of the rows ``idx[first], idx[first + step], ...`` before
    ``stop`` (paper Alg. 2 line 1), summed in that order.

    Small blocks take one pass per feature (register accumulators); larger ones one pass
    over the rows, the extent kept in the scratch rows ``lo_acc`` / ``hi_acc``. Min and
    max do not depend on the order and the sums are taken in row order either way, so both
    give the same bits.
    """
    D = X.shape[1]
    for s in range(stats.shape[1]):
        stats[node, s] = 0.0
    # unsigned indices: numba then skips the negative-index wraparound on every access
    n = np.uint64(node)
    small = (stop - first) * step <= SMALL_BLOCK_ROWS
    if small:
        for d in range(D):
            lo = np.inf
            hi = -np.inf
            for i in range(first, stop, step):
                v = X[np.uint64(idx[i]), d]
                lo = min(lo, v)
                hi = max(hi, v)
            lower[n, d] = lo
            upper[n, d] = hi
    else:
        for d in range(D):
            lo_acc[d] = np.inf
            hi_acc[d] = -np.inf
    count = 0.0
    total = 0.0
    square = 0.0
    for i in range(first, stop, step):
        u = np.uint64(idx[i])
        if not small:
            for d in range(D):
                v = X[u, d]
                lo_acc[d] = min(lo_acc[d], v)
                hi_acc[d] = max(hi_acc[d], v)
        # read only the label array the task uses
        if task == REGRESSION_CODE:
            yv = y[u]
            count += 1.0
            total += yv
            square += yv * yv
        else:
            stats[n, labels[u]] += 1.0
    if task == REGRESSION_CODE:
        stats[n, 0] = count
        stats[n, 1] = total
        stats[n, 2] = square
    if not small:
        for d in range(D):
            lower[n, d] = lo_acc[d]
            upper[n, d] = hi_acc[d]


@numba.njit(inline="always", **JIT)
def _make_leaf(node, head, lifetime, left, right, feature, threshold, tau, leaf_head):
    """Close ``node`` as a leaf (time = lifetime) whose row list starts at ``head``."""
    left[node] = NO_NODE
    right[node] = NO_NODE
    feature[node] = NO_NODE
    threshold[node] = 0.0
    tau[node] = lifetime
    leaf_head[node] = head


@numba.njit(**JIT)
def _sample_block(
    j, idx, X, y, labels, task, min_samples_split, lifetime,
    left, right, parent, feature, threshold, tau, lower, upper, stats, leaf_head, pt_next,
    n_nodes,
):
    """SampleMondrianBlock (paper Alg. 2 / thesis Alg. 5.9) at slot ``j`` for rows ``idx``.

    Iterative (explicit stack, left subtree first). Slot ``j`` must already have its parent
    set; new nodes are appended from ``n_nodes`` as they are visited, so the subtree's
    slots are in depth-first preorder (the predictor order: packing it reads the arrays
    sequentially). Returns the new ``n_nodes``.
    """
    first_new = n_nodes
    n_features = X.shape[1]
    buf = np.empty(idx.shape[0], INDEX)
    # per pending block: its parent's slot (-1 for j itself), side (0 left, 1 right), rows
    stack_parent = np.empty(idx.shape[0] * 2 + 2, INDEX)
    stack_side = np.empty(idx.shape[0] * 2 + 2, INDEX)
    stack_lo = np.empty(idx.shape[0] * 2 + 2, INDEX)
    stack_hi = np.empty(idx.shape[0] * 2 + 2, INDEX)
    stack_parent[0] = NO_NODE
    stack_side[0] = 0
    stack_lo[0] = 0
    stack_hi[0] = idx.shape[0]
    top = 1
    extent = np.empty(n_features)
    lo_acc = np.empty(n_features)
    hi_acc = np.empty(n_features)
    while top > 0:
        top -= 1
        lo = stack_lo[top]
        hi = stack_hi[top]
        above = stack_parent[top]
        if above == NO_NODE:
            node = j
        else:
            node = n_nodes
            n_nodes += 1
            parent[node] = above
            if stack_side[top] == 0:
                left[above] = node
            else:
                right[above] = node
        # extent and statistics of the block, rows in their order of arrival (the
        # partition below fills a right segment from its end)
        if stack_side[top] == 0:
            _block_summary(node, idx, lo, hi, 1, X, y, labels, task, lower, upper, stats,
                           lo_acc, hi_acc)
        else:
            _block_summary(node, idx, hi - 1, lo - 1, -1, X, y, labels, task, lower, upper,
                           stats, lo_acc, hi_acc)
        tau_parent = 0.0 if parent[node] == NO_NODE else tau[parent[node]]
        split_time = np.inf
        total = 0.0
        if not _paused(stats, node, task, min_samples_split):
            for d in range(n_features):
                extent[d] = upper[node, d] - lower[node, d]
                total += extent[d]
            if total > 0:
                split_time = tau_parent + np.random.exponential(1.0 / total)
        if split_time < lifetime:
            d = _sample_dimension(extent, total)
            lo_d = lower[node, d]
            hi_d = upper[node, d]
            xi = lo_d + np.random.random() * (hi_d - lo_d)
            while xi >= hi_d:  # measure-zero rounding case: keep both children non-empty
                xi = lo_d + np.random.random() * (hi_d - lo_d)
            # partition idx[lo:hi] (x_d <= xi to the left) through ``buf``, reading only
            # column d. Branch-free: both candidate slots are written, the cursors move.
            a = lo
            b = hi - 1
            for i in range(lo, hi):
                r = idx[i]
                go_left = X[r, d] <= xi
                buf[a] = r
                buf[b] = r
                a += go_left
                b -= 1 - go_left
            for i in range(lo, hi):
                idx[i] = buf[i]
            feature[node] = d
            threshold[node] = xi
            tau[node] = split_time
            leaf_head[node] = NO_NODE
            # left[node] and right[node] are set when the children are visited and get their
            # slots: right pushed first, left on top
            stack_parent[top] = node
            stack_side[top] = 1
            stack_lo[top] = a
            stack_hi[top] = hi
            top += 1
            stack_parent[top] = node
            stack_side[top] = 0
            stack_lo[top] = lo
            stack_hi[top] = a
            top += 1
        else:
            _make_leaf(node, idx[lo], lifetime, left, right, feature, threshold, tau,
                       leaf_head)
            for i in range(lo, hi - 1):
                pt_next[idx[i]] = idx[i + 1]
            pt_next[idx[hi - 1]] = NO_NODE
    if task == CLASSIFICATION_CODE:
        # internal IKN counts bottom-up: children are appended after their parents,
        # so reverse slot order over the new nodes, then j, is a valid bottom-up order
        for node in range(n_nodes - 1, first_new - 1, -1):
            if left[node] != NO_NODE:
                for k in range(stats.shape[1]):
                    stats[node, k] = min(stats[left[node], k], 1.0) + min(
                        stats[right[node], k], 1.0
                    )
        if left[j] != NO_NODE:
            for k in range(stats.shape[1]):
                stats[j, k] = min(stats[left[j], k], 1.0) + min(stats[right[j], k], 1.0)
    return n_nodes


@numba.njit(**JIT)
def build_tree(
    X, y, labels, rows, task, min_samples_split, lifetime, seed,
    left, right, parent, feature, threshold, tau, lower, upper, stats, leaf_head, pt_next,
):
    """Sample a Mondrian tree on ``rows`` of the data buffer (paper Alg. 1-2).

    Returns ``(root, n_nodes)``.
    """
    np.random.seed(seed)
    idx = rows.copy()
    parent[0] = NO_NODE
    n_nodes = _sample_block(
        0, idx, X, y, labels, task, min_samples_split, lifetime,
        left, right, parent, feature, threshold, tau, lower, upper, stats, leaf_head, pt_next,
        1,
    )
    return 0, n_nodes


# --------------------------------------------------------------------------- online extension


@numba.njit(**JIT)
def _leaf_rows(j, leaf_head, pt_next, count):
    out = np.empty(count, INDEX)
    r = leaf_head[j]
    n = 0
    while r != NO_NODE:
        out[n] = r
        n += 1
        r = pt_next[r]
    return out[:n]


@numba.njit(inline="always", **JIT)
def _box_gap(lower, upper, j, x, d):
    """How far ``x`` lies outside the box of node ``j`` along feature ``d`` (Alg. 4 line 2)."""
    return max(lower[j, d] - x[d], 0.0) + max(x[d] - upper[j, d], 0.0)


@numba.njit(**JIT)
def _extend_one(
    r, X, y, labels, task, min_samples_split, lifetime,
    left, right, parent, feature, threshold, tau, lower, upper, stats, leaf_head, pt_next,
    root, n_nodes, e,
):
    """ExtendMondrianTree for one row ``r`` (paper Alg. 3-4, thesis Alg. 5.10).

    ``e`` is scratch of ``n_features`` floats. A point inside a node's box (most of the
    path's top) costs one pass over the features: nothing is drawn and nothing extends.
    """
    n_features = X.shape[1]
    x = X[r]
    yv = y[r]
    k = labels[r]
    j = root
    while True:
        if left[j] == NO_NODE and _paused(stats, j, task, min_samples_split):
            # paused leaf: absorb the point; un-pause (resample the block) if it must split
            for d in range(n_features):
                lower[j, d] = min(lower[j, d], x[d])
                upper[j, d] = max(upper[j, d], x[d])
            pt_next[r] = leaf_head[j]
            leaf_head[j] = r
            if task == REGRESSION_CODE:
                _add_point_stats(stats, j, yv)
            else:
                ikn_add(parent, left, right, stats, j, k)
            if not _paused(stats, j, task, min_samples_split):
                count = stats[j, 0] if task == REGRESSION_CODE else np.sum(stats[j])
                rows = _leaf_rows(j, leaf_head, pt_next, int(count))
                n_nodes = _sample_block(
                    j, rows, X, y, labels, task, min_samples_split, lifetime,
                    left, right, parent, feature, threshold, tau, lower, upper, stats,
                    leaf_head, pt_next, n_nodes,
                )
            return root, n_nodes
        rate = 0.0
        for d in range(n_features):
            rate += _box_gap(lower, upper, j, x, d)
        tau_parent = 0.0 if parent[j] == NO_NODE else tau[parent[j]]
        split_time = np.inf
        if rate > 0:
            split_time = tau_parent + np.random.exponential(1.0 / rate)
        if split_time < tau[j]:
            # introduce a new parent above j and a new leaf holding x (Alg. 4 lines 3-9)
            for d in range(n_features):
                e[d] = _box_gap(lower, upper, j, x, d)
            d = _sample_dimension(e, rate)
            if x[d] > upper[j, d]:
                xi = upper[j, d] + np.random.random() * (x[d] - upper[j, d])
            else:
                xi = x[d] + np.random.random() * (lower[j, d] - x[d])
            new = n_nodes
            leaf = n_nodes + 1
            n_nodes += 2
            p = parent[j]
            parent[new] = p
            if p == NO_NODE:
                root = new
            elif left[p] == j:
                left[p] = new
            else:
                right[p] = new
            feature[new] = d
            threshold[new] = xi
            tau[new] = split_time
            leaf_head[new] = NO_NODE
            for dd in range(n_features):
                lower[new, dd] = min(lower[j, dd], x[dd])
                upper[new, dd] = max(upper[j, dd], x[dd])
            parent[j] = new
            parent[leaf] = new
            if x[d] <= xi:
                left[new] = leaf
                right[new] = j
            else:
                left[new] = j
                right[new] = leaf
            if min_samples_split >= 2:
                # a one-point block is always paused: SampleMondrianBlock makes it a leaf
                # and draws nothing, so write that leaf directly (no scratch allocations)
                _make_leaf(leaf, r, lifetime, left, right, feature, threshold, tau, leaf_head)
                pt_next[r] = NO_NODE
                for dd in range(n_features):
                    lower[leaf, dd] = x[dd]
                    upper[leaf, dd] = x[dd]
                for s in range(stats.shape[1]):
                    stats[leaf, s] = 0.0
                if task == REGRESSION_CODE:
                    _add_point_stats(stats, leaf, yv)
                else:
                    stats[leaf, k] += 1.0
            else:
                one = np.empty(1, INDEX)
                one[0] = r
                n_nodes = _sample_block(
                    leaf, one, X, y, labels, task, min_samples_split, lifetime,
                    left, right, parent, feature, threshold, tau, lower, upper, stats,
                    leaf_head, pt_next, n_nodes,
                )
            if task == REGRESSION_CODE:
                for s in range(stats.shape[1]):
                    stats[new, s] = stats[j, s]
                _add_point_stats(stats, new, yv)
            else:
                for kk in range(stats.shape[1]):
                    stats[new, kk] = min(stats[j, kk], 1.0) + min(stats[leaf, kk], 1.0)
                ikn_refresh_up(left, right, parent, stats, p, k)
            return root, n_nodes
        # extend the block of j and descend (Alg. 4 lines 11-14)
        if rate > 0:
            for d in range(n_features):
                lower[j, d] = min(lower[j, d], x[d])
                upper[j, d] = max(upper[j, d], x[d])
        if task == REGRESSION_CODE:
            _add_point_stats(stats, j, yv)
        if left[j] == NO_NODE:
            # a leaf stopped by the lifetime, not paused: it only records the point
            pt_next[r] = leaf_head[j]
            leaf_head[j] = r
            if task == CLASSIFICATION_CODE:
                ikn_add(parent, left, right, stats, j, k)
            return root, n_nodes
        j = left[j] if x[feature[j]] <= threshold[j] else right[j]


@numba.njit(**JIT)
def extend_tree(
    X, y, labels, rows, task, min_samples_split, lifetime, seed,
    left, right, parent, feature, threshold, tau, lower, upper, stats, leaf_head, pt_next,
    root, n_nodes,
):
    """Add ``rows`` of the data buffer one by one, in order (paper Alg. 3).

    Returns the new ``(root, n_nodes)``.
    """
    np.random.seed(seed)
    e = np.empty(X.shape[1])
    for i in range(rows.shape[0]):
        root, n_nodes = _extend_one(
            rows[i], X, y, labels, task, min_samples_split, lifetime,
            left, right, parent, feature, threshold, tau, lower, upper, stats,
            leaf_head, pt_next, root, n_nodes, e,
        )
    return root, n_nodes
