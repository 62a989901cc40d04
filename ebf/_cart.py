"""Weighted CART trees as flat arrays, and the numba kernels that descend them.

Every tree of a forest is a weighted-sample CART fit (Taddy, Chen, Yu & Wyle 2015,
Sec. 2.2): a histogram CART tree over bin edges (:mod:`ebf._hist_tree`, ``splitter="hist"``)
or scikit-learn's ``DecisionTreeRegressor`` / ``DecisionTreeClassifier`` with
``sample_weight`` (``splitter="exact"``; the paper's own implementation adjusted
scikit-learn's forest weights, Sec. 2.3, footnote 4). Rows of weight zero are ignored by
both, as a Poisson bootstrap needs. The fitted trees are converted into one
:class:`CartForest`: the nodes of all trees concatenated, children as global node indices,
one root per tree.

Leaf statistics (the paper's ``theta``-weighted quantities, eq. 4):

- regression: ``value[j, 0]`` is the weighted mean of the node (scikit-learn's value, so a
  tree predicts exactly what scikit-learn predicts) and ``variance[j]`` the weighted
  within-node variance ``sum_i w_i (y_i - mu_j)^2 / sum_i w_i``, computed in two passes from
  the training rows (leaves) and combined exactly up the tree (internal nodes), which avoids
  the cancellation of scikit-learn's one-pass impurity ``E[y^2] - E[y]^2``;
- classification: ``value[j, c]`` is the weighted fraction of class ``c`` in the *global*
  class columns ``0 .. n_classes - 1``, even when the rows the tree saw lack some classes;
  ``variance`` is zero.

Routing follows scikit-learn exactly: ``float32(x) <= threshold`` goes left, with the float64
threshold scikit-learn stores, so :func:`apply` gives the same leaves as ``tree.apply``. The
histogram trees bin ``float32(x)`` and store the bin edge as threshold, so the same rule
routes every training row to the leaf it was grown in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
from numba import njit

from basics.flat_tree import INDEX, NO_NODE
from basics.jit import JIT

from ._leaf_knots import KNOT_ARRAYS, checked_knot_arrays, empty_knots, knot_rows, knot_width
from ._routing import leaf_of, split_trees
from ._tree_validation import checked_forest_arrays

__all__ = [
    "CartForest",
    "apply",
    "knot_components",
    "leaf_components",
    "mean_value",
    "regression_moments",
]




@dataclass(frozen=True, eq=False)
class CartForest:
    """All trees of a forest as flat arrays (struct of arrays).

    Node ``j`` belongs to tree ``t`` iff ``offsets[t] <= j < offsets[t + 1]``; the root of
    tree ``t`` is ``offsets[t]``. Leaves have ``left == right == -1``, ``feature == -1`` and
    ``threshold == nan``.

    Attributes
    ----------
    left, right : ndarray of shape (n_nodes,), int64
        Global indices of the children (``-1`` at leaves).
    feature : ndarray of shape (n_nodes,), int64
        Split feature (``-1`` at leaves).
    threshold : ndarray of shape (n_nodes,), float64
        ``float32(x[feature]) <= threshold`` goes left (scikit-learn's rule).
    missing_left : ndarray of shape (n_nodes,), int64
        1 where a missing value (NaN) goes left, else 0 (0 at leaves): the side the split
        search chose for the training rows' missing values, or, without any, the child with
        more rows (:func:`ebf._splitting.scan_node`; scikit-learn's ``missing_go_to_left``).
    value : ndarray of shape (n_nodes, k), float64
        Weighted mean (k = 1) or weighted class fractions (k = n_classes).
    variance : ndarray of shape (n_nodes,), float64
        Weighted within-node variance of the target (regression; zero for classification).
    weight : ndarray of shape (n_nodes,), float64
        Sum of the bootstrap weights of the node's training rows.
    count : ndarray of shape (n_nodes,), int64
        Training rows with positive weight in the node.
    offsets : ndarray of shape (n_trees + 1,), int64
        First node of every tree, then the total number of nodes.
    knot_offsets, knot_value, knot_weight : ndarray
        The leaf knots of an empirical leaf model (:mod:`ebf._leaf_knots`); empty without.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((50, 2)); y = X[:, 0]
    >>> from ebf._cart_fit import fit_cart_forest
    >>> f = fit_cart_forest(X, y, None, task="regression", n_estimators=3, entropy=0)
    >>> f.n_trees, int(f.n_nodes.sum()) == f.left.shape[0]
    (3, True)
    """

    left: np.ndarray
    right: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    missing_left: np.ndarray
    value: np.ndarray
    variance: np.ndarray
    weight: np.ndarray
    count: np.ndarray
    offsets: np.ndarray
    knot_offsets: np.ndarray = field(default_factory=lambda: empty_knots()["knot_offsets"])
    knot_value: np.ndarray = field(default_factory=lambda: empty_knots()["knot_value"])
    knot_weight: np.ndarray = field(default_factory=lambda: empty_knots()["knot_weight"])

    ARRAYS = ("left", "right", "feature", "threshold", "missing_left", "value", "variance",
              "weight", "count", "offsets")

    @property
    def n_trees(self) -> int:
        """Number of trees."""
        return self.offsets.shape[0] - 1

    @property
    def roots(self) -> np.ndarray:
        """Root node of every tree, shape (n_trees,)."""
        return self.offsets[:-1]

    @property
    def n_nodes(self) -> np.ndarray:
        """Nodes per tree, shape (n_trees,) (the model size)."""
        return np.diff(self.offsets)

    @property
    def n_leaves(self) -> np.ndarray:
        """Leaves per tree, shape (n_trees,)."""
        leaf = (self.left == NO_NODE).astype(INDEX)
        return np.add.reduceat(leaf, self.roots) if self.n_trees else np.zeros(0, INDEX)

    @property
    def nbytes(self) -> int:
        """Memory held by the arrays, in bytes."""
        return int(sum(getattr(self, name).nbytes for name in self.ARRAYS + KNOT_ARRAYS))

    def get_state(self) -> dict[str, np.ndarray]:
        """The arrays by name (the persistence contract of ``docs/model-format.md``); the
        knot arrays only where there are knots."""
        names = self.ARRAYS + (KNOT_ARRAYS if self.knot_offsets.size else ())
        return {name: getattr(self, name) for name in names}

    @classmethod
    def from_state(cls, state: dict[str, Any], *, n_features: int,
                   n_classes: int | None = None) -> CartForest:
        """Rebuild from :meth:`get_state`, refusing anything a kernel could misread.

        States come from untrusted files and the descent kernels do not bounds-check, so
        everything is checked first, in O(nodes)
        (:func:`~ebf._tree_validation.checked_forest_arrays`).

        Parameters
        ----------
        state : dict
            The arrays of :meth:`get_state`.
        n_features : int
            Number of input features (splits must lie in ``[0, n_features)``).
        n_classes : int or None
            Classification: the width of ``value``; None for a regression forest (width 1).

        Returns
        -------
        CartForest

        Raises
        ------
        ValueError
            Naming the array, or the tree and node, and what is wrong.
        """
        arrays = checked_forest_arrays(state, cls.ARRAYS, n_features, n_classes)
        return cls(**arrays, **checked_knot_arrays(state, arrays["left"], arrays["offsets"]))


# ------------------------------------------------------------------------------ kernels


class LeafStats(NamedTuple):
    """What the forest kernel reads at the leaves a row reaches.

    Attributes
    ----------
    value : ndarray of shape (n_nodes, k)
        :attr:`CartForest.value` (column 0 is the leaf mean of a regression forest).
    variance : ndarray of shape (n_nodes,)
        :attr:`CartForest.variance`.
    floor : float
        Leaf variances below it count as ``floor``.
    knot_offsets, knot_value, knot_weight : ndarray
        :attr:`CartForest.knot_offsets` ... (read by ``KNOTS`` only).
    """

    value: np.ndarray
    variance: np.ndarray
    floor: float
    knot_offsets: np.ndarray
    knot_value: np.ndarray
    knot_weight: np.ndarray


#: What :func:`_forest_kernel` writes per row: its leaves (``leaves[i, t]``), the mean leaf
#: value (``out[0, i, :]``), the moments (``out[:, i, 0]``: mean, spread, within) or the
#: mixture components (``out[0, i, t]`` means, ``out[1, i, t]`` floored variances) or the
#: knot components (``out[:, i, c]``: weights, means, variances; :mod:`ebf._leaf_knots`).
LEAVES, MEAN, MOMENTS, COMPONENTS, KNOTS = range(5)

#: Rows routed together: their float32-rounded copy (at most ``_CHUNK_VALUES`` values,
#: 2 MB) stays in cache while every tree is descended for them in turn (tree-major order
#: keeps one tree's nodes hot); measured ~25% faster than 256-row chunks.
_CHUNK_VALUES = 1 << 18
_CHUNK_ROWS = 2048


@njit(**JIT)
def _chunk_rows(n_features):  # pragma: no cover - jitted
    return max(64, min(_CHUNK_ROWS, _CHUNK_VALUES // max(n_features, 1)))


@njit(**JIT)
def _chunk_leaves(trees, X, start, stop, xb, leaves):  # pragma: no cover - jitted
    for i in range(start, stop):
        for f in range(X.shape[1]):
            # scikit-learn fits and routes float32 inputs against float64 thresholds.
            xb[i - start, f] = np.float64(np.float32(X[i, f]))
    for t in range(trees.roots.shape[0]):
        for i in range(stop - start):
            leaves[i, t] = leaf_of(trees, trees.roots[t], xb, i, np.nan)


@njit(**JIT)
def _mean_rows(leaf, leaves, out):  # pragma: no cover - jitted
    n_trees = leaves.shape[1]
    for i in range(leaves.shape[0]):
        for c in range(leaf.value.shape[1]):
            acc = 0.0
            for t in range(n_trees):
                acc += leaf.value[leaves[i, t], c]
            out[i, c] = acc / n_trees


@njit(**JIT)
def _moment_rows(leaf, leaves, mean_out, spread_out, within_out):  # pragma: no cover
    n_trees = leaves.shape[1]
    for i in range(leaves.shape[0]):
        s = 0.0
        v = 0.0
        for t in range(n_trees):
            s += leaf.value[leaves[i, t], 0]
            v += max(leaf.variance[leaves[i, t]], leaf.floor)
        m = s / n_trees
        d = 0.0
        for t in range(n_trees):  # two passes: no cancellation in the spread
            dev = leaf.value[leaves[i, t], 0] - m
            d += dev * dev
        mean_out[i] = m
        spread_out[i] = d / n_trees
        within_out[i] = v / n_trees


@njit(**JIT)
def _component_rows(leaf, leaves, means_out, vars_out):  # pragma: no cover - jitted
    for i in range(leaves.shape[0]):
        for t in range(leaves.shape[1]):
            node = leaves[i, t]
            means_out[i, t] = leaf.value[node, 0]
            vars_out[i, t] = max(leaf.variance[node], leaf.floor)


@njit(**JIT)
def _forest_kernel(trees, leaf, X, what, leaves_out, out):  # pragma: no cover - jitted
    """Route ``X`` through every tree, a chunk of rows at a time, and write ``what`` (see
    :data:`LEAVES`) for each row: the one descent of a CART forest."""
    chunk = _chunk_rows(X.shape[1])
    xb = np.empty((chunk, X.shape[1]))
    scratch = np.empty((0 if what == LEAVES else chunk, trees.roots.shape[0]), INDEX)
    for start in range(0, X.shape[0], chunk):
        stop = min(start + chunk, X.shape[0])
        leaves = leaves_out[start:stop] if what == LEAVES else scratch[:stop - start]
        _chunk_leaves(trees, X, start, stop, xb, leaves)
        if what == MEAN:
            _mean_rows(leaf, leaves, out[0, start:stop])
        elif what == MOMENTS:
            _moment_rows(leaf, leaves, out[0, start:stop, 0], out[1, start:stop, 0],
                         out[2, start:stop, 0])
        elif what == COMPONENTS:
            _component_rows(leaf, leaves, out[0, start:stop], out[1, start:stop])
        elif what == KNOTS:
            knot_rows(leaf, leaves, out[0, start:stop], out[1, start:stop],
                      out[2, start:stop])


# ------------------------------------------------------------------------------ descent


def _walk(forest: CartForest, X: np.ndarray, what: int, floor: float = 0.0,
          out_shape: tuple[int, int, int] = (0, 0, 0)) -> tuple[np.ndarray, np.ndarray]:
    """Run :func:`_forest_kernel`: ``(leaves, out)`` (``leaves`` only for ``LEAVES``)."""
    n_trees = forest.n_trees
    leaves = np.empty((X.shape[0], n_trees) if what == LEAVES else (0, n_trees), INDEX)
    out = np.empty(out_shape)
    leaf = LeafStats(forest.value, forest.variance, float(floor), forest.knot_offsets,
                     forest.knot_value, forest.knot_weight)
    _forest_kernel(split_trees(forest, roots=forest.roots), leaf, X, what, leaves, out)
    return leaves, out


def _as_rows(X: np.ndarray, forest: CartForest) -> np.ndarray:
    X = np.ascontiguousarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D array; got shape {X.shape}.")
    if forest.feature.size and X.shape[1] <= int(forest.feature.max()):
        raise ValueError(
            f"X has {X.shape[1]} columns but the forest splits on column "
            f"{int(forest.feature.max())}."
        )
    return X


def _regression_rows(X: np.ndarray, forest: CartForest, caller: str) -> np.ndarray:
    if forest.value.shape[1] != 1:
        raise ValueError(f"{caller} needs a regression forest (one value per node).")
    return _as_rows(X, forest)


def apply(forest: CartForest, X: np.ndarray) -> np.ndarray:
    """Leaf (global node index) of every row in every tree.

    Parameters
    ----------
    forest : CartForest
    X : ndarray of shape (n_rows, n_features)

    Returns
    -------
    ndarray of shape (n_rows, n_trees), int64
        Subtract ``forest.offsets[t]`` from column ``t`` for scikit-learn's node ids.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((30, 2)); y = X[:, 0]
    >>> from ebf._cart_fit import fit_cart_forest
    >>> f = fit_cart_forest(X, y, None, task="regression", n_estimators=2, entropy=0)
    >>> apply(f, X[:4]).shape
    (4, 2)
    """
    return _walk(forest, _as_rows(X, forest), LEAVES)[0]


def mean_value(forest: CartForest, X: np.ndarray) -> np.ndarray:
    """Mean over trees of the leaf values: the forest mean (regression) or class fractions.

    Parameters
    ----------
    forest : CartForest
    X : ndarray of shape (n_rows, n_features)

    Returns
    -------
    ndarray of shape (n_rows, k)

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((30, 2)); y = (X[:, 0] > 0.5).astype(int)
    >>> from ebf._cart_fit import fit_cart_forest
    >>> f = fit_cart_forest(X, y, None, task="classification", n_classes=2, entropy=0,
    ...                     n_estimators=2)
    >>> np.allclose(mean_value(f, X).sum(axis=1), 1.0)
    True
    """
    X = _as_rows(X, forest)
    return _walk(forest, X, MEAN, out_shape=(1, X.shape[0], forest.value.shape[1]))[1][0]


def leaf_components(forest: CartForest, X: np.ndarray,
                    var_floor: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Mean and floored variance of every row's leaf in every tree (one mixture component
    per tree), written by the descent kernel without an intermediate leaf matrix.

    Parameters
    ----------
    forest : CartForest
        A regression forest.
    X : ndarray of shape (n_rows, n_features)
    var_floor : float, default 0.0
        Leaf variances below it count as ``var_floor``.

    Returns
    -------
    means, variances : ndarray of shape (n_rows, n_trees)
        ``value[leaf, 0]`` and ``max(variance[leaf], var_floor)``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((40, 2)); y = X[:, 0]
    >>> from ebf._cart_fit import fit_cart_forest
    >>> f = fit_cart_forest(X, y, None, task="regression", n_estimators=4, entropy=0)
    >>> means, variances = leaf_components(f, X[:3])
    >>> bool(np.all(means == f.value[apply(f, X[:3]), 0]))
    True
    """
    X = _regression_rows(X, forest, "leaf_components")
    out = _walk(forest, X, COMPONENTS, var_floor, (2, X.shape[0], forest.n_trees))[1]
    return out[0], out[1]


def regression_moments(
    forest: CartForest, X: np.ndarray, var_floor: float = 0.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: mean of the tree predictions, their variance, and the mean leaf variance.

    With equal weights over trees, the variance of the leaf mixture (one Gaussian per tree)
    is ``spread + within`` by the law of total variance.

    Parameters
    ----------
    forest : CartForest
        A regression forest.
    X : ndarray of shape (n_rows, n_features)
    var_floor : float, default 0.0
        Leaf variances below it count as ``var_floor``.

    Returns
    -------
    mean, spread, within : ndarray of shape (n_rows,)
        ``mean_t m_t``, ``mean_t (m_t - mean)^2`` and ``mean_t max(v_t, var_floor)``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((40, 2)); y = X[:, 0]
    >>> from ebf._cart_fit import fit_cart_forest
    >>> f = fit_cart_forest(X, y, None, task="regression", n_estimators=4, entropy=0)
    >>> mean, spread, within = regression_moments(f, X[:3])
    >>> bool(np.all(spread >= 0) and np.all(within >= 0))
    True
    """
    X = _regression_rows(X, forest, "regression_moments")
    out = _walk(forest, X, MOMENTS, var_floor, (3, X.shape[0], 1))[1]
    return out[0, :, 0], out[1, :, 0], out[2, :, 0]


def knot_components(forest: CartForest, X: np.ndarray,
                    var_floor: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Weights, means and variances of every row's mixture over its leaves' knots
    (:mod:`ebf._leaf_knots`), zero-weight padding last.

    Parameters
    ----------
    forest : CartForest
        A regression forest with knots.
    X : ndarray of shape (n_rows, n_features)
    var_floor : float, default 0.0
        Leaf variances and kernel variances below it count as ``var_floor``.

    Returns
    -------
    weights, means, variances : ndarray of shape (n_rows, n_trees * max knots per leaf)
        Weights of a row sum to one.
    """
    X = _regression_rows(X, forest, "knot_components")
    if not forest.knot_offsets.size:
        raise ValueError("knot_components needs a forest with leaf knots.")
    out = _walk(forest, X, KNOTS, var_floor, (3, X.shape[0], knot_width(forest)))[1]
    return out[0], out[1], out[2]
