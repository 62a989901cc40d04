"""BART (thesis Ch. 4): ESS, the hypercube experiment, simulation-based calibration of the
backfitting sampler, and the estimator (predictive mixture, persistence, hostile states)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from basics.pit import RecalibratedDistribution
from ebf import BARTRegressor, load, save
from ebf.artifact import ModelFormatError
from ebf.artifact.classes import estimator_from_state, estimator_state
from ebf.bayestrees import apply, sample_prior
from ebf.bayestrees import backfitting as bf
from ebf.bayestrees._draws import ForestDraws
from ebf.bayestrees.backfitting import backfit, noise_prior, scale_target, sigma_hat2
from ebf.bayestrees.diagnostics import chain_ess, hypercube
from tests.naive import naive_bayestree_rows, naive_chain_ess, naive_draws_predict


def _ar1(phi, n, rng):
    x = np.empty(n)
    x[0] = rng.normal() / math.sqrt(1 - phi**2)
    for t in range(1, n):
        x[t] = phi * x[t - 1] + rng.normal()
    return x


# ------------------------------------------------------------------ diagnostics


@pytest.mark.parametrize("seed", range(6))
def test_chain_ess_matches_the_lag_by_lag_oracle(seed):
    rng = np.random.default_rng(seed)
    x = _ar1([0.0, 0.5, 0.9, -0.4, 0.95, 0.3][seed], 400, rng)
    assert chain_ess(x) == pytest.approx(naive_chain_ess(x), rel=1e-9)


@pytest.mark.parametrize("phi", [0.0, 0.6, 0.9])
def test_chain_ess_of_ar1_chains(phi):
    """The mean ESS of 40 AR(1) chains is within 10% of n (1 - phi) / (1 + phi)."""
    rng = np.random.default_rng(1)
    n = 4000
    ess = np.mean([chain_ess(_ar1(phi, n, rng)) for _ in range(40)])
    assert ess == pytest.approx(n * (1 - phi) / (1 + phi), rel=0.1)


def test_chain_ess_edge_cases():
    assert math.isnan(chain_ess(np.ones(50)))
    assert math.isnan(chain_ess(np.arange(3.0)))
    with pytest.raises(ValueError, match="1 NaN or inf"):
        chain_ess(np.array([0.0, 1.0, np.nan, 2.0]))


def test_hypercube_follows_sec_4_4_1():
    X, y, f = hypercube(3, n_per_vertex=400, rng=0)
    assert X.shape == (3200, 3)
    vertex = np.sign(X)  # offsets of sd 0.1 never cross 0 from +-1 (10 sd)
    keys = (vertex > 0) @ (2 ** np.arange(3))
    assert np.unique(keys).size == 8
    for key in range(8):
        rows = keys == key
        assert rows.sum() == 400 and np.unique(f[rows]).size == 1
    offsets = (X - vertex).ravel()
    assert stats.kstest(offsets / 0.1, "norm").pvalue > 1e-3
    assert stats.kstest((y - f) / 0.01, "norm").pvalue > 1e-3
    values = np.concatenate([np.unique(hypercube(3, 1, rng=s)[2]) for s in range(60)])
    assert stats.kstest(values / 3.0, "norm").pvalue > 1e-3


@pytest.mark.parametrize(("dim", "beta_s", "rivals"), [(4, 0.4, ("growprune",)),
                                                      (5, 0.3, ("cgm", "growprune"))])
def test_pg_mixes_better_than_local_moves_on_the_hypercube(dim, beta_s, rivals):
    """Sec. 4.4.1 at the thesis' settings (M = 1, its beta_s, 2000 iterations, ESS of the
    log-likelihood after 1000) on the data sets of seeds 0-4: PG's median ESS is more than
    5 times GrowPrune's at D = 4 and 5, and CGM's at D = 5.

    The strongest claim the data support. The ESS of one chain ranges from ~3 to ~850 for
    every sampler at D = 4 (and for PG at D = 5): chains settle in local modes of different
    fit, and a chain stuck at a poor fit with a large sigma has a high log-likelihood ESS.
    Over the data sets of seeds 0-19 the medians are PG 197, CGM 197, GrowPrune 7 at D = 4
    and PG 96, CGM 4, GrowPrune 3 at D = 5, so PG does not beat CGM at D = 4 (the thesis'
    own code, run on its own data sets, spreads the same way: see the issue-13 results)."""
    ess = {s: [] for s in ("pg", *rivals)}
    for seed in range(5):
        X, y, _ = hypercube(dim, rng=seed)
        for sampler, trace in ess.items():
            trace.append(BARTRegressor(sampler=sampler, n_trees=1, beta_s=beta_s, n_iter=2000,
                                       burn_in=1000, random_state=seed).fit(X, y).ess_)
    median = {s: float(np.median(v)) for s, v in ess.items()}
    assert all(median["pg"] > 5 * median[s] for s in rivals), ess


# ------------------------------------------------------------------ the sampler


def test_scaling_and_noise_prior():
    rng = np.random.default_rng(0)
    y = rng.normal(3.0, 2.0, size=50)
    ys, center, scale = scale_target(y)
    assert ys.min() == -0.5 and ys.max() == 0.5
    np.testing.assert_allclose(center + scale * ys, y)
    assert scale_target(np.full(4, 2.0))[2] == 1.0
    X = rng.random((50, 2))
    A = np.column_stack([np.ones(50), X])
    resid = ys - A @ np.linalg.lstsq(A, ys, rcond=None)[0]
    assert sigma_hat2(X, ys) == pytest.approx(resid @ resid / 47)
    assert sigma_hat2(X[:3], ys[:3]) == pytest.approx(np.var(ys[:3]))
    lam = noise_prior(0.04, 3.0, 0.9)  # P(sigma^2 < 0.04) = 0.9 under IG(3/2, 3 lam / 2)
    assert stats.invgamma(1.5, scale=1.5 * lam).cdf(0.04) == pytest.approx(0.9)


def test_draws_predict_matches_the_naive_descent():
    rng = np.random.default_rng(3)
    X = rng.random((120, 3))
    y = np.sin(5 * X[:, 0]) + X[:, 1]
    res = backfit(X, y, n_trees=4, sampler="cgm", n_particles=1, alpha_s=0.95, beta_s=1.0,
                  sigma_mu2=0.1, nu=3.0, lam=0.01, n_iter=40, burn_in=20, thin=4, rng=rng)
    draws = ForestDraws.from_packed(res.draws, res.sigma2, 4)
    assert draws.n_draws == 5 and draws.n_nodes.max() > 1
    Xt = rng.random((30, 3))
    np.testing.assert_allclose(draws.predict(Xt), naive_draws_predict(draws.get_state(), 4, Xt),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("sampler", ["pg", "cgm", "growprune"])
def test_sweep_keeps_every_rows_leaf_and_the_residual(sampler):
    """After every sweep, the leaf the chain keeps for each row in each tree (from which
    R_m is formed without a descent) is the leaf the oracle's descent reaches, and the
    residual is the labels minus the sum of the trees' fits."""
    rng = np.random.default_rng(4)
    X = np.asfortranarray(np.round(rng.random((150, 3)) * 8))  # ties
    y, _, _ = scale_target(np.sin(5 * X[:, 0]) + X[:, 1] + rng.normal(size=150))
    M, cap = 4, 2  # a small capacity: the slot arrays must grow
    T_int = np.full((M, bf.N_TREE_INTS, cap), -1, np.int64)
    T_int[:, 4] = 0  # depth
    T_float = np.zeros((M, 2, cap))
    T_float[:, 0] = np.nan
    T_float[:, bf.MU, 0] = rng.normal(0.0, 0.1, M)
    forest = bf.Forest(T_int, T_float, np.ones(M, np.int64))
    resid = y - T_float[:, bf.MU, 0].sum()
    work = bf.sweep_work(X, M, 5, cap)
    settings = bf.Settings(bf.SAMPLER_NAMES[sampler],
                           bf.SAMPLERS["growprune" if sampler == "growprune" else "cgm"],
                           0.95, 1.0, 0.05, 3.0, 0.01)
    for it in range(15):
        forest, _, _, work = bf._sweep(it, X, resid, forest, settings, work)
        fit = np.zeros(X.shape[0])
        for m in range(M):
            n = forest.n_nodes[m]
            arrays = {name: forest.T_int[m, field, :n] for name, field in
                      (("feature", 0), ("left", 1), ("right", 2))}
            arrays["threshold"] = forest.T_float[m, 0, :n]
            for j, rows in enumerate(naive_bayestree_rows(arrays, X)):
                if arrays["feature"][j] < 0:
                    np.testing.assert_array_equal(work.leaf[m, rows], j)
                    fit[rows] += forest.T_float[m, bf.MU, j]
        np.testing.assert_allclose(resid, y - fit, atol=1e-12)
    assert forest.n_nodes.max() > 1


