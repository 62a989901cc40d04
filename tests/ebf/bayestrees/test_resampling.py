"""Resampling kernels (ebf.bayestrees._resampling) against the NumPy oracle and statistically."""

import numpy as np
import pytest
from scipy import stats

from ebf.bayestrees._resampling import (
    MULTINOMIAL,
    SYSTEMATIC,
    ancestors,
    effective_sample_size,
    normalize,
    resample,
    resampling_code,
)
from tests.naive import naive_resample


def test_normalize_matches_logsumexp():
    log_w = np.array([-1000.0, -1001.0, -np.inf, -999.5])
    w = np.empty(4)
    total = normalize(log_w, w)
    ref = np.logaddexp.reduce(log_w)
    assert total == pytest.approx(ref, rel=1e-14)
    np.testing.assert_allclose(w, np.exp(log_w - ref), rtol=1e-13)
    assert w[2] == 0.0


def test_normalize_all_impossible_is_uniform():
    w = np.empty(3)
    assert normalize(np.full(3, -np.inf), w) == -np.inf
    np.testing.assert_array_equal(w, 1 / 3)


def test_ess_bounds():
    assert effective_sample_size(np.full(8, 1 / 8)) == pytest.approx(8)
    assert effective_sample_size(np.eye(8)[3]) == pytest.approx(1)


@pytest.mark.parametrize("seed", range(20))
def test_resample_matches_oracle(seed):
    rng = np.random.default_rng(seed)
    C = int(rng.integers(1, 30))
    w = rng.exponential(size=C) * (rng.random(C) < 0.7)
    if w.sum() == 0:
        w[-1] = 1.0
    w /= w.sum()
    u = rng.random(C)
    got = resample(w, u, MULTINOMIAL, np.empty(C, np.int64))
    np.testing.assert_array_equal(got, naive_resample(w, u, "multinomial"))
    got = resample(w, u[:1], SYSTEMATIC, np.empty(C, np.int64))
    np.testing.assert_array_equal(got, naive_resample(w, np.array([u[0], C]), "systematic"))
    assert np.all(w[got] > 0)


def test_rounding_never_picks_zero_weight_tail():
    w = np.array([0.3, 0.7 - 1e-17, 0.0, 0.0])  # cumulative sum ends a hair below 1
    out = resample(w, np.array([1 - 1e-18, 0.99999999999]), MULTINOMIAL, np.empty(2, np.int64))
    assert set(out) <= {0, 1}


def test_multinomial_counts_follow_weights():
    """Pooled ancestor counts over many draws: chi-square against C * w (fixed seed)."""
    rng = np.random.default_rng(7)
    w = np.array([0.05, 0.4, 0.0, 0.25, 0.3])
    counts = np.zeros(5)
    for _ in range(400):
        counts += np.bincount(ancestors(w, rng, MULTINOMIAL, 10), minlength=5)
    keep = w > 0
    assert counts[~keep].sum() == 0
    assert stats.chisquare(counts[keep], counts.sum() * w[keep]).pvalue > 0.01


def test_systematic_counts_are_floor_or_ceil():
    """Systematic resampling gives particle c either floor(C w_c) or ceil(C w_c) copies."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        C = int(rng.integers(2, 40))
        w = rng.dirichlet(np.ones(C))
        k = np.bincount(ancestors(w, rng, SYSTEMATIC, C), minlength=C)
        assert np.all(k >= np.floor(C * w) - 1e-9) and np.all(k <= np.ceil(C * w) + 1e-9)
        assert k.sum() == C


def test_resampling_code_names_choices():
    assert resampling_code("systematic") == SYSTEMATIC
    with pytest.raises(ValueError, match="multinomial"):
        resampling_code("stratified")
