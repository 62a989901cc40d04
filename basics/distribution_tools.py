"""What every predictive distribution of :mod:`basics` shares beyond its own CDF: the
central interval from one quantile call, and the uniform draws its samplers start from
(:class:`basics.mixture.GaussianMixture`, :class:`basics.pit.RecalibratedDistribution`)."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils import check_random_state

from .levels import check_levels

__all__ = ["central_interval", "uniform_draws"]


def central_interval(dist: Any, level: Any) -> tuple[np.ndarray, np.ndarray]:
    """``[Q((1 - level) / 2), Q((1 + level) / 2)]`` from ``dist.quantile`` (any distribution
    of :mod:`basics`): one quantile call for all levels."""
    lv = check_levels(level, "level")
    flat = np.atleast_1d(lv)
    qs = dist.quantile(np.concatenate([(1 - flat) / 2, (1 + flat) / 2]))
    lower, upper = qs[:, : flat.size], qs[:, flat.size :]
    if lv.ndim == 0:
        return lower[:, 0], upper[:, 0]
    return lower, upper


def uniform_draws(random_state: Any, n_rows: int, n_samples: int) -> tuple[Any, np.ndarray]:
    """``(rng, U)``: the generator of ``random_state`` (a Generator as it is, anything else
    through ``sklearn.utils.check_random_state``) and its first draws ``U(0, 1)`` of shape
    ``(n_rows, n_samples)``, the start of every sampler of :mod:`basics`."""
    n_samples = int(n_samples)
    if n_samples < 0:
        raise ValueError(f"n_samples must be >= 0; got {n_samples}.")
    rng = (random_state if isinstance(random_state, np.random.Generator)
           else check_random_state(random_state))
    shape = (n_rows, n_samples)
    return rng, rng.random(shape) if isinstance(rng, np.random.Generator) else (
        rng.random_sample(shape))
