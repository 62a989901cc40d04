"""The leaf prior strength learnt from held-out rows (``leaf_prior_rows="auto"``,
:mod:`basics.prior_choice`)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from basics.calibration import HeldOutCounts
from basics.leaf_noise import LEAF_PRIOR_CANDIDATES, LEAF_PRIOR_ROWS
from basics.mixture import GaussianMixture
from basics.pit import pit_counts
from basics.prior_choice import (
    CandidateScores,
    best_candidate,
    candidate_scores,
    settle,
)
from ebf import EmpiricalBayesianForestRegressor
from ebf._forests import BayesianForestRegressor
from ebf.artifact import load, save
from tests.naive import naive_held_out_log_scores

SDS = np.array([0.1, 0.3, 1.0, 3.0, 10.0])


def _regions(n, rng):
    """Noise sd 0.1 to 10 across five bands of the first feature; a smooth mean."""
    X = rng.random((n, 2))
    region = np.minimum((X[:, 0] * 5).astype(int), 4)
    return X, 5.0 * np.sin(3.0 * X[:, 1]) + SDS[region] * rng.normal(size=n), region


def test_learnt_prior_recovers_the_noise_of_every_region():
    """Heteroscedastic data, noise sd from 0.1 to 10: the predictive sd (half the central
    68% interval) of every region is within 10% of the region's actual error, where the
    fixed default strength widens the quietest region by more than 10%."""
    rng = np.random.default_rng(0)
    X, y, _ = _regions(20_000, rng)
    Xt, yt, region = _regions(5_000, rng)

    def ratios(model):
        mean = model.predict(Xt)
        q = model.predict_quantiles(Xt, q=(0.158655, 0.841345))
        half = (q[:, 1] - q[:, 0]) / 2.0
        return np.array([np.median(half[region == k])
                         / np.sqrt(np.mean((yt - mean)[region == k] ** 2)) for k in range(5)])

    learnt = BayesianForestRegressor(n_estimators=50, random_state=0).fit(X, y)
    assert learnt.leaf_prior_rows_ in LEAF_PRIOR_CANDIDATES
    assert learnt.leaf_prior_rows_ != LEAF_PRIOR_ROWS
    np.testing.assert_array_less(np.abs(ratios(learnt) - 1.0), 0.10)
    fixed = BayesianForestRegressor(n_estimators=50, random_state=0,
                                    leaf_prior_rows=LEAF_PRIOR_ROWS).fit(X, y)
    assert np.max(np.abs(ratios(fixed) - 1.0)) > 0.10


def test_learnt_model_is_the_model_of_the_chosen_strength():
    rng = np.random.default_rng(1)
    X, y, _ = _regions(3_000, rng)
    learnt = BayesianForestRegressor(n_estimators=20, random_state=3).fit(X, y)
    same = BayesianForestRegressor(n_estimators=20, random_state=3,
                                   leaf_prior_rows=learnt.leaf_prior_rows_).fit(X, y)
    Xt = rng.random((50, 2))
    np.testing.assert_array_equal(learnt.predict_quantiles(Xt), same.predict_quantiles(Xt))
    assert learnt.calibration_ == same.calibration_
    assert learnt._leaf_stats is None  # the raw leaves stay in the calibration groups only
    # without calibration groups "auto" is the fixed default
    plain = BayesianForestRegressor(n_estimators=5, random_state=3, calibrate="none").fit(X, y)
    assert plain.leaf_prior_rows_ == LEAF_PRIOR_ROWS and plain._leaf_stats is None


def test_ebf_branches_learn_their_own_prior():
    rng = np.random.default_rng(2)
    X, y, _ = _regions(6_000, rng)
    ebf = EmpiricalBayesianForestRegressor(n_estimators=10, random_state=0).fit(X, y)
    chosen = [b.leaf_prior_rows_ for b in ebf.branches_ if hasattr(b, "leaf_prior_rows_")]
    assert chosen and all(c in LEAF_PRIOR_CANDIDATES for c in chosen)
    assert all(getattr(b, "_leaf_stats", None) is None for b in ebf.branches_)


@pytest.mark.parametrize("discrete", [False, True])
def test_candidate_scores_match_the_oracle(discrete):
    rng = np.random.default_rng(3)
    n, k = 40, 4
    y = np.round(rng.normal(size=n) * 3) if discrete else rng.normal(size=n) * 3
    mixtures = []
    for scale in (0.01, 1.0, 3.0):
        w = rng.random((n, k))
        m = rng.normal(size=(n, k)) * 2
        v = scale * (0.5 + rng.random((n, k)))
        mixtures.append(GaussianMixture(w, m, v))
    scores = candidate_scores(mixtures, y, discrete)
    for c, mix in enumerate(mixtures):
        total, n_low = naive_held_out_log_scores(mix.weights, mix.means, mix.variances, y,
                                                 discrete)
        if np.isfinite(total):
            assert scores.log_score[c] == pytest.approx(total, rel=1e-9)
        else:  # a row with no mass at all: a finite sum, far below any other candidate's
            assert scores.log_score[c] < -1e300
        assert scores.n_low[c] == n_low
    assert scores.n_low[0] > 0  # the narrow candidate misses some rows by far
    assert best_candidate(scores, 5, 50) != 0
    assert scores.whole.sum(axis=1).tolist() == [n] * len(mixtures)


def test_best_candidate_is_the_highest_recalibrated_log_score():
    bins = HeldOutCounts.empty().whole.size
    flat = np.full((2, bins), 10, np.int64)
    discrete = CandidateScores(flat, 2 * flat, np.array([-10.0, -500.0]), np.array([3, 0]),
                               True)
    assert best_candidate(discrete, 5, 50) == 0  # no map term for a discrete target
    # continuous: candidate 0's own log score is lower, but its PIT values crowd the middle
    # (a predictive too wide), which its map corrects: its recalibrated score is higher
    rng = np.random.default_rng(6)
    wide = pit_counts(rng.beta(5.0, 5.0, size=1_000))
    right = pit_counts(rng.random(1_000))
    scores = CandidateScores(np.stack([wide, right]), np.stack([2 * wide, 2 * right]),
                             np.array([-510.0, -500.0]), np.array([0, 0]), False)
    assert best_candidate(scores, 5, 50) == 0
    same = np.stack([right, right])
    assert best_candidate(scores._replace(whole=same, halves=2 * same), 5, 50) == 1


def test_settle_sums_folds_and_falls_back_when_a_group_cannot_score():
    bins = HeldOutCounts.empty().whole.size
    c = len(LEAF_PRIOR_CANDIDATES)
    one = CandidateScores(np.ones((c, bins), np.int64), np.ones((c, bins), np.int64),
                          np.arange(c, dtype=float), np.zeros(c, np.int64), True)
    counts, params = settle([one, one], 5, 50)
    assert params == {"leaf_prior_rows": LEAF_PRIOR_CANDIDATES[-1]}
    assert counts.n_rows == 2 * bins
    plain = HeldOutCounts(np.ones(bins, np.int64), np.ones(bins, np.int64))
    counts, params = settle([one, plain], 5, 50)
    assert params == {} and counts.n_rows == 2 * bins
    counts, params = settle([plain, plain], 5, 50)
    assert params == {} and np.array_equal(counts.whole, 2 * plain.whole)


def test_learnt_strength_round_trips_and_a_forged_one_is_refused(tmp_path):
    rng = np.random.default_rng(4)
    X, y, _ = _regions(800, rng)
    model = BayesianForestRegressor(n_estimators=10, random_state=0).fit(X, y)
    back = load(save(model, tmp_path / "m"))
    assert back.leaf_prior_rows_ == model.leaf_prior_rows_
    path = save(BayesianForestRegressor(n_estimators=10, random_state=0,
                                        leaf_prior_rows=5.0).fit(X, y), tmp_path / "f")
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["state"]["leaf_prior_rows"] == 5.0
    manifest["state"]["leaf_prior_rows"] = 0.5
    del manifest["model_hash"]
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="leaf_prior_rows"):
        load(path)


def test_a_refit_branch_keeps_its_learnt_prior():
    from dataclasses import replace

    from ebf.branches import BranchSpec, with_learnt_options
    from ebf.updates import update_branch

    rng = np.random.default_rng(5)
    X, y, _ = _regions(3_000, rng)
    spec = BranchSpec(learner="bayesian", task="regression", n_estimators=10,
                      min_samples_leaf=5, max_features=1.0, max_depth=None, n_classes=0,
                      params={}, n_jobs=None)
    for learnt in (None, 25.0):
        branch = BayesianForestRegressor(n_estimators=10, random_state=0,
                                         leaf_prior_rows=learnt).fit(X, y)
        assert with_learnt_options(spec, branch).params == {"leaf_prior_rows": learnt}
        new = update_branch(spec, branch, X[:100], y[:100], 0, 0, (X, y))
        assert new.leaf_prior_rows_ == learnt
    fixed = replace(spec, params={"leaf_prior_rows": 5.0})
    assert with_learnt_options(fixed, branch) is fixed  # a fixed strength stays
