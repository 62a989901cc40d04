"""Which rows calibrate a model: cross-fitted groups (``"auto"``), a holdout, the latest rows.

Recalibration (:mod:`basics.pit`, Kuleshov, Fenner & Ermon (2018), Sec. 3) learns a monotone
map of the PIT ``F(y|x)`` on rows the model was not fit on. ``calibrate=`` chooses them:

- ``"auto"``: every row, each predicted by a calibration group that never saw it (below);
- ``"holdout"``: a random ``fraction`` of the rows, not fit on. Row ``i`` is in it when a
  hash of ``(random_state, i)`` falls below ``fraction``, so the choice depends on the row's
  position alone and a cluster picks the same rows whatever the partitioning;
- ``"recent"``: the last ``fraction`` of the rows in their order, not fit on (for data that
  drifts: the map then corrects the model towards the latest behaviour);
- ``"none"``: no map.

Out-of-bag rows are not offered: a Bayesian forest weights every row by an Exp(1) draw
(Taddy et al. (2015), Algorithm 1), which is never zero, and a Mondrian tree sees all rows.

A recalibration map (:mod:`basics.pit`) must be learnt on predictions of rows the model was
not fit on. Holding rows out costs the model those rows. Instead, ``calibrate="auto"`` fits
the model on every row and, beside it, ``K`` small *calibration groups*: group ``k`` is the
same learner with :func:`group_trees` trees, fit on the rows outside fold ``k``, so it never
saw a row of fold ``k``. Every training row then has a held-out predictive, the mixture of
its group's trees, and the map is fit on the PIT values of all rows (Kuleshov, Fenner &
Ermon (2018), Sec. 3, Algorithm 1, on held-out rows chosen by K-fold cross-fitting). The
groups are dropped after the fit: the model keeps its own trees, fit on all rows.

Folds come from a hash of the row's position in the whole dataset and the model's seed
(:func:`row_folds`), so a fit on a cluster, which sees its rows partition by partition or
branch by branch, assigns them exactly as a fit in one process.

**Why groups beside the model, not fold-blind trees inside it.** Giving tree ``t`` of the
model weight zero on fold ``t mod K`` makes every row's held-out trees part of the model, at
no extra cost, but the forest then pools ``K`` groups fit on different rows, which spreads
its predictive more than any one group's held-out rows show: on California housing, a map
fit on 100 cross-fitted trees per fold (the whole model's size) and applied to such a
forest left a largest central coverage gap of 0.024 on test rows; applied to a forest of the
same trees fit on all rows, 0.008.

**Fewer trees, the same map.** The PIT of a mixture of ``m`` exchangeable trees is an
average over ``m`` draws, so its distribution over rows moves with ``m`` (a rank histogram
of ``m`` members puts ``2 / (m + 1)`` of the targets outside the members' range). A map
fit on groups of ``g`` trees and applied to ``T > g`` trees is therefore off in the tails.
:func:`extrapolated_map` extrapolates the PIT histogram linearly in ``1 / (m + 1)`` from the
whole groups (``m = g``) and their two halves (``m = g / 2``) to ``m = T``. Learners whose
trees are not an equal mixture of exchangeable draws (BART's sum of trees, SMC's particles)
cross-fit the whole model instead (``g = T``, nothing to extrapolate).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from scipy import special

from .pit import MIN_ROWS, PIT_EDGES, PITMap, pit_counts

__all__ = [
    "CALIBRATION_METHODS",
    "CalibratedFitMixin",
    "DEFAULT_FRACTION",
    "GROUP_SHARE",
    "MIN_GROUP_TREES",
    "N_FOLDS",
    "HeldOutCounts",
    "auto_provenance",
    "crossfit",
    "holdout_seed",
    "extrapolated_map",
    "fold_seed",
    "group_halves",
    "group_trees",
    "held_out_counts",
    "position_uniform",
    "row_folds",
    "tree_count_weight",
    "calibration_split",
    "check_fraction",
    "holdout_mask",
    "min_training_rows",
    "recent_start",
    "subset_rows",
]

#: Folds of the cross-fitting: every calibration group is fit on ``(K - 1) / K`` of the rows.
N_FOLDS = 5
#: Share of the model's trees in each calibration group (``g = ceil(GROUP_SHARE * T)``, at
#: least :data:`MIN_GROUP_TREES` and at most ``T``): the groups together cost ``K * g * (K -
#: 1) / K`` trees, ``0.4 T`` with 5 folds and 100 trees.
GROUP_SHARE = 0.1
#: Fewest trees of a calibration group: extrapolating from groups of 2 trees and their
#: 1-tree halves left a 20-tree forest worse calibrated than none (largest central gap 0.097
#: against 0.038 raw on a test set of 2,000 rows); from 4, 0.040; from 6, 0.022.
MIN_GROUP_TREES = 6

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
#: Spawn-key tag of the calibration groups' seeds (no branch or tree key has three entries).
_GROUP_KEY = 0xCA1B


def position_uniform(seed: int, positions: Any) -> np.ndarray:
    """A uniform [0, 1) number per row position: SplitMix64 of ``seed`` and the position.

    The same row gets the same number in any process, whatever the partitioning.

    Examples
    --------
    >>> u = position_uniform(0, np.arange(3))
    >>> bool(np.all((u >= 0) & (u < 1))), u[1] == position_uniform(0, [1])[0]
    (True, np.True_)
    """
    positions = np.asarray(positions, dtype=np.int64)
    with np.errstate(over="ignore"):
        z = (positions.astype(np.uint64) + np.uint64(1)) * _GOLDEN + np.uint64(
            int(seed) % 2**64) * _M1
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / float(2**53)


#: How a model chooses its calibration rows (``calibrate=``): cross-fitted groups, a random
#: holdout, the most recent rows, or none.
CALIBRATION_METHODS = ("auto", "holdout", "recent", "none")
#: Default share of the rows kept for calibration.
DEFAULT_FRACTION = 0.1


def check_fraction(fraction: float) -> float:
    """``fraction`` as a float in (0, 1), else a ValueError naming it."""
    fraction = float(fraction)
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"the calibration fraction must be in (0, 1); got {fraction}.")
    return fraction


def holdout_mask(positions: Any, fraction: float, random_state: int | None = 0) -> np.ndarray:
    """Whether each row (by its position in the whole dataset) is in the holdout set.

    Parameters
    ----------
    positions : array-like of int
        0-based positions of the rows in the dataset.
    fraction : float in (0, 1)
    random_state : int or None, default=0
        None means 0 (the choice must be repeatable to be the same on every worker).

    Returns
    -------
    ndarray of bool

    Examples
    --------
    >>> m = holdout_mask(np.arange(100_000), 0.1)
    >>> round(float(m.mean()), 2)
    0.1
    """
    fraction = check_fraction(fraction)
    seed = 0 if random_state is None else int(random_state)
    return position_uniform(seed, np.asarray(positions, dtype=np.int64)) < fraction


def recent_start(n_rows: int, fraction: float) -> int:
    """Position of the first row of the most recent ``fraction`` of ``n_rows`` rows."""
    fraction = check_fraction(fraction)
    return int(n_rows) - int(np.ceil(fraction * int(n_rows)))


def min_training_rows(method: str = "none", fraction: float = DEFAULT_FRACTION) -> int:
    """Fewest rows a fit with this recalibration can use: at least one row to fit on and,
    with a method, :data:`basics.pit.MIN_ROWS` calibration rows.

    For ``"recent"`` that is exact (:func:`recent_start`); ``"holdout"`` picks about
    ``fraction`` of the rows at random, so it may still find too few near this bound.

    Examples
    --------
    >>> min_training_rows("none"), min_training_rows("recent", 0.1)
    (1, 491)
    """
    from basics.pit import MIN_ROWS

    if method == "none":
        return 1
    n = max(2, int((MIN_ROWS - 1) / check_fraction(fraction)))  # the first that may do
    while int(n) - recent_start(n, fraction) < MIN_ROWS or recent_start(n, fraction) < 1:
        n += 1
    return n


def calibration_split(n_rows: int, method: str = "recent", fraction: float = DEFAULT_FRACTION,
                      random_state: int | None = 0) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the rows to fit on and of the calibration rows.

    Parameters
    ----------
    n_rows : int
    method : {"recent", "holdout"}, default="recent"
        The last ``fraction`` of the rows (in their order), or a random ``fraction``
        (:func:`holdout_mask`).
    fraction : float in (0, 1), default=0.1
    random_state : int or None, default=0
        For ``"holdout"``.

    Returns
    -------
    fit_rows, calibration_rows : ndarray of int64
        Increasing positions; together they are ``0 .. n_rows - 1``.

    Examples
    --------
    >>> fit, cal = calibration_split(10, "recent", 0.2)
    >>> cal.tolist()
    [8, 9]
    """
    positions = np.arange(int(n_rows), dtype=np.int64)
    if method == "recent":
        in_cal = positions >= recent_start(n_rows, fraction)
    elif method == "holdout":
        in_cal = holdout_mask(positions, fraction, random_state)
    else:
        raise ValueError(f"method must be 'recent' or 'holdout'; got {method!r}.")
    return positions[~in_cal], positions[in_cal]


