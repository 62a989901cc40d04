"""Helpers of the model-persistence tests (``test_model``, ``test_model_refusals``) and of
the estimator tests that round-trip their models: format-1 ``save``, bit-identical
``assert_same`` / ``assert_roundtrip``, small models, and manifest editing as a forger
would do it (checksums and model hash recomputed)."""

from __future__ import annotations

import hashlib
import inspect
import json
from pathlib import Path
from typing import Any

import numpy as np

from ebf.artifact import (
    load,
)
from ebf.artifact import (
    save as save_v2,
)
from mondrian import MondrianForestRegressor

# ------------------------------------------------------------------------------ shared helpers


def save(model: Any, path: Any, **kwargs: Any) -> Path:
    """``ebf.artifact.save`` in format 1 (one ``.npy`` per array): ``test_model``,
    ``test_model_refusals`` and ``test_hostile_models`` test that format 1 still loads, and
    every refusal of a crafted array file (format 2's packs carry the same arrays to the
    same ``_set_state`` checks; ``test_shards`` tests the pack layer and round-trips both
    formats)."""
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


def call_method(est: Any, method: str, X: Any) -> Any:
    """``est.<method>(X)``; ``predict`` also with ``return_std=True`` where supported."""
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
            assert_same(call_method(model, method, X), call_method(loaded, method, X), method)
    return loaded


# ------------------------------------------------------------------------------ data, models


def regression_data(n: int = 160, d: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, d))
    return X, np.sin(X).sum(axis=1) + 0.1 * rng.normal(size=n)


def online_regressor(**kw: Any) -> tuple[MondrianForestRegressor, np.ndarray, np.ndarray]:
    """A regressor after a batch fit and one online update (both code paths in its state)."""
    X, y = regression_data(200)
    reg = MondrianForestRegressor(n_estimators=3, random_state=0, **kw)
    reg.fit(X[:120], y[:120]).partial_fit(X[120:160], y[120:160])
    return reg, X, y


def load_manifest(path: Path) -> dict:
    return json.loads((path / "manifest.json").read_text())


def write_manifest(path: Path, manifest: dict) -> None:
    """Write an edited manifest with its model_hash recomputed, as a forger would."""
    manifest["model_hash"] = canonical_hash(manifest)
    (path / "manifest.json").write_text(json.dumps(manifest))


def canonical_hash(manifest: dict) -> str:
    """The documented model hash, computed independently of ``ebf.artifact``."""
    keys = ("format_version", "class", "params", "features", "state")
    text = json.dumps({k: manifest[k] for k in keys}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def array_entries(obj: Any) -> list[dict]:
    """Every array placeholder of a manifest's state, in order."""
    if isinstance(obj, dict):
        if "__ndarray__" in obj:
            return [obj]
        return [e for v in obj.values() for e in array_entries(v)]
    if isinstance(obj, list):
        return [e for v in obj for e in array_entries(v)]
    return []


def rewrite_array(path: Path, manifest: dict, entry: dict, array: np.ndarray) -> None:
    """Replace an array file *and* fix its checksums: a consistently crafted artifact."""
    np.save(path / entry["__ndarray__"], array, allow_pickle=False)
    digest = hashlib.sha256((path / entry["__ndarray__"]).read_bytes()).hexdigest()
    entry.update(sha256=digest, dtype=str(array.dtype), shape=list(array.shape))
    manifest["files"][entry["__ndarray__"]] = digest
    write_manifest(path, manifest)
