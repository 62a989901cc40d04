"""Shared fixtures: one in-process Dask cluster for the whole test session; numba's kernel
cache warmed once before the worker processes of ``pytest -n`` start; the ``slow`` marks and
the order of the files (longest first), from measured durations (``tests/durations.py``)."""

from __future__ import annotations

import sys
import time

import pytest

#: tests/data holds files, and the script that wrote them (not to be run by a collection)
collect_ignore = ["data"]


#: The largest graph a test may send to a Dask scheduler: above it Dask warns, and the
#: warning is an error (``filterwarnings`` in pyproject.toml).
LARGE_GRAPH = "10MiB"


def pytest_configure(config: pytest.Config) -> None:
    """Set Dask's large-graph threshold to :data:`LARGE_GRAPH` in every process. Under
    ``pytest -n N`` (the README's command, CI), compile or load every kernel once
    here, in the controller, before the workers start: each worker then loads the kernels
    from numba's on-disk cache instead of compiling them inside whichever test touches one
    first, so that a test's time (and its ``slow`` mark) is its own, not the compiler's."""
    import dask

    dask.config.set({"distributed.admin.large-graph-warning-threshold": LARGE_GRAPH})
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return
    from pipelines.warm import warm_kernels

    t0 = time.perf_counter()
    n = config.option.numprocesses
    seconds = warm_kernels(processes=n if isinstance(n, int) else 2)
    parts = ", ".join(f"{name} {s:.1f} s" for name, s in seconds.items())
    sys.stderr.write(f"numba kernels ready in {time.perf_counter() - t0:.1f} s ({parts})\n")


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by mark
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``slow`` the tests measured at 3 s or more (``tests/durations.json``), and every
    ``soak`` test (so that ``-m "not slow"``, which replaces the default ``-m "not soak"``,
    leaves them out too)."""
    from tests.durations import slow_tests

    slow = slow_tests()
    for item in items:
        if item.nodeid in slow or item.get_closest_marker("soak"):
            item.add_marker(pytest.mark.slow)
    # The files with the most measured seconds first (tests keep their order within a
    # file): ``pytest -n 2 --dist loadfile`` hands files out in this order, so the run ends
    # on small files instead of one worker finishing a long file while the other waits.
    seconds: dict[str, float] = {}
    for nodeid, s in slow.items():
        path = nodeid.split("::")[0]
        seconds[path] = seconds.get(path, 0.0) + s
    items.sort(key=lambda item: -seconds.get(item.nodeid.split("::")[0], 0.0))


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
