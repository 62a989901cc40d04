"""Tests of the per-row Gaussian mixtures against plain oracles, quadrature and sampling."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from scipy import integrate, stats

from basics.mixture import GaussianMixture, MixtureSummary, moments, summarize
from tests.naive import (
    naive_mixture_cdf,
    naive_mixture_logpdf,
    naive_mixture_moments,
    naive_mixture_pdf,
    naive_mixture_quantile,
)


def random_mixture_arrays(n=40, k=6, seed=0, padding=True):
    """Random mixtures; with padding, some components have weight 0 and junk parameters."""
    rng = np.random.default_rng(seed)
    w = rng.gamma(0.7, size=(n, k))
    m = rng.normal(0.0, 3.0, size=(n, k))
    v = rng.uniform(0.05, 2.0, size=(n, k)) ** 2
    if padding:
        pad = rng.random((n, k)) < 0.35
        pad[:, 0] = False  # every row keeps a live component
        w[pad] = 0.0
        m[pad] = rng.normal(0.0, 1e6, size=pad.sum())  # junk: must never matter
        v[pad] = rng.choice([0.0, -1.0, 1e12], size=pad.sum())
    return w, m, v


@pytest.fixture
def arrays():
    return random_mixture_arrays()


@pytest.fixture
def gm(arrays):
    return GaussianMixture(*arrays)


# ---------------------------------------------------------------- construction and errors


def test_weights_normalised_and_padding_kept_at_zero(arrays, gm):
    w = arrays[0]
    np.testing.assert_allclose(gm.weights.sum(axis=1), 1.0, rtol=0, atol=1e-14)
    np.testing.assert_array_equal(gm.weights == 0, w == 0)
    np.testing.assert_allclose(gm.weights, w / w.sum(axis=1, keepdims=True), rtol=1e-14)
    assert np.all(np.isfinite(gm.means)) and np.all(gm.variances > 0)


def test_one_dimensional_inputs_are_one_component_per_row():
    g = GaussianMixture([2.0, 3.0], [1.0, -1.0], [4.0, 9.0])
    assert g.weights.shape == (2, 1) and g.n_components == 1
    np.testing.assert_array_equal(g.weights, 1.0)
    np.testing.assert_allclose(g.std, [2.0, 3.0])


@pytest.mark.parametrize(
    "w, m, v, match",
    [
        (np.ones((3, 2)), np.ones((3, 3)), np.ones((3, 2)), "same shape"),
        (np.ones((3, 2)), np.ones((3, 2)), np.ones((2, 2)), "same shape"),
        (np.ones((2, 2, 2)), np.ones((2, 2, 2)), np.ones((2, 2, 2)), "1-D"),
        (np.ones((3, 0)), np.ones((3, 0)), np.ones((3, 0)), "at least one component"),
        ([[1.0, -0.1]], [[0.0, 0.0]], [[1.0, 1.0]], "negative"),
        ([[1.0, np.nan]], [[0.0, 0.0]], [[1.0, 1.0]], "non-finite"),
        ([[1.0, 1.0], [0.0, 0.0]], np.zeros((2, 2)), np.ones((2, 2)), "summing to 0"),
        ([[1.0, 1.0]], [[0.0, np.inf]], [[1.0, 1.0]], "means"),
        ([[1.0, 1.0]], [[0.0, 0.0]], [[1.0, 0.0]], "variances"),
        ([[1.0, 1.0]], [[0.0, 0.0]], [[1.0, -2.0]], "variances"),
    ],
)
def test_invalid_inputs_raise(w, m, v, match):
    with pytest.raises(ValueError, match=match):
        GaussianMixture(w, m, v)


def test_tiny_positive_variance_is_allowed():
    g = GaussianMixture([[1.0, 1.0]], [[0.0, 1.0]], [[1e-300, 1.0]])
    assert np.isfinite(g.var[0]) and np.isfinite(g.quantile(0.25)[0])


def test_bad_query_arguments_raise(gm):
    with pytest.raises(ValueError, match="rows"):
        gm.cdf(np.zeros(gm.n_rows + 1))
    with pytest.raises(ValueError, match="rows"):
        gm.logpdf(np.zeros((gm.n_rows - 1, 2)))
    with pytest.raises(ValueError, match="scalar"):
        gm.cdf(np.zeros((gm.n_rows, 2, 2)))
    for q in (-0.1, 1.5, np.nan, [0.5, 2.0]):
        with pytest.raises(ValueError, match=r"\[0, 1\]"):
            gm.quantile(q)
    with pytest.raises(ValueError, match="1-D"):
        gm.quantile(np.full((2, 2), 0.5))
    with pytest.raises(ValueError, match="level"):
        gm.interval(1.2)
    with pytest.raises(ValueError, match="n_samples"):
        gm.sample(-1)


# ---------------------------------------------------------------- moments, eq. (4)


def test_mean_and_variance_match_oracle(arrays, gm):
    mean, var = naive_mixture_moments(*arrays)
    np.testing.assert_allclose(gm.mean, mean, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gm.var, var, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gm.std, np.sqrt(var), rtol=1e-10)
    m2, v2 = moments(*arrays)
    np.testing.assert_allclose(m2, mean, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(v2, var, rtol=1e-10, atol=1e-12)


def test_moments_match_numerical_integration(gm):
    for i in range(4):
        row = gm[i]
        lo, hi = row.quantile([1e-14, 1 - 1e-14])[0]
        mass = integrate.quad(lambda t, r=row: r.pdf(t)[0], lo, hi, limit=200)[0]
        ey = integrate.quad(lambda t, r=row: t * r.pdf(t)[0], lo, hi, limit=200)[0]
        ey2 = integrate.quad(lambda t, r=row: t * t * r.pdf(t)[0], lo, hi, limit=200)[0]
        assert mass == pytest.approx(1.0, abs=1e-9)
        assert ey == pytest.approx(row.mean[0], abs=1e-7)
        assert ey2 - ey**2 == pytest.approx(row.var[0], rel=1e-7)


# ---------------------------------------------------------------- cdf, pdf, logpdf


def test_cdf_and_logpdf_match_oracle(arrays, gm):
    rng = np.random.default_rng(1)
    y = gm.mean[:, None] + gm.std[:, None] * rng.normal(0, 2, size=(gm.n_rows, 3))
    cdf = gm.cdf(y)
    logpdf = gm.logpdf(y)
    assert cdf.shape == logpdf.shape == y.shape
    for i in range(gm.n_rows):
        for j in range(y.shape[1]):
            args = (arrays[0][i], arrays[1][i], arrays[2][i], y[i, j])
            assert cdf[i, j] == pytest.approx(naive_mixture_cdf(*args), rel=1e-12, abs=1e-15)
            assert logpdf[i, j] == pytest.approx(naive_mixture_logpdf(*args), rel=1e-11, abs=1e-11)
            assert gm.pdf(y)[i, j] == pytest.approx(naive_mixture_pdf(*args), rel=1e-11)
    # (n,) and scalar inputs give (n,)
    np.testing.assert_allclose(gm.cdf(y[:, 0]), cdf[:, 0], rtol=1e-15)
    np.testing.assert_allclose(gm.logpdf(0.5), gm.logpdf(np.full(gm.n_rows, 0.5)), rtol=1e-15)


def test_cdf_is_integral_of_pdf(gm):
    for i in range(5):
        row = gm[i]
        lo = row.quantile(1e-15)[0]
        for y in row.quantile([0.1, 0.5, 0.93])[0]:
            val = integrate.quad(lambda t, r=row: r.pdf(t)[0], lo, y, limit=200, epsabs=1e-13)[0]
            assert val == pytest.approx(row.cdf(y)[0] - 1e-15, abs=1e-9)


def test_logpdf_is_log_of_small_interval_mass(gm):
    rng = np.random.default_rng(2)
    y = gm.sample(1, rng)[:, 0]
    # half-width well below the narrowest live component, so the curvature error is ~1e-9
    h = 1e-4 * np.sqrt(np.where(gm.weights > 0, gm.variances, np.inf).min(axis=1))
    mass = np.array(
        [
            integrate.quad(lambda t, r=gm[i]: r.pdf(t)[0], y[i] - h[i], y[i] + h[i])[0]
            for i in range(gm.n_rows)
        ]
    )
    np.testing.assert_allclose(gm.logpdf(y), np.log(mass / (2 * h)), atol=1e-6)


def test_logpdf_is_stable_far_in_the_tails():
    g = GaussianMixture([[0.3, 0.7, 0.0]], [[0.0, 1.0, 5.0]], [[1.0, 0.25, -3.0]])
    y = np.array([[-1e3, 1e3, 40.0]])
    expected = [naive_mixture_logpdf([0.3, 0.7], [0.0, 1.0], [1.0, 0.25], t) for t in y[0]]
    out = g.logpdf(y)
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out[0], expected, rtol=1e-12)
    assert g.pdf(y)[0, 0] == 0.0 and g.cdf(y)[0, 0] == 0.0 and g.cdf(y)[0, 1] == 1.0
    assert g.logpdf(np.inf)[0] == -np.inf


def test_padding_is_harmless(arrays):
    w, m, v = arrays
    rng = np.random.default_rng(3)
    gm = GaussianMixture(w, m, v)
    # the same mixtures with the padding columns replaced by other junk, in other slots
    perm = rng.permutation(w.shape[1])
    m2, v2 = m.copy(), v.copy()
    m2[w == 0] = 7.0
    v2[w == 0] = 1e-30
    g2 = GaussianMixture(w[:, perm], m2[:, perm], v2[:, perm])
    y = rng.normal(0, 4, size=(w.shape[0], 4))
    np.testing.assert_allclose(gm.cdf(y), g2.cdf(y), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(gm.logpdf(y), g2.logpdf(y), rtol=1e-12)
    np.testing.assert_allclose(gm.var, g2.var, rtol=1e-12)
    np.testing.assert_allclose(gm.quantile([0.1, 0.7]), g2.quantile([0.1, 0.7]), rtol=1e-10)
    draws = gm.sample(500, random_state=0)
    assert np.all(np.abs(draws) < 100)  # junk means of ~1e6 are never drawn


# ---------------------------------------------------------------- quantiles


def test_quantile_inverts_cdf_with_padding():
    w, m, v = random_mixture_arrays(n=300, k=12, seed=4)
    gm = GaussianMixture(w, m, v)
    y = gm.sample(3, np.random.default_rng(5))
    p = gm.cdf(y)
    back = np.vstack([gm[i].quantile(p[i]) for i in range(gm.n_rows)])  # row i at its levels
    scale = np.maximum(np.abs(y), gm.std[:, None])
    np.testing.assert_array_less(np.abs(back - y), 1e-8 * scale)


def test_cdf_of_quantile_is_level():
    w, m, v = random_mixture_arrays(n=500, k=15, seed=6)
    gm = GaussianMixture(w, m, v)
    q = np.array([1e-9, 1e-4, 0.01, 0.2, 0.5, 0.5 + 1e-9, 0.77, 0.99, 1 - 1e-7])
    x = gm.quantile(q)
    assert x.shape == (500, q.size)
    c = gm.cdf(x)
    np.testing.assert_allclose(c, np.broadcast_to(q, c.shape), rtol=1e-9, atol=1e-15)
    assert np.all(np.diff(x, axis=1) > 0)
    # upper tail measured on the survival side
    sf = 1 - c[:, -1]
    np.testing.assert_allclose(sf, 1e-7, rtol=1e-6)


def test_quantile_matches_brentq_oracle(arrays, gm):
    q = np.array([0.003, 0.25, 0.5, 0.9, 0.9999])
    x = gm.quantile(q)
    for i in range(gm.n_rows):
        for j, qj in enumerate(q):
            ref = naive_mixture_quantile(arrays[0][i], arrays[1][i], arrays[2][i], qj)
            assert x[i, j] == pytest.approx(ref, rel=1e-10, abs=1e-10 * gm.std[i])


def test_quantile_single_component_matches_norm_ppf():
    rng = np.random.default_rng(7)
    mean = rng.normal(0, 100, size=200)
    std = rng.uniform(1e-3, 50, size=200)
    q = np.array([1e-300, 1e-12, 0.001, 0.3, 0.5, 0.8, 1 - 1e-12])
    ref = stats.norm.ppf(q, mean[:, None], std[:, None])
    np.testing.assert_allclose(GaussianMixture.from_moments(mean, std**2).quantile(q), ref,
                               rtol=1e-9, atol=1e-9)
    # also when the single live component sits among padding columns, and when the row has
    # several copies of the same component (so the Newton path is taken)
    w = np.zeros((200, 3))
    w[:, 1] = 2.0
    g = GaussianMixture(w, np.c_[mean * 0, mean, mean * 0], np.c_[std * 0, std**2, std * 0])
    np.testing.assert_allclose(g.quantile(q), ref, rtol=1e-9, atol=1e-9)
    g2 = GaussianMixture(np.ones((200, 2)), np.c_[mean, mean], np.c_[std**2, std**2])
    q2 = q[1:-1]
    err = np.abs(g2.quantile(q2) - ref[:, 1:-1])
    np.testing.assert_array_less(err, 1e-9 * (np.abs(ref[:, 1:-1]) + std[:, None]))


def test_quantile_extremes_and_shapes(gm):
    assert gm.quantile(0.5).shape == (gm.n_rows,)
    assert gm.quantile([0.5]).shape == (gm.n_rows, 1)
    x = gm.quantile([0.0, 1.0])
    assert np.all(x[:, 0] == -np.inf) and np.all(x[:, 1] == np.inf)
    np.testing.assert_array_equal(gm[3:7].quantile(0.3), gm.quantile(0.3)[3:7])


def test_quantile_well_separated_modes():
    # two modes 1000 standard deviations apart: the cdf is flat in between (Newton's worst case)
    g = GaussianMixture([[0.5, 0.5], [0.2, 0.8]], [[0.0, 1000.0], [0.0, 1000.0]], np.ones((2, 2)))
    q = np.array([0.1, 0.2, 0.2 + 1e-12, 0.49, 0.5 - 1e-12, 0.5 + 1e-12, 0.51, 0.9])
    x = g.quantile(q)
    np.testing.assert_allclose(g.cdf(x), np.broadcast_to(q, x.shape), rtol=1e-10, atol=1e-14)
    # levels within 1e-12 of the flat plateau are ill-conditioned in y (float64 rounding of q
    # alone moves the root by ~1e-5), so only the cdf check above applies to them
    for i in range(2):
        for j, qj in enumerate(q):
            if abs(qj - 0.5) < 1e-9 or (i == 1 and abs(qj - 0.2) < 1e-9):
                continue
            ref = naive_mixture_quantile(g.weights[i], g.means[i], g.variances[i], qj)
            assert x[i, j] == pytest.approx(ref, rel=1e-9, abs=1e-9)


def test_interval_is_pair_of_quantiles(gm):
    lo, hi = gm.interval(0.8)
    np.testing.assert_allclose(lo, gm.quantile(0.1), rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(hi, gm.quantile(0.9), rtol=1e-11, atol=1e-12)
    lo2, hi2 = gm.interval([0.5, 0.8])
    assert lo2.shape == (gm.n_rows, 2)
    np.testing.assert_allclose(lo2[:, 1], lo, rtol=1e-14)
    np.testing.assert_allclose(gm.cdf(hi2) - gm.cdf(lo2), np.broadcast_to([0.5, 0.8], lo2.shape),
                               atol=1e-10)


# ---------------------------------------------------------------- sampling


def test_samples_follow_the_cdf(gm):
    draws = gm.sample(3000, random_state=np.random.RandomState(11))
    assert draws.shape == (gm.n_rows, 3000)
    pvals = [
        stats.kstest(draws[i], lambda t, i=i: gm[i].cdf(t[None, :])[0]).pvalue for i in range(12)
    ]
    assert min(pvals) > 0.001, pvals
    # and jointly: probability integral transform of all draws is uniform
    u = gm.cdf(draws).ravel()
    assert stats.kstest(u, "uniform").pvalue > 0.001


def test_interval_coverage_on_draws(gm):
    draws = gm.sample(2000, random_state=12)
    for level in (0.5, 0.9):
        lo, hi = gm.interval(level)
        inside = ((draws >= lo[:, None]) & (draws <= hi[:, None])).mean()
        se = np.sqrt(level * (1 - level) / draws.size)
        assert abs(inside - level) < 5 * se


def test_sample_seeding():
    g = GaussianMixture.from_moments([0.0, 10.0], [1.0, 4.0])
    np.testing.assert_array_equal(g.sample(5, 3), g.sample(5, 3))
    a = g.sample(5, np.random.default_rng(3))
    b = g.sample(5, np.random.default_rng(3))
    np.testing.assert_array_equal(a, b)
    assert g.sample(0, 1).shape == (2, 0)


# ---------------------------------------------------------------- combining


def test_concat_equal_weights_is_forest_average():
    trees = [GaussianMixture(*random_mixture_arrays(n=30, k=k, seed=s)) for s, k in
             [(20, 3), (21, 5), (22, 1)]]
    forest = GaussianMixture.concat(trees)
    assert forest.n_components == 9
    y = np.random.default_rng(23).normal(0, 3, size=(30, 4))
    np.testing.assert_allclose(forest.cdf(y), np.mean([t.cdf(y) for t in trees], axis=0),
                               rtol=1e-13)
    np.testing.assert_allclose(forest.pdf(y), np.mean([t.pdf(y) for t in trees], axis=0),
                               rtol=1e-12)
    np.testing.assert_allclose(forest.mean, np.mean([t.mean for t in trees], axis=0), rtol=1e-12,
                               atol=1e-12)
    w = np.array([1.0, 3.0, 0.0])
    weighted = GaussianMixture.concat(trees, weights=w)
    np.testing.assert_allclose(weighted.cdf(y), (trees[0].cdf(y) + 3 * trees[1].cdf(y)) / 4,
                               rtol=1e-13)
    per_row = np.vstack([np.ones(30), np.arange(30.0), np.zeros(30)])
    pr = GaussianMixture.concat(trees, weights=per_row)
    np.testing.assert_allclose(pr[5].mean, (trees[0][5].mean + 5 * trees[1][5].mean) / 6,
                               rtol=1e-12)


def test_concat_errors():
    a = GaussianMixture.from_moments([0.0, 1.0], [1.0, 1.0])
    b = GaussianMixture.from_moments([0.0], [1.0])
    with pytest.raises(ValueError, match="same number of rows"):
        GaussianMixture.concat([a, b])
    with pytest.raises(ValueError, match="at least one"):
        GaussianMixture.concat([])
    with pytest.raises(ValueError, match="weights must have shape"):
        GaussianMixture.concat([a, a], weights=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="summing to 0"):
        GaussianMixture.concat([a, a], weights=[0.0, 0.0])
    with pytest.raises(TypeError):
        GaussianMixture.concat([a, (0.0, 1.0)])


def test_from_moments_matches_scipy_norm():
    mean, var = np.array([0.0, -2.0, 5.0]), np.array([1.0, 0.5, 9.0])
    g = GaussianMixture.from_moments(mean, var)
    y = np.array([0.3, -1.0, 12.0])
    sd = np.sqrt(var)
    np.testing.assert_allclose(g.logpdf(y), stats.norm.logpdf(y, mean, sd), rtol=1e-13)
    np.testing.assert_allclose(g.cdf(y), stats.norm.cdf(y, mean, sd), rtol=1e-13)
    np.testing.assert_allclose(g.var, var, rtol=1e-15)
    with pytest.raises(ValueError, match="same length"):
        GaussianMixture.from_moments(mean, var[:2])


def test_row_selection_and_pickle(gm):
    assert len(gm) == gm.n_rows == 40
    row = gm[-1]
    assert isinstance(row, GaussianMixture) and len(row) == 1
    np.testing.assert_array_equal(row.weights, gm.weights[-1:])
    mask = gm.mean > 0
    np.testing.assert_array_equal(gm[mask].var, gm.var[mask])
    np.testing.assert_array_equal(gm[[0, 2]].cdf(0.1), gm.cdf(0.1)[[0, 2]])
    g2 = pickle.loads(pickle.dumps(gm))
    np.testing.assert_array_equal(g2.quantile(0.3), gm.quantile(0.3))
    with pytest.raises(IndexError):
        gm[0, 1]


# ---------------------------------------------------------------- one-pass summary kernel


def _padded(w, m, v, width, seed):
    """The same rows with junk zero-weight components inserted between and after the live
    ones (live components keep their order), ``width`` columns in all."""
    rng = np.random.default_rng(seed)
    n = w.shape[0]
    W, M = np.zeros((n, width)), rng.normal(0.0, 1e6, size=(n, width))
    V = rng.choice([0.0, -1.0, np.nan, 1e12], size=(n, width))
    for i in range(n):
        live = np.flatnonzero(w[i] > 0)
        cols = np.sort(rng.choice(width, size=live.size, replace=False))
        W[i, cols], M[i, cols], V[i, cols] = w[i, live], m[i, live], v[i, live]
    return W, M, V


def test_summary_matches_oracles():
    w, m, v = random_mixture_arrays(n=60, k=9, seed=30)
    gm = GaussianMixture(w, m, v)
    levels = np.array([1e-6, 0.003, 0.05, 0.25, 0.5, 0.9, 0.95, 0.9999])
    s = summarize(gm, levels)
    assert isinstance(s, MixtureSummary) and s.quantiles.shape == (60, levels.size)
    mean, var = naive_mixture_moments(w, m, v)
    np.testing.assert_allclose(s.mean, mean, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(s.std, np.sqrt(var), rtol=1e-12)
    for i in range(gm.n_rows):
        for j, q in enumerate(levels):
            ref = naive_mixture_quantile(w[i], m[i], v[i], q)
            assert s.quantiles[i, j] == pytest.approx(ref, rel=1e-11, abs=1e-11 * s.std[i])


def test_summary_of_a_row_ignores_padding_and_other_rows_bit_for_bit():
    w, m, v = random_mixture_arrays(n=50, k=8, seed=31)
    w[7, 1:] = 0.0  # a single live component: the closed form
    levels = np.array([0.0, 0.02, 0.3, 0.5, 0.5 + 1e-12, 0.8, 0.975, 1.0])
    block = summarize(GaussianMixture(*_padded(w, m, v, 21, seed=32)), levels)
    narrow = summarize(GaussianMixture(w, m, v), levels)
    for i in range(w.shape[0]):
        live = w[i] > 0
        alone = GaussianMixture(w[i, live][None], m[i, live][None], v[i, live][None])
        one = summarize(alone, levels)
        for got in (block, narrow):
            assert got.mean[i] == one.mean[0] and got.std[i] == one.std[0]
            assert np.array_equal(got.quantiles[i], one.quantiles[0])
        # normalisation too: the live weights are the same bits whatever the padding
        assert np.array_equal(GaussianMixture(w, m, v).weights[i, live], alone.weights[0])


def test_mixture_methods_are_the_summary():
    gm = GaussianMixture(*random_mixture_arrays(n=30, k=5, seed=33))
    s = summarize(gm, [0.1, 0.6])
    assert np.array_equal(gm.mean, s.mean) and np.array_equal(gm.std, s.std)
    assert np.array_equal(np.sqrt(gm.var), s.std)
    assert np.array_equal(gm.quantile([0.1, 0.6]), s.quantiles)
    assert np.array_equal(gm.quantile(0.6), s.quantiles[:, 1])
    assert summarize(gm, []).quantiles.shape == (30, 0)
    with pytest.raises(ValueError, match="levels"):
        summarize(gm, [0.5, 1.5])
    with pytest.raises(TypeError, match="GaussianMixture"):
        summarize((gm.weights, gm.means, gm.variances), [0.5])


def test_concat_is_normalised_and_keeps_part_order():
    parts = [GaussianMixture(*random_mixture_arrays(n=20, k=k, seed=s)) for s, k in
             [(34, 4), (35, 2)]]
    pooled = GaussianMixture.concat(parts)
    np.testing.assert_allclose(pooled.weights.sum(axis=1), 1.0, rtol=0, atol=1e-14)
    np.testing.assert_array_equal(pooled.means[:, 4:], parts[1].means)
    np.testing.assert_array_equal(pooled.weights[:, :4], parts[0].weights * 0.5)
    dropped = GaussianMixture.concat(parts, weights=[0.0, 1.0])
    assert np.all(dropped.weights[:, :4] == 0) and np.all(dropped.variances[:, :4] == 1)
    np.testing.assert_array_equal(dropped.quantile([0.2, 0.7]), parts[1].quantile([0.2, 0.7]))
    with pytest.raises(ValueError, match="negative or non-finite"):
        GaussianMixture.concat(parts, weights=[-1.0, 1.0])
