"""The Mondrian sampling kernels: batch sampling (paper Alg. 1-2) and online extension (Alg. 3-4).

Plain numba functions over a tree record (:class:`mondrian._records.MondrianTree`, the
arrays of :class:`mondrian._tree.TreeArrays`; layout in ``docs/families/mondrian-forests.md``)
and the data and rules of a :class:`mondrian._records.Growth`: :func:`build_tree` samples a
Mondrian tree over a block of rows, :func:`extend_tree` inserts rows one at a time with new
parents above existing nodes, and paused leaves (thesis Alg. 5.9-5.10) resume splitting when
their labels stop being pure.
"""

from __future__ import annotations

import numba
import numpy as np

from basics.flat_tree import INDEX, NO_NODE
from basics.jit import JIT
from basics.tasks import CLASSIFICATION_CODE, REGRESSION_CODE

from ._ikn import ikn_add, ikn_refresh_up
from ._records import child


@numba.njit(inline="always", **JIT)
def _paused(g, stats, j):
    """Whether a block is paused (thesis Sec. 5.5.1): too few points, or one label only."""
    if g.task == REGRESSION_CODE:
        return stats[j, 0] < g.min_samples_split
    total = 0.0
    distinct = 0
    for k in range(stats.shape[1]):
        total += stats[j, k]
        if stats[j, k] > 0:
            distinct += 1
    return total < g.min_samples_split or distinct <= 1


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
def _block_summary(g, tree, node, block, acc):
    """Extent and statistics of node ``node`` from the rows ``block`` (paper Alg. 2 line 1),
    summed in that order.

    Small blocks take one pass per feature (register accumulators); larger ones one pass
    over the rows, the extent kept in the scratch rows ``acc[0]`` (min) / ``acc[1]`` (max).
    Min and max do not depend on the order and the sums are taken in row order either way,
    so both give the same bits.
    """
    X = g.X
    lower = tree.lower
    upper = tree.upper
    stats = tree.stats
    lo_acc = acc[0]
    hi_acc = acc[1]
    D = X.shape[1]
    for s in range(stats.shape[1]):
        stats[node, s] = 0.0
    # unsigned indices: numba then skips the negative-index wraparound on every access
    n = np.uint64(node)
    small = block.shape[0] <= SMALL_BLOCK_ROWS
    if small:
        for d in range(D):
            lo = np.inf
            hi = -np.inf
            for i in range(block.shape[0]):
                v = X[np.uint64(block[i]), d]
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
    for i in range(block.shape[0]):
        u = np.uint64(block[i])
        if not small:
            for d in range(D):
                v = X[u, d]
                lo_acc[d] = min(lo_acc[d], v)
                hi_acc[d] = max(hi_acc[d], v)
        # read only the label array the task uses
        if g.task == REGRESSION_CODE:
            yv = g.y[u]
            count += 1.0
            total += yv
            square += yv * yv
        else:
            stats[n, g.labels[u]] += 1.0
    if g.task == REGRESSION_CODE:
        stats[n, 0] = count
        stats[n, 1] = total
        stats[n, 2] = square
    if not small:
        for d in range(D):
            lower[n, d] = lo_acc[d]
            upper[n, d] = hi_acc[d]


@numba.njit(inline="always", **JIT)
def _make_leaf(g, tree, node, head):
    """Close ``node`` as a leaf (time = lifetime) whose row list starts at ``head``."""
    tree.left[node] = NO_NODE
    tree.right[node] = NO_NODE
    tree.feature[node] = NO_NODE
    tree.threshold[node] = 0.0
    tree.tau[node] = g.lifetime
    tree.leaf_head[node] = head


@numba.njit(inline="always", **JIT)
def _ikn_from_children(stats, node, a, b):
    """The IKN counts of ``node`` from its children ``a`` and ``b`` (thesis Alg. 5.3)."""
    for k in range(stats.shape[1]):
        stats[node, k] = min(stats[a, k], 1.0) + min(stats[b, k], 1.0)


