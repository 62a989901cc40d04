"""The codec of model artifacts: states <-> JSON plus ``.npy`` files, and safe reading.

:mod:`ebf.artifact` keeps the public ``save`` / ``load``; this module turns a state (nested
dicts, lists, JSON scalars, numpy scalars and arrays; see the model format) into JSON-ready values
whose arrays are written as ``arrays/<n>.npy`` (:func:`encode`, :class:`ArrayWriter`), and
back (:class:`Decoder`); it also writes the manifest's descriptive entries
(:func:`features_entry`, :func:`training_entry`) and its canonical hash
(:func:`content_hash`).

A model directory is untrusted input, so reading never trusts what a file declares:

- ``manifest.json`` and every array file must be *regular* files (``lstat``, before any
  ``open``: a FIFO would block ``open`` and ``/dev/zero`` would never end a hash), opened
  with ``O_NOFOLLOW | O_NONBLOCK`` and checked again on the open handle (:func:`open_regular`);
- the manifest is at most :data:`MAX_MANIFEST_BYTES`, its JSON strict (no NaN tokens, no
  duplicate keys), nested at most :data:`MAX_DEPTH` deep, with strings of at most
  :data:`MAX_STRING` characters and at most :data:`MAX_FILES` array files;
- every ``.npy`` header is read first (version 1.0 or 2.0, at most 10000 bytes) and its
  dtype (plain numbers, bools or fixed-width strings), shape and order must match the
  manifest entry, the shape must pass :func:`array_nbytes` (at most :data:`MAX_NDIM` ints
  >= 0; an empty array's other dimensions within :data:`MAX_MODEL_BYTES` too), and the
  header plus ``itemsize * prod(shape)`` must be the file's size, before the file is hashed
  or loaded: a header that declares 1e11 elements, or ``(0, 2**62)``, or 65 dimensions, is
  a :class:`ModelFormatError` naming the file, never a ``MemoryError`` or numpy's own error;
- the array files of one model hold at most :data:`MAX_MODEL_BYTES` in all, counted before
  each file is hashed;
- the sha256 of every file is computed in bounded chunks and checked before
  ``np.load(..., allow_pickle=False)`` allocates anything, and file names must be
  ``arrays/<number>.npy`` inside the model directory (no ``..``, no absolute paths, no
  links).

What the arrays *mean* (tree structure, statistics) is checked by each estimator's
``_set_state``.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import re
import stat
import warnings
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from basics import places

__all__ = [
    "ARRAY_DIR", "MAX_DEPTH", "MAX_FILES", "MAX_MANIFEST_BYTES", "MAX_MODEL_BYTES", "MAX_NDIM",
    "MAX_STRING", "ArrayWriter", "ChecksumError", "Decoder", "ModelFormatError",
    "UnknownClassError", "UnsupportedVersionError", "array_nbytes", "check_model_bytes",
    "content_hash", "encode", "features_entry", "open_regular", "parse_json",
    "parse_json_bytes", "storable_dtype", "training_entry",
]

ARRAY_DIR = "arrays"

#: Limits of what a manifest may declare (far above any model :func:`ebf.artifact.save` writes:
#: an EBF of 5 branches x 100 Mondrian trees has a 2 MB manifest of 5,500 arrays, nested 9
#: levels deep).
MAX_MANIFEST_BYTES = 64 * 2**20
MAX_DEPTH = 64
MAX_STRING = 2**20
MAX_FILES = 500_000
#: The most bytes of array files one load reads: a whole model (its ``.npy`` files, or its
#: head and shards together), or one pack when ``ebf.dask`` reads a model shard by shard. It
#: bounds what a crafted model can make a reader allocate, and is checked before anything is
#: allocated. 8 GiB is four times the 1.8 GB model ``ebf train`` builds by default
#: (``--model-memory 2GB``); to load a larger model whole, raise it in the loading process
#: (``ebf.artifact._codec.MAX_MODEL_BYTES = 32 * 2**30``).
MAX_MODEL_BYTES = 8 * 2**30
#: The most dimensions a stored array may have (the estimators store 1-D and 2-D arrays;
#: numpy's own limit is 64).
MAX_NDIM = 8

# JSON markers for what JSON cannot say directly. A state dict whose own keys look like
# markers is wrapped in {"__dict__": {...}} so that it is never mistaken for one.
_ARRAY = "__ndarray__"
_FLOAT = "__float__"
_TUPLE = "__tuple__"
_SCALAR = "__scalar__"
_DICT = "__dict__"
_NONFINITE = {"inf": np.inf, "-inf": -np.inf, "nan": np.nan}
_ARRAY_NAME = re.compile(r"arrays/[0-9]+\.npy", re.ASCII)
#: dtype kinds an array file may hold: bool, integers, floats, fixed-width strings.
_ARRAY_KINDS = frozenset("biufUS")


class ModelFormatError(ValueError):
    """A model artifact is malformed, corrupt or not loadable by this version."""


class ChecksumError(ModelFormatError):
    """A file does not match the sha256 recorded in the manifest."""


class UnsupportedVersionError(ModelFormatError):
    """The manifest has a format version this build cannot read."""


class UnknownClassError(ModelFormatError):
    """The manifest names a class that is not in the allowlist ``ebf.artifact.MODEL_CLASSES``."""


def content_hash(manifest: dict[str, Any], keys: tuple[str, ...]) -> str:
    """sha256 of the canonical JSON (sorted keys, no spaces, ASCII) of ``manifest[keys]``.

    Equal JSON values give equal hashes however they were formatted or ordered in a file.

    Examples
    --------
    >>> content_hash({"a": 1, "b": [2.5]}, ("b", "a")) == content_hash({"b": [2.5], "a": 1},
    ...                                                                   ("a", "b"))
    True
    """
    content = {key: manifest.get(key) for key in keys}
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


# ----------------------------------------------------------------------------- encoding


class ArrayWriter:
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
        check_storable_ndim(array, where)
        name = f"{ARRAY_DIR}/{len(self.files):05d}.npy"
        with open(self.root / name, "xb") as f:
            hashing = _HashingWriter(f)
            np.save(hashing, array, allow_pickle=False)
            f.flush()
            os.fsync(f.fileno())
        digest = hashing.hash.hexdigest()
        self.files[name] = digest
        header = np.lib.format.header_data_from_array_1_0(array)
        return {_ARRAY: name, "sha256": digest, "dtype": str(array.dtype),
                "shape": list(array.shape), "fortran_order": header["fortran_order"]}


class _HashingWriter:
    """A write-only file object that hashes what passes through it."""

    def __init__(self, f: Any) -> None:
        self.f = f
        self.hash = hashlib.sha256()

    def write(self, data: Any) -> int:
        self.hash.update(data)
        return self.f.write(data)


def encode(obj: Any, writer: ArrayWriter | None, where: str) -> Any:
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
        return {_SCALAR: encode(obj.item(), None, where), "dtype": str(obj.dtype)}
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        if np.isfinite(obj):
            return float(obj)
        return {_FLOAT: "nan" if np.isnan(obj) else ("inf" if obj > 0 else "-inf")}
    if isinstance(obj, (list, tuple)):
        items = [encode(v, writer, f"{where}[{i}]") for i, v in enumerate(obj)]
        return {_TUPLE: items} if isinstance(obj, tuple) else items
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            if not isinstance(key, str):
                raise TypeError(f"{where}: dict keys must be str, got {key!r}")
            out[key] = encode(value, writer, f"{where}.{key}")
        return {_DICT: out} if any(_is_marker(k) for k in out) else out
    raise TypeError(
        f"{where}: a {type(obj).__module__}.{type(obj).__qualname__} cannot be stored; a "
        "state holds dicts, lists, JSON scalars and numpy arrays only"
    )


def _is_marker(key: str) -> bool:
    return key.startswith("__") and key.endswith("__")


# ----------------------------------------------------------------------------- descriptive entries


def features_entry(model: Any) -> dict:
    """The manifest's ``features``: number, names and dtypes of the input columns."""
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


