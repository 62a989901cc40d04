"""``ebf registry list|show|promote|rollback``, and ``REGISTRY[@version]`` in predict / evaluate.

Predict and evaluate start a local cluster of threads (``EBF_LOCAL_PROCESSES=0``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ebf.artifact import model_hash
from pipelines.cli import main
from pipelines.io import read_parquet_metadata
from pipelines.registry.store import Registry

from .conftest import TINY_FEATURES


@pytest.fixture
def registry(tmp_path, tiny_model_dir):
    """A registry of three versions of the tiny model: 1 promoted, 2 rejected, 3 current."""
    reg = Registry(tmp_path / "reg")
    records = [
        ({"decision": "promoted", "metrics": {"rmse": 1.23456, "nlpd": 0.5,
                                              "expected_calibration_error": 0.01}}, True),
        ({"decision": "rejected", "metrics": {"rmse": 2.0}, "lineage": {"parent": 1}}, False),
        ({"decision": "promoted\x1b[31m", "lineage": {"parent": 1}, "key": "k3"}, True),
    ]
    with reg.lock():
        for record, promote in records:
            reg.publish(lambda url: shutil.copytree(tiny_model_dir, url), record, promote)
    return reg


def test_list_show_promote_rollback(registry, capsys):
    root = registry.root
    assert main(["registry", "list", root]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{registry.url}: 3 versions, current v0003"
    assert out[1].split() == ["version", "created_utc", "decision", "parent", "metrics"]
    first, second, third = (line.split() for line in out[2:])
    assert first[0] == "v0001" and first[2:] == ["promoted", "rmse=1.235", "nlpd=0.5",
                                                 "expected_calibration_error=0.01"]
    assert second[0] == "v0002" and second[2:] == ["rejected", "v0001", "rmse=2"]
    assert third[:2] == ["*", "v0003"] and third[3:] == ["promoted?[31m", "v0001"]

    assert main(["registry", "show", f"{root}@v2"]) == 0
    assert json.loads(capsys.readouterr().out) == registry.record(2)
    assert main(["registry", "show", f"{root}/models/ebf"]) == 0  # the current version
    assert json.loads(capsys.readouterr().out)["key"] == "k3"
    # --json: one object on stdout, for machines
    assert main(["registry", "list", root, "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert listing["ebf_output"] == "registry" and listing["current"] == 3
    assert [v["version"] for v in listing["versions"]] == [1, 2, 3]
    assert listing["versions"][1]["record"] == json.loads(json.dumps(registry.record(2)))
    assert main(["registry", "show", f"{root}@v2", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["ebf_output"], shown["version"]) == ("version", 2)

    assert main(["registry", "promote", f"{root}@2"]) == 0
    assert "current version v0002 (was v0003)" in capsys.readouterr().out
    assert registry.current() == 2 and registry.history() == [1, 3]
    assert main(["registry", "rollback", root, "--name", "ebf"]) == 0
    assert "rolled back from v0002 to v0003" in capsys.readouterr().out
    assert registry.current() == 3


@pytest.mark.parametrize("action", ["list", "show"])
def test_a_reader_that_stops_reading_is_not_an_error(registry, action):
    """``ebf registry show ... | head``: when the pipe's reader has gone, the command ends
    silently with 141 (a command ended by SIGPIPE), not with "error: Broken pipe"."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the command writes a byte
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root),
                                                        os.environ.get("PYTHONPATH", "")]))
    try:
        done = subprocess.run([sys.executable, "-m", "pipelines", "registry", action,
                               str(registry.root)], stdout=write, stderr=subprocess.PIPE,
                              env=env, text=True, timeout=120)
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (141, "")


