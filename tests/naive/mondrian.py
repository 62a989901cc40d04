"""Oracles of Mondrian trees: the sampling process and the flat tree's invariants,
compact trees (``mondrian._compact``) and the Mondrian kernel (``mondrian._kernel_features``)."""

from __future__ import annotations

import numpy as np

# ---------------------------------------------------------------- Mondrian tree sampling


def naive_sample_mondrian_block(X, rows, rng, *, tau_parent=0.0, lifetime=np.inf,
                                min_samples_split=2, labels=None):
    """SampleMondrianBlock (paper Alg. 2; thesis Alg. 5.2 / 5.9 with pausing), recursively.

    Plain NumPy reference sampler. ``rows`` index ``X``; ``rng`` is a ``np.random.Generator``.
    Regression (``labels is None``): a block with fewer than ``min_samples_split`` points is
    paused. Classification: a block is also paused when all its labels are identical.
    Returns a nested dict ``{rows, lower, upper, tau, feature, threshold, left, right}``
    (``feature = -1`` and ``left = right = None`` at a leaf, whose ``tau`` is ``lifetime``).
    """
    rows = np.asarray(rows)
    pts = X[rows]
    lower = pts.min(axis=0)
    upper = pts.max(axis=0)
    node = dict(rows=rows, lower=lower, upper=upper, tau=lifetime, feature=-1,
                threshold=np.nan, left=None, right=None)
    paused = len(rows) < min_samples_split
    if labels is not None:
        paused = paused or len(np.unique(labels[rows])) <= 1
    extent = upper - lower
    rate = extent.sum()
    if paused or rate <= 0:
        return node
    t = tau_parent + rng.exponential(1.0 / rate)
    if not t < lifetime:
        return node
    d = int(rng.choice(len(extent), p=extent / rate))
    xi = rng.uniform(lower[d], upper[d])
    go_left = pts[:, d] <= xi
    node.update(tau=t, feature=d, threshold=xi)
    kw = dict(lifetime=lifetime, min_samples_split=min_samples_split, labels=labels)
    node["left"] = naive_sample_mondrian_block(X, rows[go_left], rng, tau_parent=t, **kw)
    node["right"] = naive_sample_mondrian_block(X, rows[~go_left], rng, tau_parent=t, **kw)
    return node


def naive_tree_leaves(node):
    """Row arrays of the leaves of a nested tree from ``naive_sample_mondrian_block``."""
    if node["left"] is None:
        return [node["rows"]]
    return naive_tree_leaves(node["left"]) + naive_tree_leaves(node["right"])


def flat_tree_leaf_rows(tree, j):
    """Rows stored in the linked list of leaf slot ``j`` of a flat tree."""
    out = []
    r = tree.leaf_head[j]
    while r != -1:
        out.append(int(r))
        r = tree.pt_next[r]
        if len(out) > tree.pt_next.shape[0]:
            raise AssertionError(f"cycle in the point list of leaf {j}")
    return out