def training_entry(model: Any) -> dict:
    """The manifest's ``training``: rows seen, features and classes, where the model has them."""
    out: dict = {}
    for name in ("n_samples_seen_", "n_features_in_"):
        value = getattr(model, name, None)
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            out[name] = int(value)
    classes = getattr(model, "classes_", None)
    if classes is not None:
        out["n_classes"] = len(classes)
    return out


# ----------------------------------------------------------------------------- safe reading


def open_regular(path: Path, what: str) -> BinaryIO:
    """Open a regular file for reading, refusing links, FIFOs, devices and sockets
    (:func:`basics.places.open_regular`: the type checked before the open and again on the
    open handle, so a file swapped in between is refused too).

    Parameters
    ----------
    path : pathlib.Path
    what : str
        What the file is, for the ``FileNotFoundError`` (``"model manifest"``).

    Returns
    -------
    binary file object

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ModelFormatError
        If it is not a regular file.
    """
    try:
        return places.open_regular(path)
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, f"{what} is missing", str(path)) from None
    except ValueError:  # not a regular file: say what it is, in this format's words
        mode = os.lstat(path).st_mode
        if stat.S_ISREG(mode):
            raise ModelFormatError(f"{path} was replaced while it was opened; refusing to "
                                   "read it") from None
        raise ModelFormatError(f"{path} is a {_file_kind(mode)}, not a regular file; "
                               "refusing to read it") from None


