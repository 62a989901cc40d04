"""The split nodes of flat CART trees as one record, and the one descent of a row.

Every CART-style tree of ``ebf`` (the trees of a forest, :class:`~ebf._cart.CartForest`;
the trunk, :class:`~ebf._trunk_arrays.TrunkArrays`; a histogram tree while it grows) routes
a row the same way: at an internal node ``j`` the row goes left iff its value of
``feature[j]`` is at most ``threshold[j]``, or it is missing and ``missing_left[j]``.
:class:`SplitTrees` holds those arrays (numba compiles a ``NamedTuple`` of arrays natively,
and it pickles, so Dask is unaffected); :func:`leaf_of` is the descent every routing kernel
calls and :func:`goes_left` its one step.

The same code routes raw values (a missing value is NaN; pass ``missing=nan``) and bin
codes (``threshold`` holds split bins; a missing value is the code ``missing``). Leaves
have ``left == NO_NODE``; the descent does not check bounds, so trees from files are
checked first (:func:`basics.flat_tree.check_tree_structure`).
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from basics.flat_tree import INDEX, NO_NODE
from basics.jit import JIT

__all__ = ["SplitTrees", "goes_left", "leaf_of", "split_trees"]


class SplitTrees(NamedTuple):
    """The split nodes of one or more flat trees, as the descent kernels read them.

    Attributes
    ----------
    left, right : ndarray of shape (n_nodes,), int64
        Global child indices (``NO_NODE`` at leaves).
    feature : ndarray of shape (n_nodes,), int64
        Split feature (``NO_NODE`` at leaves).
    threshold : ndarray of shape (n_nodes,)
        float64 thresholds of raw values, or int64 split bins of bin codes.
    missing_left : ndarray of shape (n_nodes,), int64
        1 where a missing value goes left.
    roots : ndarray of shape (n_trees,), int64
        Root node of every tree.
    """

    left: np.ndarray
    right: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    missing_left: np.ndarray
    roots: np.ndarray


def split_trees(arrays: object, threshold: np.ndarray | None = None,
                roots: np.ndarray | None = None) -> SplitTrees:
    """The :class:`SplitTrees` view of any object with the arrays of a flat tree.

    Parameters
    ----------
    arrays : CartForest, TrunkArrays or similar
        Has ``left``, ``right``, ``feature``, ``threshold`` and ``missing_left``.
    threshold : ndarray, optional
        Thresholds to route by instead of ``arrays.threshold`` (e.g. a trunk's split bins).
    roots : ndarray, optional
        The roots; default a single tree rooted at node 0.

    Returns
    -------
    SplitTrees
        Views of the same arrays (nothing is copied).

    Examples
    --------
    >>> from ebf._trunk_arrays import TrunkArrays
    >>> split_trees(TrunkArrays.root(4)).roots.tolist()
    [0]
    """
    return SplitTrees(
        left=arrays.left, right=arrays.right, feature=arrays.feature,
        threshold=arrays.threshold if threshold is None else threshold,
        missing_left=arrays.missing_left,
        roots=np.zeros(1, INDEX) if roots is None else roots,
    )


@numba.njit(inline="always", **JIT)
def is_missing(x, missing):  # pragma: no cover - jitted
    """Whether ``x`` is a missing value: NaN, or the code ``missing``."""
    return x != x or x == missing


@numba.njit(inline="always", **JIT)
def goes_left(x, threshold, missing_left, missing):  # pragma: no cover - jitted
    """Whether a value ``x`` goes left at a split: ``x <= threshold``, or ``x`` is missing
    (:func:`is_missing`) and the split sends missing values left."""
    return x <= threshold or (missing_left and is_missing(x, missing))


@numba.njit(inline="always", **JIT)
def leaf_of(trees, node, X, i, missing):  # pragma: no cover - jitted
    """The leaf row ``X[i]`` reaches from ``node`` (a root, or any node above the row), by
    :func:`goes_left` at every split; a node's ``missing_left`` is read only for a missing
    value (reading it at every step cost 8% of a forest's prediction)."""
    while trees.left[node] != NO_NODE:
        x = X[i, trees.feature[node]]
        if x <= trees.threshold[node] or (is_missing(x, missing)
                                          and trees.missing_left[node] != 0):
            node = trees.left[node]
        else:
            node = trees.right[node]
    return node
