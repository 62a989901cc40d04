"""Model format 2: packs, one shard per branch, loading one shard alone, URLs, old models.

``test_model`` and ``test_hostile_models`` test format 1 and every crafted array; here the
pack layer (:mod:`ebf.artifact._packs`) and the sharded reading (:mod:`ebf.artifact`).
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ebf import (
    EmpiricalBayesianForestClassifier,
    EmpiricalBayesianForestRegressor,
    SubsampleForestClassifier,
    SubsampleForestRegressor,
)
from ebf.artifact import _packs as pack_module
from ebf.artifact import load, open_model, read_manifest, save
from ebf.artifact._codec import ChecksumError, ModelFormatError, content_hash
from ebf.artifact._manifest import hashed_keys
from ebf.artifact._packs import PackWriter, Store, read_pack, write_pack
from mondrian import MondrianForestRegressor


def _data(n: int = 600, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.random((n, 4))
    y = 10 * np.sin(3 * X[:, 0]) + 5 * X[:, 1] + rng.normal(0, 0.3, n)
    return X, y, (y > np.median(y)).astype(int)


MODELS = {
    "ebf_reg": lambda X, y, c: EmpiricalBayesianForestRegressor(
        n_estimators=3, trunk_max_leaves=4, random_state=0).fit(X, y),
    "ebf_clf": lambda X, y, c: EmpiricalBayesianForestClassifier(
        n_estimators=3, trunk_max_leaves=3, random_state=1).fit(X, c),
    "ssf_reg": lambda X, y, c: SubsampleForestRegressor(
        n_estimators=3, n_subsamples=3, random_state=2).fit(X, y),
    "ssf_clf": lambda X, y, c: SubsampleForestClassifier(
        n_estimators=2, n_subsamples=2, random_state=3).fit(X, c),
    "ebf_mondrian": lambda X, y, c: EmpiricalBayesianForestRegressor(
        n_estimators=2, trunk_max_leaves=3, branch="mondrian", random_state=4).fit(X, y),
}


def _predictions(model: Any, X: np.ndarray) -> list[np.ndarray]:
    if hasattr(model, "classes_"):
        return [model.predict_proba(X)]
    return [*model.predict(X, return_std=True), model.predict_quantiles(X, (0.1, 0.5, 0.9))]


@pytest.fixture(scope="module")
def fitted() -> dict:
    X, y, c = _data()
    return {name: make(X, y, c) for name, make in MODELS.items()}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_formats_1_and_2_load_to_identical_predictions(fitted, tmp_path, name):
    model = fitted[name]
    X = _data(200, seed=9)[0]
    expected = _predictions(model, X)
    v1 = load(save(model, tmp_path / "v1", format_version=1))
    v2_path = save(model, tmp_path / "v2")
    v2 = load(v2_path)
    for got in (_predictions(v1, X), _predictions(v2, X)):
        for a, b in zip(got, expected, strict=True):
            np.testing.assert_array_equal(a, b)
    # O(branches) files: the manifest, the head, one shard per part
    files = sorted(str(p.relative_to(v2_path)) for p in v2_path.rglob("*") if p.is_file())
    n_parts = len(getattr(model, "branches_", getattr(model, "subsamples_", [])))
    assert files == ["head.pack", "manifest.json",
                     *[f"shards/{i:05d}.pack" for i in range(n_parts)]]
    manifest = read_manifest(v2_path)
    assert manifest["format_version"] == 2 and len(manifest["shards"]) == n_parts
    assert [s["bytes"] for s in manifest["shards"]] == [
        os.path.getsize(v2_path / s["file"]) for s in manifest["shards"]]


def test_same_model_same_bytes(fitted, tmp_path):
    """Packs are deterministic: an identical model saves to identical files and hash."""
    a = save(fitted["ebf_reg"], tmp_path / "a", metadata={"run": 1})
    b = save(fitted["ebf_reg"], tmp_path / "b", metadata={"run": 2})
    assert read_manifest(a)["model_hash"] == read_manifest(b)["model_hash"]
    for name in ("head.pack", "shards/00002.pack"):
        assert (a / name).read_bytes() == (b / name).read_bytes()


def test_one_shard_loads_without_reading_the_others(fitted, tmp_path, monkeypatch):
    model = fitted["ebf_reg"]
    path = save(model, tmp_path / "m")
    read: list[str] = []
    real = read_pack

    def spy(store, name, *args, **kwargs):
        read.append(name)
        return real(store, name, *args, **kwargs)

    monkeypatch.setattr("ebf.artifact._reader.read_pack", spy)
    reader = open_model(path)
    head = reader.head()
    assert read == ["head.pack"]
    assert head.n_parts == model.trunk_.n_leaves_ and head.trunk.n_leaves_ == head.n_parts
    np.testing.assert_array_equal(head.trunk.apply(head.encoder.transform(_data(50)[0])),
                                  model.apply(_data(50)[0]))
    branch = reader.load_part(2)
    assert read == ["head.pack", "shards/00002.pack"]
    X = _data(30, seed=5)[0]
    np.testing.assert_array_equal(branch.predict(X), model.branches_[2].predict(X))
    with pytest.raises(IndexError):
        reader.load_part(head.n_parts)


def test_reader_pickles_without_its_head(fitted, tmp_path):
    import pickle

    reader = open_model(save(fitted["ssf_clf"], tmp_path / "m"))
    reader.head()
    back = pickle.loads(pickle.dumps(reader))
    assert back._head is None and back.head().n_parts == 2
    assert type(back.load_part(1)).__name__ == "BayesianForestClassifier"


def test_fsspec_urls_save_load_and_open(fitted):
    model = fitted["ebf_clf"]
    url = "memory://ebf-tests/models/clf"
    assert save(model, url) == url
    X = _data(40, seed=3)[0]
    np.testing.assert_array_equal(load(url).predict_proba(X), model.predict_proba(X))
    assert open_model(url).load_part(0).n_features_in_ == 4
    with pytest.raises(FileExistsError):
        save(model, url)
    save(model, url, overwrite=True)
    with pytest.raises(ValueError, match="format_version=1 writes local directories only"):
        save(model, "memory://ebf-tests/models/v1", format_version=1)


def test_single_forests_have_a_head_and_no_shards(tmp_path):
    X, y, _ = _data(100)
    reg = MondrianForestRegressor(n_estimators=2, random_state=0).fit(X, y)
    path = save(reg, tmp_path / "m")
    assert sorted(p.name for p in path.iterdir()) == ["head.pack", "manifest.json"]
    np.testing.assert_array_equal(load(path).predict(X), reg.predict(X))
    with pytest.raises(ModelFormatError, match="has no shards; load it whole"):
        open_model(path).head()


# ------------------------------------------------------------------------------ refusals


def _rewrite(path: Path, name: str, data: bytes) -> None:
    """Replace a pack and make the manifest agree (size, sha256, model hash), as an editor
    who knows the format would: only the reader's own checks stand in the way."""
    import hashlib

    (path / name).write_bytes(data)
    manifest = json.loads((path / "manifest.json").read_text())
    entry = manifest["head"] if name == "head.pack" else next(
        s for s in manifest["shards"] if s["file"] == name)
    entry["bytes"], entry["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    manifest["model_hash"] = content_hash(manifest, hashed_keys(2))
    (path / "manifest.json").write_text(json.dumps(manifest))


def _pack_bytes(state: Any, arrays: list[np.ndarray]) -> bytes:
    import io

    writer = PackWriter()
    writer.arrays = list(arrays)
    buf = io.BytesIO()
    write_pack(buf, state, writer)
    return buf.getvalue()


@pytest.fixture
def saved(fitted, tmp_path) -> Path:
    return save(fitted["ebf_mondrian"], tmp_path / "m")


def test_a_flipped_byte_in_a_shard_is_refused_naming_it(saved):
    file = saved / "shards" / "00001.pack"
    data = bytearray(file.read_bytes())
    data[-3] ^= 0xFF
    file.write_bytes(bytes(data))
    with pytest.raises(ChecksumError, match=r"shard 1 .*shards/00001\.pack: sha256 mismatch"):
        load(saved)
    reader = open_model(saved)
    reader.load_part(0)  # the other shards still load alone
    with pytest.raises(ChecksumError, match=r"shards/00001\.pack"):
        reader.load_part(1)


def test_missing_or_truncated_shard_is_refused_naming_it(saved):
    (saved / "shards" / "00002.pack").unlink()
    with pytest.raises(FileNotFoundError, match=r"shard 2 is missing.*shards/00002\.pack"):
        load(saved)
    file = saved / "shards" / "00000.pack"
    file.write_bytes(file.read_bytes()[:-10])
    with pytest.raises(ChecksumError, match=r"shards/00000\.pack: .* bytes but the manifest says"):
        open_model(saved).load_part(0)


def _table(path: Path, name: str) -> tuple[dict, list[np.ndarray]]:
    store = Store(path)
    manifest = read_manifest(path)
    entry = manifest["head"] if name == "head.pack" else next(
        s for s in manifest["shards"] if s["file"] == name)
    state, arrays = read_pack(store, name, entry["bytes"], entry["sha256"], "test")
    raw = (path / name).read_bytes()
    (length,) = struct.unpack("<Q", raw[8:16])
    return {"header": json.loads(raw[16:16 + length]), "raw": raw, "state": state}, arrays


def _with_header(raw: bytes, header: dict) -> bytes:
    """The pack ``raw`` with its header replaced (same length, blank-padded)."""
    (length,) = struct.unpack("<Q", raw[8:16])
    text = json.dumps(header, separators=(",", ":")).encode()
    assert len(text) <= length
    return raw[:16] + text + b" " * (length - len(text)) + raw[16 + length:]


@pytest.mark.parametrize("edit, match", [
    (lambda h: h["arrays"][0].update(dtype="|O"), r"arrays\[0\] has dtype '\|O'"),
    (lambda h: h["arrays"][0].update(dtype="<V8"), r"arrays\[0\] has dtype"),
    (lambda h: h["arrays"][1].update(offset=h["arrays"][0]["offset"]),
     r"arrays\[1\] .* overlaps the previous array"),
    (lambda h: h["arrays"][-1].update(shape=[10**12]), r"runs past the end"),
    (lambda h: h["arrays"][0].update(shape=[-1]), r"shape of ints >= 0"),
    (lambda h: h["arrays"][0].update(offset=h["arrays"][0]["offset"] + 1), r"not aligned"),
    (lambda h: h.update(extra=1), r"must be an object with 'arrays' and 'state'"),
    (lambda h: h["arrays"].pop(), r"the arrays end at byte .* but the file has"),
])
def test_crafted_pack_headers_are_refused(saved, edit, match):
    info, _ = _table(saved, "shards/00001.pack")
    header = info["header"]
    edit(header)
    _rewrite(saved, "shards/00001.pack", _with_header(info["raw"], header))
    with pytest.raises(ModelFormatError, match=match):
        load(saved)


def test_bad_magic_and_header_length_are_refused(saved):
    raw = (saved / "head.pack").read_bytes()
    _rewrite(saved, "head.pack", b"\x93NOTPACK" + raw[8:])
    with pytest.raises(ModelFormatError, match="not an ebf pack file"):
        load(saved)
    _rewrite(saved, "head.pack", raw[:8] + struct.pack("<Q", 2**62) + raw[16:])
    with pytest.raises(ModelFormatError, match="its header claims"):
        load(saved)


def test_state_and_table_must_agree(saved):
    info, arrays = _table(saved, "shards/00000.pack")
    state = info["state"]
    # an array of the table nobody uses, then one used twice
    _rewrite(saved, "shards/00000.pack", _pack_bytes(state, [*arrays, np.zeros(3)]))
    with pytest.raises(ModelFormatError, match=r"1 array\(s\) of the pack are not used"):
        load(saved)
    text = json.dumps(state).replace('"__ndarray__": 1,', '"__ndarray__": 0,', 1)
    assert text != json.dumps(state)
    _rewrite(saved, "shards/00000.pack", _pack_bytes(json.loads(text), arrays))
    with pytest.raises(ModelFormatError, match=r"(used twice|the state says)"):
        load(saved)


def test_crafted_tree_in_a_shard_is_refused_naming_the_branch(saved):
    """The arrays of a shard reach the same ``_set_state`` checks as format 1's files."""
    info, arrays = _table(saved, "shards/00001.pack")
    feature = next(i for i, a in enumerate(arrays) if a.dtype.kind in "iu" and a.size > 2
                   and a.max() < 4 and a.min() >= -1)
    arrays[feature] = arrays[feature].copy()
    arrays[feature][arrays[feature] >= 0] = 99
    _rewrite(saved, "shards/00001.pack", _pack_bytes(info["state"], arrays))
    with pytest.raises(ModelFormatError, match=r"branches\[1\]"):
        load(saved)
    with pytest.raises(ModelFormatError, match=r"branches\[1\]"):
        open_model(saved).load_part(1)


@pytest.mark.parametrize("edit, match", [
    (lambda m: m["shards"][0].update(file="../x.pack"), r"shards\[0\] must be"),
    (lambda m: m["shards"][0].update(bytes=-1), r"shards\[0\] must be"),
    (lambda m: m["shards"].pop(), r"must refer to shards"),
    (lambda m: m["head"].update(file="shards/00000.pack"), r"head must be"),
    (lambda m: m["shards"][1].update(**{"class": "ebf.Trunk"}),
     r"shard 1 does not hold the 'ebf.Trunk'"),
])
def test_crafted_shard_entries_are_refused(saved, edit, match):
    manifest = json.loads((saved / "manifest.json").read_text())
    edit(manifest)
    manifest["model_hash"] = content_hash(manifest, hashed_keys(2))
    (saved / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ModelFormatError, match=match):
        load(saved)


def test_a_linked_shard_folder_is_refused(saved, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    (saved / "shards").rename(elsewhere)
    (saved / "shards").symlink_to(elsewhere)
    with pytest.raises(ModelFormatError, match=r"shards is a link or leaves the model"):
        load(saved)


def test_pack_module_limits_the_header(saved, monkeypatch):
    monkeypatch.setattr(pack_module, "MAX_MANIFEST_BYTES", 100)
    with pytest.raises(ModelFormatError, match="its header claims"):
        load(saved)


def test_save_compact_writes_the_predict_only_form(fitted, tmp_path):
    model = fitted["ebf_mondrian"]
    full = save(model, tmp_path / "full")
    small = save(model, tmp_path / "small", compact=True)
    size = {p: sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) for p in (full, small)}
    assert size[small] < size[full] / 2
    back = load(small)
    assert back.compact_ and not model.compact_
    X = _data(100, seed=8)[0]
    for a, b in zip(_predictions(back, X), _predictions(model, X), strict=True):
        np.testing.assert_array_equal(a, b)
    # models without online state are saved as they are
    assert read_manifest(save(fitted["ebf_reg"], tmp_path / "bf", compact=True))["model_hash"] == (
        read_manifest(save(fitted["ebf_reg"], tmp_path / "bf2"))["model_hash"])
