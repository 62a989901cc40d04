"""Tests of the probabilistic regression scores (RMSE, NLPD, coverage, calibration table)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from basics.metrics import (
    ONE_SIDED_LEVELS,
    as_mixture,
    calibration_table,
    coverage,
    gaussian_nlpd,
    interval_score,
    interval_score_rows,
    nlpd,
    one_sided_coverage,
    one_sided_table,
    pit_distance,
    pit_distance_binned,
    quantile_coverage,
    rmse,
)
from basics.mixture import GaussianMixture
from tests.naive import (
    naive_interval_score,
    naive_mixture_logpdf,
    naive_one_sided,
    naive_pit_distance,
)


@pytest.fixture
def mixture():
    rng = np.random.default_rng(0)
    n, k = 4000, 4
    w = rng.gamma(1.0, size=(n, k))
    w[:, 3] = 0.0  # padding column
    m = rng.normal(0, 2, size=(n, k))
    v = rng.uniform(0.1, 1.5, size=(n, k)) ** 2
    return GaussianMixture(w, m, v)


def test_rmse():
    y = np.array([1.0, 2.0, 3.0, 4.0])
    mean = np.array([1.5, 2.0, 2.0, 6.0])
    assert rmse(y, mean) == pytest.approx(np.sqrt((0.25 + 0 + 1 + 4) / 4), rel=1e-15)
    assert rmse(y, y) == 0.0
    with pytest.raises(ValueError, match="values but the prediction has"):
        rmse(y, mean[:3])
    with pytest.raises(ValueError, match="1-D"):
        rmse(y[:, None], mean)
    with pytest.raises(ValueError, match="empty"):
        rmse([], [])


def test_gaussian_nlpd_matches_scipy():
    rng = np.random.default_rng(1)
    y, mean = rng.normal(size=50), rng.normal(size=50)
    std = rng.uniform(0.2, 3.0, size=50)
    expected = -np.mean(stats.norm.logpdf(y, mean, std))
    assert gaussian_nlpd(y, mean, std) == pytest.approx(expected, rel=1e-13)
    assert nlpd(y, (mean, std)) == pytest.approx(expected, rel=1e-13)
    assert nlpd(y, GaussianMixture.from_moments(mean, std**2)) == pytest.approx(expected, rel=1e-13)
    with pytest.raises(ValueError, match="not > 0"):
        gaussian_nlpd(y, mean, np.r_[std[:-1], 0.0])
    with pytest.raises(ValueError, match="shape"):
        gaussian_nlpd(y, mean, std[:10])


def test_nlpd_of_mixture_matches_oracle(mixture):
    sub = mixture[:200]
    y = sub.sample(1, random_state=2)[:, 0]
    expected = -np.mean(
        [naive_mixture_logpdf(sub.weights[i], sub.means[i], sub.variances[i], y[i])
         for i in range(sub.n_rows)]
    )
    assert nlpd(y, sub) == pytest.approx(expected, rel=1e-12)


def test_nlpd_prefers_the_true_distribution(mixture):
    # The expected log score is proper: the true mixture beats its moment-matched Gaussian.
    y = mixture.sample(1, random_state=3)[:, 0]
    assert nlpd(y, mixture) < nlpd(y, (mixture.mean, mixture.std)) - 0.01


def test_coverage_on_draws_from_the_prediction(mixture):
    y = mixture.sample(1, random_state=4)[:, 0]
    levels = np.array([0.1, 0.5, 0.9, 0.99])
    cov = coverage(y, mixture, levels)
    assert cov.shape == (4,)
    se = np.sqrt(levels * (1 - levels) / y.size)
    np.testing.assert_array_less(np.abs(cov - levels), 4.5 * se)
    assert isinstance(coverage(y, mixture, 0.9), float)
    assert coverage(y, mixture, 0.9) == cov[2]


def test_coverage_with_mean_std_pair_uses_normal_intervals():
    rng = np.random.default_rng(5)
    mean, std = rng.normal(size=300), rng.uniform(0.5, 2, size=300)
    y = rng.normal(mean, 1.3 * std)
    lo, hi = stats.norm.interval(0.8, mean, std)
    assert coverage(y, (mean, std), 0.8) == np.mean((y >= lo) & (y <= hi))


def test_calibration_table_calibrated(mixture):
    y = mixture.sample(1, random_state=6)[:, 0]
    table = calibration_table(y, mixture)
    assert isinstance(table, pd.DataFrame)
    assert list(table.columns) == ["level", "observed", "observed_minus_nominal"]
    np.testing.assert_allclose(table["level"], np.arange(1, 10) / 10)
    np.testing.assert_allclose(table["observed_minus_nominal"], table["observed"] - table["level"])
    se = np.sqrt(table["level"] * (1 - table["level"]) / y.size)
    assert np.all(np.abs(table["observed_minus_nominal"]) < 4.5 * se)


def test_calibration_table_detects_overconfidence():
    rng = np.random.default_rng(7)
    mean, std = rng.normal(size=3000), rng.uniform(0.5, 2, size=3000)
    y = rng.normal(mean, std)
    table = calibration_table(y, (mean, 0.5 * std), levels=[0.2, 0.5, 0.8])
    # with half the true std, the z interval holds P(|N(0,1)| < 0.5 Phi^-1((1+z)/2)) only
    true = 2 * stats.norm.cdf(0.5 * stats.norm.ppf((1 + table["level"]) / 2)) - 1
    assert np.all(table["observed_minus_nominal"] < -0.08)
    np.testing.assert_allclose(table["observed"], true, atol=4.5 * np.sqrt(0.25 / 3000))


def test_argument_errors(mixture):
    y = np.zeros(mixture.n_rows)
    with pytest.raises(ValueError, match=r"\(0, 1\)"):
        coverage(y, mixture, [0.5, 1.0])
    with pytest.raises(ValueError, match=r"\(0, 1\)"):
        calibration_table(y, mixture, levels=[])
    with pytest.raises(ValueError, match="rows"):
        nlpd(y[:-1], mixture)
    with pytest.raises(TypeError, match="GaussianMixture, a RecalibratedDistribution or a"):
        nlpd(y, [y, y])
    with pytest.raises(TypeError):
        as_mixture((y, y, y))
    with pytest.raises(ValueError, match="variances"):
        coverage(y[:3], (y[:3], np.array([1.0, 0.0, 1.0])))


def test_class_rows_agree_with_scikit_learn():
    from sklearn.metrics import accuracy_score, log_loss

    from basics.metrics import class_rows

    rng = np.random.default_rng(3)
    proba = rng.dirichlet(np.ones(3), size=500)
    proba[:5] = [1.0, 0.0, 0.0]  # confident rows: the clipping matters
    classes = np.array(["a", "b", "c"])
    y = classes[rng.integers(0, 3, 500)]
    correct, loss, unseen = class_rows(proba, classes, y)
    assert correct.mean() == pytest.approx(accuracy_score(y, classes[proba.argmax(1)]))
    assert loss.mean() == pytest.approx(log_loss(y, proba, labels=classes), rel=1e-12)
    assert not unseen.any()
    # a label the classifier never saw: wrong, probability eps
    correct, loss, unseen = class_rows(proba[:2], classes, ["a", "zzz"])
    assert unseen.tolist() == [False, True] and not correct[1]
    assert loss[1] == pytest.approx(-np.log(np.finfo(float).eps))


# ------------------------------------------------ one-sided coverage, PIT distance, interval score


def test_one_sided_coverage_matches_the_oracle(mixture):
    """One-sided coverage from the CDF equals counting targets below each quantile."""
    rng = np.random.default_rng(1)
    sub = mixture[:300]
    y = sub.sample(1, random_state=2)[:, 0] + rng.normal(0.0, 0.5, sub.n_rows)
    levels = np.array(ONE_SIDED_LEVELS)
    q = sub.quantile(levels)
    expected = naive_one_sided(y, lambda i, j: q[i, list(levels).index(j)], levels)
    np.testing.assert_allclose(one_sided_coverage(y, sub, levels), expected, atol=1e-12)
    np.testing.assert_allclose(quantile_coverage(y, q), expected, atol=1e-12)
    table = one_sided_table(y, sub)
    np.testing.assert_allclose(table.observed_minus_nominal, expected - levels, atol=1e-12)
    assert one_sided_coverage(y, sub, 0.5) == pytest.approx(expected[9])


def test_one_sided_coverage_sees_a_shift_that_central_coverage_hides():
    """A distribution too low: every central interval near nominal, the lower tail empty."""
    rng = np.random.default_rng(3)
    n = 20000
    y = rng.standard_normal(n) + 0.3
    dist = (np.zeros(n), np.full(n, 1.0))
    assert abs(coverage(y, dist, 0.9) - 0.9) < 0.02
    below_5 = one_sided_coverage(y, dist, 0.05)
    assert below_5 == pytest.approx(stats.norm.cdf(stats.norm.ppf(0.05) - 0.3), abs=0.005)
    assert below_5 < 0.03


def test_pit_distance_matches_the_oracle_and_kstest():
    rng = np.random.default_rng(4)
    for n in (1, 2, 17, 400):
        u = rng.beta(1.3, 0.8, n)
        d = pit_distance(u)
        assert d == pytest.approx(naive_pit_distance(list(u)), abs=1e-12)
        assert d == pytest.approx(stats.kstest(u, "uniform").statistic, abs=1e-12)
    with pytest.raises(ValueError, match="lie in"):
        pit_distance([0.2, 1.5])


def test_pit_distance_binned_is_within_one_bin():
    """Statistical: on 5,000 beta PIT values, the histogram's distance is within a bin width of
    the exact one; a calibrated model's distance is below the KS test's 1% critical value."""
    rng = np.random.default_rng(5)
    u = rng.beta(1.2, 1.0, 5000)
    counts = np.histogram(u, bins=1000, range=(0.0, 1.0))[0]
    assert abs(pit_distance_binned(counts) - pit_distance(u)) <= 1e-3 + 1e-12
    calibrated = rng.uniform(size=5000)
    assert pit_distance(calibrated) < stats.kstwo.ppf(0.99, 5000)
    with pytest.raises(ValueError, match="positive total"):
        pit_distance_binned([0, 0])


def test_interval_score_matches_scoringrules_and_the_oracle(mixture):
    scoringrules = pytest.importorskip("scoringrules")
    rng = np.random.default_rng(6)
    sub = mixture[:500]
    y = rng.normal(0.0, 3.0, sub.n_rows)
    lo, hi = sub.interval(np.array([0.8]))
    rows = interval_score_rows(y, lo[:, 0], hi[:, 0], 0.8)
    np.testing.assert_allclose(rows, naive_interval_score(y, lo[:, 0], hi[:, 0], 0.8),
                               rtol=1e-12)
    np.testing.assert_allclose(
        rows, scoringrules.interval_score(y, lo[:, 0], hi[:, 0], 0.2, backend="numpy"),
        rtol=1e-10)
    assert interval_score(y, sub, 0.8) == pytest.approx(rows.mean(), rel=1e-12)


def test_interval_score_of_a_gaussian_closed_form():
    """E[IS] of the central interval of the true N(0, 1): width plus the expected excess,
    (2/a) * 2 * (phi(z) - z * a / 2), Gneiting & Raftery (2007), Sec. 6.2."""
    rng = np.random.default_rng(7)
    n, level = 200_000, 0.9
    y = rng.standard_normal(n)
    z, a = stats.norm.ppf(0.95), 0.1
    expected = 2 * z + (2 / a) * 2 * (stats.norm.pdf(z) - z * a / 2)
    got = interval_score(y, (np.zeros(n), np.ones(n)), level)
    assert got == pytest.approx(expected, rel=0.01)
    with pytest.raises(ValueError, match="values but the prediction has"):
        interval_score_rows(y[:3], np.zeros(2), np.zeros(2))