def check_tree_invariants(tree, X, y, labels, rows, task, *, lifetime=np.inf,
                          min_samples_split=2, n_classes=None):
    """Assert every structural invariant of a flat Mondrian tree (the layout in
    ``docs/families/mondrian-forests.md``).

    ``rows`` are all the rows inserted so far; ``task`` is "regression" or "classification".
    Raises ``AssertionError`` with a message on the first violation.
    """
    rows = np.sort(np.asarray(rows))
    n_nodes = int(tree.n_nodes)
    root = int(tree.root)
    assert 1 <= n_nodes <= 2 * len(rows) - 1, (n_nodes, len(rows))
    assert tree.parent[root] == -1, "root has a parent"

    # reachability and pointer consistency (nodes are never deleted: all live slots reachable)
    order = []
    stack = [root]
    seen = set()
    while stack:
        j = stack.pop()
        assert 0 <= j < n_nodes, f"slot {j} out of the live range"
        assert j not in seen, f"slot {j} reached twice"
        seen.add(j)
        order.append(j)
        lj, rj = int(tree.left[j]), int(tree.right[j])
        if lj == -1 or rj == -1:
            assert lj == rj == -1, f"node {j} has one child"
            assert tree.feature[j] == -1, f"leaf {j} has a feature"
        else:
            assert tree.parent[lj] == j and tree.parent[rj] == j, f"parent pointers of {j}"
            assert 0 <= tree.feature[j] < X.shape[1], f"bad feature at {j}"
            assert tree.leaf_head[j] == -1, f"internal node {j} stores points"
            stack += [rj, lj]
    assert seen == set(range(n_nodes)), "unreachable live slots"

    # points below every node (post-order over the reversed pre-order)
    below = {}
    for j in reversed(order):
        if tree.left[j] == -1:
            below[j] = flat_tree_leaf_rows(tree, j)
        else:
            below[j] = below[int(tree.left[j])] + below[int(tree.right[j])]
    assert sorted(below[root]) == list(rows), "leaf lists do not partition the inserted rows"

    for j in order:
        pts = X[below[j]]
        assert len(below[j]) > 0, f"empty node {j}"
        np.testing.assert_array_equal(tree.lower[j], pts.min(axis=0), err_msg=f"lower {j}")
        np.testing.assert_array_equal(tree.upper[j], pts.max(axis=0), err_msg=f"upper {j}")
        tp = 0.0 if j == root else tree.tau[tree.parent[j]]
        if task == "regression":
            n_j = len(below[j])
            yy = y[below[j]]
            np.testing.assert_allclose(tree.stats[j], [n_j, yy.sum(), (yy ** 2).sum()],
                                       rtol=1e-9, atol=1e-9, err_msg=f"regression stats {j}")
            paused = n_j < min_samples_split
        else:
            lab = labels[below[j]]
            paused = len(lab) < min_samples_split or len(np.unique(lab)) <= 1
        if tree.left[j] == -1:
            assert tree.tau[j] == lifetime, f"leaf {j} tau {tree.tau[j]} != lifetime"
            if task == "classification":
                counts = np.bincount(labels[below[j]], minlength=n_classes)
                np.testing.assert_array_equal(tree.stats[j], counts, err_msg=f"leaf counts {j}")
            if np.isinf(lifetime):
                # with an infinite lifetime a leaf is paused or holds identical points only
                assert paused or np.all(pts == pts[0]), f"leaf {j} neither paused nor constant"
        else:
            lj, rj = int(tree.left[j]), int(tree.right[j])
            f = int(tree.feature[j])
            xi = tree.threshold[j]
            assert not paused, f"internal node {j} should be paused"
            assert tp < tree.tau[j] < lifetime, f"split time of {j} not in (tau_parent, lifetime)"
            assert tree.tau[lj] > tree.tau[j] and tree.tau[rj] > tree.tau[j], f"tau order {j}"
            for c in (lj, rj):
                assert np.all(tree.lower[j] <= tree.lower[c]), f"extent {j} !>= child {c}"
                assert np.all(tree.upper[j] >= tree.upper[c]), f"extent {j} !>= child {c}"
            assert tree.lower[j, f] <= xi < tree.upper[j, f], f"threshold of {j} outside extent"
            assert tree.upper[lj, f] <= xi < tree.lower[rj, f], f"children of {j} straddle xi"
            if task == "regression":
                np.testing.assert_allclose(tree.stats[j], tree.stats[lj] + tree.stats[rj],
                                           rtol=1e-9, atol=1e-9, err_msg=f"sum stats {j}")
            else:
                ikn = np.minimum(tree.stats[lj], 1) + np.minimum(tree.stats[rj], 1)
                np.testing.assert_array_equal(tree.stats[j], ikn, err_msg=f"IKN counts {j}")

    # routing: every training point reaches the leaf whose list holds it
    leaf_of = {r: j for j in order if tree.left[j] == -1 for r in below[j]}
    for r in rows:
        j = root
        while tree.left[j] != -1:
            j = tree.left[j] if X[r, tree.feature[j]] <= tree.threshold[j] else tree.right[j]
        assert j == leaf_of[int(r)], f"row {r} routes to {j}, stored at {leaf_of[int(r)]}"


# ---------------------------------------------------------------- compact Mondrian trees (oracles)


