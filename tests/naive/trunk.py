"""Oracles of the EBF trunk (``ebf.trunk`` and its kernels): split stability
(Taddy et al. (2015), Sec. 3.1), histograms, best splits, level-wise growth, histogram
subtraction and the nodes a subtracting grower asks for."""

from __future__ import annotations

import numpy as np
from scipy import stats

# ---------------------------------------------------------------- trunk stability (EBF Sec. 3.1)


def naive_clt_split_match(X, y, task="regression"):
    """Eq. (6)-(11) of Taddy et al. (2015) literally, for binary features (x in {0, 1}).

    Regression uses eq. (9): ``d_ji = ybar1(x_i1)^2 - ybarj(x_ij)^2 - 2 y_i (ybar1 - ybarj)``.
    Classification uses the same construction with each row's first-order Gini term
    ``1 - 2 p_side(y_i) + sum_k p_side(k)^2``. Returns ``1 - sum_j Phi(-sqrt(n) z_j)``.
    """
    X = np.asarray(X)
    y = np.asarray(y)
    n, p = X.shape

    def terms(j):
        g = np.empty(n)
        for side in (0, 1):
            rows = [i for i in range(n) if X[i, j] == side]
            if task == "regression":
                ybar = sum(y[i] for i in rows) / len(rows)
                for i in rows:
                    g[i] = ybar**2 - 2 * y[i] * ybar  # + y_i^2, which cancels in d
            else:
                labels = sorted(set(y.tolist()))
                frac = {c: sum(1 for i in rows if y[i] == c) / len(rows) for c in labels}
                sq = sum(v * v for v in frac.values())
                for i in rows:
                    g[i] = 1 - 2 * frac[y[i]] + sq
        return g

    g = [terms(j) for j in range(p)]
    best = int(np.argmin([gj.sum() for gj in g]))
    miss = 0.0
    for j in range(p):
        if j == best:
            continue
        d = g[best] - g[j]
        z = abs(d.mean()) / np.sqrt(np.dot(d, d) / n)
        miss += stats.norm.cdf(-np.sqrt(n) * z)
    return max(0.0, 1.0 - miss)


def naive_impurity_terms(y, w, left, task, n_classes):
    """Per-row impurity contributions of a split (eq. 7-8), row by row; an empty side none."""
    g = np.zeros(len(y))
    for side in (left, ~left):
        rows = np.flatnonzero(side)
        if rows.size == 0:
            continue
        W = sum(w[i] for i in rows)
        if task == "regression":
            mu = sum(w[i] * y[i] for i in rows) / W
            for i in rows:
                g[i] = w[i] * (y[i] - mu) ** 2
        else:
            p = [sum(w[i] for i in rows if y[i] == c) / W for c in range(n_classes)]
            sq = sum(v * v for v in p)
            for i in rows:
                g[i] = w[i] * (1.0 - 2.0 * p[y[i]] + sq)
    return g


def naive_stored_split_match(X, y, w, edges, task, n_classes, min_rows, chosen, blocks=None):
    """Signed eq. (11) at one node for a split fixed beforehand, ``chosen = (f, b)``
    (rows with ``x_f <= edges[f][b]`` go left), against the best split on every other feature
    (brute force over its edges, :func:`naive_best_split`, at least ``min_rows`` a side):
    ``max(0, 1 - sum_j Phi(sqrt(n) dbar_j / sd_j))`` with ``d_j = g1 - gj``. With
    ``blocks`` (block id per row) the rows of a block are summed first and the blocks play
    the rows' part (one bootstrap weight per block)."""
    f1, b1 = chosen
    g1 = naive_impurity_terms(y, w, X[:, f1] <= edges[f1][b1], task, n_classes)
    miss = 0.0
    for j in range(X.shape[1]):
        if j == f1:
            continue
        _, f, b, _ = naive_best_split(X[:, [j]], y, w, [edges[j]], task, n_classes, min_rows)
        if f < 0:
            continue
        d = g1 - naive_impurity_terms(y, w, X[:, j] <= edges[j][b], task, n_classes)
        if blocks is not None:
            d = np.array([sum(d[i] for i in range(len(y)) if blocks[i] == k)
                          for k in range(max(blocks) + 1)])
        n = len(d)
        sd = np.sqrt(sum(v * v for v in d) / n)
        if sd == 0:
            continue
        miss += stats.norm.cdf(np.sqrt(n) * np.mean(d) / sd)
    return max(0.0, 1.0 - miss)