def subset_rows(data: Any, positions: np.ndarray) -> Any:
    """The rows at ``positions`` of a DataFrame or array."""
    return data.iloc[positions] if hasattr(data, "iloc") else np.asarray(data)[positions]


def row_folds(positions: Any, seed: int, n_folds: int = N_FOLDS) -> np.ndarray:
    """The fold ``0 .. n_folds - 1`` of every row, from its position and the model's seed.

    Parameters
    ----------
    positions : array-like of int
        0-based positions of the rows in the whole training set.
    seed : int
        The model's resolved seed (:func:`basics.seeds.resolve_entropy`).
    n_folds : int, default=5

    Returns
    -------
    ndarray of int64

    Examples
    --------
    >>> f = row_folds(np.arange(100_000), seed=0)
    >>> np.round(np.bincount(f) / f.size, 2).tolist()
    [0.2, 0.2, 0.2, 0.2, 0.2]
    """
    # a different stream from the holdout choice of the same seed (seed + 1 shifted)
    u = position_uniform(int(seed) ^ 0x5BD1E995, positions)
    return np.minimum((u * n_folds).astype(np.int64), n_folds - 1)


def fold_seed(entropy: int, fold: int) -> int:
    """Seed of calibration group ``fold``: ``SeedSequence(entropy, spawn_key=(fold, 0, tag))``.

    Three-entry keys never meet the branch ``(b,)`` and tree ``(b, t)`` keys of the model's
    own seeds (:mod:`ebf.bootstrap`), so the groups draw independently of the model.
    """
    seq = np.random.SeedSequence(int(entropy), spawn_key=(int(fold), 0, _GROUP_KEY))
    return int(seq.generate_state(1)[0])


