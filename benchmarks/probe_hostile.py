"""Hostile-input probe of the ``ebf`` command line (issue 26), run against a chosen checkout.

What it measures
----------------
A seeded corpus of hostile cases, each run as ``python -m pipelines ...`` in its own
subprocess, in its own sandbox folder (the cwd holds ``data/``, a model ``m/``, a registry
``REG/`` and a user file; its parent one more), with ``PYTHONPATH=--code``. The categories:

- **output paths**: every path-valued output option of the CLI (make-data ``--out``, train
  ``--out`` / ``--baseline-out``, predict ``--out``, evaluate ``--json`` / ``--report``,
  migrate-model ``NEW``, demo ``--out``, retrain ``REGISTRY``) aimed at the input Parquet
  folder, a file in it, the model, its ``manifest.json`` and ``head.pack``, a registry
  version's model and its ``version.json``, ``.`` and ``..``, with and without
  ``--overwrite``; a command that succeeds on a registry target is followed by
  ``ebf predict REG@1`` and the served ``ebf.model_hash`` compared with the published one;
- **forged values**: for each saved model type (EBF with bayesian, mondrian, smc and bart
  branches, which hold MondrianForestRegressor, SMC tree and BART states; a
  BayesianForestRegressor saved alone), a seeded sample of its stored float arrays
  (enumerated from the pack files; at most ``--arrays`` per type, one per field, the trunk's
  in one EBF only), each filled with 1e160, 1e300, -1e300 and 5e-324, and the
  recalibration map's knots moved outside [0, 1] or out of order; every pack's size and
  sha256 and the model_hash are recomputed, so only semantic checks can catch it; then
  ``ebf predict``. (``ebf predict`` takes only models with an encoder: a
  MondrianForestRegressor, SMCTreeRegressor or BARTRegressor saved alone is refused as
  "not fitted", hence their states are probed as EBF branches);
- **memory**: packs claiming 10 and 40 GiB (sparse files, the manifest's byte count and a
  sha256 edited, not hashed; with the original header or a table of one array spanning the
  file), array tables with shapes ``[0, 2**62]``, ``[2**62, 0]`` and 65 dimensions; run
  under ``RLIMIT_AS`` = 6 GiB;
- **bad inputs**: Parquet folders with mismatched schemas, duplicate columns, one and zero
  rows, targets beyond 1e100, NaN / inf features, an unreadable (mode 000; as root, run
  without CAP_DAC_OVERRIDE) and a non-Parquet file, a stale registry lock left by a
  SIGKILLed retrain (then ``ebf retrain`` again: handled only if its line names the fix
  ``ebf registry unlock``), Ctrl-C (SIGINT to the process group) during start-up and 20 s
  into a fit, SIGTERM during a write (once the temporary folder exists);
- **control**: the untouched models predicted (must succeed with finite output).

Outcome rules (one per case: the worst of its steps and of the sandbox check, in this order)
---------------------------------------------------------------------------------------------
- ``data lost``: a byte of a file that existed in the sandbox before the probed command
  (input data, model, registry, the user files of ``.`` and ``..``) changed or vanished,
  unless the command was asked (``--overwrite``) to replace an ebf output of the same kind
  it writes (``train --out m --overwrite``); a registry's files count as the registry's,
  not as a model to replace;
- ``silent wrong answer``: exit 0 but non-finite mean / std / quantiles in the predictions,
  a registry serving a model whose hash differs from the one its version was published
  with, or quantile columns moved by a forged recalibration map;
- ``crash``: death by a signal, an uncaught Python traceback (other than
  KeyboardInterrupt), or a MemoryError-type leak (``MemoryError``, "Unable to allocate",
  "array is too big", "maximum supported dimension") anywhere in stderr, whatever the exit
  code: running out of memory on a file's say-so is a crash here, not an unclear error;
- ``hang``: no exit within ``--timeout`` seconds (the process group is then killed);
- ``unclear error``: a nonzero exit that is not a documented one (1, 2, 130, 143), or
  stderr of more than one line (Dask log lines and worker tracebacks count), or containing
  "Traceback", "Compute Failed", "KeyError", "unexpected" or a raw pyarrow / numpy message,
  or naming none of the offending file / column / path; a KeyboardInterrupt traceback or
  death by the SIGINT / SIGTERM the case sent (no handler); a signal case without its
  status (130 for SIGINT, 143 for SIGTERM); temporary ``.*.tmp-*`` / ``.*.old-*``
  folders left behind (other than those a SIGKILLed setup step left);
- ``handled``: one clear line and a documented nonzero exit, nothing changed; or exit 0 with
  a correct result (a forged model that loads and predicts finite values, a bad input that
  is readable after all).

How to run
----------
From the repository root, with the project's environment active (this driver itself uses
only the standard library, numpy and pyarrow, so it runs any checkout)::

    python benchmarks/probe_hostile.py --code /work/wt-before --label before
    python benchmarks/probe_hostile.py --code /work/main --label after
    python benchmarks/probe_hostile.py --report-only      # probe.md from the JSON files

It writes ``benchmarks/results/issue26/probe_<label>.json`` (every case: outcome, exit
codes, last stderr line) and regenerates ``probe.md`` from every ``probe_*.json`` there.
``--only REGEX`` runs the matching case ids, ``--list`` prints the corpus, ``--jobs``
cases run at once (default 2), ``--keep`` keeps the sandboxes. Scratch goes to
``--work`` (default: a folder in the system's temporary directory); numba's cache and the
bytecode go to ``--cache`` so the checkouts are not written to. ``--only REGEX --merge``
reruns some cases into an existing JSON. While the cases run the driver holds Dask's
dashboard port 8787, so that two cases starting together do not race for it (a warning
only the probe's parallelism would cause); every case then takes a free port.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "issue26"
SEED = 26

OUTCOMES = ("data lost", "silent wrong answer", "crash", "hang", "unclear error", "handled")
CATEGORIES = ("output paths", "forged values", "memory", "bad inputs", "control")
DOCUMENTED_EXITS = {1, 2, 130, 143}
FORGED_VALUES = {"1e160": 1e160, "1e300": 1e300, "-1e300": -1e300, "5e-324": 5e-324}
RLIMIT_BYTES = 6 * 2**30
LEAKS = ("MemoryError", "Unable to allocate", "array is too big", "maximum supported dimension")
UNCLEAR = ("Traceback", "Compute Failed", "KeyError", "unexpected")
RAW_MESSAGES = (r"Arrow\w*Error", r"ArrowInvalid", r"pyarrow\.lib", r"numpy\._?core",
                r"could not convert", r"operands could not be broadcast",
                r"index -?\d+ is out of bounds", r"encountered in", r"RuntimeWarning",
                r"Parquet magic bytes", r"Couldn't deserialize thrift", r"UserWarning")
UNCAUGHT = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Interrupt|Exit)\b")
TEMPORARY = re.compile(r"^\..+\.(tmp|old)-")
# ``python -c`` runner of the CLI under an address-space limit (argv[1] is the limit)
LIMITED = ("import resource, sys; n = int(sys.argv.pop(1)); "
           "resource.setrlimit(resource.RLIMIT_AS, (n, n)); sys.argv[0] = 'ebf'; "
           "from pipelines.cli import main; raise SystemExit(main(sys.argv[1:]))")
# fits and saves a BayesianForestRegressor (no CLI command trains one alone): data, output
FIT_FOREST = """
import sys
import pyarrow.parquet as pq
from ebf import BayesianForestRegressor
from ebf.model import save
frame = pq.read_table(sys.argv[1]).to_pandas()
model = BayesianForestRegressor(n_estimators=3, random_state=0)
save(model.fit(frame.drop(columns="y"), frame["y"].to_numpy()), sys.argv[2])
"""
#: Saved model types. ``ebf predict`` takes models with an encoder (EBF, SSF, Bayesian
#: forests): a MondrianForestRegressor, SMCTreeRegressor or BARTRegressor saved alone is
#: refused as "not fitted", so those are probed as the branches of an EBF.
MODEL_TYPES = ("ebf_bayesian", "ebf_mondrian", "ebf_smc", "ebf_bart", "bf")


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
        """The file, laid out as ``ebf.pack.write_pack`` does."""
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


# ----------------------------------------------------------------------------- cases


@dataclass
class Step:
    """One command of a case. ``role``: ``probe`` (classified), ``setup`` (only run: a
    retrain to SIGKILL) or ``followup`` (runs only if every earlier step exited 0/10)."""

    argv: list[str]
    role: str = "probe"
    names: tuple[str, ...] = ()  # the error line must contain one of these (if any)
    check: Callable[[Path], str | None] | None = None  # on exit 0: what is wrong, or None
    signal: tuple[int, str, Any, float] | None = None  # (signal, trigger kind, arg, delay)
    group_signal: bool = True  # to the process group (Ctrl-C), else to the process
    expect_rc: int | None = None
    ok_codes: tuple[int, ...] = (0,)
    env: dict[str, str | None] = field(default_factory=dict)  # None: unset
    limit: int | None = None  # RLIMIT_AS bytes
    unprivileged: bool = False  # as root without CAP_DAC_OVERRIDE: mode 000 means unreadable


@dataclass
class Case:
    id: str
    category: str
    prepare: Callable[[Path, Path], None]  # (sandbox root, cwd)
    steps: list[Step]
    allowed: tuple[str, ...] = ()  # paths under cwd the command may replace


@dataclass
class Fixtures:
    root: Path
    models: dict[str, Path]
    registry: Path
    registry_hash: str
    pristine: dict[str, Path]  # predictions of the untouched models

    def sandbox(self, cwd: Path, model: str = "ebf_bayesian") -> None:
        """The standard sandbox: data/, m/ (a model of type ``model``), REG/, user files."""
        cwd.mkdir(parents=True)
        shutil.copytree(self.root / "data", cwd / "data")
        shutil.copytree(self.models[model], cwd / "m")
        shutil.copytree(self.registry, cwd / "REG")
        (cwd / "precious.txt").write_text("the user's file in the current directory\n")
        (cwd.parent / "outside.txt").write_text("the user's file in the parent directory\n")


def read_predictions(folder: Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    table = pq.read_table(folder)
    meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    return {c: table.column(c).to_numpy(zero_copy_only=False) for c in table.column_names}, meta


def stat_columns(cols: dict[str, np.ndarray]) -> list[str]:
    return [c for c in cols if c in ("mean", "std") or re.fullmatch(r"q\d+", c)]


def finite_predictions(out: str) -> Callable[[Path], str | None]:
    def check(cwd: Path) -> str | None:
        cols, _ = read_predictions(cwd / out)
        bad = {c: int(np.sum(~np.isfinite(cols[c].astype(float)))) for c in stat_columns(cols)}
        bad = {c: n for c, n in bad.items() if n}
        if not stat_columns(cols):
            return f"no mean/std/quantile columns in {out}: {list(cols)}"
        return f"non-finite predictions (rows per column): {bad}" if bad else None
    return check


def same_model(out: str, expected: str) -> Callable[[Path], str | None]:
    def check(cwd: Path) -> str | None:
        wrong = finite_predictions(out)(cwd)
        served = read_predictions(cwd / out)[1].get("ebf.model_hash", "")
        if not (served and (expected.startswith(served) or served.startswith(expected))):
            return f"REG@1 served model_hash {served[:16]!r}, published {expected[:16]!r}"
        return wrong
    return check


def unmoved_quantiles(out: str, pristine: Path) -> Callable[[Path], str | None]:
    def check(cwd: Path) -> str | None:
        wrong = finite_predictions(out)(cwd)
        if wrong:
            return wrong
        cols, _ = read_predictions(cwd / out)
        ref, _ = read_predictions(pristine)
        moved = [c for c in stat_columns(ref) if c.startswith("q")
                 and not np.allclose(cols[c], ref[c], rtol=1e-12, atol=1e-12)]
        return f"quantile columns {moved} moved by the forged map" if moved else None
    return check


PREDICT = ["predict", "forged_model", "data", "--out", "pred", "--quiet"]


def forged_case(fx: Fixtures, cid: str, category: str, model: str,
                forge: Callable[[ModelFiles], None], check: Callable | None = None,
                limit: int | None = None) -> Case:
    def prepare(root: Path, cwd: Path) -> None:
        cwd.mkdir(parents=True)
        shutil.copytree(fx.root / "data", cwd / "data")
        shutil.copytree(fx.models[model], cwd / "forged_model")
        forge(ModelFiles(cwd / "forged_model"))
    return Case(cid, category, prepare, [Step(
        PREDICT, names=("forged_model",), check=check or finite_predictions("pred"),
        limit=limit)])


# -- 1. output paths

TARGETS = {
    "data": "data", "data-file": "data/part-0.parquet", "model": "m",
    "manifest": "m/manifest.json", "head-pack": "m/head.pack",
    "reg-model": "REG/models/ebf/v0001/model", "reg-record": "REG/models/ebf/v0001/version.json",
    "cwd": ".", "parent": "..",
}
SMALL_FIT = ["--target", "y", "--n-estimators", "2", "--trunk-leaves", "2"]
OUTPUT_OPTIONS = {  # name -> (argv with {T}, has --overwrite, kind replaced with --overwrite)
    "make-data--out": (["make-data", "friedman", "--rows", "60", "--features", "5",
                        "--partition-rows", "30", "--out", "{T}", "--quiet"], True, "dataset"),
    "train--out": (["train", "data", *SMALL_FIT, "--calibrate", "none", "--out", "{T}",
                    "--quiet"], True, "model"),
    "train--baseline-out": (["train", "data", *SMALL_FIT, "--calibrate", "none",
                             "--baseline-out", "{T}", "--out", "new_model", "--quiet"],
                            True, "model"),
    "predict--out": (["predict", "m", "data", "--out", "{T}", "--quiet"], True, "predictions"),
    "evaluate--json": (["evaluate", "m", "data", "--json", "{T}", "--quiet"], True, "json"),
    "evaluate--report": (["evaluate", "m", "data", "--report", "{T}", "--quiet"], True,
                         "report"),
    "migrate-model-NEW": (["migrate-model", "m", "{T}"], True, "model"),
    "demo--out": (["demo", "--rows", "1500", "--n-estimators", "2", "--trunk-leaves", "2",
                   "--partitions", "2", "--out", "{T}", "--quiet"], False, "demo"),
    "retrain-REGISTRY": (["retrain", "{T}", "data", *SMALL_FIT, "--quiet"], False, "registry"),
}


def sandbox_of(work: Path, case_id: str) -> Path:
    """A case's folder: no glob or shell characters (the CLI takes globs)."""
    return work / "cases" / re.sub(r"[^A-Za-z0-9._=-]+", "_", case_id)


