"""Tests of model persistence (``ebf.artifact``): ``save`` / ``load`` round-trips, the
manifest, and saving (refusals at save, atomic writes, overwrite, the model hash).

The contract (``docs/model-format.md``): a directory with
``manifest.json`` and checksummed ``.npy`` files, loaded with ``allow_pickle=False``;
writes are atomic. Loading a crafted or damaged model: ``test_model_refusals``.
``assert_roundtrip`` (``model_helpers``) is shared with the tests of the ``ebf`` estimators.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import NotFittedError

from ebf.artifact import (
    ChecksumError,
    ModelFormatError,
    estimator_from_state,
    estimator_state,
    load,
    model_hash,
    read_manifest,
)
from ebf.artifact import (
    _codec as codec,
)
from mondrian import MondrianForestClassifier, MondrianForestRegressor
from tests.ebf.model_helpers import (
    assert_roundtrip,
    assert_same,
    call_method,
    canonical_hash,
    load_manifest,
    online_regressor,
    regression_data,
    save,
    write_manifest,
)

# ------------------------------------------------------------------------------ round-trips


@pytest.mark.parametrize("posterior", ["exact", "empirical"])
@pytest.mark.parametrize("lifetime", [np.inf, 1.5])
def test_regressor_roundtrip_and_continued_partial_fit(tmp_path, posterior, lifetime):
    reg, X, y = online_regressor(posterior=posterior, lifetime=lifetime)
    loaded = assert_roundtrip(reg, X, tmp_path)
    reg.partial_fit(X[160:], y[160:])
    loaded.partial_fit(X[160:], y[160:])
    assert_same(reg._get_state(), loaded._get_state(), "state after partial_fit")
    for method in ("predict", "apply", "predict_quantiles", "predict_distribution"):
        assert_same(call_method(reg, method, X), call_method(loaded, method, X), method)


@pytest.mark.parametrize("labels", ["int", "str", "object"])
def test_classifier_roundtrip_and_continued_partial_fit(tmp_path, labels):
    X, _ = regression_data(200, seed=1)
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
        assert_same(call_method(clf, method, X), call_method(loaded, method, X), method)


def test_batch_fitted_model_roundtrip_then_partial_fit(tmp_path):
    X, y = regression_data(150)
    reg = MondrianForestRegressor(n_estimators=2, random_state=3).fit(X[:100], y[:100])
    loaded = assert_roundtrip(reg, X, tmp_path)
    assert_same(reg.partial_fit(X[100:], y[100:]).predict(X),
                loaded.partial_fit(X[100:], y[100:]).predict(X))


def test_dataframe_model_keeps_feature_names(tmp_path):
    X, y = regression_data(120)
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
    X, y = regression_data(100)
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
    reg, X, y = online_regressor()
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
    assert model_hash(path) == manifest["model_hash"] == canonical_hash(manifest)
    assert load(path).lifetime == np.inf


def test_user_metadata_and_nonfinite_values_survive(tmp_path):
    reg, X, _ = online_regressor()
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


# ------------------------------------------------------------------------------ saving


def test_unfitted_model_is_refused(tmp_path):
    with pytest.raises(NotFittedError):
        save(MondrianForestRegressor(), tmp_path / "m")
    assert list(tmp_path.iterdir()) == []


def test_object_array_in_state_is_refused_at_save(tmp_path, monkeypatch):
    reg, _, _ = online_regressor()
    state = reg._get_state()
    state["extra"] = np.array(["a", None], dtype=object)
    monkeypatch.setattr(reg, "_get_state", lambda: state)
    with pytest.raises(ValueError, match=r"state\.extra.*dtype object"):
        save(reg, tmp_path / "m")
    assert list(tmp_path.iterdir()) == []


def test_unsupported_value_or_subclass_is_refused_at_save(tmp_path, monkeypatch):
    reg, X, y = online_regressor()
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
    reg, X, y = online_regressor()
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
    reg, _, _ = online_regressor()
    _fail_on_call(monkeypatch, np, "save", 4)
    with pytest.raises(OSError, match="injected"):
        save(reg, tmp_path / "m")
    assert list(tmp_path.iterdir()) == []


def test_failure_mid_overwrite_keeps_the_old_model(tmp_path, monkeypatch):
    reg, X, y = online_regressor()
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
    reg, X, _ = online_regressor()
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
    manifest = load_manifest(path)
    manifest["params"].update(params)
    write_manifest(path, manifest)
    with pytest.raises(ModelFormatError, match="do not fit mondrian.MondrianForestRegressor"):
        load(path)


def test_model_hash_ignores_metadata_and_tracks_every_array_byte(tmp_path):
    from ebf import BayesianForestRegressor

    X, y = regression_data(120)
    fits = [BayesianForestRegressor(n_estimators=3, random_state=0).fit(X, y) for _ in range(2)]
    a = save(fits[0], tmp_path / "a", metadata={"run": 1, "fit_seconds": 3.25})
    b = save(fits[1], tmp_path / "b", metadata={"run": 2, "fit_seconds": 2.5})
    assert load_manifest(a)["metadata"] != load_manifest(b)["metadata"]
    assert model_hash(a) == model_hash(b) == load_manifest(a)["model_hash"]
    # one byte of one array changed, its file checksum recomputed: another model
    manifest = load_manifest(b)
    entry = manifest["state"]["forest"]["threshold"]
    raw = bytearray((b / entry["__ndarray__"]).read_bytes())
    raw[-1] ^= 0x01
    (b / entry["__ndarray__"]).write_bytes(bytes(raw))
    digest = hashlib.sha256(bytes(raw)).hexdigest()
    entry["sha256"] = manifest["files"][entry["__ndarray__"]] = digest
    (b / "manifest.json").write_text(json.dumps(manifest))  # model_hash left as it was
    with pytest.raises(ChecksumError, match=r"model_hash .* does not match the content"):
        load(b)
    write_manifest(b, manifest)  # a consistent forgery: the hash of the new content
    assert model_hash(b) != model_hash(a)
    assert load(b).predict(X).shape == (120,)
