"""The benchmark scripts import and parse their options (they are run by hand, not in CI).

A benchmark whose imports or options broke would only be found when someone runs it;
importing each one and parsing its default options catches both. Peers that only the
``bench`` extra installs are imported inside the benchmarks' functions, not at import.
"""

from __future__ import annotations

import importlib

import pytest


@pytest.mark.parametrize("name", ["bench_ebf", "bench_dask", "bench_mondrian", "bench_predict",
                                  "bench_noise", "bench_calibration", "bench_retrain",
                                  "bench_bart", "bench_bart_hypercube", "bench_bart_speed",
                                  "bench_smc", "bench_bayesopt", "bench_mondrian_kernel",
                                  "bench_leaf_prior", "bench_cold_start",
                                  "bench_mondrian_noise", "bench_wide_table", "rolling_calibration",
                                  "accuracy", "bench_peers", "bench_leaf_model"])
def test_benchmark_imports_and_parses_its_options(name):
    module = importlib.import_module(f"benchmarks.{name}")
    cfg = module.parse_args([])
    assert cfg is not None


def test_paper_models_are_the_papers_line_up():
    from benchmarks.forest_models import PAPER_MODELS, paper_model

    for task in ("regression", "classification"):
        for name in PAPER_MODELS:
            assert paper_model(name, 3, 0, task=task).get_params()["random_state"] == 0
    with pytest.raises(ValueError, match="unknown model 'GBM'; the paper's models are"):
        paper_model("GBM", 3, 0)
    with pytest.raises(ValueError, match="task must be"):
        paper_model("BF", 3, 0, task="ranking")


def test_rolling_periods_are_days_weeks_and_months():
    import numpy as np

    from benchmarks.rolling_calibration import periods

    X = np.zeros((4, 8))
    X[:, 6], X[:, 7] = [30, 31, 1, 2], [12, 12, 1, 1]  # 2013-12-30 (a Monday) .. 2013-01-02
    assert periods(X, "month").tolist() == [12, 12, 1, 1]
    assert periods(X, "day").tolist() == [364, 365, 1, 2]
    assert periods(X, "week").tolist() == [1, 1, 1, 1]  # ISO week 1 of 2014 / of 2013