@pytest.mark.parametrize("argv, status, text", [
    (["show", "{root}@9"], 2, "version 9 is not in the registry"),
    (["promote", "{root}"], 2, "name the version to promote"),
    (["list", "{root}@1"], 2, "takes a registry, not a version"),
    (["rollback", "{root}@1"], 2, "takes a registry, not a version"),
    (["list", "{root}", "--name", "other"], 0, "0 versions, no current version"),
    (["show", "{root}/nothing"], 1, "is not a model registry"),
    (["compare", "{root}", "{root}", "--versions", "1", "3", "1"], 2,
     "--versions names v0001 more than once; name each version once"),
])
def test_errors_are_one_line_with_a_status(registry, capsys, argv, status, text):
    argv = [a.format(root=registry.root) for a in argv]
    assert main(["registry", *argv]) == status
    captured = capsys.readouterr()
    assert text in captured.out + captured.err
    if status:
        assert captured.err.count("\n") == 1
        assert captured.err.startswith(f"ebf registry {argv[0]}: error:")


def test_rollback_past_the_first_version_and_a_busy_registry(registry, capsys):
    assert main(["registry", "rollback", registry.root]) == 0
    assert main(["registry", "rollback", registry.root]) == 1
    assert "nothing to roll back to" in capsys.readouterr().err
    with registry.lock():
        assert main(["registry", "promote", f"{registry.root}@3"]) == 1
    err = capsys.readouterr().err
    assert "is busy" in err and f"process {os.getpid()}" in err
    assert registry.current() == 1


def test_list_warns_about_unreadable_records(registry, capsys):
    path = os.path.join(registry.url, "v0002", "version.json")
    with open(path, "w") as f:
        f.write("[]")
    assert main(["registry", "list", registry.root]) == 0
    captured = capsys.readouterr()
    assert "(unreadable record)" in captured.out
    assert "warning: the version record" in captured.err and "v0002" in captured.err


@pytest.fixture
def local_threads(monkeypatch):
    """CLI clusters of threads (fast start) and no scheduler from the environment."""
    monkeypatch.setenv("EBF_LOCAL_PROCESSES", "0")
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)


def test_predict_and_evaluate_take_a_registry(registry, tiny_model_dir, tmp_path, capsys,
                                              local_threads):
    rng = np.random.default_rng(1)
    data = pd.DataFrame(rng.random((200, 3)), columns=TINY_FEATURES)
    data["y"] = 3 * data["x0"] + rng.normal(0, 0.1, 200)
    os.makedirs(tmp_path / "data")
    data.to_parquet(tmp_path / "data" / "part.0.parquet")
    src = str(tmp_path / "data")

    outputs = {}
    for name, model in (("dir", tiny_model_dir), ("reg", f"{registry.root}@1")):
        pred = tmp_path / f"pred-{name}"
        assert main(["predict", model, src, "--out", str(pred), "--quiet"]) == 0
        report = tmp_path / f"eval-{name}.json"
        spec = tiny_model_dir if name == "dir" else registry.root  # the current version
        assert main(["evaluate", spec, src, "--quiet", "--json", str(report)]) == 0
        scores = {k: v for k, v in json.loads(report.read_text()).items()
                  if k not in ("seconds", "model")}  # the model's path differs
        outputs[name] = (pd.read_parquet(pred), read_parquet_metadata(pred)["ebf.model_hash"],
                         scores)
    capsys.readouterr()
    (pred_dir, hash_dir, eval_dir), (pred_reg, hash_reg, eval_reg) = outputs.values()
    pd.testing.assert_frame_equal(pred_dir, pred_reg)
    assert hash_dir == hash_reg == model_hash(registry.model_path(1))
    assert eval_dir == eval_reg and eval_dir["n"] == 200

    assert main(["predict", f"{registry.root}@7", src, "--out", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert "version 7 is not in the registry" in err and "dask" not in err  # before any cluster
    assert not (tmp_path / "p").exists()


def test_list_shows_the_challenger_scores_of_a_retrain_record():
    from pipelines.cli.registry import _row

    record = {"decision": "kept", "lineage": {"parent": 1},
              "metrics": {"champion": {"rmse": 1.0}, "challenger": {"n": 5, "rmse": 2.5}}}
    row = _row(2, record, 1)
    assert row[1:5] == ["v0002", "", "kept", "v0001"] and row[5] == "n=5 rmse=2.5"
