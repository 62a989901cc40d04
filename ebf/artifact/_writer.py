"""Writing a model: ``save``, the manifest plus checksummed packs, atomically.

Format 2 (the default) writes the head (parameters, encoder, trunk: everything but the
branches) to ``head.pack`` and each part of an ensemble (a branch of an EBF, a sub-sample
forest of an SSF) to its own ``shards/<n>.pack`` (:mod:`ebf.artifact._packs`); format 1
writes one ``.npy`` file per array. The estimator's state comes from
:func:`ebf.artifact.classes.estimator_state`, encoded by :mod:`ebf.artifact._codec`; the
manifest's names and content hash are those :mod:`ebf.artifact._manifest` checks on read.

A model can also be written in steps (:func:`stage_model`): the parts first, each by
:func:`write_part` wherever it was fit (a Dask worker writes its branch's shard at the end of
its fit, so the driver never holds branch arrays), or by :func:`carry_part` from a saved
model, unchanged (its shard's file linked or copied, byte for byte: an update of some
branches leaves the others as they were), then the head and the manifest by
:meth:`ModelStage.write` from a model whose parts are :class:`StoredPart` references. The
stage is a hidden temporary directory that a complete model moves out of; nothing appears at
the destination until then. :func:`save` of a saved model (a :class:`ModelReader`) copies
its files the same way.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from basics.atomic import atomic_dir
from basics.locations import check_destination
from basics.versions import library_version

from ._codec import (
    ArrayWriter,
    ModelFormatError,
    content_hash,
    encode,
    features_entry,
    training_entry,
)
from ._manifest import FORMAT, FORMAT_VERSION, MANIFEST, hashed_keys
from ._packs import HEAD_NAME, SHARD, PackWriter, Store, StoredPart, shard_name, write_pack
from .classes import estimator_state

__all__ = ["ModelStage", "StoredPart", "carry_part", "save", "stage_model", "write_part"]


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
    (:mod:`ebf.artifact._packs`), so one branch can be loaded alone
    (:func:`ebf.artifact.open_model`);
    format 1 writes one ``.npy`` file per array, for readers older than format 2.

    Parameters
    ----------
    model : estimator or ebf.artifact.ModelReader
        A fitted estimator whose class is in :data:`MODEL_CLASSES`; or a saved model of
        format 2, opened (:func:`ebf.artifact.open_model`), whose files are copied byte
        for byte (hard links on one local file system) with ``metadata`` in place of its
        own if given: the same model hash, nothing loaded.
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
    from ._reader import ModelReader

    if isinstance(model, ModelReader):
        if format_version == FORMAT_VERSION and not compact and (
                model.format_version == FORMAT_VERSION):
            with stage_model(path, overwrite=overwrite, storage_options=storage_options) as stage:
                stage._copy_model(model, metadata)
            return Path(path) if store.is_local else store.url
        model = model.load()  # another format, or compacted: rewritten from the estimator
    if compact and callable(getattr(model, "compact", None)):
        model = model.compact()
    top = estimator_state(model)  # before touching the disk: NotFittedError etc. come first
    with stage_model(path, overwrite=overwrite, storage_options=storage_options) as stage:
        stage._write_state(model, top, metadata, format_version)
    return Path(path) if store.is_local else store.url


def write_part(stage: str, index: int, part: Any,
               storage_options: Mapping[str, Any] | None = None) -> StoredPart:
    """Write part ``index`` of an ensemble to its shard in ``stage``; whole or not at all.

    Runs where the part is (a Dask worker, at the end of the branch's fit). Writing the same
    part again (a retried task) replaces the shard with the same bytes.

    Parameters
    ----------
    stage : str
        :attr:`ModelStage.url`.
    index : int
        The part's position (branch or sub-sample).
    part : estimator
        The fitted branch learner or sub-sample forest.
    storage_options : mapping, optional

    Returns
    -------
    StoredPart
    """
    return _write_shard(stage, index, estimator_state(part), storage_options)


def carry_part(stage: str, index: int, reader: Any,
               storage_options: Mapping[str, Any] | None = None) -> StoredPart:
    """Part ``index`` of the saved model ``reader`` into ``stage``, unchanged.

    Its shard's file is hard-linked (one local file system) or copied, byte for byte: the
    part keeps its size and sha256, and nothing is decoded. Every load checks the file
    against its manifest entry as for any shard. Like :func:`write_part`, it may be done
    again (a retry replaces the shard with the same bytes).

    Parameters
    ----------
    stage : str
        :attr:`ModelStage.url`.
    index : int
        The part's position, the same in both models.
    reader : ebf.artifact.ModelReader
        A saved model of format 2.
    storage_options : mapping, optional
        The stage's fsspec options.

    Returns
    -------
    StoredPart
    """
    entry = reader.manifest["shards"][int(index)]
    _copy_file(reader.store, Store(stage, storage_options), shard_name(int(index)),
               int(entry["bytes"]))
    return StoredPart(stage, int(index), dict(entry))


def _copy_file(source: Store, target: Store, name: str, size: int) -> None:
    """File ``name`` of ``source`` to ``target``, whole or not at all: a hard link where both
    are local (and on one file system), else a copy. The source must be a regular file of
    ``size`` bytes (as its manifest says) inside its model directory, never a link."""
    with source.open(name, f"file {name}") as f:  # checked as any load checks it
        found = source.size(f, name)
        if found != size:
            raise ModelFormatError(f"{source.path(name)}: {found} bytes where its manifest "
                                   f"says {size}")
        if source.is_local and target.is_local:
            dst = Path(target.root) / name
            dst.parent.mkdir(exist_ok=True)
            try:
                if dst.exists():  # a retry: the same bytes again
                    dst.unlink()
                os.link(Path(source.root) / name, dst, follow_symlinks=False)
                return
            except OSError:  # another file system, or no hard links here: copy
                pass
        with target.replace(name) as out:
            shutil.copyfileobj(f, out, 1 << 22)


def _write_shard(stage: str, index: int, value: dict,
                 storage_options: Mapping[str, Any] | None) -> StoredPart:
    """Shard ``index`` of ``stage`` from a part's :func:`estimator_state`."""
    writer = PackWriter()
    encoded = encode(value, writer, f"state.parts[{index}]")
    name = shard_name(index)
    with Store(stage, storage_options).replace(name) as f:
        size, digest = write_pack(f, encoded, writer)
    return StoredPart(stage, int(index), {"file": name, "bytes": size, "sha256": digest,
                                          "class": value["class"]})


class ModelStage:
    """A model being written: a temporary directory the parts and then the head go to.

    Made by :func:`stage_model`, which moves it to the destination when its ``with`` block
    ends without an error, and removes it otherwise.

    Attributes
    ----------
    url : str
        The temporary directory (an absolute path, or a URL): where :func:`write_part`
        writes, reachable from every worker that can reach the destination.
    storage_options : dict
    """

    def __init__(self, url: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self.url = url if "://" in url else os.path.abspath(url)
        self.storage_options = dict(storage_options or {})
        self.written = False

    def write_part(self, index: int, part: Any) -> StoredPart:
        """:func:`write_part` to this stage."""
        return write_part(self.url, index, part, self.storage_options)

    def write(self, model: Any, metadata: Mapping[str, Any] | None = None) -> Any:
        """Write ``model``'s head and manifest, and every part it holds (not yet stored).

        May be called again (a recalibrated map, new metadata): the head and the manifest
        are replaced; stored parts are not written again.

        Parameters
        ----------
        model : estimator
            A fitted estimator; an ensemble's parts may be :class:`StoredPart` of this stage.
        metadata : mapping, optional
            As in :func:`save`.

        Returns
        -------
        ebf.artifact.ModelReader
            The staged model, opened (to predict from it before it is moved into place).
        """
        from ._reader import open_model

        self._write_state(model, estimator_state(model), metadata, FORMAT_VERSION)
        return open_model(self.url, self.storage_options)

    def _write_state(self, model: Any, top: dict, metadata: Mapping[str, Any] | None,
                     format_version: int) -> None:
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
                "created_utc": datetime.datetime.now(datetime.UTC).strftime(
                    "%Y-%m-%dT%H:%M:%SZ"),
                "user": user,
            },
        }
        out = Store(self.url, self.storage_options)
        if format_version == 1:
            writer = ArrayWriter(Path(self.url))
            manifest["params"] = encode(top["params"], writer, "params")
            manifest["state"] = encode(top["state"], writer, "state")
            manifest["files"] = writer.files
        else:
            manifest.update(self._write_packs(out, top, getattr(type(model), "_parts", "")))
        manifest["model_hash"] = content_hash(manifest, hashed_keys(format_version))
        with out.replace(MANIFEST) as f:  # strict JSON: no NaN tokens
            f.write(json.dumps(manifest, allow_nan=False, indent=1).encode("utf-8"))
        self.written = True

    def _write_packs(self, out: Store, top: dict, parts: str) -> dict:
        """Format 2: every part of ``top``'s state in its own shard (unless stored already),
        the rest in the head pack.

        Returns the manifest entries ``params``, ``state``, ``head`` and ``shards``.
        """
        state = dict(top["state"])
        values = state.pop(parts) if parts else []
        shards = []
        for i, value in enumerate(values):
            if not isinstance(value, StoredPart):
                value = _write_shard(self.url, i, value, self.storage_options)
            elif value.stage != self.url or value.index != i:
                raise ValueError(f"part {i} is stored as part {value.index} in {value.stage}, "
                                 f"not in this stage ({self.url})")
            shards.append(dict(value.entry))
        self._remove_strays(out, {s["file"] for s in shards})
        head = PackWriter()
        entries = {"params": encode(top["params"], head, "params"),
                   "state": encode(state, head, "state")}
        if parts:
            entries["state"][parts] = [{SHARD: i} for i in range(len(values))]
        with out.replace(HEAD_NAME) as f:
            size, digest = write_pack(f, None, head)
        entries["head"] = {"file": HEAD_NAME, "bytes": size, "sha256": digest}
        entries["shards"] = shards
        return entries

    def _copy_model(self, reader: Any, metadata: Mapping[str, Any] | None) -> None:
        """Write the saved model ``reader`` (format 2) here: its packs copied or linked, its
        manifest with ``metadata`` as the user's metadata if given (which the model hash
        does not cover)."""
        manifest = json.loads(json.dumps(reader.manifest))
        out = Store(self.url, self.storage_options)
        files = [(manifest["head"]["file"], manifest["head"]["bytes"])]
        files += [(s["file"], s["bytes"]) for s in manifest.get("shards", ())]
        for name, size in files:
            _copy_file(reader.store, out, name, int(size))
        if metadata is not None:
            manifest["metadata"] = {**manifest["metadata"],
                                    "user": encode(dict(metadata), None, "metadata")}
        with out.replace(MANIFEST) as f:
            f.write(json.dumps(manifest, allow_nan=False, indent=1).encode("utf-8"))
        self.written = True

    @staticmethod
    def _remove_strays(out: Store, keep: set[str]) -> None:
        """Remove what killed part writers left in ``shards/`` (their temporary files)."""
        if out.is_local:
            folder = Path(out.root) / "shards"
            names = [f"shards/{p.name}" for p in folder.iterdir()] if folder.is_dir() else []
            for name in names:
                if name not in keep:
                    (Path(out.root) / name).unlink()
        else:
            folder = f"{out.root}/shards"
            if out.fs.isdir(folder):
                for full in out.fs.ls(folder, detail=False):
                    if "shards/" + full.rstrip("/").rsplit("/", 1)[-1] not in keep:
                        out.fs.rm(full)


