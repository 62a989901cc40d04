"""Statistical and structural tests of the Mondrian tree kernels in ``mondrian._tree``.

Lakshminarayanan, Roy & Teh (2016), Algorithms 1-4 (Sec. 2.2: online trees have the same
distribution as batch trees); Lakshminarayanan (2016) thesis, Alg. 5.1, 5.2, 5.9, 5.10 (paused
Mondrians). Every statistical test uses fixed seeds, so it is deterministic; a test fails when
its p-value falls below ``ALPHA`` (negative controls must fall below ``POWER``).
"""

from __future__ import annotations

from collections import Counter
from functools import cache

import numpy as np
import pytest
from scipy import stats

from basics.tasks import CLASSIFICATION, REGRESSION, task_code
from mondrian._tree import TreeArrays, grow
from tests import naive

ALPHA = 1e-3  # a correct sampler fails a test with probability ~1e-3 per p-value
POWER = 1e-6  # a negative control must be rejected this strongly
N_ROOT = 2000  # trees per root-law test
N_DIST = 1500  # trees per group in the batch-vs-online comparisons
MODES = ("batch", "online", "reverse")


# --------------------------------------------------------------------------- helpers


def n_stats(task, n_classes=2):
    return 3 if task == REGRESSION else n_classes


def build(X, y, labels, rows, task, mss, lifetime, seed, mode="batch", n_classes=2):
    """One tree on ``rows``: batch, online point by point in order, or online in reverse.

    ``online`` calls ``grow`` once per point (seed ``64 * seed + i``: disjoint streams for
    up to 64 rows); ``reverse`` batch-samples the last row then extends the tree with the
    others in one call (the kernel's own loop).
    """
    rows = np.asarray(rows, dtype=np.int64)
    tree = TreeArrays.empty(X.shape[1], n_stats(task, n_classes), X.shape[0])
    args = (X, y, labels)
    if mode == "batch":
        grow(tree, *args, rows, task, mss, lifetime, seed)
    elif mode == "online":
        for i, r in enumerate(rows):
            grow(tree, *args, rows[i:i + 1], task, mss, lifetime, seed * 64 + i)
            assert r in naive.flat_tree_leaf_rows(tree, _leaf_of(tree, X, r))
    elif mode == "reverse":
        rev = rows[::-1]
        grow(tree, *args, rev[:1], task, mss, lifetime, seed)
        grow(tree, *args, rev[1:], task, mss, lifetime, seed + 7_919_000)
    else:
        raise ValueError(mode)
    return tree


def _leaf_of(tree, X, r):
    j = tree.root
    while tree.left[j] != -1:
        j = tree.left[j] if X[r, tree.feature[j]] <= tree.threshold[j] else tree.right[j]
    return j


def summary(tree, X, rows):
    """(n_leaves, root dimension or -1, root split time, rows sent left at the root,
    partition of the rows into leaves)."""
    j = tree.root
    f = int(tree.feature[j])
    part = None
    if f != -1:
        part = tuple(int(r) for r in rows if X[r, f] <= tree.threshold[j])
    leaves = [naive.flat_tree_leaf_rows(tree, k) for k in range(tree.n_nodes)
              if tree.left[k] == -1]
    return tree.n_leaves, f, float(tree.tau[j]), part, _canonical(leaves)


def naive_summary(node):
    f = node["feature"]
    part = None if f == -1 else tuple(int(r) for r in node["left"]["rows"])
    leaves = naive.naive_tree_leaves(node)
    return len(leaves), f, float(node["tau"]), part, _canonical(leaves)


def _canonical(leaves):
    return tuple(sorted(tuple(sorted(int(r) for r in rows)) for rows in leaves))


