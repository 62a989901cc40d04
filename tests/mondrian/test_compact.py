"""Compact, predict-only Mondrian forests (``mondrian._compact``, ``compact()``).

A compact forest must predict exactly as the full one (every predictive output, several
seeds, both tasks, batch and online trees), survive ``ebf.artifact`` round trips bit for bit,
refuse updates, and refuse a crafted compact state as strictly as a full one. Its kernels
are compared with the oracles of ``tests/naive/``.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from ebf.artifact import load, save
from mondrian import MondrianForestClassifier, MondrianForestRegressor, PredictOnlyError
from mondrian._compact import (
    CompactNodes,
    CompactTree,
    compact_state,
    expand_nodes,
    preorder_structure,
    round_outward,
)
from mondrian._records import MondrianTree
from tests.mondrian.test_forest import _assert_same_snapshot, _snapshot
from tests.naive import naive_expand, naive_preorder_structure

SEEDS = (0, 1, 2)
#: The issue's bound on the relative deviation of compact predictions (they are exact).
RTOL = 1e-9


def _data(seed: int, n: int = 900, d: int = 4):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, (n, d))
    y = np.sin(X[:, 0]) * X[:, 1] + 0.3 * rng.normal(size=n) + 40.0
    labels = (X[:, 0] > 0).astype(int) + (X[:, 1] > 1) + (X[:, 2] > 2)
    # test rows inside, at the edge of and far outside the training data
    Xt = np.vstack([X[:200], rng.uniform(-5, 5, (300, d))])
    return X, y, labels, Xt


def _fit(Estimator, seed: int, online: bool, **params):
    X, y, labels, Xt = _data(seed)
    target = y if Estimator is MondrianForestRegressor else labels
    model = Estimator(n_estimators=4, random_state=seed, **params)
    if online:  # a batch fit, then online updates: slots no longer in preorder
        model.fit(X[:500], target[:500])
        model.partial_fit(X[500:700], target[500:700])
        model.partial_fit(X[700:], target[700:])
    else:
        model.fit(X, target)
    return model, Xt


def _outputs(model, Xt) -> dict[str, np.ndarray]:
    if isinstance(model, MondrianForestClassifier):
        return {"predict_proba": model.predict_proba(Xt), "predict": model.predict(Xt)}
    mean, std = model.predict(Xt, return_std=True)
    g = model.predict_distribution(Xt, recalibrated=False)
    return {"predict": model.predict(Xt), "mean": mean, "std": std,
            "quantiles": model.predict_quantiles(Xt, (0.05, 0.5, 0.95)),
            "weights": g.weights, "means": g.means, "variances": g.variances}


def _max_relative_deviation(a: dict, b: dict) -> float:
    worst = 0.0
    for key in a:
        x, y = np.asarray(a[key]), np.asarray(b[key])
        assert x.shape == y.shape, key
        if x.dtype.kind not in "fc":
            assert np.array_equal(x, y), key
            continue
        scale = np.maximum(np.abs(x), np.finfo(float).tiny)
        worst = max(worst, float(np.max(np.abs(x - y) / scale)))
    return worst


CASES = [(MondrianForestRegressor, {"posterior": "exact"}),
         (MondrianForestRegressor, {"posterior": "empirical"}),
         (MondrianForestRegressor, {"lifetime": 3.0, "min_samples_split": 4}),
         (MondrianForestClassifier, {}),
         (MondrianForestClassifier, {"min_samples_split": 6, "lifetime": 5.0})]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("online", [False, True])
@pytest.mark.parametrize("Estimator, params", CASES)
def test_compact_predicts_exactly_as_the_full_model(Estimator, params, online, seed):
    full, Xt = _fit(Estimator, seed, online, **params)
    before = _snapshot(full)
    small = full.compact()
    got, want = _outputs(small, Xt), _outputs(full, Xt)
    assert _max_relative_deviation(got, want) <= RTOL
    for key in want:  # the measured deviation is zero: the same bits
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    assert small.compact_ and not full.compact_
    np.testing.assert_array_equal(small.n_leaves_, full.n_leaves_)
    # the full model is unchanged (its posterior cache aside) and still updatable
    full._posterior = [None] * full.n_estimators
    _assert_same_snapshot(_snapshot(full), before)
    X, y, labels, _ = _data(seed)
    full.partial_fit(X[:5], (y if Estimator is MondrianForestRegressor else labels)[:5])


@pytest.mark.parametrize("Estimator", [MondrianForestRegressor, MondrianForestClassifier])
def test_batch_trees_keep_their_leaf_slots(Estimator):
    full, Xt = _fit(Estimator, 0, online=False)
    np.testing.assert_array_equal(full.compact().apply(Xt), full.apply(Xt))


@pytest.mark.parametrize("online", [False, True])
@pytest.mark.parametrize("Estimator, params", CASES[::2])
def test_saved_compact_model_predicts_bit_identically(Estimator, params, online, tmp_path):
    small = _fit(Estimator, 3, online, **params)[0].compact()
    Xt = _data(3)[3]
    loaded = load(save(small, tmp_path / "m"))
    assert loaded.compact_ and isinstance(loaded.trees_[0], CompactTree)
    for key, value in _outputs(small, Xt).items():
        np.testing.assert_array_equal(_outputs(loaded, Xt)[key], value, err_msg=key)
    again = pickle.loads(pickle.dumps(loaded)).compact()  # a compact copy of a compact model
    np.testing.assert_array_equal(_outputs(again, Xt)["predict"], _outputs(small, Xt)["predict"])


def test_compact_state_holds_no_online_state_and_narrow_dtypes():
    full, _ = _fit(MondrianForestRegressor, 0, online=True)
    state = full.compact()._get_state()
    assert not {"_X", "_y", "_labels", "_entropy", "_n_updates"} & state.keys()
    tree = state["trees_"][0]
    assert set(tree) == {"feature", "threshold", "tau", "lower", "upper", "counts", "sums",
                         "leaf_tau"}
    assert tree["feature"].dtype == np.int8 and tree["counts"].dtype == np.uint8
    assert tree["threshold"].dtype == tree["tau"].dtype == np.float64
    assert tree["lower"].dtype == np.float32
    rng = np.random.default_rng(0)
    wide = MondrianForestClassifier(n_estimators=1, random_state=0).fit(
        rng.random((400, 200)), rng.integers(0, 2, 400))
    assert wide.compact()._get_state()["trees_"][0]["feature"].dtype == np.int16


def test_compact_model_is_small():
    """Bytes of the saved arrays per training row per tree: the issue's bound is 40 for a
    compact model (10 features, default parameters); the full model stores ~3x more."""
    rng = np.random.default_rng(0)
    n, d = 20_000, 10
    X = rng.random((n, d))
    y = 10 * np.sin(np.pi * X[:, 0] * X[:, 1]) + 10 * X[:, 3] + rng.normal(size=n)
    full = MondrianForestRegressor(n_estimators=2, random_state=0).fit(X, y)

    def per_row_tree(model) -> float:
        return _state_bytes(model._get_state()) / (n * model.n_estimators)

    assert per_row_tree(full.compact()) < 40 < per_row_tree(full) / 2


def _state_bytes(state) -> int:
    if isinstance(state, dict):
        return sum(_state_bytes(v) for v in state.values())
    if isinstance(state, list):
        return sum(_state_bytes(v) for v in state)
    return state.nbytes if isinstance(state, np.ndarray) else 0


@pytest.mark.parametrize("Estimator", [MondrianForestRegressor, MondrianForestClassifier])
def test_partial_fit_on_a_compact_model_says_how_to_keep_an_updatable_one(Estimator):
    small, _ = _fit(Estimator, 0, online=False)
    small = small.compact()
    X, y, labels, _ = _data(0)
    before = pickle.dumps(small._get_state())
    target = y if Estimator is MondrianForestRegressor else labels
    with pytest.raises(PredictOnlyError, match=r"compact.*predict-only.*Keep the full model"):
        small.partial_fit(X[:3], target[:3])
    assert pickle.dumps(small._get_state()) == before
    assert isinstance(PredictOnlyError(), ValueError)
    refit = small.fit(X, target)  # fit starts afresh: an updatable model again
    assert not refit.compact_
    refit.partial_fit(X[:3], target[:3])


# ------------------------------------------------------------------------------ validation


@pytest.fixture(scope="module")
def compact_states():
    out = {}
    for Estimator in (MondrianForestRegressor, MondrianForestClassifier):
        model, _ = _fit(Estimator, 5, online=True)
        out[Estimator] = model.compact()._get_state()
    return out


def _tree0(state: dict) -> dict:
    return {k: (v.copy() if isinstance(v, np.ndarray) else v)
            for k, v in state["trees_"][0].items()}


def _corrupt(state: dict, key: str, how) -> dict:
    tree = _tree0(state)
    tree[key] = how(tree)
    return {**state, "trees_": [tree] + state["trees_"][1:]}


def _internal(tree) -> int:
    return int(np.flatnonzero(tree["feature"] >= 0)[1])


def _set(a: np.ndarray, i, v) -> np.ndarray:
    a[i] = v
    return a


CORRUPTIONS = {
    "feature out of range": ("feature", lambda t: _set(t["feature"], 0, 100),
                             r"trees_\[0\]: node 0 has a feature index out of range"),
    "one node too many": ("feature", lambda t: np.append(t["feature"], -1),
                          r"trees_\[0\]: node \d+ comes after the last leaf"),
    "internal node without children": (
        "feature", lambda t: _set(t["feature"], np.flatnonzero(t["feature"] < 0)[-1], 0),
        r"trees_\[0\]: .*subtree"),
    "float features": ("feature", lambda t: t["feature"].astype(float),
                       r"trees_\[0\]: feature must be an integer array"),
    "split time after a child's": ("tau", lambda t: _set(t["tau"], 0, 1e300),
                                   r"trees_\[0\]: node 0 .*split time"),
    "nan threshold": ("threshold", lambda t: _set(t["threshold"], 1, np.nan),
                      r"trees_\[0\]: node \d+ has a non-finite threshold"),
    "crossed box": ("lower", lambda t: _set(t["lower"], (2, 0), 10.0),
                    r"trees_\[0\]: leaf node \d+ has a box"),
    "empty leaf": ("counts", lambda t: _set(t["counts"], 0, 0),
                   r"trees_\[0\]: leaf node \d+ holds no training point|the leaves hold"),
    "counts that do not add up": ("counts", lambda t: _set(t["counts"], 0, t["counts"][0] + 1),
                                  r"trees_\[0\]: the leaves hold \d+ points, not the \d+"),
    "negative count": ("counts", lambda t: t["counts"].astype(np.int64) - 2,
                       r"trees_\[0\]: counts holds -\d"),
    "huge count": ("counts", lambda t: _set(t["counts"].astype(np.uint64), 0, 2**64 - 1),
                   r"trees_\[0\]: leaf node \d+ counts more points"),
    "wrong leaf count": ("lower", lambda t: t["lower"][1:], r"trees_\[0\]: lower has shape"),
    "leaf time nan": ("leaf_tau", lambda t: float("nan"), r"trees_\[0\]: leaf_tau must be"),
    "leaf time before a split": ("leaf_tau", lambda t: 0.0, r"trees_\[0\]: node \d+ .*split"),
}


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
@pytest.mark.parametrize("Estimator", [MondrianForestRegressor, MondrianForestClassifier])
def test_crafted_compact_states_are_refused_naming_the_tree_and_node(compact_states, Estimator,
                                                                    case):
    key, how, match = CORRUPTIONS[case]
    state = _corrupt(compact_states[Estimator], key, how)
    model = Estimator(n_estimators=4)
    with pytest.raises(ValueError, match=match):
        model._set_state(state)
    assert not hasattr(model, "trees_")


def test_crafted_regression_sums_and_flags_are_refused(compact_states):
    state = compact_states[MondrianForestRegressor]
    bad = _corrupt(state, "sums", lambda t: _set(t["sums"], (3, 1), -1.0))
    with pytest.raises(ValueError, match=r"trees_\[0\]: node 3 has non-finite sums"):
        MondrianForestRegressor(n_estimators=4)._set_state(bad)
    with pytest.raises(ValueError, match="compact_ must be true or false"):
        MondrianForestRegressor(n_estimators=4)._set_state({**state, "compact_": 1})
    # a full state that claims to be compact lacks the compact entries
    full = _fit(MondrianForestRegressor, 5, online=False)[0]._get_state()
    with pytest.raises(ValueError, match=r"trees_\[0\]: missing entry"):
        MondrianForestRegressor(n_estimators=4)._set_state({**full, "compact_": True})


def test_compact_refuses_a_full_tree_whose_parts_do_not_add_up():
    """compact() derives internal boxes and counts from the leaves; a full tree where they
    differ (possible only in a crafted state) cannot be compacted exactly, so it is refused."""
    full, _ = _fit(MondrianForestRegressor, 0, online=False)
    tree = full.trees_[1]
    tree.lower[tree.root, 0] -= 0.25  # the root's box no longer the union of its children's
    full._posterior = [None] * full.n_estimators
    with pytest.raises(ValueError, match=rf"trees_\[1\]: slot {tree.root}: its box or counts"):
        full.compact()


# ------------------------------------------------------------------------------ kernels


def _random_preorder(rng, n_leaves: int) -> np.ndarray:
    """Leaf flags of a random full binary tree in preorder, as features (-1 at leaves)."""
    def grow(k):
        if k == 1:
            return [-1]
        a = int(rng.integers(1, k))
        return [int(rng.integers(0, 3))] + grow(a) + grow(k - a)
    return np.array(grow(n_leaves), np.int64)


def test_structure_kernel_matches_its_oracle():
    rng = np.random.default_rng(0)
    codes = set()
    for _ in range(400):
        feature = _random_preorder(rng, int(rng.integers(1, 12)))
        kind = rng.integers(5)
        if kind == 1:
            feature[rng.integers(feature.size)] = rng.choice([-2, 3, 2**40])
        elif kind == 2:
            feature = np.append(feature, rng.integers(-1, 3, int(rng.integers(1, 3))))
        elif kind == 3:
            feature = feature[: rng.integers(0, feature.size)]
        elif kind == 4:
            feature[rng.integers(feature.size)] = rng.integers(-1, 3)
        right = np.empty(feature.size, np.int64)
        code, where = preorder_structure(feature, 3, right)
        want_code, want_where, want_right = naive_preorder_structure(feature, 3)
        assert (code, where) == (want_code, want_where), feature
        if code == 0:
            np.testing.assert_array_equal(right, want_right)
        codes.add(int(code))
    assert codes == {0, 1, 2, 3}


@pytest.mark.parametrize("ikn", [False, True])
def test_expand_kernel_matches_its_oracle(ikn):
    rng = np.random.default_rng(1)
    for _ in range(50):
        feature = _random_preorder(rng, int(rng.integers(1, 15)))
        n = feature.size
        leaves = int(np.sum(feature < 0))
        lo = rng.random((leaves, 3)).astype(np.float32)
        up = lo + rng.random((leaves, 3)).astype(np.float32)
        counts = rng.integers(0, 4, (leaves, 2)).astype(np.float64)
        thr, tau = rng.random(n - leaves), np.sort(rng.random(n - leaves))
        right = np.empty(n, np.int64)
        assert preorder_structure(feature, 3, right) == (0, 0)
        out = MondrianTree.of(left=np.empty(n, np.int64), right=right,
                              parent=np.empty(n, np.int64), feature=feature,
                              threshold=np.empty(n), tau=np.empty(n), lower=np.empty((n, 3)),
                              upper=np.empty((n, 3)), stats=np.empty((n, 2)))
        expand_nodes(CompactNodes(feature, thr, tau, lo, up, counts), 7.0, ikn, out)
        left, parent, threshold, t, lower, upper, c = (out.left, out.parent, out.threshold,
                                                       out.tau, out.lower, out.upper, out.stats)
        want = naive_expand(feature, thr, tau, lo, up, counts, 7.0, ikn)
        for got, exp in zip((left, right, parent, threshold, t, lower, upper, c), want,
                            strict=True):
            np.testing.assert_array_equal(got, exp)


def test_outward_rounding_is_the_predictors():
    """The stored leaf boxes are the float32 extents the packed predictor computes."""
    full, _ = _fit(MondrianForestRegressor, 2, online=True)
    tree = full.trees_[0]
    order, R = full._predictor(tree)
    lo, up = round_outward(tree.lower[order], tree.upper[order])
    D = tree.lower.shape[1]
    np.testing.assert_array_equal(R[3][:, 2:2 + D], lo)
    np.testing.assert_array_equal(R[3][:, 2 + D:], up)
    state = compact_state(tree, "regression")
    np.testing.assert_array_equal(state["lower"], lo[tree.feature[order] < 0])
