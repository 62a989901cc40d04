"""The leaf-noise prior of CART leaves (``basics.leaf_noise``, ``BayesianForestRegressor``).

Oracles: :func:`tests.naive.naive_leaf_predictive_variance` (quadrature over the noise
variance, no conjugate algebra) and :func:`tests.naive.naive_pooled_leaf_variance`, fed with
each leaf's own training rows and the trees' bootstrap weights drawn again.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from basics.leaf_noise import LEAF_PRIOR_ROWS, leaf_predictive_variance, pooled_variance
from ebf import _cart as cart
from ebf import load, save
from ebf._forests import BayesianForestRegressor
from ebf.bootstrap import draw_weights, tree_rng
from ebf.estimators import EmpiricalBayesianForestRegressor
from tests.naive import (
    naive_leaf_predictive_variance,
    naive_pooled_leaf_variance,
    naive_prior_centres,
)


def _leaf(rng, k):
    y = np.round(rng.normal(size=k), 1)
    w = rng.exponential(size=k)
    W = w.sum()
    ybar = np.sum(w * y) / W
    return y, w, W * W / np.sum(w * w), np.sum(w * (y - ybar) ** 2) / W


def test_leaf_variance_matches_quadrature_oracle():
    rng = np.random.default_rng(0)
    for _ in range(40):
        y, w, n, v = _leaf(rng, int(rng.integers(1, 40)))
        s0_sq, nu0 = float(rng.uniform(0.05, 5.0)), float(rng.uniform(1.5, 30.0))
        got = leaf_predictive_variance(np.array([v]), np.array([n]), s0_sq=s0_sq,
                                       prior_rows=nu0)[0]
        assert got == pytest.approx(naive_leaf_predictive_variance(y, w, s0_sq, nu0), rel=1e-6)


def test_equal_targets_get_the_prior_closed_form_and_never_less():
    rng = np.random.default_rng(1)
    s0_sq, nu0 = 2.5, LEAF_PRIOR_ROWS
    for k in (1, 2, 5, 30, 400):
        w = rng.exponential(size=k)
        n = w.sum() ** 2 / np.sum(w * w)
        y = np.full(k, -2.7)
        closed = nu0 * s0_sq * (n + 1) / (n * (nu0 + n - 2))
        got = leaf_predictive_variance(np.array([0.0]), np.array([n]), s0_sq=s0_sq)[0]
        assert got == pytest.approx(closed, rel=1e-12)
        assert got == pytest.approx(naive_leaf_predictive_variance(y, w, s0_sq, nu0), rel=1e-6)
        # any spread in the leaf only adds to it
        more = leaf_predictive_variance(np.array([1e-6, 0.1, 10.0]), np.full(3, n), s0_sq=s0_sq)
        assert np.all(more > got)


def test_leaf_variance_shrinks_toward_its_sample_variance_as_rows_grow():
    rng = np.random.default_rng(2)
    v, s0_sq = 0.3, 4.0
    gaps = []
    for k in (3, 30, 300, 3000, 30000):
        w = rng.exponential(size=k)
        n = w.sum() ** 2 / np.sum(w * w)
        gaps.append(abs(leaf_predictive_variance(np.array([v]), np.array([n]),
                                                 s0_sq=s0_sq)[0] - v) / v)
    assert all(a > b for a, b in zip(gaps, gaps[1:], strict=False))
    assert gaps[-1] < LEAF_PRIOR_ROWS * s0_sq / (n * v)  # the prior's share, ~ nu0 / n


def test_prior_rows_must_give_a_finite_variance():
    with pytest.raises(ValueError, match="prior_rows must be > 1"):
        leaf_predictive_variance(np.zeros(1), np.ones(1), s0_sq=1.0, prior_rows=1.0)
    with pytest.raises(ValueError, match="s0_sq"):
        leaf_predictive_variance(np.zeros(1), np.ones(1), s0_sq=0.0)
    assert pooled_variance(np.zeros(2), np.ones(2)) == 0.0


@pytest.mark.parametrize("splitter", ["hist", "exact"])
@pytest.mark.parametrize("weights", ["exponential", "poisson"])
def test_forest_leaves_are_the_oracle_posterior(splitter, weights):
    """Every leaf of every tree: the prior centred on the pooled within-leaf variance of its
    smallest subtree with ``leaf_prior_rows`` degrees of freedom, computed from the leaves'
    own rows and the tree's drawn weights; ``leaf_noise_var_`` pools the whole forest."""
    rng = np.random.default_rng(3)
    X = rng.random((400, 3))
    y = np.round(4 * X[:, 0] + rng.normal(size=400), 0)  # integer targets: tight leaves
    bf = BayesianForestRegressor(n_estimators=4, weights=weights, splitter=splitter,
                                 min_samples_leaf=3, random_state=5,
                                 leaf_prior_rows=LEAF_PRIOR_ROWS).fit(X, y)
    raw = BayesianForestRegressor(n_estimators=4, weights=weights, splitter=splitter,
                                  min_samples_leaf=3, random_state=5,
                                  leaf_prior_rows=None).fit(X, y)
    f = bf.forest_
    np.testing.assert_array_equal(f.value, raw.forest_.value)  # means do not move
    leaves = cart.apply(f, X)
    rows_of = {}
    for t in range(f.n_trees):
        w = draw_weights(weights, X.shape[0], tree_rng(bf.entropy_, 0, t))
        for leaf in np.unique(leaves[:, t]):
            rows = (leaves[:, t] == leaf) & (w > 0)
            rows_of[int(leaf)] = (y[rows], w[rows])
    s0_sq = naive_pooled_leaf_variance(rows_of.values())
    assert bf.leaf_noise_var_ == pytest.approx(s0_sq, rel=1e-9)
    local = 0
    for t in range(f.n_trees):
        centres = naive_prior_centres(f.left, f.right, int(f.offsets[t]), rows_of,
                                      LEAF_PRIOR_ROWS, s0_sq, bf.var_floor_)
        for leaf, centre in centres.items():
            yl, wl = rows_of[leaf]
            assert f.variance[leaf] == pytest.approx(
                naive_leaf_predictive_variance(yl, wl, centre, LEAF_PRIOR_ROWS), rel=1e-6)
            local += centre != s0_sq
    assert local > 0  # the centres are local, not the forest's


