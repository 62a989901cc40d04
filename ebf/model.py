"""Model artifacts: ``save`` / ``load`` as ``manifest.json`` plus checksummed ``.npy`` files.

An artifact is a directory::

    model/
      manifest.json        format + version, class, params, features, metadata, state, sha256s
      arrays/00000.npy     one file per array of the estimator's state
      arrays/00001.npy
      ...

Every estimator of ``ebf`` and ``mondrian`` implements ``_get_state() -> dict`` and
``_set_state(state)`` (see ``LAYOUT.md``); this module turns such a state into JSON plus
``.npy`` files and back, for any nesting. Composite estimators (an EBF holds a trunk and
branch forests) put their sub-estimators into their state with :func:`estimator_state` and
rebuild them with :func:`estimator_from_state`.

Nothing is ever unpickled: arrays are read with ``np.load(..., allow_pickle=False)`` after
their sha256 is checked, object arrays are refused, and the class to build is looked up in a
fixed allowlist (:data:`MODEL_CLASSES`) by key; the manifest never names a module to import.
Writes are atomic: the artifact is built in a temporary directory next to the target and
renamed into place. See :func:`save` and :func:`load` for examples.
"""

from __future__ import annotations

import datetime
import errno
import hashlib
import importlib
import importlib.metadata
import json
import os
import platform
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .atomic import atomic_dir, check_destination

__all__ = [
    "FORMAT", "FORMAT_VERSION", "MODEL_CLASSES", "ChecksumError", "ModelFormatError",
    "UnknownClassError", "UnsupportedVersionError", "estimator_from_state", "estimator_state",
    "load", "manifest_digest", "read_manifest", "save",
]

#: Name of the artifact format and the one version this module writes and reads.
FORMAT = "ebf-model"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
ARRAY_DIR = "arrays"

#: The allowlist: the only classes ``load`` will build, key -> ``"module:ClassName"``.
#: Modules are imported lazily, so a missing optional module only affects its own models.
MODEL_CLASSES: Mapping[str, str] = {
    "mondrian.MondrianForestRegressor": "mondrian.forest:MondrianForestRegressor",
    "mondrian.MondrianForestClassifier": "mondrian.forest:MondrianForestClassifier",
    "ebf.Trunk": "ebf.trunk:Trunk",
    "ebf.BayesianForestRegressor": "ebf.forests:BayesianForestRegressor",
    "ebf.BayesianForestClassifier": "ebf.forests:BayesianForestClassifier",
    "ebf.EmpiricalBayesianForestRegressor": "ebf.estimators:EmpiricalBayesianForestRegressor",
    "ebf.EmpiricalBayesianForestClassifier": "ebf.estimators:EmpiricalBayesianForestClassifier",
    "ebf.SubsampleForestRegressor": "ebf.estimators:SubsampleForestRegressor",
    "ebf.SubsampleForestClassifier": "ebf.estimators:SubsampleForestClassifier",
    "ebf.ConstantBranch": "ebf.branches:ConstantBranch",
}

# JSON markers for what JSON cannot say directly. A state dict whose own keys look like
# markers is wrapped in {"__dict__": {...}} so that it is never mistaken for one.
_ARRAY = "__ndarray__"
_FLOAT = "__float__"
_TUPLE = "__tuple__"
_SCALAR = "__scalar__"
_DICT = "__dict__"
_NONFINITE = {"inf": np.inf, "-inf": -np.inf, "nan": np.nan}
_ARRAY_NAME = re.compile(r"arrays/[0-9]+\.npy", re.ASCII)
_SHA256 = re.compile(r"[0-9a-f]{64}", re.ASCII)
_NPY_MAGIC = b"\x93NUMPY"
_RANDOM_OBJECTS = (
    np.random.RandomState, np.random.Generator, np.random.BitGenerator, np.random.SeedSequence,
)


class ModelFormatError(ValueError):
    """A model artifact is malformed, corrupt or not loadable by this version."""


class ChecksumError(ModelFormatError):
    """An array file does not match the sha256 recorded in the manifest."""


