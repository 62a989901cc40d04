"""Trunk stability: the posterior over shallow CART trunks (Taddy et al., 2015, Sec. 3).

:func:`trunk_posterior` refits the trunk on Bayesian-bootstrap data (weights
``theta ~ iid Exp(1)``, Sec. 2.1-2.3) and reports how often the sample trunk recurs, how
often each node splits on the same variable, where it splits (the paper's Fig. 4), and the
central-limit approximation of eq. (11) to the probability that a node's split variable
matches the sample's. :func:`split_match_at` applies the same eq. (11) to a stored trunk's
node and new rows (:mod:`ebf.diagnostics._drift`).

The CLT approximation (Sec. 3.1, eq. 6-11), generalised from binary features and squared
error to our binned features and both impurities: at a node with ``n`` rows, let split 1 be
the sample split and split ``j`` the best split on another feature ``j`` (on the same
unweighted data). The weighted impurity of a split is a function of the weights ``theta``;
its first-order Taylor expansion at ``theta = 1`` (eq. 8) is ``(1/n) sum_i theta_i g_i`` with
``g_i`` the row's impurity contribution (``w_i (y_i - ybar_side)^2`` for squared error,
``w_i (1 - 2 p_side,y_i + sum_k p_side,k^2)`` for Gini). With ``d_ji = g1_i - gj_i`` (eq. 9),
``Delta_j = (1/n) sum_i theta_i d_ji`` is asymptotically ``N(dbar_j, d_j'd_j / n^2)``
(eq. 10), and the sample split variable is kept with probability at least (eq. 11)

    1 - sum_{j != 1} Phi(-sqrt(n) |dbar_j| / sqrt(d_j'd_j / n)).

The paper's ``|dbar_j|`` relies on split 1 being the sample optimum (``dbar_j <= 0``). We
use the signed form ``1 - sum_j Phi(sqrt(n) dbar_j / sd_j)``, ``p(Delta_j > 0)`` under
eq. (10) whatever split 1 is: equal to the paper's for the sample split, and meaningful for
a split fixed beforehand (a stored trunk's split on a new window), where ``dbar_j > 0``
says another variable splits the rows better and drives the probability to zero.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import ndtr

from basics.seeds import resolve_entropy
from basics.threads import thread_map

from .._splitting import best_splits
from ..binning import bin_data, n_bins_of
from ..bootstrap import draw_weights
from ..config import MAX_BINS
from ..features import FeatureEncoder
from ..grower import BinnedSource, apply_binned, grow_trunk, node_histograms
from ..histogram import row_statistics
from ..trunk import Trunk, TrunkArrays

__all__ = [
    "TrunkPosterior",
    "clt_split_match",
    "node_rows",
    "plot_split_posterior",
    "split_match_at",
    "trunk_posterior",
]


def _paths(t: TrunkArrays) -> list[str]:
    """Path of every node from the root: ``""`` for the root, then ``"L"`` / ``"R"`` moves.

    Nodes are numbered level by level, so parents come before their children.
    """
    paths = [""] * t.n_nodes
    for j in range(t.n_nodes):
        if t.left[j] >= 0:
            paths[t.left[j]] = paths[j] + "L"
            paths[t.right[j]] = paths[j] + "R"
    return paths


def _splits(t: TrunkArrays) -> dict[str, tuple[int, float]]:
    """``path -> (feature, threshold)`` of every internal node."""
    return {p: (int(t.feature[j]), float(t.threshold[j]))
            for j, p in enumerate(_paths(t)) if t.feature[j] >= 0}


def _signature(splits: dict[str, tuple[int, float]]) -> tuple:
    """Structure of a trunk: the split variable at every internal node's path."""
    return tuple(sorted((p, f) for p, (f, _) in splits.items()))


def _describe(sig: tuple, names: list[str]) -> str:
    ordered = sorted(sig, key=lambda s: (len(s[0]), s[0]))
    return ", ".join(f"{p or 'root'}:{names[f]}" for p, f in ordered)