# ---------------------------------------------------------------- trunk (ebf.trunk and its kernels)


def naive_histogram(binned, node_of_row, slot_of_node, S, n_slots, n_bins):
    """``hist[slot, f, b] = sum of S[i]`` over rows i of the node in that slot with code b."""
    n, d = binned.shape
    hist = np.zeros((n_slots, d, n_bins, S.shape[1]))
    for i in range(n):
        s = slot_of_node[node_of_row[i]]
        if s < 0:
            continue
        for f in range(d):
            hist[s, f, binned[i, f]] += S[i]
    return hist


def naive_stats(y, w, task, n_classes):
    """Statistic totals of a set of rows: ``[n, W, WY, WY2]`` or ``[n, W_0, ..., W_C-1]``."""
    if task == "regression":
        return np.array([len(y), w.sum(), (w * y).sum(), (w * y * y).sum()])
    return np.concatenate([[len(y)], [w[y == c].sum() for c in range(n_classes)]])


def naive_impurity(y, w, task, n_classes):
    """Weighted squared error about the weighted mean (paper eq. 4) or weighted Gini."""
    W = w.sum()
    if W <= 0:
        return 0.0
    if task == "regression":
        mu = (w * y).sum() / W
        return float((w * (y - mu) ** 2).sum())
    p = np.array([w[y == c].sum() for c in range(n_classes)]) / W
    return float(W * (1.0 - (p**2).sum()))


def naive_scale(y, w, task):
    """Size of the sums that cancel in an impurity decrease (for the zero-gain rule)."""
    return float((w * y * y).sum()) if task == "regression" else float(w.sum())


def naive_best_split(X, y, w, edges, task, n_classes, min_rows=1, min_weight=0.0):
    """Brute force over every (feature f, edge b, side of the missing values): rows with
    ``x <= edges[f][b]`` go left, rows with a missing ``x`` (NaN) right or left; with missing
    values in the node also ``b = len(edges[f])``: every value left, the missing ones right.

    Returns ``(gain, f, b, missing_left)`` of the valid split with the largest impurity
    decrease (within a relative 1e-9, the lowest feature, then the lowest edge, then the
    missing values right), or ``(0.0, -1, -1, 0)``. The missing values go left only beside
    some values (the split of the missing values from all others has one form). Without
    missing values in the node, ``missing_left`` says whether the left child has at least
    as many rows.
    """
    parent = naive_impurity(y, w, task, n_classes)
    scale = naive_scale(y, w, task)
    cands = []
    for f in range(X.shape[1]):
        miss = np.isnan(X[:, f])
        thresholds = list(edges[f]) + ([np.inf] if miss.any() else [])
        for b, t in enumerate(thresholds):
            for ml in ((0, 1) if miss.any() and b < len(edges[f]) else (0,)):
                go_left = (X[:, f] <= t) | (miss & bool(ml))
                if ml and not (X[:, f] <= t).any():
                    continue  # missing values alone on the left: the form with ml = 0
                nl, nr = go_left.sum(), (~go_left).sum()
                wl, wr = w[go_left].sum(), w[~go_left].sum()
                if nl < min_rows or nr < min_rows:
                    continue
                if wl <= 0 or wr <= 0 or wl < min_weight or wr < min_weight:
                    continue
                gain = (parent - naive_impurity(y[go_left], w[go_left], task, n_classes)
                        - naive_impurity(y[~go_left], w[~go_left], task, n_classes))
                side = ml if miss.any() else int(nl >= nr)
                cands.append((gain, f, b, ml, side))
    if not cands:
        return 0.0, -1, -1, 0
    best = max(c[0] for c in cands)
    if not best > 1e-9 * scale:
        return 0.0, -1, -1, 0
    tied = [(f, b, ml, side, g) for g, f, b, ml, side in cands if g >= best - 1e-9 * abs(best)]
    f, b, _, side, g = min(tied)
    return g, f, b, side


