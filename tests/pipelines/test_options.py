"""Training options (``pipelines.options.TrainOptions``) and the learner table on the CLI."""

from __future__ import annotations

import argparse

import pytest

from ebf import EmpiricalBayesianForestRegressor
from ebf.learners import LEARNERS, BranchLearner, get_learner
from pipelines.cli import build_parser
from pipelines.cli.arguments import train_options
from pipelines.options import TrainOptions


def _train_action(parser: argparse.ArgumentParser, dest: str) -> argparse.Action:
    train = parser._subparsers._group_actions[0].choices["train"]
    return next(a for a in train._actions if a.dest == dest)


def _args(*extra: str) -> argparse.Namespace:
    return build_parser().parse_args(["train", "d", "--target", "y", "--out", "m", *extra])


def test_cli_branch_choices_are_the_table():
    action = _train_action(build_parser(), "branch")
    assert list(action.choices) == list(LEARNERS)
    for name, learner in LEARNERS.items():
        assert f"{name}: {learner.help}" in action.help


def test_a_learner_added_to_the_table_is_a_cli_choice(monkeypatch):
    fake = BranchLearner("fake", "a learner made up by this test", get_learner("random").fit,
                         get_learner("random").classes, 7, False, frozenset(),
                         get_learner("random").working_bytes)
    monkeypatch.setitem(LEARNERS, "fake", fake)
    parser = build_parser()
    assert "fake" in _train_action(parser, "branch").choices
    assert "fake: a learner made up by this test" in _train_action(parser, "branch").help
    assert "fake 7" in _train_action(parser, "n_estimators").help
    args = parser.parse_args(["train", "d", "--target", "y", "--out", "m", "--branch", "fake"])
    assert train_options(args).trees() == 7


@pytest.mark.parametrize("branch", list(LEARNERS))
def test_library_and_cli_default_trees_agree(branch):
    """``EmpiricalBayesianForestRegressor(branch=b)`` and ``ebf train --branch b`` fit the
    same number of trees: both read the learner's ``default_trees``."""
    library = EmpiricalBayesianForestRegressor(branch=branch)._n_trees()
    assert train_options(_args("--branch", branch)).trees() == library
    assert library == get_learner(branch).default_trees


def test_min_samples_split_is_refused_for_a_learner_that_ignores_it():
    assert TrainOptions(branch="mondrian", min_samples_split=20).branch_params() == {
        "min_samples_split": 20}
    with pytest.raises(ValueError, match=r"\['min_samples_split'\].*branch='bayesian'.*"
                                         r"accepts \['leaf_knots', 'leaf_model', "
                                         r"'leaf_prior_rows'"):
        TrainOptions(branch="bayesian", min_samples_split=20)


@pytest.mark.parametrize("field, value, match", [
    ("task", "ranking", "task must be one of"),
    ("branch", "forest", "choose one of"),
    ("n_estimators", 0, "n_estimators must be an integer >= 1"),
    ("trunk_leaves", 2.5, "trunk_leaves must be an integer"),
    ("branch_memory", "lots", "branch_memory must be a positive"),
    ("model_memory", -1, "model_memory must be a positive"),
    ("compact", "yes", "compact must be True or False"),
    ("calibrate", "later", "calibrate must be one of"),
    ("random_state", "seed", "random_state must be an integer"),
])
def test_every_field_is_checked_when_built(field, value, match):
    with pytest.raises(ValueError, match=match):
        TrainOptions(**{field: value})


def test_model_memory_needs_a_learner_sized_by_rows():
    with pytest.raises(ValueError, match="grows with its particles"):
        TrainOptions(branch="smc", model_memory="1GB")
    assert train_options(_args("--branch", "smc")).model_memory is None
    assert train_options(_args()).model_memory == "auto"
    with pytest.raises(ValueError, match="grows with its particles"):
        TrainOptions(branch="bart", model_memory="auto")


def test_the_dict_form_round_trips_and_names_unknown_keys():
    options = TrainOptions(branch="mondrian", n_estimators=5, calibrate="recent")
    assert TrainOptions.from_dict(options.to_dict()) == options
    assert TrainOptions.from_dict({"n_estimators": 3}, options).branch == "mondrian"
    with pytest.raises(ValueError, match=r"unknown train_options \['trees'\]"):
        TrainOptions.from_dict({"trees": 3})
