"""Evaluation results built by hand, for the report tests (``test_report``,
``test_report_browser``).

Gaussian predictions of data whose noise is known, scored with NumPy: a calibrated model (the
true scale) and a miscalibrated one (twice the true scale: intervals too wide, as the
flight-delay demo's are); :func:`run_results` adds what :func:`pipelines.report.evaluate.
evaluate` says of the run (model facts, the data, per-branch scores).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.special import ndtr, ndtri

CALIBRATION_LEVELS = np.round(np.arange(1, 10) * 0.1, 2)
RELIABILITY_LEVELS = np.round(np.arange(1, 20) * 0.05, 2)
#: The model hash :func:`run_results` gives its EBF.
EBF_HASH = "3f1c0a9b2e7d" + "0" * 52


def _coverage_table(u: np.ndarray, levels: np.ndarray) -> pd.DataFrame:
    # y is inside the central interval of level a iff its PIT is within a/2 of 1/2.
    observed = np.array([np.mean(np.abs(u - 0.5) <= a / 2) for a in levels])
    return pd.DataFrame({"level": levels, "observed": observed,
                         "observed_minus_nominal": observed - levels})


def _one_sided_table(u: np.ndarray, levels: np.ndarray) -> pd.DataFrame:
    observed = np.array([np.mean(u <= q) for q in levels])  # y below its q quantile
    return pd.DataFrame({"level": levels, "observed": observed,
                         "observed_minus_nominal": observed - levels})


def gaussian_result(y: np.ndarray, mean: np.ndarray, std: np.ndarray) -> dict:
    """The result dict of pipelines.report.evaluate.evaluate for Gaussian predictions, by hand."""
    z = (y - mean) / std
    u = ndtr(z)
    pdf = np.exp(-0.5 * z**2) / math.sqrt(2 * math.pi)
    crps = std * (z * (2 * u - 1) + 2 * pdf - 1 / math.sqrt(math.pi))  # Gneiting & Raftery
    calibration = _coverage_table(u, CALIBRATION_LEVELS)
    groups = np.array_split(np.argsort(std, kind="stable"), 10)
    width = 2 * ndtri(0.95) * std
    return {
        "task": "regression",
        "target": "y",
        "model_class": "synthetic.Gaussian",
        "seconds": 0.0,
        "n": int(y.size),
        "rmse": float(np.sqrt(np.mean((y - mean) ** 2))),
        "nlpd": float(np.mean(0.5 * z**2 + np.log(std) + 0.5 * math.log(2 * math.pi))),
        "crps": float(np.mean(crps)),
        "calibration": calibration,
        "coverage": dict(zip(calibration["level"].tolist(), calibration["observed"].tolist(),
                             strict=True)),
        "max_calibration_gap": float(np.max(np.abs(calibration["observed_minus_nominal"]))),
        "pit_histogram": np.histogram(u, bins=20, range=(0.0, 1.0))[0].tolist(),
        "reliability": _coverage_table(u, RELIABILITY_LEVELS),
        "one_sided": _one_sided_table(u, RELIABILITY_LEVELS),
        "max_one_sided_gap": float(np.max(np.abs(
            [np.mean(u <= q) - q for q in RELIABILITY_LEVELS]))),
        "pit_distance": float(np.max(np.abs(np.sort(u) - (np.arange(u.size) + 0.5) / u.size))
                              + 0.5 / u.size),
        "interval_score_90": float(np.mean(width + 20 * (
            np.maximum(mean - width / 2 - y, 0) + np.maximum(y - mean - width / 2, 0)))),
        "width_error": pd.DataFrame({
            "n": [g.size for g in groups],
            "mean_width": [width[g].mean() for g in groups],
            "mean_abs_error": [np.abs(y - mean)[g].mean() for g in groups],
        }),
    }


def synthetic_data(n: int = 6000, seed: int = 20240611) -> tuple[np.ndarray, ...]:
    """``(y, mean, scale)``: y ~ N(mean, scale^2), mean and scale rising with x."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(size=n)
    mean, scale = 10 * x, 0.5 + 2 * x
    return mean + scale * rng.standard_normal(n), mean, scale


def synthetic_results() -> dict[str, dict]:
    """A calibrated model and one whose intervals are twice too wide."""
    y, mean, scale = synthetic_data()
    calibrated = gaussian_result(y, mean, scale)
    calibrated["calibrated"] = True
    wide = gaussian_result(y, mean, 2 * scale)
    wide["calibrated"] = False
    return {"calibrated": calibrated, "too wide": wide}


def run_results(branches: int = 4) -> dict[str, dict]:
    """As the demo reports them: an EBF that recalibrates (its ``uncalibrated`` scores are
    twice too wide) with ``branches`` branches, and an SSF, with the run's facts."""
    y, mean, scale = synthetic_data()
    ebf = gaussian_result(y, mean, scale)
    rows = np.array_split(np.arange(y.size), branches)
    ebf.update(
        calibrated=True, uncalibrated=gaussian_result(y, mean, 2 * scale),
        model="models/ebf", model_hash=EBF_HASH,
        model_class="ebf.EmpiricalBayesianForestRegressor", data="data/test", seconds=12.5,
        model_info={"version": "ebf-model/2 ebf/0.1.0", "bytes": 2_500_000,
                    "learner": "mondrian", "n_estimators": 10, "n_parts": branches,
                    "features": [f"x{i}" for i in range(40)], "trained_on": "data/train",
                    "training_rows": 24_000, "trained_utc": "2026-01-02T03:04:05Z",
                    "fit_seconds": 7.25, "calibration": "recent"},
        branches=pd.DataFrame({
            "branch": np.arange(branches), "training_rows": [len(r) * 4 for r in rows],
            "bytes": [625_000] * branches, "n": [len(r) for r in rows],
            "rmse": [float(np.sqrt(np.mean((y[r] - mean[r]) ** 2))) for r in rows],
            "nlpd": [1.5] * branches, "crps": [0.8] * branches,
            "coverage_90": [0.9] * (branches - 1) + [0.5]}))
    ssf = gaussian_result(y, mean, 1.5 * scale)
    ssf.update(calibrated=False, model="models/ssf", model_hash="9" * 64,
               model_class="ebf.SubsampleForestRegressor", data="data/test", seconds=30.0,
               model_info={"version": "ebf-model/2 ebf/0.1.0", "bytes": 9_000_000,
                           "learner": "mondrian", "n_estimators": 10, "n_parts": branches,
                           "features": [f"x{i}" for i in range(40)],
                           "trained_on": "data/train", "training_rows": 24_000,
                           "trained_utc": "2026-01-02T03:04:05Z", "fit_seconds": 9.5,
                           "calibration": "none"})
    return {"EBF": ebf, "SSF": ssf}
