"""basics.atomic: which outputs may be replaced, overlap refusals, clean-up of killed writers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import fsspec
import pytest

import basics.atomic as atomic
from basics.atomic import STALE_SECONDS, atomic_dir, remove_abandoned
from basics.locations import MARKER, UnsafeOutputError, check_destination, output_kind


def _write(tmp: str, name: str = "part.0", text: str = "new") -> None:
    with open(os.path.join(tmp, name), "w") as f:
        f.write(text)


def _hidden(parent) -> list[str]:
    return sorted(name for name in os.listdir(parent) if name.startswith("."))


def _dead_pid() -> int:
    """The pid of a process that has exited (and was reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_marker_kind_and_same_kind_overwrite(tmp_path):
    out = tmp_path / "pred"
    with atomic_dir(out, "predictions") as tmp:
        _write(tmp, text="v1")
    assert sorted(os.listdir(out)) == [MARKER, "part.0"]
    marker = json.loads((out / MARKER).read_text())
    assert marker["format"] == "ebf-output" and marker["kind"] == "predictions"
    assert marker["ebf_version"] and marker["created_utc"].endswith("Z")
    assert output_kind(out) == "predictions" and output_kind(tmp_path / "absent") is None
    with pytest.raises(FileExistsError, match="overwrite"):
        with atomic_dir(out, "predictions"):
            raise AssertionError("the check comes before the block")
    with atomic_dir(out, "predictions", overwrite=True) as tmp:
        _write(tmp, text="v2")
    assert (out / "part.0").read_text() == "v2" and _hidden(tmp_path) == []


@pytest.mark.parametrize("kind", ["predictions", "dataset", "model"])
def test_foreign_file_link_and_other_kind_are_never_replaced(tmp_path, kind):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("precious")
    (tmp_path / "file.txt").write_text("precious")
    (tmp_path / "link").symlink_to(foreign)
    with atomic_dir(tmp_path / "other", "dataset" if kind != "dataset" else "predictions"):
        pass
    cases = {
        "foreign": f"not a {kind} directory written by ebf",
        "file.txt": "is a file",
        "link": "symbolic link",
        "other": "holds an ebf",
    }
    for name, why in cases.items():
        with pytest.raises(FileExistsError, match=why) as info:
            check_destination(tmp_path / name, kind, overwrite=True)
        assert str(tmp_path / name) in str(info.value)
        with pytest.raises(FileExistsError, match=why):
            with atomic_dir(tmp_path / name, kind, overwrite=True):
                raise AssertionError("refused before the block")
    assert (foreign / "notes.txt").read_text() == "precious"
    assert (tmp_path / "file.txt").read_text() == "precious"
    assert _hidden(tmp_path) == []


def test_model_manifest_marks_a_model_and_an_empty_directory_may_be_replaced(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "manifest.json").write_text(json.dumps({"format": "something-else"}))
    assert output_kind(model) is None
    (model / "manifest.json").write_text(json.dumps({"format": "ebf-model"}))
    assert output_kind(model) == "model"
    with pytest.raises(FileExistsError, match="holds an ebf model, not predictions"):
        check_destination(model, "predictions", overwrite=True)
    empty = tmp_path / "empty"
    empty.mkdir()
    with atomic_dir(empty, "dataset", overwrite=True) as tmp:
        _write(tmp)
    assert output_kind(empty) == "dataset"


def test_outputs_overlapping_inputs_or_the_working_directory_are_refused(tmp_path,
                                                                         monkeypatch):
    data = tmp_path / "data"
    (data / "year=2013").mkdir(parents=True)
    model = tmp_path / "model"
    inputs = {"the input data": str(data), "the model": str(model)}
    for out, relation, what in ((data, "is", "input data"), (tmp_path, "contains", "input data"),
                                (data / "pred", "is inside", "input data"),
                                (model / "x", "is inside", "the model")):
        with pytest.raises(UnsafeOutputError, match=f"it {relation} (the )?{what}"):
            check_destination(out, "predictions", overwrite=True, inputs=inputs)
    glob = {"the input data": f"{data}/year=*/*.parquet"}
    with pytest.raises(UnsafeOutputError, match="contains the input data"):
        check_destination(tmp_path, "predictions", overwrite=True, inputs=glob)
    with pytest.raises(UnsafeOutputError, match="is inside"):
        check_destination(data / "p", "predictions", inputs={"the input data": [str(data)]})
    link = tmp_path / "alias"
    link.symlink_to(data)
    with pytest.raises(UnsafeOutputError, match="is the input data"):  # links are resolved
        check_destination(tmp_path / "alias", "predictions", overwrite=True, inputs=inputs)
    check_destination(tmp_path / "pred", "predictions", inputs=inputs)  # a sibling is fine
    monkeypatch.chdir(data / "year=2013")
    for out, where in ((".", "the current directory"), ("..", "a parent of the current")):
        with pytest.raises(UnsafeOutputError, match=where):
            check_destination(out, "dataset", overwrite=True)
        with pytest.raises(UnsafeOutputError, match=where):
            with atomic_dir(out, "dataset", overwrite=True):
                raise AssertionError("refused before the block")
    assert sorted(os.listdir(data)) == ["year=2013"]


def test_failure_removes_the_temporary_directory_and_late_writers_are_swept(tmp_path):
    out = tmp_path / "out"
    seen = []
    with pytest.raises(RuntimeError, match="boom"):
        with atomic_dir(out, "dataset") as tmp:
            seen.append(tmp)
            _write(tmp)
            raise RuntimeError("boom")
    assert not out.exists() and _hidden(tmp_path) == []
    os.makedirs(seen[0])  # a task still running writes into it after the clean-up
    _write(seen[0], "late")
    remove_abandoned()
    assert _hidden(tmp_path) == []


def test_temporary_names_carry_host_and_pid_and_every_file_is_flushed(tmp_path, monkeypatch):
    flushed = []
    real = atomic._fsync
    monkeypatch.setattr(atomic, "_fsync", lambda p, directory: (flushed.append(p),
                                                                  real(p, directory)))
    with atomic_dir(tmp_path / "out", "dataset") as tmp:
        name = os.path.basename(tmp)
        assert name.startswith(f".out.tmp-{atomic._host()}-{os.getpid()}-")
        os.mkdir(os.path.join(tmp, "sub"))
        _write(os.path.join(tmp, "sub"))
    for rel in ("sub/part.0", MARKER, "sub", ""):
        assert os.path.join(tmp, rel).rstrip("/") in flushed
    assert str(tmp_path) in flushed  # the parent, after the rename


def test_stale_temporaries_of_killed_writers_are_removed_by_the_next_run(tmp_path):
    host, now = atomic._host(), int(time.time())
    dead, alive = _dead_pid(), os.getppid()
    names = {
        f".out.tmp-{host}-{dead}-{now}-ab12": False,  # this host, process gone: removed
        f".out.tmp-{host}-{alive}-{now}-cd34": True,  # this host, process alive: kept
        f".out.tmp-elsewhere-{dead}-{now}-ef56": True,  # another host, recent: kept
        f".out.tmp-elsewhere-1-{now - STALE_SECONDS - 60}-0a0b": False,  # old: removed
        f".out.tmp-{host}-{os.getpid()}-{now}-1c2d": False,  # this process, not active
        f".other.tmp-{host}-{dead}-{now}-ab12": True,  # another destination: not ours
    }
    for name in names:
        os.makedirs(tmp_path / name / "sub")
    with atomic_dir(tmp_path / "out", "dataset") as tmp:
        _write(tmp)
    assert _hidden(tmp_path) == sorted(n for n, kept in names.items() if kept)


def test_an_original_lost_between_the_two_renames_is_put_back(tmp_path):
    aside = tmp_path / f".out.old-{atomic._host()}-{_dead_pid()}-{int(time.time())}-ab12"
    with atomic_dir(tmp_path / "first", "dataset") as tmp:
        _write(tmp, text="original")
    os.rename(tmp_path / "first", aside)  # as if killed between the renames of an overwrite
    with pytest.raises(FileExistsError, match="overwrite"):  # the original is back first
        with atomic_dir(tmp_path / "out", "dataset"):
            raise AssertionError("refused before the block")
    assert (tmp_path / "out" / "part.0").read_text() == "original"
    assert _hidden(tmp_path) == []


def test_object_store_output_marker_refusal_and_stale_sweep():
    fs = fsspec.filesystem("memory")
    root = "/ebf-test-atomic"
    if fs.exists(root):
        fs.rm(root, recursive=True)
    url = f"memory://{root}/pred"
    stale = f"{root}/.pred.tmp-otherhost-7-{int(time.time()) - STALE_SECONDS - 1}-00ff"
    fs.pipe_file(f"{stale}/part.0", b"old")
    with atomic_dir(url, "predictions") as tmp:
        assert tmp.startswith("memory://")
        fs.pipe_file(tmp.removeprefix("memory://") + "/part.0", b"v1")
    assert output_kind(url) == "predictions"
    assert fs.ls(root, detail=False) == [f"{root}/pred"]
    with atomic_dir(url, "predictions", overwrite=True) as tmp:
        fs.pipe_file(tmp.removeprefix("memory://") + "/part.0", b"v2")
    assert fs.cat_file(f"{root}/pred/part.0") == b"v2"
    fs.pipe_file(f"{root}/foreign/keep", b"precious")
    with pytest.raises(FileExistsError, match="not a dataset directory"):
        check_destination(f"memory://{root}/foreign", "dataset", overwrite=True)
    with pytest.raises(UnsafeOutputError, match="is inside the input data"):
        check_destination(f"memory://{root}/pred/x", "predictions",
                          inputs={"the input data": url})
    fs.rm(root, recursive=True)


def test_a_fifo_named_like_a_marker_does_not_block_the_check(tmp_path):
    trap = tmp_path / "trap"
    trap.mkdir()
    for name in ("manifest.json", MARKER):
        os.mkfifo(trap / name)  # opening one for reading would wait for a writer forever
    with pytest.raises(FileExistsError, match="not a dataset directory"):
        check_destination(trap, "dataset", overwrite=True)


def test_file_writers_replace_whole_files(tmp_path, monkeypatch):
    """``write_bytes`` / ``write_text`` / ``write_json``: the one writer of single files
    (directory created, old content until the new one is complete, no temporary left)."""
    path = tmp_path / "sub" / "r.json"
    assert atomic.write_json(path, {"a": 1}) == str(path)
    atomic.write_json(path, {"a": 2}, indent=2)
    assert json.loads(path.read_text()) == {"a": 2} and path.read_text().endswith("}\n")
    atomic.write_text(path, "text")

    def fail(*_):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        atomic.write_bytes(path, b"new")
    assert path.read_text() == "text" and os.listdir(path.parent) == ["r.json"]
