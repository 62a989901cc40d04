"""cluster.connect / current_client: the embedded local cluster, existing schedulers, errors."""

from __future__ import annotations

import json
import logging
import socket
import time
import weakref

import dask
import distributed
import distributed.client
import pytest
from distributed.deploy.utils import nprocesses_nthreads
from distributed.system import MEMORY_LIMIT

from cluster import (
    NoClientError,
    SchedulerConnectionError,
    connect,
    current_client,
    dashboard_link,
)
from cluster.connect import _cpu_count, _local_sizing


@pytest.fixture
def no_configured_scheduler(monkeypatch):
    """No DASK_SCHEDULER_ADDRESS and no scheduler-address config for the test."""
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    with dask.config.set({"scheduler-address": None}):
        yield


@pytest.fixture
def no_running_client(monkeypatch):
    """Hide every client of this process (a session fixture may hold one) from get_client:
    the global registry and the context-local current client that ``with Client()`` sets."""
    monkeypatch.setattr(distributed.client, "_global_clients", weakref.WeakValueDictionary())
    token = distributed.client._current_client.set(None)
    yield
    distributed.client._current_client.reset(token)


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_connect_without_address_starts_a_local_cluster(no_configured_scheduler, caplog):
    caplog.set_level(logging.INFO, logger="ebf.cluster")
    with connect(processes=False, n_workers=2, dashboard_address=":0") as client:
        assert isinstance(client.cluster, distributed.LocalCluster)
        assert len(client.nthreads()) == 2
        assert client.submit(sum, [1, 2, 3]).result() == 6
        assert current_client() is client
        link = dashboard_link(client)
        assert link is not None and link.startswith("http")
        cluster = client.cluster
    assert cluster.status.name == "closed"  # closing the client closed the cluster it started
    messages = " ".join(r.getMessage() for r in caplog.records if r.name == "ebf.cluster")
    assert "local Dask cluster" in messages and link in messages


def test_local_cluster_sized_to_the_machine(no_configured_scheduler):
    cores = _cpu_count()
    with connect(processes=False, dashboard_address=None) as client:
        assert list(client.nthreads().values()) == [cores]  # one worker, a thread per core
        (worker,) = client.cluster.workers.values()
        assert worker.memory_manager.memory_limit == MEMORY_LIMIT  # "auto": all of it


def test_local_sizing_rules():
    cores = _cpu_count()
    assert _local_sizing(None, None, processes=True) == nprocesses_nthreads(cores)
    assert _local_sizing(None, None, processes=False) == (1, cores)
    assert _local_sizing(2, None, processes=True) == (2, max(1, cores // 2))
    assert _local_sizing(None, 1, processes=True) == (cores, 1)
    assert _local_sizing(3, 2, processes=True) == (3, 2)
    with pytest.raises(ValueError, match="n_workers"):
        _local_sizing(0, None, processes=True)


def test_dashboard_port_taken_falls_back_to_a_free_port(no_configured_scheduler):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with connect(processes=False, n_workers=1, dashboard_address=f":{port}") as client:
            link = dashboard_link(client)
            assert link is not None and f":{port}/" not in link


def test_connect_to_an_address_and_a_scheduler_file(no_configured_scheduler, tmp_path):
    with distributed.LocalCluster(
        processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None
    ) as cluster:
        with connect(cluster.scheduler_address, timeout=5) as client:
            assert client.submit(pow, 2, 5).result() == 32
        path = tmp_path / "scheduler.json"
        path.write_text(json.dumps({"address": cluster.scheduler_address}))
        with connect(scheduler_file=str(path), timeout=5) as client:
            assert client.scheduler.address == cluster.scheduler_address
        assert cluster.status.name == "running"  # a client never closes a cluster it found


def test_unreachable_scheduler_raises_within_the_timeout(no_configured_scheduler):
    address = f"tcp://127.0.0.1:{_closed_port()}"
    start = time.monotonic()
    with pytest.raises(SchedulerConnectionError) as info:
        connect(address, timeout=1)
    elapsed = time.monotonic() - start
    assert isinstance(info.value, ConnectionError) and isinstance(info.value, TimeoutError)
    assert address in str(info.value) and "cluster.connect()" in str(info.value)
    assert elapsed < 15  # the timeout is 1 s; generous margin for a loaded machine


def test_environment_address_is_used(monkeypatch):
    address = f"tcp://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", address)
    with pytest.raises(ConnectionError, match="DASK_SCHEDULER_ADDRESS") as info:
        connect(timeout=0.5)
    assert address in str(info.value)


def test_config_address_is_used(monkeypatch):
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    address = f"tcp://127.0.0.1:{_closed_port()}"
    with dask.config.set({"scheduler-address": address}):
        with pytest.raises(TimeoutError, match="scheduler-address"):
            connect(timeout=0.5)


def test_missing_scheduler_file_raises(tmp_path):
    path = tmp_path / "nope.json"
    with pytest.raises(SchedulerConnectionError, match="nope.json"):
        connect(scheduler_file=str(path), timeout=0.3)


def test_bad_arguments():
    with pytest.raises(ValueError, match="timeout"):
        connect("tcp://127.0.0.1:1", timeout=0)
    with pytest.raises(ValueError, match="either address or scheduler_file"):
        connect("tcp://127.0.0.1:1", scheduler_file="s.json")


def test_current_client_without_a_client_says_to_connect(no_running_client):
    with pytest.raises(NoClientError, match=r"cluster import connect"):
        current_client()


def test_current_client_returns_the_given_or_the_default(no_configured_scheduler):
    with connect(processes=False, n_workers=1, dashboard_address=None) as client:
        assert current_client(client) is client
        assert current_client() is client
    with pytest.raises(NoClientError, match="closed"):
        current_client(client)