def _impurity_terms(y: np.ndarray, w: np.ndarray, left: np.ndarray, task: str,
                    n_classes: int) -> np.ndarray:
    """Per-row first-order impurity contributions ``g_i`` of a split (eq. 7-8).

    A side without rows contributes nothing (a stored split may leave one side of a new
    window empty: then it does not split those rows at all).
    """
    g = np.empty(y.shape[0])
    for side in (left, ~left):
        if not side.any():
            continue
        ws = w[side]
        if task == "regression":
            mu = np.dot(ws, y[side]) / ws.sum()
            g[side] = ws * (y[side] - mu) ** 2
        else:
            p = np.bincount(y[side], weights=ws, minlength=n_classes) / ws.sum()
            g[side] = ws * (1.0 - 2.0 * p[y[side]] + np.dot(p, p))
    return g


def clt_split_match(
    hist: np.ndarray,
    binned: np.ndarray,
    y: np.ndarray,
    w: np.ndarray,
    task: str,
    n_classes: int,
    min_leaf_rows: int,
    chosen: tuple[int, int],
    blocks: np.ndarray | None = None,
) -> float:
    """Eq. (11), signed: approximate probability that a node keeps its split variable.

    Split 1 is ``chosen``: the sample optimum (:func:`trunk_posterior`) or any split fixed
    beforehand, e.g. a stored trunk's split evaluated on new rows (:mod:`ebf.diagnostics._drift`).

    Parameters
    ----------
    hist : ndarray of shape (1, n_features, n_bins, k)
        Histogram of the node's rows (unweighted sample).
    binned : ndarray of shape (n, n_features), uint8
        The node's binned rows.
    y, w : ndarray of shape (n,)
        Targets (class codes) and data weights of the node's rows.
    task : {"regression", "classification"}
    n_classes : int
    min_leaf_rows : int
        The trunk's minimum leaf size (a candidate on feature ``j`` must respect it).
    chosen : (feature, bin)
        Split 1: rows with ``code <= bin`` on ``feature`` go left.
    blocks : ndarray of shape (n,), int, optional
        Block of every row, for rows that are dependent within blocks (consecutive rows of
        a time-ordered window: the flights of one day share its weather). The Bayesian
        bootstrap then draws one Exp(1) weight per block instead of per row, and eq. (10)
        holds with block sums ``D_b = sum_{i in b} d_i`` in place of the rows:
        ``Delta_j = sum_b theta_b D_b / n`` has variance ``sum_b D_b^2 / n^2``. One block
        per row (None) is the paper's eq. (10).

    Returns
    -------
    float
        ``max(0, 1 - sum_j Phi(z_j))`` over the other features ``j`` that have a valid
        split, ``z_j = sum_b D_b / sqrt(sum_b D_b^2)`` with ``d_j = g1 - gj`` (impurity
        contributions, lower is better); per row, ``z_j = sqrt(n) dbar_j / sqrt(d_j'd_j /
        n)``. For the sample optimum ``dbar_j <= 0`` and this is the paper's
        ``1 - sum_j Phi(-sqrt(n) |dbar_j| / sqrt(d_j'd_j / n))``; a split 1 worse than the
        best split on some feature (``dbar_j > 0``) gets a probability near zero.
    """
    f1, b1 = chosen
    g1 = _impurity_terms(y, w, binned[:, f1] <= b1, task, n_classes)
    miss = 0.0
    for j in range(binned.shape[1]):
        if j == f1:
            continue
        best = best_splits(np.ascontiguousarray(hist[:, j:j + 1]), task, min_leaf_rows)
        if best.feature[0] < 0:
            continue  # no valid split on feature j: it can never be chosen
        gj = _impurity_terms(y, w, binned[:, j] <= best.bin[0], task, n_classes)
        d = g1 - gj
        if blocks is not None:
            d = np.bincount(blocks, weights=d)
        scale = np.sqrt(np.dot(d, d))
        if scale == 0.0:
            continue  # identical partitions: the same split whatever the weights
        miss += float(ndtr(d.sum() / scale))
    return max(0.0, 1.0 - miss)


