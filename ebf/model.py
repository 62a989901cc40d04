"""Model artifacts: ``save`` / ``load`` as ``manifest.json`` plus checksummed ``.npy`` files.

An artifact is a directory::

    model/
      manifest.json        format + version, class, params, features, metadata, state,
                           sha256s, model_hash
      arrays/00000.npy     one file per array of the estimator's state
      arrays/00001.npy
      ...

Every estimator of ``ebf`` and ``mondrian`` implements ``_get_state() -> dict`` and
``_set_state(state)`` (see ``LAYOUT.md``); :mod:`ebf.codec` turns such a state into JSON plus
``.npy`` files and back, for any nesting. Composite estimators (an EBF holds a trunk and
branch forests) put their sub-estimators into their state with :func:`estimator_state` and
rebuild them with :func:`estimator_from_state`.

A model directory is untrusted input. Nothing is ever unpickled: files are read within
limits (:mod:`ebf.codec`), and the class to build is looked up in a fixed allowlist
(:data:`MODEL_CLASSES`) by key; the manifest never names a module to import. Checksums can be
recomputed by whoever edits a file, so every ``_set_state`` validates what it restores (tree
structure, statistics, shapes) before a numba kernel sees it: a crafted model is a
:class:`ModelFormatError`, never a crash, a hang or garbage predictions.

:func:`model_hash` identifies the model's content (not its save time or user metadata).
Writes are atomic: the artifact is built in a temporary directory next to the target and
renamed into place. See :func:`save` and :func:`load` for examples.
"""

from __future__ import annotations

import datetime
import errno
import importlib
import json
import os
import platform
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from basics.atomic import atomic_dir, check_destination
from basics.versions import library_version

from .codec import (
    MAX_FILES,
    ArrayWriter,
    ChecksumError,
    Decoder,
    ModelFormatError,
    UnknownClassError,
    UnsupportedVersionError,
    content_hash,
    encode,
    features_entry,
    open_regular,
    parse_json,
    training_entry,
)

__all__ = [
    "FORMAT", "FORMAT_VERSION", "MODEL_CLASSES", "ChecksumError", "ModelFormatError",
    "UnknownClassError", "UnsupportedVersionError", "estimator_from_state", "estimator_state",
    "load", "model_hash", "read_manifest", "save",
]

#: Name of the artifact format and the one version this module writes and reads.
FORMAT = "ebf-model"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"

#: The manifest entries :func:`model_hash` covers: what the model is and computes, not when
#: or by whom it was saved (``metadata``) nor what is derived from the state.
HASHED = ("format_version", "class", "params", "features", "state")

_SHA256 = re.compile(r"[0-9a-f]{64}", re.ASCII)
_RANDOM_OBJECTS = (
    np.random.RandomState, np.random.Generator, np.random.BitGenerator, np.random.SeedSequence,
)

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
    flushed to disk, then renamed into place (:func:`basics.atomic.atomic_dir`), so ``path``
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
    basics.atomic.UnsafeOutputError
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
    features = features_entry(model)
    training = training_entry(model)
    user = encode(dict(metadata or {}), None, "metadata")
    with atomic_dir(target, "model", overwrite=overwrite) as tmp_dir:
        tmp = Path(tmp_dir)
        writer = ArrayWriter(tmp)
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "class": top["class"],
            "params": encode(top["params"], writer, "params"),
            "notes": top.get("notes", []),
            "features": features,
            "training": training,
            "metadata": {
                "library": "ebf",
                "library_version": library_version(),
                "numpy_version": np.__version__,
                "python_version": platform.python_version(),
                "created_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "user": user,
            },
            "state": encode(top["state"], writer, "state"),
            "files": writer.files,
        }
        manifest["model_hash"] = content_hash(manifest, HASHED)
        with open(tmp / MANIFEST, "w", encoding="utf-8") as f:
            f.write(json.dumps(manifest, allow_nan=False, indent=1))  # strict: no NaN tokens
    return target


