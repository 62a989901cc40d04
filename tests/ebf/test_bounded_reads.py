"""Bounded reads of untrusted model files: nothing a file declares is allocated before it is
checked against the file, the manifest and ``ebf.artifact._codec.MAX_MODEL_BYTES``; shapes are
checked before numpy sees them; a large pack is hashed, streamed, before its arrays are allocated.

Crafted pack tables (extreme shapes, empty or not, offsets, dtypes) and ``.npy`` headers
must end in a ``ModelFormatError`` naming the file and the array. Sparse files of
gigabytes (``truncate``: no disk used) are read in a subprocess under an address-space limit
smaller than they are, where allocating them is a ``MemoryError``. Peak allocations are
measured with ``tracemalloc``, which sees numpy's buffers.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import resource
import shutil
import struct
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ebf import EmpiricalBayesianForestRegressor
from ebf.artifact import _codec as codec
from ebf.artifact import _packs as pack_module
from ebf.artifact import load, open_model, save
from ebf.artifact._codec import ChecksumError, ModelFormatError, content_hash
from ebf.artifact._manifest import hashed_keys
from ebf.artifact._packs import MAGIC, PackWriter, Store, read_pack, write_pack
from tests.ebf.model_helpers import load_manifest
from tests.ebf.model_helpers import save as save_v1
from tests.ebf.test_hostile_models import _forge

ROOT = Path(__file__).resolve().parents[2]
GiB = 2**30
#: Where the arrays of a crafted pack start: the prefix and a header blank-padded to it.
START = 1024


@pytest.fixture(scope="module")
def model() -> EmpiricalBayesianForestRegressor:
    rng = np.random.default_rng(0)
    X = rng.random((300, 4))
    return EmpiricalBayesianForestRegressor(n_estimators=2, trunk_max_leaves=3,
                                            random_state=0).fit(X, X[:, 0] + X[:, 1])


# ------------------------------------------------------------------------------ crafting


def _header(table: list[dict], state: Any = None) -> bytes:
    """Prefix and header of a pack with this array table, its arrays starting at START."""
    text = json.dumps({"arrays": table, "state": state}, separators=(",", ":")).encode()
    assert len(text) <= START - 16
    return struct.pack("<8sQ", MAGIC, START - 16) + text + b" " * (START - 16 - len(text))


def _pack(directory: Path, table: list[dict], size: int) -> tuple[Store, str, int, str]:
    """``read_pack``'s arguments for a pack of ``size`` bytes (zeros after the header) with
    this table, its size and sha256 as the manifest would record them."""
    directory.mkdir(exist_ok=True)
    data = _header(table)
    data += bytes(size - len(data))
    (directory / "p.pack").write_bytes(data)
    return Store(directory), "p.pack", size, hashlib.sha256(data).hexdigest()


def _entry(shape: Any, dtype: Any = "<f8", offset: Any = START) -> dict:
    return {"dtype": dtype, "shape": shape, "offset": offset}


def test_a_crafted_table_that_is_consistent_loads(tmp_path):
    """The crafting helpers make packs the reader accepts; the refusals below are theirs."""
    table = [_entry([2, 3]), _entry([0, 5], "<i8", START + 64), _entry([4], "|b1", START + 64),
             _entry([1], "<U3", START + 128)]
    state, arrays = read_pack(*_pack(tmp_path, table, START + 140), "test pack")
    assert state is None
    assert [(a.dtype.str, a.shape) for a in arrays] == [
        ("<f8", (2, 3)), ("<i8", (0, 5)), ("|b1", (4,)), ("<U3", (1,))]
    assert all(a.flags.owndata for a in arrays)


_REFUSED_TABLES = [
    ("empty with 2**62", [_entry([0, 2**62])], START,
     r"arrays\[0\]: an empty float64 array of shape \(0, 4611686018427387904\), whose other "
     r"dimensions span more than the \d+ bytes of a model"),
    ("empty with a product beyond int64", [_entry([0, 2**32, 2**32], "|i1")], START,
     r"arrays\[0\]: an empty int8 array of shape \(0, 4294967296, 4294967296\)"),
    ("65 dimensions", [_entry([0] * 65)], START,
     r"arrays\[0\]: \(0, 0, 0, .*\.\.\. is not a shape of ints >= 0 \(at most 8 of them\)"),
    ("9 dimensions", [_entry([1] * 9)], START + 8, r"arrays\[0\]: .* is not a shape of ints"),
    ("a negative dimension", [_entry([3, -1])], START, r"\(3, -1\) is not a shape of ints"),
    ("a bool dimension", [_entry([True])], START + 8, r"\(True,\) is not a shape of ints"),
    ("a float dimension", [_entry([2.0])], START + 16, r"\(2\.0,\) is not a shape of ints"),
    ("a shape that is no list", [_entry(7)], START, r"7 is not a shape of ints"),
    ("a product beyond int64", [_entry([2**32, 2**32])], START + 64,
     r"arrays\[0\] \(float64 \(4294967296, 4294967296\), 147573952589676412928 bytes at "
     r"offset 1024\) .* runs past the end of the 1088-byte file"),
    ("a dimension beyond uint64", [_entry([2**64], "|u1")], START + 64, r"runs past the end"),
    ("an offset past the end", [_entry([1], offset=START + 128)], START + 8,
     r"arrays\[0\] .* runs past the end"),
    ("a negative offset", [_entry([1], offset=-64)], START + 8, r"overlaps the previous"),
    ("a string offset", [_entry([1], offset="1024")], START + 8, r"needs an int offset"),
    ("overlapping arrays", [_entry([8]), _entry([8], offset=START)], START + 128,
     r"arrays\[1\] \(float64 \(8,\), 64 bytes at offset 1024\) .* overlaps the previous"),
    ("a gap hiding data", [_entry([1]), _entry([1], offset=START + 128)], START + 136,
     r"arrays\[1\] .* overlaps the previous array or runs past"),
    ("bytes after the arrays", [_entry([2])], START + 64,
     r"the arrays end at byte 1040 but the file has 1088 bytes"),
    ("an object dtype", [_entry([1], "|O")], START + 8, r"arrays\[0\] has dtype '\|O'"),
    ("a void dtype", [_entry([1], "|V8")], START + 8, r"has dtype '\|V8'"),
    ("a record dtype", [_entry([1], "<f8,<i8")], START + 16, r"has dtype '<f8,<i8'"),
    ("a datetime dtype", [_entry([1], "<M8")], START + 8, r"has dtype '<M8'"),
    ("no such dtype", [_entry([1], "<f3")], START + 8, r"has dtype '<f3'"),
    ("an empty string dtype", [_entry([1], "|S0")], START, r"has dtype '\|S0'"),
    ("a string dtype of 1e12 characters", [_entry([0], "<U999999999999")], START,
     r"has dtype '<U999999999999'"),
    ("a dtype that is no string", [_entry([1], 8)], START + 8, r"has dtype 8;"),
]


@pytest.mark.parametrize("case, table, size, match", _REFUSED_TABLES,
                         ids=[c[0] for c in _REFUSED_TABLES])
def test_crafted_array_tables_are_refused_naming_file_and_array(tmp_path, case, table, size,
                                                                match):
    args = _pack(tmp_path, table, size)
    with pytest.raises(ModelFormatError, match=match) as info:
        read_pack(*args, "shard 7")
    assert str(info.value).startswith(f"shard 7 {tmp_path / 'p.pack'}: ")
    assert "\n" not in str(info.value)


_DIMS = st.sampled_from([0, 0, 1, 3, 2**31, 2**62, 2**63, 2**64, -1, True, 1.5])
_DTYPES = st.sampled_from(["<f8", "<i8", "|u1", "|b1", "<U2", "|S3", "<f2", "|O", "<c16",
                           "<M8", "|S0", "<U999999999"])
_SHAPES = st.one_of(st.lists(_DIMS, max_size=3),
                    st.sampled_from([[0] * 8, [0] * 9, [1] * 65, [0] * 65, [0, 2**62]]))
_TAMPER = st.sampled_from([None, None, "offset + 1", "offset - 64", "offset + 64",
                           "size + 64", "size - 8", "size = START"])


def _declared_bytes(dtype: str, shape: list) -> int:
    """What a forger's layout gives an entry, whatever its flaws (the reader's to find)."""
    itemsize = int("".join(filter(str.isdigit, dtype)) or 1) * (4 if "U" in dtype else 1)
    return itemsize * math.prod(n for n in shape if type(n) is int and n >= 0)


@settings(max_examples=300, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(entries=st.lists(st.tuples(_DTYPES, _SHAPES), max_size=4), tamper=_TAMPER,
       index=st.integers(0, 3))
def test_fuzzed_array_tables_are_refused_or_read_as_declared(tmp_path, entries, tamper, index):
    """Tables of extreme shapes (empty or not), dtypes and offsets, laid out as the writer
    would (the file as long as the arrays, up to 4 kB) and then maybe tampered with: a
    ``ModelFormatError`` naming the file, or arrays of exactly the declared dtypes and
    shapes; never numpy's 'too big' / 'maximum dimension' errors nor a ``MemoryError``."""
    table, pos = [], START
    for dtype, shape in entries:
        pos = -(-pos // 64) * 64
        table.append(_entry(shape, dtype, pos))
        pos += _declared_bytes(dtype, shape)
    size = min(pos, START + 4096)
    if tamper and tamper.startswith("offset") and table:
        table[index % len(table)]["offset"] += int(tamper.split()[-1])
    elif tamper and tamper.startswith("size"):
        size = START if tamper.endswith("START") else size + int(tamper.split()[-1])
    args = _pack(tmp_path, table, max(size, START))
    try:
        _, arrays = read_pack(*args, "fuzzed pack")
    except ModelFormatError as exc:
        assert str(exc).startswith(f"fuzzed pack {tmp_path / 'p.pack'}: ")
        return
    assert [(a.dtype.str, list(a.shape)) for a in arrays] == [
        (e["dtype"], e["shape"]) for e in table]


def _rewrite(path: Path, name: str, data: bytes | None = None, size: int | None = None,
             sha256: str | None = None) -> None:
    """Replace pack ``name`` by ``data`` (then extend it, sparse, to ``size`` bytes), record
    ``size`` and ``sha256`` (those of the file unless given) in the manifest and recompute the
    model hash, as a forger would."""
    file = path / name
    if data is not None:
        file.write_bytes(data)
    with open(file, "r+b") as f:
        if size is not None:
            f.truncate(size)
        if sha256 is None:
            sha256 = hashlib.file_digest(f, "sha256").hexdigest()
    manifest = load_manifest(path)
    entry = manifest["head"] if name == "head.pack" else next(
        s for s in manifest["shards"] if s["file"] == name)
    entry["bytes"], entry["sha256"] = file.stat().st_size, sha256
    manifest["model_hash"] = content_hash(manifest, hashed_keys(2))
    (path / "manifest.json").write_text(json.dumps(manifest))


def test_an_extreme_empty_shape_in_a_shard_is_refused_naming_the_shard(model, tmp_path):
    path = save(model, tmp_path / "m")
    _rewrite(path, "shards/00001.pack", _header([_entry([0, 2**62])]))
    for read in (lambda: load(path), lambda: open_model(path).load_part(1)):
        with pytest.raises(ModelFormatError, match=rf"shard 1 {path}/shards/00001\.pack: "
                                                   r"arrays\[0\]: an empty float64 array"):
            read()


@pytest.mark.parametrize("shape, match", [
    ((0, 2**62), r"an empty float64 array of shape \(0, 4611686018427387904\)"),
    ((0,) * 65, r"\(0, 0, .* is not a shape of ints >= 0 \(at most 8 of them\)"),
    ((1,) * 9, r"\(1, 1, 1, 1, 1, 1, 1, 1, 1\) is not a shape of ints"),
])
def test_extreme_npy_headers_are_refused_naming_the_file(model, tmp_path, shape, match):
    """Format 1: the same shape rule, applied to the ``.npy`` header before numpy loads."""
    path = save_v1(model.trunk_, tmp_path / "m")
    manifest = load_manifest(path)
    entry = manifest["state"]["trunk_"]["threshold"]
    file = path / entry["__ndarray__"]
    with open(file, "wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": "<f8", "fortran_order": False, "shape": shape})
        f.write(bytes(8 * int(np.prod(shape))))
    entry["shape"] = list(shape)
    _forge(path, manifest)
    with pytest.raises(ModelFormatError, match=rf"{file}: {match}"):
        load(path)