@contextmanager
def stage_model(path: str | os.PathLike, *, overwrite: bool = False,
                storage_options: Mapping[str, Any] | None = None) -> Iterator[ModelStage]:
    """Write a model in steps; it appears at ``path`` when the ``with`` block ends.

    Checks the destination first (as :func:`save`). Inside the block, parts are written
    with :func:`write_part` (anywhere that can reach ``path``) and the head with
    :meth:`ModelStage.write`, which must have been called when the block ends. If the block
    raises (or the process is stopped), the stage is removed and ``path`` is untouched.

    Parameters
    ----------
    path : str or path-like
    overwrite : bool, default=False
    storage_options : mapping, optional

    Yields
    ------
    ModelStage

    Examples
    --------
    >>> import numpy as np, tempfile, pathlib
    >>> from ebf import SubsampleForestRegressor
    >>> X = np.random.default_rng(0).random((60, 2)); y = X[:, 0]
    >>> ssf = SubsampleForestRegressor(n_estimators=2, n_subsamples=2, random_state=0).fit(X, y)
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "ssf"
    >>> with stage_model(target) as stage:
    ...     reader = stage.write(ssf)
    >>> sorted(p.name for p in target.iterdir()), reader.n_parts
    (['head.pack', 'manifest.json', 'shards'], 2)
    """
    with atomic_dir(path, "model", overwrite=overwrite,
                    storage_options=storage_options) as tmp_dir:
        stage = ModelStage(tmp_dir, storage_options)
        yield stage
        if not stage.written:
            raise RuntimeError(f"the model staged for {os.fspath(path)!r} has no head: call "
                               "stage.write(model) before the block ends")
