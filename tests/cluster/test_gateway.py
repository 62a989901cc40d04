"""cluster.gateway: the options ebf asks a dask-gateway server for, written into a server's
options, sent by dask-gateway's own client; and clear, quick errors for a wrong address.

No gateway server runs here: a small HTTP server on localhost answers the two requests of
the gateway API that come before a cluster starts (its version and its cluster options) and
records the request that would start one.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cluster import SchedulerConnectionError
from cluster.gateway import gateway_cluster, gateway_options, probe_gateway, set_gateway_options

#: A server's options as dask-gateway's documentation configures them (worker_memory in GiB).
SERVER_OPTIONS = [
    {"field": "worker_cores", "default": 1, "label": "Worker Cores",
     "spec": {"type": "int", "min": 1, "max": 8}},
    {"field": "worker_memory", "default": 1.0, "label": "Worker Memory (GiB)",
     "spec": {"type": "float", "min": 1, "max": 32}},
    {"field": "image", "default": "daskgateway/dask-gateway:latest", "label": "Image",
     "spec": {"type": "string"}},
    {"field": "environment", "default": {"TZ": "UTC"}, "label": "Environment",
     "spec": {"type": "mapping"}},
]


def _options(spec=SERVER_OPTIONS):
    options_module = pytest.importorskip(
        "dask_gateway.options", reason="needs dask-gateway (pip install 'ebf[cluster]')")
    return options_module.Options._from_spec(spec)


def test_gateway_options_in_the_documented_names_and_units():
    assert gateway_options() == {"worker_cores": 1, "worker_memory": 4.0}
    assert gateway_options(2, 3 * 2**29, image="ebf:0.1.0", environment={"A": "1"}) == {
        "worker_cores": 2, "worker_memory": 1.5, "image": "ebf:0.1.0",
        "environment": {"A": "1"}}
    assert gateway_options(worker_memory="10GB")["worker_memory"] == pytest.approx(10e9 / 2**30)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"worker_cores": 0}, ValueError, "worker_cores must be a positive integer"),
    ({"worker_memory": "big"}, ValueError, "worker_memory must be a positive number"),
    ({"image": " "}, ValueError, "image must be a container image reference"),
    ({"environment": {"A": 1}}, TypeError, "environment must map names to strings"),
    ({"worker_cores": 2, "worker_memory": "4GiB", "branch_memory": "2GiB"}, ValueError,
     "a worker of 2 threads with a memory limit of 4GiB fits 2 branches of 2GiB"),
])
def test_bad_gateway_options_say_what_to_do(kwargs, error, match):
    with pytest.raises(error, match=match):
        gateway_options(**kwargs)


def test_set_gateway_options_writes_them_into_the_servers():
    options = set_gateway_options(_options(), gateway_options(
        4, "12GiB", image="ebf:0.1.0", environment={"EBF_CONFIG": "/etc/ebf.toml"}))
    assert dict(options) == {"worker_cores": 4, "worker_memory": 12.0, "image": "ebf:0.1.0",
                             "environment": {"TZ": "UTC", "EBF_CONFIG": "/etc/ebf.toml"}}


def test_set_gateway_options_names_what_the_server_lacks_or_refuses():
    small = _options(SERVER_OPTIONS[:2])
    with pytest.raises(ValueError, match=r"the dask-gateway server at http://gw offers no "
                       r"cluster option 'image'; it offers worker_cores, worker_memory"):
        set_gateway_options(small, gateway_options(image="ebf:0.1.0"), "http://gw")
    with pytest.raises(ValueError, match=r"refuses worker_cores=16: worker_cores must be <= 8"):
        set_gateway_options(small, gateway_options(16, "32GiB"))


def test_whole_gib_go_into_an_integer_memory_option():
    spec = [dict(SERVER_OPTIONS[1], default=1, spec={"type": "int", "min": 1, "max": 64})]
    options = set_gateway_options(_options(spec), {"worker_memory": 7.5})
    assert options["worker_memory"] == 8  # rounded up: never less than asked


class _FakeGateway(BaseHTTPRequestHandler):
    """The gateway API up to starting a cluster, which it refuses (no backend here)."""

    posted: list = []

    def log_message(self, *args):  # keep the test output clean
        pass

    def _send(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/api/version":
            self._send(200, {"version": "2026.3.0"})
        elif self.path == "/api/v1/options":
            self._send(200, {"cluster_options": SERVER_OPTIONS})
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self):
        length = int(self.headers["Content-Length"])
        type(self).posted.append((self.path, json.loads(self.rfile.read(length))))
        self._send(500, {"error": "this test gateway starts no clusters"})


@pytest.fixture
def fake_gateway():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeGateway)
    _FakeGateway.posted = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_gateway_cluster_sends_ebfs_options_through_dask_gateway(fake_gateway):
    dask_gateway = pytest.importorskip("dask_gateway")
    assert probe_gateway(fake_gateway, timeout=5) == "2026.3.0"
    with pytest.raises(dask_gateway.GatewayServerError, match="starts no clusters"):
        gateway_cluster(fake_gateway + "/", worker_cores=2, worker_memory="6GiB",
                        image="ebf:0.1.0", timeout=5)
    (path, body), = _FakeGateway.posted
    assert path == "/api/v1/clusters/"
    assert body == {"cluster_options": {"worker_cores": 2, "worker_memory": 6.0,
                                        "image": "ebf:0.1.0", "environment": {"TZ": "UTC"}}}


def test_gateway_cluster_checks_its_options_before_connecting():
    with pytest.raises(ValueError, match="adapt must be"):
        gateway_cluster("http://127.0.0.1:9", adapt=(3, 1))
    with pytest.raises(ValueError, match="worker_cores must be a positive integer"):
        gateway_cluster("http://127.0.0.1:9", worker_cores=0)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_nothing_listening_is_a_clear_error():
    pytest.importorskip("dask_gateway")
    address = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(SchedulerConnectionError,
                       match=rf"could not reach a dask-gateway server at '{address}'.*check "
                       "the address"):
        gateway_cluster(address, timeout=5)


def test_a_silent_server_is_a_clear_error_within_the_timeout():
    with socket.socket() as server:  # accepts connections, never answers
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = f"http://127.0.0.1:{server.getsockname()[1]}"
        with pytest.raises(SchedulerConnectionError,
                           match=r"no answer from a dask-gateway server at .* within 0.5 s"):
            probe_gateway(address, timeout=0.5)


def test_something_else_answering_is_a_clear_error(fake_gateway):
    with pytest.raises(SchedulerConnectionError,
                       match=r"is not a dask-gateway server \(HTTP 404 for .*/x/api/version\)"):
        probe_gateway(fake_gateway + "/x", timeout=5)


def test_missing_dask_gateway_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "dask_gateway", None)  # import fails
    with pytest.raises(ImportError, match=r"gateway_cluster needs dask-gateway: pip install "
                       r"'ebf\[cluster\]'"):
        gateway_cluster("http://127.0.0.1:9")
