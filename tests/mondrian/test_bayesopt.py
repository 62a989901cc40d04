"""Mondrian forests as the surrogate of scikit-optimize (regression paper Sec. 5.3)."""

from __future__ import annotations

import numpy as np
import pytest

from mondrian import MondrianForestRegressor
from mondrian.bayesopt import skopt_optimizer

skopt = pytest.importorskip("skopt")


def branin(x):
    x1, x2 = x
    return ((x2 - 5.1 / (4 * np.pi**2) * x1**2 + 5 / np.pi * x1 - 6) ** 2
            + 10 * (1 - 1 / (8 * np.pi)) * np.cos(x1) + 10)


SPACE = [(-5.0, 10.0), (0.0, 15.0)]


@pytest.mark.slow
def test_mondrian_forest_beats_random_search_on_branin():
    """Seeded: over 3 seeds, 50 evaluations each (10 random first), the Mondrian surrogate's
    best value is at least as good as a random search's with the same budget, seed by seed
    and on average (the optimum is 0.398)."""
    ours, random = [], []
    for seed in range(3):
        opt = skopt_optimizer(SPACE, n_initial_points=10, random_state=seed)
        for _ in range(50):
            x = opt.ask()
            opt.tell(x, branin(x))
        ours.append(min(opt.yi))
        rng = np.random.default_rng(seed)
        random.append(min(branin(x) for x in zip(rng.uniform(-5, 10, 50),
                                                   rng.uniform(0, 15, 50), strict=True)))
    assert all(o <= r for o, r in zip(ours, random, strict=True)), (ours, random)
    assert np.mean(ours) < 0.6


def test_the_forest_is_a_skopt_surrogate_with_sampling():
    """The plain Optimizer takes the forest with acq_optimizer="sampling" (it calls fit and
    predict(X, return_std=True)); its default "auto" assumes gradients, which the adapter
    avoids."""
    forest = MondrianForestRegressor(n_estimators=5, min_samples_split=2, random_state=0)
    opt = skopt.Optimizer(SPACE, base_estimator=forest, acq_optimizer="sampling",
                          n_initial_points=3, random_state=0)
    for _ in range(5):
        x = opt.ask()
        opt.tell(x, branin(x))
    assert len(opt.models) == 3 and len(opt.yi) == 5
    with pytest.raises(ValueError, match="acq_optimizer must be 'sampling'"):
        skopt_optimizer(SPACE, acq_optimizer="lbfgs")