def chi2_homogeneity(*samples, min_expected=5.0):
    """p-value of the chi-square homogeneity test of categorical samples.

    Categories whose expected count is below ``min_expected`` in some group are pooled into
    one bin (and that bin is dropped if it is still too small).
    """
    counts = [Counter(s) for s in samples]
    sizes = np.array([len(s) for s in samples], float)
    cats = sorted(set().union(*counts), key=repr)
    table = np.array([[c[k] for k in cats] for c in counts], float)
    expected = np.outer(sizes / sizes.sum(), table.sum(axis=0))
    small = (expected < min_expected).any(axis=0)
    pooled = table[:, ~small]
    if small.any():
        rest = table[:, small].sum(axis=1, keepdims=True)
        if (np.outer(sizes / sizes.sum(), rest.sum()) >= min_expected).all():
            pooled = np.hstack([pooled, rest])
    if pooled.shape[1] < 2:
        return 1.0
    return float(stats.chi2_contingency(pooled)[1])


def extents_dataset(extents=(1.0, 2.0, 5.0), n=7, seed=0):
    """``n`` random points whose coordinate ranges are exactly ``extents``."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, len(extents)))
    X = (X - X.min(axis=0)) / (X.max(axis=0) - X.min(axis=0)) * np.asarray(extents)
    return X + rng.normal(size=len(extents))  # the offset must not matter


def reg_data(X):
    n = X.shape[0]
    return np.linspace(-1.0, 2.0, n), np.zeros(n, np.int64)


# --------------------------------------------------------------------------- 1. Mondrian process


@cache
def root_samples(mode, n=N_ROOT, lifetime=np.inf):
    X = extents_dataset()
    y, labels = reg_data(X)
    rows = np.arange(X.shape[0])
    out = []
    for s in range(n):
        t = build(X, y, labels, rows, REGRESSION, 2, lifetime, 1000 + s, mode)
        j = t.root
        f = int(t.feature[j])
        u = np.nan
        if f != -1:
            u = (t.threshold[j] - t.lower[j, f]) / (t.upper[j, f] - t.lower[j, f])
        out.append((float(t.tau[j]), f, u))
    return X, out


@pytest.mark.parametrize("mode", MODES)
def test_root_split_time_is_exponential_in_linear_dimension(mode):
    X, out = root_samples(mode)
    rate = np.ptp(X, axis=0).sum()
    assert rate == pytest.approx(8.0)
    tau = np.array([o[0] for o in out])
    p = stats.kstest(tau, stats.expon(scale=1 / rate).cdf).pvalue
    assert p > ALPHA, p
    # power: a 30 % error in the rate is detected
    assert stats.kstest(tau, stats.expon(scale=1 / (1.3 * rate)).cdf).pvalue < POWER


@pytest.mark.parametrize("mode", MODES)
def test_root_split_dimension_proportional_to_extent(mode):
    _, out = root_samples(mode)
    dims = np.array([o[1] for o in out])
    obs = np.bincount(dims, minlength=3)
    p = stats.chisquare(obs, len(dims) * np.array([1, 2, 5]) / 8).pvalue
    assert p > ALPHA, (obs, p)
    # power: uniform choice of the dimension is rejected
    assert stats.chisquare(obs, np.full(3, len(dims) / 3)).pvalue < POWER


@pytest.mark.parametrize("mode", MODES)
def test_root_split_location_uniform_in_extent(mode):
    _, out = root_samples(mode)
    u = np.array([o[2] for o in out])
    dims = np.array([o[1] for o in out])
    assert np.all((u >= 0) & (u < 1))
    assert stats.kstest(u, "uniform").pvalue > ALPHA
    for d in range(3):  # also within each dimension
        if (dims == d).sum() > 100:
            assert stats.kstest(u[dims == d], "uniform").pvalue > ALPHA
    assert stats.kstest(u**1.2, "uniform").pvalue < POWER  # power


def test_naive_reference_root_law():
    X = extents_dataset()
    rng = np.random.default_rng(5)
    rows = np.arange(X.shape[0])
    roots = [naive.naive_sample_mondrian_block(X, rows, rng) for _ in range(N_ROOT)]
    tau = np.array([r["tau"] for r in roots])
    assert stats.kstest(tau, stats.expon(scale=1 / 8).cdf).pvalue > ALPHA
    obs = np.bincount([r["feature"] for r in roots], minlength=3)
    assert stats.chisquare(obs, N_ROOT * np.array([1, 2, 5]) / 8).pvalue > ALPHA


# --------------------------------------------------------------------------- 2. lifetime


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("lifetime", [0.05, 0.15])
def test_root_is_leaf_with_probability_exp_minus_lifetime_times_linear_dim(lifetime, mode):
    X, out = root_samples(mode, n=3 * N_ROOT, lifetime=lifetime)
    is_leaf = np.array([o[1] == -1 for o in out])
    taus = np.array([o[0] for o in out])
    assert np.all(taus[is_leaf] == lifetime) and np.all(taus[~is_leaf] < lifetime)
    p_leaf = np.exp(-lifetime * np.ptp(X, axis=0).sum())
    p = stats.binomtest(int(is_leaf.sum()), len(out), p_leaf).pvalue
    assert p > ALPHA, (is_leaf.mean(), p_leaf, p)
    # power: 25 % too long a lifetime is rejected
    p_wrong = np.exp(-1.25 * lifetime * np.ptp(X, axis=0).sum())
    assert stats.binomtest(int(is_leaf.sum()), len(out), p_wrong).pvalue < POWER
    # the split time of an internal root is Exp(rate) truncated at the lifetime
    rate = np.ptp(X, axis=0).sum()
    trunc = stats.truncexpon(b=lifetime * rate, scale=1 / rate)
    assert stats.kstest(taus[~is_leaf], trunc.cdf).pvalue > ALPHA


# --------------------------------------------------------------------------- 3. online == batch


def _scenario(name):
    """(X, y, labels, task, min_samples_split, lifetime) of the three comparison scenarios."""
    seeds = {"reg_lifetime": 11, "clf_paused": 12, "reg_mss3": 13, "tiny_reg": 14, "tiny_clf": 15}
    rng = np.random.default_rng(seeds[name])
    if name == "reg_lifetime":  # finite lifetime, a handful of leaves
        X = rng.random((10, 2))
        y, labels = reg_data(X)
        return X, y, labels, REGRESSION, 2, 2.0
    if name == "clf_paused":  # lifetime = inf, blocks with one label are paused
        X = rng.random((12, 2))
        labels = (X[:, 0] + 0.3 * rng.random(12) > 0.6).astype(np.int64)
        return X, np.zeros(12), labels, CLASSIFICATION, 2, np.inf
    if name == "reg_mss3":  # lifetime = inf, blocks with < 3 points are paused
        X = rng.random((12, 3))
        y, labels = reg_data(X)
        return X, y, labels, REGRESSION, 3, np.inf
    # tiny data sets on which the law of the whole leaf partition is compared
    if name == "tiny_reg":
        X = rng.random((5, 2))
        y, labels = reg_data(X)
        return X, y, labels, REGRESSION, 2, 2.0
    if name == "tiny_clf":
        X = rng.random((6, 2))
        labels = np.array([0, 0, 1, 1, 0, 1], np.int64)
        return X, np.zeros(6), labels, CLASSIFICATION, 2, np.inf
    raise ValueError(name)


SCENARIOS = ("reg_lifetime", "clf_paused", "reg_mss3")


@cache
def scenario_samples(name, mode, lifetime=None, mss=None, group=0):
    X, y, labels, task, mss0, lifetime0 = _scenario(name)
    lifetime = lifetime0 if lifetime is None else lifetime
    mss = mss0 if mss is None else mss
    rows = np.arange(X.shape[0])
    base = 100_000 * (1 + MODES.index(mode) + 3 * group) if mode != "naive" else 0
    if mode == "naive":
        rng = np.random.default_rng(99)
        lab = labels if task == CLASSIFICATION else None
        return [
            naive_summary(naive.naive_sample_mondrian_block(
                X, rows, rng, lifetime=lifetime, min_samples_split=mss, labels=lab))
            for _ in range(N_DIST)
        ]
    return [
        summary(build(X, y, labels, rows, task, mss, lifetime, base + s, mode), X, rows)
        for s in range(N_DIST)
    ]


def _compare(a, b, c=None):
    """p-values of n_leaves, root dimension, root and leaf partitions of the rows
    (chi-square homogeneity) and root split time (two-sample KS, group 0 vs the others)."""
    groups = [g for g in (a, b, c) if g is not None]
    p = {
        "n_leaves": chi2_homogeneity(*[[s[0] for s in g] for g in groups]),
        "root_dim": chi2_homogeneity(*[[s[1] for s in g] for g in groups]),
        "root_partition": chi2_homogeneity(*[[s[3] for s in g] for g in groups]),
        "leaf_partition": chi2_homogeneity(*[[s[4] for s in g] for g in groups]),
    }
    for i, g in enumerate(groups[1:], 1):
        p[f"root_tau_{i}"] = stats.ks_2samp([s[2] for s in groups[0]],
                                            [s[2] for s in g]).pvalue
    return p


@pytest.mark.parametrize("name", SCENARIOS + ("tiny_reg", "tiny_clf"))
def test_online_trees_have_the_batch_distribution(name):
    batch, fwd, rev = (scenario_samples(name, m) for m in MODES)
    # the scenarios are not degenerate: the number of leaves and the root really vary
    assert len({s[0] for s in batch}) >= 3 and len({s[1] for s in batch}) >= 2
    p = _compare(batch, fwd, rev)
    assert min(p.values()) > ALPHA, p


@pytest.mark.parametrize("name", SCENARIOS + ("tiny_reg", "tiny_clf"))
def test_kernel_matches_naive_reference_sampler(name):
    p = _compare(scenario_samples(name, "batch"), scenario_samples(name, "naive"))
    assert min(p.values()) > ALPHA, p


@pytest.mark.parametrize(
    "name, change, stat",
    [
        ("reg_lifetime", dict(lifetime=3.0), "n_leaves"),
        ("reg_mss3", dict(mss=4), "n_leaves"),
        ("clf_paused", dict(mss=4), "n_leaves"),
    ],
)
def test_negative_control_comparison_has_power(name, change, stat):
    """Online trees grown with different hyper-parameters are told apart from batch trees."""
    p = _compare(scenario_samples(name, "batch"), scenario_samples(name, "online", **change))
    assert p[stat] < POWER, p


@pytest.mark.parametrize(
    "name, stats_",
    [
        ("reg_lifetime", ("root_dim", "root_tau_1", "root_partition")),
        ("tiny_clf", ("leaf_partition",)),
    ],
)
def test_negative_control_stretched_input_has_power(name, stats_):
    """Stretching input dimension 0 by 1.8 changes the law of the splits; it is detected."""
    X, y, labels, task, mss, lifetime = _scenario(name)
    X2 = X * np.array([1.8, 1.0])
    rows = np.arange(X.shape[0])
    other = [summary(build(X2, y, labels, rows, task, mss, lifetime, 900_000 + s, "online"),
                     X2, rows) for s in range(N_DIST)]
    p = _compare(scenario_samples(name, "batch"), other)
    assert max(p[k] for k in stats_) < POWER, p


# --------------------------------------------------------------------------- 4. invariants


def _random_problem(rng, task):
    n = int(rng.integers(1, 41))
    D = int(rng.integers(1, 5))
    if rng.random() < 0.4:  # ties and duplicates: coordinates on a coarse grid
        X = rng.integers(0, 4, size=(n, D)) / 3.0
    else:
        X = rng.random((n, D))
    if D > 1 and rng.random() < 0.3:
        X[:, rng.integers(D)] = 0.5  # a constant feature
    n_classes = int(rng.integers(2, 4))
    labels = rng.integers(0, n_classes, n).astype(np.int64)
    y = rng.normal(size=n)
    lifetime = np.inf if rng.random() < 0.5 else float(rng.uniform(0.2, 6.0))
    mss = int(rng.integers(1, 5)) if task == REGRESSION else int(rng.integers(2, 5))
    return X, y, labels, n_classes, lifetime, mss


@pytest.mark.parametrize("task", [REGRESSION, CLASSIFICATION])
@pytest.mark.parametrize("case", range(40))
def test_invariants_after_batch_and_online_sequences(task, case):
    rng = np.random.default_rng(1000 * task_code(task) + case)
    X, y, labels, n_classes, lifetime, mss = _random_problem(rng, task)
    n = X.shape[0]
    kw = dict(lifetime=lifetime, min_samples_split=mss, n_classes=n_classes)
    if case % 2:
        # streaming buffer: rows arrive in index order, capacity grows with reserve()
        cuts = np.sort(rng.choice(np.arange(1, n), size=min(n - 1, 4), replace=False)) \
            if n > 1 else np.array([], int)
        chunks = np.split(np.arange(n), cuts)
        tree = TreeArrays.empty(X.shape[1], n_stats(task, n_classes), len(chunks[0]))
    else:
        # full capacity, rows in a random order, random chunk sizes (some single points)
        perm = rng.permutation(n)
        cuts = np.sort(rng.choice(np.arange(1, n + 1), size=min(n, 6), replace=False))
        chunks = [c for c in np.split(perm, cuts) if len(c)]
        tree = TreeArrays.empty(X.shape[1], n_stats(task, n_classes), n)
    inserted = []
    for i, chunk in enumerate(chunks):
        tree.reserve(max(len(inserted) + len(chunk), int(np.max(chunk)) + 1))
        grow(tree, X, y, labels, chunk, task, mss, lifetime, int(rng.integers(2**31)))
        inserted += list(chunk)
        naive.check_tree_invariants(tree, X, y, labels, inserted, task, **kw)
        if i == 0:
            assert tree.n_nodes >= 1


def test_invariant_checker_catches_corruption():
    """The checker is not vacuous: small corruptions of a valid tree are reported."""
    rng = np.random.default_rng(3)
    X = rng.random((15, 2))
    y, labels = reg_data(X)
    rows = np.arange(15)
    tree = build(X, y, labels, rows, REGRESSION, 2, np.inf, 1, "online")
    naive.check_tree_invariants(tree, X, y, labels, rows, REGRESSION)
    internal = [j for j in range(tree.n_nodes) if tree.left[j] != -1]
    leaves = [j for j in range(tree.n_nodes) if tree.left[j] == -1]
    deep_leaf = next(j for j in leaves if tree.parent[j] != tree.root)
    corruptions = [
        ("stats", (internal[0], 0), tree.stats[internal[0], 0] + 1.0),
        ("tau", (internal[-1],), 0.0),
        ("upper", (internal[0], 0), tree.upper[internal[0], 0] + 5.0),
        ("parent", (deep_leaf,), tree.root),
        ("threshold", (internal[0],), -1.0),
        ("pt_next", (int(tree.leaf_head[leaves[0]]),), int(tree.leaf_head[leaves[1]])),
        ("leaf_head", (leaves[0],), -1),
    ]
    for name, where, value in corruptions:
        bad = build(X, y, labels, rows, REGRESSION, 2, np.inf, 1, "online")
        getattr(bad, name)[where] = value
        with pytest.raises(AssertionError):
            naive.check_tree_invariants(bad, X, y, labels, rows, REGRESSION)


# --------------------------------------------------------------------------- 5. degenerate data


@pytest.mark.parametrize("task", [REGRESSION, CLASSIFICATION])
@pytest.mark.parametrize("mode", MODES)
def test_duplicates_and_constant_features(task, mode):
    rng = np.random.default_rng(7)
    distinct = rng.random((6, 3))
    distinct[:, 1] = 0.25  # constant feature
    X = np.repeat(distinct, 3, axis=0)  # every point three times
    group = np.repeat(np.arange(6), 3)
    y = rng.normal(size=X.shape[0])
    labels = (group % 2).astype(np.int64)  # duplicates share a label, classes alternate
    rows = rng.permutation(X.shape[0])
    for s in range(40):
        t = build(X, y, labels, rows, task, 2, np.inf, 5000 + s, mode)
        naive.check_tree_invariants(t, X, y, labels, rows, task, n_classes=2)
        feats = t.feature[: t.n_nodes]
        assert not np.any(feats == 1), "split along a zero-extent dimension"
        for j in np.flatnonzero(feats == -1):
            pts = naive.flat_tree_leaf_rows(t, j)
            if task == REGRESSION:
                # lifetime = inf, min_samples_split = 2: leaves are exactly the duplicate groups
                assert sorted(group[pts]) == [group[pts[0]]] * 3
        for g in range(6):  # identical points always end in one leaf
            assert len({_leaf_of(t, X, r) for r in np.flatnonzero(group == g)}) == 1
        if task == REGRESSION:
            assert t.n_leaves == 6


@pytest.mark.parametrize("task", [REGRESSION, CLASSIFICATION])
def test_identical_points_with_different_labels_stay_in_one_leaf(task):
    X = np.tile([[0.3, 0.7]], (5, 1))
    y = np.arange(5.0)
    labels = np.array([0, 1, 0, 1, 1], np.int64)
    rows = np.arange(5)
    for mode in MODES:
        t = build(X, y, labels, rows, task, 2, np.inf, 3, mode)
        assert t.n_nodes == 1 and t.n_leaves == 1 and np.isinf(t.tau[t.root])
        naive.check_tree_invariants(t, X, y, labels, rows, task, n_classes=2)


@pytest.mark.parametrize("task", [REGRESSION, CLASSIFICATION])
@pytest.mark.parametrize("lifetime", [np.inf, 0.5])
def test_single_point_gives_single_leaf(task, lifetime):
    X = np.array([[0.2, 0.9, 0.4]])
    y = np.array([1.5])
    labels = np.array([1], np.int64)
    t = TreeArrays.empty(3, n_stats(task), 1)
    grow(t, X, y, labels, np.array([0]), task, 2, lifetime, 0)
    assert t.n_nodes == 1 and t.root == 0 and t.feature[0] == -1
    assert t.tau[0] == lifetime and t.leaf_head[0] == 0 and t.pt_next[0] == -1
    np.testing.assert_array_equal(t.lower[0], X[0])
    np.testing.assert_array_equal(t.upper[0], X[0])
    expected = [1.0, 1.5, 2.25] if task == REGRESSION else [0.0, 1.0]
    np.testing.assert_array_equal(t.stats[0], expected)
    naive.check_tree_invariants(t, X, y, labels, [0], task, lifetime=lifetime, n_classes=2)
    # an empty row set is a no-op
    grow(t, X, y, labels, np.array([], np.int64), task, 2, lifetime, 0)
    assert t.n_nodes == 1


def test_min_samples_split_one_and_lifetime_inf_gives_one_point_per_leaf():
    rng = np.random.default_rng(8)
    X = rng.random((20, 2))
    y, labels = reg_data(X)
    rows = np.arange(20)
    for mode in MODES:
        for s in range(10):
            t = build(X, y, labels, rows, REGRESSION, 1, np.inf, s, mode)
            assert t.n_leaves == 20 and t.n_nodes == 39
            naive.check_tree_invariants(t, X, y, labels, rows, REGRESSION, min_samples_split=1)


@pytest.mark.parametrize("task", [REGRESSION, CLASSIFICATION])
def test_batch_slots_are_in_preorder(task):
    """A tree grown in one batch has its slots in depth-first preorder (the predictor order),
    so packing the predictor reads the arrays sequentially; online growth may break it."""
    from basics.flat_tree import preorder

    rng = np.random.default_rng(4)
    X = rng.random((3000, 3))
    y = X[:, 0] + rng.normal(scale=0.1, size=3000)
    labels = (X[:, 1] > 0.5).astype(np.int64)
    tree = TreeArrays.empty(3, 3 if task == REGRESSION else 2, 2 * 3000)
    grow(tree, X, y, labels, np.arange(3000, dtype=np.int64), task, 2, np.inf, 7)
    assert tree.n_nodes > 100
    np.testing.assert_array_equal(preorder(tree.left, tree.right, tree.root, tree.n_nodes),
                                  np.arange(tree.n_nodes))


@pytest.mark.parametrize("task", [REGRESSION, CLASSIFICATION])
def test_blocks_larger_than_the_small_block_path(task):
    """Blocks above ``SMALL_BLOCK_ROWS`` are summarised row by row (forwards for a left
    block, backwards for a right one), smaller ones feature by feature: both exact."""
    from mondrian._sample import SMALL_BLOCK_ROWS

    rng = np.random.default_rng(7)
    n_far = 1000
    n = SMALL_BLOCK_ROWS + 20_000
    # a small cluster near 0 and a large one near 1 in feature 0 (feature 1 has almost no
    # extent), so the root's right child is itself above the threshold
    x0 = np.concatenate([rng.uniform(0.0, 0.1, n_far), rng.uniform(0.9, 1.0, n - n_far)])
    X = np.column_stack([x0, rng.uniform(0.0, 1e-3, n)])
    y, _ = reg_data(X)
    labels = (X[:, 0] > 0.95).astype(np.int64) + (rng.random(n) < 0.1)
    rows = rng.permutation(n)
    tree = TreeArrays.empty(2, n_stats(task, 3), n)
    grow(tree, X, y, labels, rows, task, n // 4, np.inf, 3)
    root = tree.root
    assert tree.left[root] != -1
    right_rows = (X[:, tree.feature[root]] > tree.threshold[root]).sum()
    assert right_rows > SMALL_BLOCK_ROWS
    naive.check_tree_invariants(tree, X, y, labels, rows, task, min_samples_split=n // 4,
                                n_classes=3)


def test_loaded_tree_structure_is_the_shared_check():
    """A tree read from a file is checked by the one flat-tree structure check
    (``basics.flat_tree``, slots in any order), then for its Mondrian arrays."""
    rng = np.random.default_rng(5)
    X = rng.random((40, 2))
    y, labels = reg_data(X)
    tree = build(X, y, labels, np.arange(40), REGRESSION, 2, np.inf, 3, "online")
    state = tree.to_state(40)
    assert TreeArrays.from_state(state, 2, 3, 40, REGRESSION).n_nodes == tree.n_nodes

    def refused(edit, match):
        bad = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in state.items()}
        edit(bad)
        with pytest.raises(ValueError, match=match):
            TreeArrays.from_state(bad, 2, 3, 40, REGRESSION)

    inner = np.flatnonzero(state["left"] >= 0)
    j = int(inner[0])
    refused(lambda s: s["left"].__setitem__(j, 10**12),
            rf"node {j}: left child 1000000000000 is outside the tree's nodes")
    refused(lambda s: s["feature"].__setitem__(j, 7), r"split feature 7 is outside")
    refused(lambda s: s["threshold"].__setitem__(j, np.nan), r"non-finite split threshold")
    refused(lambda s: s["right"].__setitem__(j, s["root"]), r"the root is the child of")
    refused(lambda s: s["parent"].__setitem__(int(s["left"][j]), -1),
            r"children whose parent pointers do not point back")