@numba.njit(**JIT)
def _sample_block(g, tree, j, idx, n_nodes):
    """SampleMondrianBlock (paper Alg. 2 / thesis Alg. 5.9) at slot ``j`` for rows ``idx``.

    Iterative (explicit stack, left subtree first). Slot ``j`` must already have its parent
    set; new nodes are appended from ``n_nodes`` as they are visited, so the subtree's
    slots are in depth-first preorder (the predictor order: packing it reads the arrays
    sequentially). Returns the new ``n_nodes``.
    """
    X = g.X
    left, right, parent, tau = tree.left, tree.right, tree.parent, tree.tau
    lower, upper, stats = tree.lower, tree.upper, tree.stats
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
    acc = np.empty((2, n_features))
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
            _block_summary(g, tree, node, idx[lo:hi], acc)
        else:
            _block_summary(g, tree, node, idx[lo:hi][::-1], acc)
        tau_parent = 0.0 if parent[node] == NO_NODE else tau[parent[node]]
        split_time = np.inf
        total = 0.0
        if not _paused(g, stats, node):
            for d in range(n_features):
                extent[d] = upper[node, d] - lower[node, d]
                total += extent[d]
            if total > 0:
                split_time = tau_parent + np.random.exponential(1.0 / total)
        if split_time < g.lifetime:
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
            tree.feature[node] = d
            tree.threshold[node] = xi
            tau[node] = split_time
            tree.leaf_head[node] = NO_NODE
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
            _make_leaf(g, tree, node, idx[lo])
            for i in range(lo, hi - 1):
                tree.pt_next[idx[i]] = idx[i + 1]
            tree.pt_next[idx[hi - 1]] = NO_NODE
    if g.task == CLASSIFICATION_CODE:
        # internal IKN counts bottom-up: children are appended after their parents,
        # so reverse slot order over the new nodes, then j, is a valid bottom-up order
        for node in range(n_nodes - 1, first_new - 1, -1):
            if left[node] != NO_NODE:
                _ikn_from_children(stats, node, left[node], right[node])
        if left[j] != NO_NODE:
            _ikn_from_children(stats, j, left[j], right[j])
    return n_nodes


@numba.njit(**JIT)
def build_tree(g, tree, rows, seed):
    """Sample a Mondrian tree on ``rows`` of the data buffer (paper Alg. 1-2).

    Returns ``(root, n_nodes)``.
    """
    np.random.seed(seed)
    idx = rows.copy()
    tree.parent[0] = NO_NODE
    n_nodes = _sample_block(g, tree, 0, idx, 1)
    return 0, n_nodes


# --------------------------------------------------------------------------- online extension


@numba.njit(**JIT)
def _leaf_rows(tree, j, count):
    out = np.empty(count, INDEX)
    r = tree.leaf_head[j]
    n = 0
    while r != NO_NODE:
        out[n] = r
        n += 1
        r = tree.pt_next[r]
    return out[:n]


@numba.njit(inline="always", **JIT)
def _box_gap(tree, j, x, d):
    """How far ``x`` lies outside the box of node ``j`` along feature ``d`` (Alg. 4 line 2)."""
    return max(tree.lower[j, d] - x[d], 0.0) + max(x[d] - tree.upper[j, d], 0.0)


@numba.njit(inline="always", **JIT)
def _widen(tree, j, x):
    """Extend the box of node ``j`` to hold ``x``."""
    for d in range(x.shape[0]):
        tree.lower[j, d] = min(tree.lower[j, d], x[d])
        tree.upper[j, d] = max(tree.upper[j, d], x[d])


@numba.njit(inline="always", **JIT)
def _record_point(tree, j, r):
    """Put row ``r`` at the head of leaf ``j``'s list."""
    tree.pt_next[r] = tree.leaf_head[j]
    tree.leaf_head[j] = r


@numba.njit(**JIT)
def _absorb_paused(g, tree, j, r, n_nodes):
    """A paused leaf ``j`` absorbs row ``r``; it is resampled (un-paused) if it must split
    now (thesis Alg. 5.10). Returns the new ``n_nodes``."""
    stats = tree.stats
    _widen(tree, j, g.X[r])
    _record_point(tree, j, r)
    if g.task == REGRESSION_CODE:
        _add_point_stats(stats, j, g.y[r])
    else:
        ikn_add(tree.parent, tree.left, tree.right, stats, j, g.labels[r])
    if not _paused(g, stats, j):
        count = stats[j, 0] if g.task == REGRESSION_CODE else np.sum(stats[j])
        n_nodes = _sample_block(g, tree, j, _leaf_rows(tree, j, int(count)), n_nodes)
    return n_nodes


