"""Trunk posterior (Taddy et al. 2015, Sec. 3): empirical split frequencies and eq. (11)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import basics.threads
from basics.seeds import resolve_entropy
from ebf.bootstrap import draw_weights
from ebf.diagnostics._stability import trunk_posterior
from ebf.features import FeatureEncoder
from ebf.trunk import Trunk, TrunkArrays
from tests.naive import naive_clt_split_match


def _binary(n, effects, rng, task="regression"):
    X = rng.integers(0, 2, (n, len(effects))).astype(float)
    signal = X @ np.asarray(effects)
    if task == "regression":
        return X, signal + rng.normal(size=n)
    return X, (rng.random(n) < 0.5 + signal).astype(int)


@pytest.mark.parametrize(
    "task, effects",
    [
        ("regression", [0.10, 0.07]),  # close contest: p ~ 0.85
        ("regression", [0.10, 0.09, 0.08]),  # three-way contest: p ~ 0.6
        ("classification", [0.05, 0.035]),  # Gini, p ~ 0.85
    ],
)
def test_clt_match_agrees_with_bootstrap_frequency(task, effects):
    """Eq. (11) vs the frequency of the sample root variable over 400 Exp(1) reweightings.

    With binary features the only randomness is the variable choice, so the bound of eq.
    (11) is close to the true probability; 400 draws give a standard error below 0.025.
    """
    rng = np.random.default_rng(7)
    X, y = _binary(4000, effects, rng, task)
    post = trunk_posterior(X, y, 400, max_leaves=2, task=task, random_state=3, n_jobs=2)
    root = post.nodes.iloc[0]
    assert root["path"] == ""
    assert 0.3 < root["clt_match"] < 0.97  # a real contest, not a foregone conclusion
    assert abs(root["clt_match"] - root["agreement"]) < 0.06


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_clt_match_equals_naive_formula(task):
    rng = np.random.default_rng(1)
    X, y = _binary(1500, [0.08, 0.06, 0.05], rng, task)
    post = trunk_posterior(X, y, 2, max_leaves=2, task=task, random_state=0)
    expected = naive_clt_split_match(X, y, task)
    assert post.nodes.iloc[0]["clt_match"] == pytest.approx(expected, rel=1e-10)


def test_strong_split_is_stable_and_weak_ones_are_not():
    rng = np.random.default_rng(0)
    X = rng.random((3000, 3))
    y = 3.0 * (X[:, 0] > 0.5) + rng.normal(size=3000)
    post = trunk_posterior(X, y, 30, max_depth=2, min_leaf_rows=100, random_state=0)
    nodes = post.nodes.set_index("path")
    assert nodes.loc["", "feature"] == "x0"
    assert nodes.loc["", "agreement"] == 1.0 and nodes.loc["", "clt_match"] > 0.999
    # the first split location is concentrated at the true 0.5 (paper Fig. 4)
    loc = post.split_locations[""]
    assert loc.size == 30 and np.all(np.abs(loc - 0.5) < 0.02)
    # below the root there is no signal: variables disagree across draws
    assert nodes.loc["L", "agreement"] < 0.9 and nodes.loc["R", "agreement"] < 0.9
    assert post.structures["frequency"].sum() == pytest.approx(1.0)
    assert post.sample_frequency == post.structures.loc[
        post.structures["is_sample"], "frequency"].sum()


def test_reproducible_and_independent_of_threads():
    rng = np.random.default_rng(2)
    X = pd.DataFrame({"a": rng.random(800), "b": rng.random(800),
                      "c": pd.Categorical(rng.choice(["u", "v", "w"], 800))})
    y = X["a"] + (X["c"] == "v") + 0.3 * rng.normal(size=800)
    one = trunk_posterior(X, y, 12, max_leaves=3, random_state=5)
    two = trunk_posterior(X, y, 12, max_leaves=3, random_state=5, n_jobs=2)
    pd.testing.assert_frame_equal(one.nodes, two.nodes)
    pd.testing.assert_frame_equal(one.structures, two.structures)
    assert set(one.nodes["feature"]) <= {"a", "b", "c"}
    assert "a" in str(one) or "c" in str(one)


def test_plot_split_posterior():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from ebf.diagnostics._stability import plot_split_posterior

    rng = np.random.default_rng(0)
    X = rng.random((1000, 2))
    y = X[:, 0] + 0.1 * rng.normal(size=1000)
    post = trunk_posterior(X, y, 10, max_leaves=3, random_state=0)
    ax = plot_split_posterior(post)
    assert len(ax.patches) > 0 and ax.get_legend() is not None


def test_bad_input():
    with pytest.raises(ValueError, match="n_draws"):
        trunk_posterior(np.zeros((5, 1)), np.zeros(5), 0)


def _reference_draws(X, y, n_draws, random_state, task="regression", **params):
    """The posterior trunks as first implemented: ``Trunk.fit`` per draw (binning X again
    every time) on the sample trunk's edges, draw ``k`` seeded by ``spawn_key=(k,)``."""
    Xf = FeatureEncoder().fit_transform(X)
    y = np.asarray(y)
    n_classes = None
    if task == "classification":
        _, y = np.unique(y, return_inverse=True)
        n_classes = int(y.max()) + 1
    else:
        y = y.astype(np.float64)
    params = dict(params, task=task, n_classes=n_classes)
    edges = Trunk(**params).fit(Xf, y).bin_edges_
    entropy = resolve_entropy(random_state)
    draws = []
    for k in range(n_draws):
        rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(k,)))
        theta = draw_weights("exponential", Xf.shape[0], rng)
        draws.append(Trunk(**params).fit(Xf, y, sample_weight=theta, bin_edges=edges))
    return draws


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_draws_equal_a_trunk_fit_per_draw_whatever_n_jobs(task):
    rng = np.random.default_rng(11)
    X = pd.DataFrame({"a": rng.random(3000), "b": rng.normal(size=3000),
                      "c": pd.Categorical(rng.choice(["u", "v", "w"], 3000))})
    signal = 2 * X["a"] + (X["c"] == "v") + 0.5 * X["b"]
    y = signal + rng.normal(size=3000)
    if task == "classification":
        y = np.where(y > 1.5, "hi", np.where(y > 0.5, "mid", "lo"))
    kw = dict(max_leaves=6, min_leaf_rows=40)
    expected = _reference_draws(X, y, 9, 4, task, **kw)
    for n_jobs in (None, 2, -1):
        post = trunk_posterior(X, y, 9, task=task, random_state=4, n_jobs=n_jobs, **kw)
        assert len(post.draws) == 9
        for got, ref in zip(post.draws, expected, strict=True):
            assert type(got) is Trunk and got.n_leaves_ == ref.n_leaves_
            for name in TrunkArrays.ARRAYS:
                np.testing.assert_array_equal(getattr(got.trunk_, name),
                                              getattr(ref.trunk_, name), err_msg=name)
            np.testing.assert_array_equal(got.leaf_values_, ref.leaf_values_)
            for e, r in zip(got.bin_edges_, ref.bin_edges_, strict=True):
                np.testing.assert_array_equal(e, r)
            codes = X.assign(c=X["c"].cat.codes).to_numpy(dtype=float)
            np.testing.assert_array_equal(got.apply(codes), ref.apply(codes))
    # the draws differ from each other: the weights do change the trunks
    assert len({tuple(t.trunk_.threshold[t.trunk_.feature >= 0]) for t in expected}) > 1


def test_n_jobs_minus_one_uses_every_core(monkeypatch):
    made = []

    class Recording(basics.threads.ThreadPoolExecutor):
        def __init__(self, max_workers):
            made.append(max_workers)
            super().__init__(max_workers)

    monkeypatch.setattr(basics.threads, "ThreadPoolExecutor", Recording)
    monkeypatch.setattr(basics.threads, "n_threads", lambda n_jobs: 4 if n_jobs == -1 else 1)
    rng = np.random.default_rng(0)
    X = rng.random((500, 2))
    y = X[:, 0] + 0.1 * rng.normal(size=500)
    trunk_posterior(X, y, 6, max_leaves=3, random_state=0, n_jobs=-1)
    trunk_posterior(X, y, 3, max_leaves=3, random_state=0, n_jobs=-1)
    trunk_posterior(X, y, 6, max_leaves=3, random_state=0)
    assert made == [4, 3]
