"""Tests of model persistence (``ebf.artifact``): ``save`` / ``load`` round-trips and refusals.

The contract (``docs/model-format.md``): a directory with
``manifest.json`` and checksummed ``.npy`` files, loaded with ``allow_pickle=False``; unknown
versions, checksum mismatches, unknown classes and paths leaving the directory fail loudly;
writes are atomic. ``assert_roundtrip`` is shared with the tests of the ``ebf`` estimators.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import NotFittedError

from ebf.artifact import (
    ChecksumError,
    ModelFormatError,
    UnknownClassError,
    UnsupportedVersionError,
    codec,
    estimator_from_state,
    estimator_state,
    load,
    model_hash,
    read_manifest,
)
from ebf.artifact import (
    save as save_v2,
)
from mondrian import MondrianForestClassifier, MondrianForestRegressor

# ------------------------------------------------------------------------------ shared helpers


def save(model: Any, path: Any, **kwargs: Any) -> Path:
    """``ebf.artifact.save`` in format 1 (one ``.npy`` per array): this module and
    ``test_hostile_models`` test that format 1 still loads, and every refusal of a crafted
    array file (format 2's packs carry the same arrays to the same ``_set_state`` checks;
    ``test_shards`` tests the pack layer and round-trips both formats)."""
    return save_v2(model, path, **{"format_version": 1, **kwargs})

#: Prediction methods compared by ``assert_roundtrip`` when the estimator has them.
PREDICT_METHODS = ("predict", "predict_proba", "predict_log_proba", "decision_function",
                   "apply", "predict_quantiles")


def assert_same(a: Any, b: Any, where: str = "value") -> None:
    """Assert two nested states / predictions are bit-identical (arrays: dtype, shape, bytes)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray), where
        assert a.dtype == b.dtype and a.shape == b.shape, (where, a.dtype, b.dtype, a.shape,
                                                            b.shape)
        if a.dtype.hasobject:
            assert a.tolist() == b.tolist(), where
        else:
            assert a.tobytes() == b.tobytes(), f"{where}: arrays differ"
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for key in a:
            assert_same(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and np.isnan(a):
        assert isinstance(b, float) and np.isnan(b), where
    elif hasattr(a, "__slots__") or hasattr(a, "__dict__"):
        # a result object such as GaussianMixture: compare its array attributes
        names = [n for n in getattr(type(a), "__slots__", ()) if hasattr(a, n)]
        names += list(getattr(a, "__dict__", {}))
        assert type(a) is type(b) and names, where
        for name in names:
            assert_same(getattr(a, name), getattr(b, name), f"{where}.{name}")
    else:
        assert type(a) is type(b) and a == b, (where, a, b)


def _call(est: Any, method: str, X: Any) -> Any:
    out = getattr(est, method)(X)
    if method == "predict" and "return_std" in inspect.signature(est.predict).parameters:
        out = (out, est.predict(X, return_std=True))
    return out


def assert_roundtrip(model: Any, X: Any, tmp_path: Path, name: str = "model") -> Any:
    """Save ``model``, load it back, and assert everything is bit-identical; return the copy.

    Checks the class, the parameters (a ``RandomState`` / ``Generator`` parameter comes back
    as None), the whole ``_get_state()``, and the output of every prediction method the
    estimator has (``predict`` also with ``return_std=True`` where supported,
    ``predict_proba``, ``apply``, ``predict_quantiles``, ``predict_distribution``).

    Parameters
    ----------
    model : estimator
        A fitted estimator of the allowlist.
    X : array-like or DataFrame
        Rows to predict on.
    tmp_path : pathlib.Path
        A directory (pytest's ``tmp_path``); the model is written to ``tmp_path / name``.
    name : str, default="model"
        Directory name of the artifact.

    Returns
    -------
    estimator
        The loaded model, for further checks (e.g. a ``partial_fit`` on both).
    """
    path = save(model, tmp_path / name)
    loaded = load(path)
    assert type(loaded) is type(model)
    params = model.get_params(deep=False)
    for key, value in params.items():
        if isinstance(value, (np.random.RandomState, np.random.Generator)):
            params[key] = None
    assert_same(params, loaded.get_params(deep=False), "params")
    assert_same(model._get_state(), loaded._get_state(), "state")
    for method in PREDICT_METHODS + ("predict_distribution",):
        if hasattr(model, method):
            assert_same(_call(model, method, X), _call(loaded, method, X), method)
    return loaded


# ------------------------------------------------------------------------------ data, models


def _regression(n: int = 160, d: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, d))
    return X, np.sin(X).sum(axis=1) + 0.1 * rng.normal(size=n)


