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
                                  "bench_bart", "bench_bart_hypercube", "bench_smc",
                                  "bench_bayesopt", "bench_mondrian_kernel", "bench_leaf_prior",
                                  "bench_mondrian_noise"])
def test_benchmark_imports_and_parses_its_options(name):
    module = importlib.import_module(f"benchmarks.{name}")
    cfg = module.parse_args([])
    assert cfg is not None
