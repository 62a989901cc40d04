"""Fitting the weighted CART trees of a forest (Algorithm 1) and flattening them.

Every tree of a forest is a weighted-sample CART fit (Taddy, Chen, Yu & Wyle 2015,
Sec. 2.2): a histogram CART tree over the forest's bins (``splitter="hist"``,
:mod:`ebf._hist_tree`; the rows are binned once and every tree reweights the same codes) or
scikit-learn's ``DecisionTreeRegressor`` / ``DecisionTreeClassifier`` with ``sample_weight``
(``splitter="exact"``; the paper's own implementation adjusted scikit-learn's forest
weights, Sec. 2.3, footnote 4), then copied into one :class:`~ebf._cart.CartForest` (layout
and leaf statistics in :mod:`ebf._cart`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, NamedTuple

import numpy as np
from numba import njit
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from basics.flat_tree import INDEX, NO_NODE
from basics.jit import JIT
from basics.leaf_noise import leaf_predictive_variance, pooled_variance
from basics.tasks import CLASSIFICATION, REGRESSION
from basics.threads import thread_map

from ._cart import CartForest
from ._hist_tree import grow_tree, node_statistics, resolve_max_features
from ._leaf_knots import concat_knots, tree_knots
from .binning import ALL_VALUES, bin_data, bin_edges, pack_edges
from .bootstrap import draw_weights, tree_rng
from .config import EXACT_BINS, MAX_BINS, MIN_SAMPLES_LEAF
from .histogram import row_statistics

__all__ = ["SPLITTERS", "as_float32", "effective_rows", "fit_cart_forest", "fit_cart_trees",
           "prior_centres", "with_leaf_prior"]

#: ``splitter`` options: histogram CART over the forest's bins (:mod:`ebf._hist_tree`) or
#: scikit-learn's exact CART.
SPLITTERS = ("hist", "exact")

_FLOAT32_MAX = float(np.finfo(np.float32).max)


def as_float32(X: np.ndarray, names: Any = None) -> np.ndarray:
    """``X`` as the C-contiguous float32 matrix scikit-learn's trees are fit on.

    Parameters
    ----------
    X : ndarray of shape (n_rows, n_features)
        Finite values, or NaN for missing ones (kept).
    names : sequence of str, optional
        Column names for the error message (``column j`` otherwise).

    Returns
    -------
    ndarray of shape (n_rows, n_features), float32

    Raises
    ------
    ValueError
        Naming the columns whose values overflow float32 (``|x| > 3.4e38``).

    Examples
    --------
    >>> as_float32(np.array([[1.5, 2.0]])).dtype
    dtype('float32')
    """
    with np.errstate(over="ignore"):
        X32 = np.ascontiguousarray(X, dtype=np.float32)
    bad = np.isinf(X32)
    if bad.any():
        counts = bad.sum(axis=0)
        cols = np.flatnonzero(counts)
        label = [str(names[c]) if names is not None else f"column {c}" for c in cols]
        detail = "; ".join(
            f"{lab!r}: {int(counts[c])} rows" for lab, c in zip(label, cols, strict=True)
        )
        raise ValueError(
            f"X has values beyond the float32 range (|x| > {_FLOAT32_MAX:.3g}) in "
            f"{cols.size} column(s) ({detail}); CART trees compare float32 values, so "
            "rescale those columns."
        )
    return X32


@njit(**JIT)
def _combine_up(left, right, weight, weight_sq, mean, m2):  # pragma: no cover - jitted
    # Children have larger ids than their parent in scikit-learn's trees, so one backward
    # sweep merges (weight, mean, M2) of both children (Chan et al.'s pairwise update).
    for j in range(left.shape[0] - 1, -1, -1):
        a = left[j]
        if a == NO_NODE:
            continue
        b = right[j]
        weight_sq[j] = weight_sq[a] + weight_sq[b]
        w = weight[a] + weight[b]
        delta = mean[b] - mean[a]
        weight[j] = w
        mean[j] = mean[a] + delta * weight[b] / w
        m2[j] = m2[a] + m2[b] + delta * delta * weight[a] * weight[b] / w


# ------------------------------------------------------------------------------ fitting


def _flatten(est: Any, X32: np.ndarray, y: np.ndarray, w: np.ndarray, task: str,
             n_classes: int, knots: int = 0) -> dict[str, np.ndarray]:
    """One fitted scikit-learn tree as local flat arrays (node ids as in ``tree_``)."""
    t = est.tree_
    n = t.node_count
    left = t.children_left.astype(INDEX)
    leaf = left == NO_NODE
    arrays = {
        "left": left,
        "right": t.children_right.astype(INDEX),
        "feature": np.where(leaf, NO_NODE, t.feature).astype(INDEX),
        # scikit-learn's "every value left, the missing ones right" split has threshold inf
        "threshold": np.where(leaf, np.nan, np.minimum(t.threshold, ALL_VALUES)),
        "missing_left": np.where(leaf, 0, t.missing_go_to_left).astype(INDEX),
        "weight": t.weighted_n_node_samples.astype(np.float64),
        "count": t.n_node_samples.astype(INDEX),
    }
    if task == REGRESSION:
        rows = t.apply(X32)
        wsum = np.bincount(rows, w, minlength=n)
        wsq = np.bincount(rows, w * w, minlength=n)
        mean = np.zeros(n)
        np.divide(np.bincount(rows, w * y, minlength=n), wsum, out=mean, where=wsum > 0)
        dev = y - mean[rows]
        m2 = np.bincount(rows, w * dev * dev, minlength=n)
        _combine_up(left, arrays["right"], wsum, wsq, mean, m2)
        variance = np.zeros(n)
        np.divide(m2, wsum, out=variance, where=wsum > 0)
        arrays["value"] = t.value[:, 0, :1].astype(np.float64)
        arrays["variance"] = variance
        arrays["weight_sq"] = wsq
        if knots:
            pos = w > 0
            arrays.update(tree_knots(rows[pos], y[pos], w[pos], arrays["value"][:, 0], n,
                                     knots))
    else:
        value = np.zeros((n, n_classes))
        value[:, est.classes_.astype(INDEX)] = t.value[:, 0, :]
        arrays["value"] = value
        arrays["variance"] = np.zeros(n)
        arrays["weight_sq"] = np.zeros(n)
    return arrays


class _HistForest:
    """What the histogram trees of one forest share: the bins of its rows (paper Sec. 2.2
    over ``ebf._hist_tree``; one binning, every tree reweights the same codes)."""

    def __init__(self, X32: np.ndarray, max_bins: int | str, max_features: Any,
                 min_samples_leaf: int | float, max_depth: int | None) -> None:
        n, d = X32.shape
        edges = (bin_edges(X32, MAX_BINS, exact_bins=EXACT_BINS) if max_bins == "auto"
                 else bin_edges(X32, max_bins))
        self.packed, n_edges = pack_edges(edges)
        self.n_bins = n_edges + 1
        self.binned = bin_data(X32, edges)
        self.max_features = resolve_max_features(max_features, d)
        self.min_rows = (int(min_samples_leaf) if isinstance(min_samples_leaf, (int, np.integer))
                         else int(np.ceil(min_samples_leaf * n)))
        self.max_depth = max_depth

    def tree(self, y: np.ndarray, w: np.ndarray, task: str, n_classes: int,
             seed: int, knots: int = 0) -> dict[str, np.ndarray]:
        """One tree on the rows of positive weight ``w``, as the arrays of ``_flatten``."""
        classification = task == CLASSIFICATION
        rows = np.flatnonzero(w > 0)
        S = row_statistics(y[rows], w[rows], task, n_classes if classification else None)
        t = grow_tree(self.binned, S, rows, self.n_bins, classification=classification,
                      min_samples_leaf=self.min_rows, max_depth=self.max_depth,
                      max_features=self.max_features, seed=seed)
        split = t["feature"] != NO_NODE
        threshold = np.full(split.shape, np.nan)
        f, b = t["feature"][split], t["bin"][split]
        # the last bin of a feature (every value left, the missing ones right): ALL_VALUES
        threshold[split] = np.where(b < self.n_bins[f] - 1,
                                    self.packed[f, np.minimum(b, self.packed.shape[1] - 1)],
                                    ALL_VALUES)
        stats = node_statistics(t, y, w, n_classes if classification else 0)
        if knots:  # a leaf's rows are rows[start:end], the leaves' ranges tile the rows
            leaf = np.flatnonzero(t["left"] == NO_NODE)
            leaf = leaf[np.argsort(t["start"][leaf])]
            node = np.repeat(leaf, t["end"][leaf] - t["start"][leaf])
            r = t["rows"][t["start"][leaf[0]]:t["end"][leaf[-1]]]
            stats.update(tree_knots(node, y[r], w[r], stats["value"][:, 0], split.shape[0],
                                    knots))
        return {"left": t["left"], "right": t["right"], "feature": t["feature"],
                "threshold": threshold, "missing_left": t["missing_left"], **stats}


def effective_rows(weight: np.ndarray, weight_sq: np.ndarray) -> np.ndarray:
    """Kish's effective sample size ``(sum w)^2 / sum w^2`` of every node (0 where empty).

    Examples
    --------
    >>> effective_rows(np.array([4.0, 3.0, 0.0]), np.array([4.0, 9.0, 0.0])).tolist()
    [4.0, 1.0, 0.0]
    """
    out = np.zeros(weight.shape)
    np.divide(weight * weight, weight_sq, out=out, where=weight_sq > 0)
    return out


class _CentreRule(NamedTuple):
    """How :func:`prior_centres` picks a node's centre (see there)."""

    min_dof: float
    forest_centre: float
    floor: float