def _online_regressor(**kw: Any) -> tuple[MondrianForestRegressor, np.ndarray, np.ndarray]:
    """A regressor after a batch fit and one online update (both code paths in its state)."""
    X, y = _regression(200)
    reg = MondrianForestRegressor(n_estimators=3, random_state=0, **kw)
    reg.fit(X[:120], y[:120]).partial_fit(X[120:160], y[120:160])
    return reg, X, y


@pytest.fixture
def saved(tmp_path: Path) -> tuple[Path, MondrianForestRegressor, np.ndarray]:
    reg, X, _ = _online_regressor()
    return save(reg, tmp_path / "model"), reg, X


def _manifest(path: Path) -> dict:
    return json.loads((path / "manifest.json").read_text())


def _write_manifest(path: Path, manifest: dict) -> None:
    """Write an edited manifest with its model_hash recomputed, as a forger would."""
    manifest["model_hash"] = _canonical_hash(manifest)
    (path / "manifest.json").write_text(json.dumps(manifest))


def _canonical_hash(manifest: dict) -> str:
    """The documented model hash, computed independently of ``ebf.artifact``."""
    keys = ("format_version", "class", "params", "features", "state")
    text = json.dumps({k: manifest[k] for k in keys}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _array_entries(obj: Any) -> list[dict]:
    """Every array placeholder of a manifest's state, in order."""
    if isinstance(obj, dict):
        if "__ndarray__" in obj:
            return [obj]
        return [e for v in obj.values() for e in _array_entries(v)]
    if isinstance(obj, list):
        return [e for v in obj for e in _array_entries(v)]
    return []


def _rewrite_array(path: Path, manifest: dict, entry: dict, array: np.ndarray) -> None:
    """Replace an array file *and* fix its checksums: a consistently crafted artifact."""
    np.save(path / entry["__ndarray__"], array, allow_pickle=False)
    digest = hashlib.sha256((path / entry["__ndarray__"]).read_bytes()).hexdigest()
    entry.update(sha256=digest, dtype=str(array.dtype), shape=list(array.shape))
    manifest["files"][entry["__ndarray__"]] = digest
    _write_manifest(path, manifest)


# ------------------------------------------------------------------------------ round-trips


@pytest.mark.parametrize("posterior", ["exact", "empirical"])
@pytest.mark.parametrize("lifetime", [np.inf, 1.5])
def test_regressor_roundtrip_and_continued_partial_fit(tmp_path, posterior, lifetime):
    reg, X, y = _online_regressor(posterior=posterior, lifetime=lifetime)
    loaded = assert_roundtrip(reg, X, tmp_path)
    reg.partial_fit(X[160:], y[160:])
    loaded.partial_fit(X[160:], y[160:])
    assert_same(reg._get_state(), loaded._get_state(), "state after partial_fit")
    for method in ("predict", "apply", "predict_quantiles", "predict_distribution"):
        assert_same(_call(reg, method, X), _call(loaded, method, X), method)


@pytest.mark.parametrize("labels", ["int", "str", "object"])
def test_classifier_roundtrip_and_continued_partial_fit(tmp_path, labels):
    X, _ = _regression(200, seed=1)
    codes = (X[:, 0] > 0).astype(int) + (X[:, 1] > 1)
    y = {"int": codes, "str": np.array(["a", "b", "c"])[codes],
         "object": np.array(["a", "b", "c"], dtype=object)[codes]}[labels]
    clf = MondrianForestClassifier(n_estimators=3, random_state=1, lifetime=4.0)
    clf.partial_fit(X[:100], y[:100], classes=np.unique(y)).partial_fit(X[100:150], y[100:150])
    loaded = assert_roundtrip(clf, X, tmp_path)
    assert loaded.classes_.dtype == clf.classes_.dtype
    clf.partial_fit(X[150:], y[150:])
    loaded.partial_fit(X[150:], y[150:])
    assert_same(clf._get_state(), loaded._get_state(), "state after partial_fit")
    for method in ("predict", "predict_proba", "apply"):
        assert_same(_call(clf, method, X), _call(loaded, method, X), method)


def test_batch_fitted_model_roundtrip_then_partial_fit(tmp_path):
    X, y = _regression(150)
    reg = MondrianForestRegressor(n_estimators=2, random_state=3).fit(X[:100], y[:100])
    loaded = assert_roundtrip(reg, X, tmp_path)
    assert_same(reg.partial_fit(X[100:], y[100:]).predict(X),
                loaded.partial_fit(X[100:], y[100:]).predict(X))


def test_dataframe_model_keeps_feature_names(tmp_path):
    X, y = _regression(120)
    df = pd.DataFrame(X, columns=["age", "income", "distance"])
    reg = MondrianForestRegressor(n_estimators=2, random_state=0).fit(df, y)
    loaded = assert_roundtrip(reg, df, tmp_path)
    assert list(loaded.feature_names_in_) == ["age", "income", "distance"]
    assert loaded.feature_names_in_.dtype == object
    features = read_manifest(tmp_path / "model")["features"]
    assert features["names"] == ["age", "income", "distance"] and features["n_features"] == 3
    with pytest.warns(UserWarning, match="feature names"):
        loaded.predict(X)
    with pytest.raises(ValueError, match="feature names"):
        loaded.predict(df[["income", "age", "distance"]])


def test_random_state_instance_is_stored_as_none_with_a_note(tmp_path):
    X, y = _regression(100)
    reg = MondrianForestRegressor(n_estimators=2, random_state=np.random.RandomState(5))
    reg.fit(X[:80], y[:80])
    loaded = assert_roundtrip(reg, X, tmp_path)
    manifest = read_manifest(tmp_path / "model")
    assert manifest["params"]["random_state"] is None
    assert any("random_state" in note and "RandomState" in note for note in manifest["notes"])
    # the saved seed entropy still makes online updates identical
    assert_same(reg.partial_fit(X[80:], y[80:]).predict(X),
                loaded.partial_fit(X[80:], y[80:]).predict(X))


def test_estimator_state_roundtrip_in_memory():
    reg, X, y = _online_regressor()
    d = estimator_state(reg)
    assert set(d) == {"class", "params", "state"}
    assert d["class"] == "mondrian.MondrianForestRegressor"
    copy = estimator_from_state(d)
    assert_same(reg.predict(X), copy.predict(X))
    # the copy owns its buffers: updating it leaves the original alone
    before = reg._get_state()["_X"].copy()
    copy.partial_fit(X[160:], y[160:])
    assert_same(before, reg._get_state()["_X"])


# ------------------------------------------------------------------------------ manifest


def test_manifest_layout_and_strict_json(saved):
    path, reg, _ = saved
    text = (path / "manifest.json").read_text()

    def refuse(token):
        raise AssertionError(f"non-standard JSON token {token}")

    manifest = json.loads(text, parse_constant=refuse)
    assert manifest["format"] == "ebf-model" and manifest["format_version"] == 1
    assert manifest["class"] == "mondrian.MondrianForestRegressor"
    assert manifest["params"]["lifetime"] == {"__float__": "inf"}
    assert manifest["training"] == {"n_samples_seen_": 160, "n_features_in_": 3}
    assert {"library_version", "numpy_version", "created_utc", "user"} <= set(
        manifest["metadata"])
    assert manifest["metadata"]["created_utc"].endswith("Z")
    files = sorted(p.relative_to(path).as_posix() for p in (path / "arrays").iterdir())
    assert files == sorted(manifest["files"])
    for name, digest in manifest["files"].items():
        assert hashlib.sha256((path / name).read_bytes()).hexdigest() == digest
    assert model_hash(path) == manifest["model_hash"] == _canonical_hash(manifest)
    assert load(path).lifetime == np.inf


def test_user_metadata_and_nonfinite_values_survive(tmp_path):
    reg, X, _ = _online_regressor()
    path = save(reg, tmp_path / "m", metadata={"run": 3, "loss": float("nan"), "tag": "x"})
    user = read_manifest(path)["metadata"]["user"]
    assert user == {"run": 3, "loss": {"__float__": "nan"}, "tag": "x"}
    with pytest.raises(TypeError, match="metadata"):
        save(reg, tmp_path / "m2", metadata={"bad": object()})
    assert not (tmp_path / "m2").exists()


def test_state_encoding_covers_every_leaf_kind(tmp_path):
    state = {
        "floats": [0.5, np.inf, -np.inf, np.nan, -0.0],
        "scalars": [np.float32(1.5), np.int64(-3), np.bool_(True), np.uint8(7)],
        "tuple": (1, "a", None, False),
        "__looks_like_a_marker__": {"__ndarray__": "not an array"},
        "big": 2**70,
        "arrays": [np.arange(6.0).reshape(2, 3, order="F"), np.array([], np.int32),
                   np.array(["ab", "c"]), np.array(3.0), np.array([True, False]),
                   np.arange(12, dtype=">i4")[::2]],
    }
    writer = codec.ArrayWriter(tmp_path)
    encoded = json.loads(json.dumps(codec.encode(state, writer, "state"), allow_nan=False))
    back = codec.Decoder(tmp_path, writer.files, "test").decode(encoded, "state")
    assert_same(state["arrays"][1:], back["arrays"][1:], "arrays")
    np.testing.assert_array_equal(back["arrays"][0], state["arrays"][0])
    assert back["arrays"][0].flags.f_contiguous
    assert back["floats"][:3] == [0.5, np.inf, -np.inf] and np.isnan(back["floats"][3])
    assert str(back["floats"][4]) == "-0.0"
    assert [type(v) for v in back["scalars"]] == [np.float32, np.int64, np.bool_, np.uint8]
    assert back["tuple"] == (1, "a", None, False) and back["big"] == 2**70
    assert back["__looks_like_a_marker__"] == {"__ndarray__": "not an array"}


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
    manifest = _manifest(path)
    np.save(path / "arrays" / "99999.npy", np.zeros(2), allow_pickle=False)
    manifest["files"]["arrays/99999.npy"] = "0" * 64
    _write_manifest(path, manifest)
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
    manifest = _manifest(path)
    manifest["format_version"] = version
    _write_manifest(path, manifest)
    with pytest.raises(UnsupportedVersionError, match=rf"format_version {version!r}.*reads "
                                                      r"format_version 1 and 2"):
        load(path)


def test_wrong_format_and_missing_manifest_fail(saved, tmp_path):
    path, _, _ = saved
    manifest = _manifest(path)
    manifest["format"] = "someone-elses-format"
    _write_manifest(path, manifest)
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
                                 "mondrian.forest:MondrianForestRegressor", 42])