def test_writers_refuse_arrays_a_reader_would_refuse(tmp_path):
    nine = np.zeros((1,) * 9)
    with pytest.raises(ValueError, match=r"state\.x is an array of 9 dimensions; at most 8"):
        PackWriter().write(nine, "state.x")
    with pytest.raises(ValueError, match=r"state\.x is an array of 9 dimensions"):
        codec.ArrayWriter(tmp_path).write(nine, "state.x")
    assert PackWriter().write(nine[0], "state.x")["shape"] == [1] * 8


# ------------------------------------------------------------------------------ model limit


def test_a_whole_load_is_bounded_by_the_model_limit_and_one_shard_by_itself(model, tmp_path,
                                                                            monkeypatch):
    path = save(model, tmp_path / "m")
    reader = open_model(path)
    monkeypatch.setattr(codec, "MAX_MODEL_BYTES", reader.nbytes - 1)
    read: list[str] = []
    monkeypatch.setattr("ebf.artifact._reader.read_pack", lambda store, name, *a: read.append(name))
    with pytest.raises(ModelFormatError, match=rf"{path}/manifest\.json: the head and "
                                               rf"{reader.n_parts} shard\(s\) together: "
                                               rf"{reader.nbytes} bytes, more than the \d+ "
                                               r"bytes one load may read"):
        load(path)
    assert read == []  # refused before any pack is read
    monkeypatch.undo()
    packs = [reader.manifest["head"]["bytes"], *reader.part_bytes]
    assert max(packs) < reader.nbytes
    monkeypatch.setattr(codec, "MAX_MODEL_BYTES", max(packs))
    for i in range(reader.n_parts):  # the sharded reading: the head and one shard
        assert reader.load_part(i).n_features_in_ == 4
    small, big = np.argsort(reader.part_bytes)[[0, -1]]
    monkeypatch.setattr(codec, "MAX_MODEL_BYTES", reader.part_bytes[small])
    reader.load_part(small)  # the head was read already
    with pytest.raises(ModelFormatError, match=rf"shard {big} .*shards/0000{big}\.pack: "
                                               rf"{reader.part_bytes[big]} bytes, more than"):
        reader.load_part(big)


