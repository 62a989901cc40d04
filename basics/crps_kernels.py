"""Numba kernel of the CRPS of Gaussian mixtures, plain or recalibrated by PIT maps
(:func:`basics.metrics.crps_many`).

Per row, the CRPS ``int (G(t) - 1{t >= y})^2 dt`` of ``G = R o F`` (``F`` the mixture's CDF,
``R`` a piecewise-linear PIT map; the identity for the mixture itself) is integrated over
``t``. ``F`` and its density ``f`` are evaluated at nodes (the grid ``mean + sd * z`` and
``y``, where the integrand jumps); between nodes ``F`` is the cubic Hermite interpolant of
the two values and derivatives (error ``O(h^4)``), and ``R(F)^2`` is integrated by
Gauss-Legendre. Each span is checked at its midpoint: where the cubic misses the CDF by more
than a tolerance, the span is halved and its halves checked again (adaptive bisection: a
smooth span costs one evaluation, a narrow component far from the mixture's bulk a few
halvings), so narrow components are resolved whatever the spread of the mixture. Beyond
the outer nodes ``a`` and ``b`` the tails are ``int G^2 ~ R'(0) G(a) E[(a - X)+]`` and
``int (1 - G)^2 ~ R'(1) (1 - G(b)) E[(X - b)+]``, bounds that vanish with the tail mass.
The CDF comes from the density's ``exp`` (Abramowitz & Stegun 7.1.26, 1.5e-7), not the
quantile solver's exact ``erfc``: the nodes resolve the CDF to 1e-3 only.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from .jit import JIT
from .mixture_kernels import _INV_SQRT_2PI, _SQRT1_2, _ndtr, gather_row, row_scratch


class PitMaps(NamedTuple):
    """Piecewise-linear PIT maps packed side by side, as :func:`crps_kernel` reads them.

    Attributes
    ----------
    knots : ndarray of shape (2, n_knots)
        Row 0 the base levels, row 1 the nominal ones; map ``r`` in the columns
        ``offsets[r]:offsets[r + 1]``.
    offsets : ndarray of shape (n_maps + 1,), int64
    identity : ndarray of shape (n_maps,), bool
        Map ``r`` is the identity.
    """

    knots: np.ndarray
    offsets: np.ndarray
    identity: np.ndarray


class Quadrature(NamedTuple):
    """How :func:`crps_kernel` integrates: ``z_grid``, the standardised nodes of every row;
    ``tolerance``, the CDF error at a span's midpoint above which it is halved; ``gl_x``,
    ``gl_w``, Gauss-Legendre nodes and weights on [0, 1]; ``closed_max``, the most live
    components a row may have for the identity map's closed form."""

    z_grid: np.ndarray
    tolerance: float
    gl_x: np.ndarray
    gl_w: np.ndarray
    closed_max: int


@njit(**JIT)
def _interp(p, xs, ys):  # pragma: no cover - jitted
    """Piecewise-linear ``ys(xs)`` at ``p`` (``xs`` strictly increasing from 0 to 1)."""
    j = np.searchsorted(xs, p, side="right") - 1
    j = min(max(j, 0), xs.shape[0] - 2)
    return ys[j] + (ys[j + 1] - ys[j]) * (p - xs[j]) / (xs[j + 1] - xs[j])


@njit(**JIT)
def _mapped(f, maps, r):  # pragma: no cover - jitted
    """``R_r(f)``: map ``r`` of the packed ``maps`` (:class:`PitMaps`)."""
    lo = maps.offsets[r]
    hi = maps.offsets[r + 1]
    return _interp(f, maps.knots[0, lo:hi], maps.knots[1, lo:hi])


#: Most halvings of one span of the CRPS quadrature, and the CDF rise below which a span is
#: integrated without a check (a far tail).
_MAX_DEPTH = 24
_FLAT = 1e-9