def naive_preorder_structure(feature, n_features):
    """Oracle of ``mondrian._compact.preorder_structure``: ``(code, where, right)``.

    Other method: a recursive parse (a subtree is a leaf, or an internal node followed by
    its left then its right subtree), counting the subtrees still to read at the end.
    """
    n = len(feature)
    right = np.full(n, -1, np.int64)
    bad = [k for k in range(n) if not -1 <= feature[k] < n_features]

    def parse(k):  # -> index after the subtree at k, or None if the input ends first
        if k >= n:
            return None
        if feature[k] < 0:
            return k + 1
        after_left = parse(k + 1)
        if after_left is None:
            return None
        if after_left < n:
            right[k] = after_left
        return parse(after_left)

    end = parse(0)
    if end is not None and end < n and (not bad or end <= bad[0]):
        return 1, end, right
    if bad:
        return 2, bad[0], right
    if end is None:
        missing = 1 + sum(1 if f >= 0 else -1 for f in feature)
        return 3, missing, right
    return 0, 0, right


def naive_expand(feature, threshold, tau, lower, upper, counts, leaf_tau, ikn):
    """Oracle of ``mondrian._compact.expand_nodes``: per-node ``(left, right, parent,
    threshold, tau, lower, upper, counts)`` by recursion over the preorder."""
    n = len(feature)
    _, _, right = naive_preorder_structure(feature, 1 + max(int(np.max(feature)), 0))
    left = np.where(np.asarray(feature) >= 0, np.arange(n) + 1, -1)
    parent = np.full(n, -1)
    for k in range(n):
        if feature[k] >= 0:
            parent[k + 1] = parent[right[k]] = k
    internal = np.flatnonzero(np.asarray(feature) >= 0)
    leaves = np.flatnonzero(np.asarray(feature) < 0)
    thr = np.zeros(n)
    thr[internal] = threshold
    t = np.full(n, float(leaf_tau))
    t[internal] = tau
    lo = np.zeros((n, lower.shape[1]))
    up = np.zeros((n, lower.shape[1]))
    c = np.zeros((n, counts.shape[1]))

    def fill(k):
        if feature[k] < 0:
            i = int(np.searchsorted(leaves, k))
            lo[k], up[k], c[k] = lower[i], upper[i], counts[i]
            return
        a, b = k + 1, right[k]
        fill(a)
        fill(b)
        lo[k] = np.minimum(lo[a], lo[b])
        up[k] = np.maximum(up[a], up[b])
        c[k] = (np.minimum(c[a], 1) + np.minimum(c[b], 1)) if ikn else c[a] + c[b]

    fill(0)
    return left, right, parent, thr, t, lo, up, c


# ------------------------------------------------- Mondrian kernel (mondrian._kernel_features)

_U64 = (1 << 64) - 1


def naive_mix64(h: int) -> int:
    """splitmix64's finaliser on Python ints (mod 2^64)."""
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & _U64
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & _U64
    return h ^ (h >> 31)


def naive_kernel_cells(X, tree, lam, seed) -> np.ndarray:
    """The cell of every row at width ``lam`` by the conditional Mondrian, one row at a time
    in Python: at node j, a row at L1 distance E from the box is cut off at tau_parent +
    Exp(E) (the uniform from the hash of the row's bits, the seed and j) if that comes before
    min(tau_j, lam), into the tree's unseen column (after its cells); else a cell gives its
    preorder number (:func:`naive_cell_columns`) and a split sends the row on."""
    column, unseen = naive_cell_columns(tree, lam)
    out = np.empty(X.shape[0], np.int64)
    bits = (np.asarray(X, float) + 0.0).view(np.uint64)
    for i in range(X.shape[0]):
        h = naive_mix64(int(seed))
        for b in bits[i]:
            h = naive_mix64(h ^ ((int(b) + 0x9E3779B97F4A7C15) & _U64))
        j, tau_p = tree.root, 0.0
        while True:
            lo, hi = tree.lower[j], tree.upper[j]
            rate = float(np.sum(np.maximum(lo - X[i], 0) + np.maximum(X[i] - hi, 0)))
            if rate > 0:
                u = (naive_mix64(h ^ (((int(j) + 1) * 0x9E3779B97F4A7C15) & _U64)) >> 11) + 1
                if tau_p - np.log(u / 2.0**53) / rate < min(tree.tau[j], lam):
                    out[i] = unseen
                    break
            if tree.left[j] == -1 or tree.tau[j] > lam:
                out[i] = column[j]
                break
            tau_p = tree.tau[j]
            j = tree.left[j] if X[i, tree.feature[j]] <= tree.threshold[j] else tree.right[j]
    return out


