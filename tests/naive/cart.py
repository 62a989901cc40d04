"""Oracles of weighted CART (``ebf._cart``: routing, node statistics, class fractions), of
its empirical leaves (``ebf._leaf_knots``) and of the flat-tree structure checks
(``basics.flat_tree.check_trees``)."""

from __future__ import annotations

import numpy as np

# ---------------------------------------------------------------- weighted CART (ebf._cart)


def naive_path(left, right, feature, threshold, root, x, missing_left=None) -> list[int]:
    """Nodes visited by row ``x`` from ``root`` to its leaf (scikit-learn's float32 rule; a
    missing value, NaN, goes left where ``missing_left``, right elsewhere or without it)."""
    node = int(root)
    path = [node]
    while left[node] != -1:
        xv = float(np.float32(x[feature[node]]))  # scikit-learn stores X as float32
        go_left = xv <= threshold[node]
        if np.isnan(xv) and missing_left is not None:
            go_left = bool(missing_left[node])
        node = int(left[node]) if go_left else int(right[node])
        path.append(node)
    return path


def naive_apply(left, right, feature, threshold, root, X, missing_left=None) -> np.ndarray:
    """Leaf of every row of ``X`` in one tree."""
    return np.array([naive_path(left, right, feature, threshold, root, x, missing_left)[-1]
                     for x in X])


def naive_node_stats(left, right, feature, threshold, root, X, y, w, missing_left=None):
    """Weighted mean and weighted variance of the training rows that reach every node.

    Returns dicts ``node -> mean`` and ``node -> variance`` over the nodes reached by at
    least one row of positive weight; variance is ``sum w (y - mean)^2 / sum w``.
    """
    rows: dict[int, list[int]] = {}
    for i, x in enumerate(X):
        if w[i] <= 0:
            continue
        for node in naive_path(left, right, feature, threshold, root, x, missing_left):
            rows.setdefault(node, []).append(i)
    mean, var = {}, {}
    for node, idx in rows.items():
        yy = np.asarray(y, float)[idx]
        ww = np.asarray(w, float)[idx]
        total = 0.0
        s = 0.0
        for yi, wi in zip(yy, ww, strict=True):
            total += wi
            s += wi * yi
        m = s / total
        ss = 0.0
        for yi, wi in zip(yy, ww, strict=True):
            ss += wi * (yi - m) ** 2
        mean[node] = m
        var[node] = ss / total
    return mean, var


def naive_class_fractions(leaves, codes, w, n_classes) -> dict[int, np.ndarray]:
    """Weighted class fractions of the rows in every leaf (global class columns)."""
    out: dict[int, np.ndarray] = {}
    for leaf in np.unique(leaves):
        frac = np.zeros(n_classes)
        for i in np.flatnonzero(leaves == leaf):
            frac[codes[i]] += w[i]
        if frac.sum() > 0:
            out[int(leaf)] = frac / frac.sum()
    return out


# ---------------------------------------------------------------- flat-tree structure checks