def test_format_1_array_files_are_bounded_by_the_model_limit_in_all(model, tmp_path,
                                                                    monkeypatch):
    path = save_v1(model, tmp_path / "m")
    total = sum(f.stat().st_size for f in (path / "arrays").iterdir())
    monkeypatch.setattr(codec, "MAX_MODEL_BYTES", total)
    load(path)
    monkeypatch.setattr(codec, "MAX_MODEL_BYTES", total - 1)
    with pytest.raises(ModelFormatError, match=r"arrays/\d+\.npy \(with the array files before "
                                               r"it\): \d+ bytes, more than"):
        load(path)


# ------------------------------------------------------------------------------ peak memory


def _big_pack(directory: Path) -> tuple[tuple, list[np.ndarray]]:
    """A pack of three 8 MB arrays, and read_pack's arguments for it."""
    arrays = [np.arange(10**6, dtype=np.float64) * k for k in (1, 2, 3)]
    writer = PackWriter()
    writer.arrays = arrays
    directory.mkdir()
    with open(directory / "p.pack", "wb") as f:
        size, digest = write_pack(f, None, writer)
    return (Store(directory), "p.pack", size, digest), arrays


def _peak(call: Any) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        try:
            out = call()
        except ModelFormatError as exc:
            out = exc
        return out, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("verify_first", [pack_module.VERIFY_FIRST_BYTES, 0],
                         ids=["read once", "hashed first"])
