"""Model artifacts: ``save`` / ``load``, a manifest plus checksummed array files, sharded.

An artifact is a directory (local, or any fsspec URL) in format 2::

    model/
      manifest.json        format + version, class, params, features, metadata, the head's
                           state, the size and sha256 of every pack, model_hash
      head.pack            the arrays of the head: everything but the branches (encoder,
                           trunk, parameters)
      shards/00000.pack    one branch of an EBF (one sub-sample forest of an SSF): its state
      shards/00001.pack    and its arrays in one file (:mod:`ebf.pack`)
      ...

so a model has O(branches) files and a worker can load one branch without reading the
others (:func:`ebf.reader.open_model`). Format 1 (``arrays/<n>.npy``, one file per array)
still loads, and ``save(..., format_version=1)`` still writes it; ``ebf migrate-model OLD
NEW`` (or ``save(load(old), new)``) rewrites an old model in format 2.

Every estimator of ``ebf`` and ``mondrian`` implements ``_get_state() -> dict`` and
``_set_state(state)`` (see ``docs/model-format.md``); :mod:`ebf.codec` turns such a state into JSON
plus arrays and back, for any nesting. Composite estimators (an EBF holds a trunk and
branch forests) put their sub-estimators into their state with :func:`estimator_state` and
rebuild them with :func:`estimator_from_state`; an ensemble's ``_parts`` names the state
entry whose estimators go to their own shards.

A model directory is untrusted input. Nothing is ever unpickled: files are read within
limits (:mod:`ebf.codec`, :mod:`ebf.pack`), and the class to build is looked up in a fixed
allowlist (:data:`MODEL_CLASSES`) by key; the manifest never names a module to import.
Checksums can be recomputed by whoever edits a file, so every ``_set_state`` validates what
it restores (tree structure, statistics, shapes) before a numba kernel sees it: a crafted
model is a :class:`ModelFormatError`, never a crash, a hang or garbage predictions.

:func:`model_hash` identifies the model's content (not its save time or user metadata).
Writes are atomic (:func:`basics.atomic.atomic_dir`, the one helper every ``ebf`` output
uses): the artifact is built in a temporary directory next to the target and moved into
place. See :func:`save` and :func:`load` for examples.
"""

from __future__ import annotations

import datetime
import errno
import json
import os
import platform
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from basics.atomic import atomic_dir
from basics.locations import check_destination
from basics.versions import library_version

from . import codec
from .codec import (
    MAX_FILES,
    ArrayWriter,
    ChecksumError,
    ModelFormatError,
    UnknownClassError,
    UnsupportedVersionError,
    content_hash,
    encode,
    features_entry,
    parse_json_bytes,
    training_entry,
)
from .pack import HEAD_NAME, SHARD, PackWriter, Store, shard_name, write_pack
from .registry import (  # re-exported: the public API of model files
    MODEL_CLASSES,
    estimator_from_state,
    estimator_state,
    new_estimator,
)

__all__ = [
    "FORMAT", "FORMAT_VERSION", "MODEL_CLASSES", "ChecksumError", "ModelFormatError",
    "UnknownClassError", "UnsupportedVersionError", "estimator_from_state", "estimator_state",
    "load", "new_estimator", "model_hash", "read_manifest", "save",
]

#: Name of the artifact format and the one version this module writes and reads.
FORMAT = "ebf-model"
FORMAT_VERSION = 2
#: The format versions :func:`load` reads: 1 (one ``.npy`` per array) and 2 (packs, sharded).
READABLE_VERSIONS = (1, 2)
MANIFEST = "manifest.json"

#: The manifest entries :func:`model_hash` covers: what the model is and computes, not when
#: or by whom it was saved (``metadata``) nor what is derived from the state.
HASHED = ("format_version", "class", "params", "features", "state")

_SHA256 = re.compile(r"[0-9a-f]{64}", re.ASCII)
# ----------------------------------------------------------------------------- public API