def test_unknown_class_fails_and_imports_nothing(saved, monkeypatch, cls):
    path, _, _ = saved
    manifest = _manifest(path)
    manifest["class"] = cls
    _write_manifest(path, manifest)
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
    manifest = _manifest(path)
    entry = manifest["state"]["x_min_"]
    manifest["files"][name] = digest
    entry.update({"__ndarray__": name, "sha256": digest})
    _write_manifest(path, manifest)
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
    manifest = _manifest(path)
    entry = manifest["state"]["x_min_"]
    target = path / entry["__ndarray__"]
    np.save(target, np.array([1, "a"], dtype=object), allow_pickle=True)
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    manifest["files"][entry["__ndarray__"]] = digest
    entry["sha256"] = digest
    _write_manifest(path, manifest)
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
    manifest = _manifest(path)
    entry = manifest["state"]["trees_"][1][field]
    array = np.load(path / entry["__ndarray__"], allow_pickle=False).copy()
    if field == "parent":
        index = manifest["state"]["trees_"][1]["root"]
    array[index] = value
    _rewrite_array(path, manifest, entry, array)
    with pytest.raises(ModelFormatError, match=rf"trees_\[1\].*{match}"):
        load(path)


def test_inconsistent_state_shape_is_refused(saved):
    path, _, _ = saved
    manifest = _manifest(path)
    _rewrite_array(path, manifest, manifest["state"]["_X"], np.zeros((3, 3)))
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
    assert len(calls) == len(_manifest(path)["files"])
    assert_same(reg.predict(X), loaded.predict(X))


