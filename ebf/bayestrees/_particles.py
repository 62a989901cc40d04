"""The weighted trees an SMC run returns (thesis Alg. 3.1, eq. 2.1), stored and predicted.

:class:`ParticleTrees` holds the final particles of every island as one flat forest: the
live nodes of all trees concatenated (children as global node indices, tree ``t`` owns
nodes ``offsets[t] <= j < offsets[t + 1]``, its root is ``offsets[t]``), every node's summed
per-row statistics (``LeafLikelihood.row_stats``: class counts, or ``[n, sum y, sum y^2]``),
each tree's weight normalised within its island, and each island's log marginal likelihood
estimate. Identical particles of an island (copies made by resampling that never diverged)
are stored once with their weights summed, which leaves the weighted mixture unchanged.

Predictions average over trees by weight (eq. 2.1): :func:`weighted_values` (a weighted sum
of per-node vectors, e.g. the Dirichlet predictive of the leaf) and :func:`leaf_values` (one
column per tree, e.g. the components of a Gaussian mixture). Routing is ``x <= threshold``
goes left, as in training. A state read from a file is checked by :meth:`from_state` before
any kernel sees it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from basics.bounds import check_counts, check_sums
from basics.flat_tree import INDEX, NO_NODE, check_tree_structure
from basics.jit import JIT
from basics.validation import state_array

from .._tree_validation import check_nodes
from ._records import Splits
from ._trees import descend

__all__ = ["ParticleTrees", "leaf_values", "weighted_values"]

#: Island weights sum to one up to rounding.
_WEIGHT_TOL = 1e-9

#: The combinations of islands (``ParticleTrees.tree_weights``).
COMBINE = ("equal", "evidence")


@dataclass(frozen=True, eq=False)
class ParticleTrees:
    """The weighted particles of all islands as one flat forest (module docstring).

    Attributes
    ----------
    feature, left, right : ndarray of shape (n_nodes,), int64
        Split dimension (``-1`` at leaves) and global child indices (``-1`` at leaves).
    threshold : ndarray of shape (n_nodes,), float64
        ``x[feature] <= threshold`` goes left; NaN at leaves.
    stats : ndarray of shape (n_nodes, n_stats), float64
        Summed per-row statistics of every node's training rows.
    offsets : ndarray of shape (n_trees + 1,), int64
        First node of every tree, then ``n_nodes``.
    weight : ndarray of shape (n_trees,), float64
        Normalised weight of every tree within its island.
    islands : ndarray of shape (n_islands + 1,), int64
        First tree of every island, then ``n_trees``.
    log_evidence : ndarray of shape (n_islands,), float64
        log p(Y | X) estimated by every island (``W / C`` of Alg. 3.1).
    n_stages, n_resampled : ndarray of shape (n_islands,), int64
        Stages run and resampling steps taken by every island.
    """

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    stats: np.ndarray
    offsets: np.ndarray
    weight: np.ndarray
    islands: np.ndarray
    log_evidence: np.ndarray
    n_stages: np.ndarray
    n_resampled: np.ndarray

    INT_ARRAYS = ("feature", "left", "right", "offsets", "islands", "n_stages", "n_resampled")
    FLOAT_ARRAYS = ("threshold", "stats", "weight", "log_evidence")

    @property
    def n_trees(self) -> int:
        return int(self.offsets.shape[0] - 1)

    @property
    def n_islands(self) -> int:
        return int(self.islands.shape[0] - 1)

    def splits(self) -> Splits:
        """The links of every tree as a :class:`~.records.Splits` record (the descent's)."""
        return Splits(self.feature, self.threshold, self.left, self.right)

    @property
    def roots(self) -> np.ndarray:
        return self.offsets[:-1]

    @property
    def island_of_tree(self) -> np.ndarray:
        """Island of every tree, shape (n_trees,)."""
        return np.repeat(np.arange(self.n_islands), np.diff(self.islands))

    @property
    def n_leaves(self) -> np.ndarray:
        """Leaves of every tree, shape (n_trees,)."""
        leaf = (self.feature == NO_NODE).astype(INDEX)
        return np.add.reduceat(leaf, self.roots) if self.n_trees else np.zeros(0, INDEX)

    @property
    def max_depth(self) -> np.ndarray:
        """Depth of the deepest leaf of every tree (root 0), shape (n_trees,)."""
        return _max_depths(self.left, self.right, self.offsets)

    def tree_weights(self, combine: str = "equal") -> np.ndarray:
        """Weight of every tree in the predictive average over all islands (sums to one).

        ``"equal"``: islands averaged uniformly (thesis Sec. 3.4.1.3), tree weight
        ``w_ic / I``. ``"evidence"``: islands weighted by their marginal-likelihood estimates
        ``Z_i`` (all particles as one importance sample), ``w_ic Z_i / sum_i Z_i``.
        """
        if combine not in COMBINE:
            raise ValueError(f"combine={combine!r} is not one of {list(COMBINE)}")
        if combine == "equal":
            island = np.full(self.n_islands, 1.0 / self.n_islands)
        else:
            z = self.log_evidence - self.log_evidence.max()
            island = np.exp(z) / np.exp(z).sum()
        return self.weight * island[self.island_of_tree]

    def log_evidence_total(self) -> float:
        """log of the mean of the islands' estimates ``Z_i``: the estimate of all particles."""
        top = float(self.log_evidence.max())
        return top + float(np.log(np.mean(np.exp(self.log_evidence - top))))

    def get_state(self) -> dict[str, np.ndarray]:
        """The arrays by name (the persistence contract, ``docs/model-format.md``)."""
        return {name: getattr(self, name) for name in (*self.INT_ARRAYS, *self.FLOAT_ARRAYS)}

    @classmethod
    def from_state(cls, state: dict[str, Any], *, n_features: int, n_stats: int,
                   regression: bool) -> ParticleTrees:
        """Particle trees from an untrusted state, after checking everything a kernel or a
        prediction relies on.

        Dtypes and shapes; ``offsets`` increasing from 0 to the number of nodes and
        ``islands`` from 0 to the number of trees (every tree and island non-empty); every
        tree well formed (:func:`basics.flat_tree.check_tree_structure`); statistics
        finite and within :mod:`basics.bounds` (``regression``: ``[n, sum(y - mu_0),
        sum((y - mu_0)^2)]``, a count of rows and the sums of ``n`` centred targets; else
        class counts of rows); weights finite, non-negative and summing to one in every
        island; finite log evidences; non-negative stage counts.

        Raises
        ------
        ValueError
            Naming the entry, or the tree and node, and what is wrong.
        """
        for name in ("left", "offsets", "islands"):
            if not isinstance(state.get(name), np.ndarray) or state[name].ndim != 1:
                raise ValueError(f"particle trees: {name} must be a 1-D array")
            if state[name].shape[0] < 2 and name != "left":
                raise ValueError(f"particle trees: {name} needs at least two entries (a "
                                 "start and an end)")
        n = state["left"].shape[0]
        n_trees = state["offsets"].shape[0] - 1
        n_islands = state["islands"].shape[0] - 1
        shapes = {"stats": (n, n_stats), "offsets": (n_trees + 1,), "islands": (n_islands + 1,),
                  "weight": (n_trees,), "log_evidence": (n_islands,),
                  "n_stages": (n_islands,), "n_resampled": (n_islands,)}
        arrs = {}
        for name in (*cls.INT_ARRAYS, *cls.FLOAT_ARRAYS):
            dtype = INDEX if name in cls.INT_ARRAYS else np.float64
            try:
                arrs[name] = state_array(state, name, dtype, shapes.get(name, (n,)), owned=False)
            except KeyError:
                raise ValueError(f"particle trees: the state lacks the array {name!r}") from None
        _check_offsets(arrs["offsets"], n, "offsets", "nodes")
        _check_offsets(arrs["islands"], n_trees, "islands", "trees")
        off = arrs["offsets"]
        check_tree_structure(arrs["left"], arrs["right"], arrs["feature"], arrs["threshold"],
                             off, n_features)
        stats = arrs["stats"]
        check_nodes(~np.isfinite(stats).all(axis=1),
                    lambda j: f"stats {stats[j]} are not finite", off)
        nonnegative = [0, 2] if regression else slice(None)  # counts, sums of squares
        check_nodes((stats[:, nonnegative] < 0).any(axis=1),
                    lambda j: f"stats {stats[j]} hold a negative count or sum of squares", off)
        check_counts("trees.stats (counts)", stats[:, 0] if regression else stats)
        if regression:
            check_sums("trees.stats", stats[:, 1:], stats[:, 0])
        w = arrs["weight"]
        if not (np.isfinite(w).all() and (w >= 0).all()):
            raise ValueError("particle trees: weight holds negative or non-finite values")
        sums = np.add.reduceat(w, arrs["islands"][:-1])
        bad = np.flatnonzero(np.abs(sums - 1.0) > _WEIGHT_TOL)
        if bad.size:
            raise ValueError(f"particle trees: the weights of island {int(bad[0])} sum to "
                             f"{float(sums[bad[0]]):.6g}, not 1")
        if not np.isfinite(arrs["log_evidence"]).all():
            raise ValueError("particle trees: log_evidence holds non-finite values")
        for name in ("n_stages", "n_resampled"):
            if (arrs[name] < 0).any():
                raise ValueError(f"particle trees: {name} holds negative counts")
        return cls(**arrs)

    def check_rows(self, X: np.ndarray) -> np.ndarray:
        """``X`` as C-contiguous float64 rows with a column for every split feature."""
        X = np.ascontiguousarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"X must be a 2-D array; got shape {X.shape}.")
        if self.feature.size and X.shape[1] <= int(self.feature.max()):
            raise ValueError(f"X has {X.shape[1]} columns but the trees split on column "
                             f"{int(self.feature.max())}.")
        return X


