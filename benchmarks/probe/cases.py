"""The probe's corpus: every case a sandbox to prepare and the commands to run in it, by
category (output paths, forged values, memory, bad inputs, control); issue 45's categories
are in ``cases_limits`` and ``cases_messages``.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from benchmarks.probe.files import (
    SEED,
    ModelFiles,
    friedman,
    sparse_pack,
    write_dataset,
    write_parquet,
)

CATEGORIES_26 = ("output paths", "forged values", "memory", "bad inputs", "control")
#: issue 45's (``cases_limits``, ``cases_messages``)
CATEGORIES_45 = ("unbounded inputs", "exit status around the commit", "outputs together",
                 "registry trust", "numbers out of range", "config typos", "unclear messages")
CATEGORIES = CATEGORIES_26 + CATEGORIES_45
FORGED_VALUES = {"1e160": 1e160, "1e300": 1e300, "-1e300": -1e300, "5e-324": 5e-324}
RLIMIT_BYTES = 6 * 2**30
#: Saved model types. ``ebf predict`` takes models with an encoder (EBF, SSF, Bayesian
#: forests): a MondrianForestRegressor, SMCTreeRegressor or BARTRegressor saved alone is
#: refused as "not fitted", so those are probed as the branches of an EBF.
MODEL_TYPES = ("ebf_bayesian", "ebf_mondrian", "ebf_smc", "ebf_bart", "bf")

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
    # issue 45: (cwd, stdout) -> what is wrong on exit 0, as text (silent) or (outcome, why)
    check_out: Callable[[Path, str], str | tuple[str, str] | None] | None = None
    prefix: str | None = None  # the error line must start with this (the command's label)
    fix: bool = False  # the error line must name a fix (running.FIX_HINTS)
    # the output a signal races (path under cwd, what is wrong with it or None): exit 0 with
    # it complete, or 130 / 143 without it (running.commit_outcome)
    commit: tuple[str, Callable[[Path], str | None]] | None = None
    outputs: tuple[str, ...] = ()  # paths under cwd that must not appear on a nonzero exit


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
    registry2: Path | None = None  # issue 45: REG retrained again (v1 current, v2 kept)

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