def _rounded_data(seed):
    """Random regression data whose targets are rounded to a coarse resolution."""
    rng = np.random.default_rng(seed)
    d = int(rng.integers(1, 6))
    n = int(rng.integers(200, 2000))
    noise = float(rng.choice([0.05, 0.3, 1.0]))
    step = float(rng.choice([0.1, 0.5, 1.0, 2.0]))
    X = rng.random((n + 1000, d))
    f = 3 * np.sin(4 * X[:, 0]) + (X[:, 1] if d > 1 else 0) * 2
    scale = noise * (1 + 4 * (X[:, 0] > 0.7))  # heteroskedastic
    y = np.round((f + scale * rng.normal(size=f.size)) / step) * step
    return X[:n], y[:n], X[n:], y[n:]


@pytest.mark.parametrize("seed", range(6))
def test_no_test_row_is_impossible_with_rounded_targets(seed):
    """Default forests on rounded targets: no held-out target within the training range has
    a log density below -30 (before the prior, single rows fell to -1e8)."""
    X, y, Xt, yt = _rounded_data(seed)
    bf = BayesianForestRegressor(random_state=seed).fit(X, y)
    inside = (yt >= y.min()) & (yt <= y.max())
    logpdf = bf.predict_distribution(Xt[inside]).logpdf(yt[inside])
    assert logpdf.min() > -30, (seed, float(logpdf.min()))


def test_ebf_branches_carry_the_prior():
    X, y, Xt, yt = _rounded_data(10)
    ebf = EmpiricalBayesianForestRegressor(n_estimators=20, trunk_max_leaves=4,
                                           random_state=0).fit(X, y)
    forests = [b for b in ebf.branches_ if isinstance(b, BayesianForestRegressor)]
    assert forests and all(b.leaf_noise_var_ >= b.var_floor_ for b in forests)
    inside = (yt >= y.min()) & (yt <= y.max())
    assert ebf.predict_distribution(Xt[inside]).logpdf(yt[inside]).min() > -30


def _manifest(path):
    return json.loads((path / "manifest.json").read_text())


def test_new_leaf_model_round_trips_and_old_models_predict_as_before(tmp_path):
    X, y, Xt, _ = _rounded_data(11)
    new = BayesianForestRegressor(n_estimators=5, random_state=0).fit(X, y)
    back = load(save(new, tmp_path / "new"))
    assert back.leaf_noise_var_ == new.leaf_noise_var_
    np.testing.assert_array_equal(back.predict(Xt, return_std=True)[1],
                                  new.predict(Xt, return_std=True)[1])
    # a model of the old form: no leaf_prior_rows parameter, no leaf_noise_var in the state
    old = BayesianForestRegressor(n_estimators=5, random_state=0, leaf_prior_rows=None).fit(X, y)
    path = save(old, tmp_path / "old")
    manifest = _manifest(path)
    assert "leaf_noise_var" not in json.dumps(manifest["state"])
    del manifest["params"]["leaf_prior_rows"]
    del manifest["model_hash"]  # models saved before the hash have none
    (path / "manifest.json").write_text(json.dumps(manifest))
    loaded = load(path)
    assert loaded.leaf_noise_var_ is None
    np.testing.assert_array_equal(loaded.predict(Xt, return_std=True)[1],
                                  old.predict(Xt, return_std=True)[1])
    assert not np.array_equal(loaded.predict(Xt, return_std=True)[1],
                              new.predict(Xt, return_std=True)[1])


@pytest.mark.parametrize("bad", [-1.0, 0.0, float("nan"), float("inf"), 1e-300, "1.0"])
def test_forged_leaf_noise_variance_is_refused(tmp_path, bad):
    X, y, _, _ = _rounded_data(12)
    path = save(BayesianForestRegressor(n_estimators=2, random_state=0).fit(X, y), tmp_path / "m")
    before = (path / "manifest.json").read_text()
    manifest = json.loads(before)
    assert isinstance(manifest["state"]["leaf_noise_var"], float)
    manifest["state"]["leaf_noise_var"] = bad
    del manifest["model_hash"]
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="leaf_noise_var"):
        load(path)