def _file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISLNK, "symbolic link"), (stat.S_ISDIR, "directory"),
                       (stat.S_ISFIFO, "FIFO (named pipe)"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket")):
        if test(mode):
            return kind
    return "special file"


def parse_json(f: BinaryIO, where: str) -> Any:
    """Strict, bounded JSON from an open regular file (see the module docstring's limits)."""
    size = os.fstat(f.fileno()).st_size
    data = f.read(MAX_MANIFEST_BYTES + 1)
    if max(size, len(data)) > MAX_MANIFEST_BYTES:
        raise ModelFormatError(f"{where}: {max(size, len(data))} bytes is more than the "
                               f"{MAX_MANIFEST_BYTES} bytes a manifest may have")
    return parse_json_bytes(data, where)


def parse_json_bytes(data: bytes, where: str) -> Any:
    """Strict, bounded JSON from bytes already read within :data:`MAX_MANIFEST_BYTES`."""

    def constant(token: str) -> Any:
        raise ModelFormatError(f"{where}: non-standard JSON constant {token}")

    def pairs(items: list) -> dict:
        keys = [k for k, _ in items]
        if len(set(keys)) != len(keys):
            raise ModelFormatError(f"{where}: duplicate key {max(keys, key=keys.count)!r}")
        return dict(items)

    try:
        value = json.loads(data.decode("utf-8"), parse_constant=constant,
                           object_pairs_hook=pairs)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # incl. JSONDecodeError
        if isinstance(exc, ModelFormatError):
            raise
        raise ModelFormatError(f"{where}: not valid JSON: {exc}") from exc
    _check_bounds(value, where)
    return value


def _check_bounds(value: Any, where: str) -> None:
    """Nesting depth and string lengths within the limits (iteratively: no recursion)."""
    stack = [(value, 1)]
    while stack:
        obj, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ModelFormatError(f"{where}: JSON nested more than {MAX_DEPTH} levels deep")
        if isinstance(obj, dict):
            for key, item in obj.items():
                stack.append((key, depth))
                stack.append((item, depth + 1))
        elif isinstance(obj, list):
            stack.extend((item, depth + 1) for item in obj)
        elif isinstance(obj, str) and len(obj) > MAX_STRING:
            raise ModelFormatError(
                f"{where}: a string of {len(obj)} characters (at most {MAX_STRING}): "
                f"{obj[:40]!r}...")


# ----------------------------------------------------------------------------- decoding


class Decoder:
    """Turns a manifest's JSON back into a state, loading (verified) array files.

    Parameters
    ----------
    root : pathlib.Path
        The model directory.
    files : dict
        The manifest's ``files``: name -> sha256.
    where : str
        Prefix of error messages (the manifest's path).
    """

    def __init__(self, root: Path, files: dict, where: str) -> None:
        self.root = root
        self.files = files
        self.where = where
        self.seen: set[str] = set()
        self.nbytes = 0  # of the array files read so far: at most MAX_MODEL_BYTES

    def fail(self, msg: str) -> ModelFormatError:
        return ModelFormatError(f"{self.where}: {msg}")

    def decode(self, obj: Any, where: str) -> Any:
        """The state value of a JSON value (arrays read from their files)."""
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
        return self._other(marker, obj, where)

    def _other(self, marker: str, obj: dict, where: str) -> Any:
        """A marker this decoder does not know (subclasses add theirs)."""
        raise self.fail(f"{where}: malformed entry with keys {sorted(obj)}")

    def _scalar(self, obj: dict, where: str) -> np.generic:
        try:
            dtype = np.dtype(obj["dtype"])
        except (TypeError, ValueError) as exc:
            raise self.fail(f"{where}: unknown scalar dtype {obj['dtype']!r}") from exc
        value = self.decode(obj[_SCALAR], where)
        if dtype.kind not in "biuf" or not isinstance(value, (bool, int, float)):
            raise self.fail(f"{where}: scalar {value!r} of dtype {dtype} is not allowed")
        try:
            return dtype.type(value)
        except OverflowError as exc:
            raise self.fail(f"{where}: scalar {value!r} does not fit dtype {dtype}") from exc

    def _array(self, obj: dict, where: str) -> np.ndarray:
        name = obj[_ARRAY]
        file = self._member(name, where)
        if obj.get("sha256") != self.files[name]:
            raise self.fail(f"{where}: the sha256 of {name} differs from its 'files' entry")
        shape, order = obj.get("shape"), obj.get("fortran_order", False)
        if (not isinstance(obj.get("dtype"), str) or not isinstance(shape, list)
                or not all(type(n) is int and n >= 0 for n in shape)
                or not isinstance(order, bool)):
            raise self.fail(f"{where}: array entry of {name} needs 'dtype' (str), 'shape' "
                            "(list of ints >= 0) and 'fortran_order' (bool)")
        return self._read(name, file, (obj["dtype"], shape, order))

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

    def _read(self, name: str, file: Path, declared: tuple | None) -> np.ndarray:
        """Check the header against ``declared`` (dtype, shape, fortran order) and the
        file's size (within what the model may hold), then the sha256, streamed, then parse
        it from the same handle, never with pickle."""
        self.seen.add(name)
        with open_regular(file, "array file listed in manifest.json") as f:
            self.nbytes += _check_npy_header(f, file, declared)
            check_model_bytes(self.nbytes, f"{file} (with the array files before it)")
            f.seek(0)
            digest = hashlib.file_digest(f, "sha256").hexdigest()
            if digest != self.files[name]:
                raise ChecksumError(
                    f"{file}: sha256 mismatch (manifest {self.files[name][:16]}..., file "
                    f"{digest[:16]}...): the file is corrupt or was modified"
                )
            f.seek(0)
            try:
                array = np.load(f, allow_pickle=False)
            except (ValueError, OSError, EOFError) as exc:
                raise ModelFormatError(f"{file}: cannot be read as a .npy array: {exc}") from exc
        if not isinstance(array, np.ndarray) or array.dtype.hasobject:
            raise ModelFormatError(f"{file}: object arrays are not allowed")
        return _owned(array)

    def verify_unreferenced(self) -> None:
        """Check the files listed in the manifest but not referenced by the state, too."""
        for name in self.files:
            if name not in self.seen:
                self._read(name, self._member(name, "files"), None)


def _owned(array: np.ndarray) -> np.ndarray:
    """The C-ordered ``array`` as the buffer ``np.load`` read it into, which owns its data.

    ``np.load`` returns a reshaped view of that private buffer; giving the buffer the shape
    instead lets estimators that keep only arrays they own (Mondrian trees, updated in
    place) use a freshly loaded array without copying it.
    """
    base = array.base
    if (not isinstance(base, np.ndarray) or base.base is not None or not base.flags.owndata
            or base.nbytes != array.nbytes or not array.flags.c_contiguous):
        return array
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            base.shape = array.shape
    except (AttributeError, ValueError, DeprecationWarning):  # a numpy that refuses it
        return array
    return base


def check_storable_ndim(array: np.ndarray, where: str) -> None:
    """ValueError if ``array`` has more dimensions than a reader accepts (:data:`MAX_NDIM`)."""
    if array.ndim > MAX_NDIM:
        raise ValueError(f"{where} is an array of {array.ndim} dimensions; at most {MAX_NDIM} "
                         "can be stored")


def array_nbytes(dtype: np.dtype, shape: Any, where: str) -> int:
    """Bytes of a ``dtype`` array of ``shape`` declared by an untrusted file, checked before
    numpy sees the shape.

    ``shape`` must be a list (or tuple) of at most :data:`MAX_NDIM` ints >= 0. The size is
    computed in Python ints (no overflow). An empty array is refused if its other
    dimensions span more than :data:`MAX_MODEL_BYTES` (numpy refuses ``(0, 2**62)`` floats
    as "too big"); a non-empty one is bounded by the caller, against the file it is in.

    Raises
    ------
    ModelFormatError
        Prefixed with ``where`` (the file, and the array in it).

    Examples
    --------
    >>> array_nbytes(np.dtype("<f8"), [3, 4], "x")
    96
    >>> array_nbytes(np.dtype("<f8"), [0, 2**62], "m.pack: arrays[2]")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ebf.artifact._codec.ModelFormatError: m.pack: arrays[2]: an empty float64 array of shape (0,...
    """
    if (not isinstance(shape, (list, tuple)) or len(shape) > MAX_NDIM
            or not all(type(n) is int and n >= 0 for n in shape)):
        text = repr(tuple(shape) if isinstance(shape, list) else shape)
        raise ModelFormatError(f"{where}: {text[:80]}{'...' if len(text) > 80 else ''} is "
                               f"not a shape of ints >= 0 (at most {MAX_NDIM} of them)")
    nbytes = dtype.itemsize * math.prod(shape)
    if nbytes == 0 and dtype.itemsize * math.prod(n for n in shape if n) > MAX_MODEL_BYTES:
        raise ModelFormatError(
            f"{where}: an empty {dtype} array of shape {tuple(shape)}, whose other dimensions "
            f"span more than the {MAX_MODEL_BYTES} bytes of a model "
            "(ebf.artifact._codec.MAX_MODEL_BYTES)")
    return nbytes


def check_model_bytes(nbytes: int, where: str) -> None:
    """ModelFormatError if one load would read more than :data:`MAX_MODEL_BYTES` bytes."""
    if nbytes > MAX_MODEL_BYTES:
        raise ModelFormatError(
            f"{where}: {nbytes} bytes, more than the {MAX_MODEL_BYTES} bytes one load may read "
            "(ebf.artifact._codec.MAX_MODEL_BYTES: raise it to load a larger model)")


def storable_dtype(dtype: np.dtype) -> bool:
    """Whether arrays of ``dtype`` may be stored and read back: plain numbers, bools or
    fixed-width strings (no objects, records, sub-arrays or empty items)."""
    return (not dtype.hasobject and dtype.kind in _ARRAY_KINDS and dtype.fields is None
            and dtype.subdtype is None and dtype.itemsize > 0)


def _check_npy_header(f: BinaryIO, file: Path, declared: tuple | None) -> int:
    """The ``.npy`` header of ``f`` (at its start) is what the manifest declares, and the
    file holds exactly the data it describes; leaves ``f`` anywhere. Returns the file's size."""
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        else:
            raise ModelFormatError(f"{file}: .npy format version {version} is not supported "
                                   "(1.0 and 2.0 are)")
    except (ValueError, TypeError, SyntaxError, OverflowError, EOFError) as exc:
        if isinstance(exc, ModelFormatError):
            raise
        raise ModelFormatError(f"{file}: not a valid .npy file: {exc}") from exc
    if not storable_dtype(dtype):
        raise ModelFormatError(f"{file}: arrays of dtype {dtype} are not allowed (object "
                               "arrays are never unpickled; numbers, bools, strings only)")
    if declared is not None and (str(dtype), list(shape), fortran) != declared:
        raise ModelFormatError(
            f"{file} holds a {dtype} array of shape {tuple(shape)}"
            f"{' (Fortran order)' if fortran else ''}, but the manifest says {declared[0]} "
            f"{tuple(declared[1])}{' (Fortran order)' if declared[2] else ''}")
    expected = f.tell() + array_nbytes(dtype, shape, str(file))
    size = os.fstat(f.fileno()).st_size
    if size != expected:
        raise ModelFormatError(
            f"{file}: its header declares a {dtype} array of shape {tuple(shape)} "
            f"({expected} bytes with the header), but the file has {size} bytes; it is "
            "truncated or its header was forged")
    return size
