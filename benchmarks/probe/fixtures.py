"""The probe's fixtures: the data, one saved model per type and a registry, written by the
checkout under test, and the untouched models' predictions.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from benchmarks.probe.cases import MODEL_TYPES, Fixtures, Step
from benchmarks.probe.files import SEED, ModelFiles, write_dataset
from benchmarks.probe.running import Run

# fits and saves a BayesianForestRegressor (no CLI command trains one alone): data, output
FIT_FOREST = """
import sys
import pyarrow.parquet as pq
from ebf import BayesianForestRegressor
from ebf import save
frame = pq.read_table(sys.argv[1]).to_pandas()
model = BayesianForestRegressor(n_estimators=3, random_state=0)
save(model.fit(frame.drop(columns="y"), frame["y"].to_numpy()), sys.argv[2])
"""

# ----------------------------------------------------------------------------- fixtures


def build_fixtures(run: Run, work: Path, reuse: bool,
                   types: tuple[str, ...] = MODEL_TYPES) -> Fixtures:
    """Data (written here, the same for every checkout), the models of ``types`` and the
    registries (by the checkout under test), and the untouched models' predictions; ``reuse``:
    those of an earlier run on the same commit, if complete."""
    root = work / "fixtures"
    models = {m: root / "models" / m for m in types}
    pristine = {m: root / "pred" / m for m in types}
    stamp = {"code": str(run.code), "commit": git(run.code, "rev-parse", "HEAD"),
             "dirty": git(run.code, "status", "--porcelain", "--untracked-files=no"),
             "types": list(types)}
    done = root / "fixtures.json"
    if not (reuse and done.is_file() and json.loads(done.read_text()) == stamp):
        make_fixtures(run, root, models, pristine)
        done.write_text(json.dumps(stamp))
    registry_hash = json.loads((root / "REG/models/ebf/v0001/model/manifest.json")
                               .read_text())["model_hash"]
    return Fixtures(root, models, root / "REG", registry_hash, pristine, root / "REG2")


def make_fixtures(run: Run, root: Path, models: dict[str, Path], pristine: dict[str, Path]
                  ) -> None:
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    write_dataset(root / "data", 600, SEED)
    if "ebf_mondrian" in models:  # the issue-26 signal cases' data
        write_dataset(root / "big", 200_000, SEED + 9, files=4)

    def cli(*argv: str) -> None:
        res = run.step(Step(list(argv)), root, root / f"setup-{argv[0]}-{len(os.listdir(root))}")
        if res["rc"] not in (0, 10):
            raise SystemExit(f"fixture step {' '.join(argv)} failed ({res['rc']}):\n"
                             f"{res['stderr'][-3000:]}")

    fit = ["data", "--target", "y", "--n-estimators", "3", "--trunk-leaves", "2", "--quiet"]
    cli("train", *fit, "--branch", "bayesian", "--calibrate", "recent", "--out",
        str(models["ebf_bayesian"]))
    for branch in [b for b in ("mondrian", "smc", "bart") if f"ebf_{b}" in models]:
        cli("train", *fit, "--branch", branch, "--calibrate", "none", "--out",
            str(models[f"ebf_{branch}"]))
    if "bf" in models:
        res = subprocess.run([sys.executable, "-c", FIT_FOREST, str(root / "data"),
                              str(models["bf"])], cwd=root, env=run.env({}),
                             capture_output=True, text=True, timeout=run.timeout * 3)
        if res.returncode:
            raise SystemExit(f"fitting the Bayesian forest failed:\n{res.stderr[-3000:]}")
    cli("retrain", "REG", *fit)
    # issue 45's registry trust: a second version (the gate keeps v1 current) to promote
    shutil.copytree(root / "REG", root / "REG2")
    cli("retrain", "REG2", "data", "--quiet")
    for m in models:
        cli("predict", str(models[m]), "data", "--out", str(pristine[m]), "--quiet")
    for path in models.values():  # the forger must write what ebf writes, byte for byte
        files = ModelFiles(path)
        for name, pack in files.packs.items():
            if pack.encode() != (path / name).read_bytes():
                raise SystemExit(f"the pack writer here differs from ebf's for {path / name}")



def git(code: Path, *args: str) -> str:
    res = subprocess.run(["git", "-C", str(code), *args], capture_output=True, text=True)
    return res.stdout.strip() if res.returncode == 0 else "unknown"
