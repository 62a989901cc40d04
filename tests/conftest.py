"""Shared fixtures: one in-process Dask cluster for the whole test session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def dask_client():
    """A ``distributed.Client`` on ``LocalCluster(processes=False)``: 2 workers, 1 thread each.

    It is the default client while the session runs, so code given ``client=None`` uses it.
    Tests that need other clusters create them with ``Client(..., set_as_default=False)``.
    """
    from distributed import Client, LocalCluster

    with LocalCluster(processes=False, n_workers=2, threads_per_worker=1,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        yield client