def target_names(target: str, root: Path, cwd: Path) -> tuple[str, ...]:
    """Strings of which the refusal must contain one to name the path."""
    if target == ".":
        return ("current directory", "'.'", str(cwd))
    if target == "..":
        return ("current directory", "parent", "'..'", str(root))
    quoted = (f"'{target}'", f"{target}:", f"{target} ", str(cwd / target))
    return (*quoted, os.path.basename(target)) if len(target) > 2 else quoted


def output_cases(fx: Fixtures, root: Path) -> list[Case]:
    cases = []
    for option, (template, has_overwrite, kind) in OUTPUT_OPTIONS.items():
        for tname, target in TARGETS.items():
            for overwrite in (False, True) if has_overwrite else (False,):
                cid = f"out/{option}/{tname}" + ("/overwrite" if overwrite else "")
                sandbox = sandbox_of(root, cid)
                argv = [a.replace("{T}", target) for a in template]
                argv += ["--overwrite"] if overwrite else []
                steps = [Step(argv, names=target_names(target, sandbox, sandbox / "cwd"),
                              ok_codes=(0, 10))]
                if target.startswith("REG/"):
                    steps.append(Step(["predict", "REG@1", "data", "--out", "served", "--quiet"],
                                      role="followup", names=("REG",),
                                      check=same_model("served", fx.registry_hash)))
                # the one replacement the rule allows: a model over a model (not a registry's)
                allowed = (target,) if overwrite and kind == "model" and tname == "model" else ()
                cases.append(Case(cid, "output paths", lambda r, c: fx.sandbox(c), steps,
                                  allowed))
    return cases