@njit(**JIT)
def _prior_centres(left, right, offsets, variance, n_eff, rule, out):  # pragma: no cover
    # Bottom up: sums of n v and n - 1 over the leaves below every node (children have larger
    # ids than their parent). Top down: a node's centre is the pooled variance of its own
    # subtree if that has min_dof degrees of freedom, else its parent's.
    min_dof, forest_centre, floor = rule
    n_nodes = left.shape[0]
    ss = np.zeros(n_nodes)
    dof = np.zeros(n_nodes)
    for j in range(n_nodes - 1, -1, -1):
        a = left[j]
        if a == NO_NODE:
            n = max(n_eff[j], 1.0)
            ss[j] = n * variance[j]
            dof[j] = n - 1.0
        else:
            ss[j] = ss[a] + ss[right[j]]
            dof[j] = dof[a] + dof[right[j]]
    for t in range(offsets.shape[0] - 1):
        root = offsets[t]
        out[root] = max(ss[root] / dof[root], floor) if dof[root] >= min_dof else forest_centre
        for j in range(root, offsets[t + 1]):
            a = left[j]
            if a == NO_NODE:
                continue
            for c in (a, right[j]):
                out[c] = max(ss[c] / dof[c], floor) if dof[c] >= min_dof else out[j]


def prior_centres(forest: CartForest, n_eff: np.ndarray, *, min_dof: float,
                  var_floor: float) -> tuple[np.ndarray, float]:
    """Centre of every node's noise prior: the pooled within-leaf variance of the smallest
    subtree around it whose leaves hold ``min_dof`` degrees of freedom.

    Parameters
    ----------
    forest : CartForest
        A regression forest whose ``variance`` is the weighted within-node variance.
    n_eff : ndarray of shape (n_nodes,)
        Effective rows of every node (:func:`effective_rows`).
    min_dof : float
        Degrees of freedom (``sum (n - 1)`` over a subtree's leaves) a centre needs.
    var_floor : float
        ``> 0``: the smallest centre.

    Returns
    -------
    centres : ndarray of shape (n_nodes,)
    forest_centre : float
        The pooled within-leaf variance of all leaves of all trees (at least ``var_floor``),
        the centre of a tree whose whole leaves hold fewer than ``min_dof``.
    """
    leaf = forest.left == NO_NODE
    forest_centre = max(pooled_variance(forest.variance[leaf], n_eff[leaf]), var_floor)
    centres = np.empty(forest.left.shape[0])
    _prior_centres(forest.left, forest.right, forest.offsets, forest.variance,
                   np.ascontiguousarray(n_eff, dtype=np.float64),
                   _CentreRule(float(min_dof), float(forest_centre), float(var_floor)), centres)
    return centres, forest_centre


