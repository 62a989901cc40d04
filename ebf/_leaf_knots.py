"""Empirical leaves: every regression leaf's weighted targets as at most ``K`` knots.

A Bayesian forest's leaf holds weighted rows, and the Bayesian bootstrap's own predictive of
the leaf is the weighted empirical distribution of their targets (Taddy et al. 2015,
Sec. 2.1). ``leaf_model="empirical"`` keeps that shape compactly: at fit, the rows of a leaf
sorted by target are cut into ``K`` parts of equal cumulative weight (a weighted quantile
sketch; a row on a cut lends its weight to both parts) and a *knot* is the weighted mean of
its part, carrying the part's weight. Knots of equal value merge, so a leaf with at most
``K`` distinct targets keeps them exactly. The knots' weighted mean is the leaf mean.

At prediction every knot is a Gaussian kernel of variance ``h^2 = max(V - Var_knots,
KERNEL_SHARE V, floor)`` per leaf, ``V`` the leaf's Gaussian predictive variance
(:mod:`basics.leaf_noise`) and ``Var_knots`` the knots' weighted variance; where the knots
alone are wider than ``V - h^2`` (the leaf prior narrowed a loud leaf among quiet ones) they
are drawn towards the leaf mean by ``sqrt((V - h^2) / Var_knots)``. So the leaf keeps the
mean and variance of the Gaussian leaf and only its shape follows the data (skewed or
integer-valued targets), its kernels are never spikes, and a leaf of equal targets is
exactly the Gaussian leaf. The forest's predictive is the mixture over
trees of their leaves' kernels (weight ``1 / T`` times the knot's weight), a
:class:`basics.mixture.GaussianMixture` with up to ``T * K`` components per row (padded with
zero weights), so its CDF, quantiles, CRPS and log density are those of the mixture.

Storage (:class:`ebf._cart.CartForest`): ``knot_offsets`` (int64, one per node and one past
the last; node ``j`` owns knots ``knot_offsets[j]:knot_offsets[j + 1]``, none at internal
nodes), ``knot_value`` (float32, the knot minus the node's ``value``) and ``knot_weight``
(float32, summing to one per leaf). Both are re-centred and re-normalised at prediction, so
the float32 rounding moves neither the leaf mean nor its variance.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from basics.bounds import MAX_ABS_LOCATION, check_range
from basics.flat_tree import INDEX, NO_NODE
from basics.jit import JIT
from basics.validation import state_array

from ._tree_validation import check_nodes

__all__ = ["KNOT_ARRAYS", "LEAF_KNOTS", "LEAF_MODELS", "MAX_LEAF_KNOTS", "check_knots",
           "checked_knot_arrays", "knot_rows", "knot_width", "tree_knots"]

#: ``leaf_model`` options of the CART regressors.
LEAF_MODELS = ("gaussian", "empirical")
#: Default most knots per leaf (``benchmarks/bench_leaf_model.py``: the smallest ``K`` whose
#: CRPS is within 0.2% of ``K = 32`` on every regression task of ``bench_peers``).
LEAF_KNOTS = 8
#: Most knots per leaf a model may hold (a prediction allocates ``T * K`` columns per row).
MAX_LEAF_KNOTS = 256
#: The arrays of :class:`ebf._cart.CartForest` that hold the knots (empty without them).
KNOT_ARRAYS = ("knot_offsets", "knot_value", "knot_weight")
#: Least share of a leaf's predictive variance its kernels keep (their variance ``h^2``):
#: where the knots alone are wider than ``(1 - KERNEL_SHARE) V``, they are drawn towards the
#: leaf mean until the leaf's variance is ``V`` again.
KERNEL_SHARE = 0.1
#: Knot weights are float32: their sum per leaf is one up to this.
_WEIGHT_TOL = 1e-4


# ------------------------------------------------------------------------------ fitting


@njit(**JIT)
def _sketch_kernel(node, y, w, order, centre, k, counts, value, weight):  # pragma: no cover
    """Knots of every leaf: ``order`` sorts the rows by (node, target); writes the knots in
    that order into ``value`` / ``weight`` and their number per node into ``counts``;
    returns the number written."""
    n = order.shape[0]
    out = 0
    start = 0
    while start < n:
        j = node[order[start]]
        stop = start
        total = 0.0
        distinct = 0
        last = np.nan
        while stop < n and node[order[stop]] == j:
            i = order[stop]
            total += w[i]
            if y[i] != last:
                distinct += 1
                last = y[i]
            stop += 1
        first = out
        if distinct <= k:  # the targets themselves, merged by value
            r = start
            while r < stop:
                v = y[order[r]]
                acc = 0.0
                while r < stop and y[order[r]] == v:
                    acc += w[order[r]]
                    r += 1
                out = _push(value, weight, out, first, v - centre[j], acc / total)
        else:  # cut the cumulative weight into k equal parts
            part = 0
            lo = 0.0
            cum = 0.0
            pw = 0.0
            py = 0.0
            y_lo = np.inf  # a part of one repeated target is that target, exactly
            y_hi = -np.inf
            for r in range(start, stop):
                i = order[r]
                cum += w[i]
                hi = cum if r < stop - 1 else total
                while True:
                    top = total * (part + 1) / k if part < k - 1 else np.inf
                    take = min(hi, top) - lo
                    if take > 0.0:
                        pw += take
                        py += take * y[i]
                        y_lo = min(y_lo, y[i])
                        y_hi = max(y_hi, y[i])
                    if hi >= top:
                        if pw > 0.0:
                            v = y_lo if y_lo == y_hi else py / pw
                            out = _push(value, weight, out, first, v - centre[j], pw / total)
                        pw = 0.0
                        py = 0.0
                        y_lo = np.inf
                        y_hi = -np.inf
                        lo = top
                        part += 1
                    else:
                        lo = hi
                        break
            if pw > 0.0:
                v = y_lo if y_lo == y_hi else py / pw
                out = _push(value, weight, out, first, v - centre[j], pw / total)
        counts[j] = out - first
        start = stop
    return out


@njit(**JIT)
def _push(value, weight, out, first, v, p):  # pragma: no cover - jitted
    """Append knot ``(v, p)`` at ``out``; return the next free slot. Knots come in
    non-decreasing order: one equal to the previous knot of its leaf merges into it."""
    if out > first and value[out - 1] == v:
        weight[out - 1] += p
        return out
    value[out] = v
    weight[out] = p
    return out + 1


def tree_knots(node: np.ndarray, y: np.ndarray, w: np.ndarray, centre: np.ndarray,
               n_nodes: int, k: int) -> dict[str, np.ndarray]:
    """The knots of one tree's leaves (module docstring).

    Parameters
    ----------
    node : ndarray of shape (n_rows,), int64
        The leaf (local node id) of every row of positive weight.
    y, w : ndarray of shape (n_rows,)
        Their targets and (positive) bootstrap weights.
    centre : ndarray of shape (n_nodes,)
        Every node's weighted mean (``value[:, 0]``): knots are stored relative to it.
    n_nodes : int
    k : int
        Most knots per leaf.

    Returns
    -------
    dict
        ``knot_offsets`` (n_nodes + 1,), ``knot_value`` and ``knot_weight`` (float32).

    Examples
    --------
    >>> out = tree_knots(np.array([1, 1, 1, 2]), np.array([3.0, 1.0, 3.0, 5.0]),
    ...                  np.ones(4), np.array([0.0, 7 / 3, 5.0]), 3, 4)
    >>> out["knot_offsets"].tolist(), out["knot_weight"].astype(float).round(3).tolist()
    ([0, 0, 2, 3], [0.333, 0.667, 1.0])
    """
    node = np.ascontiguousarray(node, dtype=INDEX)
    y = np.ascontiguousarray(y, dtype=np.float64)
    w = np.ascontiguousarray(w, dtype=np.float64)
    order = np.lexsort((y, node))
    value = np.empty(node.shape[0])
    weight = np.empty(node.shape[0])
    counts = np.zeros(n_nodes, INDEX)
    n = _sketch_kernel(node, y, w, order, np.ascontiguousarray(centre, dtype=np.float64),
                       int(k), counts, value, weight)
    return {"knot_offsets": np.concatenate([[0], np.cumsum(counts)]).astype(INDEX),
            "knot_value": value[:n].astype(np.float32),
            "knot_weight": weight[:n].astype(np.float32)}


def concat_knots(trees: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The knots of the trees of one forest, nodes concatenated in tree order."""
    if not trees or "knot_offsets" not in trees[0]:
        return {}
    shift = np.cumsum([0] + [tr["knot_offsets"][-1] for tr in trees[:-1]])
    offsets = [tr["knot_offsets"][:-1] + s for tr, s in zip(trees, shift, strict=True)]
    offsets.append(np.array([shift[-1] + trees[-1]["knot_offsets"][-1]], INDEX))
    return {"knot_offsets": np.concatenate(offsets).astype(INDEX),
            "knot_value": np.concatenate([tr["knot_value"] for tr in trees]),
            "knot_weight": np.concatenate([tr["knot_weight"] for tr in trees])}