# -- 2. forged values


def forged_value_cases(fx: Fixtures, arrays_per_model: int) -> list[Case]:
    cases = []
    for model in MODEL_TYPES:
        fields: dict[str, list[str]] = {}  # an array of every tree / branch counts once
        for ref in ModelFiles(fx.models[model]).float_arrays():
            if "recalibration" in ref[0] or (".trunk." in ref[0] and model != "ebf_bayesian"):
                continue  # the map has cases of its own; the trunk is probed in one EBF
            name = re.sub(r"\[\d+\]", "[]", re.sub(r"shards/\d+", "shards/*", ref[0]))
            fields.setdefault(name, []).append(ref[0])
        rng = random.Random(f"{SEED}:{model}")
        chosen = rng.sample(sorted(fields), min(arrays_per_model, len(fields)))
        for array_id in sorted(rng.choice(sorted(fields[f])) for f in chosen):
            for vname, value in FORGED_VALUES.items():
                def forge(files: ModelFiles, array_id: str = array_id, value: float = value):
                    files.fill(next(r for r in files.float_arrays() if r[0] == array_id), value)
                    files.save()
                cases.append(forged_case(fx, f"forged/{model}/{array_id}={vname}",
                                         "forged values", model, forge))
    # the recalibration map of the EBF trained with --calibrate recent
    edits = {
        "levels-interior=1.5": ("levels", lambda v: _at(v, len(v) // 2, 1.5)),
        "levels-interior=-0.5": ("levels", lambda v: _at(v, len(v) // 2, -0.5)),
        "levels-interior=1.99": ("levels", lambda v: _at(v, 1, 1.99)),
        "levels-interior=2.5": ("levels", lambda v: _at(v, len(v) // 2, 2.5)),
        "levels-interior=1e300": ("levels", lambda v: _at(v, len(v) // 2, 1e300)),
        "levels-reversed": ("levels", lambda v: np.r_[v[0], v[1:-1][::-1], v[-1]]),
        "levels-swapped": ("levels", lambda v: _swap(v, 1, len(v) - 2)),
        "nominal-swapped": ("nominal", lambda v: _swap(v, 1, len(v) - 2)),
    }
    for name, (key, edit) in edits.items():
        def forge(files: ModelFiles, key: str = key, edit: Callable = edit) -> None:
            ref = next(r for r in files.float_arrays()
                       if "recalibration" in r[0] and r[0].endswith(f".{key}"))
            files.put(ref, edit(files.values(ref)))
            files.save()
        cases.append(forged_case(fx, f"forged/ebf_bayesian/recalibration.{name}",
                                 "forged values", "ebf_bayesian", forge,
                                 unmoved_quantiles("pred", fx.pristine["ebf_bayesian"])))
    return cases


def _at(v: np.ndarray, i: int, value: float) -> np.ndarray:
    v = v.copy()
    v[i] = value
    return v


def _swap(v: np.ndarray, i: int, j: int) -> np.ndarray:
    v = v.copy()
    v[[i, j]] = v[[j, i]]
    return v


# -- 3. memory


def memory_cases(fx: Fixtures) -> list[Case]:
    cases = [forged_case(fx, "memory/control-under-rlimit", "memory", "ebf_bayesian",
                         lambda files: None, limit=RLIMIT_BYTES)]
    shard = "shards/00000.pack"
    for pack in ("head.pack", shard):
        for gib in (10, 40):
            for spanning in (False, True):
                def forge(files: ModelFiles, pack=pack, gib=gib, spanning=spanning) -> None:
                    sparse_pack(files, pack, gib * 2**30, spanning)
                how = "one-array-table" if spanning else "original-header"
                cases.append(forged_case(fx, f"memory/{pack}-claims-{gib}GiB-{how}", "memory",
                                         "ebf_bayesian", forge, limit=RLIMIT_BYTES))
    for model in ("ebf_bayesian", "ebf_mondrian"):
        for pack in ("head.pack", shard):
            for sname in ("[0,2**62]", "[2**62,0]", "65-dims"):
                def forge(files: ModelFiles, pack=pack, sname=sname) -> None:
                    ref = next(r for r in files.float_arrays()
                               if r[1] == pack and len(r[3]["shape"]) == 1)
                    data = files.packs[pack].arrays[ref[2]]["data"]
                    shape, data = {"[0,2**62]": ([0, 2**62], b""),
                                   "[2**62,0]": ([2**62, 0], b""),
                                   "65-dims": (ref[3]["shape"] + [1] * 64, data)}[sname]
                    files.reshape(ref, shape, data)
                    files.save()
                cases.append(forged_case(fx, f"memory/{model}/{pack}-shape-{sname}", "memory",
                                         model, forge, limit=RLIMIT_BYTES))
    return cases


# -- 4. bad inputs


def bad_input_cases(fx: Fixtures) -> list[Case]:
    cases = []
    train = ["train", "bad", *SMALL_FIT, "--calibrate", "none", "--out", "new_model", "--quiet"]
    predict = ["predict", "m", "bad", "--out", "pred", "--quiet"]
    after_train = Step(["predict", "new_model", "data", "--out", "pred", "--quiet"],
                       role="followup", check=finite_predictions("pred"))

    def dataset(build: Callable[[Path], None]) -> Callable[[Path, Path], None]:
        def prepare(root: Path, cwd: Path) -> None:
            fx.sandbox(cwd)
            build(cwd / "bad")
        return prepare

    def two_files(second: Callable[[dict], dict], names: list[str] | None = None):
        def build(folder: Path) -> None:
            cols = friedman(200, SEED + 1)
            write_parquet(folder / "part-0.parquet", cols)
            write_parquet(folder / "part-1.parquet", second(friedman(200, SEED + 2)), names)
        return build

    variants = {
        "schema-missing-column": (two_files(lambda c: {k: v for k, v in c.items() if k != "x3"}),
                                  ("part-1.parquet", "x3")),
        "schema-dtype-string": (two_files(lambda c: {**c, "x3": c["x3"].astype(str)}),
                                ("part-1.parquet", "x3")),
        "schema-dtype-int": (two_files(lambda c: {**c, "x3": (c["x3"] * 10).astype(np.int64)}),
                             ("part-1.parquet", "x3")),
        "duplicate-columns": (two_files(lambda c: c, ["x0", "x1", "x2", "x3", "x3", "y"]),
                              ("x3",)),
        "non-parquet-file": (lambda f: (write_dataset(f, 400, SEED), (f / "notes.txt")
                                        .write_text("not parquet\n")), ("notes.txt",)),
        "garbage-parquet-file": (lambda f: (write_dataset(f, 400, SEED), (f / "part-2.parquet")
                                            .write_bytes(b"PAR1 this is not a parquet file")),
                                 ("part-2.parquet",)),
    }
    for name, (build, names) in variants.items():
        cases.append(Case(f"bad/{name}/train", "bad inputs", dataset(build),
                          [Step(train, names=names), after_train]))
        cases.append(Case(f"bad/{name}/predict", "bad inputs", dataset(build),
                          [Step(predict, names=names, check=finite_predictions("pred"))]))

    def unreadable(folder: Path) -> None:
        write_dataset(folder, 400, SEED)
        (folder / "part-1.parquet").chmod(0)
    for cmd, argv in (("train", train), ("predict", predict)):
        steps = [Step(argv, names=("part-1.parquet",), unprivileged=os.geteuid() == 0,
                      check=finite_predictions("pred") if cmd == "predict" else None)]
        cases.append(Case(f"bad/unreadable-file-mode-000/{cmd}", "bad inputs",
                          dataset(unreadable), steps))

    def rows(n: int, edit: Callable[[dict], None] = lambda c: None):
        def build(folder: Path) -> None:
            cols = friedman(max(n, 1), SEED + 3)
            cols = {k: v[:n] for k, v in cols.items()}
            edit(cols)
            write_parquet(folder / "part-0.parquet", cols)
        return build
    for name, build in {"one-row": rows(1), "zero-rows": rows(0),
                        "targets-all-times-1e101": rows(400, lambda c: c["y"].__imul__(1e101)),
                        "target-one-row-1e300": rows(400, lambda c: c["y"].__setitem__(7, 1e300)),
                        "target-one-row-inf": rows(400, lambda c: c["y"].__setitem__(7, np.inf)),
                        "target-one-row-nan": rows(400, lambda c: c["y"].__setitem__(7, np.nan)),
                        }.items():
        cases.append(Case(f"bad/{name}/train", "bad inputs", dataset(build),
                          [Step(train, names=("bad", "'y'", "target")), after_train]))
    for name, build in {"zero-rows": rows(0),
                        "nan-features": rows(400, lambda c: c["x0"].__setitem__(
                            slice(0, 400, 7), np.nan)),
                        "inf-features": rows(400, lambda c: c["x1"].__setitem__(
                            slice(0, 400, 5), np.inf))}.items():
        cases.append(Case(f"bad/{name}/predict", "bad inputs", dataset(build),
                          [Step(predict, names=("bad", "'x0'", "'x1'", "feature"),
                                check=finite_predictions("pred"))]))
    cases += signal_cases(fx)
    return cases


def signal_cases(fx: Fixtures) -> list[Case]:
    def big(root: Path, cwd: Path) -> None:
        fx.sandbox(cwd)
        shutil.copytree(fx.root / "big", cwd / "big")
    lock = "REG/models/ebf/.lock"
    retrain = ["retrain", "REG", "data", "--quiet"]
    cases = [Case("bad/stale-registry-lock/retrain", "bad inputs", lambda r, c: fx.sandbox(c),
                  [Step(retrain, role="setup", signal=(signal.SIGKILL, "file", lock, 0.0)),
                   Step(retrain, names=("registry unlock",), ok_codes=(0, 10))],
                  allowed=("REG/models/ebf/current.json",))]
    fit = ["train", "big", "--target", "y", "--n-estimators", "30", "--trunk-leaves", "4",
           "--calibrate", "none", "--out", "new_model", "--quiet"]
    for delay in (0.5, 1.5, 3.0):
        cases.append(Case(f"bad/sigint-start-up-{delay}s/train", "bad inputs", big, [Step(
            fit, signal=(signal.SIGINT, "after", delay, 0.0), expect_rc=130, names=("",))]))
    processes = {"EBF_LOCAL_PROCESSES": None}  # unset: real worker processes
    for how, env in (("threads", {}), ("processes", processes)):
        cases.append(Case(f"bad/sigint-during-fit-{how}/train", "bad inputs", big, [Step(
            fit, signal=(signal.SIGINT, "after", 20.0, 0.0),  # nothing is printed before
            expect_rc=130, names=("",), env=env)]))
    make = ["make-data", "friedman", "--rows", "3e6", "--partition-rows", "100000", "--out",
            "new_data", "--quiet"]
    predict = ["predict", "m", "big", "--out", "new_pred", "--quiet"]
    for cid, argv, env, tmp in (
            ("make-data-threads", make, {}, ".new_data.tmp-*"),
            ("make-data-processes", make, processes, ".new_data.tmp-*"),
            ("predict-threads", predict, {}, ".new_pred.tmp-*")):
        cases.append(Case(f"bad/sigterm-during-write-{cid}", "bad inputs", big, [Step(
            argv, signal=(signal.SIGTERM, "glob", tmp, 0.3), group_signal=False,
            expect_rc=143, names=("",), env=env)]))
    return cases


def control_cases(fx: Fixtures) -> list[Case]:
    cases = [forged_case(fx, f"control/{m}", "control", m, lambda files: None)
             for m in MODEL_TYPES]
    cases.append(Case("control/registry-REG@1", "control", lambda r, c: fx.sandbox(c), [Step(
        ["predict", "REG@1", "data", "--out", "served", "--quiet"],
        check=same_model("served", fx.registry_hash))]))
    return cases


def corpus(fx: Fixtures, root: Path, arrays_per_model: int) -> list[Case]:
    return (output_cases(fx, root) + forged_value_cases(fx, arrays_per_model)
            + memory_cases(fx) + bad_input_cases(fx) + control_cases(fx))


# ----------------------------------------------------------------------------- running


@dataclass
class Run:
    code: Path
    cache: Path
    timeout: float

    def env(self, extra: dict[str, str | None]) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("EBF_", "DASK_", "PYTHON", "NUMBA_"))}
        env.update(PYTHONPATH=str(self.code), EBF_LOCAL_PROCESSES="0",
                   NUMBA_CACHE_DIR=str(self.cache / "numba"),
                   PYTHONPYCACHEPREFIX=str(self.cache / "pycache"), MPLBACKEND="Agg")
        for key, value in extra.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def command(self, step: Step) -> list[str]:
        prefix = []
        if step.unprivileged:  # root reads mode-000 files unless it drops these capabilities
            caps = "-dac_override,-dac_read_search"
            prefix = ["setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}"]
        if step.limit:
            return [*prefix, sys.executable, "-c", LIMITED, str(step.limit), *step.argv]
        return [*prefix, sys.executable, "-m", "pipelines", *step.argv]

    def step(self, step: Step, cwd: Path, logs: Path) -> dict:
        """Run one step; returns rc, timed_out, stderr, seconds, signal_sent."""
        out, err = logs.with_suffix(".out"), logs.with_suffix(".err")
        t0 = time.monotonic()
        with open(out, "wb") as fo, open(err, "wb") as fe:
            proc = subprocess.Popen(self.command(step), cwd=cwd, stdout=fo, stderr=fe,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    env=self.env(step.env))
            sent, timed_out = None, False
            while proc.poll() is None:
                elapsed = time.monotonic() - t0
                if elapsed > self.timeout:
                    _kill_group(proc.pid)
                    timed_out = True
                    break
                if step.signal and sent is None and _triggered(step.signal, elapsed, cwd, err):
                    time.sleep(step.signal[3])
                    if proc.poll() is None:
                        if step.group_signal:
                            os.killpg(proc.pid, step.signal[0])
                        else:
                            os.kill(proc.pid, step.signal[0])
                        sent = round(time.monotonic() - t0, 2)
                time.sleep(0.05)
            rc = proc.wait()
            _kill_group(proc.pid)  # workers or threads' children left behind
        return {"argv": step.argv, "rc": rc, "timed_out": timed_out,
                "seconds": round(time.monotonic() - t0, 2), "signal_sent_at": sent,
                "stderr": err.read_text(errors="replace")}


@contextlib.contextmanager
def hold_dashboard_port(port: int = 8787):
    """Keep Dask's default dashboard port taken while the cases run.

    Every local cluster then sees it taken and asks for a free port (``cluster.connect``
    checks first), instead of two cases started at the same instant racing for it and one
    printing Distributed's "port already in use" warning: noise the probe's own parallelism
    would cause. If someone else holds the port, that is the same.
    """
    import socket

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        with contextlib.suppress(OSError):
            sock.bind(("", port))
            sock.listen(1)
        yield
    finally:
        sock.close()


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _triggered(plan: tuple, elapsed: float, cwd: Path, err: Path) -> bool:
    _, kind, arg, _ = plan
    if kind == "after":
        return elapsed >= arg
    if kind == "file":
        return (cwd / arg).exists()
    if kind == "glob":
        return any(cwd.glob(arg))
    text = err.read_text(errors="replace") + err.with_suffix(".out").read_text(errors="replace")
    return re.search(arg, text) is not None  # "output": stdout or stderr


def snapshot(root: Path) -> dict[str, tuple]:
    """Every regular file under ``root``: size and sha256 (size and mtime if over 64 MiB)."""
    files = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            file = Path(dirpath) / name
            st = file.lstat()
            rel = str(file.relative_to(root))
            if not file.is_file() or file.is_symlink():
                files[rel] = ("other", st.st_mode)
            elif st.st_size > 64 * 2**20:
                files[rel] = (st.st_size, st.st_mtime_ns)
            else:
                try:
                    files[rel] = (st.st_size, sha256(file.read_bytes()))
                except PermissionError:
                    files[rel] = (st.st_size, "unreadable")
    return files


def temporaries(root: Path) -> set[str]:
    """The hidden temporary and set-aside folders of ``atomic_dir`` under ``root``."""
    return {str(p.relative_to(root)) for p in root.rglob(".*") if TEMPORARY.match(p.name)}


def lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def step_outcome(step: Step, res: dict, cwd: Path, timeout: float) -> tuple[str, str]:
    err = res["stderr"]
    shown = lines(err)
    last = shown[-1] if shown else ""
    if res["timed_out"]:
        return "hang", f"no exit within {timeout:.0f} s"
    if res["rc"] < 0:
        if step.signal and res["signal_sent_at"] is not None and -res["rc"] == step.signal[0]:
            # no handler: the default action of the signal we sent (after a KeyboardInterrupt
            # traceback for SIGINT); the documented status is 130 / 143
            return "unclear error", (f"died by the signal sent ({-res['rc']}) after "
                                     f"{len(shown)} stderr lines ({last[:60]!r}), expected "
                                     f"exit {step.expect_rc}")
        return "crash", f"died by signal {-res['rc']}"
    leak = next((p for p in LEAKS if p in err), None)
    if leak:
        return "crash", f"leaked {leak!r}"
    if "Traceback (most recent call last)" in err and UNCAUGHT.match(last):
        if not last.startswith("KeyboardInterrupt"):
            return "crash", f"uncaught {last[:120]}"
    if res["rc"] in step.ok_codes:
        if step.signal and res["signal_sent_at"] is not None and step.expect_rc:
            return "unclear error", f"exit {res['rc']} after the signal, expected {step.expect_rc}"
        try:
            wrong = step.check(cwd) if step.check else None
        except Exception as exc:  # noqa: BLE001 - an output we cannot read is wrong too
            wrong = f"output unreadable: {type(exc).__name__}: {exc}"
        if wrong:
            return "silent wrong answer", wrong
        unsent = " (the signal was not sent: it exited first)" if step.signal else ""
        return "handled", f"exit {res['rc']}: {step.check and 'loaded, finite' or 'ok'}{unsent}"
    problems = []
    if step.expect_rc is not None and res["rc"] != step.expect_rc:
        problems.append(f"exit {res['rc']}, expected {step.expect_rc}")
    elif res["rc"] not in DOCUMENTED_EXITS:
        problems.append(f"undocumented exit {res['rc']}")
    if len(shown) != 1:
        problems.append(f"{len(shown)} stderr lines")
    problems += [f"says {p!r}" for p in UNCLEAR if p in err]
    problems += [f"raw {p!r}" for p in RAW_MESSAGES if re.search(p, err)]
    if step.names and not any(n in last for n in step.names):
        problems.append(f"names none of {list(step.names)}")
    if problems:
        return "unclear error", "; ".join(problems)
    return "handled", f"refused, exit {res['rc']}"


def run_case(case: Case, run: Run, work: Path, keep: bool) -> dict:
    root = sandbox_of(work, case.id)
    shutil.rmtree(root, ignore_errors=True)
    cwd = root / "cwd"
    t0 = time.monotonic()
    record = {"id": case.id, "category": case.category, "steps": []}
    try:
        case.prepare(root, cwd)
    except Exception as exc:  # noqa: BLE001 - a corpus bug: reported, not classified
        record.update(outcome="not run", detail=f"prepare failed: {type(exc).__name__}: {exc}")
        return record
    before = None
    findings: list[tuple[str, str]] = []
    ok_so_far = True
    for i, step in enumerate(case.steps):
        if step.role == "followup" and not ok_so_far:
            continue
        if step.role != "setup" and before is None:
            before, stale = snapshot(root), temporaries(root)
        res = run.step(step, cwd, root / f"step{i}")
        err_lines = lines(res.pop("stderr"))
        res.update(role=step.role, stderr_lines=len(err_lines),
                   last_stderr_line=err_lines[-1][:300] if err_lines else "")
        if step.role != "setup":
            outcome, why = step_outcome(step, {**res, "stderr": "\n".join(err_lines)}, cwd,
                                        run.timeout)
            res.update(outcome=outcome, why=why)
            findings.append((outcome, f"step {i} ({step.argv[0]}): {why}"))
        ok_so_far = ok_so_far and not res["timed_out"] and res["rc"] in (0, 10)
        record["steps"].append(res)
    after = snapshot(root)
    allowed = tuple(str(Path("cwd") / a) for a in case.allowed)
    lost = sorted(p for p, v in before.items() if after.get(p) != v
                  and not any(p == a or p.startswith(a + "/") for a in allowed))
    if lost:
        findings.append(("data lost", f"{len(lost)} file(s) changed or gone: {lost[:4]}"))
    left = sorted(temporaries(root) - stale)
    if left:
        findings.append(("unclear error", f"temporary files left: {left[:3]}"))
    outcome, detail = min(findings, key=lambda f: OUTCOMES.index(f[0]))
    record.update(outcome=outcome, detail=detail, findings=[f"{o}: {d}" for o, d in findings],
                  seconds=round(time.monotonic() - t0, 2))
    if not keep:
        shutil.rmtree(root, ignore_errors=True)
    return record


# ----------------------------------------------------------------------------- fixtures


def build_fixtures(run: Run, work: Path, reuse: bool) -> Fixtures:
    """Data (written here, the same for every checkout), the models and the registry (by
    the checkout under test), and the untouched models' predictions; ``reuse``: those of an
    earlier run on the same commit, if complete."""
    root = work / "fixtures"
    models = {m: root / "models" / m for m in MODEL_TYPES}
    pristine = {m: root / "pred" / m for m in MODEL_TYPES}
    stamp = {"code": str(run.code), "commit": git(run.code, "rev-parse", "HEAD"),
             "dirty": git(run.code, "status", "--porcelain", "--untracked-files=no")}
    done = root / "fixtures.json"
    if not (reuse and done.is_file() and json.loads(done.read_text()) == stamp):
        make_fixtures(run, root, models, pristine)
        done.write_text(json.dumps(stamp))
    registry_hash = json.loads((root / "REG/models/ebf/v0001/model/manifest.json")
                               .read_text())["model_hash"]
    return Fixtures(root, models, root / "REG", registry_hash, pristine)


def make_fixtures(run: Run, root: Path, models: dict[str, Path], pristine: dict[str, Path]
                  ) -> None:
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    write_dataset(root / "data", 600, SEED)
    write_dataset(root / "big", 200_000, SEED + 9, files=4)

    def cli(*argv: str) -> None:
        res = run.step(Step(list(argv)), root, root / f"setup-{argv[0]}-{len(os.listdir(root))}")
        if res["rc"] not in (0, 10):
            raise SystemExit(f"fixture step {' '.join(argv)} failed ({res['rc']}):\n"
                             f"{res['stderr'][-3000:]}")

    fit = ["data", "--target", "y", "--n-estimators", "3", "--trunk-leaves", "2", "--quiet"]
    cli("train", *fit, "--branch", "bayesian", "--calibrate", "recent", "--out",
        str(models["ebf_bayesian"]))
    for branch in ("mondrian", "smc", "bart"):
        cli("train", *fit, "--branch", branch, "--calibrate", "none", "--out",
            str(models[f"ebf_{branch}"]))
    res = subprocess.run([sys.executable, "-c", FIT_FOREST, str(root / "data"),
                          str(models["bf"])], cwd=root, env=run.env({}),
                         capture_output=True, text=True, timeout=run.timeout * 3)
    if res.returncode:
        raise SystemExit(f"fitting the Bayesian forest failed:\n{res.stderr[-3000:]}")
    cli("retrain", "REG", *fit)
    for m in MODEL_TYPES:
        cli("predict", str(models[m]), "data", "--out", str(pristine[m]), "--quiet")
    for path in models.values():  # the forger must write what ebf writes, byte for byte
        files = ModelFiles(path)
        for name, pack in files.packs.items():
            if pack.encode() != (path / name).read_bytes():
                raise SystemExit(f"the pack writer here differs from ebf's for {path / name}")


# ----------------------------------------------------------------------------- report


def summarize(records: list[dict]) -> dict[str, dict[str, int]]:
    """Cases per category and outcome; ``not run`` counts a case the probe could not set up
    (a bug of the probe, or its scratch folder removed under it)."""
    table = {c: dict.fromkeys((*OUTCOMES, "not run"), 0) for c in CATEGORIES}
    for r in records:
        table[r["category"]][r["outcome"] if r["outcome"] in OUTCOMES else "not run"] += 1
    return table


def write_markdown() -> Path:
    runs = {}
    for file in sorted(RESULTS.glob("probe_*.json")):
        data = json.loads(file.read_text())
        runs[data["label"]] = data
    order = sorted(runs, key=lambda k: (k != "before", k != "after", k))
    out = ["# Hostile-input probe (issue 26)", "",
           "Generated by `benchmarks/probe_hostile.py` from "
           + ", ".join(f"`probe_{k}.json`" for k in order) + "; its docstring states the "
           "corpus and the outcome rules. Each cell: cases per outcome, "
           + " / ".join(order) + ".", ""]
    for label in order:
        r = runs[label]
        out.append(f"- **{label}**: `--code {r['code']}` at {r['commit'][:12]}"
                   f"{' (with uncommitted changes)' if r['dirty'] else ''}, {r['cases']} cases "
                   f"in {r['seconds'] / 60:.1f} min ({r['jobs']} at once, timeout "
                   f"{r['timeout']:.0f} s), {r['started']}")
    summary = {k: summarize(runs[k]["records"]) for k in order}
    columns = [*OUTCOMES] + (["not run"] if any(summary[k][c]["not run"] for k in order
                                               for c in CATEGORIES) else [])
    out += ["", "| category | cases | " + " | ".join(columns) + " |",
            "|---|---|" + "---|" * len(columns)]
    totals = {k: {o: sum(summary[k][c][o] for c in CATEGORIES) for o in columns} for k in order}
    for cat, row in [(c, {k: summary[k][c] for k in order}) for c in CATEGORIES] + [
            ("**all**", totals)]:
        sizes = " / ".join(str(sum(row[k].values())) for k in order)
        cells = [" / ".join(str(row[k][o]) for k in order) for o in columns]
        out.append(f"| {cat} | {sizes} | " + " | ".join(cells) + " |")
    loaded = {k: sum("loaded, finite" in c.get("detail", "") for c in runs[k]["records"]
                     if c["category"] in ("forged values", "memory")) for k in order}
    out += ["", "Forged models (forged values, memory) that loaded and predicted finite values "
            "(counted as handled): " + ", ".join(f"{k} {n}" for k, n in loaded.items())]
    for k in order:
        for rerun in runs[k].get("reruns", []):
            out.append(f"- {k}: cases `{rerun['only']}` ({rerun['cases']}) rerun "
                       f"{rerun['started']} at {rerun['commit'][:12]} and merged")
    ids = [{c["id"] for c in runs[k]["records"]} for k in order]
    if len(ids) > 1 and any(s != ids[0] for s in ids):
        out += ["", "The case lists differ between runs (arrays enumerated from the files each "
                "checkout wrote): " + ", ".join(f"{k}: {len(s)}" for k, s in zip(order, ids,
                                                                               strict=True))]
    out += ["", "Output-path cases that exited 0 count as handled when no byte of an existing "
            "file changed, though the command wrote where it was aimed (new files inside the "
            "input folder, the model, a registry or the current directory):", ""]
    for label in order:
        took = [c["id"] for c in runs[label]["records"]
                if c["category"] == "output paths" and c["outcome"] == "handled"
                and c["steps"] and c["steps"][0]["rc"] in (0, 10)]
        out.append(f"- {label} ({len(took)}): " + (", ".join(f"`{t}`" for t in took) or "none"))
    for label in order:
        bad = [c for c in runs[label]["records"] if c["outcome"] != "handled"]
        out += ["", f"## Not handled: {label} ({len(bad)})", ""]
        if bad:
            out += ["| case | outcome | why | last stderr line |", "|---|---|---|---|"]
            for c in bad:
                last = next((s["last_stderr_line"] for s in reversed(c["steps"])
                             if s.get("last_stderr_line")), "")
                also = sorted({f.split(":")[0] for f in c.get("findings", [])}
                              - {c["outcome"], "handled"})
                why = c["detail"] + (f" (also: {', '.join(also)})" if also else "")
                out.append(f"| `{c['id']}` | {c['outcome']} | {_cell(why)} | {_cell(last)} |")
    path = RESULTS / "probe.md"
    path.write_text("\n".join(out) + "\n")
    return path


def _cell(text: str, width: int = 160) -> str:
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= width else text[: width - 3] + "..."


# ----------------------------------------------------------------------------- main


def git(code: Path, *args: str) -> str:
    res = subprocess.run(["git", "-C", str(code), *args], capture_output=True, text=True)
    return res.stdout.strip() if res.returncode == 0 else "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--code", type=Path, help="checkout to probe (its PYTHONPATH)")
    parser.add_argument("--label", help="name of the run: probe_<label>.json")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per step")
    parser.add_argument("--arrays", type=int, default=2,
                        help="float arrays sampled per model type, one per field (the same "
                        "array of every tree or branch is one field); each gets every value")
    parser.add_argument("--only", help="regex of the case ids to run")
    parser.add_argument("--list", action="store_true", help="print the corpus, run nothing")
    parser.add_argument("--keep", action="store_true", help="keep the case sandboxes")
    parser.add_argument("--work", type=Path,
                        help="scratch folder (default: a new one in $TMPDIR, removed at the "
                        "end unless --keep; name one to --reuse-fixtures)")
    parser.add_argument("--cache", type=Path,
                        default=Path(tempfile.gettempdir()) / "ebf-probe-cache",
                        help="numba cache and bytecode (kept between runs)")
    parser.add_argument("--reuse-fixtures", action="store_true",
                        help="reuse the models of an earlier run on the same commit")
    parser.add_argument("--merge", action="store_true",
                        help="with --only: replace those cases in the existing probe_<label>.json")
    parser.add_argument("--report-only", action="store_true",
                        help="only regenerate probe.md from the JSON files")
    args = parser.parse_args(argv)
    if args.report_only:
        print(write_markdown().read_text())
        return 0
    if not (args.code and args.label):
        parser.error("--code and --label are required (or --report-only)")
    code = args.code.resolve()
    if not any((code / "pipelines" / cli).is_file() for cli in ("cli.py", "cli/__init__.py")):
        parser.error(f"{code} is not an ebf checkout (no pipelines/cli)")
    # a folder of its own unless named: two runs sharing one would delete each other's models
    work = (args.work or Path(tempfile.mkdtemp(prefix=f"ebf-probe-{args.label}-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    for sub in ("numba", "pycache"):
        (args.cache / sub).mkdir(parents=True, exist_ok=True)
    run = Run(code, args.cache.resolve(), args.timeout)
    # a driver started in the background by a shell ignores SIGINT, and so would the CLI it
    # starts (an ignored signal stays ignored across exec): give the cases the defaults
    for sig, handler in ((signal.SIGINT, signal.default_int_handler),
                         (signal.SIGTERM, signal.SIG_DFL)):
        if signal.getsignal(sig) == signal.SIG_IGN:
            signal.signal(sig, handler)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    t0 = time.monotonic()
    print(f"fixtures for {code} in {work} ...", flush=True)
    fx = build_fixtures(run, work, args.reuse_fixtures)
    fixture_seconds = time.monotonic() - t0
    cases = corpus(fx, work, args.arrays)
    if args.only:
        cases = [c for c in cases if re.search(args.only, c.id)]
    if args.list:
        for c in cases:
            print(f"{c.category:14s} {c.id}")
        print({cat: sum(c.category == cat for c in cases) for cat in CATEGORIES})
        return 0
    print(f"{len(cases)} cases, {args.jobs} at once; fixtures took {fixture_seconds:.0f} s",
          flush=True)
    records = []

    def one(case: Case) -> dict:
        try:
            rec = run_case(case, run, work, args.keep)
        except Exception as exc:  # noqa: BLE001 - a bug of the probe: reported, not classified
            rec = {"id": case.id, "category": case.category, "steps": [],
                   "outcome": "not run", "detail": f"probe error: {type(exc).__name__}: {exc}"}
        print(f"[{len(records) + 1:4d}/{len(cases)}] {rec['outcome']:19s} "
              f"{rec.get('seconds', 0):6.1f}s {case.id}", flush=True)
        records.append(rec)
        return rec

    with hold_dashboard_port(), ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(one, cases))
    order = {c.id: i for i, c in enumerate(cases)}
    records.sort(key=lambda r: order[r["id"]])
    out = RESULTS / f"probe_{args.label}.json"
    if args.merge:  # these records replace the same cases of the earlier full run
        report = json.loads(out.read_text())
        new = {r["id"]: r for r in records}
        report["records"] = [new.pop(r["id"], r) for r in report["records"]] + list(new.values())
        report["summary"] = summarize(report["records"])
        report.setdefault("reruns", []).append(
            {"started": started, "only": args.only, "cases": len(records),
             "commit": git(code, "rev-parse", "HEAD"), "seconds": round(time.monotonic() - t0)})
        out.write_text(json.dumps(report, indent=1) + "\n")
        print(write_markdown().read_text())
        return 0
    report = {
        "label": args.label, "code": str(args.code), "commit": git(code, "rev-parse", "HEAD"),
        "dirty": bool(git(code, "status", "--porcelain", "--untracked-files=no")),
        "started": started, "seconds": round(time.monotonic() - t0, 1),
        "fixture_seconds": round(fixture_seconds, 1), "jobs": args.jobs,
        "timeout": args.timeout, "arrays_per_model": args.arrays, "seed": SEED,
        "only": args.only, "cases": len(records),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform()},
        "summary": summarize(records), "records": records,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    if not (args.work or args.keep):
        shutil.rmtree(work, ignore_errors=True)
    print(write_markdown().read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
