"""The Mondrian forests' estimated noise variance (``mondrian._noise``, ``noise="estimated"``).

Oracle: :func:`tests.naive.naive_gamma_test` (every pair distance, no neighbour index). The
statistical checks use fixed seeds: the estimate recovers a known noise variance, and the
predictive distribution at inputs the forest has seen, with fresh noise, is as good as at
new inputs (with App. B's ``noise="forest"`` it is not: the failure the option fixes).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from ebf import load, save
from ebf.estimators import EmpiricalBayesianForestRegressor
from mondrian import MondrianForestRegressor
from mondrian._noise import gamma_test
from tests.naive import naive_gamma_test


def _friedman(n, rng, p=5, sd=1.0):
    X = rng.random((n, p))
    f = (10 * np.sin(np.pi * X[:, 0] * X[:, 1]) + 20 * (X[:, 2] - 0.5) ** 2 + 10 * X[:, 3]
         + 5 * X[:, 4])
    return X, f, f + sd * rng.normal(size=n)


def test_gamma_test_matches_the_pairwise_oracle():
    rng = np.random.default_rng(0)
    for n, d in ((60, 1), (80, 3), (120, 2)):
        X = rng.random((n, d))  # continuous: no distance ties
        y = np.sin(5 * X[:, 0]) + 0.3 * rng.normal(size=n)
        got = gamma_test(X, y, floor=1e-300, n_neighbors=6)
        assert got == pytest.approx(max(naive_gamma_test(X, y, 6), 1e-300), rel=1e-9)


@pytest.mark.parametrize("sd", [0.5, 1.0, 2.0])
def test_gamma_test_recovers_a_known_noise_variance(sd):
    X, _, y = _friedman(20_000, np.random.default_rng(1), sd=sd)
    assert gamma_test(X, y, floor=1e-12) == pytest.approx(sd * sd, rel=0.2)


def test_gamma_test_edge_cases():
    assert gamma_test(np.zeros((2, 1)), np.zeros(2), floor=0.5) == 0.5  # too few rows
    X = np.zeros((50, 2))  # every input the same: the labels' own spread
    y = np.random.default_rng(2).normal(size=50)
    assert gamma_test(X, y, floor=1e-9) == pytest.approx(
        0.5 * np.mean((y[:, None] - y[None, :]) ** 2) * 50 / 49, rel=0.2)
    assert gamma_test(np.random.default_rng(3).random((40, 2)), np.ones(40), floor=2.0) == 2.0


def _seen_and_new(model, rng, online=False):
    X, f, y = _friedman(4000, rng)
    Xn, _, yn = _friedman(2000, rng)
    if online:
        for a in range(0, 4000, 1000):
            model.partial_fit(X[a:a + 1000], y[a:a + 1000])
    else:
        model.fit(X, y)
    seen = model.predict_distribution(X[:2000]).logpdf(f[:2000] + rng.normal(size=2000))
    new = model.predict_distribution(Xn).logpdf(yn)
    return -seen.mean(), -new.mean(), min(seen.min(), new.min())


@pytest.mark.parametrize("noise", ["per_leaf", "estimated"])
@pytest.mark.parametrize("kind", ["batch", "online", "ebf"])
def test_seen_inputs_with_fresh_noise_are_as_probable_as_new_ones(kind, noise):
    """For the default (``per_leaf``) and the estimated noise variance."""
    rng = np.random.default_rng(4)
    if kind == "ebf":
        model = EmpiricalBayesianForestRegressor(
            n_estimators=5, branch="mondrian", trunk_max_leaves=4, random_state=0,
            branch_params={"noise": noise})
    else:
        model = MondrianForestRegressor(n_estimators=5, random_state=0, noise=noise)
    seen, new, worst = _seen_and_new(model, rng, online=kind == "online")
    assert seen < new + 0.3 and worst > -30, (seen, new, worst)


@pytest.mark.parametrize("name", ["smc", "bart", "kernel"])
def test_other_learners_are_honest_at_seen_inputs(name):
    """The SMC trees (a normal-inverse-gamma leaf), BART (one sampled noise variance) and
    the Mondrian kernel (the ridge residual variance) estimate their noise from the data
    already: fresh labels at seen inputs are as probable as new ones."""
    from scipy.stats import norm

    from ebf.bayestrees import BARTRegressor, SMCTreeRegressor
    from mondrian import MondrianKernelRegressor

    model = {"smc": SMCTreeRegressor(random_state=0),
             "bart": BARTRegressor(n_trees=20, n_iter=60, burn_in=20, random_state=0),
             "kernel": MondrianKernelRegressor(random_state=0)}[name]
    rng = np.random.default_rng(7)
    X, f, y = _friedman(1000, rng)
    Xn, _, yn = _friedman(500, rng)
    model.fit(X, y)
    fresh = f[:500] + rng.normal(size=500)
    if hasattr(model, "predict_distribution"):
        seen = model.predict_distribution(X[:500]).logpdf(fresh)
        new = model.predict_distribution(Xn).logpdf(yn)
    else:
        seen = norm.logpdf(fresh, *model.predict(X[:500], return_std=True))
        new = norm.logpdf(yn, *model.predict(Xn, return_std=True))
    assert -seen.mean() < -new.mean() + 0.3 and min(seen.min(), new.min()) > -30


def test_app_b_noise_fails_at_seen_inputs():
    """The failure, so the test above can fail: App. B's noise variance (about var(y) /
    1000) makes fresh labels at seen inputs improbable."""
    seen, new, worst = _seen_and_new(
        MondrianForestRegressor(n_estimators=5, random_state=0, noise="forest"),
        np.random.default_rng(4))
    assert seen > new + 1 and worst < -30


def test_estimated_noise_is_kept_by_compact_and_saved_models(tmp_path):
    rng = np.random.default_rng(5)
    X, _, y = _friedman(1500, rng)
    full = MondrianForestRegressor(n_estimators=3, random_state=0, noise="estimated").fit(X, y)
    noise = full.hyperparameters_["noise_var"]
    small = full.compact()
    for model in (small, load(save(full, tmp_path / "full")), load(save(small, tmp_path / "c"))):
        assert model.hyperparameters_["noise_var"] == noise
        np.testing.assert_array_equal(model.predict(X[:50]), full.predict(X[:50]))
    # partial_fit re-estimates from all rows seen
    full.partial_fit(*_friedman(500, rng)[::2])
    assert full.hyperparameters_["noise_var"] != noise


@pytest.mark.parametrize("bad", [-1.0, 0.0, float("nan"), float("inf"), "1.0"])
def test_forged_noise_variance_is_refused(tmp_path, bad):
    X, _, y = _friedman(500, np.random.default_rng(6))
    model = MondrianForestRegressor(n_estimators=2, random_state=0, noise="estimated").fit(X, y)
    path = save(model.compact(), tmp_path / "m")
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["state"]["noise_variance"] = bad
    del manifest["model_hash"]
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="noise_variance"):
        load(path)
