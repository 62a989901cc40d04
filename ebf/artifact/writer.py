"""Writing a model: ``save``, the manifest plus checksummed packs, atomically.

Format 2 (the default) writes the head (parameters, encoder, trunk: everything but the
branches) to ``head.pack`` and each part of an ensemble (a branch of an EBF, a sub-sample
forest of an SSF) to its own ``shards/<n>.pack`` (:mod:`ebf.artifact.packs`); format 1
writes one ``.npy`` file per array. The estimator's state comes from
:func:`ebf.artifact.classes.estimator_state`, encoded by :mod:`ebf.artifact.codec`; the
manifest's names and content hash are those :mod:`ebf.artifact.manifest` checks on read.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from basics.atomic import atomic_dir, check_destination
from basics.versions import library_version

from .classes import estimator_state
from .codec import ArrayWriter, content_hash, encode, features_entry, training_entry
from .manifest import FORMAT, FORMAT_VERSION, MANIFEST, hashed_keys
from .packs import HEAD_NAME, SHARD, PackWriter, Store, shard_name, write_pack

__all__ = ["save"]


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
    (:mod:`ebf.artifact.packs`), so one branch can be loaded alone
    (:func:`ebf.artifact.open_model`);
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
