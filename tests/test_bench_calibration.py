"""The scores that benchmarks/bench_calibration.py computes itself (the peers' side)."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.bench_calibration import LEVELS, coverage_gaps, step_crps


def _crps_by_integration(y: float, atoms: np.ndarray) -> float:
    """Exact integral of (F(t) - 1{t >= y})^2 for the step CDF of equally weighted atoms:
    both functions are constant between consecutive breakpoints."""
    points = np.sort(np.append(atoms, y))
    mid = (points[:-1] + points[1:]) / 2
    F = np.searchsorted(np.sort(atoms), mid, side="right") / atoms.size
    return float(np.sum((F - (mid >= y)) ** 2 * np.diff(points)))


def test_step_crps_matches_the_integral_of_the_squared_cdf_difference():
    rng = np.random.default_rng(3)
    atoms = rng.standard_t(3, size=57)
    loc, scale = rng.normal(size=40) * 5, rng.gamma(2.0, size=40)
    y = loc + scale * rng.standard_t(3, size=40) * 1.5
    y[:3] = loc[:3] + scale[:3] * np.array([atoms.min() - 1, atoms.max() + 1, atoms[5]])
    expected = np.mean([_crps_by_integration(y[i], loc[i] + scale[i] * atoms)
                        for i in range(y.size)])
    assert step_crps(y, loc, scale, atoms) == pytest.approx(expected, rel=1e-12)


def test_step_crps_matches_crepes():
    import crepes
    import crepes.base as crepes_base

    rng = np.random.default_rng(4)
    residuals = rng.normal(size=200) * 3
    cps = crepes.ConformalPredictiveSystem().fit(residuals)
    y_hat = rng.normal(size=50)
    y = y_hat + rng.normal(size=50) * 3
    cpds = cps.predict_cpds(y_hat)
    expected = crepes_base.calculate_crps(cpds, cps.alphas, np.ones(50), y)
    assert step_crps(y, y_hat, np.ones(50), cps.alphas) == pytest.approx(expected, rel=1e-10)


def test_coverage_gaps_counts_the_closed_intervals():
    y = np.array([0.0, 1.0, 2.0, 3.0])
    lower = np.tile(np.array([[0.0], [0.5], [2.5], [3.0]]), (1, LEVELS.size))
    upper = np.tile(np.array([[0.0], [0.9], [2.9], [4.0]]), (1, LEVELS.size))
    np.testing.assert_allclose(coverage_gaps(y, lower, upper), 0.5 - LEVELS)