class UnsupportedVersionError(ModelFormatError):
    """The manifest has a format version this build cannot read."""


class UnknownClassError(ModelFormatError):
    """The manifest names a class that is not in the allowlist :data:`MODEL_CLASSES`."""


# ----------------------------------------------------------------------------- public API


def save(
    model: Any,
    path: str | os.PathLike,
    *,
    overwrite: bool = False,
    metadata: Mapping[str, Any] | None = None,
) -> Path:
    """Write a fitted estimator to the directory ``path``, atomically.

    The artifact is built in a temporary directory next to ``path`` (same filesystem),
    flushed to disk, then renamed into place (:func:`ebf.atomic.atomic_dir`), so ``path``
    never holds a half-written model.

    Parameters
    ----------
    model : estimator
        A fitted estimator whose class is in :data:`MODEL_CLASSES`.
    path : str or path-like
        Directory to create. Its parent is created if missing.
    overwrite : bool, default=False
        Replace an existing model directory at ``path`` (the old one is renamed aside, the new
        one renamed in, then the old one deleted). Anything at ``path`` that is not a model
        directory (a ``manifest.json`` of format ``"ebf-model"``) is never replaced.
    metadata : mapping, optional
        JSON-serialisable user metadata stored under ``metadata.user`` in the manifest.

    Returns
    -------
    pathlib.Path
        The model directory.

    Raises
    ------
    FileExistsError
        If ``path`` exists and ``overwrite`` is False, or it exists and is not a model.
    ebf.atomic.UnsafeOutputError
        If ``path`` is the current directory or one of its parents.
    sklearn.exceptions.NotFittedError
        If the model is not fitted (a ``ValueError``).
    TypeError
        If the class is not in the allowlist or the state holds an unsupported value.
    ValueError
        If the state holds an object-dtype array.

    Examples
    --------
    >>> import numpy as np, tempfile, pathlib
    >>> from mondrian import MondrianForestClassifier
    >>> X = np.random.default_rng(0).random((50, 2)); y = (X[:, 0] > 0.5).astype(int)
    >>> clf = MondrianForestClassifier(n_estimators=2, random_state=0).fit(X, y)
    >>> path = save(clf, pathlib.Path(tempfile.mkdtemp()) / "clf", metadata={"run": 7})
    >>> sorted(p.name for p in path.iterdir())
    ['arrays', 'manifest.json']
    """
    target = Path(path)
    check_destination(target, "model", overwrite=overwrite)
    top = estimator_state(model)  # before touching the disk: NotFittedError etc. come first
    features = _features(model)
    training = _training(model)
    user = _encode(dict(metadata or {}), None, "metadata")
    with atomic_dir(target, "model", overwrite=overwrite) as tmp_dir:
        tmp = Path(tmp_dir)
        writer = _ArrayWriter(tmp)
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "class": top["class"],
            "params": _encode(top["params"], writer, "params"),
            "notes": top.get("notes", []),
            "features": features,
            "training": training,
            "metadata": {
                "library": "ebf",
                "library_version": _library_version(),
                "numpy_version": np.__version__,
                "python_version": platform.python_version(),
                "created_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "user": user,
            },
            "state": _encode(top["state"], writer, "state"),
            "files": writer.files,
        }
        with open(tmp / MANIFEST, "w", encoding="utf-8") as f:
            f.write(json.dumps(manifest, allow_nan=False, indent=1))  # strict: no NaN tokens
    return target


