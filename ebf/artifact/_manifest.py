"""The manifest of a saved model: its format, its checks on read, the model's content hash.

``manifest.json`` (strict JSON) names the format and its version, the class (a key of the
allowlist :data:`ebf.artifact.classes.MODEL_CLASSES`), the parameters, features, training
and user metadata, the head's state (arrays as markers into ``head.pack``, branches as
``{"__shard__": n}``), the size and sha256 of every pack, and :func:`model_hash`.
:func:`read_manifest` reads and checks it (format, version, entries, pack names, sizes and
digests, the content hash) before anything else of the model is read; the writer
(:mod:`ebf.artifact._writer`) and the reader (:mod:`ebf.artifact._reader`) share these
names and checks. See ``docs/model-format.md``.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Mapping
from typing import Any

from basics.versions import library_version

from . import _codec as codec
from ._codec import (
    MAX_FILES,
    ChecksumError,
    ModelFormatError,
    UnsupportedVersionError,
    content_hash,
    parse_json_bytes,
)
from ._packs import HEAD_NAME, Store, shard_name

__all__ = ["FORMAT", "FORMAT_VERSION", "HASHED", "MANIFEST", "READABLE_VERSIONS",
           "hashed_keys", "model_hash", "read_manifest"]

#: Name of the artifact format and the version :func:`ebf.artifact.save` writes by default.
FORMAT = "ebf-model"
FORMAT_VERSION = 2
#: The format versions :func:`ebf.artifact.load` reads: 1 (one ``.npy`` per array) and 2
#: (packs, sharded).
READABLE_VERSIONS = (1, 2)
MANIFEST = "manifest.json"

#: The manifest entries :func:`model_hash` covers: what the model is and computes, not when
#: or by whom it was saved (``metadata``) nor what is derived from the state.
HASHED = ("format_version", "class", "params", "features", "state")

_SHA256 = re.compile(r"[0-9a-f]{64}", re.ASCII)


def read_manifest(path: str | os.PathLike,
                  storage_options: Mapping[str, Any] | None = None) -> dict:
    """The parsed ``manifest.json`` of a model directory, after format and version checks.

    Reads no array and imports nothing; use it to inspect metadata (features, training,
    library version, shard sizes) without loading the model. The manifest must be a regular
    file of at most ``ebf.artifact._codec.MAX_MANIFEST_BYTES`` bytes of strict JSON within the
    codec's limits, its file entries well formed, and its ``model_hash``, if present (models saved
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
    >>> from ebf.artifact import save
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
    same hash). :func:`ebf.artifact.save` stores it as ``model_hash``; :func:`read_manifest` (and so
    :func:`ebf.artifact.load` and this function) refuses a manifest whose content does not match it.

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
    >>> from ebf.artifact import save
    >>> X = np.random.default_rng(3).random((40, 2)); y = X[:, 0]
    >>> reg = MondrianForestRegressor(n_estimators=2, random_state=3).fit(X, y)
    >>> tmp = pathlib.Path(tempfile.mkdtemp())
    >>> a = model_hash(save(reg, tmp / "a", metadata={"run": 1}))
    >>> a == model_hash(save(reg, tmp / "b", metadata={"run": 2})), len(a)
    (True, 64)
    """
    return read_manifest(path, storage_options)["model_hash"]
