"""Refusals are one line labelled with the command, naming the cause and the fix: no raw
``[Errno N]``, no exception class names, no numpy reprs (issue 45, item 8). Each runs the
command in-process and checks that no file of the sandbox changed."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ebf.artifact import ModelFormatError, open_model
from ebf.artifact._codec import content_hash
from ebf.artifact._manifest import hashed_keys
from pipelines.cli import main
from pipelines.cli.failures import describe_failure

from .conftest import TINY_FEATURES


def _checksums(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def sandbox(tmp_path, tiny_model_dir, monkeypatch):
    """cwd holding ``model/`` (the tiny EBF), ``data/`` (its features and y) and a file."""
    shutil.copytree(tiny_model_dir, tmp_path / "model")
    (tmp_path / "data").mkdir()
    rng = np.random.default_rng(1)
    frame = pd.DataFrame(rng.random((50, 3)), columns=TINY_FEATURES)
    frame["y"] = frame["x0"]
    frame.to_parquet(tmp_path / "data" / "part.0.parquet")
    (tmp_path / "afile").write_text("a user's file\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _refused(sandbox: Path, capsys, argv: list[str], status: int, *needles: str) -> str:
    """Run ``ebf argv``: exit ``status``, one stderr line holding every needle, no change."""
    before = _checksums(sandbox)
    assert main(argv) == status
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    line = lines[0]
    words = [a for a in argv[2 if argv[0] == "--config" else 0:] if not a.startswith("-")]
    label = " ".join(["ebf", *words[:2 if words[0] in ("make-data", "registry") else 1]])
    assert line.startswith(f"{label}: error: "), line
    for bad in ("[Errno", "Traceback", "np.float64", "unexpected", "Error:"):
        assert bad not in line, line
    for needle in needles:
        assert needle in line, line
    assert _checksums(sandbox) == before
    return line


@pytest.mark.parametrize("argv, needles", [
    (["make-data", "friedman", "--rows", "100", "--out", "afile/x"], ("afile", "not a folder")),
    (["predict", "model", "data", "--out", "afile/x/y"], ("afile", "not a folder")),
    (["evaluate", "model", "data", "--json", "afile/r.json"], ("afile", "not a folder")),
    (["train", "data", "--target", "y", "--out", "afile/m"], ("afile", "not a folder")),
])
def test_a_file_where_an_output_folder_must_be_is_refused_before_any_work(sandbox, capsys,
                                                                           argv, needles):
    _refused(sandbox, capsys, argv, 2, "choose another path", *needles)


def test_an_existing_output_is_refused_without_a_raw_errno(sandbox, capsys):
    (sandbox / "out").mkdir()
    (sandbox / "out" / "notes.txt").write_text("mine")
    _refused(sandbox, capsys, ["predict", "model", "data", "--out", "out"], 2,
             "out: the output already exists", "--overwrite")


@pytest.mark.parametrize("keep, needles", [
    (["x0", "x0"], ("'x0' more than once", "name each column once")),
    (["mean"], ("'mean'", "prediction column", "leave them out")),
    (["nope"], ("lacks 1 column(s) to keep", "'nope'", "fix the names")),
])
def test_kept_columns_are_checked_before_the_cluster_starts(sandbox, capsys, keep, needles):
    _refused(sandbox, capsys, ["predict", "model", "data", "--out", "p", "--keep", *keep], 2,
             "ebf predict: error: ", *needles)


def test_repeated_quantile_levels_are_a_usage_error_naming_the_levels(sandbox, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["predict", "model", "data", "--out", "p", "--quantiles", "0.5", "0.50000000001"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "levels [0.5, 0.50000000001] give the columns ['q50', 'q50']" in err
    assert "np.float64" not in err and not (sandbox / "p").exists()


def test_config_errors_are_labelled_with_the_command_not_the_config_path(sandbox, capsys):
    (sandbox / "c.toml").write_text("[predikt]\n")
    line = _refused(sandbox, capsys, ["--config", "c.toml", "predict", "model", "data",
                                      "--out", "p"], 2, "[predikt] is not a command",
                    "did you mean [predict]")
    assert line.startswith("ebf predict: error: config c.toml")


def _forged(sandbox: Path, edit) -> Path:
    """A copy of the model whose manifest ``edit`` changed, its model_hash recomputed (so
    only the check of the features against the state can find it)."""
    forged = sandbox / "forged"
    shutil.copytree(sandbox / "model", forged)
    manifest = json.loads((forged / "manifest.json").read_text())
    edit(manifest["features"])
    manifest["model_hash"] = content_hash(manifest, hashed_keys(manifest["format_version"]))
    (forged / "manifest.json").write_text(json.dumps(manifest))
    return forged


@pytest.mark.parametrize("edit", [
    lambda f: f.update(n_features=7),
    lambda f: f.update(names=f["names"][:2]),
    lambda f: f["names"].__setitem__(0, "zz"),
])
def test_a_forged_feature_list_is_refused_as_an_edited_manifest(sandbox, capsys, edit):
    forged = _forged(sandbox, edit)
    with pytest.raises(ModelFormatError, match="disagree with the model's state"):
        open_model(forged).head()
    _refused(sandbox, capsys, ["predict", "forged", "data", "--out", "p"], 1,
             "the manifest was edited", "x0, x1, x2")


def test_os_errors_lose_the_errno_prefix_and_system_wording_gets_a_fix():
    assert describe_failure(FileExistsError(errno.EEXIST, "the output exists", "o")) == (
        2, "o: the output exists")
    status, line = describe_failure(IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR),
                                                      "r.json"))
    assert status == 1 and line.startswith("r.json: Is a directory; ")
    assert "give the path of a file" in line


def test_missing_cloud_credentials_name_the_variables_to_set():
    botocore = pytest.importorskip("botocore.exceptions")
    status, line = describe_failure(botocore.NoCredentialsError())
    assert status == 1 and "AWS_ACCESS_KEY_ID" in line and "unexpected" not in line
    status, line = describe_failure(botocore.EndpointConnectionError(endpoint_url="http://x"))
    assert status == 1 and "AWS_ENDPOINT_URL" in line


def test_a_key_of_all_that_no_command_takes_is_refused_with_the_nearest(sandbox, capsys):
    (sandbox / "c.toml").write_text("[all]\nquite = true\n")
    _refused(sandbox, capsys, ["predict", "model", "data", "--out", "p", "--config", "c.toml"],
             2, "[all] 'quite' is not an option of any command", "did you mean 'quiet'")


def test_a_bad_value_from_the_config_file_is_one_line_naming_it(sandbox, capsys):
    (sandbox / "c.toml").write_text('[predict]\nstrategy = "fast"\n')
    before = _checksums(sandbox)
    with pytest.raises(SystemExit) as stop:
        main(["predict", "model", "data", "--out", "p", "--config", "c.toml"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(lines) == 1, lines
    assert lines[0].startswith("ebf predict: error: argument --strategy: invalid choice")
    assert "(from the config file c.toml: --strategy fast)" in lines[0]
    assert _checksums(sandbox) == before


def test_errors_of_a_subcommand_are_labelled_with_it(sandbox, capsys):
    _refused(sandbox, capsys, ["registry", "show", "nothing"], 1, "is not a model registry")


def test_a_usage_error_is_one_line_pointing_to_help(sandbox, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["predict", "model", "--out", "p"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert stop.value.code == 2 and len(lines) == 1, lines
    assert lines[0] == ("ebf predict: error: the following arguments are required: DATA; "
                        "`ebf predict --help` lists the options")


def test_a_quantile_level_near_1_is_named_exactly():
    from ebf.frames import quantile_columns

    assert quantile_columns([0.9999999, 1e-7]) == ["q99_99999", "q0_00001"]


def test_make_data_refuses_more_partitions_than_the_cap_and_tasks_beyond_an_rlimit(tmp_path):
    from pipelines.make_data import MAX_PARTITIONS, DatasetSizeError, check_size

    with pytest.raises(DatasetSizeError, match=r"raise partition_rows to at least 10\b"):
        check_size(tmp_path, 10 * MAX_PARTITIONS, 5, 1)
    with pytest.raises(DatasetSizeError, match="memory per partition"):
        check_size(tmp_path, 1000, 10**6, 1000, worker_memory=6 * 2**30)