def load(path: str | os.PathLike) -> Any:
    """Load an estimator saved by :func:`save`; never unpickles anything.

    Checks the format and version, looks the class up in the allowlist
    :data:`MODEL_CLASSES`, verifies the sha256 of every array file before reading it with
    ``np.load(allow_pickle=False)``, then builds ``cls(**params)`` and restores its state.

    Parameters
    ----------
    path : str or path-like
        A model directory written by :func:`save`.

    Returns
    -------
    estimator
        The fitted estimator; its predictions are bit-identical to the saved one's.

    Raises
    ------
    FileNotFoundError
        If the directory, its manifest or an array file is missing.
    ModelFormatError
        (a ``ValueError``) on a malformed manifest, an unsupported format version
        (:class:`UnsupportedVersionError`), a class outside the allowlist
        (:class:`UnknownClassError`), a checksum mismatch (:class:`ChecksumError`), a path
        leaving the directory, an object array or an inconsistent state.

    Examples
    --------
    >>> import numpy as np, tempfile, pathlib
    >>> from mondrian import MondrianForestRegressor
    >>> X = np.random.default_rng(1).random((60, 2)); y = X.sum(axis=1)
    >>> reg = MondrianForestRegressor(n_estimators=2, random_state=1).fit(X, y)
    >>> back = load(save(reg, pathlib.Path(tempfile.mkdtemp()) / "m"))
    >>> type(back).__name__, back.n_samples_seen_
    ('MondrianForestRegressor', 60)
    """
    root = Path(path)
    manifest = read_manifest(root)
    where = str(root / MANIFEST)
    try:
        _resolve_class(manifest["class"])  # fail before reading any array
    except UnknownClassError as exc:
        raise UnknownClassError(f"{where}: {exc}") from exc
    decoder = _Decoder(root, manifest["files"], where)
    top = {
        "class": manifest["class"],
        "params": decoder.decode(manifest["params"], "params"),
        "state": decoder.decode(manifest["state"], "state"),
    }
    decoder.verify_unreferenced()
    try:
        return estimator_from_state(top)
    except ModelFormatError as exc:
        raise type(exc)(f"{where}: {exc}") from exc


def read_manifest(path: str | os.PathLike) -> dict:
    """The parsed ``manifest.json`` of a model directory, after format and version checks.

    Reads no array and imports nothing; use it to inspect metadata (features, training,
    library version) without loading the model.

    Parameters
    ----------
    path : str or path-like
        A model directory.

    Returns
    -------
    dict
        The manifest as written (non-finite floats and arrays still as JSON markers).

    Raises
    ------
    FileNotFoundError
        If the directory or its manifest is missing.
    ModelFormatError
        On invalid or non-strict JSON, a wrong ``format`` or a missing entry;
        :class:`UnsupportedVersionError` on an unknown ``format_version``.

    Examples
    --------
    >>> import numpy as np, tempfile, pathlib
    >>> from mondrian import MondrianForestRegressor
    >>> X = np.random.default_rng(2).random((40, 2)); y = X[:, 1]
    >>> reg = MondrianForestRegressor(n_estimators=2, random_state=2).fit(X, y)
    >>> m = read_manifest(save(reg, pathlib.Path(tempfile.mkdtemp()) / "m"))
    >>> m["format_version"], m["class"], m["training"]["n_samples_seen_"]
    (1, 'mondrian.MondrianForestRegressor', 40)
    """
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(errno.ENOENT, "model directory not found", str(root))
    file = root / MANIFEST
    if not file.is_file():
        raise FileNotFoundError(errno.ENOENT, "model manifest not found", str(file))
    manifest = _parse_json(file.read_bytes(), str(file))
    if not isinstance(manifest, dict):
        raise ModelFormatError(f"{file}: the manifest must be a JSON object")
    if manifest.get("format") != FORMAT:
        raise ModelFormatError(
            f"{file}: format {manifest.get('format')!r} is not an {FORMAT!r} model artifact"
        )
    version = manifest.get("format_version")
    if type(version) is not int or version != FORMAT_VERSION:
        build = f"ebf {_library_version()}" if _library_version() else "this build of ebf"
        raise UnsupportedVersionError(
            f"{file}: format_version {version!r} is not supported; {build} reads "
            f"format_version {FORMAT_VERSION} only"
            + (" (upgrade ebf to load newer models)" if type(version) is int
               and version > FORMAT_VERSION else "")
        )
    for key, kind in (("class", str), ("params", dict), ("state", object), ("files", dict)):
        if key not in manifest or not isinstance(manifest[key], kind):
            raise ModelFormatError(f"{file}: missing or invalid entry {key!r}")
    for name, digest in manifest["files"].items():
        if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            raise ModelFormatError(f"{file}: files[{name!r}] is not a sha256 hex digest")
    return manifest


