"""The records the Mondrian kernels take: named tuples of arrays, and the one descent step.

numba compiles a ``typing.NamedTuple`` of arrays natively (fields are read by name, at no
cost), and a named tuple pickles, so the records cross thread and process boundaries as the
arrays do (a ``jitclass`` would not pickle). A kernel takes a record per concept instead of
its arrays one by one:

* :class:`MondrianTree` -- the flat arrays of one growing tree, in slot order (the
  vocabulary of :mod:`basics.flat_tree`: ``left``, ``right``, ``feature``, ``threshold``),
  owned by :class:`mondrian._tree.TreeArrays`; its root and live node count travel beside it
  (the kernels that grow a tree return the new ones);
* :class:`Growth` -- what the sampling kernels read besides the tree: the forest's data
  buffer and the rules of the process;
* :class:`Prior` and :class:`Messages` -- the hierarchical Gaussian prior of a regression
  tree and the belief-propagation outputs per node (:mod:`mondrian._posterior`);
* :class:`Predictor` -- a tree packed for prediction (:mod:`mondrian._predict`).

:func:`child` is the one descent step over the slot arrays: the online extension, ``apply``
and the Mondrian kernel's cells all descend through it.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from basics.jit import JIT

__all__ = ["Growth", "Messages", "MondrianTree", "Predictor", "Prior", "child"]


class MondrianTree(NamedTuple):
    """The arrays of one Mondrian tree, one row per node slot (layout in
    ``docs/families/mondrian-forests.md``).

    ``left``, ``right``, ``parent``, ``feature`` are ``basics.flat_tree.INDEX`` (``NO_NODE``
    where there is none), ``threshold`` the split locations, ``tau`` the split times (a
    leaf's: the lifetime), ``lower`` / ``upper`` the data extent of every node (n, D),
    ``stats`` the node statistics (regression ``(n, sum y, sum y^2)``, classification class
    counts: raw at leaves, IKN at internal nodes), ``leaf_head`` the first row of a leaf's
    list and ``pt_next`` (one per row of the data buffer) the next row of the same list.
    """

    left: np.ndarray
    right: np.ndarray
    parent: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    tau: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    stats: np.ndarray
    leaf_head: np.ndarray
    pt_next: np.ndarray

    @classmethod
    def of(cls, **arrays: np.ndarray) -> MondrianTree:
        """A record of the given arrays, the others empty (of the dtypes and dimensions of
        a grown tree's), for the kernels that read only those.

        Examples
        --------
        >>> t = MondrianTree.of(left=np.array([-1]), right=np.array([-1]))
        >>> t.parent.shape, t.lower.shape
        ((0,), (0, 0))
        """
        empty = {name: np.empty((0, 0) if name in _NODE_ROWS else 0,
                                np.float64 if name in _FLOATS else np.int64)
                 for name in cls._fields}
        return cls(**{**empty, **arrays})


_NODE_ROWS = frozenset({"lower", "upper", "stats"})
_FLOATS = frozenset({"threshold", "tau", "lower", "upper", "stats"})


class Growth(NamedTuple):
    """What the sampling kernels read besides the tree.

    ``X`` (n, D) scaled inputs, ``y`` regression labels and ``labels`` class codes of the
    forest's data buffer (a task reads only its own), ``task`` its code
    (:mod:`basics.tasks`), ``min_samples_split`` the fewest rows a block splits with and
    ``lifetime`` the process's lifetime.
    """

    X: np.ndarray
    y: np.ndarray
    labels: np.ndarray
    task: int
    min_samples_split: int
    lifetime: float


class Prior(NamedTuple):
    """The hierarchical Gaussian prior of a regression tree (paper Sec. 3, App. B): the mean
    ``mu_h`` at the top, the scale ``gamma1`` and time scale ``gamma2`` of the edges."""

    mu_h: float
    gamma1: float
    gamma2: float


class Messages(NamedTuple):
    """Belief-propagation outputs, one row per node slot (:func:`mondrian._posterior.
    belief_propagation`): the posterior ``mean`` and ``var`` of every node mean, the message
    from outside its subtree (``down_mean``, ``down_var``, edge included) and the likelihood
    of the data below it in information form (``up_lam``, ``up_eta``: zero-filled)."""

    mean: np.ndarray
    var: np.ndarray
    down_mean: np.ndarray
    down_var: np.ndarray
    up_lam: np.ndarray
    up_eta: np.ndarray

    @classmethod
    def empty(cls, n: int) -> Messages:
        """Outputs for ``n`` nodes (the information-form ones zero-filled)."""
        return cls(*(np.empty(n) for _ in range(4)), np.zeros(n), np.zeros(n))


class Predictor(NamedTuple):
    """A tree packed for prediction, one row per node in depth-first preorder (root first,
    a left child right after its parent): see :mod:`mondrian._predict` for the columns.

    ``threshold`` float64 and ``links`` int32 (RIGHT, FEATURE) are the compact routing part;
    ``gap`` (float64 view) and ``box`` (float32) are two views of one buffer holding the
    split-time gap and the float32 data extent of every node.
    """

    threshold: np.ndarray
    links: np.ndarray
    gap: np.ndarray
    box: np.ndarray


@numba.njit(inline="always", **JIT)
def child(tree, j, x):
    """The child of internal slot ``j`` of ``tree`` (:class:`MondrianTree`) that the point
    ``x`` goes to: left when ``x[feature] <= threshold``."""
    return tree.left[j] if x[tree.feature[j]] <= tree.threshold[j] else tree.right[j]
