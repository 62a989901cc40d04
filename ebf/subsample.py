"""Sub-sample forests (SSF), the baseline EBF beats (Taddy et al. 2015, Sec. 4).

An SSF cuts a seeded permutation of the rows into ``n_subsamples`` equal parts
(:func:`subsample_groups`) and fits one forest per part, with no trunk; its prediction pools
the parts' mixtures. Fitting, storing and restoring are :class:`ebf.ensemble._BranchedEnsemble`'s,
shared with the EBF.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any

import numpy as np
from sklearn.utils._param_validation import Interval

from basics import calibration as cal
from basics.mixture import GaussianMixture
from basics.pit import pit_counts
from basics.tasks import REGRESSION

from .ensemble import FitPlan, _BranchedEnsemble
from .trunk import Trunk


def subsample_groups(entropy: int, n: int, n_subsamples: int) -> list[np.ndarray]:
    """Rows of every sub-sample of an SSF (Sec. 4): a seeded permutation cut in equal parts.

    The permutation uses the root of the seed tree, ``SeedSequence(entropy)``; the forests
    use the keys ``(k,)`` and ``(k, tree)``, so the two never share a stream. ``ebf.dask``
    calls this same function and routes each row by its global row id.

    Parameters
    ----------
    entropy : int
        The model's resolved seed.
    n : int
        Number of training rows.
    n_subsamples : int
        Number of parts; the first ``n % n_subsamples`` parts have one row more.

    Returns
    -------
    groups : list of ndarray of int64
        Sorted row positions of every part.

    Examples
    --------
    >>> [g.size for g in subsample_groups(0, 7, 3)]
    [3, 2, 2]
    """
    rng = np.random.default_rng(np.random.SeedSequence(int(entropy)))
    perm = rng.permutation(int(n))
    return [np.sort(part) for part in np.array_split(perm, int(n_subsamples))]


#: Rows per block when a sub-sample forest predicts the rows of another (its mixture holds a
#: component per tree and row).
_BLOCK_ROWS = 16_384


def part_values(part: Any, A: np.ndarray, y: np.ndarray, task: str) -> np.ndarray:
    """What one sub-sample forest says of rows it never saw: its CDF at their targets
    (regression) or its class probabilities (classification), a block of rows at a time."""
    blocks = range(0, A.shape[0], _BLOCK_ROWS)
    if task == REGRESSION:
        out = [np.clip(part.predict_distribution(A[i:i + _BLOCK_ROWS]).cdf(
            y[i:i + _BLOCK_ROWS]), 0.0, 1.0) for i in blocks]
        return np.concatenate(out) if out else np.empty(0)
    return part.predict_proba(A)


def held_out_by_others(outputs: list, y: np.ndarray, positions: np.ndarray,
                       task: str) -> Any:
    """What the pool of the other sub-samples, none of which saw these rows, says of them.

    A row of sub-sample ``p`` was never seen by the forests of the others, so their pool
    (an SSF of ``n_subsamples - 1`` parts) is a held-out predictive at no cost: its CDF at
    the target is the mean of the parts' CDFs (every part weighs the same in the pool).
    Like the calibration groups of :mod:`basics.calibration`, it comes with the pools of the
    two halves of those parts, from which the map is extrapolated to all ``n_subsamples``.

    Parameters
    ----------
    outputs : list of ndarray
        The other parts' :func:`part_values` on these rows.
    y : ndarray
        Targets (class codes for classification).
    positions : ndarray of int64
        The rows' positions in the training set.
    task : {"regression", "classification"}

    Returns
    -------
    basics.calibration.HeldOutCounts (regression) or ``(positions, (first, second, codes))``
    """
    k = max(1, len(outputs) // 2)
    if task == REGRESSION:
        values = np.array(outputs)
        halves = [values[:k].mean(axis=0), values[k:].mean(axis=0) if len(values) > 1
                  else values[0]]
        return cal.HeldOutCounts(pit_counts(values.mean(axis=0)),
                                 pit_counts(halves[0]) + pit_counts(halves[1]))
    first = np.mean(outputs[:k], axis=0)
    second = np.mean(outputs[k:], axis=0) if len(outputs) > 1 else first
    return positions, (first, second, np.asarray(y, dtype=np.int64))


def others_held_out(held: list, task: str, n_parts: int) -> tuple:
    """``(held_out, group, model)`` for ``_set_auto_map`` from every sub-sample's
    :func:`held_out_by_others`, counted in sub-samples: the pools of ``n_parts - 1`` held
    out, extrapolated to ``n_parts``."""
    if task == REGRESSION:
        total = cal.HeldOutCounts.empty()
        for counts in held:
            total = total + counts
        return total, n_parts - 1, n_parts, "subsamples"
    return list(held), n_parts - 1, n_parts, "subsamples"


class _SSF(_BranchedEnsemble):
    _parts = "subsamples"
    _parameter_constraints: dict = {
        **_BranchedEnsemble._parameter_constraints,
        "n_subsamples": [Interval(Integral, 1, None, closed="left")],
    }

    def _plan_parts(self, n_rows: int, n_classes: int) -> dict:
        if n_rows < self.n_subsamples:
            raise ValueError(
                f"n_subsamples={self.n_subsamples} is more than n_samples={n_rows}; "
                "lower n_subsamples or pass more rows."
            )
        k = int(self.n_subsamples)
        sizes = np.full(k, n_rows // k, dtype=np.int64)
        sizes[: n_rows % k] += 1  # np.array_split's sizes, as in subsample_groups
        return {"subsample_sizes": sizes}

    def _compact_parts(self) -> tuple[list, Trunk | None, int, dict]:
        sizes = self.subsample_sizes_
        return self.subsamples_, None, int(np.sum(sizes)), {"subsample_sizes": sizes}

    def _fitted_parts(self, plan: FitPlan, branches: list, trunk: Trunk | None) -> dict:
        if len(branches) != len(plan.subsample_sizes):
            raise ValueError(f"an SSF needs one forest per sub-sample; got {len(branches)} for "
                             f"{len(plan.subsample_sizes)} sub-samples.")
        return {"subsamples_": branches, "subsample_sizes_": plan.subsample_sizes.copy()}

    def _fit(self, X: Any, y: Any, sample_weight: Any, crossfit: bool = False):
        """Fit; with ``crossfit``, return what the other sub-samples say of every row
        (:func:`held_out_by_others`), else self."""
        A, y, w, plan = self._prepare(X, y, sample_weight)
        groups = subsample_groups(plan.entropy, A.shape[0], self.n_subsamples)
        # one sub-sample: its own calibration groups, as an EBF branch
        branches, held = self._fit_groups(A, y, w, groups, plan, crossfit and len(groups) < 2)
        self._from_parts(plan, branches)
        if not crossfit:
            return self
        if held is not None:
            return held
        held = [held_out_by_others([part_values(s, A[rows], y[rows], self._task) for q, s in
                                    enumerate(self.subsamples_) if q != p], y[rows], rows,
                                   self._task)
                for p, rows in enumerate(groups)]
        return others_held_out(held, self._task, len(groups))

    def _get_state(self) -> dict:
        return self._state({"subsamples": self.subsamples_,
                            "subsample_sizes": self.subsample_sizes_})

    @staticmethod
    def _pool(outputs: list) -> Any:
        """The SSF's prediction from its sub-sample forests' outputs on the same rows, in
        sub-sample order: the concatenated mixture (Sec. 4), or the mean of the class
        probabilities. A seam of ``ebf.dask.sharded``, which predicts each forest from its
        own shard and pools the outputs with this."""
        if isinstance(outputs[0], GaussianMixture):
            return GaussianMixture.concat(list(outputs))
        return sum(outputs) / len(outputs)

    def _mixture(self, Xf: np.ndarray) -> GaussianMixture:
        return self._pool([s.predict_distribution(Xf) for s in self.subsamples_])

    def _proba(self, Xf: np.ndarray) -> np.ndarray:
        return self._pool([s.predict_proba(Xf) for s in self.subsamples_])