def manifest_digest(path: str | os.PathLike) -> str:
    """sha256 (hex) of ``manifest.json``: one hash that pins the whole artifact.

    The manifest records the sha256 of every array file, so this digest changes whenever
    any byte of the model changes. The Dask pipeline writes it into the Parquet metadata of
    its predictions.

    Parameters
    ----------
    path : str or path-like
        A model directory (or its ``manifest.json``).

    Returns
    -------
    str
        64 lowercase hex digits.

    Examples
    --------
    >>> import numpy as np, tempfile, pathlib
    >>> from mondrian import MondrianForestRegressor
    >>> X = np.random.default_rng(3).random((40, 2)); y = X[:, 0]
    >>> reg = MondrianForestRegressor(n_estimators=2, random_state=3).fit(X, y)
    >>> len(manifest_digest(save(reg, pathlib.Path(tempfile.mkdtemp()) / "m")))
    64
    """
    file = Path(path)
    if file.is_dir():
        file = file / MANIFEST
    if not file.is_file():
        raise FileNotFoundError(errno.ENOENT, "model manifest not found", str(file))
    return hashlib.sha256(file.read_bytes()).hexdigest()


def estimator_state(estimator: Any) -> dict:
    """``{"class", "params", "state"}`` of a fitted estimator, for nesting in a state.

    A composite estimator stores each sub-estimator as ``estimator_state(sub)`` inside its
    own ``_get_state()``; :func:`save` encodes the whole tree. A ``random_state`` given as a
    ``RandomState`` / ``Generator`` cannot be stored: it becomes None and ``"notes"`` says so.

    Parameters
    ----------
    estimator : estimator
        A fitted estimator whose class is in :data:`MODEL_CLASSES`.

    Returns
    -------
    dict
        ``class`` (allowlist key), ``params`` (``get_params(deep=False)``), ``state``
        (``_get_state()``) and, if any parameter was replaced, ``notes`` (list of str).

    Examples
    --------
    >>> import numpy as np
    >>> from mondrian import MondrianForestRegressor
    >>> X = np.random.default_rng(4).random((30, 2)); y = X[:, 0]
    >>> reg = MondrianForestRegressor(n_estimators=2, random_state=4).fit(X, y)
    >>> d = estimator_state(reg)
    >>> d["class"], d["params"]["n_estimators"]
    ('mondrian.MondrianForestRegressor', 2)
    >>> estimator_from_state(d).predict(X[:2]).shape
    (2,)
    """
    key = _class_key(estimator)
    get_state = getattr(estimator, "_get_state", None)
    if not callable(get_state):
        raise TypeError(f"{key} does not implement _get_state(); it cannot be saved")
    params: dict = {}
    notes: list[str] = []
    for name, value in estimator.get_params(deep=False).items():
        if isinstance(value, _RANDOM_OBJECTS):
            notes.append(
                f"params.{name}: a {type(value).__name__} instance cannot be stored and was "
                "saved as None (the fitted state keeps its seeds; a refit will differ)"
            )
            value = None
        params[name] = value
    out = {"class": key, "params": params, "state": get_state()}
    if notes:
        out["notes"] = notes
    return out


