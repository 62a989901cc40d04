"""Bounded inputs (issue 45): registry JSON files and generated-data sizes (item 1), targets
to score within ``±MAX_ABS_TARGET`` (item 6).

Each case is one clear line on stderr naming the cause (the file, the option or the
column), the limit and the fix, with the documented status, before the work it guards; no
input or neighbouring file changes (checksums before and after).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

from basics.places import MAX_JSON_DEPTH, Place, json_depth, read_json, read_text
from pipelines.cli import main
from pipelines.registry.files import MAX_JSON_BYTES, RegistryError
from pipelines.registry.store import Registry


def checksums(*roots: Path) -> dict[str, str]:
    """sha256 of every file under ``roots`` (a FIFO or device by its kind, unread)."""
    out = {}
    for root in roots:
        for folder, _, files in os.walk(root):
            for name in files:
                path = os.path.join(folder, name)
                if os.path.isfile(path) and not os.path.islink(path):
                    with open(path, "rb") as f:
                        out[path] = hashlib.sha256(f.read()).hexdigest()
                else:
                    out[path] = "special"
    return out


@pytest.fixture
def registry(tmp_path, tiny_model_dir):
    """Two versions of the tiny model, 2 current; a user file next to the registry."""
    reg = Registry(tmp_path / "reg")
    with reg.lock():
        for _ in range(2):
            reg.publish(lambda url: shutil.copytree(tiny_model_dir, url), {"note": "x"}, True)
    (tmp_path / "notes.txt").write_text("mine")
    return reg, tmp_path / "reg" / "models" / "ebf"


def _nested(depth: int) -> bytes:
    return b'{"version": 2, "deep": ' + b"[" * depth + b"]" * depth + b"}"


CRAFTED = {
    "deep": (lambda path: path.write_bytes(_nested(5000)),
             f"nests 5001 levels deep: more than {MAX_JSON_DEPTH} levels"),
    "big": (lambda path: path.write_bytes(b" " * (MAX_JSON_BYTES + 1)),
            f"more than {MAX_JSON_BYTES:,} bytes"),
    "binary": (lambda path: path.write_bytes(b'{"version": 2, "a": "\xff\xfe"}'),
               "is not text (not UTF-8 at byte 21)"),
    "utf16": (lambda path: path.write_bytes('{"version": 2}'.encode("utf-16")),
              "is not text"),
    "directory": (lambda path: (path.unlink(), path.mkdir()), "is a directory, not a regular"),
    "fifo": (lambda path: (path.unlink(), os.mkfifo(path)), "is a named pipe, not a regular"),
}


@pytest.mark.parametrize("kind", sorted(CRAFTED))
@pytest.mark.parametrize("which", ["version.json", "current.json"])
def test_a_crafted_registry_file_is_one_line_naming_it_the_limit_and_the_fix(
        registry, tmp_path, capsys, kind, which):
    reg, folder = registry
    path = folder / ("v0002" if which == "version.json" else "") / which
    craft, message = CRAFTED[kind]
    craft(path)
    before = checksums(tmp_path)
    if which == "version.json" and kind in ("directory", "fifo"):
        # a version is a directory holding its record as a regular file: this is none
        assert main(["registry", "show", f"{reg.root}@2"]) == 2
        assert "version 2 is not in the registry" in capsys.readouterr().err
        assert checksums(tmp_path) == before
        return
    spec = f"{reg.root}@2" if which == "version.json" else reg.root  # the pointer's version
    assert main(["registry", "show", spec]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert message in err and str(path) in err, err
    assert "unexpected" not in err and "RecursionError" not in err
    fix = "restore its version.json" if which == "version.json" else "ebf registry promote"
    assert fix in err, err
    assert checksums(tmp_path) == before


def test_a_record_that_could_not_be_read_back_is_not_published(registry, tiny_model_dir):
    reg, folder = registry
    before = checksums(folder)
    deep: list = []
    for _ in range(MAX_JSON_DEPTH + 1):
        deep = [deep]
    with reg.lock():
        with pytest.raises(RegistryError, match="would nest 67 levels deep"):
            reg.publish(lambda url: shutil.copytree(tiny_model_dir, url), {"deep": deep})
        with pytest.raises(RegistryError, match="bytes, more than the"):
            reg.publish(lambda url: shutil.copytree(tiny_model_dir, url),
                        {"big": "x" * MAX_JSON_BYTES})
    assert checksums(folder) == before and reg.versions() == [1, 2]


def test_json_depth_counts_brackets_outside_strings_only():
    assert json_depth(b'{"a": "[[[[\\"]]", "b": [[{}]]}') == 4
    assert json_depth(b"[" * 70_000) == 70_000
    assert json_depth(b"") == 0


def test_the_readers_refuse_before_parsing(tmp_path):
    path = tmp_path / "a.json"
    path.write_bytes(b"[" * 65 + b"]" * 65)
    with pytest.raises(ValueError, match="nests 65 levels deep: more than 64 levels"):
        read_json(Place.of(path, None), 1000)
    path.write_bytes(b"[" * 64 + b"]" * 64)
    value = read_json(Place.of(path, None), 1000)
    for _ in range(63):
        value = value[0]
    assert value == []
    link = tmp_path / "link.json"
    link.symlink_to(path)
    with pytest.raises(ValueError, match="is a symbolic link, not a regular file"):
        read_text(Place.of(link, None), 1000)
    assert read_text(Place.of(link, None), 1000, follow_links=True).startswith("[[")
    with pytest.raises(ValueError, match="is a device, not a regular file"):
        read_text(Place.of("/dev/zero", None), 1000, follow_links=True)


# ------------------------------------------------------------------- generated-data sizes


@pytest.mark.parametrize("argv, message", [
    (["--rows", "1e13"], "raise --partition-rows to at least 100,000,000"),
    (["--rows", "1e9", "--partition-rows", "1e9"],
     "--partition-rows=1,000,000,000 rows x 11 columns (--features=10) need about 176.0 GB"),
    (["--rows", "1000", "--features", "100000000"], "lower --partition-rows or --features"),
    (["--rows", "1e10", "--partition-rows", "1e6"], "make about 880.0 GB of Parquet"),
])
def test_make_data_refuses_an_impossible_size_before_any_work(tmp_path, capsys, monkeypatch,
                                                              argv, message):
    import psutil

    from pipelines.make_data import MEMORY_PER_VALUE

    class Memory:
        available = 20 * 10**9  # more than 1,000 x 100M features would fit in a test

    assert MEMORY_PER_VALUE == 16
    monkeypatch.setattr(psutil, "virtual_memory", lambda: Memory)
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(
        10**12, 10**12 - 50 * 10**9, 50 * 10**9))
    (tmp_path / "notes.txt").write_text("mine")
    before = checksums(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["make-data", "friedman", *argv, "--out", str(tmp_path / "data")]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and message in err, err
    assert ("free" in err or "a task has" in err or "may have" in err) and (
        "lower" in err or "raise" in err)
    assert checksums(tmp_path) == before and sorted(os.listdir(tmp_path)) == ["notes.txt"]


def test_make_data_counts_the_files_against_the_free_inodes(tmp_path, monkeypatch):
    from pipelines.make_data import DatasetSizeError, check_size

    real = os.statvfs

    class Few:
        f_files, f_favail = 1000, 10

    monkeypatch.setattr(os, "statvfs", lambda path: Few if path == str(tmp_path) else real(path))
    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(
        10**12, 0, 10**12))
    with pytest.raises(DatasetSizeError, match="make 11 files, but the file system of .* has "
                       "room for 10 more; raise partition_rows"):
        check_size(tmp_path / "out", 1000, 5, 100)
    check_size(tmp_path / "out", 1000, 5, 200)


# ------------------------------------------------------------------ targets beyond the bound


@pytest.fixture
def big_targets(tmp_path, tiny_model_dir, monkeypatch):
    """The tiny model, a dataset whose 5 first rows have y = 1e160 (footer statistics), the
    same without statistics, and a registry of the model; a local cluster of threads."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    monkeypatch.setenv("EBF_LOCAL_PROCESSES", "0")
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    rng = np.random.default_rng(1)
    frame = pd.DataFrame(rng.random((200, 3)), columns=["x0", "x1", "x2"])
    frame["y"] = 3 * frame["x0"]
    frame.loc[:4, "y"] = 1e160
    for name, statistics in (("data", True), ("nostats", False)):
        (tmp_path / name).mkdir()
        for i, part in enumerate((frame.iloc[:100], frame.iloc[100:])):
            pq.write_table(pa.Table.from_pandas(part, preserve_index=False),
                           tmp_path / name / f"part.{i}.parquet", write_statistics=statistics)
    reg = Registry(tmp_path / "reg")
    with reg.lock():
        reg.publish(lambda url: shutil.copytree(tiny_model_dir, url), {}, True)
    (tmp_path / "notes.txt").write_text("mine")
    monkeypatch.chdir(tmp_path)
    return tmp_path, frame


