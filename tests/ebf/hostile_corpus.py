"""The corpus of hostile-model tests: every class of the allowlist fit small, saved, and
the worker subprocess (``tests/ebf/hostile_worker.py``) that loads and predicts crafted copies.

``test_hostile_models`` (crafted files, the fuzz test) and ``test_load_bounds`` (forged
floats against ``basics/bounds.py``) share it: a model added here is crafted by both.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

import ebf
import mondrian
from ebf.branches import ConstantBranch
from ebf.trunk import Trunk
from tests.ebf.model_helpers import save

__all__ = ["MODEL_NAMES", "Worker", "data", "fit_models", "save_corpus", "warm_worker"]

ROOT = Path(__file__).resolve().parents[2]

#: Seconds a worker may take for its first answer (imports, kernels from numba's cache) and
#: for any later case (milliseconds when nothing is wrong; only a hang reaches it).
STARTUP_TIMEOUT = 170.0
CASE_TIMEOUT = 20.0


# ------------------------------------------------------------------------------ the worker


class Worker:
    """A ``tests/ebf/hostile_worker.py`` subprocess, restarted after a crash or a hang."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.log = directory / "outcomes.jsonl"
        self.started = 0
        self._start()

    def _start(self) -> None:
        env = {**os.environ,
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                           os.environ.get("PYTHONPATH")]))}
        self.stderr = open(self.directory / f"worker{self.started}.err", "w")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-X", "faulthandler", "-m", "tests.ebf.hostile_worker", str(self.log)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True,
            cwd=ROOT, env=env,
        )
        self.started += 1
        self.fresh = True
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, args=(self.proc, self.lines), daemon=True).start()

    @staticmethod
    def _read(proc: subprocess.Popen, lines: queue.Queue) -> None:
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    def run(self, case: str, model: Path, X: Path) -> dict:
        """``{"outcome", "detail"}`` of one case; ``crash`` / ``hang`` from this side."""
        timeout = STARTUP_TIMEOUT if self.fresh else CASE_TIMEOUT
        self.fresh = False
        try:
            self.proc.stdin.write(json.dumps({"case": case, "model": str(model),
                                              "X": str(X)}) + "\n")
            self.proc.stdin.flush()
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            self.proc.kill()
            self.proc.wait()
            self._start()
            return {"outcome": "hang", "detail": f"no answer within {timeout:.0f} s"}
        except BrokenPipeError:
            line = None
        if line is None:
            code = self.proc.wait()
            err = Path(self.stderr.name).read_text()[-2000:]
            self._start()
            how = f"signal {-code}" if code < 0 else f"exit code {code}"
            return {"outcome": "crash", "detail": f"the worker died by {how}:\n{err}"}
        return json.loads(line)

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


# ------------------------------------------------------------------------------ the models


def data(n: int = 240, d: int = 3, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, d))
    y = np.sin(X).sum(axis=1) + 0.1 * rng.normal(size=n)
    return X, y, (y > 0).astype(int) + (X[:, 0] > 1)


def _with_constant_branch(model: Any, X: Any, y: np.ndarray) -> Any:
    """Replace the smallest branch by the :class:`ConstantBranch` a tiny leaf would get."""
    leaf = model.apply(X)
    b = int(np.argmin(np.bincount(leaf, minlength=len(model.branches_))))
    task = "classification" if hasattr(model, "classes_") else "regression"
    codes = np.searchsorted(model.classes_, y) if task == "classification" else y
    model.branches_[b] = ConstantBranch.from_rows(
        codes[leaf == b], None, task, len(getattr(model, "classes_", [0])))
    return model