def estimator_from_state(d: Mapping[str, Any]) -> Any:
    """Rebuild an estimator from :func:`estimator_state` (after decoding), via the allowlist.

    Parameters
    ----------
    d : mapping
        ``{"class": key, "params": dict, "state": ...}``; ``class`` must be a key of
        :data:`MODEL_CLASSES`.

    Returns
    -------
    estimator
        ``cls(**params)`` with ``_set_state(state)`` applied.

    Raises
    ------
    UnknownClassError
        If the class key is not in the allowlist (nothing is imported then).
    ModelFormatError
        If the parameters or the state do not fit the class.

    Examples
    --------
    >>> import numpy as np
    >>> from mondrian import MondrianForestClassifier
    >>> X = np.random.default_rng(5).random((30, 2)); y = (X[:, 0] > 0.5).astype(int)
    >>> clf = MondrianForestClassifier(n_estimators=2, random_state=5).fit(X, y)
    >>> estimator_from_state(estimator_state(clf)).classes_
    array([0, 1])
    """
    if not isinstance(d, Mapping) or not isinstance(d.get("params"), dict) or "state" not in d:
        raise ModelFormatError("an estimator entry needs 'class', 'params' (a dict) and 'state'")
    key = d.get("class")
    cls = _resolve_class(key)
    try:
        estimator = cls(**d["params"])
        if hasattr(estimator, "_validate_params"):
            estimator._validate_params()  # scikit-learn's checks of types and ranges
    except (TypeError, ValueError) as exc:
        msg = f"parameters {sorted(d['params'])} do not fit {key}: {exc}"
        raise ModelFormatError(msg) from exc
    try:
        estimator._set_state(d["state"])
    except ModelFormatError as exc:
        raise type(exc)(f"in {key}: {exc}") from exc
    except KeyError as exc:
        raise ModelFormatError(f"invalid state for {key}: missing entry {exc}") from exc
    except (TypeError, ValueError, IndexError, AttributeError) as exc:
        raise ModelFormatError(f"invalid state for {key}: {exc}") from exc
    return estimator


# ----------------------------------------------------------------------------- the allowlist


def _class_key(estimator: Any) -> str:
    """Allowlist key of ``type(estimator)``; exact class only (a subclass is refused)."""
    cls = type(estimator)
    spec = f"{cls.__module__}:{cls.__qualname__}"
    for key, target in MODEL_CLASSES.items():
        if target == spec:
            return key
        module, _, name = target.partition(":")
        if module in sys.modules and getattr(sys.modules[module], name, None) is cls:
            return key  # defined elsewhere and re-exported under the registered name
    raise TypeError(
        f"{cls.__module__}.{cls.__qualname__} cannot be saved: it is not one of the model "
        f"classes {sorted(MODEL_CLASSES)}"
    )


def _resolve_class(key: Any) -> type:
    """The class registered under ``key``; only allowlisted module names are imported."""
    target = MODEL_CLASSES.get(key) if isinstance(key, str) else None
    if target is None:
        raise UnknownClassError(
            f"class {key!r} is not a loadable model class; known classes: {sorted(MODEL_CLASSES)}"
        )
    module, _, name = target.partition(":")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise UnknownClassError(
            f"class {key!r} is registered as {target} but cannot be imported: {exc}"
        ) from exc
    return cls


# ----------------------------------------------------------------------------- encoding


class _ArrayWriter:
    """Writes arrays as ``arrays/<n>.npy`` under ``root``; records their sha256."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: dict[str, str] = {}
        (root / ARRAY_DIR).mkdir()

    def write(self, array: np.ndarray, where: str) -> dict:
        if array.dtype.hasobject:
            raise ValueError(
                f"{where} is an array of dtype {array.dtype}, which cannot be stored without "
                "pickle; convert it to a numeric or fixed-width string dtype, or a list"
            )
        name = f"{ARRAY_DIR}/{len(self.files):05d}.npy"
        with open(self.root / name, "xb") as f:
            hashing = _HashingWriter(f)
            np.save(hashing, array, allow_pickle=False)
            f.flush()
            os.fsync(f.fileno())
        digest = hashing.hash.hexdigest()
        self.files[name] = digest
        return {_ARRAY: name, "sha256": digest, "dtype": str(array.dtype),
                "shape": list(array.shape)}


class _HashingWriter:
    """A write-only file object that hashes what passes through it."""

    def __init__(self, f: Any) -> None:
        self.f = f
        self.hash = hashlib.sha256()

    def write(self, data: Any) -> int:
        self.hash.update(data)
        return self.f.write(data)


def _encode(obj: Any, writer: _ArrayWriter | None, where: str) -> Any:
    """JSON-ready copy of a state; arrays go to ``writer`` (None: arrays not allowed)."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, np.ndarray):
        if writer is None:
            raise TypeError(f"{where}: arrays are not allowed here, got {obj.dtype} array")
        return writer.write(obj, where)
    if isinstance(obj, np.generic):
        if obj.dtype.kind not in "biuf":
            raise TypeError(f"{where}: numpy scalar of dtype {obj.dtype} cannot be stored")
        return {_SCALAR: _encode(obj.item(), None, where), "dtype": str(obj.dtype)}
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        if np.isfinite(obj):
            return float(obj)
        return {_FLOAT: "nan" if np.isnan(obj) else ("inf" if obj > 0 else "-inf")}
    if isinstance(obj, (list, tuple)):
        items = [_encode(v, writer, f"{where}[{i}]") for i, v in enumerate(obj)]
        return {_TUPLE: items} if isinstance(obj, tuple) else items
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            if not isinstance(key, str):
                raise TypeError(f"{where}: dict keys must be str, got {key!r}")
            out[key] = _encode(value, writer, f"{where}.{key}")
        return {_DICT: out} if any(_is_marker(k) for k in out) else out
    raise TypeError(
        f"{where}: a {type(obj).__module__}.{type(obj).__qualname__} cannot be stored; a "
        "state holds dicts, lists, JSON scalars and numpy arrays only"
    )


