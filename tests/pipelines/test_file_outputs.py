"""``ebf evaluate --json`` and ``--report`` go through the output policy (issue 26, item 1).

Before, both wrote over any path with exit 0: the model's manifest, its head pack, the input
data. Every case here must be refused before any work (exit 2, the target's bytes unchanged)
or, with ``--overwrite`` over ebf's own file of the same kind, replace it.
"""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from basics.locations import UnsafeOutputError, check_file_destination, file_kind
from pipelines.cli import main


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A small dataset and a model trained on it by the CLI (threads, no processes)."""
    root = tmp_path_factory.mktemp("outputs")
    env = {"EBF_LOCAL_PROCESSES": "0"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        data, model = root / "data", root / "model"
        assert main(["make-data", "friedman", "--rows", "3000", "--features", "5",
                     "--out", str(data), "--quiet"]) == 0
        assert main(["train", str(data), "--target", "y", "--n-estimators", "3",
                     "--trunk-leaves", "2", "--out", str(model), "--quiet"]) == 0
        yield root, data, model
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def _evaluate(model, data, *extra):
    return main(["evaluate", str(model), str(data), "--quiet", *extra])


@pytest.mark.parametrize("option", ["--json", "--report"])
@pytest.mark.parametrize("target", ["model/manifest.json", "model/head.pack", "data/part",
                                    "data/_ebf_output.json"])
def test_outputs_inside_the_model_or_data_are_refused(made, option, target, capsys):
    root, data, model = made
    if target == "data/part":
        target = "data/" + next(n for n in sorted(os.listdir(data)) if n.endswith(".parquet"))
    path = root / target
    before = _digest(path)
    assert _evaluate(model, data, option, str(path), "--overwrite") == 2
    assert _digest(path) == before
    err = capsys.readouterr().err
    assert "refusing" in err and str(path.parent.name) in err
    assert not (root / "model" / "head_figures").exists()


def test_a_foreign_file_is_kept_and_ebfs_own_is_replaced(made, tmp_path, capsys):
    root, data, model = made
    foreign = tmp_path / "notes.json"
    foreign.write_text('{"mine": true}')
    assert _evaluate(model, data, "--json", str(foreign)) == 2  # exists, no --overwrite
    assert _evaluate(model, data, "--json", str(foreign), "--overwrite") == 2  # not ebf's
    assert json.loads(foreign.read_text()) == {"mine": True}
    out = tmp_path / "eval.json"
    assert _evaluate(model, data, "--json", str(out)) == 0
    first = json.loads(out.read_text())
    assert first["ebf_output"] == "evaluation" and file_kind(out) == "evaluation"
    assert _evaluate(model, data, "--json", str(out)) == 2  # exists
    assert _evaluate(model, data, "--json", str(out), "--overwrite") == 0
    capsys.readouterr()


def test_report_and_its_figures_are_ebf_outputs(made, tmp_path):
    root, data, model = made
    report = tmp_path / "r.html"
    assert _evaluate(model, data, "--report", str(report)) == 0
    assert file_kind(report) == "report"
    assert _evaluate(model, data, "--report", str(report)) == 2
    assert _evaluate(model, data, "--report", str(report), "--overwrite") == 0
    # a foreign folder where the figures would go is kept
    other = tmp_path / "s.html"
    (tmp_path / "s_figures").mkdir()
    (tmp_path / "s_figures" / "keep.txt").write_text("mine")
    assert _evaluate(model, data, "--report", str(other), "--overwrite") == 2
    assert (tmp_path / "s_figures" / "keep.txt").read_text() == "mine" and not other.exists()


def test_check_file_destination_rules(tmp_path):
    from basics.locations import mark_output

    preds = tmp_path / "preds"
    preds.mkdir()
    mark_output(preds, "predictions")
    with pytest.raises(UnsafeOutputError, match="inside the ebf predictions"):
        check_file_destination(preds / "sub" / "x.json", "evaluation")
    link = tmp_path / "link"
    link.symlink_to(preds)
    with pytest.raises(UnsafeOutputError, match="inside the ebf predictions"):
        check_file_destination(link / "x.json", "evaluation")
    with pytest.raises(UnsafeOutputError, match="is the input"):
        check_file_destination(tmp_path / "in.parquet", "report",
                               inputs={"the input": tmp_path / "in.parquet"})
    with pytest.raises(ValueError, match="kind"):
        check_file_destination(tmp_path / "x", "model")
    check_file_destination(tmp_path / "new.json", "evaluation")


def test_outputs_inside_a_registry_are_refused(made, tmp_path, capsys):
    import shutil

    from pipelines.registry.store import Registry

    root, data, model = made
    reg = Registry(tmp_path / "reg")
    with reg.lock():
        reg.publish(lambda url: shutil.copytree(model, url), {"decision": "promoted"}, True)
    version = os.path.dirname(reg.model_path(1))
    record = os.path.join(version, "version.json")
    before = _digest(record)
    for target in (record, os.path.join(version, "new.json"),
                   os.path.join(reg.root, "models", "ebf", "x.json")):
        assert _evaluate(f"{reg.root}@1", data, "--json", target, "--overwrite") == 2
        assert "registry" in capsys.readouterr().err
    assert _digest(record) == before


@pytest.mark.parametrize("json_at", ["same", "in_figures"])
def test_the_outputs_of_one_evaluate_are_checked_against_each_other(made, tmp_path, capsys,
                                                                    json_at):
    """``--json X --report X`` (the report over the JSON), or ``--json`` inside the folder
    of figures the report will create: refused before any work, nothing written."""
    from pipelines.report.html import figures_dir

    _, data, model = made
    report = tmp_path / "report.html"
    json_path = report if json_at == "same" else figures_dir(report) / "scores.json"
    assert _evaluate(model, data, "--json", str(json_path), "--report", str(report)) == 2
    err = capsys.readouterr().err
    assert "refusing" in err and "--json file" in err, err
    assert sorted(os.listdir(tmp_path)) == []
