"""Reading a saved model whole, or its head and one branch at a time.

:func:`open_model` reads and checks the manifest only; :meth:`ModelReader.load` builds the
whole estimator (what :func:`ebf.artifact.load` returns), while :meth:`ModelReader.head` and
:meth:`ModelReader.load_part` give what the sharded prediction of ``ebf.dask`` needs: the
driver routes rows with the head (encoder, trunk, classes: no branch arrays), and the task
of branch ``b`` loads shard ``b`` alone, checked against the head like a full load checks
it. A :class:`ModelReader` is small and picklable (the manifest and the location), so it
travels in a Dask graph.

Format 1 models (one ``.npy`` per array) load whole only; ``ebf.load(old)`` followed by
``ebf.save(model, new)`` migrates one to format 2 (``ebf migrate-model OLD NEW``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ._codec import (
    Decoder,
    ModelFormatError,
    UnknownClassError,
    check_model_bytes,
    features_entry,
)
from ._manifest import MANIFEST, read_manifest
from ._packs import HEAD_NAME, PackDecoder, ShardRef, Store, read_pack, shard_name, verify_pack
from .classes import estimator_from_state, new_estimator, resolve_class

__all__ = ["ModelHead", "ModelReader", "load", "open_model"]


@dataclass(frozen=True)
class ModelHead:
    """A saved ensemble without its parts: enough to check, encode and route rows.

    Attributes
    ----------
    estimator : estimator
        The unfitted estimator of the saved class and parameters (``is_classifier``, its
        task and parameters).
    attrs : dict
        Its fitted attributes but the parts: ``encoder_``, ``n_features_in_``,
        ``feature_names_in_``, ``entropy_``, ``classes_`` and ``class_calibration_``
        (classifiers) or ``recalibration_`` (regressors), ``trunk_`` (EBF) or
        ``subsample_sizes_`` (SSF).
    n_parts : int
        Branches (EBF) or sub-sample forests (SSF).
    """

    estimator: Any
    attrs: dict
    n_parts: int

    @property
    def encoder(self) -> Any:
        """The fitted :class:`ebf.features.FeatureEncoder`."""
        return self.attrs["encoder_"]

    @property
    def trunk(self) -> Any:
        """The fitted :class:`ebf.trunk.Trunk` of an EBF, None for an SSF."""
        return self.attrs.get("trunk_")

    @property
    def classes(self) -> Any:
        """``classes_`` of a classifier, None for a regressor."""
        return self.attrs.get("classes_")

    @property
    def recalibration(self) -> Any:
        """The regressor's :class:`basics.pit.PITMap`, None if it has none (or classifies)."""
        return self.attrs.get("recalibration_")

    @property
    def class_calibration(self) -> Any:
        """The classifier's :class:`basics.class_calibration.ClassCalibrationMap`, None if it
        has none (or regresses)."""
        return self.attrs.get("class_calibration_")