def _is_marker(key: str) -> bool:
    return key.startswith("__") and key.endswith("__")


# ----------------------------------------------------------------------------- decoding


class _Decoder:
    """Turns a manifest's JSON back into a state, loading (verified) array files."""

    def __init__(self, root: Path, files: dict, where: str) -> None:
        self.root = root
        self.files = files
        self.where = where
        self.seen: set[str] = set()

    def fail(self, msg: str) -> ModelFormatError:
        return ModelFormatError(f"{self.where}: {msg}")

    def decode(self, obj: Any, where: str) -> Any:
        if isinstance(obj, list):
            return [self.decode(v, f"{where}[{i}]") for i, v in enumerate(obj)]
        if not isinstance(obj, dict):
            return obj  # JSON scalar (strict parsing let no NaN/Infinity through)
        markers = [k for k in obj if _is_marker(k)]
        if not markers:
            return {k: self.decode(v, f"{where}.{k}") for k, v in obj.items()}
        marker = markers[0]
        value = obj[marker]
        if marker == _DICT and isinstance(value, dict) and len(obj) == 1:
            return {k: self.decode(v, f"{where}.{k}") for k, v in value.items()}
        if marker == _TUPLE and isinstance(value, list) and len(obj) == 1:
            return tuple(self.decode(v, f"{where}[{i}]") for i, v in enumerate(value))
        if marker == _FLOAT and value in _NONFINITE and len(obj) == 1:
            return float(_NONFINITE[value])
        if marker == _SCALAR and set(obj) == {_SCALAR, "dtype"}:
            return self._scalar(obj, where)
        if marker == _ARRAY:
            return self._array(obj, where)
        raise self.fail(f"{where}: malformed entry with keys {sorted(obj)}")

    def _scalar(self, obj: dict, where: str) -> np.generic:
        try:
            dtype = np.dtype(obj["dtype"])
        except (TypeError, ValueError) as exc:
            raise self.fail(f"{where}: unknown scalar dtype {obj['dtype']!r}") from exc
        value = self.decode(obj[_SCALAR], where)
        if dtype.kind not in "biuf" or not isinstance(value, (bool, int, float)):
            raise self.fail(f"{where}: scalar {value!r} of dtype {dtype} is not allowed")
        return dtype.type(value)

    def _array(self, obj: dict, where: str) -> np.ndarray:
        name = obj[_ARRAY]
        file = self._member(name, where)
        if obj.get("sha256") != self.files[name]:
            raise self.fail(f"{where}: the sha256 of {name} differs from its 'files' entry")
        array = self._read(name, file)
        if str(array.dtype) != obj.get("dtype") or list(array.shape) != obj.get("shape"):
            raise self.fail(
                f"{file} holds a {array.dtype} array of shape {array.shape}, but the manifest "
                f"says {obj.get('dtype')} {obj.get('shape')}"
            )
        return array

    def _member(self, name: Any, where: str) -> Path:
        """The file of an array entry, refusing anything outside ``arrays/`` of the model."""
        if not isinstance(name, str) or not _ARRAY_NAME.fullmatch(name):
            raise self.fail(
                f"{where}: array path {name!r} is not inside the model directory "
                "(expected 'arrays/<number>.npy'); refusing to read it"
            )
        if name not in self.files:
            raise self.fail(f"{where}: array file {name} is not listed in 'files'")
        file = self.root / name
        if file.is_symlink() or not file.resolve().is_relative_to(self.root.resolve()):
            raise self.fail(f"{where}: {name} is a link or leaves the model directory")
        return file

    def _read(self, name: str, file: Path) -> np.ndarray:
        """Hash the file, then parse it from the same open handle, never with pickle."""
        self.seen.add(name)
        try:
            f = open(file, "rb")
        except FileNotFoundError:
            raise FileNotFoundError(
                errno.ENOENT, f"array file listed in {MANIFEST} is missing", str(file)
            ) from None
        with f:
            digest = hashlib.file_digest(f, "sha256").hexdigest()
            if digest != self.files[name]:
                raise ChecksumError(
                    f"{file}: sha256 mismatch (manifest {self.files[name][:16]}..., file "
                    f"{digest[:16]}...): the file is corrupt or was modified"
                )
            f.seek(0)
            if f.read(len(_NPY_MAGIC)) != _NPY_MAGIC:
                raise ModelFormatError(f"{file}: not a .npy file")
            f.seek(0)
            try:
                array = np.load(f, allow_pickle=False)
            except (ValueError, OSError, EOFError) as exc:
                raise ModelFormatError(f"{file}: cannot be read as a .npy array: {exc}") from exc
        if not isinstance(array, np.ndarray) or array.dtype.hasobject:
            raise ModelFormatError(f"{file}: object arrays are not allowed")
        return array

    def verify_unreferenced(self) -> None:
        """Check the files listed in the manifest but not referenced by the state, too."""
        for name in self.files:
            if name not in self.seen:
                self._read(name, self._member(name, "files"))