def group_trees(n_trees: int, ensemble: bool = True) -> int:
    """Trees of each calibration group of a model with ``n_trees`` trees.

    ``ensemble=False`` (a learner whose trees are not exchangeable mixture components):
    the model's own count (whole-model cross-fitting).

    Examples
    --------
    >>> group_trees(100), group_trees(10), group_trees(3), group_trees(10, ensemble=False)
    (10, 6, 3, 10)
    """
    n_trees = int(n_trees)
    if not ensemble:
        return n_trees
    return min(n_trees, max(MIN_GROUP_TREES, int(np.ceil(GROUP_SHARE * n_trees - 1e-9))))


def auto_provenance(rows: int, group: int, model: int, method: str = "folds") -> dict:
    """The ``calibration_`` record of a ``calibrate="auto"`` map: ``"folds"`` (calibration
    groups: folds, trees per group and in the model) or ``"subsamples"`` (a sub-sample
    forest's rows held out by its other sub-samples: ``parts``, the sub-samples)."""
    if method == "subsamples":
        return {"method": method, "rows": int(rows), "parts": int(model)}
    return {"method": "folds", "rows": int(rows), "folds": N_FOLDS, "group_trees": int(group),
            "model_trees": int(model)}


def group_halves(group: int) -> tuple[int, int]:
    """The two halves a group of ``group`` (at least 2) trees is fit as."""
    first = int(group) // 2
    return first, int(group) - first


