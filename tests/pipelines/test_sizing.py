"""Model-size planning (``pipelines.sizing``) and the ``ebf train`` defaults it feeds."""

from __future__ import annotations

import numpy as np
import pytest

from ebf.learners import get_learner
from mondrian import MondrianForestRegressor
from pipelines.cli import build_parser
from pipelines.sizing import (
    AUTO_MODEL_MEMORY,
    DEFAULT_MODEL_MEMORY,
    DEFAULT_PARTITION_ROWS,
    bytes_per_row_per_tree,
    default_model_memory,
    model_budget,
    partition_note,
    plan_model_size,
    rows_leaf,
)
from tests.mondrian.test_compact import _state_bytes


@pytest.mark.parametrize("d, mss", [(5, 10), (10, 20), (12, 40)])
def test_mondrian_estimate_is_within_15_percent_of_the_saved_arrays(d, mss):
    rng = np.random.default_rng(d)
    n, trees = 8000, 2
    X = rng.random((n, d))
    y = np.sin(3 * X[:, 0]) + X[:, 1] + 0.1 * rng.normal(size=n)
    full = MondrianForestRegressor(n_estimators=trees, min_samples_split=mss,
                                   random_state=0).fit(X, y)
    for model, compact in ((full, False), (full.compact(), True)):
        measured = _state_bytes(model._get_state()) / (n * trees)
        estimate = bytes_per_row_per_tree("mondrian", d, compact=compact,
                                          min_samples_split=mss, n_trees=trees)
        assert abs(estimate / measured - 1) < 0.15, (compact, estimate, measured)


def test_default_trees_suit_the_learner():
    assert get_learner("mondrian").default_trees == 10
    assert get_learner("bayesian").default_trees == get_learner("random").default_trees == 100
    parser = build_parser()
    args = parser.parse_args(["train", "d", "--target", "y", "--out", "m"])
    assert args.n_estimators is None and args.model_memory is None and not args.compact
    assert default_model_memory("bayesian", None) == AUTO_MODEL_MEMORY == "auto"
    assert DEFAULT_MODEL_MEMORY == "2GB"
    assert default_model_memory("mondrian", "5GB") == "5GB"
    assert default_model_memory("bart", None) is None
    train_help = parser._subparsers._group_actions[0].choices["train"].format_help()
    assert "mondrian 10" in " ".join(train_help.split())
    assert "--model-memory" in train_help and "--no-compact" in train_help
    for given in ("auto", "500MB"):
        argv = ["train", "d", "--target", "y", "--out", "m", "--model-memory", given]
        assert parser.parse_args(argv).model_memory == given


def test_plan_keeps_the_defaults_when_they_fit_and_says_so():
    plan = plan_model_size(10**10, 100_000, 10, "mondrian", compact=True)
    assert (plan.n_estimators, plan.min_samples_split) == (10, 10)
    assert plan.model_bytes <= 10**10
    assert "10 compact mondrian tree(s) per branch with min_samples_split=10" in plan.message
    assert plan_model_size(10**10, 100_000, 10, "bayesian").n_estimators == 100