def test_peak_allocation_of_a_read_is_the_arrays_plus_one_chunk(tmp_path, monkeypatch,
                                                                verify_first):
    monkeypatch.setattr(pack_module, "VERIFY_FIRST_BYTES", verify_first)
    args, expected = _big_pack(tmp_path / "p")
    (_, arrays), peak = _peak(lambda: read_pack(*args, "big pack"))
    for a, b in zip(arrays, expected, strict=True):
        np.testing.assert_array_equal(a, b)
    data = sum(a.nbytes for a in expected)
    assert data <= peak <= data + pack_module.CHUNK + 2**20  # reading it twice: 2 * data


def test_a_corrupt_pack_hashed_first_is_refused_before_its_arrays_are_allocated(tmp_path,
                                                                             monkeypatch):
    """A pack above VERIFY_FIRST_BYTES (here 0) costs one chunk, not its size, to refuse."""
    monkeypatch.setattr(pack_module, "VERIFY_FIRST_BYTES", 0)
    args, expected = _big_pack(tmp_path / "p")
    with open(tmp_path / "p" / "p.pack", "r+b") as f:
        f.seek(-5, 2)
        f.write(b"\xff")
    error, peak = _peak(lambda: read_pack(*args, "big pack"))
    assert isinstance(error, ChecksumError) and "sha256 mismatch" in str(error)
    assert peak <= pack_module.CHUNK + 2**20 < sum(a.nbytes for a in expected)


