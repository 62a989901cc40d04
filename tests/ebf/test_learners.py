"""The table of branch learners (``ebf.learners``): one record per learner, read everywhere."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from basics.tasks import CLASSIFICATION, REGRESSION
from ebf import (
    EmpiricalBayesianForestClassifier,
    EmpiricalBayesianForestRegressor,
    SubsampleForestRegressor,
)
from ebf.dask import DaskEmpiricalBayesianForestRegressor
from ebf.learners import LEARNERS, get_learner, online_learners


@pytest.fixture
def no_trunk(monkeypatch):
    """Growing a trunk raises: a check that passes has run before any trunk work."""
    from ebf.trunk import Trunk

    def refuse(*args, **kwargs):
        raise AssertionError("the trunk was grown")

    monkeypatch.setattr(Trunk, "fit", refuse)


def _data(n: int = 60):
    rng = np.random.default_rng(0)
    X = rng.random((n, 3))
    return X, X[:, 0] + 0.1 * rng.normal(size=n)


@pytest.mark.parametrize("name", list(LEARNERS))
def test_accepted_params_are_the_estimator_signature_minus_what_the_ensemble_sets(name):
    learner = LEARNERS[name]
    for task, cls in learner.classes.items():
        signature = set(inspect.signature(cls).parameters)
        accepted = set(learner.accepted_params(task))
        assert accepted == signature - learner.set_by_ensemble
        assert not accepted & {"random_state", "n_jobs", "n_estimators"}


def test_unknown_branch_params_key_is_refused_before_the_trunk(no_trunk):
    X, y = _data()
    model = EmpiricalBayesianForestRegressor(branch="mondrian", branch_params={"lifetme": 2.0})
    with pytest.raises(ValueError, match=r"\['lifetme'\].*branch='mondrian'.*'lifetime'"):
        model.fit(X, y)
    assert not hasattr(model, "trunk_")


@pytest.mark.parametrize("branch, key", [("bayesian", "min_samples_split"),
                                         ("random", "lifetime"), ("bart", "n_trees"),
                                         ("smc", "random_state")])
def test_an_option_the_learner_ignores_or_the_ensemble_sets_is_refused(no_trunk, branch, key):
    X, y = _data()
    model = EmpiricalBayesianForestRegressor(branch=branch, branch_params={key: 4})
    with pytest.raises(ValueError, match=rf"\['{key}'\] are not options of branch='{branch}'"):
        model.fit(X, y)


def test_the_check_is_per_task():
    X, y = _data()
    with pytest.raises(ValueError, match="classification.*accepts"):  # regression only
        EmpiricalBayesianForestClassifier(branch="bayesian",
                                          branch_params={"leaf_prior_rows": 5}).fit(X, y > 0.5)
    with pytest.raises(ValueError, match="choose one of"):
        SubsampleForestRegressor(branch="nope").fit(X, y)


def test_the_dask_estimator_refuses_before_any_work():
    # no client, no data: the check runs before either is touched
    with pytest.raises(ValueError, match=r"\['posterior'\].*branch='bayesian'"):
        DaskEmpiricalBayesianForestRegressor(branch_params={"posterior": "x"}).fit(None, None)


@pytest.mark.parametrize("name", list(LEARNERS))
def test_default_trees_are_the_records(name):
    model = EmpiricalBayesianForestRegressor(branch=name)
    assert model.n_estimators is None
    assert model._n_trees() == get_learner(name).default_trees
    assert EmpiricalBayesianForestRegressor(branch=name, n_estimators=3)._n_trees() == 3


def test_a_mondrian_ebf_fits_ten_trees_by_default():
    X, y = _data(200)
    model = EmpiricalBayesianForestRegressor(branch="mondrian", trunk_max_leaves=2,
                                             random_state=0).fit(X, y)
    assert {b.n_estimators for b in model.branches_} == {10}


def test_online_support_comes_from_the_records():
    assert online_learners() == ["mondrian"]
    assert all((name in online_learners()) == rec.online for name, rec in LEARNERS.items())
    assert set(get_learner("bart").classes) == {REGRESSION}
    assert CLASSIFICATION in get_learner("smc").classes
