"""``compact()`` of the EBF and SSF estimators: Mondrian branches compacted, others shared."""

from __future__ import annotations

import numpy as np
import pytest

from ebf import (
    EmpiricalBayesianForestClassifier,
    EmpiricalBayesianForestRegressor,
    SubsampleForestRegressor,
)
from ebf.artifact import load, save
from ebf.branches import ConstantBranch


def _data(n=1500, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, 4))
    y = np.sin(X[:, 0]) + X[:, 1] ** 2 + 0.2 * rng.normal(size=n)
    return X, y, (y > 1).astype(int) + (X[:, 2] > 1)


def _outputs(model, X) -> list[np.ndarray]:
    if hasattr(model, "predict_proba"):
        return [model.predict_proba(X), model.predict(X)]
    return [*model.predict(X, return_std=True), model.predict_quantiles(X, (0.1, 0.9))]


MODELS = {
    "ebf_reg": lambda: EmpiricalBayesianForestRegressor(
        n_estimators=3, branch="mondrian", trunk_max_leaves=4, random_state=0),
    "ebf_clf": lambda: EmpiricalBayesianForestClassifier(
        n_estimators=3, branch="mondrian", trunk_max_leaves=3, random_state=1),
    "ssf_reg": lambda: SubsampleForestRegressor(
        n_estimators=3, branch="mondrian", n_subsamples=3, random_state=2),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_compact_ensemble_predicts_exactly_and_leaves_the_original(name, tmp_path):
    X, y, c = _data()
    full = MODELS[name]().fit(X, c if name.endswith("clf") else y)
    small = full.compact()
    assert small.compact_ and not full.compact_
    assert type(small) is type(full) and small.get_params() == full.get_params()
    assert small.entropy_ == full.entropy_
    parts = small.subsamples_ if name.startswith("ssf") else small.branches_
    assert all(b.compact_ for b in parts if not isinstance(b, ConstantBranch))
    originals = full.subsamples_ if name.startswith("ssf") else full.branches_
    assert not any(getattr(b, "compact_", False) for b in originals)
    Xt = np.vstack([X[:300], np.random.default_rng(9).uniform(-4, 4, (200, 4))])
    for got, want in zip(_outputs(small, Xt), _outputs(full, Xt), strict=True):
        np.testing.assert_array_equal(got, want)
    loaded = load(save(small, tmp_path / name))
    assert loaded.compact_
    for got, want in zip(_outputs(loaded, Xt), _outputs(small, Xt), strict=True):
        np.testing.assert_array_equal(got, want)


def test_bayesian_branches_are_already_compact_and_shared():
    X, y, _ = _data(600)
    full = EmpiricalBayesianForestRegressor(n_estimators=2, trunk_max_leaves=3,
                                            random_state=0).fit(X, y)
    assert full.compact_
    small = full.compact()
    assert small is not full and small.trunk_ is full.trunk_
    assert all(a is b for a, b in zip(small.branches_, full.branches_, strict=True))
    np.testing.assert_array_equal(small.predict(X), full.predict(X))


def test_compact_keeps_the_feature_names_of_a_frame():
    import pandas as pd

    X, y, _ = _data()
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    full = EmpiricalBayesianForestRegressor(n_estimators=2, branch="mondrian",
                                            random_state=0).fit(frame, y)
    small = full.compact()
    assert list(small.feature_names_in_) == list(frame.columns)
    np.testing.assert_array_equal(small.predict(frame), full.predict(frame))