@pytest.mark.parametrize("verify_first", [pack_module.VERIFY_FIRST_BYTES, 0])
def test_both_reading_paths_load_a_model_from_a_url(model, monkeypatch, verify_first):
    """The hashed-first path seeks back on fsspec files too (``ebf.dask`` workers read shards
    from URLs through the same ``read_pack``)."""
    monkeypatch.setattr(pack_module, "VERIFY_FIRST_BYTES", verify_first)
    url = f"memory://ebf-tests/bounded/{verify_first}"
    save(model, url, overwrite=True)
    X = np.random.default_rng(1).random((20, 4))
    np.testing.assert_array_equal(load(url).predict(X), model.predict(X))
    np.testing.assert_array_equal(open_model(url).load_part(1).predict(X),
                                  model.branches_[1].predict(X))


# ------------------------------------------------------------------------------ sparse giants

#: The subprocess: imports everything, limits its address space to what it uses plus
#: HEADROOM, then reads each case and prints ``{"case", "error", "message"}``.
_UNDER_LIMIT = r"""
import json, resource, sys, traceback
import numpy as np
import ebf
from ebf.artifact import load
from ebf.artifact import open_model

cases, headroom, warm = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
load(warm), open_model(warm).load_part(1)  # kernels compiled before the limit
with open("/proc/self/status") as f:
    vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
resource.setrlimit(resource.RLIMIT_AS, (vm + headroom, resource.getrlimit(resource.RLIMIT_AS)[1]))
readers = {"load": load, "load_part": lambda p: open_model(p).load_part(1),
           "allocate": lambda n: np.ones(int(n), np.uint8)}
for case, how, arg in cases:
    try:
        readers[how](arg)
        out = {"error": None, "message": ""}
    except BaseException as exc:
        out = {"error": type(exc).__name__, "message": str(exc)[:500]}
    print(json.dumps({"case": case, **out}), flush=True)
"""
HEADROOM = 256 * 2**20
#: A sparse file within the model limit but beyond the address space left.
STREAMED = 2 * HEADROOM


