"""Subprocess side of ``tests/ebf/test_hostile_models.py``: load crafted models and predict.

A crafted model file that slipped past validation could crash the interpreter (a numba
kernel reading out of bounds) or hang it (a cycle in a nogil kernel), so every case runs
here, in a separate process, and pytest survives to name the case. Protocol, one JSON object
per line: the parent writes ``{"case", "model", "X"}`` to stdin (a model directory and an
``.npy`` file of rows); the worker loads the model with ``ebf.artifact.load``, predicts, and
writes ``{"case", "outcome", "detail"}`` to stdout, and appends it to the log file given as
the first argument, as it goes. Rows come as ``.npy`` or, for models fit on a DataFrame,
``.parquet``. Outcomes:

``refused``
    ``load`` or a prediction raised :class:`ebf.artifact.ModelFormatError` (``detail``: its
    message);
``ok``
    every prediction method returned the right shape and finite values (a log-density may
    be ``-inf`` where it underflows, e.g. off a component of tiny variance, never NaN or
    ``+inf``);
``wrong``
    another exception, or a prediction of the wrong shape or with non-finite values.

A case that kills the worker or never answers is the parent's to report. Kernels are
compiled once per worker (the parent sends the pristine models first).
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any

import numpy as np


def predictions(model: Any, X: np.ndarray) -> list[tuple[str, np.ndarray, tuple]]:
    """``(method, output, expected shape)`` of every prediction method of ``model``."""
    from ebf.branches import ConstantBranch
    from ebf.trunk import Trunk

    n = X.shape[0]
    if isinstance(model, Trunk):
        return [("apply", model.apply(X), (n,))]
    if isinstance(model, ConstantBranch):
        if model.task == "regression":
            mean, std = model.predict(X, return_std=True)
            return [("predict", mean, (n,)), ("predict std", std, (n,)),
                    *_density(model, X, mean)]
        return [("predict_proba", model.predict_proba(X), (n, model.value_.size))]
    if hasattr(model, "predict_proba"):
        proba = model.predict_proba(X)
        return [("predict_proba", proba, (n, len(model.classes_))),
                ("predict", model.predict(X), (n,))]
    mean, std = model.predict(X, return_std=True)
    out = [("predict", model.predict(X), (n,)), ("predict mean", mean, (n,)),
           ("predict std", std, (n,))]
    if hasattr(model, "predict_quantiles"):
        out.append(("predict_quantiles", model.predict_quantiles(X, (0.1, 0.9)), (n, 2)))
    if hasattr(model, "predict_distribution"):
        out += _density(model, X, mean)
    return out


def _density(model: Any, X: np.ndarray, mean: np.ndarray) -> list[tuple[str, np.ndarray, tuple]]:
    """The predictive distribution's median and its log-density there and at the mean."""
    dist = model.predict_distribution(X)
    median = dist.quantile(0.5)
    n = X.shape[0]
    return [("distribution median", median, (n,)),
            ("logpdf at the median", dist.logpdf(median), (n,)),
            ("logpdf at the mean", dist.logpdf(mean), (n,))]


def run_case(model_dir: str, x_file: str) -> tuple[str, str]:
    """Outcome and detail of loading one model directory and predicting ``X``."""
    from ebf.artifact import ModelFormatError, load
    from ebf.trunk import Trunk

    if x_file.endswith(".parquet"):
        import pandas as pd

        X = pd.read_parquet(x_file)
    else:
        X = np.load(x_file, allow_pickle=False)
    try:
        model = load(model_dir)
        names = getattr(model, "feature_names_in_", None)
        if names is not None and X.shape[1] == len(names):
            # the rows the model asks for: a renamed column is a valid model, not a finding
            X = X.set_axis([str(c) for c in names], axis=1)
        outputs = predictions(model, X)
    except ModelFormatError as exc:
        return "refused", f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # noqa: BLE001 - any other exception is the finding
        tb = traceback.format_exc(limit=-3)
        return "wrong", f"{type(exc).__name__}: {exc}\n{tb}"
    for method, out, shape in outputs:
        out = np.asarray(out)
        if out.shape != shape:
            return "wrong", f"{method} has shape {out.shape}, expected {shape}"
        if method.startswith("logpdf"):  # -inf where the density underflows
            out = np.where(out == -np.inf, 0.0, out)
        if out.dtype.kind == "f" and not np.isfinite(out).all():
            return "wrong", f"{method} has {int((~np.isfinite(out)).sum())} non-finite values"
        if isinstance(model, Trunk) and not ((out >= 0) & (out < model.n_leaves_)).all():
            return "wrong", f"apply returned leaves outside [0, {model.n_leaves_})"
    return "ok", ""


def main(argv: list[str]) -> int:
    log = open(argv[1], "a", encoding="utf-8") if len(argv) > 1 else None
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    sys.stdout = sys.stderr  # only protocol lines go to the real stdout
    for line in sys.stdin:
        request = json.loads(line)
        outcome, detail = run_case(request["model"], request["X"])
        answer = json.dumps({"case": request["case"], "outcome": outcome, "detail": detail})
        if log is not None:
            log.write(answer + "\n")
            log.flush()
        out.write(answer + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