# ------------------------------------------------------------------------------ predicting


@njit(**JIT)
def knot_rows(leaf, leaves, w_out, m_out, v_out):  # pragma: no cover - jitted
    """Mixture components of every row from its leaves' knots (``leaf`` is
    :class:`ebf._cart.LeafStats`): ``T * K_max`` columns, zero-weight padding last."""
    n_trees = leaves.shape[1]
    offsets, dev, prob = leaf.knot_offsets, leaf.knot_value, leaf.knot_weight
    for i in range(leaves.shape[0]):
        col = 0
        for t in range(n_trees):
            j = leaves[i, t]
            lo = offsets[j]
            hi = offsets[j + 1]
            total = 0.0
            mean = 0.0
            for q in range(lo, hi):  # in float64: float32 products would move the mean
                total += np.float64(prob[q])
                mean += np.float64(prob[q]) * np.float64(dev[q])
            mean /= total
            spread = 0.0
            for q in range(lo, hi):  # two passes: no cancellation
                d = np.float64(dev[q]) - mean
                spread += np.float64(prob[q]) * d * d
            spread /= total
            var = max(leaf.variance[j], leaf.floor)
            h2 = max(var - spread, KERNEL_SHARE * var, leaf.floor)
            # knots wider than the leaf's variance leaves them come closer to its mean
            shrink = math.sqrt((var - h2) / spread) if var - h2 < spread else 1.0
            for q in range(lo, hi):
                w_out[i, col] = np.float64(prob[q]) / total / n_trees
                m_out[i, col] = leaf.value[j, 0] + shrink * (np.float64(dev[q]) - mean)
                v_out[i, col] = h2
                col += 1
        for c in range(col, w_out.shape[1]):
            w_out[i, c] = 0.0
            m_out[i, c] = 0.0
            v_out[i, c] = 1.0