def with_leaf_prior(forest: CartForest, n_eff: np.ndarray, *, prior_rows: float,
                    var_floor: float) -> tuple[CartForest, float]:
    """The forest with every node's variance replaced by its posterior predictive variance.

    The normal-inverse-gamma leaf of :mod:`basics.leaf_noise`: a flat prior on the node's
    mean (``value`` does not change) and an inverse-gamma prior on its noise variance worth
    ``prior_rows`` rows, centred on the pooled within-leaf variance of the smallest subtree
    around the node with ``prior_rows`` residual degrees of freedom (:func:`prior_centres`):
    the residual variance of the leaf's neighbourhood, so a leaf among quiet leaves is not
    widened to the noise of the loudest region of the data (heteroskedastic targets: flight
    delays, incomes).

    Parameters
    ----------
    forest, n_eff
        As for :func:`prior_centres`.
    prior_rows : float
        ``nu0 > 1``.
    var_floor : float
        ``> 0``: the smallest prior centre (leaves with no spread at all).

    Returns
    -------
    forest : CartForest
    forest_centre : float
        The pooled within-leaf variance of the whole forest.
    """
    centres, forest_centre = prior_centres(forest, n_eff, min_dof=prior_rows,
                                           var_floor=var_floor)
    variance = leaf_predictive_variance(forest.variance, n_eff, s0_sq=centres,
                                        prior_rows=prior_rows)
    return replace(forest, variance=variance), forest_centre