@njit(**JIT)
def _partial_expectations(a, n, cw, cm, cs):  # pragma: no cover - jitted
    """``E[(a - X)+]`` and ``E[(X - a)+]`` of the mixture (closed form per component)."""
    below = 0.0
    above = 0.0
    for k in range(n):
        d = (a - cm[k]) / cs[k]
        dens = cs[k] * math.exp(-0.5 * d * d) * _INV_SQRT_2PI
        below += cw[k] * ((a - cm[k]) * _ndtr(d) + dens)
        above += cw[k] * ((cm[k] - a) * _ndtr(-d) + dens)
    return below, above


@njit(**JIT)
def _span(a, b, y, maps, quad, acc, skip):  # pragma: no cover - jitted
    """Add ``int (R_r(F) - 1{t >= y})^2`` over ``[t1, t2]`` to ``acc[r]`` (Hermite ``F``,
    Gauss-Legendre; no span straddles ``y``) for every map ``r`` not in ``skip`` (a map whose
    CRPS the closed form gave); ``a = (t1, F, f)`` and ``b = (t2, F, f)`` are the span's
    ends."""
    t1, f1, d1 = a
    t2, f2, d2 = b
    gl_x, gl_w = quad.gl_x, quad.gl_w
    h = t2 - t1
    right = t1 >= y
    for q in range(gl_x.shape[0]):
        s = gl_x[q]
        s2 = s * s
        s3 = s2 * s
        f = ((2 * s3 - 3 * s2 + 1) * f1 + (s3 - 2 * s2 + s) * h * d1
             + (3 * s2 - 2 * s3) * f2 + (s3 - s2) * h * d2)
        f = min(max(f, f1), f2)  # the interpolant of a CDF stays between its ends
        for r in range(acc.shape[0]):
            if skip[r]:
                continue
            g = _mapped(f, maps, r)
            if right:
                g = 1.0 - g
            acc[r] += h * gl_w[q] * g * g


@njit(**JIT)
def _push(stack, depth, top, a, b, level):  # pragma: no cover - jitted
    """Push the span ``a = (t1, F, f) .. b = (t2, F, f)`` of bisection depth ``level``;
    new top."""
    top += 1
    stack[top, 0], stack[top, 1], stack[top, 2] = a
    stack[top, 3], stack[top, 4], stack[top, 5] = b
    depth[top] = level
    return top


#: Abramowitz & Stegun (1964), 7.1.26: ``erfc(a) ~ t (a1 + t (a2 + ... + t a5)) exp(-a^2)``,
#: ``t = 1 / (1 + p a)`` for ``a >= 0``, absolute error at most 1.5e-7. Its ``exp`` is the
#: density's, so the quadrature's CDF costs one ``exp`` per component.
_AS_P = 0.3275911
_AS_A1, _AS_A2, _AS_A3, _AS_A4, _AS_A5 = (0.254829592, -0.284496736, 1.421413741,
                                          -1.453152027, 1.061405429)


@njit(**JIT)
def _quadrature_cdf(x, n, cw, cm, inv_s, w_inv_s):  # pragma: no cover - jitted
    """The mixture's CDF (to 1e-7, :data:`_AS_P`) and density at ``x`` for the quadrature
    (``inv_s = 1 / s_k``, ``w_inv_s = w_k / s_k``): its nodes resolve the CDF to
    :data:`basics.metrics.CRPS_TOLERANCE` (1e-3), far coarser."""
    c = 0.0
    d = 0.0
    for k in range(n):
        z = (x - cm[k]) * inv_s[k]
        e = math.exp(-0.5 * z * z)
        a = abs(z) * _SQRT1_2
        t = 1.0 / (1.0 + _AS_P * a)
        tail = 0.5 * t * (_AS_A1 + t * (_AS_A2 + t * (_AS_A3 + t * (_AS_A4 + t * _AS_A5)))) * e
        c += cw[k] * (1.0 - tail if z > 0.0 else tail)
        d += w_inv_s[k] * e
    return c, d * _INV_SQRT_2PI


@njit(**JIT)
def _abs_moment(mu, s):  # pragma: no cover - jitted
    """``E|Z|`` for ``Z ~ N(mu, s^2)``, ``s > 0``: ``2 s phi(mu / s) + mu erf(mu / (s sqrt 2))``."""
    z = mu / s
    return 2.0 * s * math.exp(-0.5 * z * z) * _INV_SQRT_2PI + mu * math.erf(z * _SQRT1_2)