def _parse_json(data: bytes, where: str) -> Any:
    """Strict JSON: no NaN/Infinity tokens, no duplicate keys."""

    def constant(token: str) -> Any:
        raise ModelFormatError(f"{where}: non-standard JSON constant {token}")

    def pairs(items: list) -> dict:
        keys = [k for k, _ in items]
        if len(set(keys)) != len(keys):
            raise ModelFormatError(f"{where}: duplicate key {max(keys, key=keys.count)!r}")
        return dict(items)

    try:
        return json.loads(data.decode("utf-8"), parse_constant=constant, object_pairs_hook=pairs)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ModelFormatError(f"{where}: not valid JSON: {exc}") from exc


# ----------------------------------------------------------------------------- manifest parts


def _features(model: Any) -> dict:
    names = getattr(model, "feature_names_in_", None)
    dtypes = getattr(model, "feature_dtypes_", None)
    if dtypes is None:  # the ebf estimators keep them in their FeatureEncoder
        dtypes = getattr(getattr(model, "encoder_", None), "dtypes_", None)
    if hasattr(dtypes, "items"):  # a mapping or a pandas Series: name -> dtype
        dtypes = {str(k): str(v) for k, v in dtypes.items()}
    elif dtypes is not None:
        dtypes = [str(v) for v in dtypes]
    n = getattr(model, "n_features_in_", None)
    return {
        "n_features": int(n) if isinstance(n, (int, np.integer)) else None,
        "names": None if names is None else [str(c) for c in names],
        "dtypes": dtypes,
    }


def _training(model: Any) -> dict:
    out: dict = {}
    for name in ("n_samples_seen_", "n_features_in_"):
        value = getattr(model, name, None)
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            out[name] = int(value)
    classes = getattr(model, "classes_", None)
    if classes is not None:
        out["n_classes"] = len(classes)
    return out


def _library_version() -> str | None:
    try:
        return importlib.metadata.version("ebf")
    except importlib.metadata.PackageNotFoundError:
        return getattr(sys.modules.get("ebf"), "__version__", None)