@numba.njit(**JIT)
def _insert_above(g, tree, j, r, split_time, rate, e, n_nodes):
    """A new parent of node ``j`` split at ``split_time`` and a new leaf holding row ``r``
    (Alg. 4 lines 3-9); ``rate`` is the L1 distance of the row to ``j``'s box, ``e``
    scratch of ``n_features`` floats. Returns ``(new parent, new n_nodes)``."""
    left, right, parent, stats = tree.left, tree.right, tree.parent, tree.stats
    x = g.X[r]
    n_features = x.shape[0]
    for d in range(n_features):
        e[d] = _box_gap(tree, j, x, d)
    d = _sample_dimension(e, rate)
    if x[d] > tree.upper[j, d]:
        xi = tree.upper[j, d] + np.random.random() * (x[d] - tree.upper[j, d])
    else:
        xi = x[d] + np.random.random() * (tree.lower[j, d] - x[d])
    new = n_nodes
    leaf = n_nodes + 1
    n_nodes += 2
    p = parent[j]
    parent[new] = p
    if p != NO_NODE:
        if left[p] == j:
            left[p] = new
        else:
            right[p] = new
    tree.feature[new] = d
    tree.threshold[new] = xi
    tree.tau[new] = split_time
    tree.leaf_head[new] = NO_NODE
    for dd in range(n_features):
        tree.lower[new, dd] = min(tree.lower[j, dd], x[dd])
        tree.upper[new, dd] = max(tree.upper[j, dd], x[dd])
    parent[j] = new
    parent[leaf] = new
    if x[d] <= xi:
        left[new] = leaf
        right[new] = j
    else:
        left[new] = j
        right[new] = leaf
    if g.min_samples_split >= 2:
        # a one-point block is always paused: SampleMondrianBlock makes it a leaf
        # and draws nothing, so write that leaf directly (no scratch allocations)
        _make_leaf(g, tree, leaf, r)
        tree.pt_next[r] = NO_NODE
        for dd in range(n_features):
            tree.lower[leaf, dd] = x[dd]
            tree.upper[leaf, dd] = x[dd]
        for s in range(stats.shape[1]):
            stats[leaf, s] = 0.0
        if g.task == REGRESSION_CODE:
            _add_point_stats(stats, leaf, g.y[r])
        else:
            stats[leaf, g.labels[r]] += 1.0
    else:
        one = np.empty(1, INDEX)
        one[0] = r
        n_nodes = _sample_block(g, tree, leaf, one, n_nodes)
    if g.task == REGRESSION_CODE:
        for s in range(stats.shape[1]):
            stats[new, s] = stats[j, s]
        _add_point_stats(stats, new, g.y[r])
    else:
        _ikn_from_children(stats, new, j, leaf)
        ikn_refresh_up(left, right, parent, stats, p, g.labels[r])
    return new, n_nodes


@numba.njit(**JIT)
def _extend_one(g, tree, r, root, n_nodes, e):
    """ExtendMondrianTree for one row ``r`` (paper Alg. 3-4, thesis Alg. 5.10).

    ``e`` is scratch of ``n_features`` floats. A point inside a node's box (most of the
    path's top) costs one pass over the features: nothing is drawn and nothing extends.
    Returns the new ``(root, n_nodes)``.
    """
    x = g.X[r]
    tau = tree.tau
    j = root
    while True:
        if tree.left[j] == NO_NODE and _paused(g, tree.stats, j):
            return root, _absorb_paused(g, tree, j, r, n_nodes)
        rate = 0.0
        for d in range(x.shape[0]):
            rate += _box_gap(tree, j, x, d)
        tau_parent = 0.0 if tree.parent[j] == NO_NODE else tau[tree.parent[j]]
        split_time = np.inf
        if rate > 0:
            split_time = tau_parent + np.random.exponential(1.0 / rate)
        if split_time < tau[j]:
            new, n_nodes = _insert_above(g, tree, j, r, split_time, rate, e, n_nodes)
            if tree.parent[new] == NO_NODE:
                root = new
            return root, n_nodes
        # extend the block of j and descend (Alg. 4 lines 11-14)
        if rate > 0:
            _widen(tree, j, x)
        if g.task == REGRESSION_CODE:
            _add_point_stats(tree.stats, j, g.y[r])
        if tree.left[j] == NO_NODE:
            # a leaf stopped by the lifetime, not paused: it only records the point
            _record_point(tree, j, r)
            if g.task == CLASSIFICATION_CODE:
                ikn_add(tree.parent, tree.left, tree.right, tree.stats, j, g.labels[r])
            return root, n_nodes
        j = child(tree, j, x)


@numba.njit(**JIT)
def extend_tree(g, tree, rows, seed, root, n_nodes):
    """Add ``rows`` of the data buffer one by one, in order (paper Alg. 3).

    Returns the new ``(root, n_nodes)``.
    """
    np.random.seed(seed)
    e = np.empty(g.X.shape[1])
    for i in range(rows.shape[0]):
        root, n_nodes = _extend_one(g, tree, rows[i], root, n_nodes, e)
    return root, n_nodes
