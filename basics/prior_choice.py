"""Choosing a model option from rows the model never saw: held-out scores per candidate.

A calibration group of ``calibrate="auto"`` (:mod:`basics.calibration`) is fit without one
fold of the rows and predicts that fold. Where the model has an option that changes only
how its fitted leaves predict (not the trees), one group can score every candidate value of
the option on its held-out rows without refitting: the Bayesian forests' leaf prior
strength (:data:`basics.leaf_noise.LEAF_PRIOR_CANDIDATES`, ``leaf_prior_rows="auto"``).

Per candidate the groups report :class:`CandidateScores`: the PIT counts the recalibration
map is built from (:class:`basics.calibration.HeldOutCounts`) and the held-out log score,
summed over rows, so that branches, folds and workers add them exactly as they add counts.
:func:`best_candidate` picks the candidate whose recalibrated held-out log score is highest:

    sum_i log f_c(y_i) + sum_b n_{c,b} log R_c'(b),

the group's own log density plus the log slope of the map ``R_c`` it would get (the map is
piecewise linear; ``R_c'(b)`` is its mean slope over PIT bin ``b``, where ``n_{c,b}`` of the
held-out PIT values fall), so that a candidate is judged as the user gets it: recalibrated.
A row far outside its predictive (log score below :data:`LOW_LOG_DENSITY`) weighs in that
sum as much as it should: a candidate that gives a held-out row a log density of -500 pays
for it as for 500 rows each one nat worse. The rows below :data:`LOW_LOG_DENSITY` are also
counted, for the report; putting the count first favoured strong priors where a 10-tree
group misses a row that the model's 100 trees do not (the benchmark's flights: lower NLPD
and CRPS without it, and as many rows below the bound).

The groups have a tenth of the model's trees, and a mixture of few trees is lumpier, which
a stronger prior smooths: the groups lean to stronger priors than the model needs.
Extrapolating their scores to the model's trees through each half of them (as the map is)
overshot the other way on the benchmark tasks, so the groups' own scores decide.

Integer-valued targets (counts, ratings: :func:`basics.discrete.is_integer_target` of the
held-out rows) score by the log probability of the unit interval
around the target, ``log (F(y + 1/2) - F(y - 1/2))`` (the log score of the discretised
predictive), without the map term: a continuous density on integer outcomes rewards spikes,
not skill.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from scipy import special

from .calibration import HeldOutCounts, extrapolated_map, held_out_counts
from .leaf_noise import LEAF_PRIOR_CANDIDATES, LEAF_PRIOR_ROWS
from .pit import MIN_ROWS, PIT_EDGES

__all__ = ["CANDIDATES", "LOW_LOG_DENSITY", "OPTION", "CandidateScores", "best_candidate",
           "candidate_scores", "held_out_scores", "settle"]

#: The option the groups choose, and its candidate values (in the order of the scores).
OPTION = "leaf_prior_rows"
CANDIDATES = LEAF_PRIOR_CANDIDATES

#: A held-out row whose log predictive density is below this is a near-certain miss.
LOW_LOG_DENSITY = -30.0


class CandidateScores(NamedTuple):
    """Held-out scores of every candidate (rows of the arrays), summed over rows.

    Attributes
    ----------
    whole, halves : ndarray of shape (n_candidates, n_bins), int64
        :class:`basics.calibration.HeldOutCounts` of each candidate.
    log_score : ndarray of shape (n_candidates,)
        Sum over the rows of their log score (module docstring).
    n_low : ndarray of shape (n_candidates,), int64
        Rows whose log score is below :data:`LOW_LOG_DENSITY`.
    discrete : bool
        The log scores are those of the discretised predictive (integer targets).
    """

    whole: np.ndarray
    halves: np.ndarray
    log_score: np.ndarray
    n_low: np.ndarray
    discrete: bool

    def __add__(self, other: Any) -> CandidateScores:  # type: ignore[override]
        if other.whole.shape != self.whole.shape:
            raise ValueError(f"scores of {other.whole.shape[0]} and {self.whole.shape[0]} "
                             "candidates cannot be added.")
        return CandidateScores(self.whole + other.whole, self.halves + other.halves,
                               self.log_score + other.log_score, self.n_low + other.n_low,
                               self.discrete and other.discrete)

    def counts(self, candidate: int) -> HeldOutCounts:
        """The PIT counts of one candidate (what its recalibration map is built from)."""
        return HeldOutCounts(self.whole[candidate].copy(), self.halves[candidate].copy())


def _unit_mass(mixture: Any, y: np.ndarray) -> np.ndarray:
    """``F(y + 1/2) - F(y - 1/2)`` of every row, by component, each above its mean from the
    upper tail (``1 - F`` loses a far row's mass to rounding)."""
    w, m, v = mixture.weights, mixture.means, mixture.variances
    sd = np.sqrt(v)
    lo, hi = (y[:, None] - 0.5 - m) / sd, (y[:, None] + 0.5 - m) / sd
    upper = lo > 0
    mass = np.where(upper, special.ndtr(-lo) - special.ndtr(-hi),
                    special.ndtr(hi) - special.ndtr(lo))
    return (w * mass).sum(axis=1) / w.sum(axis=1)


def candidate_scores(mixtures: Sequence[Any], y: Any, discrete: bool) -> CandidateScores:
    """The :class:`CandidateScores` of held-out rows ``y`` under each candidate's mixture.

    Parameters
    ----------
    mixtures : sequence of basics.mixture.GaussianMixture
        One per candidate, the group's own mixture of the rows (one component per tree).
    y : array-like of shape (n_rows,)
        Finite targets.
    discrete : bool
        Score by the discretised predictive (an integer target,
        :func:`basics.discrete.is_integer_target`).

    Returns
    -------
    CandidateScores
    """
    y = np.asarray(y, dtype=np.float64)
    whole, halves, log_score, n_low = [], [], [], []
    for mixture in mixtures:
        counts = held_out_counts(mixture, y)
        whole.append(counts.whole)
        halves.append(counts.halves)
        if discrete:
            with np.errstate(divide="ignore"):
                rows = np.log(_unit_mass(mixture, y))
        else:
            rows = mixture.logpdf(y)
        rows = np.maximum(rows, np.finfo(np.float64).min / (y.size + 1))  # a finite sum
        log_score.append(float(rows.sum()))
        n_low.append(int(np.count_nonzero(rows < LOW_LOG_DENSITY)))
    return CandidateScores(np.array(whole, np.int64), np.array(halves, np.int64),
                           np.array(log_score), np.array(n_low, np.int64), bool(discrete))


def _map_log_slopes(counts: HeldOutCounts, group: int, model: int) -> float:
    """``sum_b n_b log R'(b)`` of the map :func:`extrapolated_map` builds from ``counts``."""
    pit_map = extrapolated_map(counts, group, model)
    slope = np.diff(pit_map(PIT_EDGES)) / np.diff(PIT_EDGES)
    live = counts.whole > 0
    return float(np.sum(counts.whole[live] * np.log(np.maximum(slope[live], 1e-300))))


def best_candidate(scores: CandidateScores, group: int, model: int) -> int:
    """Index of the candidate with the highest recalibrated held-out log score (module
    docstring).

    Parameters
    ----------
    scores : CandidateScores
    group, model : int
        Trees per calibration group and in the model (the map's extrapolation).

    Returns
    -------
    int
    """
    total = scores.log_score.astype(np.float64)
    n_rows = int(scores.whole[0].sum())
    if not scores.discrete and n_rows >= MIN_ROWS:
        total = total + np.array([_map_log_slopes(scores.counts(c), group, model)
                                  for c in range(total.size)])
    return int(np.argmax(total))


def held_out_scores(group: Any, X: Any, y: Any) -> CandidateScores | HeldOutCounts:
    """What a calibration group says of rows ``(X, y)`` it never saw: the scores of every
    candidate if it can score them (a Bayesian forest fit to learn its leaf prior, through
    its ``_candidate_scores(X, y)`` seam), else the PIT counts of its own mixture."""
    score = getattr(group, "_candidate_scores", None)
    scores = score(X, y) if score is not None else None
    if scores is not None:
        return scores
    return held_out_counts(group.predict_distribution(X), y)  # groups have no map


def settle(results: Sequence[Any], group: int, model: int) -> tuple[HeldOutCounts, dict]:
    """The groups' results (:func:`held_out_scores` per fold) summed, and the option chosen.

    Returns
    -------
    counts : basics.calibration.HeldOutCounts
        Of the chosen candidate, or the groups' own.
    params : dict
        ``{OPTION: value}`` of the chosen candidate; empty when the groups learn nothing.
    """
    if not any(isinstance(r, CandidateScores) for r in results):
        return sum(results, HeldOutCounts.empty()), {}
    if not all(isinstance(r, CandidateScores) for r in results):
        # a group too small to be a forest cannot score: every group counts under the
        # default strength, which the model then keeps
        default = CANDIDATES.index(LEAF_PRIOR_ROWS)
        return sum((r.counts(default) if isinstance(r, CandidateScores) else r
                    for r in results), HeldOutCounts.empty()), {}
    total = results[0]
    for r in results[1:]:
        total = total + r
    best = best_candidate(total, group, model)
    return total.counts(best), {OPTION: CANDIDATES[best]}