def _sparse_shard(model: Any, root: Path, name: str, size: int, header: bool) -> Path:
    """A saved model whose shard 1 is a sparse file of ``size`` bytes recorded in the
    manifest with a made-up sha256: its own header (``header=False``, only the manifest
    edited) or one array filling the file."""
    path = root / name
    shutil.copytree(root / "pristine", path)
    table = [_entry([(size - START) // 8])]
    data = _header(table, {"__ndarray__": 0, "dtype": "<f8", "shape": table[0]["shape"]})
    _rewrite(path, "shards/00001.pack", data if header else None, size, "0" * 64)
    return path


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc")
def test_sparse_giant_files_are_refused_within_a_memory_limit(model, tmp_path):
    """Gigabytes of sparse files (no disk used), read by a process that cannot allocate
    them: a ``ModelFormatError`` on the size limit, the table, or the streamed sha256 (the
    file is hashed before anything is allocated), never a ``MemoryError``."""
    if resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY:
        pytest.skip("this process already runs under an address-space limit")
    save(model, tmp_path / "pristine")
    models = {
        "shard 10 GB, only the manifest edited": _sparse_shard(model, tmp_path, "a", 10 * GiB,
                                                               False),
        "shard 2 GB, only the manifest edited": _sparse_shard(model, tmp_path, "b", 2 * GiB,
                                                              False),
        "shard 10 GB, one array": _sparse_shard(model, tmp_path, "c", 10 * GiB + START, True),
        "shard 40 GB, one array": _sparse_shard(model, tmp_path, "d", 40 * GiB + START, True),
        "shard 512 MiB, one array": _sparse_shard(model, tmp_path, "e", STREAMED + START,
                                                  True),
    }
    v1 = save_v1(model.trunk_, tmp_path / "v1")  # format 1: one .npy of 512 MiB
    manifest = load_manifest(v1)
    entry = manifest["state"]["trunk_"]["threshold"]
    with open(v1 / entry["__ndarray__"], "wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": "<f8", "fortran_order": False, "shape": (STREAMED // 8,)})
        f.truncate(f.tell() + STREAMED)
    entry["shape"] = [STREAMED // 8]
    manifest["files"][entry["__ndarray__"]] = entry["sha256"] = "0" * 64
    manifest["model_hash"] = content_hash(manifest, hashed_keys(1))
    (v1 / "manifest.json").write_text(json.dumps(manifest))
    cases = [("control: allocating as much", "allocate", STREAMED),
             ("format 1 .npy 512 MiB", "load", str(v1))]
    cases += [(f"{name} ({how})", how, str(path)) for name, path in models.items()
              for how in ("load", "load_part")]
    proc = subprocess.run([sys.executable, "-c", _UNDER_LIMIT, json.dumps(cases),
                           str(HEADROOM), str(tmp_path / "pristine")], capture_output=True,
                          text=True, cwd=ROOT, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = {r["case"]: r for r in map(json.loads, proc.stdout.splitlines())}
    assert got.pop("control: allocating as much")["error"] == "MemoryError"
    limit = r"bytes, more than the 8589934592 bytes one load may read"
    expected = {
        "shard 10 GB, only the manifest edited": (limit, limit),
        "shard 2 GB, only the manifest edited": (
            r"shards/00001\.pack: the arrays end at byte \d+ but the file has 2147483648 bytes",
        ) * 2,
        "shard 10 GB, one array": (limit, limit),
        "shard 40 GB, one array": (limit, limit),
        "shard 512 MiB, one array": (r"shards/00001\.pack: sha256 mismatch",) * 2,
    }
    for name, matches in expected.items():
        for how, match in zip(("load", "load_part"), matches, strict=True):
            result = got[f"{name} ({how})"]
            assert result["error"] in ("ModelFormatError", "ChecksumError"), (name, how, result)
            assert re.search(match, result["message"]), (name, how, result)
    result = got["format 1 .npy 512 MiB"]
    assert result["error"] == "ChecksumError" and "sha256 mismatch" in result["message"], result