def knot_width(forest: Any) -> int:
    """Columns of a row's mixture: trees times the most knots of any leaf."""
    return forest.n_trees * int(np.diff(forest.knot_offsets).max(initial=1))


# ------------------------------------------------------------------------------ loading


def checked_knot_arrays(state: dict[str, Any], left: np.ndarray,
                        offsets: np.ndarray) -> dict[str, np.ndarray]:
    """The knot arrays of a ``CartForest`` state (all absent: none), checked.

    ``knot_offsets`` non-decreasing from 0 to the number of knots, none at internal nodes,
    one to :data:`MAX_LEAF_KNOTS` at every leaf; values finite within
    ``±2 MAX_ABS_LOCATION``; weights in (0, 1] summing to one per leaf.

    Raises
    ------
    ValueError
        Naming the array, or the tree and node, and what is wrong.
    """
    present = [name for name in KNOT_ARRAYS if name in state]
    if not present:
        return empty_knots()
    if len(present) != len(KNOT_ARRAYS):
        raise ValueError(f"CartForest state has {present} but not all of {list(KNOT_ARRAYS)}.")
    n = left.shape[0]
    off = state_array(state, "knot_offsets", INDEX, (n + 1,), owned=False)
    n_knots = int(off[-1]) if off.size else 0
    if off[0] != 0 or np.any(np.diff(off) < 0) or n_knots < 0:
        raise ValueError("CartForest knot_offsets must not decrease from 0.")
    value = state_array(state, "knot_value", np.float32, (n_knots,), owned=False)
    weight = state_array(state, "knot_weight", np.float32, (n_knots,), owned=False)
    count = np.diff(off)
    leaf = left == NO_NODE
    check_nodes(~leaf & (count != 0), lambda j: f"internal node with {count[j]} knots", offsets)
    check_nodes(leaf & ((count < 1) | (count > MAX_LEAF_KNOTS)), lambda j: (
        f"leaf with {count[j]} knots (1 to {MAX_LEAF_KNOTS})"), offsets)
    check_range("knot_value", value.astype(np.float64), -2 * MAX_ABS_LOCATION,
                2 * MAX_ABS_LOCATION, "2 * MAX_ABS_LOCATION")
    check_range("knot_weight", weight.astype(np.float64),
                float(np.finfo(np.float32).smallest_subnormal), 1.0, "(0, 1]")
    sums = np.add.reduceat(weight.astype(np.float64), off[:-1][leaf]) if n_knots else []
    bad = np.zeros(n, bool)
    bad[leaf] = np.abs(np.asarray(sums) - 1.0) > _WEIGHT_TOL
    check_nodes(bad, lambda j: "knot weights do not sum to 1", offsets)
    return {"knot_offsets": off, "knot_value": value, "knot_weight": weight}


def empty_knots() -> dict[str, np.ndarray]:
    """The knot arrays of a forest without knots."""
    return {"knot_offsets": np.zeros(0, INDEX), "knot_value": np.zeros(0, np.float32),
            "knot_weight": np.zeros(0, np.float32)}


def check_knots(forest: Any, leaf_knots: int) -> None:
    """Raise ``ValueError`` unless ``forest`` holds knots exactly when ``leaf_knots > 0``,
    at most ``leaf_knots`` per leaf (a model's parameters and its arrays agree)."""
    has = forest.knot_offsets.size > 0
    if has != (leaf_knots > 0):
        raise ValueError("the forest " + ("holds leaf knots but leaf_model is not 'empirical'"
                                          if has else "holds no leaf knots but leaf_model is "
                                          "'empirical'") + ".")
    if has and int(np.diff(forest.knot_offsets).max()) > leaf_knots:
        raise ValueError(f"the forest has a leaf with more than leaf_knots={leaf_knots} knots.")
