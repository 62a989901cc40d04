"""Performance drift: does the model still predict a new window as well as it used to?

The trunk-drift check (:func:`ebf.trunk_drift`) asks whether the stored *splits* still
hold; a model can also get worse with every split still in place (the noise grows, a
branch's relation moves, the target shifts). :func:`performance_drift` compares the model's
per-row predictive scores on the new window's rows (negative log predictive density for a
regressor, log loss for a classifier: lower is better) with a reference: the same score on
rows the model was not fit on when it was made, e.g. its own holdout. It fires when the
window is worse than the reference by more than a tolerance, with a chance of a false alarm
on a window like the reference of at most ``level``.

**The test.** ``D = mean(window) - mean(reference)``. The window's mean is bootstrapped as
the split test's eq. (10) is (Taddy et al. 2015, Sec. 3.1): Bayesian bootstrap weights
``Exp(1)`` on blocks of consecutive rows (:data:`~ebf.diagnostics._window.DEFAULT_BLOCKS`),
because the rows of a window are dependent (the flights of one day share its weather) and a
per-row bootstrap would call a stormy day a change. Each draw gives ``D* = m*_window -
m*_reference``; the p-value is the bootstrap probability that ``D <= tolerance``,
``(1 + #{D* <= tolerance}) / (1 + draws)``, and the test fires when it is below ``level``:
then the ``level`` quantile of ``D*`` (the one-sided lower bound of the difference) lies above
the tolerance.

**The reference's own spread.** A reference mean measured on ``n_ref`` rows has a sampling
error of its own, as large as the window's for a holdout of the same size: leaving it out
makes the test about ``sqrt(2)`` too confident (a nominal 5% test would fire on about 12% of
stationary windows). Per-row reference scores are bootstrapped as the window's are. A
reference known only as a mean of ``n_reference`` rows (a version record keeps the holdout's
mean score and row count, not its rows) gets its spread under the hypothesis the test
checks, that the window is like the reference: the window's bootstrap spread scaled to
``n_reference`` rows (the variance of a mean of dependent rows falls as ``1 / n``), drawn
independently. ``n_reference=None`` takes the reference as exact (a fixed target).

This module imports no dask and never sees a model: it takes scores.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from numbers import Integral, Real
from typing import Any

import numpy as np

from ._window import DEFAULT_BLOCKS, DEFAULT_THRESHOLD, MIN_ROWS, block_ids, json_value

__all__ = ["DEFAULT_DRAWS", "DEFAULT_TOLERANCE", "PerformanceDrift", "performance_drift"]

#: The worsening of the mean score (nats per row) below which the test does not fire. The
#: gate of :func:`pipelines.registry.retrain.gate` counts an NLPD or log loss within 0.01 of
#: the champion's as no worse, so a drift it would not tell apart is not worth a refit; and a
#: large holdout, on which any change is significant, does not refit on every small wobble.
DEFAULT_TOLERANCE = 0.01

#: Bootstrap draws: the smallest p-value is ``1 / (DEFAULT_DRAWS + 1)``, small enough for a
#: family-wise 0.05 over a few hundred tests (Holm's or Bonferroni's ``0.05 / m``).
DEFAULT_DRAWS = 10_000

_LABELS = {"nlpd": "NLPD", "log_loss": "log loss"}


@dataclass(frozen=True)
class PerformanceDrift:
    """Result of :func:`performance_drift`.

    Attributes
    ----------
    score : str
        What was compared (``"nlpd"``, ``"log_loss"``, ...; lower is better).
    n : int
        Window rows.
    mean : float
        The window's mean score.
    reference : float
        The reference's mean score.
    n_reference : int or None
        Rows behind the reference (None: taken as exact).
    difference : float
        ``mean - reference``: positive is worse.
    lower, upper : float
        The ``level`` and ``1 - level`` quantiles of the bootstrap difference: ``lower`` is
        the one-sided ``1 - level`` lower bound the test compares with ``tolerance``.
    pvalue : float
        Bootstrap probability that the difference is at most ``tolerance``; NaN (never
        fires) with fewer than :data:`~ebf.diagnostics._window.MIN_ROWS` rows.
    level, tolerance : float
    blocks : int
        Blocks of consecutive window rows the bootstrap weighted.
    fired : bool
        ``pvalue < level``; in a drift check, whether the family-wise test over the splits
        and this one rejected it (:func:`ebf.diagnostics._drift.with_performance`).
    correction : str
        ``"none"`` alone; in a drift check, the correction of the family.
    tests : int
        Tests in the family (1 alone).
    """

    score: str
    n: int
    mean: float
    reference: float
    n_reference: int | None
    difference: float
    lower: float
    upper: float
    pvalue: float
    level: float
    tolerance: float
    blocks: int
    fired: bool
    correction: str = "none"
    tests: int = 1

    @property
    def tested(self) -> bool:
        """Whether the window had rows enough to test (a finite p-value)."""
        return math.isfinite(self.pvalue)

    def to_dict(self) -> dict:
        """The result as a JSON-ready dict (NaN becomes None); :meth:`from_dict` reads it."""
        return {k: json_value(v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: dict) -> PerformanceDrift:
        """Inverse of :meth:`to_dict`."""
        kw = {f.name: d[f.name] for f in fields(cls)}
        for name in ("mean", "difference", "lower", "upper", "pvalue"):
            kw[name] = math.nan if kw[name] is None else float(kw[name])
        return cls(**kw)

    def describe(self) -> str:
        """One phrase for a decision line, e.g. ``holdout NLPD 1.53 against 1.32 before:
        +0.21, one-sided 95% bound +0.15 (tolerance 0.01, p=0.0001)``."""
        what = f"holdout {_LABELS.get(self.score, self.score)}"
        if not self.tested:
            return f"{what} not tested: {self.n} rows (at least {MIN_ROWS})"
        return (f"{what} {self.mean:.4g} against {self.reference:.4g} before: "
                f"{self.difference:+.3g}, one-sided {1 - self.level:.0%} bound "
                f"{self.lower:+.3g} (tolerance {self.tolerance:g}, p={self.pvalue:.2g})")


def _scores(x: Any, name: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of per-row scores; got shape {x.shape}.")
    bad = int(np.sum(~np.isfinite(x)))
    if bad:
        raise ValueError(f"{name} has {bad} values that are not finite; score only rows with "
                         "a target (a clipped log loss is always finite).")
    return x


def _check(level: Any, tolerance: Any, n_draws: Any, blocks: Any) -> None:
    if isinstance(level, bool) or not isinstance(level, Real) or not 0.0 < level < 1.0:
        raise ValueError(f"level must be a probability in (0, 1); got {level!r}.")
    if isinstance(tolerance, bool) or not isinstance(tolerance, Real) \
            or not 0.0 <= tolerance < math.inf:
        raise ValueError(f"tolerance must be a finite number >= 0 (the worsening that is "
                         f"let pass); got {tolerance!r}.")
    for name, v in (("n_draws", n_draws), ("blocks", blocks)):
        if v is None and name == "blocks":
            continue
        if isinstance(v, bool) or not isinstance(v, Integral) or v < 1:
            raise ValueError(f"{name} must be a positive integer; got {v!r}.")


def _bootstrap_means(x: np.ndarray, blocks: int | None, n_draws: int,
                     rng: np.random.Generator) -> np.ndarray:
    """``n_draws`` Bayesian-bootstrap means of ``x``: ``Exp(1)`` weights on its blocks of
    consecutive rows, ``sum_b w_b S_b / sum_b w_b c_b`` (block sums ``S``, counts ``c``),
    drawn in chunks (a draw's weights are one row of one ``(draws, blocks)`` array)."""
    b = block_ids(x.size, blocks)
    sums, counts = np.bincount(b, weights=x), np.bincount(b).astype(np.float64)
    chunk = max(1, (1 << 22) // sums.size)
    out = np.empty(n_draws)
    for start in range(0, n_draws, chunk):
        w = rng.standard_exponential((min(chunk, n_draws - start), sums.size))
        out[start:start + w.shape[0]] = (w @ sums) / (w @ counts)
    return out


def performance_drift(
    scores: Any,
    reference: Any,
    n_reference: int | None = None,
    *,
    score: str = "score",
    blocks: int | None = DEFAULT_BLOCKS,
    level: float = DEFAULT_THRESHOLD,
    tolerance: float = DEFAULT_TOLERANCE,
    n_draws: int = DEFAULT_DRAWS,
    random_state: int | None = 0,
) -> PerformanceDrift:
    """Test whether per-row scores of a window are worse than a reference (see the module
    docstring).

    Parameters
    ----------
    scores : array-like of shape (n,)
        The model's per-row scores on the window, lower is better (e.g. ``-log p(y)`` of
        its predictive distribution, or :func:`basics.metrics.class_rows`' log loss), in
        time order: consecutive rows form the blocks.
    reference : float or array-like of shape (n_ref,)
        The reference: a mean score (then give ``n_reference``) or per-row scores (in time
        order, bootstrapped in blocks as the window is).
    n_reference : int, optional
        Rows behind a mean ``reference``; None takes it as exact. Not with per-row scores.
    score : str, default="score"
        The score's name, for the result (``"nlpd"``, ``"log_loss"``).
    blocks : int or None, default=DEFAULT_BLOCKS (50)
        Blocks of consecutive rows the Bayesian bootstrap weights; None: one per row (for
        independent rows only).
    level : float, default=DEFAULT_THRESHOLD (0.05)
        Chance of firing on a window like the reference.
    tolerance : float, default=DEFAULT_TOLERANCE (0.01)
        Fire only if the window is worse by more than this (in the score's units).
    n_draws : int, default=DEFAULT_DRAWS (10,000)
        Bootstrap draws (the smallest p-value is ``1 / (n_draws + 1)``).
    random_state : int or None, default=0
        Seed: the window's weights come from ``SeedSequence(random_state,
        spawn_key=(0,))``, the reference's from ``spawn_key=(1,)``; None: fresh entropy.

    Returns
    -------
    PerformanceDrift
        Fewer than :data:`~ebf.diagnostics._window.MIN_ROWS` window (or reference) rows give
        NaN for the p-value and bounds, and ``fired=False``.

    Raises
    ------
    ValueError
        On scores that are not 1-D or not finite, an empty window, ``n_reference`` with
        per-row reference scores or not a positive integer, or a bad ``level``,
        ``tolerance``, ``blocks`` or ``n_draws``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> before, now = rng.normal(1.0, 0.5, 2000), rng.normal(1.2, 0.5, 2000)
    >>> r = performance_drift(now, before.mean(), before.size, score="nlpd")
    >>> r.fired, round(r.difference, 1), r.lower > 0.1
    (True, 0.2, True)
    >>> performance_drift(rng.normal(1.0, 0.5, 2000), before).fired
    False
    """
    _check(level, tolerance, n_draws, blocks)
    x = _scores(scores, "scores")
    if x.size == 0:
        raise ValueError("scores is empty: the window needs scored rows to test.")
    ref_rows = None
    if np.ndim(reference) == 0:
        if isinstance(reference, bool) or not isinstance(reference, Real) \
                or not math.isfinite(reference):
            raise ValueError(f"reference must be a finite mean score or per-row scores; got "
                             f"{reference!r}.")
        ref = float(reference)
        if n_reference is not None and (isinstance(n_reference, bool)
                                        or not isinstance(n_reference, Integral)
                                        or n_reference < 1):
            raise ValueError(f"n_reference must be a positive integer (the rows behind the "
                             f"reference mean) or None; got {n_reference!r}.")
    else:
        if n_reference is not None:
            raise ValueError("n_reference is for a reference mean; per-row reference scores "
                             "count their own rows.")
        ref_rows = _scores(reference, "reference")
        if ref_rows.size == 0:
            raise ValueError("reference is empty: pass its scores or its mean.")
        ref, n_reference = float(ref_rows.mean()), int(ref_rows.size)
    n = int(x.size)
    mean = float(x.mean())
    nan = math.nan
    out = {"score": str(score), "n": n, "mean": mean, "reference": ref,
           "n_reference": None if n_reference is None else int(n_reference),
           "difference": mean - ref, "level": float(level), "tolerance": float(tolerance),
           "blocks": int(min(blocks or n, n))}
    if n < MIN_ROWS or (ref_rows is not None and ref_rows.size < MIN_ROWS):
        return PerformanceDrift(**out, lower=nan, upper=nan, pvalue=nan, fired=False)
    seeds = [np.random.default_rng(np.random.SeedSequence(random_state, spawn_key=(k,)))
             for k in (0, 1)]
    d = _bootstrap_means(x, blocks, n_draws, seeds[0])
    if ref_rows is not None:
        d -= _bootstrap_means(ref_rows, blocks, n_draws, seeds[1])
    elif n_reference is None:
        d -= ref
    else:  # the reference's spread under "the window is like the reference"
        d -= ref + math.sqrt(n / n_reference) * (
            _bootstrap_means(x, blocks, n_draws, seeds[1]) - mean)
    pvalue = (1.0 + np.count_nonzero(d <= tolerance)) / (n_draws + 1.0)
    lower, upper = np.quantile(d, [level, 1.0 - level])
    return PerformanceDrift(**out, lower=float(lower), upper=float(upper),
                            pvalue=float(pvalue), fired=bool(pvalue < level))
