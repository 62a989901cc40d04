"""Issue 45's corpus, part one: unbounded inputs, the exit status around the commit, outputs
checked together and the registry's trust in a version (the categories are described in
``benchmarks/probe_hostile.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from benchmarks.probe.cases import (
    CATEGORIES_45,
    RLIMIT_BYTES,
    SMALL_FIT,
    Case,
    Fixtures,
    Step,
    finite_predictions,
)
from benchmarks.probe.files import SEED, friedman, sha256, write_parquet

UNBOUNDED, COMMIT, TOGETHER, TRUST = CATEGORIES_45[:4]
PROCESSES = {"EBF_LOCAL_PROCESSES": None}  # unset: real worker processes
FIT = ["data", *SMALL_FIT, "--calibrate", "none", "--quiet"]
MiB = 2**20


def standard(fx: Fixtures, extra: Callable[[Path], None] | None = None
             ) -> Callable[[Path, Path], None]:
    """The standard sandbox (data/, m/, REG/, user files), then ``extra(cwd)``."""
    def prepare(root: Path, cwd: Path) -> None:
        fx.sandbox(cwd)
        if extra:
            extra(cwd)
    return prepare


def refusal(argv: list[str], names: tuple[str, ...], **kw) -> Step:
    """A step that must be refused: one line naming one of ``names`` and a fix."""
    return Step(argv, names=names, fix=True, **kw)


# -- validators of an output (None: complete)


def model_ok(path: Path) -> str | None:
    manifest = json.loads((path / "manifest.json").read_text())
    for entry in [manifest["head"], *manifest["shards"]]:
        if not (path / entry["file"]).is_file():
            return f"{entry['file']} is missing"
        data = (path / entry["file"]).read_bytes()
        if len(data) != entry["bytes"] or sha256(data) != entry["sha256"]:
            return f"{entry['file']} does not match its manifest"
    return None


def table_ok(rows: int) -> Callable[[Path], str | None]:
    def check(path: Path) -> str | None:
        n = pq.read_table(path).num_rows
        return None if n == rows else f"{n} rows, expected {rows}"
    return check


def json_ok(path: Path) -> str | None:
    json.loads(path.read_text())
    return None


# -- unbounded inputs


def fill(path: Path, kind: str) -> None:
    """A hostile file at ``path``: fifo, directory, binary, big (2 MiB of TOML comments),
    huge (20 MiB of valid JSON), deep (100,000 levels of JSON)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # a registry file keeps its content: the padding or the nesting is one more key
    original = json.loads(path.read_text()) if path.suffix == ".json" and path.is_file() else {}
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "binary":
        path.write_bytes(np.random.default_rng(SEED).bytes(4096))
    elif kind == "big":
        path.write_text("# padding\n" * (2 * MiB // 10 + 1) + "[train]\nseed = 1\n")
    elif kind == "huge":
        path.write_text(json.dumps({**original, "pad": "x" * (20 * MiB)}))
    elif kind == "deep":
        text = json.dumps({**original, "pad": 0})
        path.write_text(text.replace('"pad": 0', '"pad": ' + "[" * 100_000 + "]" * 100_000))


def unbounded_cases(fx: Fixtures) -> list[Case]:
    cases = []
    commands = {"registry-list": ["registry", "list", "REG"],
                "train": ["train", *FIT, "--out", "new_model"]}
    for kind in ("/dev/zero", "/dev/urandom", "fifo", "directory", "binary", "big"):
        for cname, argv in commands.items():
            if cname == "train" and kind not in ("/dev/zero", "fifo"):
                continue  # the reading is the same whatever the command
            path = kind if kind.startswith("/") else f"conf-{kind}.toml"

            def extra(cwd: Path, path=path, kind=kind) -> None:
                if not path.startswith("/"):
                    fill(cwd / path, kind)
            cases.append(Case(f"unbounded/config-{kind.strip('/').replace('/', '-')}/{cname}",
                              UNBOUNDED, standard(fx, extra),
                              [refusal([*argv, "--config", path], (path,),
                                       limit=RLIMIT_BYTES, outputs=("new_model",))]))
    for kind in ("/dev/zero", "fifo"):  # the same file named by the environment
        path = kind if kind.startswith("/") else "conf-fifo.toml"
        cases.append(Case(f"unbounded/EBF_CONFIG-{kind.strip('/').replace('/', '-')}/"
                          "registry-list", UNBOUNDED,
                          standard(fx, lambda cwd, p=path: p.startswith("/")
                                   or fill(cwd / p, "fifo")),
                          [refusal(["registry", "list", "REG"], (path, "EBF_CONFIG"),
                                   env={"EBF_CONFIG": path}, limit=RLIMIT_BYTES)]))
    files = {"record": "REG/models/ebf/v0001/version.json",
             "pointer": "REG/models/ebf/current.json",
             "marker": "REG/models/ebf/_ebf_output.json"}
    for fname, rel in files.items():
        for kind in ("huge", "deep", "binary", "fifo"):
            steps = {"registry-list": ["registry", "list", "REG"],
                     "predict": ["predict", "REG", "data", "--out", "pred", "--quiet"]}
            for sname, argv in steps.items():
                if sname == "predict" and fname == "marker" and kind != "fifo":
                    continue
                check = finite_predictions("pred") if sname == "predict" else None
                cases.append(Case(
                    f"unbounded/registry-{fname}-{kind}/{sname}", UNBOUNDED,
                    standard(fx, lambda cwd, rel=rel, kind=kind: fill(cwd / rel, kind)),
                    [refusal(argv, (os.path.basename(rel), "REG"), check=check,
                             limit=RLIMIT_BYTES)]))
    make = ["make-data", "friedman", "--out", "new_data", "--quiet"]
    sizes = {"rows-1e12": ["--rows", "1e12"],
             "rows-1e10-beyond-disk": ["--rows", "1e10", "--partition-rows", "1000000"],
             "features-1e6": ["--rows", "1000", "--features", "1000000"],
             "rows-1e12-features-1e6": ["--rows", "1e12", "--features", "1000000"],
             "partition-rows-1-rows-1e6": ["--rows", "1e6", "--partition-rows", "1"]}
    for sname, extra_argv in sizes.items():
        cases.append(Case(f"unbounded/make-data-{sname}", UNBOUNDED, standard(fx), [refusal(
            [*make, *extra_argv], ("--rows", "--features", "--partition-rows", "rows"),
            limit=RLIMIT_BYTES, outputs=("new_data",))]))
    counts = {
        "train-n-workers-1e5-threads": (["train", *FIT, "--out", "new_model",
                                         "--n-workers", "100000"], {}),
        "train-n-workers-1e5-processes": (["train", *FIT, "--out", "new_model",
                                           "--n-workers", "100000"], PROCESSES),
        "predict-n-workers-1e5-processes": (["predict", "m", "data", "--out", "new_pred",
                                             "--quiet", "--n-workers", "100000"], PROCESSES),
        "make-data-n-workers-1e5-threads": ([*make, "--rows", "1000", "--n-workers",
                                             "100000"], {}),
        "train-threads-per-worker-1e5": (["train", *FIT, "--out", "new_model",
                                          "--threads-per-worker", "100000"], {}),
        "evaluate-n-workers-1e5-threads": (["evaluate", "m", "data", "--quiet",
                                            "--n-workers", "100000"], {}),
        "train-n-estimators-1e9": (["train", "data", "--target", "y", "--n-estimators",
                                    "1000000000", "--out", "new_model", "--quiet"], {}),
        "train-trunk-leaves-1e9": (["train", "data", "--target", "y", "--trunk-leaves",
                                    "1000000000", "--out", "new_model", "--quiet"], {}),
    }
    for cname, (argv, env) in counts.items():
        cases.append(Case(f"unbounded/{cname}", UNBOUNDED, standard(fx), [refusal(
            argv, ("--n-workers", "--threads-per-worker", "--n-estimators", "--trunk-leaves",
                   "workers", "threads", "100000", "1000000000"), env=env, limit=RLIMIT_BYTES,
            outputs=("new_model", "new_data", "new_pred"))]))

    def wide(cwd: Path) -> None:
        cols = friedman(600, SEED + 45)
        rng = np.random.default_rng(SEED + 46)
        extra = {f"w{i:05d}": rng.random(600) for i in range(10_000 - 5)}
        write_parquet(cwd / "wide" / "part-0.parquet", {**extra, **cols})
    for wname, more in (("all-columns", []), ("two-features", ["--features", "x0", "x1"])):
        cases.append(Case(f"unbounded/wide-600x10000/train-{wname}", UNBOUNDED,
                          standard(fx, wide), [Step(
                              ["train", "wide", *SMALL_FIT, "--calibrate", "none", *more,
                               "--out", "new_model", "--quiet"],
                              names=("wide", "columns", "features"), fix=True,
                              limit=RLIMIT_BYTES,
                              check=lambda cwd: model_ok(cwd / "new_model"))]))
    return cases


# -- the exit status around the commit

COMMITTED = {  # command -> (argv, output, validator)
    "train": (["train", *FIT, "--out", "new_model"], "new_model", model_ok),
    "predict": (["predict", "m", "data", "--out", "new_pred", "--quiet"], "new_pred",
                table_ok(600)),
    "make-data": (["make-data", "friedman", "--rows", "20000", "--partition-rows", "2000",
                   "--out", "new_data", "--quiet"], "new_data", table_ok(20000)),
    "evaluate-json": (["evaluate", "m", "data", "--json", "ev.json", "--quiet"], "ev.json",
                      json_ok),
}
#: (trigger, delay): just before the commit (its temporary folder there) and after it
OFFSETS = (("tmp", 0.0), ("out", 0.0), ("out", 0.05), ("out", 0.2))
#: the JSON's temporary file lives too briefly to be seen: every offset is after it
EVALUATE_OFFSETS = (("out", 0.0), ("out", 0.02), ("out", 0.05), ("out", 0.2))


def commit_cases(fx: Fixtures) -> list[Case]:
    cases = []
    for cname, (argv, out, validate) in COMMITTED.items():
        for sig, rc, group in ((signal.SIGTERM, 143, False), (signal.SIGINT, 130, True)):
            for trigger, delay in EVALUATE_OFFSETS if cname == "evaluate-json" else OFFSETS:
                plan = ((sig, "glob", f".{out}.tmp-*", delay) if trigger == "tmp" else
                        (sig, "file", out, delay))
                cases.append(Case(
                    f"commit/{cname}/{signal.Signals(sig).name}-{trigger}+{delay}s", COMMIT,
                    standard(fx), [Step(argv, signal=plan, group_signal=group, expect_rc=rc,
                                        commit=(out, validate))]))
    return cases


# -- outputs checked together


def evaluation_json(rel: str) -> Callable[[Path], str | None]:
    def check(cwd: Path) -> str | None:
        try:
            json.loads((cwd / rel).read_text())
        except (ValueError, OSError) as exc:
            return f"--json {rel} is not the evaluation's JSON: {type(exc).__name__}"
        return None
    return check


def all_of(*checks: Callable[[Path], str | None]) -> Callable[[Path], str | None]:
    def check(cwd: Path) -> str | None:
        return next((w for w in (c(cwd) for c in checks) if w), None)
    return check


def together_cases(fx: Fixtures) -> list[Case]:
    ev = ["evaluate", "m", "data", "--quiet"]
    tr = ["train", *FIT]
    model = lambda rel: lambda cwd: model_ok(cwd / rel)  # noqa: E731
    preds = lambda rel: lambda cwd: table_ok(600)(cwd / rel)  # noqa: E731
    variants = {  # name -> (argv, outputs, check on exit 0, prepare extra)
        "evaluate-json-and-report-same": ([*ev, "--json", "X", "--report", "X"], ("X",),
                                          evaluation_json("X"), None),
        "evaluate-json-and-report-same-overwrite": (
            [*ev, "--json", "X", "--report", "X", "--overwrite"], ("X",),
            evaluation_json("X"), None),
        "evaluate-json-in-report-figures": (
            [*ev, "--json", "r_figures/e.json", "--report", "r.html"], ("r.html",),
            evaluation_json("r_figures/e.json"), None),
        "evaluate-json-is-report-figures": (
            [*ev, "--json", "r_figures", "--report", "r.html"], ("r.html", "r_figures"),
            evaluation_json("r_figures"), None),
        "evaluate-report-inside-json": (
            [*ev, "--json", "e.json", "--report", "e.json/r.html"], ("e.json",),
            evaluation_json("e.json"), None),
        "evaluate-predictions-and-json-same": (
            [*ev, "--predictions", "P", "--json", "P"], ("P",), preds("P"), None),
        "evaluate-predictions-and-report-same": (
            [*ev, "--predictions", "P", "--report", "P"], ("P",), preds("P"), None),
        "evaluate-json-inside-predictions": (
            [*ev, "--predictions", "P", "--json", "P/e.json"], ("P",),
            all_of(preds("P"), evaluation_json("P/e.json")), None),
        "evaluate-report-inside-predictions": (
            [*ev, "--predictions", "P", "--report", "P/r.html"], ("P",), preds("P"), None),
        "evaluate-predictions-are-report-figures": (
            [*ev, "--predictions", "r_figures", "--report", "r.html"], ("r.html", "r_figures"),
            preds("r_figures"), None),
        "evaluate-figures-folder-is-a-file": (
            [*ev, "--json", "e.json", "--report", "r.html"], ("e.json", "r.html"),
            None, lambda cwd: (cwd / "r_figures").write_text("the user's file\n")),
        "train-out-and-baseline-same": (
            [*tr, "--out", "M", "--baseline-out", "M"], ("M",), model("M"), None),
        "train-out-and-baseline-same-overwrite": (
            [*tr, "--out", "M", "--baseline-out", "M", "--overwrite"], ("M",), model("M"),
            None),
        "train-baseline-inside-out": (
            [*tr, "--out", "M", "--baseline-out", "M/base"], ("M",),
            all_of(model("M"), model("M/base")), None),
        "train-out-inside-baseline": (
            [*tr, "--out", "B/m", "--baseline-out", "B"], ("B",),
            all_of(model("B"), model("B/m")), None),
    }
    cases = []
    for name, (argv, outputs, check, extra) in variants.items():
        cases.append(Case(f"together/{name}", TOGETHER, standard(fx, extra), [Step(
            argv, names=tuple(a for a in argv if a in ("X", "P", "M", "B", "e.json", "r.html"))
            + ("r_figures", "--json", "--report", "--out", "--baseline-out", "--predictions"),
            fix=True, check=check, outputs=outputs)]))
    return cases


# -- the registry's trust in a version


def damage(file: Path, how: str) -> None:
    data = file.read_bytes()
    if how == "flipped":  # same size, bytes in the middle of the arrays flipped
        mid = len(data) // 2
        file.write_bytes(data[:mid] + bytes(b ^ 0xFF for b in data[mid: mid + 64])
                         + data[mid + 64:])
    elif how == "truncated":
        file.write_bytes(data[: len(data) // 2])
    else:
        file.unlink()


def trust_cases(fx: Fixtures) -> list[Case]:
    cases = []
    base = "REG/models/ebf"
    pointer = (f"{base}/current.json",)

    def prepare(current: int, history: list[int], broken: int | None, shard: str, how: str):
        def extra(cwd: Path) -> None:
            shutil.rmtree(cwd / "REG")
            shutil.copytree(fx.registry2, cwd / "REG")
            pointer = cwd / base / "current.json"
            data = json.loads(pointer.read_text())
            data.update(version=current, history=history)
            pointer.write_text(json.dumps(data, indent=1))
            if broken:
                damage(cwd / base / f"v{broken:04d}" / "model" / shard, how)
        return standard(fx, extra)

    def served(version: int) -> Callable[[Path], str | None]:
        def check(cwd: Path) -> str | None:
            pointer = json.loads((cwd / base / "current.json").read_text())
            if pointer.get("version") != version:
                return None  # not made current: no harm
            model = cwd / base / f"v{version:04d}" / "model"
            bad = model_ok(model) if (model / "manifest.json").exists() else "no manifest"
            return f"made v{version} current, whose files are damaged: {bad}" if bad else None
        return check

    predict = Step(["predict", "REG", "data", "--out", "served", "--quiet"], role="followup",
                   names=("REG", "shard", ".pack"), check=finite_predictions("served"))
    for shard in ("shards/00000.pack", "shards/00001.pack"):
        for how in ("flipped", "truncated", "missing"):
            tag = f"{shard.split('/')[-1]}-{how}"
            cases.append(Case(f"trust/promote-v2-{tag}", TRUST, prepare(1, [], 2, shard, how), [
                refusal(["registry", "promote", "REG@2"], ("v0002", "00000", "00001", "shard"),
                        check=served(2)), predict], allowed=pointer))
            cases.append(Case(f"trust/rollback-to-v1-{tag}", TRUST,
                              prepare(2, [1], 1, shard, how), [
                refusal(["registry", "rollback", "REG"], ("v0001", "00000", "00001", "shard"),
                        check=served(1)), predict], allowed=pointer))
    cases.append(Case("trust/promote-v2-intact", TRUST, prepare(1, [], None, "", ""), [
        Step(["registry", "promote", "REG@2"], check=served(2)), predict], allowed=pointer))
    cases.append(Case("trust/rollback-to-v1-intact", TRUST, prepare(2, [1], None, "", ""), [
        Step(["registry", "rollback", "REG"], check=served(1)), predict], allowed=pointer))
    return cases


def limits_corpus(fx: Fixtures) -> list[Case]:
    return unbounded_cases(fx) + commit_cases(fx) + together_cases(fx) + trust_cases(fx)