# ------------------------------------------------------------------------------ saving


def test_unfitted_model_is_refused(tmp_path):
    with pytest.raises(NotFittedError):
        save(MondrianForestRegressor(), tmp_path / "m")
    assert list(tmp_path.iterdir()) == []


def test_object_array_in_state_is_refused_at_save(tmp_path, monkeypatch):
    reg, _, _ = _online_regressor()
    state = reg._get_state()
    state["extra"] = np.array(["a", None], dtype=object)
    monkeypatch.setattr(reg, "_get_state", lambda: state)
    with pytest.raises(ValueError, match=r"state\.extra.*dtype object"):
        save(reg, tmp_path / "m")
    assert list(tmp_path.iterdir()) == []


def test_unsupported_value_or_subclass_is_refused_at_save(tmp_path, monkeypatch):
    reg, X, y = _online_regressor()
    state = reg._get_state()
    state["extra"] = {"fn": print}
    monkeypatch.setattr(reg, "_get_state", lambda: state)
    with pytest.raises(TypeError, match=r"state\.extra\.fn"):
        save(reg, tmp_path / "m")

    class MyForest(MondrianForestRegressor):
        pass

    with pytest.raises(TypeError, match="MyForest cannot be saved"):
        save(MyForest(n_estimators=2).fit(X, y), tmp_path / "m")
    assert list(tmp_path.iterdir()) == []


