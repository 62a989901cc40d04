"""The range of every float a saved model stores, and the checks a loaded state runs on them.

A fit refuses targets beyond ``±MAX_ABS_TARGET`` (:mod:`basics.validation`), so what a model
stores is bounded by what a fit can produce from such targets. A state read from a file is
untrusted (``ebf/LAYOUT.md``, the persistence contract): every ``_set_state`` checks its
values against these bounds in the same pass that checks its structure, and a value out of
range is a ``ValueError`` naming the array, which ``ebf.artifact.load`` reports as a
``ModelFormatError`` naming the file. A forged leaf mean of 1e160 is refused there, instead
of turning the predictive standard deviations into inf.

The bounds, and what a fit produces
-----------------------------------
``MAX_ABS_LOCATION`` (1e110)
    Locations in the target's units: leaf and node means, prior means, centres, intercepts,
    stored (centred) targets, ridge weights, BART draws times their scale. A fit produces
    means and midranges of targets (within ``MAX_ABS_TARGET``) and differences of two
    targets (within ``2 * MAX_ABS_TARGET``); only a prior or a penalty extrapolates beyond
    the targets' range (BART's sampled leaf means, by a few prior scales; ridge weights, by
    at most ``sqrt(n_rows / alpha)`` times the targets). :data:`LOAD_SLACK` (1e10) times the
    target bound leaves room for all of these, and for rounding.
``MAX_VARIANCE`` (1e220 = ``MAX_ABS_LOCATION**2``)
    Variances in the target's units squared: leaf variances, noise variances, prior
    variances, variance floors, posterior predictive variances. A variance of targets is at
    most ``MAX_ABS_TARGET**2`` (Popoviciu's inequality: a quarter of the squared range);
    priors multiply it by factors of their parameters (``(1 + 1 / n)``, a degrees-of-freedom
    ratio, ``1 / (2 k)**2``).
Per-node sums (:func:`check_sums`)
    A node's sum of ``n`` targets (or weights times targets) lies within ``n`` times the
    location bound, its sum of squares within ``[0, n * MAX_VARIANCE]``, ``n`` the node's
    count (or weight).
``MAX_COUNT`` (2**53)
    Counts of rows stored as floats are whole numbers in ``[0, 2**53]``, the integers float64
    holds exactly; a fit counts rows it has held in memory.
Features (thresholds, bin edges, boxes, scaled rows, feature minima and spans)
    Finite (spans positive): a fit requires finite features and nothing more, and
    predictions only compare rows with them.
Everything else a model stores, with the check that holds it
    Weights (sums of bootstrap times sample weights: finite and non-negative, as a fit
    requires of sample weights; predictions do not read them); class fractions and class
    frequencies (in [0, 1], summing to one where they must); particle weights (in [0, 1],
    one per island); split times (non-negative, growing down a tree, finite at splits, the
    lifetime at leaves, possibly inf); log evidences and log-likelihood traces (finite);
    recalibration levels (:mod:`basics.pit`: within ``[-MAX_ACI_STEP, 1 + MAX_ACI_STEP]``,
    where fits and adaptive updates leave them); a ridge's inverse Gram matrix (symmetric
    positive definite with a diagonal in ``(0, 1 / alpha]``, ``mondrian.kernel_sweep``).

Why predictions stay finite within these bounds: a mixture's second moment is at most
``MAX_VARIANCE + MAX_ABS_LOCATION**2 = 2e220``; a sum over ``n <= 2**63`` rows of squares is
at most ``9.3e238``; a node mean read off bounded sums is within ``2**63 * MAX_ABS_LOCATION``
(its square 8.5e257); all far below float64's overflow at 1.8e308.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .validation import MAX_ABS_TARGET

__all__ = [
    "LOAD_SLACK", "MAX_ABS_LOCATION", "MAX_ABS_TARGET", "MAX_COUNT", "MAX_VARIANCE",
    "check_counts", "check_locations", "check_range", "check_sums", "check_variances",
    "state_float", "state_location", "state_variance",
]

#: How much wider the load bounds are than what a fit on bounded targets produces (module
#: docstring): room for sampled draws, penalised weights and rounding, far below overflow.
LOAD_SLACK = 1e10
#: Largest ``|value|`` of a location in the target's units a loaded model may hold.
MAX_ABS_LOCATION = LOAD_SLACK * MAX_ABS_TARGET
#: Largest variance in the target's units squared a loaded model may hold.
MAX_VARIANCE = MAX_ABS_LOCATION**2
#: Largest count of rows stored as a float (the integers float64 represents exactly).
MAX_COUNT = 2.0**53

#: The smallest positive float64 (a subnormal): the lower bound of a positive quantity.
_TINY = float(np.nextafter(0.0, 1.0))


def _at(i: tuple) -> str:
    """`` at index 3`` or `` at index (3, 1)`` for a message ("" for a scalar)."""
    if not i:
        return ""
    return f" at index {int(i[0]) if len(i) == 1 else tuple(int(k) for k in i)}"


def _interval(low: float, high: float) -> str:
    """``[low, high]`` for a message, ``(0, high]`` for a positive quantity."""
    return f"(0, {high:.6g}]" if low == _TINY else f"[{low:.6g}, {high:.6g}]"


def check_range(name: str, values: Any, low: Any, high: Any, bound: str) -> None:
    """Raise ``ValueError`` naming ``name`` unless every value lies in ``[low, high]``.

    NaN lies in no range. ``low`` and ``high`` broadcast against ``values`` (a per-node
    bound, e.g. a count times :data:`MAX_ABS_LOCATION`).

    Parameters
    ----------
    name : str
        The array (its state entry), named in the message.
    values : array-like or float
    low, high : float or array-like
    bound : str
        Which bound it is, for the message (e.g. ``"MAX_ABS_LOCATION"``).

    Raises
    ------
    ValueError
        Naming the array, how many values are out of range, the first one, its index and
        its bound.

    Examples
    --------
    >>> check_range("value", np.array([1.0, 2.0]), -3.0, 3.0, "±3")
    >>> check_range("value", np.array([1.0, 1e160]), -1e110, 1e110, "MAX_ABS_LOCATION")
    Traceback (most recent call last):
    ...
    ValueError: value holds 1 value(s) outside MAX_ABS_LOCATION: 1e+160 at index 1 is not in ...
    """
    a = np.asarray(values)
    with np.errstate(invalid="ignore"):
        ok = (a >= low) & (a <= high)
    if ok.all():
        return
    i = np.unravel_index(int(np.argmin(ok)), ok.shape)
    lo, hi = (float(np.broadcast_to(b, ok.shape)[i]) for b in (low, high))
    raise ValueError(f"{name} holds {int(ok.size - np.count_nonzero(ok))} value(s) outside "
                     f"{bound}: {float(np.broadcast_to(a, ok.shape)[i])!r}{_at(i)} is not in "
                     f"{_interval(lo, hi)}")


def check_locations(name: str, values: Any) -> None:
    """Locations in the target's units: within ``±MAX_ABS_LOCATION`` (and finite)."""
    check_range(name, values, -MAX_ABS_LOCATION, MAX_ABS_LOCATION, "MAX_ABS_LOCATION")