def _check_offsets(off: np.ndarray, total: int, name: str, what: str) -> None:
    if off.shape[0] < 2 or off[0] != 0 or off[-1] != total or np.any(np.diff(off) <= 0):
        raise ValueError(f"particle trees: {name} must increase from 0 to the number of "
                         f"{what} ({total}) in steps of at least one")


def weighted_values(trees: ParticleTrees, X: np.ndarray, tree_weight: np.ndarray,
                    value: np.ndarray) -> np.ndarray:
    """``sum_t tree_weight[t] * value[leaf_t(x)]`` for every row (eq. 2.1).

    Parameters
    ----------
    trees : ParticleTrees
    X : ndarray of shape (n_rows, n_features)
    tree_weight : ndarray of shape (n_trees,)
    value : ndarray of shape (n_nodes, k)
        A vector per node (e.g. the leaf's Dirichlet predictive).

    Returns
    -------
    ndarray of shape (n_rows, k)
    """
    X = trees.check_rows(X)
    out = np.zeros((X.shape[0], value.shape[1]))
    _weighted_kernel(X, trees.splits(), trees.roots, tree_weight, value, out)
    return out


def leaf_values(trees: ParticleTrees, X: np.ndarray,
                value: np.ndarray) -> tuple[np.ndarray, ...]:
    """``value[leaf_t(x), k]`` for every row, tree and column ``k`` of ``value``.

    Returns
    -------
    tuple of ndarray of shape (n_rows, n_trees), one per column of ``value``
    """
    X = trees.check_rows(X)
    out = np.empty((value.shape[1], X.shape[0], trees.n_trees))
    _gather_kernel(X, trees.splits(), trees.roots, value, out)
    return tuple(out)