@njit(**JIT)
def crps_closed_form(n, cw, cm, cv, y):  # pragma: no cover - jitted
    """Exact CRPS of one row's mixture of ``n`` live components at ``y``.

    ``E|X - y| - E|X - X'| / 2`` (Gneiting & Raftery (2007), eq. (21)) with ``X, X'``
    independent draws of the mixture, each expectation a sum of ``E|N(mu, s^2)|`` over
    components (pairs): Grimit, Gneiting, Berrocal & Johnson (2006), Quart. J. Roy. Meteor.
    Soc. 132, eq. (5). ``n (n + 1) / 2`` pairs: cheaper than the quadrature for a few dozen
    components, and exact.
    """
    first = 0.0
    for k in range(n):
        first += cw[k] * _abs_moment(y - cm[k], math.sqrt(cv[k]))
    pairs = 0.0
    for k in range(n):
        # the pair (k, k): E|N(0, 2 v_k)| = 2 sqrt(2 v_k) phi(0)
        pairs += cw[k] * cw[k] * 2.0 * math.sqrt(2.0 * cv[k]) * _INV_SQRT_2PI
        for j in range(k + 1, n):
            pairs += 2.0 * cw[k] * cw[j] * _abs_moment(cm[k] - cm[j], math.sqrt(cv[k] + cv[j]))
    return first - 0.5 * pairs


class CrpsScratch(NamedTuple):
    """Work arrays of :func:`crps_row` (:func:`crps_scratch`): per component ``1 / s_k`` and
    ``w_k / s_k``; per map the end slopes of its PIT map and whether the row's closed form
    gave it (``skip``); the quadrature's nodes (``t``, ``F``, ``f``), per-map sums, and the
    bisection stack."""

    inv_s: np.ndarray
    w_inv_s: np.ndarray
    slope0: np.ndarray
    slope1: np.ndarray
    skip: np.ndarray
    node_t: np.ndarray
    node_f: np.ndarray
    node_d: np.ndarray
    acc: np.ndarray
    stack: np.ndarray
    depth: np.ndarray


@njit(**JIT)
def crps_scratch(k_max, maps, quad):  # pragma: no cover - jitted
    """A :class:`CrpsScratch` for rows of up to ``k_max`` components under ``maps``."""
    knots, offsets = maps.knots, maps.offsets
    n_maps = offsets.shape[0] - 1
    slope0 = np.empty(n_maps)
    slope1 = np.empty(n_maps)
    for r in range(n_maps):
        lo = offsets[r]
        hi = offsets[r + 1] - 1
        slope0[r] = (knots[1, lo + 1] - knots[1, lo]) / (knots[0, lo + 1] - knots[0, lo])
        slope1[r] = (knots[1, hi] - knots[1, hi - 1]) / (knots[0, hi] - knots[0, hi - 1])
    n_grid = quad.z_grid.shape[0]
    return CrpsScratch(np.empty(k_max), np.empty(k_max), slope0, slope1,
                       np.zeros(n_maps, np.bool_), np.empty(n_grid + 1), np.empty(n_grid + 1),
                       np.empty(n_grid + 1), np.empty(n_maps), np.empty((_MAX_DEPTH + 2, 6)),
                       np.empty(_MAX_DEPTH + 2, np.int64))