def _naive_threshold(edges, f, b):
    """The raw threshold of bin ``b`` of feature ``f``: its edge, or the largest float64."""
    return edges[f][b] if b < len(edges[f]) else np.finfo(np.float64).max


def _naive_left(x, threshold, missing_left):
    """Rows that go left: ``x <= threshold``, and the missing ones where ``missing_left``."""
    return (x <= threshold) | (np.isnan(x) & bool(missing_left))


def naive_grow(X, y, w, edges, task="regression", n_classes=None, max_leaves=None,
               min_rows=1, min_weight=0.0, max_depth=None):
    """Level-wise CART on raw rows with the grower's rules, as a dict of flat arrays.

    Per level: best split of every open node, applied in decreasing gain (ties by node id)
    within the leaf budget; children appended in parent-id order; leaf ids in preorder.
    """
    rows = [np.arange(len(y))]
    nodes = [dict(feature=-1, bin=-1, threshold=np.nan, left=-1, right=-1, depth=0, gain=0.0,
                  missing_left=0)]
    open_nodes = [0]
    n_closed = 0
    while open_nodes:
        depth = nodes[open_nodes[0]]["depth"]
        if max_depth is not None and depth >= max_depth:
            break
        if max_leaves is not None and n_closed + len(open_nodes) >= max_leaves:
            break
        found = []
        for j in open_nodes:
            r = rows[j]
            g, f, b, ml = naive_best_split(X[r], y[r], w[r], edges, task, n_classes,
                                           min_rows, min_weight)
            if f >= 0:
                found.append((-g, j, f, b, ml, g))
        found.sort()
        if max_leaves is not None:
            found = found[: max_leaves - n_closed - len(open_nodes)]
        found.sort(key=lambda t: t[1])
        new_open = []
        for _, j, f, b, ml, g in found:
            r = rows[j]
            t = _naive_threshold(edges, f, b)
            go_left = _naive_left(X[r, f], t, ml)
            nodes[j].update(feature=f, bin=b, threshold=t, gain=g, missing_left=ml,
                            left=len(nodes), right=len(nodes) + 1)
            for part in (r[go_left], r[~go_left]):
                new_open.append(len(nodes))
                rows.append(part)
                nodes.append(dict(feature=-1, bin=-1, threshold=np.nan, left=-1, right=-1,
                                  depth=depth + 1, gain=0.0, missing_left=0))
        n_closed += len(open_nodes) - len(found)
        open_nodes = new_open

    leaf_id = [-1] * len(nodes)
    counter = [0]

    def preorder(j):
        if nodes[j]["left"] < 0:
            leaf_id[j] = counter[0]
            counter[0] += 1
            return
        preorder(nodes[j]["left"])
        preorder(nodes[j]["right"])

    preorder(0)
    stats = np.array([naive_stats(y[r], w[r], task, n_classes) for r in rows])
    return dict(
        feature=np.array([n["feature"] for n in nodes]),
        threshold_bin=np.array([n["bin"] for n in nodes]),
        threshold=np.array([n["threshold"] for n in nodes], dtype=float),
        missing_left=np.array([n["missing_left"] for n in nodes]),
        left=np.array([n["left"] for n in nodes]),
        right=np.array([n["right"] for n in nodes]),
        depth=np.array([n["depth"] for n in nodes]),
        n_rows=np.array([len(r) for r in rows]),
        weight=stats[:, 1] if task == "regression" else stats[:, 1:].sum(axis=1),
        stats=stats,
        gain=np.array([n["gain"] for n in nodes]),
        leaf_id=np.array(leaf_id),
    )


def naive_trunk_apply(X, arrays):
    """Leaf id of every raw row, one row and one node at a time."""
    out = np.empty(X.shape[0], dtype=np.int64)
    for i in range(X.shape[0]):
        j = 0
        while arrays["feature"][j] >= 0:
            f = arrays["feature"][j]
            ml = arrays["missing_left"][j] if "missing_left" in arrays else 0
            left = _naive_left(X[i, f], arrays["threshold"][j], ml)
            j = arrays["left"][j] if left else arrays["right"][j]
        out[i] = arrays["leaf_id"][j]
    return out


