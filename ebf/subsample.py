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

from basics.mixture import GaussianMixture

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
        """Fit; with ``crossfit``, return the counts of :meth:`_crossfit_groups` (each
        sub-sample's groups: the map is learnt for one sub-sample's forest, not for the
        pool of all of them, which is wider)."""
        A, y, w, plan = self._prepare(X, y, sample_weight)
        groups = subsample_groups(plan.entropy, A.shape[0], self.n_subsamples)
        self._from_parts(plan, self._fit_groups(A, y, w, groups, plan))
        return self._crossfit_groups(A, y, w, groups, plan) if crossfit else self

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