def node_rows(t: TrunkArrays, j: int, node_of_row: np.ndarray) -> np.ndarray:
    """Boolean mask of the rows that pass through node ``j`` of ``t``.

    Parameters
    ----------
    t : TrunkArrays
    j : int
        A node of ``t``.
    node_of_row : ndarray of shape (n,), int64
        The leaf node every row reaches (:func:`ebf.grower.apply_binned`).

    Returns
    -------
    ndarray of shape (n,), bool
    """
    return np.isin(node_of_row, _subtree(t, j))


def split_match_at(
    t: TrunkArrays,
    j: int,
    rows: np.ndarray,
    binned: np.ndarray,
    S: np.ndarray,
    y: np.ndarray,
    w: np.ndarray,
    n_bins: int,
    task: str,
    n_classes: int,
    min_leaf_rows: int,
    blocks: np.ndarray | None = None,
) -> float:
    """Eq. (11) at internal node ``j`` of ``t``, split 1 being ``t``'s split there.

    Parameters
    ----------
    t : TrunkArrays
    j : int
        An internal node of ``t``.
    rows : ndarray of shape (n,), bool
        The rows at the node (:func:`node_rows`).
    binned : ndarray of shape (n, n_features), uint8
        All rows, binned with the edges ``t`` was grown on.
    S : ndarray of shape (n, k)
        Their statistics (``histogram.row_statistics``).
    y, w : ndarray of shape (n,)
        Their targets (class codes) and data weights.
    n_bins : int
    task : {"regression", "classification"}
    n_classes : int
    min_leaf_rows : int
        Minimum rows on each side of a candidate split on another feature.
    blocks : ndarray of shape (n,), int, optional
        Block of every row (:func:`clt_split_match`).

    Returns
    -------
    float
        :func:`clt_split_match` of the node's rows.
    """
    hist = node_histograms(t, np.array([j]), binned[rows], S[rows], n_bins,
                           nodes=np.full(int(rows.sum()), j))
    f = int(t.feature[j])
    # split 1 is the node's variable at its best threshold on these rows, as the other
    # variables' splits are theirs: eq. (11) asks whether the variable still holds
    best = best_splits(np.ascontiguousarray(hist[:, f:f + 1]), task, min_leaf_rows)
    at = int(best.bin[0]) if best.feature[0] >= 0 else int(t.threshold_bin[j])
    return clt_split_match(hist, binned[rows], y[rows], w[rows], task, n_classes,
                           min_leaf_rows, (f, at), None if blocks is None else blocks[rows])


@dataclass
class TrunkPosterior:
    """Result of :func:`trunk_posterior`.

    Attributes
    ----------
    sample_trunk : Trunk
        The trunk fit to the data (``theta = 1``).
    draws : list of Trunk
        Trunks fit to Bayesian-bootstrap reweightings, on the sample trunk's bins.
    feature_names : list of str
    sample_frequency : float
        Fraction of draws with the sample trunk's structure (same split variable at every
        node; locations may differ), the paper's "sample tree occurs 62% of the time".
    structures : DataFrame
        Every structure seen, most frequent first: ``structure``, ``count``,
        ``frequency``, ``is_sample``.
    nodes : DataFrame
        One row per internal node of the sample trunk: ``path`` (``""`` root, then
        ``L``/``R``), ``feature``, ``threshold``, ``n_rows``, ``agreement`` (fraction of
        draws splitting the same path on the same variable), ``conditional_agreement``
        (the same among draws whose ancestors all agree), ``clt_match`` (eq. 11), and the
        5%, 50%, 95% quantiles of the split location among agreeing draws.
    split_locations : dict
        ``path -> ndarray`` of split locations of the agreeing draws.
    """

    sample_trunk: Trunk
    draws: list
    feature_names: list
    sample_frequency: float
    structures: pd.DataFrame
    nodes: pd.DataFrame
    split_locations: dict = field(default_factory=dict)

    def __str__(self) -> str:
        return (
            f"sample trunk recurs in {self.sample_frequency:.0%} of {len(self.draws)} draws\n"
            + self.sample_trunk.export_text(self.feature_names) + "\n"
            + self.nodes.to_string(index=False)
        )