def test_plan_lowers_the_trees_then_raises_the_leaf_size():
    n, d, budget = 1_000_000, 10, 100 * 10**6
    plan = plan_model_size(budget, n, d, "mondrian", compact=True)
    per = bytes_per_row_per_tree("mondrian", d, compact=True)
    assert plan.n_estimators == int(budget // (n * per)) == 3
    assert plan.min_samples_split == 10 and plan.model_bytes <= budget
    # full models hold more: fewer trees for the same budget
    assert plan_model_size(3 * budget, n, d, "mondrian", compact=True).n_estimators == 10
    full = plan_model_size(3 * budget, n, d, "mondrian")
    assert full.n_estimators < 10 and full.model_bytes <= 3 * budget
    # one tree does not fit: larger leaves, the smallest that fit
    tight = plan_model_size(10 * 10**6, n, d, "mondrian", compact=True)
    assert tight.n_estimators == 1 and tight.min_samples_split > 10
    assert tight.model_bytes <= 10 * 10**6
    smaller = bytes_per_row_per_tree("mondrian", d, compact=True,
                                     min_samples_split=tight.min_samples_split - 1)
    assert n * smaller > 10 * 10**6
    # trees given: the leaf size follows
    given = plan_model_size(budget, n, d, "mondrian", n_estimators=10, compact=True)
    assert given.n_estimators == 10 and given.min_samples_split > 10
    assert given.model_bytes <= budget


def test_plan_raises_the_cart_leaf_size_for_the_trees_asked():
    n, d, budget = 1_000_000, 10, 100 * 10**6
    plan = plan_model_size(budget, n, d, "bayesian", n_estimators=100)
    assert plan.n_estimators == 100 and plan.min_samples_leaf == 105
    assert plan.model_bytes <= budget and "min_samples_leaf=105" in plan.message
    # the smallest leaf that fits
    assert n * 100 * bytes_per_row_per_tree("bayesian", d, min_samples_leaf=104) > budget
    assert plan_model_size(10**12, n, d, "random", n_estimators=100).min_samples_leaf == 5
    # no trees given: the default 100 draws are kept, the leaf follows
    assert plan_model_size(budget, n, d, "bayesian") == plan


def test_auto_leaves_grow_with_the_rows_within_the_default_budget():
    """``model_memory="auto"``: CART leaves of the learner's default up to 100k rows, then
    growing as the square root of the rows, so the model's bytes per training row fall;
    the 2GB budget caps it; Mondrian branches are planned as with the budget alone."""
    budget, from_rows = model_budget("auto")
    assert (budget, from_rows) == (2 * 10**9, True)
    assert model_budget(3 * 10**9) == (3 * 10**9, False)
    plans = {n: plan_model_size(budget, n, 10, "bayesian", from_rows=True)
             for n in (10_000, 100_000, 1_000_000, 3_000_000, 10_000_000)}
    for n in (10_000, 100_000):  # small data: the models of the explicit budget
        assert plans[n].min_samples_leaf == 5
        assert plans[n].model_bytes == plan_model_size(budget, n, 10, "bayesian").model_bytes
    assert [plans[n].min_samples_leaf for n in (1_000_000, 3_000_000)] == [
        rows_leaf("bayesian", 1_000_000), rows_leaf("bayesian", 3_000_000)] == [16, 28]
    # at 10M rows the budget asks for more than the rows (50): the plan it gave before
    before = plan_model_size(budget, 10_000_000, 10, "bayesian")
    assert (plans[10_000_000].min_samples_leaf, plans[10_000_000].model_bytes) == (
        before.min_samples_leaf, before.model_bytes) and before.min_samples_leaf == 53
    per_row = [plans[n].model_bytes / n for n in sorted(plans)]
    assert all(b < a for a, b in zip(per_row[1:], per_row[2:], strict=False))
    assert all(p.model_bytes <= budget and p.n_estimators == 100 for p in plans.values())
    assert "model memory auto (at most 2,000 MB) for 1,000,000 rows" in plans[1_000_000].message
    # the budget binds before the rows do: the smallest leaf that fits, as without "auto"
    tight = plan_model_size(10**8, 1_000_000, 10, "bayesian", from_rows=True)
    assert tight.min_samples_leaf == plan_model_size(10**8, 1_000_000, 10,
                                                     "bayesian").min_samples_leaf == 105
    assert rows_leaf("random", 10**6) == 16 and rows_leaf("mondrian", 10**7) == 10
    mondrian = plan_model_size(budget, 10**6, 10, "mondrian", compact=True, from_rows=True)
    alone = plan_model_size(budget, 10**6, 10, "mondrian", compact=True)
    assert (mondrian.n_estimators, mondrian.min_samples_split) == (
        alone.n_estimators, alone.min_samples_split)


def test_default_size_benchmark_parses_its_options():
    from benchmarks.bench_default_size import parse_args, spread

    cfg = parse_args(["--rows", "1000", "--code", "after=.", "--train-args", "--seed", "1"])
    assert cfg.rows == [1000] and cfg.code == ["after=."]
    assert cfg.train_args == ["--seed", "1"] and cfg.leaves is None
    assert parse_args([]).rows == [100_000, 1_000_000]
    assert spread([3.0, 1.0, 2.0]) == "1.0 / 2.0 / 3.0"


def test_cart_estimate_follows_the_leaf_size():
    # nodes per row of the histogram trees ~ 1.6 / min_samples_leaf, 64 bytes per node
    from ebf import BayesianForestRegressor

    rng = np.random.default_rng(1)
    X = rng.random((40_000, 5))
    y = X[:, 0] + np.sin(6 * X[:, 1]) + 0.3 * rng.normal(size=40_000)
    for leaf in (5, 40):
        bf = BayesianForestRegressor(n_estimators=2, min_samples_leaf=leaf,
                                     random_state=0).fit(X, y)
        measured = bf.forest_.nbytes / (40_000 * 2)
        estimate = bytes_per_row_per_tree("bayesian", 5, min_samples_leaf=leaf)
        assert abs(estimate / measured - 1) < 0.15, (leaf, estimate, measured)


def test_plan_that_cannot_fit_names_the_budget_and_the_need():
    with pytest.raises(ValueError, match=r"100 bayesian tree\(s\) per branch on 1,000 rows "
                                         r"needs about 2 MB.*budget of 0 MB"):
        plan_model_size(1000, 1_000, 10, "bayesian", n_estimators=100)
    with pytest.raises(ValueError, match=r"data buffer alone.*--compact"):
        plan_model_size(10**6, 1_000_000, 10, "mondrian", n_estimators=10)


# --------------------------------------------------------------------------- partitions


@pytest.fixture
def local_threads(monkeypatch):
    """CLI clusters of threads (fast start) and no scheduler from the environment."""
    monkeypatch.setenv("EBF_LOCAL_PROCESSES", "0")
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)