def _concat(trees: list[dict[str, np.ndarray]]) -> CartForest:
    if not trees:
        raise ValueError("A forest needs at least one tree.")
    sizes = np.array([tr["left"].shape[0] for tr in trees], INDEX)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(INDEX)
    parts: dict[str, list[np.ndarray]] = {name: [] for name in CartForest.ARRAYS[:-1]}
    for tr, off in zip(trees, offsets[:-1], strict=True):
        for name in parts:
            arr = tr[name]
            if name in ("left", "right"):
                arr = np.where(arr == NO_NODE, NO_NODE, arr + off)
            parts[name].append(arr)
    return CartForest(**{name: np.concatenate(p) for name, p in parts.items()}, offsets=offsets,
                      **concat_knots(trees))


def fit_cart_forest(*args: Any, **kwargs: Any) -> CartForest:
    """Fit ``n_estimators`` weighted CART trees (Algorithm 1), raw leaf statistics.

    :func:`fit_cart_trees` without the squared weights: ``variance`` is every node's
    weighted within-node variance (no leaf prior). Same parameters.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((100, 3)); y = X[:, 0] + 0.1 * rng.normal(size=100)
    >>> f = fit_cart_forest(X, y, None, task="regression", n_estimators=5, entropy=1)
    >>> from ebf._cart import mean_value
    >>> mean_value(f, X[:2]).shape
    (2, 1)
    """
    return fit_cart_trees(*args, **kwargs)[0]


