"""The MLflow model flavor (:mod:`ebf.mlflow`) against a real tracking server, and
``ebf retrain --mlflow-register`` putting its champion into MLflow's Model Registry.

The server is the full ``mlflow`` package (a sqlite backend, artifacts served by the server),
which pins pyarrow below our pin: it lives in a virtual environment of its own, built once
under ``~/.cache/ebf-tests/mlflow-server-<version>`` (``EBF_TEST_CACHE`` moves it; a file lock
keeps two xdist workers from building it at once) and runs as a separate process, one for
this module. The client is our environment's ``mlflow-skinny``. Models are tiny; the checks:
a pyfunc loaded from ``models:/<name>@champion`` predicts the numbers ``ebf predict`` writes,
bit for bit. Pyfuncs load with ``suppress_warnings=True``: MLflow's check of the model's
pinned requirements against the environment maps every installed package to its modules
once per process (about 12 s here), which says nothing about ebf.

``mlflow models predict`` runs only on demand (``-m soak``): with ``--env-manager local`` from
ebf's own environment (mlflow-skinny's command line) it predicts the numbers ``ebf predict``
writes, but a process that starts MLflow and loads the model costs seconds the default run
does not need; the other managers (conda, virtualenv, uv) build the model's environment from
the package index, and the server's environment cannot import ebf (nor may ebf be installed
there: its pyarrow is not ours).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("mlflow")

import mlflow  # noqa: E402

import ebf  # noqa: E402
import ebf.mlflow  # noqa: E402
from ebf.artifact import ChecksumError, model_hash  # noqa: E402
from pipelines.cli import main  # noqa: E402
from pipelines.predict import predict_to_parquet  # noqa: E402
from pipelines.registry.retrain import DEFAULT_TOLERANCES  # noqa: E402
from pipelines.registry.store import Registry  # noqa: E402

#: The full mlflow package of the test server (our client is mlflow-skinny of the same line).
SERVER_VERSION = "3.17.2"
FEATURES = ["a", "b", "c"]


def _cache() -> Path:
    return Path(os.environ.get("EBF_TEST_CACHE") or Path.home() / ".cache" / "ebf-tests")


def server_environment(version: str = SERVER_VERSION) -> Path:
    """The virtual environment holding ``mlflow==version``, built once (``.ready`` marks a
    complete one; a lock file serialises builders)."""
    venv = _cache() / f"mlflow-server-{version}"
    if (venv / ".ready").exists():
        return venv
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"mlflow-server-{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (venv / ".ready").exists():
            shutil.rmtree(venv, ignore_errors=True)  # a build that was interrupted
            base = getattr(sys, "_base_executable", sys.executable)
            steps = [[base, "-m", "venv", str(venv)],
                     [str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                      "--disable-pip-version-check", f"mlflow=={version}"]]
            for step in steps:
                proc = subprocess.run(step, capture_output=True, text=True, timeout=900)
                if proc.returncode != 0:
                    pytest.skip(f"cannot build the MLflow server's environment ({' '.join(step)}"
                                f"): {proc.stderr.strip()[-500:]}")
            (venv / ".ready").touch()
    return venv


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The URL of an MLflow tracking server with a sqlite backend, for this module."""
    venv = server_environment()
    root = tmp_path_factory.mktemp("mlflow-server")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    env["MLFLOW_DISABLE_TELEMETRY"] = "true"
    log = open(root / "server.log", "w")
    proc = subprocess.Popen(
        [str(venv / "bin" / "mlflow"), "server", "--backend-store-uri",
         f"sqlite:///{root / 'mlflow.db'}", "--artifacts-destination", str(root / "artifacts"),
         "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the MLflow server exited ({proc.returncode}):\n"
                            f"{(root / 'server.log').read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the MLflow server did not answer /health in 180 s:\n"
                            f"{(root / 'server.log').read_text()[-3000:]}")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@pytest.fixture
def tracking(server, monkeypatch):
    """MLflow's client at the server for one test (its URI unset after)."""
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    mlflow.set_tracking_uri(server)
    try:
        yield server
    finally:
        mlflow.set_tracking_uri(None)


def _frame(n: int, seed: int, classes: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(rng.random((n, 3)), columns=FEATURES)
    signal = 3 * frame["a"] + np.sin(6 * frame["c"])
    frame["y"] = (np.where(signal + rng.normal(0, 0.3, n) > 1.8, "high", "low") if classes
                  else signal + rng.normal(0, 0.2, n))
    return frame


def _saved(tmp_path: Path, classes: bool) -> tuple[str, str, pd.DataFrame]:
    """A tiny EBF (2 trees, 2 trunk leaves) saved, and 200 new rows as Parquet."""
    train, test = _frame(300, 0, classes), _frame(200, 1, classes)
    cls = (ebf.EmpiricalBayesianForestClassifier if classes
           else ebf.EmpiricalBayesianForestRegressor)
    model = cls(n_estimators=2, trunk_max_leaves=2, random_state=0).fit(
        train[FEATURES], train["y"])
    path = str(ebf.save(model, tmp_path / "model"))
    (tmp_path / "data").mkdir()
    test.to_parquet(tmp_path / "data" / "part-0.parquet", index=False)
    return path, str(tmp_path / "data"), test[FEATURES]


def _ebf_predict(model: str, data: str, out: Path, client, **kwargs) -> pd.DataFrame:
    predict_to_parquet(model, data, out, client=client, **kwargs)
    return pd.read_parquet(out)


def test_pyfunc_from_the_champion_alias_predicts_what_ebf_predict_writes(
        tmp_path, tracking, dask_client):
    model_dir, data, X = _saved(tmp_path, classes=False)
    expected = _ebf_predict(model_dir, data, tmp_path / "pred", dask_client)
    with mlflow.start_run() as run:
        info = ebf.mlflow.log_model(model_dir, "model", registered_model_name="tiny",
                                    alias="champion")
    assert int(info.registered_model_version) == 1 and info.run_id == run.info.run_id
    client = mlflow.MlflowClient()
    assert client.get_model_version_by_alias("tiny", "champion").version == "1"

    pyfunc = mlflow.pyfunc.load_model("models:/tiny@champion", suppress_warnings=True)
    got = pyfunc.predict(X)
    pd.testing.assert_frame_equal(got.reset_index(drop=True), expected, check_exact=True)
    assert list(got.columns) == ["mean", "std", "q05", "q50", "q95", "branch"]

    # the signature: features in, the prediction columns out, the quantile levels a parameter
    sig = pyfunc.metadata.signature
    assert sig.inputs.input_names() == FEATURES
    assert [t.name for t in sig.inputs.input_types()] == ["double"] * 3
    assert sig.outputs.input_names() == list(expected.columns)
    assert sig.params.to_dict()[0]["default"] == [0.05, 0.5, 0.95]

    # other levels per call: ebf predict's columns for the same levels, bit for bit
    levels = [0.1, 0.9]
    again = _ebf_predict(model_dir, data, tmp_path / "pred2", dask_client, quantiles=levels)
    pd.testing.assert_frame_equal(pyfunc.predict(X, params={"quantiles": levels})
                                  .reset_index(drop=True), again, check_exact=True)

    # the model's own files, its manifest and its calibration map are readable artifacts
    local = Path(mlflow.artifacts.download_artifacts("models:/tiny@champion",
                                                     dst_path=str(tmp_path / "dl")))
    assert model_hash(local / "model") == model_hash(model_dir)
    manifest = json.loads((local / "model" / "manifest.json").read_text())
    assert manifest["model_hash"] == model_hash(model_dir)
    calibration = json.loads((local / "calibration.json").read_text())
    assert calibration["kind"] == "recalibration"
    saved = ebf.load(model_dir)
    assert calibration["map"] == {k: v.tolist() for k, v in
                                  saved.recalibration_.to_state().items()}
    requirements = (local / "requirements.txt").read_text().split()
    assert f"ebf=={ebf.library_version()}" in requirements
    assert any(r.startswith("numpy==") for r in requirements)
    assert set(pyfunc.metadata.flavors) == {"ebf", "python_function"}
    assert pyfunc.metadata.flavors["python_function"]["loader_module"] == "ebf.mlflow"
    assert not list(local.rglob("*.pkl"))

    # load_model gives the estimator back, by version as by alias
    loaded = ebf.mlflow.load_model("models:/tiny/1")
    assert type(loaded) is type(saved)
    np.testing.assert_array_equal(loaded.predict_quantiles(X, [0.2, 0.7]),
                                  saved.predict_quantiles(X, [0.2, 0.7]))
    assert isinstance(pyfunc.get_raw_model(), type(saved))


def test_a_classifier_in_memory_logs_and_predicts_probabilities(tmp_path, tracking,
                                                                  dask_client):
    model_dir, data, X = _saved(tmp_path, classes=True)
    expected = _ebf_predict(model_dir, data, tmp_path / "pred", dask_client)
    with mlflow.start_run():
        info = ebf.mlflow.log_model(ebf.load(model_dir), "classifier")
    got = mlflow.pyfunc.load_model(info.model_uri, suppress_warnings=True).predict(X)
    assert list(got.columns) == ["proba_high", "proba_low", "predicted", "branch"]
    pd.testing.assert_frame_equal(got.reset_index(drop=True), expected, check_exact=True,
                                  check_dtype=False)
    assert got["predicted"].tolist() == expected["predicted"].tolist()
    local = Path(mlflow.artifacts.download_artifacts(info.model_uri,
                                                     dst_path=str(tmp_path / "dl")))
    calibration = json.loads((local / "calibration.json").read_text())
    assert calibration["kind"] == "class_calibration"


def _retrain(tmp_path: Path, window: str, server: str, capsys, *extra: str) -> dict:
    argv = ["retrain", str(tmp_path / "reg"), window, "--target", "y", "--n-estimators", "2",
            "--trunk-leaves", "2", "--quiet", "--n-workers", "1", "--mlflow-uri", server,
            "--mlflow-register", "nightly", "--json", *extra]
    status = main(argv)
    out, err = capsys.readouterr()
    body = json.loads(out)
    assert status in (0, 10), err
    return body


def test_retrain_registers_its_champion_and_moves_the_alias(tmp_path, tracking, capsys,
                                                             monkeypatch):
    monkeypatch.setenv("EBF_LOCAL_PROCESSES", "0")
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    windows = []
    for i, name in enumerate(("jan", "feb")):
        (tmp_path / name).mkdir()
        _frame(800, 10 + i).to_parquet(tmp_path / name / "part-0.parquet", index=False)
        windows.append(str(tmp_path / name))
    client = mlflow.MlflowClient()

    first = _retrain(tmp_path, windows[0], tracking, capsys)
    reg = first["mlflow"]["registered"]
    assert first["decision"] == "trained" and reg["version"] == 1 and reg["logged"]
    champion = client.get_model_version_by_alias("nightly", "champion")
    assert champion.run_id == first["mlflow"]["run_id"] and champion.version == "1"

    # every tolerance wide open: the challenger is promoted, the alias follows it
    wide = [arg for name in DEFAULT_TOLERANCES
            for arg in (f"--tolerance-{name.replace('_', '-')}", "1000")]
    second = _retrain(tmp_path, windows[1], tracking, capsys, *wide)
    assert second["decision"] == "promoted" and Registry(tmp_path / "reg").current() == 2
    assert second["mlflow"]["registered"]["version"] == 2
    champion = client.get_model_version_by_alias("nightly", "champion")
    assert champion.version == "2" and champion.run_id == second["mlflow"]["run_id"]
    pyfunc = mlflow.pyfunc.load_model("models:/nightly@champion", suppress_warnings=True)
    assert pyfunc.metadata.flavors["ebf"]["model_hash"] == model_hash(second["model_url"])

    # the re-run on the same inputs registers nothing twice; the text report says where it is
    argv = ["retrain", str(tmp_path / "reg"), windows[1], "--quiet", "--mlflow-uri", tracking,
            "--mlflow-register", "nightly", *wide]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "MLflow Model Registry: nightly version 2, alias 'champion' " \
        "(models:/nightly@champion)" in out, out
    versions = client.search_model_versions("name = 'nightly'")
    assert sorted(int(v.version) for v in versions) == [1, 2]


# ----------------------------------------------------------- errors (no server needed)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[str, pd.DataFrame]:
    path = tmp_path_factory.mktemp("tiny")
    model_dir, _, X = _saved(path, classes=False)
    return model_dir, X


def test_errors_come_before_anything_is_logged(tiny, tmp_path, monkeypatch):
    model_dir, X = tiny
    # no tracking server at all: each error must come before MLflow is contacted
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    with pytest.raises(ValueError, match="give registered_model_name too"):
        ebf.mlflow.log_model(model_dir, "m", alias="champion")
    with pytest.raises(ValueError, match="quantiles"):
        ebf.mlflow.log_model(model_dir, "m", quantiles=[0.5, 1.5])
    with pytest.raises(ValueError, match="not fitted|fit"):
        ebf.mlflow.log_model(ebf.EmpiricalBayesianForestRegressor(), "m")
    with pytest.raises(FileNotFoundError):
        ebf.mlflow.log_model(tmp_path / "nowhere", "m")
    with pytest.raises(TypeError, match="ebf and mondrian estimators"):
        ebf.mlflow.save_model(object(), tmp_path / "obj")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(FileExistsError, match="not empty"):
        ebf.mlflow.save_model(model_dir, tmp_path / "full")
    monkeypatch.setitem(sys.modules, "mlflow", None)
    with pytest.raises(ImportError, match=r'pip install "ebf\[mlflow\]"'):
        ebf.mlflow.save_model(model_dir, tmp_path / "m")
    assert not (tmp_path / "m").exists() and not (tmp_path / "obj").exists()


def test_a_damaged_model_or_another_flavor_is_refused_on_load(tiny, tmp_path):
    model_dir, X = tiny
    ebf.mlflow.save_model(model_dir, tmp_path / "mlm", input_example=X.head(3))
    pyfunc = mlflow.pyfunc.load_model(str(tmp_path / "mlm"), suppress_warnings=True)
    np.testing.assert_array_equal(pyfunc.predict(X)["mean"], ebf.load(model_dir).predict(X))
    assert pyfunc.metadata.saved_input_example_info["type"] == "dataframe"
    example = json.loads((tmp_path / "mlm" / "input_example.json").read_text())
    assert example["columns"] == FEATURES and len(example["data"]) == 3
    shard = next((tmp_path / "mlm" / "model" / "shards").iterdir())
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(ChecksumError):
        mlflow.pyfunc.load_model(str(tmp_path / "mlm"), suppress_warnings=True)
    with pytest.raises(ChecksumError):
        ebf.mlflow.load_model(str(tmp_path / "mlm"))

    other = mlflow.models.Model()
    other.add_flavor("python_function", loader_module="somewhere.else")
    (tmp_path / "other").mkdir()
    other.save(str(tmp_path / "other" / "MLmodel"))
    with pytest.raises(ValueError, match="has no 'ebf' flavor.*python_function"):
        ebf.mlflow.load_model(str(tmp_path / "other"))


@pytest.mark.soak
def test_mlflow_models_predict_gives_the_numbers_of_ebf_predict(tmp_path, dask_client):
    model_dir, data, X = _saved(tmp_path, classes=False)
    expected = _ebf_predict(model_dir, data, tmp_path / "pred", dask_client)
    ebf.mlflow.save_model(model_dir, tmp_path / "mlm")
    X.to_csv(tmp_path / "rows.csv", index=False)  # floats written to round-trip exactly
    cli = Path(sys.executable).parent / "mlflow"
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                          os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([str(cli), "models", "predict", "-m", str(tmp_path / "mlm"), "-i",
                           str(tmp_path / "rows.csv"), "-t", "csv", "--env-manager", "local",
                           "-o", str(tmp_path / "out.json")], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = pd.DataFrame(json.loads((tmp_path / "out.json").read_text())["predictions"])
    pd.testing.assert_frame_equal(got, expected, check_exact=True)
