"""pipelines.warm: the kernel warm-ups of the test suite (before its workers start) and of a
Dask job's workers (the demo, the first ``ebf train``, the notebooks)."""

import numpy as np
import pytest

from pipelines.warm import FAMILIES, kernels_cached, warm_kernels, warm_workers


def test_warm_kernels_runs_the_families_asked_for_and_refuses_unknown_ones():
    seconds = warm_kernels(("forests",))
    assert list(seconds) == ["forests"] and seconds["forests"] > 0
    with pytest.raises(ValueError, match="unknown families \\['trees'\\]"):
        warm_kernels(("forests", "trees"))
    assert set(FAMILIES) == {"forests", "mondrian", "bayesian trees"}


def test_families_warmed_in_processes_report_their_seconds():
    seconds = warm_kernels(("forests", "bayesian trees"), processes=2)
    assert list(seconds) == ["bayesian trees", "forests"]
    assert all(s > 0 for s in seconds.values())


def test_warm_up_data_gives_both_bin_code_widths():
    from ebf.binning import bin_data, bin_edges
    from ebf.config import EXACT_BINS, MAX_BINS
    from pipelines.warm import _regression_data

    for wide, dtype in ((True, np.uint16), (False, np.uint8)):
        X, y = _regression_data(wide=wide)
        assert X.shape[0] == y.shape[0]
        # a quarter of the rows: less than a branch of the warm-up's two-leaf trunk fits on
        part = X[: len(X) // 4]
        assert bin_data(part, bin_edges(part, MAX_BINS, exact_bins=EXACT_BINS)).dtype == dtype


def test_warm_pieces_split_cart_learners_only():
    from pipelines.warm import _pieces, _warm_piece

    assert _pieces("bayesian", (True, False)) == [("fit", True), ("predict", True),
                                                   ("fit", False)]
    assert _pieces("bayesian", (True,)) == [("fit", True), ("predict", True)]
    assert _pieces("mondrian", (True, False)) == []
    assert _warm_piece(("predict", False), "random") > 0


def test_warm_workers_says_what_it_does_and_skips_a_warm_cache(dask_client):
    phases = []

    def progress(phase, done, total):
        phases.append((phase, done, total))

    assert warm_workers(dask_client, "bayesian", progress=progress) > 0
    assert len(phases) == 1 and phases[0][0] in ("compile", "warm-up")
    assert all(dask_client.run(kernels_cached).values()) and kernels_cached()
    phases.clear()
    assert warm_workers(dask_client, only_if_cold=True, progress=progress) == 0.0
    assert phases == []


def test_first_train_on_a_machine_says_it_compiles(tmp_path, monkeypatch, capsys):
    import pandas as pd

    import pipelines.warm
    from pipelines.cli import main

    rng = np.random.default_rng(0)
    X = rng.random((400, 3))
    (tmp_path / "data").mkdir()
    pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "y": X[:, 0]}).to_parquet(
        tmp_path / "data" / "part.0.parquet")
    monkeypatch.setenv("EBF_LOCAL_PROCESSES", "0")
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    argv = ["train", str(tmp_path / "data"), "--target", "y", "--n-estimators", "2",
            "--trunk-leaves", "2", "--calibrate", "none"]
    monkeypatch.setattr(pipelines.warm, "kernels_cached", lambda: False)  # a fresh clone
    assert main([*argv, "--out", str(tmp_path / "cold")]) == 0
    assert "compiling kernels (first run only)" in capsys.readouterr().err
    monkeypatch.setattr(pipelines.warm, "kernels_cached", lambda: True)
    assert main([*argv, "--out", str(tmp_path / "warm")]) == 0
    assert "compiling kernels" not in capsys.readouterr().err
