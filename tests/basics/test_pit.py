"""The PIT map, recalibrated distributions, adaptive updates and the CRPS (basics.pit,
basics.metrics), against the plain-NumPy oracles of tests/naive/."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special, stats

from basics.metrics import crps_many, crps_rows
from basics.mixture import GaussianMixture
from basics.pit import PIT_EDGES, PITMap, RecalibratedDistribution, aci_kernel, pit_counts
from tests.naive import naive_aci, naive_crps_mixture, naive_crps_numeric, naive_pit_knots


@pytest.mark.parametrize("seed", [0, 1])
def test_map_of_calibrated_pit_is_close_to_identity(seed):
    u = np.random.default_rng(seed).random(20_000)
    pit_map = PITMap.fit(u)
    assert pit_map.n_knots == 200
    assert pit_map.max_deviation() < 0.02
    grid = np.linspace(0, 1, 101)
    assert np.max(np.abs(pit_map(grid) - grid)) < 0.02


def test_knots_are_the_empirical_quantiles():
    u = np.random.default_rng(2).beta(2.0, 5.0, 30_000)
    pit_map = PITMap.fit(u, n_knots=50)
    nominal, levels = naive_pit_knots(u, 50)
    np.testing.assert_array_equal(pit_map.nominal, nominal)
    # the histogram's bins are at most 2.5e-4 wide: linear inside a bin is that close
    np.testing.assert_allclose(pit_map.levels, levels, atol=3e-4)
    assert np.all(np.diff(pit_map.base) > 0)


def test_counts_of_parts_give_the_map_of_all_rows():
    u = np.random.default_rng(3).beta(0.7, 0.9, 12_345)
    cuts = np.sort(np.random.default_rng(4).choice(u.size, 6, replace=False))
    total = sum(pit_counts(part) for part in np.split(u, cuts))
    assert PITMap.from_counts(total) == PITMap.fit(u)
    assert int(total.sum()) == u.size and total.size == PIT_EDGES.size - 1


def test_map_needs_enough_rows_and_valid_pit():
    with pytest.raises(ValueError, match="at least 50 calibration rows with a target; got 49"):
        PITMap.fit(np.full(49, 0.5))
    with pytest.raises(ValueError, match="1 of 3 do not"):
        pit_counts([0.2, np.nan, 0.3])


def _mixture(n=3):
    rng = np.random.default_rng(5)
    w = rng.random((n, 3)) + 0.1
    m = rng.normal(size=(n, 3)) * 2
    v = rng.random((n, 3)) + 0.2
    return GaussianMixture(w, m, v)


def _skewed_map():
    return PITMap.fit(np.random.default_rng(6).beta(3.0, 2.0, 40_000))


def test_recalibrated_cdf_quantile_density_are_consistent():
    dist = RecalibratedDistribution(_mixture(), _skewed_map())
    grid = np.linspace(-25, 25, 200_001)
    cdf = dist.cdf(np.broadcast_to(grid, (3, grid.size)))
    assert np.all(np.diff(cdf, axis=1) >= 0)
    assert np.all(cdf[:, 0] < 1e-6) and np.all(cdf[:, -1] > 1 - 1e-6)
    mass = np.trapezoid(dist.pdf(np.broadcast_to(grid, (3, grid.size))), grid, axis=1)
    np.testing.assert_allclose(mass, 1.0, atol=1e-4)
    y = np.array([-1.0, 0.3, 2.0])
    np.testing.assert_allclose(dist.quantile(dist.cdf(y)[:, None])[:, 0], y, rtol=1e-9)
    lo, hi = dist.interval(0.8)
    np.testing.assert_allclose(dist.cdf(hi) - dist.cdf(lo), 0.8, atol=1e-9)


def test_per_row_quantile_levels_match_scalar_levels():
    gm = _mixture(4)
    levels = np.random.default_rng(7).random((4, 5))
    per_row = gm.quantile(levels)
    for i in range(4):
        np.testing.assert_array_equal(per_row[i], gm[i].quantile(levels[i])[0])


def test_samples_follow_the_recalibrated_cdf():
    dist = RecalibratedDistribution(_mixture(1), _skewed_map())
    draws = dist.sample(20_000, random_state=0)[0]
    p = stats.kstest(draws, lambda t: dist.cdf(np.broadcast_to(t, (1, t.size)))[0]).pvalue
    assert p > 0.01
    # the base mixture's own draws do not follow it
    base = dist.base.sample(20_000, random_state=0)[0]
    assert stats.kstest(base, lambda t: dist.cdf(np.broadcast_to(t, (1, t.size)))[0]).pvalue \
        < 1e-6


@pytest.mark.parametrize("y", [-40.0, -2.5, -0.4, 0.0, 0.9, 3.0, 12.0])
def test_crps_matches_closed_form(y):
    one = crps_rows(([0.3], [1.7]), [y])[0]
    assert one == pytest.approx(naive_crps_mixture([1.0], [0.3], [1.7 ** 2], y), rel=1e-4)
    w, m, v = [0.6, 0.4], [0.0, 3.0], [1.0, 0.25]
    two = crps_rows(GaussianMixture([w], [m], [v]), [y])[0]
    assert two == pytest.approx(naive_crps_mixture(w, m, v, y), rel=1e-3)


def test_closed_form_crps_is_exact_and_the_quadrature_takes_large_mixtures(monkeypatch):
    """Up to CRPS_CLOSED_FORM_MAX live components the mixture's CRPS is the closed form to
    rounding, narrow components far apart included (where the quadrature errs most); above
    it, the quadrature (within its tolerance of the same number)."""
    import basics.metrics as metrics

    rng = np.random.default_rng(11)
    k = 12
    w = rng.dirichlet(np.ones(k), size=40)
    m = rng.normal(0, 30, size=(40, k))
    v = rng.uniform(1e-4, 2.0, size=(40, k)) ** 2
    y = rng.normal(0, 30, size=40)
    mix = GaussianMixture(w, m, v)
    want = np.array([naive_crps_mixture(w[i], m[i], v[i], y[i]) for i in range(40)])
    np.testing.assert_allclose(crps_rows(mix, y), want, rtol=1e-12, atol=0)
    monkeypatch.setattr(metrics, "CRPS_CLOSED_FORM_MAX", k - 1)
    quadrature = crps_rows(mix, y)
    assert np.median(np.abs(quadrature / want - 1)) < 1e-3
    assert not np.array_equal(quadrature, want)


def test_crps_of_recalibrated_distribution_matches_numeric_integral():
    dist = RecalibratedDistribution(_mixture(), _skewed_map())
    y = np.array([-3.0, 0.5, 4.0])
    got = crps_rows(dist, y)
    for i in range(3):
        row = dist[i]
        want = naive_crps_numeric(lambda t, r=row: r.cdf(np.broadcast_to(t, (1, t.size)))[0],
                                  y[i], -40, 40)
        assert got[i] == pytest.approx(want, rel=1e-3)
    both = crps_many(dist.base, y, [None, dist.pit_map])
    # one pass for both: the nodes depend on the mixture only
    np.testing.assert_array_equal(both[:, 1], got)
    np.testing.assert_array_equal(both[:, 0], crps_rows(dist.base, y))


def test_aci_kernel_matches_oracle():
    u = np.random.default_rng(8).beta(2, 2, 500)
    start = PITMap.identity(10)
    levels = start.levels.copy()
    aci_kernel(u, start.nominal, levels, 0.02)
    np.testing.assert_allclose(levels, naive_aci(u, start.nominal, start.levels, 0.02),
                               rtol=0, atol=1e-12)
    np.testing.assert_array_equal(start.updated(u, 0.02).levels, levels)


def test_aci_holds_coverage_under_drift():
    """The PIT distribution changes abruptly halfway: a map learnt on the first half misses
    the target on the second; the adaptive map covers within the long-run bound."""
    rng = np.random.default_rng(9)
    first = rng.beta(3.0, 3.0, 5_000)  # the model is too wide at first
    second = special.ndtr(1.8 * special.ndtri(rng.random(20_000)))  # then too narrow
    static = PITMap.fit(first)
    step = 0.01
    adaptive = static
    inside_static, inside_adaptive = [], []
    for u in second:
        lo, hi = static.inverse([0.1, 0.9])
        inside_static.append(lo <= u <= hi)
        lo, hi = adaptive.inverse([0.1, 0.9])
        inside_adaptive.append(lo <= u <= hi)
        adaptive = adaptive.updated([u], step)
    assert abs(np.mean(inside_static) - 0.8) > 0.3
    # Gibbs & Candes (2021), Prop. 4.1, for each of the two knots
    assert abs(np.mean(inside_adaptive) - 0.8) < 2 * (1 + 2 * step) / (step * second.size) + 0.01
    assert np.all((adaptive.levels > -step - 1e-12) & (adaptive.levels < 1 + step + 1e-12))


def test_state_round_trip_and_bad_states():
    pit_map = _skewed_map()
    assert PITMap.from_state(pit_map.to_state()) == pit_map
    good = pit_map.to_state()
    bad_states = [
        {**good, "nominal": good["nominal"][::-1].copy()},
        {**good, "levels": np.where(np.arange(good["levels"].size) == 3, np.nan,
                                    good["levels"])},
        {**good, "levels": good["levels"].astype(np.float32)},
        {**good, "levels": np.concatenate([good["levels"][:-1], [0.5]])},
        {"nominal": good["nominal"]},
        [1, 2],
    ]
    for state in bad_states:
        with pytest.raises(ValueError, match="recalibration"):
            PITMap.from_state(state)


def test_crps_agrees_with_scoringrules():
    """An independent, maintained implementation (scoringrules' closed form for Gaussian
    mixtures), on random mixtures of 1 to 6 components."""
    import scoringrules as sr

    rng = np.random.default_rng(11)
    w = rng.random((200, 6)) * (rng.random((200, 6)) < 0.7)
    w[:, 0] += 0.05
    m = rng.normal(size=(200, 6)) * 3
    s = np.exp(rng.normal(size=(200, 6)))
    y = rng.normal(size=200) * 4
    ours = crps_rows(GaussianMixture(w, m, s ** 2), y)
    theirs = sr.crps_mixnorm(y, m, s, w / w.sum(axis=1, keepdims=True))
    # widely spread scales (a component 100 times narrower than another) are the hard case
    # of the quadrature, which halves its spans where they need it
    np.testing.assert_allclose(ours, theirs, rtol=5e-3)