@pytest.mark.parametrize(("sampler", "thin", "burn_in", "ess_threshold"),
                         [("pg", 6, 60, 1.0), ("pg", 6, 60, 0.5), ("cgm", 25, 200, 1.0)])
def test_simulation_based_calibration(sampler, thin, burn_in, ess_threshold):
    """SBC (Talts et al. 2018): parameters from the prior (3 trees from eq. 3.4, leaf means
    from eq. 4.5, sigma^2 from its inverse gamma), labels from eq. 4.2, the sampler's draws:
    the rank of the true sigma^2 and of the true f(x0) among 19 thinned draws is uniform
    (PG also with adaptive resampling).

    CGM moves one node per tree and iteration, so its draws need more thinning to be
    near independent (with PG's thinning its f(x0) ranks come out U-shaped)."""
    rng = np.random.default_rng(42)
    n_rows, n_trees, sigma_mu2, nu, lam = 12, 3, 0.3, 3.0, 0.05
    X = rng.random((n_rows, 2))
    x0 = np.array([[0.5, 0.5]])
    n_keep = 19
    ranks = {"sigma2": [], "f(x0)": []}
    for _ in range(300):
        trees = [sample_prior(X, 0.95, 1.0, rng=rng) for _ in range(n_trees)]
        mus = [rng.normal(0.0, math.sqrt(sigma_mu2), t.n_nodes) for t in trees]
        f = sum(mu[apply(t, X)] for t, mu in zip(trees, mus, strict=True))
        f0 = sum(mu[apply(t, x0)][0] for t, mu in zip(trees, mus, strict=True))
        sigma2 = nu * lam / rng.chisquare(nu)
        y = f + rng.normal(0.0, math.sqrt(sigma2), n_rows)
        res = backfit(X, y, n_trees=n_trees, sampler=sampler, n_particles=10, alpha_s=0.95,
                      beta_s=1.0, sigma_mu2=sigma_mu2, nu=nu, lam=lam,
                      n_iter=burn_in + n_keep * thin, burn_in=burn_in, thin=thin, rng=rng,
                      ess_threshold=ess_threshold)
        f0_draws = ForestDraws.from_packed(res.draws, res.sigma2, n_trees).predict(x0)[0]
        ranks["sigma2"].append(int(np.sum(res.sigma2 < sigma2)))
        ranks["f(x0)"].append(int(np.sum(f0_draws < f0)))
    for name, r in ranks.items():
        counts = np.bincount(np.asarray(r) // 4, minlength=5)  # 20 ranks in 5 bins
        assert stats.chisquare(counts).pvalue > 1e-3, (name, counts)


# ------------------------------------------------------------------ the estimator


def _friedman(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.random((n, 5))
    f = (10 * np.sin(np.pi * X[:, 0] * X[:, 1]) + 20 * (X[:, 2] - 0.5) ** 2 + 10 * X[:, 3]
         + 5 * X[:, 4])
    return X, f + rng.normal(size=n), f


@pytest.fixture(scope="module")
def fitted():
    X, y, _ = _friedman(300, 0)
    return BARTRegressor(n_trees=20, n_iter=80, burn_in=30, thin=2, random_state=3).fit(X, y), X


def test_fit_is_reproducible_and_keeps_traces(fitted):
    model, X = fitted
    again = BARTRegressor(**model.get_params()).fit(X, _friedman(300, 0)[1])
    np.testing.assert_array_equal(again.predict(X[:20]), model.predict(X[:20]))
    assert model.loglik_trace_.shape == model.sigma2_trace_.shape == (80,)
    assert model.draws_.n_draws == 25 and model.n_nodes_.shape == (25, 20)
    assert model.ess_ == pytest.approx(chain_ess(model.loglik_trace_[30:]))
    # the trace is log N(y | fit, sigma^2) in the units of y
    assert np.all(np.isfinite(model.loglik_trace_)) and np.all(model.sigma2_trace_ > 0)


def test_predictive_mixture_is_one_normal_per_draw(fitted):
    model, X = fitted
    dist = model.predict_distribution(X[:7])
    f = model.draws_.predict(X[:7])
    np.testing.assert_allclose(dist.means, model.y_center_ + model.y_scale_ * f)
    np.testing.assert_allclose(dist.variances[0], model.y_scale_**2 * model.draws_.sigma2)
    np.testing.assert_allclose(dist.weights, 1 / 25)
    lo, hi = dist.interval(0.9)
    q = model.predict_quantiles(X[:7], (0.05, 0.95))
    np.testing.assert_allclose(q, np.column_stack([lo, hi]), rtol=1e-12)
    s = model.predict_summary(X[:7], quantiles=(0.5,))
    np.testing.assert_array_equal(s.mean, model.predict(X[:7]))


def test_held_out_accuracy_and_coverage():
    """PG-BART on Friedman #1 (sd 1 noise): the held-out error of the mean is below the
    noise, sigma is found, and the central 90% predictive intervals cover 82-95% of 2000
    fresh labels. Not exactly 90%: a sum of 50 step functions does not contain Friedman's
    smooth function, and the posterior spread of f (~0.2) misses part of the approximation
    error (~0.8 rms); measured 0.855 here, 0.88 with 200 trees. Calibration where the model
    holds is tested by SBC above."""
    X, y, _ = _friedman(600, 1)
    Xt, yt, ft = _friedman(2000, 2)
    model = BARTRegressor(n_trees=50, n_iter=200, burn_in=100, random_state=0).fit(X, y)
    rmse = np.sqrt(np.mean((model.predict(Xt) - ft) ** 2))
    assert rmse < 1.0
    sigma = np.sqrt(model.draws_.sigma2.mean()) * model.y_scale_
    assert sigma == pytest.approx(1.0, abs=0.15)
    lo, hi = model.predict_distribution(Xt).interval(0.9)
    assert 0.82 < np.mean((yt >= lo) & (yt <= hi)) < 0.95
    model.recalibrate(Xt[:1000], yt[:1000])
    assert isinstance(model.predict_distribution(Xt[:3]), RecalibratedDistribution)


def test_save_load_round_trip(fitted, tmp_path):
    model, X = fitted
    save(model, tmp_path / "bart")
    back = load(tmp_path / "bart")
    assert isinstance(back, BARTRegressor)
    np.testing.assert_array_equal(back.predict_quantiles(X, (0.1, 0.9)),
                                  model.predict_quantiles(X, (0.1, 0.9)))
    np.testing.assert_array_equal(back.loglik_trace_, model.loglik_trace_)
    assert back.ess_ == model.ess_


def test_sample_weights_must_be_equal():
    X, y, _ = _friedman(60, 4)
    params = dict(n_trees=3, n_iter=6, burn_in=2, random_state=0)
    w = np.ones(60)
    w[5] = 2.0
    with pytest.raises(ValueError, match="unequal sample weights.*1 of 60 positive weights"):
        BARTRegressor(**params).fit(X, y, sample_weight=w)
    same = BARTRegressor(**params).fit(X, y, sample_weight=np.full(60, 3.0))
    np.testing.assert_array_equal(same.predict(X), BARTRegressor(**params).fit(X, y).predict(X))
    w[:] = 1.0
    w[40:] = 0.0  # zero weights drop their rows, as in scikit-learn
    dropped = BARTRegressor(**params).fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(dropped.predict(X),
                                  BARTRegressor(**params).fit(X[:40], y[:40]).predict(X))


def test_ess_threshold_default_is_the_thesis_and_bad_values_are_refused():
    X, y, _ = _friedman(300, 3)
    kw = dict(n_trees=5, n_iter=20, burn_in=10, random_state=0)
    default = BARTRegressor(**kw).fit(X, y).predict(X)
    np.testing.assert_array_equal(BARTRegressor(ess_threshold=1.0, **kw).fit(X, y).predict(X),
                                  default)
    adaptive = BARTRegressor(ess_threshold=0.5, **kw).fit(X, y)
    assert np.all(np.isfinite(adaptive.predict(X)))
    for bad in (0.0, 1.5):
        with pytest.raises(ValueError, match="ess_threshold"):
            BARTRegressor(ess_threshold=bad, **kw).fit(X, y)


def test_schedule_without_draws_is_refused():
    with pytest.raises(ValueError, match="burn_in=10 leaves no draw of n_iter=10"):
        BARTRegressor(n_iter=10, burn_in=10).fit(np.random.rand(20, 2), np.random.rand(20))


def _forged(model, edit):
    d = estimator_state(model)
    d["state"]["draws"] = {k: v.copy() for k, v in d["state"]["draws"].items()}
    edit(d["state"])
    return d


def _first_inner(state):
    return int(np.flatnonzero(state["draws"]["feature"] >= 0)[0])


@pytest.mark.parametrize(("edit", "match"), [
    (lambda s: s["draws"]["left"].__setitem__(_first_inner(s), 10**12),
     r"tree \d+ node \d+: left child 1000000000000 is outside"),
    (lambda s: s["draws"]["left"].__setitem__(_first_inner(s), _first_inner(s)),
     "not numbered after it"),
    (lambda s: s["draws"]["feature"].__setitem__(_first_inner(s), 5),
     "split feature 5 is outside the model's features"),
    (lambda s: s["draws"]["value"].__setitem__(0, np.nan), "non-finite leaf mean"),
    (lambda s: s["draws"]["sigma2"].__setitem__(0, -1.0), "sigma2 must hold finite, positive"),
    (lambda s: s["draws"].__setitem__("sigma2", s["draws"]["sigma2"][:-1]),
     r"sigma2 has shape \(24,\), expected \(25,\)"),
    (lambda s: s["draws"]["offsets"].__setitem__(1, 0), "offsets must increase from 0"),
    (lambda s: s["draws"].__setitem__("offsets", s["draws"]["offsets"].astype(float)),
     "offsets must be an array of int64"),
    (lambda s: s.__setitem__("y_scale", 0.0),
     r"y_scale must be a float in \(0, 1e\+110\] \(MAX_ABS_LOCATION\), got 0.0"),
    (lambda s: s.__setitem__("var_floor", float("nan")), "var_floor must be a float in"),
    (lambda s: s["draws"]["value"].__setitem__(0, 1e160 / s["y_scale"]),
     r"draws.value holds 1 value\(s\) outside MAX_ABS_LOCATION / y_scale: .* at index 0"),
    (lambda s: s["draws"]["sigma2"].__setitem__(1, 1e300),
     r"draws.sigma2 holds 1 value\(s\) outside \(MAX_ABS_LOCATION / y_scale\)\*\*2: 1e\+300 "
     r"at index 1"),
    (lambda s: s.__setitem__("loglik_trace", s["loglik_trace"][:5]),
     r"loglik_trace has shape \(5,\), expected \(80,\)"),
    (lambda s: s.__setitem__("draws", [1, 2]), "draws must be a dict of arrays"),
])
def test_crafted_states_are_refused_naming_the_entry(fitted, edit, match):
    """A state from a file is untrusted: each forgery raises before any kernel runs and
    leaves nothing half-built."""
    model, _ = fitted
    with pytest.raises(ModelFormatError, match=match):
        estimator_from_state(_forged(model, edit))
    target = BARTRegressor(**model.get_params())
    with pytest.raises(ValueError, match=match):
        target._set_state(_forged(model, edit)["state"])
    assert not hasattr(target, "draws_")
