"""Pack files: the arrays of one part of a model (its head, or one branch) in one file.

Format version 2 of a model artifact (:mod:`ebf.artifact`) stores each branch of an ensemble
in its own pack, so a worker can load one branch without reading the others, and a model
has O(branches) files instead of one per array. A pack is::

    magic       8 bytes   b"\\x93EBFPACK"
    length      8 bytes   little-endian uint64: the header's length H
    header      H bytes   strict UTF-8 JSON: {"arrays": [{"dtype", "shape", "offset"}, ...],
                          "state": <an encoded state, arrays as {"__ndarray__": index}>}
    data                  every array's C-ordered bytes at its offset (from the file's start,
                          a multiple of 64, increasing), zero padding in between

The manifest records every pack's size and sha256. Reading never trusts the file, and
allocates nothing it describes before it is checked:

- its size must be the manifest's, and at most :data:`ebf.artifact._codec.MAX_MODEL_BYTES`, before
  anything is read;
- the header is bounded (:data:`ebf.artifact._codec.MAX_MANIFEST_BYTES`) and parsed strictly;
- the array table must describe dtypes of the allowlist (``<f8``, ``|b1``, ``<U3``: plain
  numbers, bools, fixed-width strings), shapes that pass :func:`ebf.artifact._codec.array_nbytes`
  (at most :data:`ebf.artifact._codec.MAX_NDIM` ints >= 0, sizes in Python ints; an empty array's
  other dimensions bounded too), and aligned, increasing, non-overlapping extents that end
  exactly at the end of the file, so the arrays' bytes are the manifest's byte count less
  the header;
- the sha256 of the whole file is computed in bounded chunks (:data:`CHUNK`). A pack of
  more than :data:`VERIFY_FIRST_BYTES` is hashed in a streaming pass before anything is
  allocated for its arrays (a forged or corrupt pack of gigabytes is refused having cost a
  read, not its size in memory), then read into its arrays and hashed again (it must not
  change in between); a smaller one is read once. Arrays are handed on only after the
  sha256 matches.

Arrays are read into buffers they own (``readinto``), never copied: peak memory is the
arrays' size plus one chunk.

Local files are opened as :func:`ebf.artifact._codec.open_regular` does (no links, FIFOs or
devices); any other URL through :mod:`fsspec`.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import struct
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ._codec import (
    _ARRAY,
    MAX_MANIFEST_BYTES,
    ChecksumError,
    Decoder,
    ModelFormatError,
    array_nbytes,
    check_model_bytes,
    check_storable_ndim,
    open_regular,
    parse_json_bytes,
    storable_dtype,
)

__all__ = ["MAGIC", "PackDecoder", "PackWriter", "Store", "read_pack", "write_pack"]

MAGIC = b"\x93EBFPACK"
ALIGN = 64
_PREFIX = struct.Struct("<8sQ")
#: Bytes per read: hashing and copying go in bounded, cache-sized steps.
CHUNK = 8 * 2**20
#: Array bytes above which a pack is hashed before anything is allocated for its arrays
#: (then read and hashed again); a smaller pack is read once, allocating at most this much
#: before its sha256 is known.
VERIFY_FIRST_BYTES = 64 * 2**20
#: The dtypes a pack's table may name (``dtype.str`` of a storable dtype), matched before
#: numpy parses the text.
_DTYPE = re.compile(r"[<>|][biufSU][0-9]{1,9}", re.ASCII)
_ZEROS = bytes(ALIGN)


# ----------------------------------------------------------------------------- writing


class PackWriter:
    """Collects the arrays of one pack while :func:`ebf.artifact._codec.encode` walks a state.

    ``write`` returns the JSON marker that replaces the array in the encoded state: the
    array's index in this pack, its dtype and its shape.
    """

    def __init__(self) -> None:
        self.arrays: list[np.ndarray] = []

    def write(self, array: np.ndarray, where: str) -> dict:
        if not storable_dtype(array.dtype):
            raise ValueError(
                f"{where} is an array of dtype {array.dtype}, which cannot be stored without "
                "pickle; convert it to a numeric or fixed-width string dtype, or a list"
            )
        check_storable_ndim(array, where)
        self.arrays.append(np.ascontiguousarray(array))
        return {_ARRAY: len(self.arrays) - 1, "dtype": array.dtype.str,
                "shape": list(array.shape)}


def _layout(arrays: list[np.ndarray], start: int) -> list[int]:
    offsets, pos = [], start
    for a in arrays:
        pos = -(-pos // ALIGN) * ALIGN
        offsets.append(pos)
        pos += a.nbytes
    return offsets


def write_pack(f: BinaryIO, state: Any, writer: PackWriter) -> tuple[int, str]:
    """Write a pack to the binary file ``f``.

    Parameters
    ----------
    f : binary file object, opened for writing
    state : JSON-ready value
        The encoded state (:func:`ebf.artifact._codec.encode` with ``writer``), or None.
    writer : PackWriter
        The arrays the state refers to.

    Returns
    -------
    size : int
        Bytes written.
    sha256 : str
        Hex digest of the file.
    """
    import json

    table = [{"dtype": a.dtype.str, "shape": list(a.shape)} for a in writer.arrays]
    start = 0
    while True:  # the offsets depend on the header's length, which holds them: iterate
        offsets = _layout(writer.arrays, start)
        header = json.dumps({"arrays": [{**t, "offset": o} for t, o in zip(table, offsets,
                                                                          strict=True)],
                             "state": state}, allow_nan=False,
                            separators=(",", ":")).encode("utf-8")
        end = -(-(_PREFIX.size + len(header)) // ALIGN) * ALIGN
        if end == start:
            break
        start = end
    header += b" " * (start - _PREFIX.size - len(header))  # JSON allows trailing blanks
    digest = hashlib.sha256()

    def put(data: Any) -> None:
        digest.update(data)
        f.write(data)

    put(_PREFIX.pack(MAGIC, len(header)))
    put(header)
    pos = _PREFIX.size + len(header)
    for a, offset in zip(writer.arrays, offsets, strict=True):
        put(_ZEROS[: offset - pos])
        put(memoryview(a.reshape(-1)).cast("B") if a.size else b"")
        pos = offset + a.nbytes
    return pos, digest.hexdigest()


# ----------------------------------------------------------------------------- places


class Store:
    """A model directory to read from: a local path or an fsspec URL.

    Member names are relative POSIX paths checked by the caller against a fixed pattern
    (``head.pack``, ``shards/<n>.pack``, ``arrays/<n>.npy``); local members must be regular
    files inside the directory (no links), as in :func:`ebf.artifact._codec.open_regular`.

    Parameters
    ----------
    url : str or path-like
    storage_options : mapping, optional
        fsspec options (credentials, ...) for a URL.
    """

    def __init__(self, url: str | os.PathLike, storage_options: Mapping[str, Any] | None = None
                 ) -> None:
        text = os.fspath(url)
        self.storage_options = dict(storage_options or {})
        if "://" not in text or text.startswith("file://"):
            self.fs = None
            self.root = text.removeprefix("file://")
        else:
            import fsspec

            self.fs, self.root = fsspec.core.url_to_fs(text, **self.storage_options)
            self.root = self.root.rstrip("/")
        self.url = text

    @property
    def is_local(self) -> bool:
        return self.fs is None

    def path(self, name: str) -> str:
        """Where member ``name`` is, for messages."""
        if self.fs is None:
            return str(Path(self.root) / name)
        return self.fs.unstrip_protocol(posixpath.join(self.root, name))

    def is_dir(self) -> bool:
        return Path(self.root).is_dir() if self.fs is None else self.fs.isdir(self.root)

    def open(self, name: str, what: str) -> BinaryIO:
        """Open member ``name`` for reading (``FileNotFoundError`` names it if missing)."""
        if self.fs is None:
            file = Path(self.root) / name
            if file.parent != Path(self.root) and (file.parent.is_symlink() or not (
                    file.parent.resolve().is_relative_to(Path(self.root).resolve()))):
                raise ModelFormatError(f"{file.parent} is a link or leaves the model directory")
            return open_regular(file, what)  # refuses links, FIFOs and devices itself
        full = posixpath.join(self.root, name)
        if not self.fs.isfile(full):
            import errno

            raise FileNotFoundError(errno.ENOENT, f"{what} is missing", self.path(name))
        return self.fs.open(full, "rb")

    def create(self, name: str) -> BinaryIO:
        """Open a new member ``name`` for writing (its folder is created if missing)."""
        if self.fs is None:
            file = Path(self.root) / name
            file.parent.mkdir(parents=True, exist_ok=True)
            return open(file, "xb")
        full = posixpath.join(self.root, name)
        self.fs.makedirs(posixpath.dirname(full), exist_ok=True)
        return self.fs.open(full, "wb")

    @contextmanager
    def replace(self, name: str) -> Iterator[BinaryIO]:
        """Write member ``name`` whole or not at all, replacing any earlier one
        (:func:`basics.atomic.replacing`: a writer killed half-way leaves the earlier file, or
        none, and a hidden temporary file; a retry writes again)."""
        from basics.atomic import replacing
        from basics.places import Place

        if self.fs is None:  # the directory itself must exist: a removed stage stays removed
            (Path(self.root) / name).parent.mkdir(exist_ok=True)
        else:
            self.fs.makedirs(posixpath.dirname(posixpath.join(self.root, name)), exist_ok=True)
        with replacing(Place.of(self.path(name) if self.fs is None else self.url.rstrip("/")
                                + "/" + name, self.storage_options)) as f:
            yield f

    def size(self, f: BinaryIO, name: str) -> int:
        if self.fs is None:
            return os.fstat(f.fileno()).st_size
        return int(self.fs.size(posixpath.join(self.root, name)))


# ----------------------------------------------------------------------------- reading


def _read_exact(f: BinaryIO, view: memoryview, digest: Any, where: str) -> None:
    """Fill ``view`` from ``f`` in chunks, hashing what was read."""
    pos = 0
    while pos < len(view):
        n = f.readinto(view[pos: pos + CHUNK])
        if not n:
            raise ModelFormatError(f"{where}: the file ended early; it is truncated")
        digest.update(view[pos: pos + n])
        pos += n


def _hash_rest(f: BinaryIO, nbytes: int, digest: Any, where: str) -> None:
    """Hash the next ``nbytes`` of ``f`` through one reused buffer of at most a chunk."""
    buffer = memoryview(bytearray(min(CHUNK, nbytes)))
    while nbytes:
        step = buffer[: min(CHUNK, nbytes)]
        _read_exact(f, step, digest, where)
        nbytes -= len(step)


def _check_size(actual: int, size: int, where: str) -> None:
    if actual != size:
        raise ChecksumError(f"{where}: {actual} bytes but the manifest says {size}; the file "
                            "is truncated, replaced or corrupt")


def _check_digest(digest: Any, sha256: str, where: str) -> None:
    if digest.hexdigest() != sha256:
        raise ChecksumError(f"{where}: sha256 mismatch (manifest {sha256[:16]}..., file "
                            f"{digest.hexdigest()[:16]}...): the file is corrupt or was "
                            "modified")


def _table_dtype(text: Any, where: str) -> np.dtype:
    dtype = None
    if isinstance(text, str) and _DTYPE.fullmatch(text):
        try:
            dtype = np.dtype(text)
        except (TypeError, ValueError):  # "<f3": no such type
            dtype = None
    if dtype is None or not storable_dtype(dtype):
        raise ModelFormatError(f"{where} has dtype {text!r:.40}; only numbers, bools and "
                               "fixed-width strings are allowed")
    return dtype


def _check_table(table: Any, header_end: int, size: int, where: str) -> list[tuple]:
    """(dtype, shape, offset, nbytes) of every array, or ModelFormatError; nothing is
    allocated and numpy sees no shape."""
    if not isinstance(table, list):
        raise ModelFormatError(f"{where}: the header's 'arrays' must be a list")
    out, pos = [], header_end
    for i, entry in enumerate(table):
        at = f"{where}: arrays[{i}]"
        if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "offset"}:
            raise ModelFormatError(f"{at} needs exactly 'dtype', 'shape', 'offset'")
        dtype = _table_dtype(entry["dtype"], at)
        shape, offset = entry["shape"], entry["offset"]
        nbytes = array_nbytes(dtype, shape, at)
        if type(offset) is not int:
            raise ModelFormatError(f"{at} needs an int offset, got {offset!r:.40}")
        if offset % ALIGN or offset < pos or offset - pos >= ALIGN or offset + nbytes > size:
            raise ModelFormatError(
                f"{at} ({dtype} {tuple(shape)}, {nbytes} bytes at offset {offset}) is not "
                f"aligned, overlaps the previous array or runs past the end of the {size}-byte "
                "file")
        out.append((dtype, shape, offset, nbytes))
        pos = offset + nbytes
    if pos != size:
        raise ModelFormatError(f"{where}: the arrays end at byte {pos} but the file has "
                               f"{size} bytes")
    return out


def _read_arrays(f: BinaryIO, table: list[tuple], pos: int, digest: Any, where: str
                 ) -> list[np.ndarray]:
    """The arrays of ``table``, each read into a buffer it owns; ``f`` is at ``pos``."""
    arrays = []
    for dtype, shape, offset, nbytes in table:
        if offset > pos:  # the padding: fewer than ALIGN bytes
            _read_exact(f, memoryview(bytearray(offset - pos)), digest, where)
        a = np.empty(shape, dtype)
        if nbytes:
            _read_exact(f, memoryview(a.reshape(-1)).cast("B"), digest, where)
        arrays.append(a)
        pos = offset + nbytes
    return arrays


def verify_pack(store: Store, name: str, size: int, sha256: str, what: str) -> None:
    """Check a pack's size and sha256 against the manifest's, reading it in chunks and
    decoding nothing (what ``read_pack`` checks first, without the arrays).

    Raises
    ------
    FileNotFoundError
        If the file is missing.
    ebf.artifact._codec.ChecksumError
        If its size or sha256 differs from the manifest's.
    """
    where = f"{what} {store.path(name)}"
    with store.open(name, what) as f:
        _check_size(store.size(f, name), size, where)
        digest = hashlib.sha256()
        if size:
            _hash_rest(f, size, digest, where)
    _check_digest(digest, sha256, where)


def read_pack(store: Store, name: str, size: int, sha256: str, what: str
              ) -> tuple[Any, list[np.ndarray]]:
    """The encoded state and the arrays of a pack, after every check of the module docstring.

    Parameters
    ----------
    store : Store
    name : str
        Member name (already checked against the manifest's pattern).
    size, sha256 : int, str
        What the manifest records for the file.
    what : str
        What the file is, for messages (``"shard 3 (branch 3)"``).

    Returns
    -------
    state : JSON value
        The header's ``state`` (still encoded: decode it with :class:`PackDecoder`).
    arrays : list of ndarray

    Raises
    ------
    FileNotFoundError
        If the file is missing.
    ModelFormatError
        On any malformed part, or a file larger than :data:`ebf.artifact._codec.MAX_MODEL_BYTES`;
        :class:`ebf.artifact._codec.ChecksumError` if the size or the sha256 differs from the
        manifest's.
    """
    where = f"{what} {store.path(name)}"
    with store.open(name, what) as f:
        _check_size(store.size(f, name), size, where)
        check_model_bytes(size, where)
        if size < _PREFIX.size:
            raise ModelFormatError(f"{where}: {size} bytes is too short for a pack")
        digest = hashlib.sha256()
        prefix = bytearray(_PREFIX.size)
        _read_exact(f, memoryview(prefix), digest, where)
        magic, length = _PREFIX.unpack(prefix)
        if magic != MAGIC:
            raise ModelFormatError(f"{where}: not an ebf pack file (bad magic bytes)")
        if length > min(MAX_MANIFEST_BYTES, size - _PREFIX.size):
            raise ModelFormatError(f"{where}: its header claims {length} bytes, more than the "
                                   "file or the limit allows")
        header_bytes = bytearray(length)
        _read_exact(f, memoryview(header_bytes), digest, where)
        header = parse_json_bytes(bytes(header_bytes), where)
        if not isinstance(header, dict) or set(header) != {"arrays", "state"}:
            raise ModelFormatError(f"{where}: the header must be an object with 'arrays' and "
                                   "'state'")
        start = _PREFIX.size + length
        table = _check_table(header["arrays"], start, size, where)
        if size - start > VERIFY_FIRST_BYTES:
            first = digest.copy()
            _hash_rest(f, size - start, first, where)
            _check_digest(first, sha256, where)
            f.seek(start)
        arrays = _read_arrays(f, table, start, digest, where)
        if f.read(1):
            raise ModelFormatError(f"{where}: the file grew while it was read")
    _check_digest(digest, sha256, where)
    return header["state"], arrays


class PackDecoder(Decoder):
    """:class:`ebf.artifact._codec.Decoder` whose array markers index the arrays of one pack.

    ``{"__shard__": i}`` markers (branches stored in their own packs) decode to
    :class:`ShardRef`.
    """

    def __init__(self, arrays: list[np.ndarray], where: str) -> None:
        super().__init__(Path("."), {}, where)
        self.arrays = arrays
        self.used = [False] * len(arrays)

    def _array(self, obj: dict, where: str) -> np.ndarray:
        index = obj[_ARRAY]
        if (set(obj) != {_ARRAY, "dtype", "shape"} or type(index) is not int
                or not 0 <= index < len(self.arrays)):
            raise self.fail(f"{where}: array entry {obj!r} does not name one of the "
                            f"{len(self.arrays)} arrays of its pack")
        a = self.arrays[index]
        if self.used[index]:
            raise self.fail(f"{where}: array {index} of the pack is used twice")
        if obj["dtype"] != a.dtype.str or obj["shape"] != list(a.shape):
            raise self.fail(f"{where}: the state says a {obj['dtype']} array of shape "
                            f"{obj['shape']}, the pack holds {a.dtype.str} {list(a.shape)}")
        self.used[index] = True
        return a

    def _other(self, marker: str, obj: dict, where: str) -> Any:
        if marker == SHARD and set(obj) == {SHARD} and type(obj[SHARD]) is int:
            return ShardRef(obj[SHARD])
        return super()._other(marker, obj, where)

    def verify_unreferenced(self) -> None:
        if not all(self.used):
            raise self.fail(f"{self.used.count(False)} array(s) of the pack are not used by "
                            "its state")


#: The marker of a branch stored in its own pack.
SHARD = "__shard__"


class ShardRef:
    """Where a decoded head state has a branch stored in shard ``index``."""

    __slots__ = ("index",)

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"ShardRef({self.index})"


@dataclass(frozen=True)
class StoredPart:
    """A part of an ensemble (a branch, a sub-sample forest) already written to a stage.

    What :func:`ebf.artifact.write_part` returns: an ensemble assembled with these in place
    of its parts (``_from_parts``) is written by :meth:`ebf.artifact.ModelStage.write`
    without the parts' arrays ever being in that process
    (:func:`ebf.artifact.estimator_state` passes them through). It only stands for the
    part: it predicts nothing.

    Attributes
    ----------
    stage : str
        The stage directory the part's shard was written to.
    index : int
    entry : dict
        The manifest's ``shards`` entry: ``file``, ``bytes``, ``sha256``, ``class``.
    """

    stage: str
    index: int
    entry: dict

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(
            f"part {self.index} is stored in {self.stage}, not held here, so it has no "
            f"{name!r}; open the saved model (ebf.artifact.open_model, ebf.load) to use it")


def shard_name(index: int) -> str:
    """Member name of shard ``index``: ``shards/00003.pack``."""
    return f"shards/{index:05d}.pack"


SHARD_NAME = re.compile(r"shards/[0-9]{5,}\.pack", re.ASCII)
HEAD_NAME = "head.pack"
