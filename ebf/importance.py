"""Impurity importances: the decrease of the weighted impurity, by feature, over a model's
splits (Breiman's "mean decrease in impurity", scikit-learn's ``feature_importances_``).

Every CART split of the paper (Taddy et al. 2015, Sec. 2.2, eq. 4) is chosen for the
decrease ``I_P - I_L - I_R`` of the weighted impurity, weighted squared error for
regression and weighted Gini for classification. From what a fitted tree stores at every
node, the weighted mean ``v`` (class fractions for classification) and the weight ``W``,
that decrease is the between-children sum of squares::

    I_P - I_L - I_R = sum_c W_L (v_Lc - v_Pc)**2 + W_R (v_Rc - v_Pc)**2

(for squared error the within-node sums cancel; for Gini ``W (1 - sum_c v_c**2)`` the same
algebra holds since ``W_L v_L + W_R v_R = W_P v_P``). It is non-negative by construction and
needs neither the training rows nor a format change. The trunk stores its split decreases
(``gain``) as it grows them.

What is summed, in the units of the training weights (one per row, or the bootstrap draws
of mean one):

* a forest: the mean over its trees of each tree's total decrease (the decrease of "the
  average tree"; scikit-learn normalises each tree before averaging, which weighs a tree
  with little signal as much as one with much);
* an Empirical Bayesian Forest: the trunk's decrease on all rows plus every branch's
  forest decrease on its own rows, so the trunk's first split and a split deep in a branch
  count by the impurity they removed from the same data;
* a sub-sample forest: the sum over its sub-samples, which partition the rows.

``feature_importances_`` is that total divided by its sum (all zero when no split was
made, as in scikit-learn). Mondrian, SMC and BART branches do not choose splits by an
impurity decrease: their ensembles have no ``feature_importances_``; permutation importance
(:func:`sklearn.inspection.permutation_importance`, or ``ebf importance`` on a cluster)
serves every model. Plain-NumPy oracle: ``tests/naive/importance.py``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from basics.flat_tree import NO_NODE

__all__ = ["forest_decrease", "normalised", "total_decrease", "trunk_decrease"]


def forest_decrease(forest: Any, n_features: int) -> np.ndarray:
    """Mean over the trees of a :class:`~ebf.cart.CartForest` of each feature's total
    impurity decrease.

    Parameters
    ----------
    forest : CartForest
        Flat trees whose ``value`` is the weighted mean (class fractions) and ``weight`` the
        summed weight of every node.
    n_features : int
        Number of features (the length of the result).

    Returns
    -------
    ndarray of shape (n_features,)

    Examples
    --------
    >>> import numpy as np
    >>> from ebf.cart_fit import fit_cart_forest
    >>> X = np.random.default_rng(0).random((200, 2)); y = (X[:, 0] > 0.5).astype(float)
    >>> f = fit_cart_forest(X, y, None, task="regression", n_estimators=2, entropy=0)
    >>> dec = forest_decrease(f, 2)
    >>> bool(dec[0] > 10 * dec[1])
    True
    """
    out = np.zeros(int(n_features))
    internal = np.flatnonzero(forest.left != NO_NODE)
    if internal.size:
        left, right = forest.left[internal], forest.right[internal]
        parent = forest.value[internal]
        dec = (forest.weight[left] * ((forest.value[left] - parent) ** 2).sum(axis=1)
               + forest.weight[right] * ((forest.value[right] - parent) ** 2).sum(axis=1))
        np.add.at(out, forest.feature[internal], dec)
    return out / max(forest.n_trees, 1)


def trunk_decrease(trunk: Any) -> np.ndarray:
    """Each feature's impurity decrease over the splits of a fitted :class:`~ebf.trunk.Trunk`
    (the ``gain`` the grower stored at every split).

    Examples
    --------
    >>> import numpy as np
    >>> from ebf.trunk import Trunk
    >>> X = np.random.default_rng(0).random((400, 3)); y = 4.0 * (X[:, 1] > 0.5)
    >>> trunk_decrease(Trunk(max_leaves=2).fit(X, y)).round(1).tolist()
    [0.0, 1600.0, 0.0]
    """
    arrays = trunk.trunk_
    out = np.zeros(int(trunk.n_features_in_))
    split = arrays.feature != NO_NODE
    np.add.at(out, arrays.feature[split], arrays.gain[split])
    return out


def total_decrease(parts: Iterable[Any], n_features: int, owner: str) -> np.ndarray:
    """Sum of the impurity decreases of an ensemble's parts (its trunk's, when it has one,
    then every branch's).

    A part offers ``_impurity_decrease()`` (the CART forests) or is a constant branch
    (no split: nothing to add); any other part has no impurity decrease and raises
    ``AttributeError``, so that ``hasattr(model, "feature_importances_")`` is False.
    """
    from .branches import ConstantBranch

    out = np.zeros(int(n_features))
    for part in parts:
        if isinstance(part, ConstantBranch):
            continue
        decrease = getattr(part, "_impurity_decrease", None)
        if decrease is None:
            raise AttributeError(
                f"{owner} has no feature_importances_: its {type(part).__name__} branches do "
                "not choose splits by an impurity decrease (only branch='bayesian' and "
                "branch='random' do). Permutation importance serves every model: "
                "sklearn.inspection.permutation_importance, or `ebf importance MODEL DATA` "
                "on a cluster."
            )
        out += decrease()
    return out


def normalised(total: np.ndarray) -> np.ndarray:
    """``total / total.sum()``; all zero when nothing was split (scikit-learn's convention).

    Examples
    --------
    >>> normalised(np.array([3.0, 1.0])).tolist(), normalised(np.zeros(2)).tolist()
    ([0.75, 0.25], [0.0, 0.0])
    """
    s = float(total.sum())
    return total / s if s > 0.0 else np.zeros_like(total)
