"""The packed predictor: exact routing and outward-rounded float32 extents."""

import numpy as np
import pytest

from basics.flat_tree import preorder
from mondrian import MondrianForestClassifier, MondrianForestRegressor
from mondrian._posterior import belief_propagation
from mondrian._predict import (
    EXACT,
    EXTENT,
    GAMMA1,
    GAMMA2,
    NOISE,
    SIG_LIFETIME,
    _branch_off,
    _off_component,
    exact_parameters,
    pack_predictor,
)
from mondrian._records import Messages, MondrianTree, Prior
from tests.mondrian.test_posterior import _random_hp, _random_tree, _record, _tree_arrays
from tests.naive import naive_branch_off_moments


@pytest.mark.parametrize("Estimator", [MondrianForestRegressor, MondrianForestClassifier])
def test_training_points_stay_inside_their_leaf_box(Estimator):
    """Rounding extents to float32 outward never pushes a training point out of its leaf."""
    rng = np.random.default_rng(3)
    # values that float32 cannot represent exactly, plus repeated discrete values
    X = np.column_stack([rng.random(400) * 1e-3 + 1 / 3, rng.integers(0, 7, 400) / 7,
                         rng.normal(size=400) * 1e6])
    y = (X[:, 0] > 1 / 3 + 5e-4).astype(int)
    model = Estimator(n_estimators=3, min_samples_split=2, random_state=0).fit(X, y)
    Xs = model._scale(model._check_X(X, reset=False))
    leaves = model.apply(X)
    for t, tree in enumerate(model.trees_):
        order, R = model._predictor(tree)
        position = np.empty(tree.n_nodes, np.int64)
        position[order] = np.arange(order.shape[0])
        for i in range(Xs.shape[0]):
            p, eta, _ = _branch_off(R, position[leaves[i, t]], Xs[i])
            assert eta == 0.0 and p == 0.0


def test_extents_are_the_nearest_float32_outward():
    """Each bound is the nearest float32 on its outer side (the ``nextafter`` oracle), for
    every sign and magnitude: subnormals, signed zeros, beyond the float32 range."""
    rng = np.random.default_rng(0)
    v = rng.normal(size=20_000) * 10.0 ** rng.integers(-48, 42, 20_000)
    v = np.concatenate([v, [0.0, -0.0, 1e-46, -1e-46, 1.0, -1.0, 0.1, -0.1, 1e39, -1e39]])
    n = v.shape[0]
    none = np.full(n, -1, np.int64)
    *_, R32 = pack_predictor(MondrianTree.of(left=none, right=none, parent=none,
                                             feature=np.zeros(n, np.int64),
                                             threshold=np.zeros(n), tau=np.zeros(n),
                                             lower=v[:, None], upper=v[:, None]),
                             np.arange(n))
    with np.errstate(over="ignore"):  # beyond the float32 range: +-inf, then +-max
        f = v.astype(np.float32)
    lower = np.where(f > v, np.nextafter(f, np.float32(-np.inf)), f)
    upper = np.where(f < v, np.nextafter(f, np.float32(np.inf)), f)
    np.testing.assert_array_equal(R32[:, EXTENT].view(np.int32), lower.view(np.int32))
    np.testing.assert_array_equal(R32[:, EXTENT + 1].view(np.int32), upper.view(np.int32))
    assert (R32[:, EXTENT] <= v).all() and (R32[:, EXTENT + 1] >= v).all()


def test_points_outside_every_box_branch_off_at_the_root():
    """Far from the data the root's branch-off probability tends to one."""
    rng = np.random.default_rng(0)
    X = rng.random((300, 2))
    model = MondrianForestRegressor(n_estimators=2, random_state=0).fit(X, X[:, 0])
    far = model._scale(np.array([[50.0, 50.0]]))
    for tree in model.trees_:
        _, R = model._predictor(tree)
        p, eta, _ = _branch_off(R, 0, far[0])
        assert eta > 90 and p > 0.99