@njit(**JIT)
def crps_row(n, mean, var, row, yi, maps, quad, work, out_row):  # pragma: no cover - jitted
    """CRPS at ``yi`` of one row's ``n`` live components (``row``, a
    :class:`basics.mixture_kernels.RowScratch` filled by ``gather_row``, of mixture mean
    ``mean`` and variance ``var``) under every map ``r`` of ``maps``, into ``out_row[r]``
    (module docstring; :func:`crps_kernel` for the rules). ``work`` is a
    :class:`CrpsScratch`."""
    identity = maps.identity
    z_grid, tolerance, closed_max = quad.z_grid, quad.tolerance, quad.closed_max
    cw, cm, cv, cs = row.w, row.m, row.v, row.s
    inv_s, w_inv_s, slope0, slope1, skip = (work.inv_s, work.w_inv_s, work.slope0,
                                            work.slope1, work.skip)
    node_t, node_f, node_d, acc = work.node_t, work.node_f, work.node_d, work.acc
    stack, depth = work.stack, work.depth
    n_maps = acc.shape[0]
    closed = n <= closed_max
    left = 0
    for r in range(n_maps):
        skip[r] = closed and identity[r]
        if not skip[r]:
            left += 1
    if closed and left < n_maps:
        exact = crps_closed_form(n, cw, cm, cv, yi)
        for r in range(n_maps):
            if skip[r]:
                out_row[r] = exact
    if left == 0:
        return
    for k in range(n):
        inv_s[k] = 1.0 / cs[k]
        w_inv_s[k] = cw[k] * inv_s[k]
    sd = math.sqrt(var)
    c = 0
    placed = False
    for j in range(z_grid.shape[0]):
        t = mean + sd * z_grid[j]
        if not placed and yi <= t:
            node_t[c] = yi
            c += 1
            placed = True
        node_t[c] = t
        c += 1
    if not placed:
        node_t[c] = yi
        c += 1
    for j in range(c):
        node_f[j], node_d[j] = _quadrature_cdf(node_t[j], n, cw, cm, inv_s, w_inv_s)
    below = _partial_expectations(node_t[0], n, cw, cm, cs)[0]
    for r in range(n_maps):
        acc[r] = slope0[r] * _mapped(node_f[0], maps, r) * below
    for j in range(1, c):
        if node_t[j] <= node_t[j - 1]:
            continue
        # depth-first bisection of the span: left halves first, so spans add up in order
        top = _push(stack, depth, -1, (node_t[j - 1], node_f[j - 1], node_d[j - 1]),
                    (node_t[j], node_f[j], node_d[j]), 0)
        while top >= 0:
            t1, f1, d1, t2, f2, d2 = stack[top]
            level = depth[top]
            top -= 1
            if f2 - f1 <= _FLAT or level >= _MAX_DEPTH:
                _span((t1, f1, d1), (t2, f2, d2), yi, maps, quad, acc, skip)
                continue
            # adaptive: the midpoint checks the cubic; where it is off, halve again
            tm = 0.5 * (t1 + t2)
            fm, dm = _quadrature_cdf(tm, n, cw, cm, inv_s, w_inv_s)
            guess = 0.5 * (f1 + f2) + 0.125 * (t2 - t1) * (d1 - d2)
            if abs(guess - fm) <= tolerance:
                _span((t1, f1, d1), (tm, fm, dm), yi, maps, quad, acc, skip)
                _span((tm, fm, dm), (t2, f2, d2), yi, maps, quad, acc, skip)
                continue
            top = _push(stack, depth, top, (tm, fm, dm), (t2, f2, d2), level + 1)
            top = _push(stack, depth, top, (t1, f1, d1), (tm, fm, dm), level + 1)
    above = _partial_expectations(node_t[c - 1], n, cw, cm, cs)[1]
    for r in range(n_maps):
        if skip[r]:
            continue
        g = _mapped(node_f[c - 1], maps, r)
        out_row[r] = acc[r] + slope1[r] * (1.0 - g) * above


@njit(**JIT)
def crps_kernel(w, m, v, y, maps, quad, out):  # pragma: no cover - jitted
    """CRPS of every row ``i`` of the mixture ``(w, m, v)`` under every map ``r`` of
    ``maps`` (:class:`PitMaps`; module docstring), into ``out[i, r]``.

    The identity map's CRPS for a row of at most ``quad.closed_max`` live components is
    :func:`crps_closed_form` (a row whose maps are all such skips the quadrature, and the
    quadrature of the others skips them); a span is halved while the cubic misses the CDF
    at its midpoint by more than ``quad.tolerance`` (at most ``_MAX_DEPTH`` times).
    """
    row = row_scratch(w.shape[1])
    work = crps_scratch(w.shape[1], maps, quad)
    for i in range(w.shape[0]):
        n, mean, var = gather_row(w, m, v, i, row)
        crps_row(n, mean, var, row, y[i], maps, quad, work, out[i])