def test_make_data_writes_several_files_per_million_rows_by_default(tmp_path, capsys,
                                                                    local_threads):
    import inspect

    from pipelines.cli import main
    from pipelines.make_data import make_friedman

    assert DEFAULT_PARTITION_ROWS == 100_000
    default = inspect.signature(make_friedman).parameters["partition_rows"].default
    assert default == DEFAULT_PARTITION_ROWS
    out = tmp_path / "million"
    assert main(["make-data", "friedman", "--rows", "1e6", "--features", "5", "--out",
                 str(out), "--quiet"]) == 0
    assert "1,000,000 rows" in capsys.readouterr().out
    assert len(list(out.glob("part.*.parquet"))) == 10


def test_small_data_gets_no_partition_note():
    from types import SimpleNamespace

    from pipelines.sizing import NOTE_ROWS, check_partitions

    client = SimpleNamespace(nthreads=lambda: {"a": 1, "b": 1})
    assert check_partitions(1, client, NOTE_ROWS - 1) is None
    assert check_partitions(1, client, NOTE_ROWS) == partition_note(1, 2)


def test_partition_note_names_the_counts_and_the_fix():
    assert partition_note(2, 2) is None and partition_note(40, 8) is None
    note = partition_note(1, 2)
    assert note.startswith("the data has 1 partition(s) for 2 worker threads")
    assert "--partition-rows" in note and "100,000 rows per file" in note


def test_train_and_predict_say_when_the_data_has_fewer_partitions_than_threads(
        tmp_path, capsys, caplog, local_threads, monkeypatch):
    """A one-file dataset on a 2-thread cluster: one warning line each, and the jobs run
    (the data counts as large: :data:`pipelines.sizing.NOTE_ROWS` lowered)."""
    import logging

    from distributed import Client, LocalCluster

    import pipelines.sizing
    from pipelines.cli import main
    from pipelines.make_data import make_friedman

    data = str(tmp_path / "one-file")
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        make_friedman(data, 600, n_features=5, partition_rows=600, client=client)
    cluster = ["--n-workers", "1", "--threads-per-worker", "2", "--quiet"]
    monkeypatch.setattr(pipelines.sizing, "NOTE_ROWS", 500)
    with caplog.at_level(logging.WARNING, logger="pipelines.sizing"):
        assert main(["train", data, "--target", "y", "--n-estimators", "2", "--trunk-leaves",
                     "2", "--calibrate", "none", "--out", str(tmp_path / "m"), *cluster]) == 0
        trained = [r.getMessage() for r in caplog.records if r.name == "pipelines.sizing"]
        caplog.clear()
        assert main(["predict", str(tmp_path / "m"), data, "--out", str(tmp_path / "p"),
                     *cluster]) == 0
        predicted = [r.getMessage() for r in caplog.records if r.name == "pipelines.sizing"]
    assert trained == predicted == [partition_note(1, 2)]
    assert (tmp_path / "p").exists()

