"""Model files: ``save`` / ``load``, a manifest plus checksummed array files, sharded.

An artifact is a directory (local, or any fsspec URL) in format 2::

    model/
      manifest.json        format + version, class, params, features, metadata, the head's
                           state, the size and sha256 of every pack, model_hash
      head.pack            the arrays of the head: everything but the branches (encoder,
                           trunk, parameters)
      shards/00000.pack    one branch of an EBF (one sub-sample forest of an SSF): its state
      shards/00001.pack    and its arrays in one file (:mod:`ebf.artifact._packs`)
      ...

so a model has O(branches) files and a worker can load one branch without reading the
others (:func:`open_model`). Format 1 (``arrays/<n>.npy``, one file per array)
still loads, and ``save(..., format_version=1)`` still writes it; ``ebf migrate-model OLD
NEW`` (or ``save(load(old), new)``) rewrites an old model in format 2.

Every estimator of ``ebf`` and ``mondrian`` implements ``_get_state() -> dict`` and
``_set_state(state)`` (see ``docs/model-format.md``); :mod:`ebf.artifact._codec` turns such a
state into JSON plus arrays and back, for any nesting. Composite estimators (an EBF holds a
trunk and branch forests) put their sub-estimators into their state with
:func:`estimator_state` and rebuild them with :func:`estimator_from_state`; an ensemble's
``_parts`` names the state entry whose estimators go to their own shards.

A model directory is untrusted input. Nothing is ever unpickled: files are read within
limits (:mod:`ebf.artifact._codec`, :mod:`ebf.artifact._packs`), and the class to build is
looked up in a fixed allowlist (:data:`MODEL_CLASSES`) by key; the manifest never names a
module to import. Checksums can be recomputed by whoever edits a file, so every
``_set_state`` validates what it restores (tree structure, statistics, shapes) before a
numba kernel sees it: a crafted model is a :class:`ModelFormatError`, never a crash, a hang
or garbage predictions.

:func:`model_hash` identifies the model's content (not its save time or user metadata).
Writes are atomic (:func:`basics.atomic.atomic_dir`, the one helper every ``ebf`` output
uses): the artifact is built in a temporary directory next to the target and moved into
place. See :func:`save` and :func:`load` for examples.

Modules:

``manifest``  ``manifest.json``: the format, its checks on read, :func:`model_hash`
``packs``     pack files (``head.pack``, ``shards/<n>.pack``): writing, bounded reading
``codec``     states to JSON and arrays and back, within limits; the errors of a load
``classes``   the class allowlist, estimators to and from their states
``writer``    :func:`save`; :func:`stage_model` and :func:`write_part` (parts first)
``reader``    :func:`open_model` (the head, one part at a time) and :func:`load`
"""

from ._codec import ChecksumError, ModelFormatError, UnknownClassError, UnsupportedVersionError
from ._manifest import FORMAT, FORMAT_VERSION, model_hash, read_manifest
from ._packs import StoredPart
from ._reader import ModelHead, ModelReader, load, open_model
from ._writer import ModelStage, carry_part, save, stage_model, write_part
from .classes import MODEL_CLASSES, estimator_from_state, estimator_state, new_estimator

__all__ = [
    "FORMAT", "FORMAT_VERSION", "MODEL_CLASSES", "ChecksumError", "ModelFormatError",
    "ModelHead", "ModelReader", "ModelStage", "StoredPart", "UnknownClassError", "carry_part",
    "UnsupportedVersionError", "estimator_from_state", "estimator_state", "load", "model_hash",
    "new_estimator", "open_model", "read_manifest", "save", "stage_model", "write_part",
]