# ---------------------------------------------------------------------------------- kernels


@njit(**JIT)
def _weighted_kernel(X, splits, roots, tree_weight, value, out):  # pragma: no cover - numba
    for t in range(roots.shape[0]):  # tree-major: one tree's nodes stay in cache
        w = tree_weight[t]
        for i in range(X.shape[0]):
            leaf = descend(splits, X, i, roots[t])
            for k in range(value.shape[1]):
                out[i, k] += w * value[leaf, k]


@njit(**JIT)
def _gather_kernel(X, splits, roots, value, out):  # pragma: no cover - numba
    for t in range(roots.shape[0]):
        for i in range(X.shape[0]):
            leaf = descend(splits, X, i, roots[t])
            for k in range(value.shape[1]):
                out[k, i, t] = value[leaf, k]


@njit(**JIT)
def _max_depths(left, right, offsets):  # pragma: no cover - numba
    depth = np.zeros(left.shape[0], INDEX)
    out = np.zeros(offsets.shape[0] - 1, INDEX)
    for t in range(offsets.shape[0] - 1):
        for j in range(offsets[t], offsets[t + 1]):  # children come after their parent
            if left[j] != NO_NODE:
                depth[left[j]] = depth[j] + 1
                depth[right[j]] = depth[j] + 1
            out[t] = max(out[t], depth[j])
    return out