def test_existing_target_and_overwrite(tmp_path):
    reg, X, y = _online_regressor()
    path = save(reg, tmp_path / "m")
    digest = model_hash(path)
    with pytest.raises(FileExistsError):
        save(reg, path)
    assert model_hash(path) == digest
    other = MondrianForestRegressor(n_estimators=2, random_state=9).fit(X, y)
    assert save(other, path, overwrite=True) == path
    assert model_hash(path) != digest
    assert_same(load(path).predict(X), other.predict(X))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]
    # never replace something that is not a model
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "keep.txt").write_text("precious")
    (tmp_path / "file.txt").write_text("precious")
    for target in ("data", "file.txt"):
        with pytest.raises(FileExistsError, match="not a model directory"):
            save(reg, tmp_path / target, overwrite=True)
    assert (tmp_path / "data" / "keep.txt").read_text() == "precious"
    assert (tmp_path / "file.txt").read_text() == "precious"


def _fail_on_call(monkeypatch, obj: Any, name: str, n: int) -> None:
    """Make ``obj.name`` raise on its n-th call (earlier calls go through)."""
    real = getattr(obj, name)
    count = [0]

    def failing(*args, **kwargs):
        count[0] += 1
        if count[0] == n:
            raise OSError("disk full (injected)")
        return real(*args, **kwargs)

    monkeypatch.setattr(obj, name, failing)