def trunk_posterior(
    X: Any,
    y: Any,
    n_draws: int = 100,
    *,
    max_leaves: int | None = None,
    min_leaf_rows: int | None = None,
    max_depth: int | None = None,
    max_bins: int = MAX_BINS,
    task: str = "regression",
    sample_weight: Any = None,
    random_state: Any = None,
    n_jobs: int | None = None,
) -> TrunkPosterior:
    """Posterior over trunks by the Bayesian bootstrap (Sec. 3.2) with eq. (11) per node.

    Parameters
    ----------
    X : array-like or DataFrame of shape (n, n_features)
        Categorical and string columns become ordinal codes (:mod:`ebf.features`).
    y : array-like of shape (n,)
        Targets (regression) or labels (classification).
    n_draws : int, default=100
        Number of posterior trunks.
    max_leaves, min_leaf_rows, max_depth, max_bins
        Trunk size, as in :class:`~ebf.trunk.Trunk` (the paper: ``min_leaf_rows=3500`` of
        20640 California blocks).
    task : {"regression", "classification"}, default="regression"
    sample_weight : array-like of shape (n,), optional
        Data weights; the draws multiply them by ``Exp(1)`` weights.
    random_state : int, RandomState or None
        Draw ``k`` uses ``SeedSequence(entropy, spawn_key=(k,))``.
    n_jobs : int, optional
        Threads over draws (None: 1, -1: all cores, as in joblib). The result does not
        depend on it: draw ``k`` has its own seed. Every thread holds one draw's
        statistic matrix (``n`` x 4 float64, ``1 + n_classes`` columns for
        classification) and row nodes (``n`` int64); the binned ``X`` is shared.

    Returns
    -------
    TrunkPosterior

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((3000, 3)); y = 3 * (X[:, 0] > 0.5) + rng.normal(size=3000)
    >>> post = trunk_posterior(X, y, 20, max_leaves=2, random_state=0)
    >>> post.sample_frequency, post.nodes["feature"].tolist()
    (1.0, ['x0'])
    """
    if int(n_draws) < 1:
        raise ValueError(f"n_draws must be >= 1; got {n_draws}.")
    encoder = FeatureEncoder()
    Xf = encoder.fit_transform(X)
    names = [str(s) for s in encoder.names_]
    y = np.asarray(y)
    n_classes = 0
    if task == "classification":
        _, y = np.unique(y, return_inverse=True)
        n_classes = int(y.max()) + 1
    else:
        y = y.astype(np.float64)
    w = np.ones(Xf.shape[0]) if sample_weight is None else np.asarray(sample_weight, float)
    params = dict(max_leaves=max_leaves, min_leaf_rows=min_leaf_rows, max_depth=max_depth,
                  max_bins=max_bins, task=task, n_classes=n_classes or None)
    sample = Trunk(**params).fit(Xf, y, sample_weight=w)
    edges = sample.bin_edges_
    n_bins = n_bins_of(edges)
    # the draws change the weights, never the bins: X is binned once for all of them
    binned = bin_data(Xf, edges)
    entropy = resolve_entropy(random_state)
    state = sample._get_state()

    def draw(k: int) -> Trunk:
        rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(k,)))
        theta = draw_weights("exponential", Xf.shape[0], rng)
        S = row_statistics(y, theta * w, task, params["n_classes"])
        arrays = grow_trunk(BinnedSource(binned, S, n_bins), edges, task, params["n_classes"],
                            max_leaves=max_leaves, min_leaf_rows=min_leaf_rows,
                            max_depth=max_depth)
        trunk = Trunk(**params)
        trunk._set_state({**state, "trunk_": arrays.to_dict()})
        return trunk

    draws = thread_map(draw, range(n_draws), n_jobs)

    s_splits = _splits(sample.trunk_)
    d_splits = [_splits(t.trunk_) for t in draws]
    sig = _signature(s_splits)
    counts = Counter(_signature(s) for s in d_splits)
    structures = pd.DataFrame(
        [{"structure": _describe(s, names), "count": c, "frequency": c / n_draws,
          "is_sample": s == sig} for s, c in counts.most_common()]
    )

    S = row_statistics(y, w, task, n_classes or None)
    t = sample.trunk_
    node_of_row = apply_binned(t, binned, n_bins)
    paths = _paths(t)
    rows, locations = [], {}
    for j in range(t.n_nodes):
        if t.feature[j] < 0:
            continue
        p = paths[j]
        f = int(t.feature[j])
        ancestors = [p[:i] for i in range(len(p))]
        same = [ds.get(p, (-1,))[0] == f for ds in d_splits]
        parents_ok = [all(ds.get(a, (-1,))[0] == s_splits[a][0] for a in ancestors)
                      for ds in d_splits]
        loc = np.array([ds[p][1] for ds, ok in zip(d_splits, same, strict=True) if ok])
        locations[p] = loc
        clt = split_match_at(t, j, node_rows(t, j, node_of_row), binned, S, y, w, n_bins,
                             task, n_classes, min_leaf_rows or 1)
        n_ok = sum(parents_ok)
        q = np.quantile(loc, [0.05, 0.5, 0.95]) if loc.size else [np.nan] * 3
        rows.append({
            "path": p, "feature": names[f], "threshold": float(t.threshold[j]),
            "n_rows": int(t.n_rows[j]), "agreement": float(np.mean(same)),
            "conditional_agreement": (
                sum(a and b for a, b in zip(same, parents_ok, strict=True)) / n_ok
                if n_ok else np.nan),
            "clt_match": clt, "location_q05": q[0], "location_q50": q[1], "location_q95": q[2],
        })
    return TrunkPosterior(
        sample_trunk=sample, draws=draws, feature_names=names,
        sample_frequency=counts.get(sig, 0) / n_draws, structures=structures,
        nodes=pd.DataFrame(rows), split_locations=locations,
    )


