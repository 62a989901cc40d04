"""Bayesian backfitting MCMC for BART (thesis Alg. 4.1), one loop for the three tree samplers.

The model (Sec. 4.2): ``y = sum_m g(x; T_m, mu_m) + e``, ``e ~ N(0, sigma^2)``, with
Chipman et al.'s (2010) scaling and priors:

- labels shifted and scaled to ``[-0.5, 0.5]`` (:func:`scale_target`), leaf means
  ``mu ~ N(0, sigma_mu^2)`` with ``sigma_mu = 0.5 / (k sqrt(M))`` (eq. 4.5);
- ``sigma^2 ~ IG(nu / 2, nu lambda / 2)`` with ``lambda`` such that ``P(sigma < sigma_hat) = q``
  (:func:`noise_prior`; ``sigma_hat`` from a least-squares fit, :func:`sigma_hat2`);
- trees from the prior of eq. (3.3)-(3.4) with ``alpha_s``, ``beta_s``.

One iteration (:func:`_sweep`, a single numba call): draw sigma^2 from its inverse-gamma
conditional given the residual (line 4); then for every tree m, form the residual R_m of
eq. (4.7) by adding the tree's own fit back to the running residual, update T_m given R_m
(line 7: the conditional SMC of :mod:`.pgbart`, or one CGM / GrowPrune move of
:mod:`.mcmc`), draw the leaf means from their Gaussian conditional (line 8) and subtract
the new fit. The chain keeps every row's leaf in every tree, so R_m is one pass over the
rows with no descent: the work per tree is O(rows) (the residual updated) plus the
sampler's: O(C x rows of the split nodes) for PG, O(rows of the moved node x D) for a move
(whose tree's rows are partitioned first, O(rows x depth)). Trees live in slot arrays of
one capacity (grown on demand); PG and the moves keep them breadth first.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit
from scipy import stats

from basics.flat_tree import INDEX, NO_NODE
from basics.jit import JIT

from ._likelihood import NORMAL
from ._pgbart import (
    DEP,
    FEAT,
    LEFT,
    PAR,
    RIGHT,
    THR,
    PGWork,
    csmc,
    grow_slots,
    particle_tree,
    pg_workspace,
)
from ._records import Data, Model, Tree, small_scratch
from ._trees import _partition
from .mcmc import SAMPLERS, UNIFORMS_PER_MOVE, mh_step

__all__ = ["BackfitResult", "SAMPLER_NAMES", "backfit", "noise_prior", "scale_target",
           "sigma_hat2"]

logger = logging.getLogger(__name__)

PG, CGM, GROWPRUNE = range(3)
#: Sampler name -> code of the tree update in :func:`_sweep`.
SAMPLER_NAMES = {"pg": PG, "cgm": CGM, "growprune": GROWPRUNE}

#: Forest slot arrays: integer fields (feature, children, parent, depth; the particle
#: layout of :mod:`.pgbart` without the row segment) and float fields (threshold, mean).
N_TREE_INTS = 5
MU = 1

#: dtype of the leaf slot of every row in every tree (:class:`SweepWork`): 4 bytes a row a
#: tree. A tree over N rows has fewer than 2N slots, and a fit takes fewer than 2^30 rows.
LEAF = np.int32

#: A sigma_hat^2 below this (scaled units, labels span 1) is taken as this: a target that
#: a linear fit reproduces exactly would otherwise give an inverse-gamma prior of scale 0.
MIN_SIGMA_HAT2 = 1e-8


def scale_target(y: np.ndarray) -> tuple[np.ndarray, float, float]:
    """``(y_scaled, center, scale)`` with ``y = center + scale * y_scaled`` and ``y_scaled``
    spanning ``[-0.5, 0.5]`` (Sec. 4.2.4); a constant target has scale 1."""
    lo, hi = float(np.min(y)), float(np.max(y))
    center = 0.5 * (lo + hi)
    scale = hi - lo if hi > lo else 1.0
    return (y - center) / scale, center, scale


def sigma_hat2(X: np.ndarray, y: np.ndarray) -> float:
    """The overestimate sigma_hat^2 of the noise variance (Chipman et al. 2010, Sec. 2.2.4).

    The residual variance of a least-squares fit of ``y`` on ``[1, X]`` if there are more
    rows than columns plus one, else the variance of ``y``; at least ``MIN_SIGMA_HAT2``.
    """
    n, d = X.shape
    if n > d + 1:
        A = np.column_stack([np.ones(n), X])
        coef = np.linalg.lstsq(A, y, rcond=None)[0]
        s2 = float(np.sum((y - A @ coef) ** 2) / (n - d - 1))
    else:
        s2 = float(np.var(y))
    return max(s2, MIN_SIGMA_HAT2) if math.isfinite(s2) else max(float(np.var(y)),
                                                                  MIN_SIGMA_HAT2)


def noise_prior(s2_hat: float, nu: float, q: float) -> float:
    """lambda of ``sigma^2 ~ IG(nu / 2, nu lambda / 2)`` with ``P(sigma^2 < s2_hat) = q``.

    ``nu lambda / sigma^2`` is chi-square with ``nu`` degrees of freedom, so
    ``lambda = s2_hat * chi2.ppf(1 - q, nu) / nu`` (Chipman et al. 2010, Sec. 2.2.4).
    """
    return float(s2_hat * stats.chi2.ppf(1.0 - q, nu) / nu)


@dataclass
class BackfitResult:
    """What :func:`backfit` returns (scaled units: labels span ``[-0.5, 0.5]``).

    Attributes
    ----------
    draws : list of tuple
        Per kept iteration ``(feature, threshold, left, right, value, n_nodes)``: the trees
        back to back (children as global slots), ``value`` the leaf means (0 inside), and
        nodes per tree.
    sigma2 : ndarray of shape (n_kept,)
        sigma^2 of the kept iterations.
    loglik : ndarray of shape (n_iter,)
        log p(Y | trees, means, sigma^2) of every iteration (scaled labels).
    sigma2_trace : ndarray of shape (n_iter,)
    """

    draws: list
    sigma2: np.ndarray
    loglik: np.ndarray
    sigma2_trace: np.ndarray


def backfit(X: np.ndarray, y: np.ndarray, *, n_trees: int, sampler: str, n_particles: int,
            alpha_s: float, beta_s: float, sigma_mu2: float, nu: float, lam: float,
            n_iter: int, burn_in: int, thin: int,
            rng: np.random.Generator, ess_threshold: float = 1.0) -> BackfitResult:
    """Run Algorithm 4.1 on checked, scaled inputs.

    Parameters
    ----------
    X : ndarray of shape (n_rows, n_features), float64, finite
    y : ndarray of shape (n_rows,)
        Scaled labels (:func:`scale_target`).
    n_trees : int
        M.
    sampler : {"pg", "cgm", "growprune"}
    n_particles : int
        C of the conditional SMC (PG only).
    alpha_s, beta_s : float
        Tree prior, eq. (3.3).
    sigma_mu2 : float
        Prior variance of a leaf mean (eq. 4.5, mean 0).
    nu, lam : float
        Inverse-gamma prior of sigma^2 (:func:`noise_prior`).
    n_iter, burn_in, thin : int
        Iterations in all; the first ``burn_in`` are not kept, then every ``thin``-th is.
    rng : numpy Generator
        Source of one seed of numba's generator per iteration.
    ess_threshold : float in (0, 1], default 1.0
        PG only: resample when the weights' ESS is at most ``ess_threshold * C``
        (:func:`~.pgbart.conditional_smc`); 1.0 at every stage, as Alg. 4.2.

    Returns
    -------
    BackfitResult
    """
    M = int(n_trees)
    cap = 8
    T_int = np.zeros((M, N_TREE_INTS, cap), INDEX)
    T_int[:, FEAT] = NO_NODE
    T_int[:, LEFT] = NO_NODE
    T_int[:, RIGHT] = NO_NODE
    T_int[:, PAR] = NO_NODE
    T_float = np.zeros((M, 2, cap))
    T_float[:, THR] = np.nan
    T_float[:, MU, 0] = rng.normal(0.0, math.sqrt(sigma_mu2), M)  # mu(0) from eq. (4.5)
    forest = Forest(T_int, T_float, np.ones(M, INDEX))
    resid = y - T_float[:, MU, 0].sum()
    # column-major: a split reads one feature of its node's rows (in row order), a
    # neighbouring 8 bytes where a row-major copy reads a cache line per row
    X = np.asfortranarray(X)
    work = sweep_work(X, M, int(n_particles), cap)
    settings = Settings(SAMPLER_NAMES[sampler],
                        SAMPLERS["growprune" if sampler == "growprune" else "cgm"],
                        float(alpha_s), float(beta_s), float(sigma_mu2), float(nu), float(lam),
                        float(ess_threshold))
    loglik = np.empty(n_iter)
    sigma2_trace = np.empty(n_iter)
    draws, kept_sigma2 = [], []
    sigma2 = lam
    for it in range(n_iter):
        forest, sigma2, loglik[it], work = _sweep(int(rng.integers(2**32)), X, resid, forest,
                                                  settings, work)
        sigma2_trace[it] = sigma2
        if it >= burn_in and (it - burn_in) % thin == 0:
            draws.append(_pack(forest))
            kept_sigma2.append(sigma2)
        if (it + 1) % max(n_iter // 10, 1) == 0:
            logger.info("BART (%s): iteration %d / %d, sigma2 %.4g, mean nodes per tree %.2f",
                        sampler, it + 1, n_iter, sigma2, float(forest.n_nodes.mean()))
    return BackfitResult(draws, np.asarray(kept_sigma2, np.float64), loglik, sigma2_trace)


class Forest(NamedTuple):
    """The M trees of a chain in slot arrays of one capacity: ``T_int`` (M, N_TREE_INTS,
    capacity) the integer fields, ``T_float`` (M, 2, capacity) threshold and leaf mean,
    ``n_nodes`` (M,) the live slots of every tree."""

    T_int: np.ndarray
    T_float: np.ndarray
    n_nodes: np.ndarray


class Settings(NamedTuple):
    """The tree update (``PG``, ``CGM`` or ``GROWPRUNE``), the move probabilities of the
    Metropolis-Hastings samplers, the priors of :func:`backfit` and the conditional SMC's
    resampling threshold."""

    sampler: int
    move_p: np.ndarray
    alpha_s: float
    beta_s: float
    sigma_mu2: float
    nu: float
    lam: float
    ess_threshold: float = 1.0


class SweepWork(NamedTuple):
    """The state of :func:`_sweep` besides the trees, allocated once per fit (grown on
    demand): the conditional SMC's :class:`~.pgbart.PGWork`, a row partition (``order,
    start, count, buf``), the per-row statistics ``S`` of the residual R_m, R_m itself, and
    ``leaf`` (n_trees, n_rows): the leaf slot of every row in every tree, kept up to date
    as the trees change, so R_m is one pass over the rows with no descent."""

    pg: PGWork
    order: np.ndarray
    start: np.ndarray
    count: np.ndarray
    buf: np.ndarray
    S: np.ndarray
    R: np.ndarray
    leaf: np.ndarray


def sweep_work(X: np.ndarray, n_trees: int, n_particles: int, cap: int) -> SweepWork:
    """:class:`SweepWork` for the rows ``X``, every tree the root alone."""
    n = X.shape[0]
    S = np.zeros((n, 3))
    S[:, 0] = 1.0
    return SweepWork(pg_workspace(X, n_particles, cap), np.empty(n, INDEX),
                     np.zeros(cap, INDEX), np.zeros(cap, INDEX), np.empty(n, INDEX), S,
                     np.empty(n), np.zeros((n_trees, n), LEAF))


# ---------------------------------------------------------------------------------- kernels


@njit(**JIT)
def _pack(forest):  # pragma: no cover - numba
    """The live slots of every tree back to back, children as global slots; returns
    ``(feature, threshold, left, right, value, n_nodes)`` (``value``: leaf means, 0 inside)."""
    T_int = forest.T_int
    T_float = forest.T_float
    n_nodes = forest.n_nodes
    total = 0
    for m in range(n_nodes.shape[0]):
        total += n_nodes[m]
    feature = np.empty(total, INDEX)
    left = np.empty(total, INDEX)
    right = np.empty(total, INDEX)
    threshold = np.empty(total)
    value = np.zeros(total)
    a = 0
    for m in range(n_nodes.shape[0]):
        for j in range(n_nodes[m]):
            f = T_int[m, FEAT, j]
            feature[a + j] = f
            threshold[a + j] = T_float[m, THR, j]
            if f == NO_NODE:
                left[a + j] = NO_NODE
                right[a + j] = NO_NODE
                value[a + j] = T_float[m, MU, j]
            else:
                left[a + j] = T_int[m, LEFT, j] + a
                right[a + j] = T_int[m, RIGHT, j] + a
        a += n_nodes[m]
    return feature, threshold, left, right, value, n_nodes.copy()


@njit(**JIT)
def _leaf_means(t, n, mu, R, resid, leaf, sigma2, sigma_mu2):  # pragma: no cover - numba
    """Alg. 4.1 line 8: every leaf's mean ``mu[j]`` from N(post mean, post var); residual
    -= fit; ``leaf[row]`` = the row's leaf. ``t`` is any record with a tree's ``feature``
    and its row partition ``order, start, count``; ``n`` its live slots."""
    rows = t.order
    feature = t.feature
    start = t.start
    count = t.count
    for j in range(n):
        if feature[j] != NO_NODE:
            continue
        s = start[j]
        c = count[j]
        total = 0.0
        for i in range(s, s + c):
            total += R[rows[i]]
        prec = c / sigma2 + 1.0 / sigma_mu2
        m = total / sigma2 / prec + np.random.standard_normal() / math.sqrt(prec)
        mu[j] = m
        for i in range(s, s + c):
            row = rows[i]
            resid[row] = R[row] - m
            leaf[row] = j


@njit(**JIT)
def _sweep(seed, X, resid, forest, settings, work):  # pragma: no cover - numba
    """One iteration of Algorithm 4.1; returns ``(forest, sigma2, loglik, work)`` (the
    arrays grown if a tree or a particle needed more slots)."""
    np.random.seed(seed)
    T_int, T_float, n_nodes = forest
    ws, order, start, count, buf, S, R, leaf = work
    N = X.shape[0]
    M = T_int.shape[0]
    nu = settings.nu
    ss = 0.0
    for i in range(N):
        ss += resid[i] * resid[i]
    # line 4: sigma^2 | trees, means ~ IG((nu + N) / 2, (nu lam + SSR) / 2)
    sigma2 = 0.5 * (nu * settings.lam + ss) / np.random.gamma(0.5 * (nu + N), 1.0)
    sigma_mu2 = settings.sigma_mu2
    model = Model(settings.alpha_s, settings.beta_s, np.int64(NORMAL),
                  np.array([sigma2, 0.0, sigma_mu2]))
    data = Data(X, S, np.empty((0, 0), INDEX))
    w = small_scratch(X.shape[1], S.shape[1])
    u = np.empty(UNIFORMS_PER_MOVE)
    for m in range(M):
        cap = T_int.shape[2]
        if cap < n_nodes[m] + 2:
            T_int = grow_slots(T_int, 2 * cap)
            T_float = grow_slots(T_float, 2 * cap)
            cap = 2 * cap
        if start.shape[0] < cap:
            start = np.zeros(cap, INDEX)
            count = np.zeros(cap, INDEX)
        t = Tree(T_int[m, FEAT], T_float[m, THR], T_int[m, LEFT], T_int[m, RIGHT],
                 T_int[m, PAR], T_int[m, DEP], order, start, count, buf)
        n = n_nodes[m]
        # line 6: R_m = residual + the tree's own fit (eq. 4.7), from every row's leaf
        mu = T_float[m, MU]
        leaf_m = leaf[m]
        for i in range(N):
            r = resid[i] + mu[leaf_m[i]]
            R[i] = r
            S[i, 1] = r
            S[i, 2] = r * r
        # line 7: T_m | R_m, sigma^2
        if settings.sampler == PG:
            k, n_new, ws = csmc(data, model, t, -1, ws, settings.ess_threshold)
            while n_new > T_int.shape[2]:
                T_int = grow_slots(T_int, 2 * T_int.shape[2])
                T_float = grow_slots(T_float, 2 * T_float.shape[2])
            for f in (FEAT, LEFT, RIGHT, PAR, DEP):
                T_int[m, f, :n_new] = ws.P_int[k, f, :n_new]
            T_float[m, THR, :n_new] = ws.P_float[k, THR, :n_new]
            n_nodes[m] = n_new
            drawn = particle_tree(ws.P_int, ws.P_float, k, ws.pool, buf)
            _leaf_means(drawn, n_new, T_float[m, MU], R, resid, leaf_m, sigma2, sigma_mu2)
        else:
            # a move reads and edits the tree's row partition
            for i in range(N):
                order[i] = i
            start[0] = 0
            count[0] = N
            _partition(t, n, X)
            for i in range(UNIFORMS_PER_MOVE):
                u[i] = np.random.random()
            n_new = mh_step(t, n, data, model, settings.move_p, u, w)[0]
            n_nodes[m] = n_new
            _leaf_means(t, n_new, T_float[m, MU], R, resid, leaf_m, sigma2, sigma_mu2)
    ss = 0.0
    for i in range(N):
        ss += resid[i] * resid[i]
    loglik = -0.5 * N * math.log(2.0 * math.pi * sigma2) - 0.5 * ss / sigma2
    return (Forest(T_int, T_float, n_nodes), sigma2, loglik,
            SweepWork(ws, order, start, count, buf, S, R, leaf))