def naive_check_trees(left, right, feature, threshold, offsets, n_features, roots=None,
                      forward=True):
    """Oracle of ``basics.flat_tree.check_trees``: the first violation as
    ``(code, tree, node, value)``, ``(0, 0, 0, 0)`` for well-formed trees.

    Same contract, other method: the per-node checks as boolean columns (the first failing
    node, then its first failing check), parent counts by ``np.bincount``, reachability by a
    breadth-first set walk.
    """
    from basics import flat_tree as ft

    roots = offsets[:-1] if roots is None else roots
    for t in range(len(offsets) - 1):
        a, b, root = int(offsets[t]), int(offsets[t + 1]), int(roots[t])
        node = np.arange(a, b)
        lt, rt, fe = left[a:b], right[a:b], feature[a:b]
        leaf = (lt == -1) & (rt == -1)
        inner = ~leaf & (lt != -1) & (rt != -1)
        l_in = (lt >= a) & (lt < b)
        r_in = (rt >= a) & (rt < b)
        fwd = ((lt > node) & (rt > node)) | (not forward)
        f_in = (fe >= 0) & (fe < n_features)
        columns = [
            (ft.LEAF_FEATURE, leaf & (fe != -1), fe),
            (ft.ONE_CHILD, ~leaf & (lt == -1), rt),
            (ft.ONE_CHILD, ~leaf & (lt != -1) & (rt == -1), lt),
            (ft.LEFT_OUT, inner & ~l_in, lt),
            (ft.RIGHT_OUT, inner & l_in & ~r_in, rt),
            (ft.BACKWARD, inner & l_in & r_in & (lt <= node) & forward, lt),
            (ft.BACKWARD, inner & l_in & r_in & (lt > node) & (rt <= node) & forward, rt),
            (ft.FEATURE_OUT, inner & l_in & r_in & fwd & ~f_in, fe),
            (ft.THRESHOLD, inner & l_in & r_in & fwd & f_in
             & ~np.isfinite(threshold[a:b]), np.zeros(b - a, np.int64)),
        ]
        fails = np.column_stack([c for _, c, _ in columns])
        if fails.any():
            i = int(np.flatnonzero(fails.any(axis=1))[0])
            k = int(np.flatnonzero(fails[i])[0])
            return columns[k][0], t, a + i, int(columns[k][2][i])
        counts = np.bincount(np.concatenate([lt[inner], rt[inner]]) - a, minlength=b - a)
        want = np.where(node == root, 0, 1)
        wrong = np.flatnonzero(counts != want)
        if wrong.size:
            i = int(wrong[0])
            code = ft.ROOT_CHILD if a + i == root else ft.PARENTS
            return code, t, a + i, int(min(counts[i], 2))
        reached, front = {root}, [root]
        while front:
            front = [int(c) for j in front if left[j] != -1 for c in (left[j], right[j])]
            reached.update(front)
        if len(reached) != b - a:
            return ft.UNREACHED, t, root, len(reached)
    return 0, 0, 0, 0


# ------------------------------------------------------- empirical leaves (ebf._leaf_knots)


def naive_leaf_knots(y, w, k) -> tuple[np.ndarray, np.ndarray]:
    """Knots of one leaf: its distinct targets with their weight shares when there are at most
    ``k``; else the weighted means of ``k`` parts of equal weight of the target-sorted rows, a
    row on a cut split between the parts (computed on the exact measure: every part is the
    integral of the weighted quantile function over ``[j / k, (j + 1) / k]``); equal knots
    merged. Returns ``(values, weights)``, weights summing to one."""
    y = np.asarray(y, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    o = np.argsort(y, kind="stable")
    y, w = y[o], w[o]
    total = w.sum()
    distinct = np.unique(y)
    if distinct.size <= k:
        return distinct, np.array([w[y == v].sum() / total for v in distinct])
    hi = np.cumsum(w)
    lo = hi - w
    values, weights = [], []
    for j in range(k):
        a, b = total * j / k, total * (j + 1) / k
        share = np.clip(np.minimum(hi, b) - np.maximum(lo, a), 0.0, None)
        if share.sum() <= 0:
            continue
        v = float(np.sum(share * y) / share.sum())
        if values and np.isclose(values[-1], v, rtol=0, atol=1e-12 * (1 + abs(v))):
            weights[-1] += share.sum() / total
        else:
            values.append(v)
            weights.append(share.sum() / total)
    return np.array(values), np.array(weights)


def naive_knot_leaf(knots, knot_weights, leaf_mean, leaf_var, floor, share):
    """One leaf's kernels: knots re-centred on ``leaf_mean``; kernel variance ``h2 = max(V -
    Var_knots, share V, floor)`` with ``V = max(leaf_var, floor)``, knots drawn towards the
    mean by ``sqrt((V - h2) / Var_knots)`` where they alone exceed ``V - h2``. Returns
    ``(weights, means, variances)``."""
    p = np.asarray(knot_weights, dtype=np.float64)
    p = p / p.sum()
    d = np.asarray(knots, dtype=np.float64)
    d = d - np.sum(p * d)
    var_knots = np.sum(p * d * d)
    V = max(leaf_var, floor)
    h2 = max(V - var_knots, share * V, floor)
    c = np.sqrt((V - h2) / var_knots) if V - h2 < var_knots else 1.0
    return p, leaf_mean + c * d, np.full(p.shape, h2)