def load(path: str | os.PathLike) -> Any:
    """Load an estimator saved by :func:`save`; never unpickles anything.

    Checks the manifest (:func:`read_manifest`), looks the class up in the allowlist
    :data:`MODEL_CLASSES`, checks every array file (a regular file whose ``.npy`` header
    matches the manifest and its size) and its sha256 before reading it with
    ``np.load(allow_pickle=False)``, then builds ``cls(**params)`` and restores its state,
    which validates it in full (tree structure, statistics, parts) before any kernel runs.

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
        (:class:`UnknownClassError`), a checksum or model hash mismatch
        (:class:`ChecksumError`), a path leaving the directory, a file that is not a regular
        file or not what its header declares, an object array, or an inconsistent state
        (naming the file, or the estimator, tree and node).

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
    where = f"model file {root / MANIFEST}"
    try:
        _resolve_class(manifest["class"])  # fail before reading any array
    except UnknownClassError as exc:
        raise UnknownClassError(f"{where}: {exc}") from exc
    decoder = Decoder(root, manifest["files"], where)
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
    library version) without loading the model. The manifest must be a regular file of at
    most ``ebf.codec.MAX_MANIFEST_BYTES`` bytes of strict JSON within the codec's limits,
    and its ``model_hash``, if present (models saved before it was stored have none), must
    match its content (:func:`model_hash`).

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
        On a manifest that is not a regular file, too large or nested too deep, invalid or
        non-strict JSON, a wrong ``format`` or a missing entry;
        :class:`UnsupportedVersionError` on an unknown ``format_version``;
        :class:`ChecksumError` if ``model_hash`` does not match the content.

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
    with open_regular(file, "model manifest") as f:
        manifest = parse_json(f, str(file))
    if not isinstance(manifest, dict):
        raise ModelFormatError(f"{file}: the manifest must be a JSON object")
    if manifest.get("format") != FORMAT:
        raise ModelFormatError(
            f"{file}: format {manifest.get('format')!r} is not an {FORMAT!r} model artifact"
        )
    version = manifest.get("format_version")
    if type(version) is not int or version != FORMAT_VERSION:
        build = f"ebf {library_version()}"
        raise UnsupportedVersionError(
            f"{file}: format_version {version!r} is not supported; {build} reads "
            f"format_version {FORMAT_VERSION} only"
            + (" (upgrade ebf to load newer models)" if type(version) is int
               and version > FORMAT_VERSION else "")
        )
    for key, kind in (("class", str), ("params", dict), ("state", object), ("files", dict),
                      ("features", object)):
        if key not in manifest or not isinstance(manifest[key], kind):
            raise ModelFormatError(f"{file}: missing or invalid entry {key!r}")
    if not isinstance(manifest.setdefault("model_hash", None), (str, type(None))):
        raise ModelFormatError(f"{file}: invalid entry 'model_hash'")
    if len(manifest["files"]) > MAX_FILES:
        raise ModelFormatError(f"{file}: {len(manifest['files'])} array files; at most "
                               f"{MAX_FILES} are allowed")
    for name, digest in manifest["files"].items():
        if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            raise ModelFormatError(f"{file}: files[{name!r}] is not a sha256 hex digest")
    content = content_hash(manifest, HASHED)
    if manifest["model_hash"] is None:  # saved before ebf stored it: nothing to verify
        manifest["model_hash"] = content
    elif manifest["model_hash"] != content:
        raise ChecksumError(
            f"{file}: model_hash {manifest['model_hash'][:16]}... does not match the content "
            f"({content[:16]}...): the manifest was modified")
    return manifest


def model_hash(path: str | os.PathLike) -> str:
    """The content hash of a saved model: equal for equal models, whenever they were saved.

    sha256 of the canonical JSON (sorted keys, no spaces, ASCII) of the manifest's
    ``format_version``, ``class``, ``params``, ``features`` and ``state``; the state holds the
    sha256 of every array file, so any changed byte of the model changes the hash, while the
    save time, library versions and user ``metadata`` do not (an identical retrain has the
    same hash). :func:`save` stores it as ``model_hash``; :func:`read_manifest` (and so
    :func:`load` and this function) refuses a manifest whose content does not match it.

    Parameters
    ----------
    path : str or path-like
        A model directory.

    Returns
    -------
    str
        64 lowercase hex digits.

    Raises
    ------
    FileNotFoundError, ModelFormatError
        As :func:`read_manifest`; :class:`ChecksumError` if the stored hash does not match.

    Examples
    --------
    >>> import numpy as np, tempfile, pathlib
    >>> from mondrian import MondrianForestRegressor
    >>> X = np.random.default_rng(3).random((40, 2)); y = X[:, 0]
    >>> reg = MondrianForestRegressor(n_estimators=2, random_state=3).fit(X, y)
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> a = model_hash(save(reg, tmp / "a", metadata={"run": 1}))
    >>> a == model_hash(save(reg, tmp / "b", metadata={"run": 2})), len(a)
    (True, 64)
    """
    return read_manifest(path)["model_hash"]


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


def estimator_from_state(d: Mapping[str, Any], where: str | None = None) -> Any:
    """Rebuild an estimator from :func:`estimator_state` (after decoding), via the allowlist.

    Parameters
    ----------
    d : mapping
        ``{"class": key, "params": dict, "state": ...}``; ``class`` must be a key of
        :data:`MODEL_CLASSES`.
    where : str, optional
        Where ``d`` sits in its parent's state (``"branches[3]"``), for error messages.

    Returns
    -------
    estimator
        ``cls(**params)`` with ``_set_state(state)`` applied.

    Raises
    ------
    UnknownClassError
        If the class key is not in the allowlist (nothing is imported then).
    ModelFormatError
        If the parameters or the state do not fit the class (any ``ValueError``,
        ``TypeError``, ``KeyError``, ``IndexError`` or ``AttributeError`` of ``_set_state``),
        naming the class and ``where``.

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
        raise ModelFormatError(f"{where or 'an estimator'}: an estimator entry needs 'class', "
                               "'params' (a dict) and 'state'")
    key = d.get("class")
    cls = _resolve_class(key)
    label = key if where is None else f"{where} ({key})"
    try:
        estimator = cls(**d["params"])
        if hasattr(estimator, "_validate_params"):
            estimator._validate_params()  # scikit-learn's checks of types and ranges
    except (TypeError, ValueError) as exc:
        msg = f"{label}: parameters {sorted(d['params'])} do not fit {key}: {exc}"
        raise ModelFormatError(msg) from exc
    try:
        estimator._set_state(d["state"])
    except ModelFormatError as exc:  # a nested estimator's, already named
        raise type(exc)(f"{label}: {exc}") from exc
    except KeyError as exc:
        raise ModelFormatError(f"{label}: invalid state: missing entry {exc}") from exc
    except (TypeError, ValueError, IndexError, AttributeError) as exc:
        raise ModelFormatError(f"{label}: invalid state: {exc}") from exc
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


# ----------------------------------------------------------------------------- versions