def save(
    model: Any,
    path: str | os.PathLike,
    *,
    overwrite: bool = False,
    metadata: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    format_version: int = FORMAT_VERSION,
    compact: bool = False,
) -> str | Path:
    """Write a fitted estimator to the directory ``path`` (local or any fsspec URL), atomically.

    The artifact is built in a temporary directory next to ``path`` and moved into place when
    complete (:func:`basics.atomic.atomic_dir`, the helper every ``ebf`` output uses), so
    ``path`` never holds a half-written model. Format 2 (the default) stores the model's
    head (parameters, encoder, trunk: everything but the branches) in ``head.pack`` and each
    branch of an EBF (each sub-sample forest of an SSF) in its own ``shards/<n>.pack``
    (:mod:`ebf.pack`), so one branch can be loaded alone (:func:`ebf.reader.open_model`);
    format 1 writes one ``.npy`` file per array, for readers older than format 2.

    Parameters
    ----------
    model : estimator
        A fitted estimator whose class is in :data:`MODEL_CLASSES`.
    path : str or path-like
        Directory to create: a local path or an fsspec URL (``s3://bucket/models/m``).
        Its parent is created if missing.
    overwrite : bool, default=False
        Replace an existing model directory at ``path`` (the old one is moved aside, the new
        one moved in, then the old one deleted). Anything at ``path`` that is not a model
        directory (a ``manifest.json`` of format ``"ebf-model"``) is never replaced.
    metadata : mapping, optional
        JSON-serialisable user metadata stored under ``metadata.user`` in the manifest.
    storage_options : mapping, optional
        fsspec options (credentials, ...) for a URL.
    format_version : {2, 1}, default=2
        Format 1 (no shards) only on local paths.
    compact : bool, default=False
        Save ``model.compact()``: the predict-only form (Mondrian forests without their
        online state, several times smaller; the same predictions, bit for bit; no
        ``partial_fit``). Models without online state are saved as they are.

    Returns
    -------
    pathlib.Path or str
        The model directory (a ``Path`` for a local path, else the URL).

    Raises
    ------
    FileExistsError
        If ``path`` exists and ``overwrite`` is False, or it exists and is not a model.
    basics.locations.UnsafeOutputError
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
    ['head.pack', 'manifest.json']
    """
    if format_version not in (1, 2):
        raise ValueError(f"format_version must be 1 or 2, got {format_version!r}.")
    store = Store(path, storage_options)
    if format_version == 1 and not store.is_local:
        raise ValueError("format_version=1 writes local directories only; use format 2 for "
                         f"{store.url!r}.")
    check_destination(path, "model", overwrite=overwrite, storage_options=storage_options)
    if compact and callable(getattr(model, "compact", None)):
        model = model.compact()
    top = estimator_state(model)  # before touching the disk: NotFittedError etc. come first
    user = encode(dict(metadata or {}), None, "metadata")
    manifest = {
        "format": FORMAT,
        "format_version": format_version,
        "class": top["class"],
        "notes": top.get("notes", []),
        "features": features_entry(model),
        "training": training_entry(model),
        "metadata": {
            "library": "ebf",
            "library_version": library_version(),
            "numpy_version": np.__version__,
            "python_version": platform.python_version(),
            "created_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "user": user,
        },
    }
    with atomic_dir(path, "model", overwrite=overwrite,
                    storage_options=storage_options) as tmp_dir:
        out = Store(tmp_dir, storage_options)
        if format_version == 1:
            writer = ArrayWriter(Path(tmp_dir))
            manifest["params"] = encode(top["params"], writer, "params")
            manifest["state"] = encode(top["state"], writer, "state")
            manifest["files"] = writer.files
        else:
            manifest.update(_write_packs(out, top, getattr(type(model), "_parts", "")))
        manifest["model_hash"] = content_hash(manifest, hashed_keys(format_version))
        with out.create(MANIFEST) as f:  # strict JSON: no NaN tokens
            f.write(json.dumps(manifest, allow_nan=False, indent=1).encode("utf-8"))
    return Path(path) if store.is_local else store.url