def naive_mondrian_box_cells(X, lower, upper, lam, rng) -> np.ndarray:
    """Cell ids of the rows of ``X`` in one Mondrian partition of the whole box
    [lower, upper] with lifetime ``lam`` (Roy & Teh's generative process: a block of linear
    dimension L is cut after Exp(L), the dimension in proportion to its side, the location
    uniform on it), sampled with numpy, blocks recursively."""
    out = np.zeros(X.shape[0], np.int64)
    next_id = [0]

    def block(rows, lo, hi, t):
        side = hi - lo
        t_cut = t + rng.exponential(1 / side.sum())
        if t_cut > lam:
            out[rows] = next_id[0]
            next_id[0] += 1
            return
        d = rng.choice(side.size, p=side / side.sum())
        xi = rng.uniform(lo[d], hi[d])
        go = X[rows, d] <= xi
        hi_left, lo_right = hi.copy(), lo.copy()
        hi_left[d], lo_right[d] = xi, xi
        block(rows[go], lo, hi_left, t_cut)
        block(rows[~go], lo_right, hi, t_cut)

    block(np.arange(X.shape[0]), np.asarray(lower, float), np.asarray(upper, float), 0.0)
    return out


def naive_cell_columns(tree, lam) -> tuple[dict, int]:
    """Preorder (left first) numbers of the cells of a flat Mondrian tree at width ``lam``:
    the reachable nodes that are leaves or split after ``lam``."""
    column, stack = {}, [tree.root]
    while stack:
        j = stack.pop()
        if tree.left[j] == -1 or tree.tau[j] > lam:
            column[j] = len(column)
        else:
            stack += [tree.right[j], tree.left[j]]
    return column, len(column)


# ---------------------------------------------------------------- Laplace kernel (oracle)


def naive_laplace_kernel(A, B, lifetime):
    """``exp(-lifetime * ||a - b||_1)`` for every pair of rows, by loops."""
    A, B = np.asarray(A, float), np.asarray(B, float)
    K = np.empty((A.shape[0], B.shape[0]))
    for i in range(A.shape[0]):
        for j in range(B.shape[0]):
            K[i, j] = np.exp(-lifetime * sum(abs(a - b) for a, b in zip(A[i], B[j], strict=True)))
    return K


# ---------------------------------------------------------------- the forest's mixture


def naive_forest_components(model, Xs):
    """Per row, the list of ``(weight, mean, variance)`` of a fitted Mondrian forest
    regressor's predictive mixture at the scaled rows ``Xs`` (paper Alg. 5, eq. 3 and 5),
    walked in plain Python over each tree's predictor: at each node of the path a
    branch-off component of weight ``P(no earlier branch-off) p_j(x)`` (the predictor's
    ``_branch_off`` and ``_off_component``, the per-node formulas), at the leaf its own
    posterior with the rest, every tree weighted ``1 / n_trees``."""
    from mondrian._predict import NODE_MEAN, NODE_VAR, RIGHT, _branch_off, _off_component

    model._ensure_posterior()
    trees = list(model._posterior)
    out = []
    for x in Xs:
        comps = []
        for R, P, h in trees:
            j, alive = 0, 1.0
            while True:
                p, eta, delta = _branch_off(R, j, x)
                if p > 0.0:
                    comps.append((alive * p / len(trees), *_off_component(j, eta, delta, p,
                                                                           P, h)))
                if R[1][j, RIGHT] < 0:
                    if p < 1.0:
                        comps.append((alive * (1.0 - p) / len(trees), P[j, NODE_MEAN],
                                      P[j, NODE_VAR]))
                    break
                alive *= 1.0 - p
                j = j + 1 if x[R[1][j, 1]] <= R[0][j] else int(R[1][j, RIGHT])
        out.append(comps)
    return out
