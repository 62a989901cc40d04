"""The fused scoring pass (basics.score_pass) against the separate kernels it replaces:
summarize, GaussianMixture.cdf / logpdf and crps_many, for every learner's mixtures."""

from __future__ import annotations

import numpy as np
import pytest

from basics.metrics import crps_many
from basics.mixture import GaussianMixture, summarize
from basics.pit import PITMap
from basics.score_pass import score_mixture
from ebf import (
    BayesianForestRegressor,
    EmpiricalBayesianForestRegressor,
    SubsampleForestRegressor,
)
from mondrian import MondrianForestRegressor
from pipelines.report.metrics import DEFAULT_LEVELS
from pipelines.scoring.job import EvaluationJob

LEVELS = np.array([0.05, 0.25, 0.5, 0.75, 0.95])


def _data(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, 3))
    y = np.sin(6 * X[:, 0]) + X[:, 1] + 0.3 * rng.standard_normal(n)
    return X, y


def _learners():
    return {
        "bayesian": EmpiricalBayesianForestRegressor(n_estimators=4, trunk_max_leaves=3,
                                                     random_state=0),
        "random": EmpiricalBayesianForestRegressor(n_estimators=4, trunk_max_leaves=3,
                                                   branch="random", random_state=0),
        "mondrian": EmpiricalBayesianForestRegressor(n_estimators=4, trunk_max_leaves=3,
                                                     branch="mondrian", random_state=0),
        "mondrian forest": MondrianForestRegressor(n_estimators=4, random_state=0),
        "empirical leaves": BayesianForestRegressor(n_estimators=4, leaf_model="empirical",
                                                    random_state=0),
        # 5 x 14 = 70 components a row: more than the closed form takes (the quadrature)
        "ssf pooled": SubsampleForestRegressor(n_estimators=14, n_subsamples=5,
                                               random_state=0),
    }


def _check(mixture: GaussianMixture, y: np.ndarray, maps: list) -> None:
    fused = score_mixture(mixture, y, LEVELS, maps)
    mean, std, q = summarize(mixture, LEVELS)
    np.testing.assert_array_equal(fused.mean, mean)
    np.testing.assert_array_equal(fused.std, std)
    np.testing.assert_array_equal(fused.quantiles, q)
    known = ~np.isnan(y)
    scored = mixture[known]
    np.testing.assert_array_equal(fused.crps[known], crps_many(scored, y[known], maps))
    # F(y) and log p(y) sum in another order than numpy's: equal to rounding
    np.testing.assert_allclose(fused.cdf[known], scored.cdf(y[known]), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(fused.logpdf[known], scored.logpdf(y[known]), rtol=1e-12)
    assert np.isnan(fused.cdf[~known]).all() and np.isnan(fused.crps[~known]).all()


@pytest.mark.parametrize("name", list(_learners()))
def test_fused_pass_equals_the_separate_kernels(name):
    X, y = _data()
    model = _learners()[name].fit(X[:300], y[:300])
    model.recalibrate(X[300:350], y[300:350])
    mixture = model.predict_distribution(X[350:], recalibrated=False)
    if name == "ssf pooled":
        assert mixture.n_components > 64
    target = y[350:].copy()
    target[::7] = np.nan
    _check(mixture, target, [model.recalibration_, None])


def test_fused_pass_on_hard_mixtures():
    """Narrow components far apart, padding, one-component rows, targets deep in a tail."""
    rng = np.random.default_rng(3)
    for k in (1, 3, 12, 90):
        n = 200
        w = rng.random((n, k))
        w[:, k // 2:] *= rng.random((n, k - k // 2)) > 0.4  # padding
        w[:, 0] += 0.05
        m = rng.normal(size=(n, k)) * rng.choice([0.01, 1.0, 100.0], size=(n, 1))
        v = rng.random((n, k)) ** 3 + 1e-6
        y = rng.normal(size=n) * rng.choice([0.1, 3.0, 1e3], size=n)
        y[::11] = np.nan
        pit_map = PITMap.fit(rng.beta(2.0, 3.0, 5_000))
        _check(GaussianMixture(w, m, v), y, [pit_map, None, pit_map])


def test_infinite_target_is_refused():
    gm = GaussianMixture.from_moments([0.0], [1.0])
    with pytest.raises(ValueError, match="not finite"):
        score_mixture(gm, np.array([np.inf]), LEVELS, [None])


def test_job_rows_are_the_scores_of_the_separate_kernels():
    """The evaluation job's per-row columns from the fused pass: the CRPS, PIT and log
    density of the separate kernels under both maps, the quantiles of ``summarize``."""
    X, y = _data(500, seed=1)
    model = SubsampleForestRegressor(n_estimators=14, n_subsamples=5, random_state=0)
    model.fit(X[:300], y[:300]).recalibrate(X[300:380], y[300:380])
    R = model.recalibration_
    mixture = model.predict_distribution(X[380:], recalibrated=False)
    target = y[380:].astype(object)
    target[::9] = None
    job = EvaluationJob(np.asarray(DEFAULT_LEVELS), None, R, np.array([0.05, 0.5, 0.95]))
    block = job.rows(mixture, target)
    lay = job.row_layout
    mean, std, q = summarize(mixture, R.inverse(np.array([0.05, 0.5, 0.95])))
    np.testing.assert_array_equal(block[:, 0], mean)
    np.testing.assert_array_equal(block[:, 1], std)
    np.testing.assert_array_equal(block[:, 2:5], q)
    known = block[:, lay.index("known")] == 1.0
    yk = y[380:][known]
    scored = mixture[known]
    crps = crps_many(scored, yk, [R, None])
    np.testing.assert_array_equal(block[known, lay.index("crps@0")], crps[:, 0])
    np.testing.assert_array_equal(block[known, lay.index("crps@1")], crps[:, 1])
    f = np.clip(scored.cdf(yk), 0.0, 1.0)
    np.testing.assert_allclose(block[known, lay.index("pit@1")], f, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(block[known, lay.index("pit@0")], R(f), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(block[known, lay.index("nlpd@1")], -scored.logpdf(yk),
                               rtol=1e-12)
    assert np.isnan(block[~known, lay.index("crps@0")]).all()
