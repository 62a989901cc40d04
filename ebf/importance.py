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

**Permutation importance** (Breiman 2001, Sec. 10; scikit-learn's
``permutation_importance``): how much a proper score worsens when one feature's values are
shuffled among the rows, which breaks its link with the target and with the other features.
It needs held-out rows and nothing of the model's insides, so it serves every learner and
the predictive distribution itself: by default the increase of the mean CRPS (regression, in
the target's units) or of the log loss (classification). :func:`permuted_losses` is the
work on one block of rows (a partition on a cluster: the rows are shuffled within it, so the
result depends on the partitioning and the seed, as a shuffle must);
:func:`importance_table` turns the summed losses into the table; :func:`permutation_importance`
is both on rows held in this process.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from basics.flat_tree import NO_NODE
from basics.metrics import class_rows, crps_rows
from basics.scores import SCORES, ClassRows, RegressionRows
from basics.tasks import CLASSIFICATION, REGRESSION

__all__ = ["LOSS_SCORES", "SCORINGS", "check_scoring", "forest_decrease", "importance_table",
           "normalised", "permutation_importance", "permuted_losses", "row_losses",
           "total_decrease", "trunk_decrease"]

#: Per-row losses of permutation importance, by task; the first is the default.
SCORINGS = {REGRESSION: ("crps", "nlpd", "squared_error"),
            CLASSIFICATION: ("log_loss", "error")}
#: The score record (:data:`basics.scores.SCORES`) whose per-row values each loss is: the
#: values as they are where lower is better, else one minus them (``error``: one minus the
#: rows counted correct by ``accuracy``).
LOSS_SCORES = {"crps": "crps", "nlpd": "nlpd", "squared_error": "rmse", "log_loss": "log_loss",
               "error": "accuracy"}


def forest_decrease(forest: Any, n_features: int) -> np.ndarray:
    """Mean over the trees of a :class:`~ebf._cart.CartForest` of each feature's total
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
    >>> from ebf._cart_fit import fit_cart_forest
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
    [0.0, 1598.0, 0.0]
    """
    arrays = trunk.trunk_
    out = np.zeros(int(trunk.n_features_in_))
    split = arrays.feature != NO_NODE
    np.add.at(out, arrays.feature[split], arrays.gain[split])
    return out


def total_decrease(parts: Iterable[Any], n_features: int, owner: str) -> np.ndarray:
    """Sum of the impurity decreases of an ensemble's parts (its trunk's, when it has one,
    then every branch's).

    A part offers ``_impurity_decrease()`` (the CART forests; a constant branch's is 0.0);
    any other part has no impurity decrease and raises ``AttributeError``, so that
    ``hasattr(model, "feature_importances_")`` is False.
    """
    out = np.zeros(int(n_features))
    for part in parts:
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


# --------------------------------------------------------------------- permutation importance


def check_scoring(task: str, scoring: str | None) -> str:
    """The loss of ``task`` (``"regression"`` or ``"classification"``) named ``scoring``
    (None: the task's default, CRPS or log loss); ``ValueError`` naming the choices
    otherwise."""
    choices = SCORINGS[task]
    if scoring is None:
        return choices[0]
    if scoring not in choices:
        raise ValueError(f"scoring={scoring!r} is not a loss of a {task} model; choose one of "
                         f"{list(choices)}.")
    return scoring


def row_losses(model: Any, X: pd.DataFrame, y: np.ndarray, scoring: str) -> np.ndarray:
    """Loss of every row (lower is better): the per-row values of the score record
    :data:`LOSS_SCORES` names, CRPS, negative log density or squared error of the mean
    (regressors, through ``predict_distribution``, recalibrated if the model is), log loss
    or 0/1 error (classifiers, :func:`basics.metrics.class_rows`)."""
    score = SCORES[LOSS_SCORES[scoring]]
    if scoring in SCORINGS[CLASSIFICATION]:
        correct, log_loss, _ = class_rows(model.predict_proba(X), model.classes_, y)
        rows: Any = ClassRows(correct, log_loss)
    else:
        y = np.asarray(y, dtype=np.float64)
        dist = model.predict_distribution(X)
        # only what the loss reads is computed (a CRPS pass costs more than the prediction)
        rows = RegressionRows(
            y=y, point=np.asarray(dist.mean) if scoring == "squared_error" else None,
            logpdf=dist.logpdf(y) if scoring == "nlpd" else None,
            crps=crps_rows(dist, y) if scoring == "crps" else None, pit=None, quantiles=None)
    values = np.asarray(score.row(rows), dtype=np.float64)
    return values if score.better == "lower" else 1.0 - values


def permuted_losses(model: Any, X: pd.DataFrame, y: np.ndarray, scoring: str,
                    n_repeats: int, rng: np.random.Generator) -> np.ndarray:
    """Summed losses of one block of rows: as given, then with each feature shuffled.

    Parameters
    ----------
    model : fitted estimator
    X : DataFrame of shape (n_rows, n_features)
        The model's features, in its order.
    y : array-like of shape (n_rows,)
    scoring : str
        One of :data:`SCORINGS` of the model's task.
    n_repeats : int
        Shuffles per feature.
    rng : numpy.random.Generator
        Draws the shuffles: feature by feature, repeat by repeat.

    Returns
    -------
    ndarray of shape (2 + n_features * n_repeats,)
        ``[n_rows, loss sum, then the loss sum with feature f shuffled in repeat r at
        2 + f * n_repeats + r]``; all zero without rows.
    """
    d = X.shape[1]
    out = np.zeros(2 + d * n_repeats)
    n = len(X)
    if n == 0:
        return out
    out[0], out[1] = n, row_losses(model, X, y, scoring).sum()
    for f, column in enumerate(X.columns):
        original = X[column].to_numpy()
        for r in range(n_repeats):
            shuffled = X.copy(deep=False)
            shuffled[column] = original[rng.permutation(n)]
            out[2 + f * n_repeats + r] = row_losses(model, shuffled, y, scoring).sum()
    return out


def importance_table(sums: np.ndarray, features: Any, n_repeats: int) -> pd.DataFrame:
    """Permutation importances from summed :func:`permuted_losses` (blocks added up).

    Returns
    -------
    DataFrame
        One row per feature, the most important first: ``feature``, ``importance`` (mean
        increase of the mean loss over the repeats), ``std`` (over the repeats); with
        ``attrs["n"]`` (rows) and ``attrs["baseline"]`` (mean loss of the rows as given).
    """
    n = float(sums[0])
    if n <= 0:
        raise ValueError("permutation importance needs rows with a target; there are none.")
    base = sums[1] / n
    inc = sums[2:].reshape(len(features), n_repeats) / n - base
    table = pd.DataFrame({"feature": [str(f) for f in features], "importance": inc.mean(axis=1),
                          "std": inc.std(axis=1)})
    table = table.sort_values("importance", ascending=False, kind="stable", ignore_index=True)
    table.attrs.update(n=int(n), baseline=float(base))
    return table


def permutation_importance(model: Any, X: pd.DataFrame, y: Any, *, scoring: str | None = None,
                           n_repeats: int = 5, random_state: int = 0) -> pd.DataFrame:
    """Permutation importance of a fitted model on held-out rows in this process.

    Parameters
    ----------
    model : fitted estimator of ``ebf`` or ``mondrian``
    X : DataFrame
        Held-out rows with the model's features (extra columns are ignored).
    y : array-like of shape (n_rows,)
    scoring : str, optional
        One of :data:`SCORINGS` of the model's task; CRPS (regression) or log loss
        (classification) by default.
    n_repeats : int, default=5
    random_state : int, default=0

    Returns
    -------
    DataFrame
        :func:`importance_table`: the mean increase of the mean loss per feature.

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from ebf import BayesianForestRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = pd.DataFrame(rng.random((600, 3)), columns=["a", "b", "c"]); y = 4 * X["a"].to_numpy()
    >>> m = BayesianForestRegressor(n_estimators=5, random_state=0).fit(X[:400], y[:400])
    >>> table = permutation_importance(m, X[400:], y[400:])
    >>> table["feature"][0], bool(table["importance"][0] > 10 * table["importance"][1:].abs().max())
    ('a', True)
    """
    scoring = check_scoring(CLASSIFICATION if hasattr(model, "classes_") else REGRESSION,
                            scoring)
    features = list(getattr(model, "feature_names_in_", X.columns[: model.n_features_in_]))
    if int(n_repeats) < 1:
        raise ValueError(f"n_repeats must be >= 1, got {n_repeats!r}.")
    sums = permuted_losses(model, X[features], np.asarray(y), scoring, int(n_repeats),
                           np.random.default_rng(random_state))
    return importance_table(sums, features, int(n_repeats))
