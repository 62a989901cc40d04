"""The probe's data and model files: Friedman Parquet folders; packs read, forged and written
as ``ebf`` writes them (``ebf.artifact._packs``), with sizes, digests and the model hash
recomputed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

SEED = 26

# ----------------------------------------------------------------------------- data


def friedman(rows: int, seed: int, features: int = 5) -> dict[str, np.ndarray]:
    """Friedman #1 columns x0..x4 and y (heteroskedastic noise), as ``ebf make-data``."""
    rng = np.random.default_rng(seed)
    X = rng.random((rows, features))
    y = (10 * np.sin(np.pi * X[:, 0] * X[:, 1]) + 20 * (X[:, 2] - 0.5) ** 2 + 10 * X[:, 3]
         + 5 * X[:, 4] + (0.5 + 2 * X[:, 0]) * rng.normal(size=rows))
    return {**{f"x{i}": X[:, i] for i in range(features)}, "y": y}


def write_parquet(path: Path, columns: dict[str, Any], names: list[str] | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = [pa.array(v) for v in columns.values()]
    pq.write_table(pa.Table.from_arrays(arrays, names=names or list(columns)), path)


def write_dataset(folder: Path, rows: int, seed: int, files: int = 2) -> None:
    cols = friedman(rows, seed)
    for i, part in enumerate(np.array_split(np.arange(rows), files)):
        write_parquet(folder / f"part-{i}.parquet", {k: v[part] for k, v in cols.items()})


# ----------------------------------------------------------------------------- model files


PACK_MAGIC = b"\x93EBFPACK"
PACK_PREFIX = struct.Struct("<8sQ")
ALIGN = 64
HASHED = ("format_version", "class", "params", "features", "state", "head", "shards")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def markers(obj: Any, where: str = "") -> list[tuple[str, dict]]:
    """``(path, marker)`` of every array marker (``{"__ndarray__": i, ...}``) in a state."""
    if isinstance(obj, dict):
        if "__ndarray__" in obj:
            return [(where, obj)]
        return [m for k, v in obj.items() for m in markers(v, f"{where}.{k}" if where else k)]
    if isinstance(obj, list):
        return [m for i, v in enumerate(obj) for m in markers(v, f"{where}[{i}]")]
    return []


@dataclass
class Pack:
    """A pack file as data: its header state and every array as dtype, shape and bytes."""

    state: Any
    arrays: list[dict]

    @classmethod
    def read(cls, file: Path) -> Pack:
        raw = file.read_bytes()
        magic, length = PACK_PREFIX.unpack_from(raw)
        assert magic == PACK_MAGIC, file
        header = json.loads(raw[PACK_PREFIX.size: PACK_PREFIX.size + length])
        arrays = []
        for entry in header["arrays"]:
            nbytes = int(np.dtype(entry["dtype"]).itemsize * np.prod(entry["shape"], dtype=object))
            arrays.append({"dtype": entry["dtype"], "shape": entry["shape"],
                           "data": raw[entry["offset"]: entry["offset"] + nbytes]})
        return cls(header["state"], arrays)

    def header(self, start: int) -> tuple[bytes, int]:
        """The header for data starting at ``start``, and where the data then ends."""
        table, pos = [], start
        for a in self.arrays:
            pos = -(-pos // ALIGN) * ALIGN
            table.append({"dtype": a["dtype"], "shape": a["shape"], "offset": pos})
            pos += len(a["data"])
        text = json.dumps({"arrays": table, "state": self.state}, allow_nan=False,
                          separators=(",", ":")).encode()
        return text, pos

    def encode(self) -> bytes:
        """The file, laid out as ``ebf.artifact._packs.write_pack`` does."""
        start = 0
        while True:  # the offsets depend on the header's length, which holds them
            text, _ = self.header(start)
            end = -(-(PACK_PREFIX.size + len(text)) // ALIGN) * ALIGN
            if end == start:
                break
            start = end
        table = json.loads(text)["arrays"]
        out = bytearray(PACK_PREFIX.pack(PACK_MAGIC, start - PACK_PREFIX.size) + text)
        out += b" " * (start - len(out))
        for a, entry in zip(self.arrays, table, strict=True):
            out += bytes(entry["offset"] - len(out)) + a["data"]
        return bytes(out)


class ModelFiles:
    """A saved model (format 2) opened for forging: edit arrays, then :meth:`save` recomputes
    every pack's size and sha256 and the model_hash, as a forger would."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.manifest = json.loads((path / "manifest.json").read_text())
        names = [self.manifest["head"]["file"]] + [s["file"] for s in self.manifest["shards"]]
        self.packs = {name: Pack.read(path / name) for name in names}
        self.head = self.manifest["head"]["file"]

    def array_refs(self) -> list[tuple[str, str, int, dict]]:
        """``(id, pack name, index, marker)`` of every array; head arrays are referred to from
        the manifest's params and state, a shard's from its pack's state."""
        refs = []
        for name, pack in self.packs.items():
            found = (markers({"params": self.manifest["params"], "state": self.manifest["state"]})
                     if name == self.head else markers(pack.state))
            refs += [(f"{name}:{where}", name, m["__ndarray__"], m) for where, m in found]
        return refs

    def float_arrays(self) -> list[tuple[str, str, int, dict]]:
        return [r for r in self.array_refs()
                if re.fullmatch(r"[<>|]f\d+", r[3]["dtype"]) and np.prod(r[3]["shape"]) > 0]

    def fill(self, ref: tuple[str, str, int, dict], value: float) -> None:
        _, name, index, _ = ref
        a = self.packs[name].arrays[index]
        values = np.frombuffer(a["data"], dtype=a["dtype"]).copy()
        values[...] = value
        a["data"] = values.tobytes()

    def values(self, ref: tuple[str, str, int, dict]) -> np.ndarray:
        a = self.packs[ref[1]].arrays[ref[2]]
        return np.frombuffer(a["data"], dtype=a["dtype"]).copy()

    def put(self, ref: tuple[str, str, int, dict], values: np.ndarray) -> None:
        self.packs[ref[1]].arrays[ref[2]]["data"] = np.asarray(values, ref[3]["dtype"]).tobytes()

    def reshape(self, ref: tuple[str, str, int, dict], shape: list[int], data: bytes) -> None:
        _, name, index, marker = ref
        self.packs[name].arrays[index].update(shape=shape, data=data)
        marker["shape"] = shape

    def entry(self, name: str) -> dict:
        return (self.manifest["head"] if name == self.head else
                next(s for s in self.manifest["shards"] if s["file"] == name))

    def save(self, claims: dict[str, tuple[int, str]] | None = None) -> None:
        """Write every pack and the manifest; ``claims`` (pack -> bytes, sha256) replaces
        what is recorded for a pack written by the caller (never hashed here)."""
        for name, pack in self.packs.items():
            if name in (claims or {}):
                self.entry(name)["bytes"], self.entry(name)["sha256"] = claims[name]
                continue
            data = pack.encode()
            (self.path / name).write_bytes(data)
            self.entry(name).update(bytes=len(data), sha256=sha256(data))
        content = {key: self.manifest.get(key) for key in HASHED}
        self.manifest["model_hash"] = sha256(json.dumps(
            content, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
            allow_nan=False).encode("ascii"))
        (self.path / "manifest.json").write_text(json.dumps(self.manifest, indent=1))


def sparse_pack(files: ModelFiles, name: str, size: int, spanning: bool) -> None:
    """Make pack ``name`` a sparse file of ``size`` bytes the manifest vouches for: the
    original header (``spanning=False``) or one array spanning the file (``True``)."""
    file = files.path / name
    original = file.read_bytes()
    if spanning:
        pack = Pack(files.packs[name].state, [])
        text, _ = pack.header(0)
        start = -(-(PACK_PREFIX.size + len(text) + 200) // ALIGN) * ALIGN
        table = [{"dtype": "<f8", "shape": [(size - start) // 8], "offset": start}]
        text = json.dumps({"arrays": table, "state": pack.state}, separators=(",", ":")).encode()
        text += b" " * (start - PACK_PREFIX.size - len(text))
        file.write_bytes(PACK_PREFIX.pack(PACK_MAGIC, len(text)) + text)
    os.truncate(file, size)
    files.save(claims={name: (size, sha256(original))})