# ---------------------------------------------------------------- histogram subtraction (ebf.trunk)


def naive_subtract_histogram(parent, child, task):
    """The other child's histogram, ``parent - child``, bin by bin: a bin left without rows
    is all zeros, and every column but ``w*y`` (regression column 2) is at least zero."""
    out = np.array(parent, dtype=float, copy=True)
    n_features, n_bins, k = out.shape
    for f in range(n_features):
        for b in range(n_bins):
            diff = parent[f, b] - child[f, b]
            if diff[0] <= 0:
                out[f, b] = 0.0
                continue
            for c in range(k):
                signed = task == "regression" and c == 2
                out[f, b, c] = diff[c] if signed else max(diff[c], 0.0)
    return out


def naive_trunk_requests(trunk, task, min_rows=1, max_leaves=None, max_depth=None,
                         max_cond=np.inf):
    """Nodes a subtracting grower asks its source for, read off the grown trunk.

    The root; then for every split whose children's level was grown (depth and leaf budget
    left) and one of whose children has the ``2 * min_rows`` rows a split needs: only the
    child with fewer rows (the left one on ties) if the other may be derived, else every
    child that needs a histogram. The other may be derived if the totals of the histograms
    it would be made of (its parent's, recursively, plus its sibling's) are at most
    ``max_cond`` times its own (weight; regression also ``W * sum w y**2``, squared bound).
    """
    stats = trunk.stats
    n = trunk.n_nodes
    weight = stats[:, 1] if task == "regression" else stats[:, 1:].sum(axis=1)

    def ok(scale, c):
        if task == "regression":
            w_c, s2_c = stats[c, 1], stats[c, 3]
            return (w_c > 0 and s2_c > 0 and scale[1] <= max_cond * w_c
                    and scale[1] * scale[3] <= max_cond**2 * w_c * s2_c)
        return weight[c] > 0 and scale[1:].sum() <= max_cond * weight[c]

    scale = {0: np.abs(stats[0])}
    asked = [0]
    splits_up_to = {}  # depth -> splits at depths <= depth
    for depth in range(int(trunk.depth.max()) + 1):
        splits_up_to[depth] = int(np.sum((trunk.feature >= 0) & (trunk.depth <= depth)))
    for p in range(n):  # nodes are numbered level by level
        if trunk.feature[p] < 0:
            continue
        level = int(trunk.depth[p]) + 1
        grown = (max_depth is None or level < max_depth) and (
            max_leaves is None or 1 + splits_up_to[level - 1] < max_leaves)
        pair = [int(trunk.left[p]), int(trunk.right[p])]
        need = [trunk.n_rows[c] >= 2 * min_rows for c in pair]
        if not grown or not any(need):
            continue
        small, large = pair if trunk.n_rows[pair[0]] <= trunk.n_rows[pair[1]] else pair[::-1]
        derived = scale.get(p) is not None and ok(scale[p] + np.abs(stats[small]), large)
        if derived:
            asked.append(small)
            scale[small] = np.abs(stats[small])
            scale[large] = scale[p] + np.abs(stats[small])
        else:
            for c, nd in zip(pair, need, strict=True):
                if nd:
                    asked.append(c)
                    scale[c] = np.abs(stats[c])
    return sorted(asked)


def naive_holm(p, alpha):
    """Holm's step-down test through adjusted p-values (Holm 1979): ``p_adj(k) = max over
    j <= k of (m - j + 1) p_(j)`` in sorted order; a hypothesis is rejected when its adjusted
    p-value is below ``alpha``. Returns a list of bools in the order of ``p``."""
    m = len(p)
    order = sorted(range(m), key=lambda i: (p[i], i))
    out = [False] * m
    running = 0.0
    for k, i in enumerate(order):
        running = max(running, (m - k) * p[i])
        out[i] = running < alpha
    return out