def test_failure_mid_save_leaves_nothing(tmp_path, monkeypatch):
    reg, _, _ = _online_regressor()
    _fail_on_call(monkeypatch, np, "save", 4)
    with pytest.raises(OSError, match="injected"):
        save(reg, tmp_path / "m")
    assert list(tmp_path.iterdir()) == []


def test_failure_mid_overwrite_keeps_the_old_model(tmp_path, monkeypatch):
    reg, X, y = _online_regressor()
    path = save(reg, tmp_path / "m")
    digest = model_hash(path)
    other = MondrianForestRegressor(n_estimators=2, random_state=9).fit(X, y)
    with monkeypatch.context() as m:
        _fail_on_call(m, np, "save", 7)
        with pytest.raises(OSError, match="injected"):
            save(other, path, overwrite=True)
    assert model_hash(path) == digest and sorted(os.listdir(tmp_path)) == ["m"]
    # the rename of the new directory into place fails: the old one is put back
    with monkeypatch.context() as m:
        _fail_on_call(m, os, "rename", 2)
        with pytest.raises(OSError, match="injected"):
            save(other, path, overwrite=True)
    assert model_hash(path) == digest and sorted(os.listdir(tmp_path)) == ["m"]
    assert_same(load(path).predict(X), reg.predict(X))


def test_save_creates_parent_directories_with_ordinary_permissions(tmp_path):
    reg, X, _ = _online_regressor()
    path = save(reg, tmp_path / "a" / "b" / "model")
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o777 & ~umask  # readable by whoever may read
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_same(load(str(path)).predict(X), reg.predict(X))


@pytest.mark.parametrize("params", [{"bogus": 1}, {"n_estimators": "many"},
                                    {"posterior": "made-up"}])
def test_parameters_that_do_not_fit_the_class_are_refused(saved, params):
    path, _, _ = saved
    manifest = _manifest(path)
    manifest["params"].update(params)
    _write_manifest(path, manifest)
    with pytest.raises(ModelFormatError, match="do not fit mondrian.MondrianForestRegressor"):
        load(path)


def test_model_hash_ignores_metadata_and_tracks_every_array_byte(tmp_path):
    from ebf import BayesianForestRegressor

    X, y = _regression(120)
    fits = [BayesianForestRegressor(n_estimators=3, random_state=0).fit(X, y) for _ in range(2)]
    a = save(fits[0], tmp_path / "a", metadata={"run": 1, "fit_seconds": 3.25})
    b = save(fits[1], tmp_path / "b", metadata={"run": 2, "fit_seconds": 2.5})
    assert _manifest(a)["metadata"] != _manifest(b)["metadata"]
    assert model_hash(a) == model_hash(b) == _manifest(a)["model_hash"]
    # one byte of one array changed, its file checksum recomputed: another model
    manifest = _manifest(b)
    entry = manifest["state"]["forest"]["threshold"]
    raw = bytearray((b / entry["__ndarray__"]).read_bytes())
    raw[-1] ^= 0x01
    (b / entry["__ndarray__"]).write_bytes(bytes(raw))
    digest = hashlib.sha256(bytes(raw)).hexdigest()
    entry["sha256"] = manifest["files"][entry["__ndarray__"]] = digest
    (b / "manifest.json").write_text(json.dumps(manifest))  # model_hash left as it was
    with pytest.raises(ChecksumError, match=r"model_hash .* does not match the content"):
        load(b)
    _write_manifest(b, manifest)  # a consistent forgery: the hash of the new content
    assert model_hash(b) != model_hash(a)
    assert load(b).predict(X).shape == (120,)