class ModelReader:
    """A saved model, opened: its manifest read and checked, nothing else yet.

    Parameters
    ----------
    path : str or path-like
        A model directory (local path or fsspec URL) written by :func:`ebf.artifact.save`.
    storage_options : mapping, optional
        fsspec options for a URL.

    Examples
    --------
    >>> reader = open_model("models/friedman")  # doctest: +SKIP
    >>> reader.n_parts, reader.part_bytes[:2]  # doctest: +SKIP
    (5, [81234112, 80011200])
    >>> branch = reader.load_part(3)  # doctest: +SKIP
    """

    def __init__(self, path: str | os.PathLike,
                 storage_options: Mapping[str, Any] | None = None) -> None:
        self.url = os.fspath(path)
        self.storage_options = dict(storage_options or {})
        self.manifest = read_manifest(self.url, self.storage_options)
        self._head: ModelHead | None = None

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_head": None}  # the head is rebuilt where it is used

    @property
    def store(self) -> Store:
        return Store(self.url, self.storage_options)

    @property
    def format_version(self) -> int:
        return int(self.manifest["format_version"])

    @property
    def model_hash(self) -> str:
        return str(self.manifest["model_hash"])

    @property
    def n_parts(self) -> int:
        """Shards (branches or sub-sample forests) of a format 2 model; 0 otherwise."""
        return len(self.manifest.get("shards", ()))

    @property
    def part_bytes(self) -> list[int]:
        """Bytes of every shard."""
        return [int(s["bytes"]) for s in self.manifest.get("shards", ())]

    @property
    def nbytes(self) -> int:
        """Bytes of all the model's files but the manifest."""
        if self.format_version == 1:
            return sum(os.path.getsize(Path(self.url) / name) for name in self.manifest["files"])
        return int(self.manifest["head"]["bytes"]) + sum(self.part_bytes)

    def _where(self) -> str:
        return f"model file {self.store.path(MANIFEST)}"

    def _estimator(self, params: dict) -> Any:
        try:
            resolve_class(self.manifest["class"])  # fail before reading any array
        except UnknownClassError as exc:
            raise UnknownClassError(f"{self._where()}: {exc}") from exc
        return {"class": self.manifest["class"], "params": params}

    def _decoded_head(self) -> tuple[dict, Any]:
        """``(params, state)`` of the manifest, arrays from the head pack or ``.npy`` files."""
        self._estimator({})  # an unknown class fails before any array is read
        if self.format_version == 1:
            if not self.store.is_local:
                raise ModelFormatError(f"{self._where()}: format 1 models load from local "
                                       "paths only")
            decoder = Decoder(Path(self.url), self.manifest["files"], self._where())
        else:
            head = self.manifest["head"]
            _, arrays = read_pack(self.store, HEAD_NAME, head["bytes"], head["sha256"],
                                  "model head")
            decoder = PackDecoder(arrays, self._where())
        params = decoder.decode(self.manifest["params"], "params")
        state = decoder.decode(self.manifest["state"], "state")
        decoder.verify_unreferenced()
        return params, state

    def _parts_entry(self, params: dict, state: Any) -> str:
        """The state entry of the parts, checked to hold shards ``0 .. n_parts - 1``."""
        parts = getattr(resolve_class(self.manifest["class"]), "_parts", "")
        refs = state.get(parts) if parts and isinstance(state, dict) else None
        if self.format_version == 1:
            return parts
        expected = list(range(self.n_parts))
        if (parts and (not isinstance(refs, list) or not all(isinstance(r, ShardRef) for r in refs)
                       or [r.index for r in refs] != expected)) or (not parts and expected):
            raise ModelFormatError(
                f"{self._where()}: the state's {parts or 'parts'} must refer to shards "
                f"{expected[:5]}{'...' if len(expected) > 5 else ''} in order")
        return parts

    def verify(self) -> None:
        """Check every file of the model against the manifest (sizes and sha256, in
        chunks: format 2's head and shards are not decoded; a format 1 model is loaded).

        Raises
        ------
        FileNotFoundError
            If a file is missing.
        ModelFormatError
            :class:`ChecksumError` naming the file (``shard 3 ...``) whose bytes differ.
        """
        if self.format_version == 1:
            self.load()
            return
        head = self.manifest["head"]
        verify_pack(self.store, HEAD_NAME, head["bytes"], head["sha256"], "model head")
        for i, entry in enumerate(self.manifest["shards"]):
            verify_pack(self.store, shard_name(i), entry["bytes"], entry["sha256"],
                        f"shard {i}")

    def _part_state(self, i: int) -> Any:
        entry = self.manifest["shards"][i]
        encoded, arrays = read_pack(self.store, shard_name(i), entry["bytes"], entry["sha256"],
                                    f"shard {i}")
        decoder = PackDecoder(arrays, f"{self._where()}, shard {i}")
        value = decoder.decode(encoded, f"shards[{i}]")
        decoder.verify_unreferenced()
        if not isinstance(value, dict) or value.get("class") != entry["class"]:
            raise ModelFormatError(f"{self._where()}: shard {i} does not hold the "
                                   f"{entry['class']!r} the manifest lists")
        return value

    def state(self) -> dict:
        """``{"class", "params", "state"}`` with every array read: the files checked, the
        state not yet (:func:`ebf.artifact.estimator_from_state` validates and builds it).

        A format 2 model whose packs hold more than :data:`ebf.artifact._codec.MAX_MODEL_BYTES`
        in all is refused before any is read (format 1: as its files are read)."""
        if self.format_version == 2:
            check_model_bytes(self.nbytes, f"{self._where()}: the head and "
                                           f"{self.n_parts} shard(s) together")
        params, state = self._decoded_head()
        parts = self._parts_entry(params, state)
        if self.format_version == 2 and parts:
            state[parts] = [self._part_state(i) for i in range(self.n_parts)]
        return {**self._estimator(params), "state": state}

    def load(self) -> Any:
        """The whole estimator (every shard read and checked); see :func:`ebf.artifact.load`."""
        top = self.state()
        try:
            model = estimator_from_state(top)
        except ModelFormatError as exc:
            raise type(exc)(f"{self._where()}: {exc}") from exc
        self._check_features(model)
        return model

    def _check_features(self, model: Any) -> None:
        """The manifest's ``features`` (what a prediction reads from the data) are those of
        the model's state, else the manifest was edited: names would be looked up that the
        model does not use, or a column it uses reported missing."""
        listed, held = self.manifest.get("features"), features_entry(model)
        if listed != held:
            names = (listed or {}).get("names") if isinstance(listed, dict) else None
            raise ModelFormatError(
                f"{self._where()}: its 'features' ({len(names or ())} name(s), n_features "
                f"{(listed or {}).get('n_features') if isinstance(listed, dict) else None}) "
                f"disagree with the model's state ({held['n_features']} features "
                f"{_shown(held['names'] or [])}): the manifest was edited")

    def head(self) -> ModelHead:
        """The ensemble without its parts (reads the manifest and the head pack only).

        Raises
        ------
        ModelFormatError
            If the model is not a sharded ensemble (format 1, or a single forest): load it
            whole with :meth:`load`.
        """
        if self._head is None:
            params, state = self._decoded_head()
            parts = self._parts_entry(params, state)
            if self.format_version == 1 or not parts:
                raise ModelFormatError(
                    f"{self._where()}: a format {self.format_version} "
                    f"{self.manifest['class']} has no shards; load it whole")
            try:
                est = new_estimator(self.manifest["class"], params)
                attrs = est._restore_head(state, self.n_parts)
            except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
                raise ModelFormatError(f"{self._where()}: invalid state: {exc}") from exc
            self._check_features(SimpleNamespace(**attrs))
            self._head = ModelHead(est, attrs, self.n_parts)
        return self._head

    def load_part(self, i: int) -> Any:
        """Part ``i`` (branch or sub-sample forest), read from its shard alone and checked
        against the head as a full :meth:`load` checks it."""
        head = self.head()
        if not 0 <= i < self.n_parts:
            raise IndexError(f"part {i} of a model of {self.n_parts} parts")
        try:
            return head.estimator._restore_part(head.attrs, self._part_state(i), i)
        except ModelFormatError as exc:
            raise type(exc)(f"{self._where()}: {exc}") from exc
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
            raise ModelFormatError(f"{self._where()}: invalid state: {exc}") from exc