@pytest.mark.parametrize("command, data", [
    (["evaluate", "{model}", "data"], "data"),
    (["evaluate", "{model}", "nostats"], "nostats"),
    (["evaluate", "{model}", "data", "--json", "e.json", "--report", "e.html"], "data"),
    (["registry", "compare", "reg", "data"], "data"),
    (["registry", "compare", "reg", "nostats"], "nostats"),
])
def test_scoring_targets_beyond_the_bound_is_refused(big_targets, tiny_model_dir, capsys,
                                                      command, data):
    tmp_path, _ = big_targets
    before = checksums(tmp_path, Path(tiny_model_dir))
    argv = [a.replace("{model}", tiny_model_dir) for a in command]
    assert main([*argv, "--quiet"]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert "the target 'y' has 5 of 200 rows beyond ±1e+100" in err, err
    assert "drop those rows, or rescale the target" in err
    if data == "data":  # from the footers, before any row is scored: the file is named
        assert "(from 0.0" in err and "part.0.parquet" in err, err
    assert checksums(tmp_path, Path(tiny_model_dir)) == before
    assert not (tmp_path / "e.json").exists() and not (tmp_path / "e.html").exists()


def test_the_library_scorers_refuse_targets_beyond_the_bound(big_targets, tiny_model_dir):
    import dask.dataframe as dd

    from basics import metrics
    from basics.score_pass import score_mixture
    from ebf.artifact import load
    from ebf.dask._scoring import score

    _, frame = big_targets
    model = load(tiny_model_dir)
    X, y = frame[["x0", "x1", "x2"]], frame["y"]
    dist = model.predict_distribution(X)
    message = r"the target .y. has 5 of 200 rows beyond ±1e\+100 .* drop those rows"
    for call in (lambda: model.score(X, y), lambda: metrics.rmse(y, model.predict(X)),
                 lambda: metrics.crps(y, dist), lambda: metrics.nlpd(y, dist),
                 lambda: metrics.coverage(y, dist), lambda: metrics.interval_score(y, dist),
                 lambda: score(model, dd.from_pandas(X, npartitions=2),
                               dd.from_pandas(y, npartitions=2))):
        with pytest.raises(ValueError, match=message):
            call()
    with pytest.raises(ValueError, match="has 5 of 200 rows beyond"):
        score_mixture(dist.base if hasattr(dist, "base") else dist, y.to_numpy(), [0.5],
                      [None])
    fine = y.where(y < 1e100, 0.0)
    assert model.score(X, fine) == pytest.approx(
        score(model, dd.from_pandas(X, npartitions=2), dd.from_pandas(fine, npartitions=2)))


# ------------------------------------------------------- the outputs of one command together


@pytest.fixture
def workspace(tmp_path, tiny_model_dir, monkeypatch):
    """``data/`` (two Parquet files), a copy of the tiny model ``m/``, a user file; the cwd."""
    import numpy as np
    import pandas as pd

    monkeypatch.setenv("EBF_LOCAL_PROCESSES", "0")
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    rng = np.random.default_rng(2)
    frame = pd.DataFrame(rng.random((100, 3)), columns=["x0", "x1", "x2"])
    frame["y"] = 3 * frame["x0"]
    (tmp_path / "data").mkdir()
    frame.iloc[:50].to_parquet(tmp_path / "data" / "a.parquet")
    frame.iloc[50:].to_parquet(tmp_path / "data" / "b.parquet")
    shutil.copytree(tiny_model_dir, tmp_path / "m")
    (tmp_path / "notes.txt").write_text("mine")
    monkeypatch.chdir(tmp_path)
    return tmp_path


TRAIN = ["train", "data", "--target", "y", "--trunk-leaves", "2", "--n-estimators", "2"]


@pytest.mark.parametrize("argv, first, second", [
    # the same path twice
    ([*TRAIN, "--out", "out/m", "--baseline-out", "out/m"], "--baseline-out", "--out"),
    # one inside another (either way round)
    ([*TRAIN, "--out", "out/m", "--baseline-out", "out/m/ssf"], "--baseline-out", "--out"),
    ([*TRAIN, "--out", "out/m/ebf", "--baseline-out", "out/m"], "--baseline-out", "--out"),
    # an output inside an input
    ([*TRAIN, "--out", "data/m"], "--out", "training data"),
    (["predict", "m", "data", "--out", "m/p"], "--out", "the model"),
    (["migrate-model", "m", "m/new"], "NEW_DIR", "the model OLD_DIR"),
    (["retrain", "data/reg", "data"], "the model registry", "the new data"),
    # a file where a folder will be, and the same path twice
    (["evaluate", "m", "data", "--predictions", "p", "--json", "p/e.json"], "--json",
     "--predictions"),
    (["evaluate", "m", "data", "--predictions", "e_figures", "--report", "e.html"],
     "--report's figures folder", "--predictions"),
    (["evaluate", "m", "data", "--json", "e.html", "--report", "e.html"], "--report",
     "--json"),
])
def test_the_outputs_of_one_command_are_checked_together_before_any_work(
        workspace, capsys, argv, first, second):
    before = checksums(workspace)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"refusing to write the {first}" in err or f"write {first}" in err, err
    assert second in err and "choose an output outside it" in err, err
    assert checksums(workspace) == before
    assert sorted(os.listdir(workspace)) == ["data", "m", "notes.txt"]


def test_predictions_of_rows_beyond_the_bound_are_not_committed(big_targets, tiny_model_dir,
                                                                 capsys):
    """Without footer statistics the rows are counted as they are scored and predicted in
    the same pass: the refusal comes before the predictions' folder is committed."""
    tmp_path, _ = big_targets
    before = checksums(tmp_path, Path(tiny_model_dir))
    assert main(["evaluate", tiny_model_dir, "nostats", "--predictions", "p", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "has 5 of 200 rows beyond" in err, err
    assert checksums(tmp_path, Path(tiny_model_dir)) == before
    assert not (tmp_path / "p").exists()
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".p.")]
