"""Tests of the refusals of ``ebf.artifact.load``: unknown versions, checksum mismatches,
unknown classes, paths leaving the directory, symlinks, object arrays and consistently
crafted states fail loudly (``docs/model-format.md``); ``np.load`` never unpickles.
"""

from __future__ import annotations

import hashlib
import importlib
import sys

import numpy as np
import pytest

from ebf.artifact import (
    ChecksumError,
    ModelFormatError,
    UnknownClassError,
    UnsupportedVersionError,
    load,
)
from tests.ebf.model_helpers import (
    assert_same,
    load_manifest,
    rewrite_array,
    write_manifest,
)

# ------------------------------------------------------------------------------ refusals


def test_flipped_byte_in_an_array_file_fails_naming_the_file(saved):
    path, _, _ = saved
    victim = path / "arrays" / "00002.npy"
    data = bytearray(victim.read_bytes())
    data[-1] ^= 0x01
    victim.write_bytes(bytes(data))
    with pytest.raises(ChecksumError, match=r"arrays/00002\.npy.*sha256 mismatch"):
        load(path)


def test_listed_but_unreferenced_file_is_verified_too(saved):
    path, _, _ = saved
    manifest = load_manifest(path)
    np.save(path / "arrays" / "99999.npy", np.zeros(2), allow_pickle=False)
    manifest["files"]["arrays/99999.npy"] = "0" * 64
    write_manifest(path, manifest)
    with pytest.raises(ChecksumError, match=r"99999\.npy"):
        load(path)


def test_missing_array_file_fails_naming_the_file(saved):
    path, _, _ = saved
    (path / "arrays" / "00004.npy").unlink()
    with pytest.raises(FileNotFoundError, match="missing") as info:
        load(path)
    assert info.value.filename.endswith("00004.npy")


@pytest.mark.parametrize("version", [3, 0, "1", 1.0, None])
def test_unknown_format_version_fails(saved, version):
    path, _, _ = saved
    manifest = load_manifest(path)
    manifest["format_version"] = version
    write_manifest(path, manifest)
    with pytest.raises(UnsupportedVersionError, match=rf"format_version {version!r}.*reads "
                                                      r"format_version 1 and 2"):
        load(path)


def test_wrong_format_and_missing_manifest_fail(saved, tmp_path):
    path, _, _ = saved
    manifest = load_manifest(path)
    manifest["format"] = "someone-elses-format"
    write_manifest(path, manifest)
    with pytest.raises(ModelFormatError, match="someone-elses-format"):
        load(path)
    (path / "manifest.json").unlink()
    with pytest.raises(FileNotFoundError, match="manifest"):
        load(path)
    with pytest.raises(FileNotFoundError, match="directory"):
        load(tmp_path / "nowhere")


@pytest.mark.parametrize("text", ['{"a": NaN}', '{"a": Infinity}', '{"a": 1, "a": 2}', "{"])
def test_non_strict_or_invalid_json_manifest_fails(saved, text):
    path, _, _ = saved
    (path / "manifest.json").write_text(text)
    with pytest.raises(ModelFormatError, match="manifest.json"):
        load(path)


@pytest.mark.parametrize("cls", ["evil_module_xyz.Evil", "os.system", "builtins.eval",
                                 "mondrian._forest:MondrianForestRegressor", 42])
def test_unknown_class_fails_and_imports_nothing(saved, monkeypatch, cls):
    path, _, _ = saved
    manifest = load_manifest(path)
    manifest["class"] = cls
    write_manifest(path, manifest)
    imported = []
    real = importlib.import_module
    monkeypatch.setattr(importlib, "import_module",
                        lambda name, *a: imported.append(name) or real(name, *a))
    with pytest.raises((UnknownClassError, ModelFormatError)):
        load(path)
    assert imported == [] and "evil_module_xyz" not in sys.modules


@pytest.mark.parametrize("name", ["../outside.npy", "/tmp/outside.npy", "arrays/../../outside.npy",
                                  "arrays/00000.npy/../../../outside.npy", "arrays\\..\\x.npy"])
def test_paths_leaving_the_directory_are_refused(saved, name):
    path, _, _ = saved
    outside = path.parent / "outside.npy"
    np.save(outside, np.zeros(3), allow_pickle=False)
    digest = hashlib.sha256(outside.read_bytes()).hexdigest()
    manifest = load_manifest(path)
    entry = manifest["state"]["x_min_"]
    manifest["files"][name] = digest
    entry.update({"__ndarray__": name, "sha256": digest})
    write_manifest(path, manifest)
    with pytest.raises(ModelFormatError, match="not inside the model directory"):
        load(path)


def test_symlinked_array_file_is_refused(saved):
    path, _, _ = saved
    victim = path / "arrays" / "00000.npy"
    outside = path.parent / "outside.npy"
    outside.write_bytes(victim.read_bytes())
    victim.unlink()
    victim.symlink_to(outside)
    with pytest.raises(ModelFormatError, match="link"):
        load(path)


def test_object_array_in_file_is_refused(saved):
    path, _, _ = saved
    manifest = load_manifest(path)
    entry = manifest["state"]["x_min_"]
    target = path / entry["__ndarray__"]
    np.save(target, np.array([1, "a"], dtype=object), allow_pickle=True)
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    manifest["files"][entry["__ndarray__"]] = digest
    entry["sha256"] = digest
    write_manifest(path, manifest)
    with pytest.raises(ModelFormatError, match=r"00000\.npy"):
        load(path)


@pytest.mark.parametrize("field, index, value, match", [
    ("left", 0, 10**9, "is outside the tree.s nodes"),
    ("pt_next", 5, 7, "point list"),
    ("feature", 0, 99, "split feature 99 is outside"),
    ("parent", 0, 2, "root slot"),
])
def test_consistently_crafted_bad_tree_is_refused(saved, field, index, value, match):
    """Checksums can be forged, so tree arrays are validated before any kernel sees them."""
    path, _, _ = saved
    manifest = load_manifest(path)
    entry = manifest["state"]["trees_"][1][field]
    array = np.load(path / entry["__ndarray__"], allow_pickle=False).copy()
    if field == "parent":
        index = manifest["state"]["trees_"][1]["root"]
    array[index] = value
    rewrite_array(path, manifest, entry, array)
    with pytest.raises(ModelFormatError, match=rf"trees_\[1\].*{match}"):
        load(path)


def test_inconsistent_state_shape_is_refused(saved):
    path, _, _ = saved
    manifest = load_manifest(path)
    rewrite_array(path, manifest, manifest["state"]["_X"], np.zeros((3, 3)))
    with pytest.raises(ModelFormatError, match=r"_X has shape \(3, 3\)"):
        load(path)


def test_np_load_is_only_called_without_pickle(saved, monkeypatch):
    path, reg, X = saved
    calls = []
    real = np.load

    def spy(*args, **kwargs):
        calls.append(kwargs.get("allow_pickle", "default"))
        return real(*args, **kwargs)

    monkeypatch.setattr(np, "load", spy)
    loaded = load(path)
    assert calls and all(c is False for c in calls)
    assert len(calls) == len(load_manifest(path)["files"])
    assert_same(reg.predict(X), loaded.predict(X))