def _shown(names: list[str], most: int = 10) -> str:
    return ", ".join(names[:most]) + (", ..." if len(names) > most else "")


def open_model(path: str | os.PathLike,
               storage_options: Mapping[str, Any] | None = None) -> ModelReader:
    """Open a saved model: read and check its manifest, load nothing else yet.

    Parameters
    ----------
    path : str or path-like
        A model directory (local path or fsspec URL).
    storage_options : mapping, optional
        fsspec options for a URL.

    Returns
    -------
    ModelReader

    Examples
    --------
    >>> import numpy as np, tempfile, pathlib
    >>> from ebf import EmpiricalBayesianForestRegressor, save
    >>> X = np.random.default_rng(0).random((400, 3)); y = X[:, 0]
    >>> ebf = EmpiricalBayesianForestRegressor(n_estimators=3, trunk_max_leaves=2,
    ...                                        random_state=0).fit(X, y)
    >>> reader = open_model(save(ebf, pathlib.Path(tempfile.mkdtemp()) / "m"))
    >>> reader.n_parts, reader.head().trunk.n_leaves_
    (2, 2)
    >>> type(reader.load_part(1)).__name__
    'BayesianForestRegressor'
    """
    return ModelReader(path, storage_options)


def load(path: str | os.PathLike, storage_options: Mapping[str, Any] | None = None) -> Any:
    """Load an estimator saved by :func:`save`; never unpickles anything.

    Checks the manifest (:func:`read_manifest`), looks the class up in the allowlist
    :data:`MODEL_CLASSES`, checks every file (its size and sha256 against the manifest, its
    header against what it must hold; :mod:`ebf.artifact._packs`, :mod:`ebf.artifact._codec`)
    before handing an array on, then builds ``cls(**params)`` and restores its state, which
    validates it in full (tree structure, statistics, parts) before any kernel runs. Reads
    both formats. Memory is bounded before anything is allocated: the files hold at most
    ``ebf.artifact._codec.MAX_MODEL_BYTES`` (8 GiB) in all, every shape is checked before
    numpy sees it, and checksums are computed in bounded chunks.

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
        ``ebf.artifact._codec.MAX_MODEL_BYTES``, or an inconsistent state (naming the file, or the
        estimator, tree and node).

    Examples
    --------
    >>> import numpy as np, tempfile, pathlib
    >>> from mondrian import MondrianForestRegressor
    >>> from ebf.artifact import save
    >>> X = np.random.default_rng(1).random((60, 2)); y = X.sum(axis=1)
    >>> reg = MondrianForestRegressor(n_estimators=2, random_state=1).fit(X, y)
    >>> back = load(save(reg, pathlib.Path(tempfile.mkdtemp()) / "m"))
    >>> type(back).__name__, back.n_samples_seen_
    ('MondrianForestRegressor', 60)
    """
    return open_model(path, storage_options).load()