def check_variances(name: str, values: Any, positive: bool = False) -> None:
    """Variances in the target's units squared: in ``[0, MAX_VARIANCE]``, or
    ``(0, MAX_VARIANCE]`` if ``positive``."""
    check_range(name, values, _TINY if positive else 0.0, MAX_VARIANCE, "MAX_VARIANCE")


def check_counts(name: str, values: Any, high: float = MAX_COUNT) -> None:
    """Counts of rows stored as floats: whole numbers in ``[0, high]`` (``MAX_COUNT``, or the
    rows the model has seen)."""
    a = np.asarray(values)
    check_range(name, a, 0.0, high, "the counts of rows")
    fractional = a != np.floor(a)
    if fractional.any():
        i = np.unravel_index(int(np.argmax(fractional)), a.shape)
        raise ValueError(f"{name} holds {int(fractional.sum())} count(s) that are not whole "
                         f"numbers: {float(a[i])!r}{_at(i)}")


def check_sums(name: str, sums: np.ndarray, counts: Any) -> None:
    """Per-node ``(sum, sum of squares)`` of ``counts`` targets (or weights): ``|sum| <=
    counts * MAX_ABS_LOCATION`` and ``0 <= sum of squares <= counts * MAX_VARIANCE``.

    Parameters
    ----------
    name : str
        The array, named in the message.
    sums : ndarray of shape (n_nodes, 2)
        Column 0 the sums, column 1 the sums of squares.
    counts : ndarray of shape (n_nodes,) or float
        Rows (or the total weight) of every node, already checked non-negative and finite.
    """
    counts = np.asarray(counts, dtype=np.float64)
    top = counts * MAX_ABS_LOCATION
    check_range(f"{name} (sums)", sums[:, 0], -top, top, "count * MAX_ABS_LOCATION")
    check_range(f"{name} (sums of squares)", sums[:, 1], 0.0, counts * MAX_VARIANCE,
                "count * MAX_VARIANCE")


def state_float(state: dict, key: str, low: float, high: float, bound: str) -> float:
    """``state[key]``: a float (JSON numbers with a fraction or an exponent arrive as Python
    floats) in ``[low, high]``.

    Raises
    ------
    ValueError
        Naming ``key``, the value and the bound.

    Examples
    --------
    >>> state_float({"v": 0.5}, "v", 0.0, 1.0, "probabilities")
    0.5
    >>> state_float({"v": 2.0}, "v", 0.0, 1.0, "probabilities")
    Traceback (most recent call last):
    ...
    ValueError: v must be a float in [0, 1] (probabilities), got 2.0
    """
    value = state[key]
    if not isinstance(value, float) or not (low <= value <= high):
        raise ValueError(f"{key} must be a float in {_interval(low, high)} ({bound}), got "
                         f"{value!r:.60}")
    return value


def state_location(state: dict, key: str, positive: bool = False) -> float:
    """``state[key]``: a float location (``positive``: a scale, e.g. a range) in the target's
    units, within :data:`MAX_ABS_LOCATION`."""
    low = _TINY if positive else -MAX_ABS_LOCATION
    return state_float(state, key, low, MAX_ABS_LOCATION, "MAX_ABS_LOCATION")


def state_variance(state: dict, key: str, low: float = _TINY,
                   bound: str = "MAX_VARIANCE") -> float:
    """``state[key]``: a float variance in ``[low, MAX_VARIANCE]`` (positive by default;
    ``bound`` says where ``low`` comes from, for the message)."""
    return state_float(state, key, low, MAX_VARIANCE, bound)