def _write_packs(out: Store, top: dict, parts: str) -> dict:
    """Format 2: every part of ``top``'s state in its own shard, the rest in the head pack.

    Returns the manifest entries ``params``, ``state``, ``head`` and ``shards``.
    """
    state = dict(top["state"])
    values = state.pop(parts) if parts else []
    shards = []
    for i, value in enumerate(values):
        writer = PackWriter()
        encoded = encode(value, writer, f"state.{parts}[{i}]")
        with out.create(shard_name(i)) as f:
            size, digest = write_pack(f, encoded, writer)
        shards.append({"file": shard_name(i), "bytes": size, "sha256": digest,
                       "class": value["class"]})
    head = PackWriter()
    entries = {"params": encode(top["params"], head, "params"),
               "state": encode(state, head, "state")}
    if parts:
        entries["state"][parts] = [{SHARD: i} for i in range(len(values))]
    with out.create(HEAD_NAME) as f:
        size, digest = write_pack(f, None, head)
    entries["head"] = {"file": HEAD_NAME, "bytes": size, "sha256": digest}
    entries["shards"] = shards
    return entries


def load(path: str | os.PathLike, storage_options: Mapping[str, Any] | None = None) -> Any:
    """Load an estimator saved by :func:`save`; never unpickles anything.

    Checks the manifest (:func:`read_manifest`), looks the class up in the allowlist
    :data:`MODEL_CLASSES`, checks every file (its size and sha256 against the manifest,
    its header against what it must hold; :mod:`ebf.pack`, :mod:`ebf.codec`) before handing
    an array on, then builds ``cls(**params)`` and restores its state, which validates it in
    full (tree structure, statistics, parts) before any kernel runs. Reads both formats.
    Memory is bounded before anything is allocated: the files hold at most
    ``ebf.codec.MAX_MODEL_BYTES`` (8 GiB) in all, every shape is checked before numpy sees
    it, and checksums are computed in bounded chunks.

    Parameters
    ----------
    path : str or path-like
        A model directory written by :func:`save`: a local path or an fsspec URL.
    storage_options : mapping, optional
        fsspec options for a URL.

    Returns
    -------
    estimator
        The fitted estimator; its predictions are bit-identical to the saved one's.

    Raises
    ------
    FileNotFoundError
        If the directory, its manifest or a file it lists is missing (naming the file).
    ModelFormatError
        (a ``ValueError``) on a malformed manifest, an unsupported format version
        (:class:`UnsupportedVersionError`), a class outside the allowlist
        (:class:`UnknownClassError`), a checksum or model hash mismatch
        (:class:`ChecksumError`), a path leaving the directory, a file that is not a regular
        file or not what its header declares, an object array, a model larger than
        ``ebf.codec.MAX_MODEL_BYTES``, or an inconsistent state (naming the file, or the
        estimator, tree and node).

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
    from .reader import open_model

    return open_model(path, storage_options).load()


def read_manifest(path: str | os.PathLike,
                  storage_options: Mapping[str, Any] | None = None) -> dict:
    """The parsed ``manifest.json`` of a model directory, after format and version checks.

    Reads no array and imports nothing; use it to inspect metadata (features, training,
    library version, shard sizes) without loading the model. The manifest must be a regular
    file of at most ``ebf.codec.MAX_MANIFEST_BYTES`` bytes of strict JSON within the codec's
    limits, its file entries well formed, and its ``model_hash``, if present (models saved
    before it was stored have none), must match its content (:func:`model_hash`).

    Parameters
    ----------
    path : str or path-like
        A model directory (local path or fsspec URL).
    storage_options : mapping, optional
        fsspec options for a URL.

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
    (2, 'mondrian.MondrianForestRegressor', 40)
    """
    store = Store(path, storage_options)
    if not store.is_dir():
        raise FileNotFoundError(errno.ENOENT, "model directory not found", store.url)
    file = store.path(MANIFEST)
    with store.open(MANIFEST, "model manifest") as f:
        data = f.read(codec.MAX_MANIFEST_BYTES + 1)
    if len(data) > codec.MAX_MANIFEST_BYTES:
        raise ModelFormatError(f"{file}: {len(data)} bytes is more than the "
                               f"{codec.MAX_MANIFEST_BYTES} bytes a manifest may have")
    manifest = parse_json_bytes(data, file)
    if not isinstance(manifest, dict):
        raise ModelFormatError(f"{file}: the manifest must be a JSON object")
    if manifest.get("format") != FORMAT:
        raise ModelFormatError(
            f"{file}: format {manifest.get('format')!r} is not an {FORMAT!r} model artifact"
        )
    version = manifest.get("format_version")
    if type(version) is not int or version not in READABLE_VERSIONS:
        build = f"ebf {library_version()}"
        raise UnsupportedVersionError(
            f"{file}: format_version {version!r} is not supported; {build} reads "
            f"format_version {' and '.join(map(str, READABLE_VERSIONS))}"
            + (" (upgrade ebf to load newer models)" if type(version) is int
               and version > FORMAT_VERSION else "")
        )
    files = ("files", dict) if version == 1 else ("shards", list)
    for key, kind in (("class", str), ("params", dict), ("state", object), files,
                      ("features", object)):
        if key not in manifest or not isinstance(manifest[key], kind):
            raise ModelFormatError(f"{file}: missing or invalid entry {key!r}")
    if not isinstance(manifest.setdefault("model_hash", None), (str, type(None))):
        raise ModelFormatError(f"{file}: invalid entry 'model_hash'")
    if version == 1:
        _check_files(manifest, file)
    else:
        _check_packs(manifest, file)
    content = content_hash(manifest, hashed_keys(version))
    if manifest["model_hash"] is None:  # saved before ebf stored it: nothing to verify
        manifest["model_hash"] = content
    elif manifest["model_hash"] != content:
        raise ChecksumError(
            f"{file}: model_hash {manifest['model_hash'][:16]}... does not match the content "
            f"({content[:16]}...): the manifest was modified")
    return manifest


def hashed_keys(version: int) -> tuple[str, ...]:
    """The manifest entries :func:`model_hash` covers in format ``version``."""
    return HASHED if version == 1 else (*HASHED, "head", "shards")


def _check_files(manifest: dict, file: str) -> None:
    if len(manifest["files"]) > MAX_FILES:
        raise ModelFormatError(f"{file}: {len(manifest['files'])} array files; at most "
                               f"{MAX_FILES} are allowed")
    for name, digest in manifest["files"].items():
        if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            raise ModelFormatError(f"{file}: files[{name!r}] is not a sha256 hex digest")


def _check_packs(manifest: dict, file: str) -> None:
    """The ``head`` and ``shards`` entries: fixed names, sizes, sha256 digests, classes."""
    shards = manifest["shards"]
    if len(shards) > MAX_FILES:
        raise ModelFormatError(f"{file}: {len(shards)} shards; at most {MAX_FILES} are allowed")
    entries = [("head", manifest.get("head"), HEAD_NAME)]
    entries += [(f"shards[{i}]", s, shard_name(i)) for i, s in enumerate(shards)]
    for where, entry, name in entries:
        keys = {"file", "bytes", "sha256"} | ({"class"} if where != "head" else set())
        if (not isinstance(entry, dict) or set(entry) != keys or entry["file"] != name
                or type(entry["bytes"]) is not int or entry["bytes"] < 0
                or not isinstance(entry["sha256"], str) or not _SHA256.fullmatch(entry["sha256"])
                or not isinstance(entry.get("class", ""), str)):
            raise ModelFormatError(
                f"{file}: {where} must be {{'file': {name!r}, 'bytes': int >= 0, 'sha256': "
                f"hex digest{', class: str' if where != 'head' else ''}}}; got {entry!r:.200}")


def model_hash(path: str | os.PathLike,
               storage_options: Mapping[str, Any] | None = None) -> str:
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
        A model directory (local path or fsspec URL).
    storage_options : dict, optional
        fsspec options for a URL.

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
    return read_manifest(path, storage_options)["model_hash"]
