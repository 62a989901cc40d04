"""The advice of a branch that outgrows its memory follows the workers' layout: one thread per
worker (the SLURM and PBS default) gets more memory or a larger budget, never fewer threads;
several threads per worker also get fewer threads."""

from __future__ import annotations

import pytest

from ebf.dask.branches import branch_memory_advice, layout_advice, pause_fraction

GiB = 2**30


def test_one_thread_per_worker_is_told_memory_and_budget_not_threads():
    share = pause_fraction() * 4 * GiB  # what one branch may use on a 4 GiB worker
    text = layout_advice(1, 4 * GiB, GiB)
    assert text.startswith("The workers run one thread each with a memory limit of 4.00 GiB")
    assert "raise branch_memory (--branch-memory) up to" in text  # the worker has room
    assert "give each worker more memory (SLURM/PBS: the job's --memory" in text
    assert text.endswith("or make the branches smaller")
    assert "thread" not in text.split("each", 1)[1]
    full = layout_advice(1, 4 * GiB, int(share))  # the budget already takes the worker's room
    assert "up to" not in full and "give each worker more memory" in full


def test_several_threads_per_worker_are_told_fewer_threads():
    text = layout_advice(4, 16 * GiB, GiB)
    assert text.startswith("The workers run 4 threads each, so 4 branches share a memory "
                           "limit of 16.00 GiB")
    assert "run fewer threads per worker" in text and "give each worker more memory" in text


def test_no_memory_limit_only_names_the_budget():
    assert layout_advice(2, None, GiB) == ("Raise branch_memory (--branch-memory), or make the "
                                           "branches smaller")


@pytest.mark.parametrize("threads", [1, 2])
def test_the_advice_reads_the_clients_workers(threads):
    from distributed import Client, LocalCluster

    with LocalCluster(processes=False, n_workers=1, threads_per_worker=threads,
                      memory_limit="4GiB", dashboard_address=":0") as cluster, \
            Client(cluster, set_as_default=False) as client:
        text = branch_memory_advice(client, GiB)
    assert text == layout_advice(threads, 4 * GiB, GiB)
    assert ("fewer threads per worker" in text) == (threads > 1)


def test_a_sub_sample_too_large_for_its_budget_gets_the_layout_advice(dask_client):
    """The sub-sample forest's check says the same, from the session's workers (one thread
    each), and how many sub-samples would fit."""
    import dask.dataframe as dd
    import numpy as np
    import pandas as pd

    from ebf.dask import BranchMemoryError, DaskSubsampleForestRegressor

    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.random((600, 3)), columns=["a", "b", "c"])
    ddf = dd.from_pandas(df.assign(y=df["a"] * 3), npartitions=2)
    model = DaskSubsampleForestRegressor(n_subsamples=1, n_estimators=2, branch_memory="50kB",
                                         random_state=0)
    with pytest.raises(BranchMemoryError, match="use n_subsamples >= ") as failed:
        model.fit(ddf[["a", "b", "c"]], ddf["y"])
    assert "The workers run one thread each" in str(failed.value)
    assert "fewer threads" not in str(failed.value)
