"""The fused scoring pass: every output a scorer asks of a block of Gaussian mixtures, in one
numba pass per row.

Per row, :func:`score_kernel` gathers the live components once and computes the mean and
variance (law of total variance), the quantiles at the asked levels (the safeguarded Newton
solver of :func:`basics.mixture.summarize`), the CDF ``F(y)`` and ``log p(y)`` at the target,
and the CRPS under every PIT map (:func:`basics.crps_kernels.crps_row`): the numbers of
:func:`basics.mixture.summarize`, :meth:`GaussianMixture.cdf`, :meth:`GaussianMixture.logpdf`
and :func:`basics.metrics.crps_many` on the same mixture (the moments, quantiles and CRPS bit
for bit, the CDF and log density to rounding: they sum in another order), without reading the
mixture four times. A row without a target (``y`` NaN) gets its summary only.

Examples
--------
>>> from basics.mixture import GaussianMixture
>>> gm = GaussianMixture([[0.5, 0.5]], [[-1.0, 1.0]], [[1.0, 1.0]])
>>> s = score_mixture(gm, np.array([0.0]), np.array([0.5]), [None])
>>> float(s.mean[0]), float(s.cdf[0]), round(float(s.quantiles[0, 0]), 12)
(0.0, 0.5, 0.0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from numba import njit

from .crps_kernels import crps_row, crps_scratch
from .jit import JIT
from .metrics import crps_quadrature, pit_maps
from .mixture import GaussianMixture, solver_levels
from .mixture_kernels import _ndtr, row_scratch, summary_row
from .pit import PITMap
from .validation import check_scored_targets

__all__ = ["MixtureScores", "score_kernel", "score_mixture"]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


class MixtureScores(NamedTuple):
    """What :func:`score_mixture` returns for every row.

    Attributes
    ----------
    mean, std : ndarray of shape (n_rows,)
    quantiles : ndarray of shape (n_rows, n_levels)
    cdf, logpdf : ndarray of shape (n_rows,)
        ``F(y)`` and ``log p(y)`` (NaN where ``y`` is NaN).
    crps : ndarray of shape (n_rows, n_maps)
        The CRPS under every map (NaN where ``y`` is NaN).
    """

    mean: np.ndarray
    std: np.ndarray
    quantiles: np.ndarray
    cdf: np.ndarray
    logpdf: np.ndarray
    crps: np.ndarray


@njit(**JIT)
def _cdf_logpdf(y, n, cw, cm, cs):  # pragma: no cover - jitted
    """``F(y) = sum_k w_k Phi(z_k)`` and ``log p(y)`` by log-sum-exp (stable far in the
    tails) over one row's ``n`` live components, as :meth:`GaussianMixture.cdf` and
    :meth:`GaussianMixture.logpdf` compute them."""
    c = 0.0
    amax = -np.inf
    for k in range(n):
        z = (y - cm[k]) / cs[k]
        c += cw[k] * _ndtr(z)
        a = math.log(cw[k]) - math.log(cs[k]) - _LOG_SQRT_2PI - 0.5 * z * z
        amax = max(amax, a)
    if not np.isfinite(amax):
        return c, -np.inf
    s = 0.0
    for k in range(n):
        z = (y - cm[k]) / cs[k]
        s += math.exp(math.log(cw[k]) - math.log(cs[k]) - _LOG_SQRT_2PI - 0.5 * z * z - amax)
    return c, amax + math.log(s)


@njit(**JIT)
def score_kernel(w, m, v, y, lv, maps, quad, out):  # pragma: no cover - jitted
    """Mean, variance, quantiles, ``F(y)``, ``log p(y)`` and the CRPS under every map of
    every row of a normalised mixture ``(w, m, v)`` (module docstring), written to ``out``,
    a :class:`MixtureScores` whose ``std`` receives the variance.

    ``lv`` is a :class:`basics.mixture_kernels.Levels` (as :func:`basics.mixture_kernels.
    summary_kernel` takes it), ``maps`` a :class:`basics.crps_kernels.PitMaps`, ``quad`` a
    :class:`basics.crps_kernels.Quadrature`.
    """
    k_max = w.shape[1]
    row = row_scratch(k_max)
    work = crps_scratch(k_max, maps, quad)
    for i in range(w.shape[0]):
        n = summary_row(w, m, v, i, row, lv, out.mean, out.std, out.quantiles)
        yi = y[i]
        if np.isnan(yi):
            out.cdf[i] = np.nan
            out.logpdf[i] = np.nan
            out.crps[i, :] = np.nan
            continue
        out.cdf[i], out.logpdf[i] = _cdf_logpdf(yi, n, row.w, row.m, row.s)
        crps_row(n, out.mean[i], out.std[i], row, yi, maps, quad, work, out.crps[i])


def score_mixture(mixture: GaussianMixture, y: Any, levels: Any,
                  maps: Sequence[PITMap | None]) -> MixtureScores:
    """Every output of the fused pass (module docstring) for every row of ``mixture``.

    Parameters
    ----------
    mixture : GaussianMixture
    y : array-like of shape (n_rows,)
        Targets; NaN for a row that is only summarised.
    levels : array-like of shape (n_levels,)
        Quantile levels in [0, 1] (already checked; may be empty).
    maps : sequence of basics.pit.PITMap or None
        The CRPS is computed under each (None: the mixture itself).

    Returns
    -------
    MixtureScores

    Raises
    ------
    ValueError
        If a target is infinite, or beyond ``±basics.validation.MAX_ABS_TARGET``.
    """
    # writeable: read-only targets (from Parquet) would compile the kernel once more
    y = np.require(y, dtype=np.float64, requirements=("C", "W"))
    if y.shape != (mixture.n_rows,):
        raise ValueError(f"y must have shape ({mixture.n_rows},); got {y.shape}.")
    if np.isinf(y).any():
        raise ValueError(f"y has {int(np.isinf(y).sum())} values that are not finite.")
    check_scored_targets(y)  # a target whose scores would overflow
    lv = solver_levels(np.asarray(levels, dtype=np.float64))
    n = mixture.n_rows
    out = MixtureScores(np.empty(n), np.empty(n), np.empty((n, lv.levels.shape[1])),
                        np.empty(n), np.empty(n), np.empty((n, len(maps))))
    w, m, v = (np.ascontiguousarray(a) for a in (mixture.weights, mixture.means,
                                                 mixture.variances))
    score_kernel(w, m, v, y, lv, pit_maps(maps), crps_quadrature(), out)
    np.sqrt(out.std, out=out.std)  # the kernel wrote the variance there
    return out