def tree_count_weight(group: float, model: float) -> float:
    """``a`` of the linear extrapolation in ``x(m) = 1 / (m + 1)`` from groups of ``group``
    trees and their halves to ``model`` trees: the value at ``model`` is ``a`` times the
    groups' plus ``1 - a`` times the halves' (1 when ``model <= group``)."""
    if model <= group:
        return 1.0
    x = lambda m: 1.0 / (m + 1.0)  # noqa: E731
    return 1.0 + (x(model) - x(group)) / (x(group) - x(group / 2.0))


class HeldOutCounts(NamedTuple):
    """PIT histograms (:func:`basics.pit.pit_counts`) of held-out rows under their
    calibration group: ``whole`` of the group's mixture, ``halves`` of each half of its
    components (two values per row). Integer counts, so sums over branches, partitions or
    workers are exact."""

    whole: np.ndarray
    halves: np.ndarray

    @classmethod
    def empty(cls) -> HeldOutCounts:
        z = np.zeros(PIT_EDGES.size - 1, np.int64)
        return cls(z, z.copy())

    def __add__(self, other: Any) -> HeldOutCounts:  # type: ignore[override]
        return HeldOutCounts(self.whole + other.whole, self.halves + other.halves)

    @property
    def n_rows(self) -> int:
        return int(self.whole.sum())


def _component_cdf(weights: np.ndarray, means: np.ndarray, variances: np.ndarray,
                   y: np.ndarray) -> np.ndarray:
    """Weighted CDF of the components at ``y`` (rows with zero weight in the slice: NaN)."""
    c = special.ndtr((y[:, None] - means) / np.sqrt(variances))
    total = weights.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.clip((weights * c).sum(axis=1) / total, 0.0, 1.0)


def held_out_counts(mixture: Any, y: Any) -> HeldOutCounts:
    """The :class:`HeldOutCounts` of rows ``y`` under their group's mixture.

    Parameters
    ----------
    mixture : basics.mixture.GaussianMixture
        The group's own predictive mixture of the rows (one component per tree).
    y : array-like of shape (n_rows,)
        Finite targets.

    Returns
    -------
    HeldOutCounts
    """
    y = np.asarray(y, dtype=np.float64)
    w, m, v = mixture.weights, mixture.means, mixture.variances
    whole = _component_cdf(w, m, v, y)
    k = w.shape[1]
    if k < 2:  # one component (a constant branch): its halves are itself
        halves = [whole, whole]
    else:
        cut = k // 2
        halves = [_component_cdf(w[:, s], m[:, s], v[:, s], y)
                  for s in (slice(0, cut), slice(cut, k))]
        halves = [np.where(np.isnan(h), whole, h) for h in halves]  # a half of padding only
    return HeldOutCounts(pit_counts(whole), pit_counts(halves[0]) + pit_counts(halves[1]))