def fit_cart_trees(
    X: np.ndarray,
    y: np.ndarray,
    sample_weight: np.ndarray | None,
    *,
    task: str,
    n_classes: int = 0,
    n_estimators: int = 100,
    weights: str = "exponential",
    min_samples_leaf: int | float = MIN_SAMPLES_LEAF,
    max_features: int | float | str | None = 1.0,
    max_depth: int | None = None,
    entropy: int,
    branch: int = 0,
    n_jobs: int | None = None,
    splitter: str = "exact",
    max_bins: int | str = "auto",
    leaf_knots: int = 0,
) -> tuple[CartForest, np.ndarray]:
    """Fit ``n_estimators`` weighted CART trees (Algorithm 1) and flatten them.

    Tree ``b`` draws from ``tree_rng(entropy, branch, b)``: first its bootstrap weights
    (:func:`~ebf.bootstrap.draw_weights`, multiplied by ``sample_weight``), then the integer
    seed of the scikit-learn tree (its random feature subsets). Should every positively
    weighted row draw weight zero (Poisson weights on very few rows), the weights are drawn
    again from the same generator. Trees are fit in ``n_jobs`` threads (scikit-learn's tree
    builder releases the GIL); the result does not depend on ``n_jobs``.

    Parameters
    ----------
    X : ndarray of shape (n_rows, n_features)
        Finite float64 (converted with :func:`as_float32`) or float32 values.
    y : ndarray of shape (n_rows,)
        Target (regression) or class codes ``0 .. n_classes - 1`` (classification).
    sample_weight : ndarray of shape (n_rows,) or None
        Non-negative row weights with a positive sum; multiply the bootstrap weights.
    task : {"regression", "classification"}
    n_classes : int
        Number of global classes (classification); leaf rows always have this width.
    n_estimators : int, default 100
        Number of trees ``B``.
    weights : {"exponential", "poisson", "none"}, default "exponential"
        Bayesian forest, Breiman's random forest, or unweighted CART trees.
    min_samples_leaf, max_features, max_depth
        As in ``sklearn.tree.DecisionTreeRegressor``; ``min_samples_leaf`` counts rows with
        positive weight (the paper's footnote 3).
    entropy : int
        Seed of the model (``basics.seeds.resolve_entropy``).
    branch : int, default 0
        Branch id in the seed (0 for a Bayesian forest; the trunk leaf in an EBF).
    n_jobs : int or None
        Threads over trees.
    splitter : {"exact", "hist"}, default "exact"
        scikit-learn's exact CART, or histogram CART over the bins of ``max_bins``,
        computed once for all trees (:mod:`ebf._hist_tree`; exact CART when every feature
        has a bin per value).
    max_bins : int or "auto", default "auto"
        Bins per feature of ``splitter="hist"`` (at most ``MAX_WIDE_BINS``); ``"auto"``: one
        bin per value for a feature with at most ``EXACT_BINS`` distinct values, else
        ``MAX_BINS`` quantile bins (:mod:`ebf.config`).
    leaf_knots : int, default 0
        Regression: keep at most this many knots of every leaf's weighted targets
        (:mod:`ebf._leaf_knots`); 0 keeps none.

    Returns
    -------
    forest : CartForest
        ``variance`` is the weighted within-node variance (:func:`with_leaf_prior` turns it
        into the predictive one).
    weight_sq : ndarray of shape (n_nodes,)
        Sum of the squared weights of every node's rows (for :func:`effective_rows`).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((100, 3)); y = X[:, 0] + 0.1 * rng.normal(size=100)
    >>> f, wsq = fit_cart_trees(X, y, None, task="regression", n_estimators=5, entropy=1)
    >>> wsq.shape == f.weight.shape and bool(np.all(wsq <= f.weight * f.weight))
    True
    """
    if task not in (REGRESSION, CLASSIFICATION):
        raise ValueError(f"task must be {REGRESSION!r} or {CLASSIFICATION!r}; got {task!r}.")
    X32 = X if X.dtype == np.float32 and X.flags.c_contiguous else as_float32(X)
    n = X32.shape[0]
    if n == 0:
        raise ValueError("Cannot fit a forest on 0 rows.")
    if task == REGRESSION:
        y = np.ascontiguousarray(y, dtype=np.float64)
        n_classes = 1
    else:
        y = np.ascontiguousarray(y, dtype=INDEX)
        if n_classes < 1 or (y.size and (y.min() < 0 or y.max() >= n_classes)):
            raise ValueError(f"Class codes must lie in 0 .. n_classes - 1 = {n_classes - 1}.")
        y = y.astype(np.float64)
    if y.shape != (n,):
        raise ValueError(f"y must have shape ({n},); got {y.shape}.")
    sw = None
    if sample_weight is not None:
        sw = np.asarray(sample_weight, dtype=np.float64)
        if sw.shape != (n,) or not np.all(np.isfinite(sw)) or np.any(sw < 0):
            raise ValueError(f"sample_weight must be {n} finite non-negative values.")
        if not np.any(sw > 0):
            raise ValueError("sample_weight must contain at least one positive value.")
    if splitter not in SPLITTERS:
        raise ValueError(f"splitter must be one of {SPLITTERS}; got {splitter!r}.")
    Tree = DecisionTreeRegressor if task == REGRESSION else DecisionTreeClassifier
    has_nan = bool(np.isnan(X32).any())
    hist = (_HistForest(X32, max_bins, max_features, min_samples_leaf, max_depth)
            if splitter == "hist" else None)

    def fit_one(b: int) -> dict[str, np.ndarray]:
        rng = tree_rng(entropy, branch, b)
        while True:
            w = draw_weights(weights, n, rng)
            if sw is not None:
                w *= sw
            if np.any(w > 0):
                break
        seed = int(rng.integers(0, 2**32))
        if hist is not None:
            return hist.tree(y, w, task, n_classes, seed, leaf_knots)
        est = Tree(min_samples_leaf=min_samples_leaf, max_features=max_features,
                   max_depth=max_depth, random_state=seed)
        # scikit-learn learns where missing values go only when it checks the input
        est.fit(X32, y, sample_weight=w, check_input=has_nan)
        return _flatten(est, X32, y, w, task, n_classes, leaf_knots)

    trees = thread_map(fit_one, range(n_estimators), n_jobs)
    return _concat(trees), np.concatenate([tr["weight_sq"] for tr in trees])
