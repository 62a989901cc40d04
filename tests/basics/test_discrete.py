"""The ranked probability score of integer targets (basics.discrete) against plain-loop
oracles, and the rule that decides when a target is integer-valued."""

from __future__ import annotations

import numpy as np
import pytest

from basics.discrete import (
    INTEGER_MAX_DISTINCT,
    RPS_MAX_OUTCOMES,
    integer_values,
    is_integer_target,
    merge_integer_values,
    mixture_rps,
    rps_many,
)
from basics.metrics import crps_many
from basics.mixture import GaussianMixture
from basics.pit import PITMap, RecalibratedDistribution
from tests.naive import naive_discrete_crps, naive_rps


def _mixtures(seed: int, n: int = 40, k: int = 4):
    rng = np.random.default_rng(seed)
    w = rng.dirichlet(np.ones(k), size=n)
    w[: n // 4, -1] = 0.0  # some dead components
    m = rng.normal(6.0, 2.0, size=(n, k))
    sd = rng.gamma(1.5, size=(n, k)) * np.where(rng.random((n, k)) < 0.3, 0.05, 1.0)
    y = np.round(m[:, 0] + rng.normal(size=n) * 3.0)
    return GaussianMixture(w, m, sd**2), y


def test_rps_is_the_plain_sum_over_integers():
    gm, y = _mixtures(0)
    got = mixture_rps(gm, y)[:, 0]
    want = [naive_rps(gm.weights[i], gm.means[i], gm.variances[i], y[i]) for i in range(y.size)]
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)


def test_rps_is_the_crps_of_the_discretised_step_distribution():
    """The CRPS of the discrete distribution P(k) = F(k + 1/2) - F(k - 1/2), computed by its
    double sum (no CDF at the half-integers summed), is the RPS."""
    gm, y = _mixtures(1, n=12)
    got = mixture_rps(gm, y)[:, 0]
    for i in range(y.size):
        k = np.arange(-60, 80)
        cdf = gm[i:i + 1].cdf(np.concatenate([k - 0.5, [k[-1] + 0.5]])[None, :])[0]
        probs = np.diff(cdf)
        assert 1.0 - probs.sum() < 1e-12
        assert got[i] == pytest.approx(naive_discrete_crps(k, probs, y[i]), rel=1e-9,
                                       abs=1e-10)


def test_rps_of_a_wide_predictive_is_its_crps():
    """On a predictive wide against the unit step the RPS is the midpoint rule of the CRPS:
    its error is about ``f(y) / 12``, the jump of the integrand's slope at ``y`` over 24."""
    rng = np.random.default_rng(2)
    mean, sd = rng.normal(0, 50, size=30), rng.uniform(20, 60, size=30)
    gm = GaussianMixture.from_moments(mean, sd**2)
    y = np.round(mean + sd * rng.normal(size=30))
    gap = mixture_rps(gm, y)[:, 0] - crps_many(gm, y, [None])[:, 0]
    assert np.all(np.abs(gap) <= 1.2 * gm.pdf(y) / 12 + 1e-6)


def test_rps_under_maps_and_of_a_recalibrated_distribution():
    gm, y = _mixtures(3)
    u = np.random.default_rng(3).beta(0.7, 0.7, size=2000)
    pit_map = PITMap.fit(u)
    both = mixture_rps(gm, y, [pit_map, None])
    np.testing.assert_allclose(both[:, 1], mixture_rps(gm, y)[:, 0])
    recal = RecalibratedDistribution(gm, pit_map)
    np.testing.assert_allclose(both[:, 0], mixture_rps(recal, y)[:, 0])
    # the generic form with the recalibrated CDF itself agrees
    lower, upper = recal.quantile(np.array([1e-9, 1 - 1e-9])).T
    direct = rps_many(lambda rows, t: recal[rows].cdf(t), lower, upper, y)[:, 0]
    np.testing.assert_allclose(both[:, 0], direct, rtol=1e-9, atol=1e-10)
    with pytest.raises(ValueError, match="its own map"):
        mixture_rps(recal, y, [pit_map])


def test_a_point_mass_scores_the_distance_in_integers():
    gm = GaussianMixture.from_moments(np.full(3, 4.0), np.full(3, 1e-8))
    np.testing.assert_allclose(mixture_rps(gm, np.array([4.0, 7.0, 1.0]))[:, 0], [0, 3, 3],
                               atol=1e-12)


def test_too_wide_rows_fall_back_or_fail_clearly():
    gm = GaussianMixture.from_moments(np.array([0.0, 0.0]), np.array([1.0, 1e10]))
    y = np.array([0.0, 3.0])
    with pytest.raises(ValueError, match=f"more than {RPS_MAX_OUTCOMES:,} integer outcomes"):
        mixture_rps(gm, y)
    crps = crps_many(gm, y, [None])
    got = mixture_rps(gm, y, fallback=lambda rows: crps[rows])
    assert got[1, 0] == crps[1, 0]
    assert got[0, 0] == pytest.approx(naive_rps([1.0], [0.0], [1.0], 0.0), rel=1e-9)
    with pytest.raises(ValueError, match="whole-number targets"):
        mixture_rps(gm, np.array([0.5, 1.0]))


def test_the_integer_target_rule():
    assert is_integer_target(np.array([3.0, 4.0, np.nan, 9.0]))
    assert is_integer_target(np.array([3, 4, 9]))
    assert not is_integer_target(np.array([3.0, 4.5]))
    assert not is_integer_target(np.array([3.0, np.inf]))
    assert not is_integer_target(np.array([np.nan]))
    assert not is_integer_target(np.array([], dtype=float))
    many = np.arange(INTEGER_MAX_DISTINCT + 1, dtype=float)
    assert is_integer_target(many[:-1]) and not is_integer_target(many)
    # partitions decide as the whole: their union of values
    halves = [integer_values(many[:60]), integer_values(many[60:])]
    assert all(h is not None for h in halves) and merge_integer_values(halves) is None
    np.testing.assert_array_equal(
        merge_integer_values([integer_values([1.0, 2.0]), integer_values([]),
                              integer_values([2.0, 5.0])]), [1.0, 2.0, 5.0])
    assert merge_integer_values([integer_values([1.0]), integer_values([0.5])]) is None