def _subtree(t: TrunkArrays, j: int) -> np.ndarray:
    """Nodes of the subtree rooted at ``j``."""
    out, stack = [], [j]
    while stack:
        k = stack.pop()
        out.append(k)
        if t.left[k] >= 0:
            stack += [int(t.left[k]), int(t.right[k])]
    return np.array(out)


def plot_split_posterior(post: TrunkPosterior, paths: list[str] | None = None, ax: Any = None,
                         bins: int = 30) -> Any:
    """Histogram of the posterior split locations per node (the paper's Fig. 4, right).

    Parameters
    ----------
    post : TrunkPosterior
    paths : list of str, optional
        Nodes to draw (default: every internal node of the sample trunk).
    ax : matplotlib Axes, optional
    bins : int, default=30

    Returns
    -------
    matplotlib Axes
        One histogram per node of the locations among agreeing draws, with the sample
        split as a dashed line. Needs matplotlib (the ``examples`` extra).
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 3.5))
    nodes = post.nodes.set_index("path")
    for p in (list(nodes.index) if paths is None else paths):
        loc = post.split_locations.get(p, np.empty(0))
        label = f"{p or 'root'}: {nodes.loc[p, 'feature']} ({nodes.loc[p, 'agreement']:.0%})"
        if loc.size:
            line = ax.hist(loc, bins=bins, alpha=0.6, density=True, label=label)[2][0]
            ax.axvline(nodes.loc[p, "threshold"], ls="--", color=line.get_facecolor())
    ax.set_xlabel("split location")
    ax.set_ylabel("posterior density")
    ax.legend(fontsize="small")
    return ax