@pytest.mark.parametrize("Estimator", [MondrianForestRegressor, MondrianForestClassifier])
def test_locality_order_changes_no_prediction(Estimator, monkeypatch):
    """Rows sorted by their leaf for cache locality come back in order, results bit-equal."""
    import mondrian._base

    rng = np.random.default_rng(5)
    X = rng.random((600, 3))
    y = X[:, 0] + rng.normal(scale=0.1, size=600)
    if Estimator is MondrianForestClassifier:
        y = (y > 0.5).astype(int)
    model = Estimator(n_estimators=3, random_state=0, calibrate="none").fit(X, y)
    T = rng.random((300, 3)) * 1.2 - 0.1

    def predictions():
        if Estimator is MondrianForestClassifier:
            return [model.predict_proba(T)]
        d = model.predict_distribution(T)
        return [*model.predict(T, return_std=True), model.predict_quantiles(T, (0.1, 0.9)),
                d.weights, d.means, d.variances]

    monkeypatch.setattr(mondrian._base, "LOCALITY_MIN_ROWS", 10**9)
    given = predictions()
    monkeypatch.setattr(mondrian._base, "LOCALITY_MIN_ROWS", 1)
    monkeypatch.setattr(mondrian._base, "LOCALITY_MIN_TREE_BYTES", 0)
    perm = model._scaled_rows(T)[1]
    assert perm is not None and not np.array_equal(perm, np.arange(300))
    for a, b in zip(given, predictions(), strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("seed", range(60))
def test_branch_off_component_matches_dense_conditioning(seed):
    """The exact-posterior branch-off Gaussian equals dense conditioning on the tree with
    the new node inserted, at the kernel's split-time quadrature (paper Sec. 3.3)."""
    check_branch_off_against_dense(seed, per_node_noise=False)


def check_branch_off_against_dense(seed, per_node_noise):
    """:func:`test_branch_off_component_matches_dense_conditioning` for one seed, with the
    forest's noise variance or (``per_node_noise``) a random one per node."""
    rng = np.random.default_rng(seed)
    left, right, parent, tau, stats, root, n, leaf_y = _tree_arrays(
        *_random_tree(rng, int(rng.integers(1, 25))), rng=rng)
    mu_h, g1, g2, noise = _random_hp(rng)
    if per_node_noise:
        noise = rng.uniform(0.05, 1.0, size=n)
    live = tau[:n]
    lifetime = np.inf if seed % 3 else float(np.max(live[np.isfinite(live)], initial=0.0)) + 0.5
    tau = tau.copy()
    tau[:n][np.isinf(live)] = lifetime  # leaves carry the lifetime
    record, prior = _record(left, right, parent, tau, stats), Prior(mu_h, g1, g2)
    messages = Messages.empty(n)
    belief_propagation(record, root, n, prior, noise, messages)
    order = preorder(left, right, root, n)
    P = exact_parameters(order, record, prior, noise, messages)
    h = np.zeros(5)
    h[[EXACT, GAMMA1, GAMMA2, NOISE]] = 1.0, g1, g2, np.mean(noise)  # kernels read P's
    h[SIG_LIFETIME] = 1.0 / (1.0 + np.exp(-g2 * lifetime))
    for k in rng.permutation(n)[:6]:
        j = int(order[k])
        delta = tau[j] - (0.0 if j == root else tau[parent[j]])
        if not delta > 0:
            continue
        eta = float(rng.uniform(0.05, 3.0))
        if np.isinf(delta):  # untruncated split time: the kernel's two-point rule
            p = 1.0
            s_nodes, s_weights = [0.5 / eta, 3.0 / eta], [0.8, 0.2]
        else:  # truncated to [0, delta]: its mean
            p = -np.expm1(-delta * eta)
            s_nodes, s_weights = [1.0 / eta - delta * (1.0 - p) / p], [1.0]
        got = _off_component(k, eta, delta, p, P, h)
        want = naive_branch_off_moments(left, right, parent, tau, root, n, leaf_y, j, s_nodes,
                                        s_weights, lifetime, mu_h, g1, g2, noise)
        np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-10 * g1)