def fit_models() -> dict[str, tuple[Any, Any]]:
    """Every class of the allowlist (EBF with bayesian and mondrian branches and a
    ConstantBranch; one model on a DataFrame with a categorical column; compact Mondrian
    forests; BART; SMC trees; Mondrian kernel ridge; a recalibrated forest), fit small."""
    X, y, c = data()
    frame = pd.DataFrame({"a": X[:, 0], "b": X[:, 1],
                          "colour": np.where(X[:, 2] > 0, "red", "blue")})
    small = dict(n_estimators=2, random_state=0)
    kernel = dict(n_mondrians=3, n_widths=4, max_features=40, random_state=0)
    trunk = dict(small, trunk_max_leaves=3)
    EBFR, EBFC = ebf.EmpiricalBayesianForestRegressor, ebf.EmpiricalBayesianForestClassifier
    MFR, MFC = mondrian.MondrianForestRegressor, mondrian.MondrianForestClassifier
    return {
        "bf_reg": (ebf.BayesianForestRegressor(**small).fit(X, y), X),
        "bf_clf": (ebf.BayesianForestClassifier(**small).fit(X, c), X),
        "ebf_reg": (_with_constant_branch(EBFR(**trunk).fit(X, y), X, y), X),
        "ebf_clf": (_with_constant_branch(EBFC(**trunk).fit(frame, c), frame, c), frame),
        "ebf_reg_mondrian": (EBFR(branch="mondrian", **trunk).fit(X, y), X),
        "ebf_clf_mondrian": (EBFC(branch="mondrian", **trunk).fit(X, c), X),
        "ssf_reg": (ebf.SubsampleForestRegressor(n_subsamples=2, **small).fit(X, y), X),
        "ssf_clf": (ebf.SubsampleForestClassifier(n_subsamples=2, **small).fit(X, c), X),
        "trunk": (Trunk(max_leaves=4).fit(X, y), X),
        "trunk_clf": (Trunk(max_leaves=4, task="classification").fit(X, c), X),
        "mf_reg": (MFR(**small).fit(X, y), X),
        "mf_clf": (MFC(**small).fit(X, c), X),
        # compact (predict-only) forests, one updated online so its trees were re-ordered
        "mf_reg_compact": (MFR(**small).fit(X[:160], y[:160]).partial_fit(
            X[160:], y[160:]).compact(), X),
        "mf_clf_compact": (MFC(**small).fit(X, c).compact(), X),
        "ebf_reg_mondrian_compact": (EBFR(branch="mondrian", **trunk).fit(X, y).compact(), X),
        "constant": (ConstantBranch.from_rows(y, None, "regression", 1), X),
        "bart_reg": (ebf.BARTRegressor(n_trees=3, n_iter=12, burn_in=4, thin=2,
                                       random_state=0).fit(X, y), X),
        "smc_reg": (ebf.SMCTreeRegressor(n_particles=5, n_islands=2, random_state=0).fit(X, y),
                    X),
        "smc_clf": (ebf.SMCTreeClassifier(n_particles=5, n_islands=2, random_state=0).fit(X, c),
                    X),
        "mk_reg": (mondrian.MondrianKernelRegressor(**kernel).fit(X, y), X),
        "mk_clf": (mondrian.MondrianKernelClassifier(**kernel).fit(X, c), X),
        # a recalibration map moved by adaptive updates: levels outside [0, 1]
        "bf_reg_recal": (ebf.BayesianForestRegressor(**small).fit(X[:150], y[:150]).recalibrate(
            X[150:], y[150:]).update_recalibration(X[:60], y[:60] + 3.0, step=1.0), X),
    }


MODEL_NAMES = ("bf_reg", "bf_clf", "ebf_reg", "ebf_clf", "ebf_reg_mondrian",
               "ebf_clf_mondrian", "ssf_reg", "ssf_clf", "trunk", "trunk_clf", "mf_reg",
               "mf_clf", "mf_reg_compact", "mf_clf_compact", "ebf_reg_mondrian_compact",
               "constant", "bart_reg", "smc_reg", "smc_clf", "mk_reg", "mk_clf",
               "bf_reg_recal")


def save_corpus(root: Path) -> dict[str, tuple[Path, Path]]:
    """``name -> (pristine model directory, rows to predict)`` of :func:`fit_models`, saved
    under ``root`` (also the corpus of ``test_load_bounds``)."""
    out = {}
    for name, (model, X) in fit_models().items():
        rows = root / f"{name}.X"
        if isinstance(X, pd.DataFrame):
            rows = rows.with_suffix(".parquet")
            X.iloc[:50].to_parquet(rows)
        else:
            rows = rows.with_suffix(".npy")
            np.save(rows, X[:50], allow_pickle=False)
        out[name] = (save(model, root / name), rows)
    return out


def warm_worker(w: Worker, models: dict[str, tuple[Path, Path]]) -> Worker:
    """``w`` after every pristine model of the corpus loaded and predicted finite values
    (which compiles every kernel once)."""
    for name, (path, rows) in models.items():
        result = w.run(f"pristine {name}", path, rows)
        assert result["outcome"] == "ok", (name, result)
    return w