def extrapolated_map(counts: HeldOutCounts, group: int, model: int,
                     n_knots: int | None = None) -> PITMap:
    """The PIT map of a model of ``model`` trees from held-out counts of ``group``-tree groups.

    The cumulative PIT histogram ``C_m`` is taken linear in ``x(m) = 1 / (m + 1)`` through
    the groups (``m = group``) and their halves (``m = group / 2``) and evaluated at
    ``m = model``, then made monotone (module docstring). With ``group == model`` (whole
    cross-fitting) it is the map of the groups' counts.

    Parameters
    ----------
    counts : HeldOutCounts
    group, model : int
        Trees per calibration group and in the model.
    n_knots : int, optional
        As in :meth:`basics.pit.PITMap.from_counts`.

    Returns
    -------
    basics.pit.PITMap

    Raises
    ------
    ValueError
        With fewer than :data:`basics.pit.MIN_ROWS` held-out rows.
    """
    n = counts.n_rows
    if n < MIN_ROWS:
        raise ValueError(f"calibration needs at least {MIN_ROWS} rows with a target; got {n}.")
    whole = np.cumsum(counts.whole, dtype=np.float64)
    if int(model) <= int(group):
        target = whole
    else:
        half = np.cumsum(counts.halves, dtype=np.float64) / 2.0
        a = tree_count_weight(float(group), float(model))
        target = a * whole + (1.0 - a) * half
    target = np.maximum.accumulate(np.clip(target, 0.0, float(n)))
    target[-1] = float(n)
    # the map is fit from integer counts: scale so rounding moves no knot by more than 1/16th
    # of a row, then keep the knots of n rows
    scaled = np.diff(np.round(16.0 * target), prepend=0.0).astype(np.int64)
    if n_knots is None:
        from .pit import MAX_KNOTS, ROWS_PER_KNOT

        n_knots = int(np.clip(n // ROWS_PER_KNOT, 4, MAX_KNOTS))
    return PITMap.from_counts(scaled, n_knots)


def crossfit(fit_group: Callable[[np.ndarray, int], Any],
             held_out: Callable[[Any, np.ndarray], Any],
             positions: Any, seed: int, n_folds: int = N_FOLDS) -> list:
    """Fit the ``n_folds`` calibration groups; what each says of the rows it never saw.

    Parameters
    ----------
    fit_group : callable ``fit_group(keep, fold) -> fitted``
        Fits a group on the rows where the boolean mask ``keep`` is True (those outside
        ``fold``).
    held_out : callable ``held_out(fitted, rows) -> result``
        What the group predicts of the rows (integer indices, those of ``fold``): their
        :class:`HeldOutCounts` (regressors) or class probabilities (classifiers).
    positions : array-like of int
        The rows' positions in the whole training set (:func:`row_folds`).
    seed : int
        The model's resolved seed.
    n_folds : int, default=5

    Returns
    -------
    list of ``(rows, result)``
        One per fold that has rows and leaves rows to fit on.
    """
    folds = row_folds(positions, seed, n_folds)
    out = []
    for k in range(n_folds):
        keep = folds != k
        if keep.all() or not keep.any():  # a fold with no rows, or with every row
            continue
        rows = np.flatnonzero(~keep)
        out.append((rows, held_out(fit_group(keep, k), rows)))
    return out


def _n_rows(y: Any) -> int:
    return int(np.asarray(y).shape[0])


def holdout_seed(estimator: Any) -> int:
    """The seed of a holdout choice: the estimator's integer ``random_state``, else 0 (the
    choice must be repeatable to be the same on every worker)."""
    rs = getattr(estimator, "random_state", None)
    return int(rs) if isinstance(rs, (int, np.integer)) and not isinstance(rs, bool) else 0


class CalibratedFitMixin:
    """``fit`` as the ``calibrate`` parameter says, for regressors and classifiers alike.

    The host provides ``recalibrate(X, y)`` (a map from held-out rows), ``_held_out(fitted,
    X, y)`` (what a calibration group says of rows it never saw), ``_set_auto_map(held)``
    (the map of ``"auto"`` from those) and ``_set_provenance(dict)``.
    """

    def _calibrated_fit(self, fit: Callable, X: Any, y: Any, sample_weight: Any) -> Any:
        """Fit as ``calibrate`` says (module docstring).

        ``fit(X, y, sample_weight, crossfit)`` fits the model on the rows it is given (with
        no map). When ``crossfit`` is true it may return the tuple :meth:`_set_auto_map`
        takes (the ensembles fit their branches' groups themselves); anything else lets
        :meth:`_crossfit` fit the groups as clones of the model. ``"auto"`` with fewer than
        :data:`basics.pit.MIN_ROWS` rows leaves the model without a map.
        """
        method = getattr(self, "calibrate", "none")
        if y is None:  # the fit itself says what is wrong
            fit(X, y, sample_weight, False)
            return self
        if method in ("holdout", "recent"):
            n = _n_rows(y)
            fit_rows, cal_rows = calibration_split(n, method, DEFAULT_FRACTION,
                                                   holdout_seed(self))
            if cal_rows.size < MIN_ROWS or fit_rows.size == 0:
                raise ValueError(
                    f"calibrate={method!r} keeps {DEFAULT_FRACTION:.0%} of the rows to "
                    f"calibrate on, at least {MIN_ROWS}; {n} rows give {cal_rows.size}. Use "
                    "calibrate='auto' (no rows held out) or 'none'.")
            take = lambda a, r: None if a is None else subset_rows(a, r)  # noqa: E731
            fit(take(X, fit_rows), take(y, fit_rows), take(sample_weight, fit_rows), False)
            self.recalibrate(take(X, cal_rows), take(y, cal_rows))
            self._set_provenance({"method": method, "rows": int(cal_rows.size)})
            return self
        auto = method == "auto" and _n_rows(y) >= MIN_ROWS  # else too few rows for a map
        held = fit(X, y, sample_weight, auto)
        if auto:
            self._set_auto_map(held if isinstance(held, tuple) else self._crossfit(
                X, y, sample_weight))
        return self

    def _crossfit(self, X: Any, y: Any, sample_weight: Any) -> tuple:
        """``(per-fold results, group_trees, model_trees)`` of clones of the model with
        :func:`group_trees` trees, each fit on the rows outside one fold and predicting the
        rows of its fold (a model whose trees are an equal mixture: a forest)."""
        from sklearn.base import clone

        target, y = y, np.asarray(y)  # the groups get the target as given (its name)
        model = int(self.n_estimators)
        group = group_trees(model)
        seed = int(self._calibration_seed())

        def fit_group(keep: np.ndarray, fold: int) -> list:
            rows = np.flatnonzero(keep)
            w = None if sample_weight is None else np.asarray(sample_weight)[rows]
            return [self._fit_group(
                        clone(self).set_params(n_estimators=size, calibrate="none",
                                               random_state=fold_seed(seed, fold + j * N_FOLDS)),
                        subset_rows(X, rows), subset_rows(target, rows), w)
                    for j, size in enumerate(self._group_parts(group))]

        def held_out(fitted: list, rows: np.ndarray) -> Any:
            return self._held_out(fitted, subset_rows(X, rows), y[rows])

        return crossfit(fit_group, held_out, np.arange(y.size), seed), group, model

    @staticmethod
    def _fit_group(group: Any, X: Any, y: Any, sample_weight: Any) -> Any:
        """Fit one calibration group (a clone of the model with its group's trees, no map);
        a model that learns an option from its groups fits them so that they can score it
        (:mod:`basics.prior_choice`)."""
        return group.fit(X, y, **({} if sample_weight is None else {
            "sample_weight": sample_weight}))

    #: Whether a calibration group is fit as two halves (classifiers: their class map is
    #: extrapolated from the groups and their halves) rather than whole.
    _halved_groups = False

    def _group_parts(self, group: int) -> tuple[int, ...]:
        """Trees of the forests a calibration group of ``group`` trees is fit as."""
        return group_halves(group) if self._halved_groups and group >= 2 else (int(group),)

    def _calibration_seed(self) -> int:
        """The seed of the folds and calibration groups: the model's resolved seed."""
        entropy = getattr(self, "entropy_", None)
        return int(entropy) if entropy is not None else holdout_seed(self)
