"""Trunk drift: does a fitted EBF's trunk still hold on a new window of rows?

An Empirical Bayesian Forest fixes its trunk because, in large samples, the posterior over
the top of the tree is concentrated (Taddy et al. 2015, Sec. 3.1, eq. 6-11). When new rows
arrive, the same argument asks whether the *stored* trunk is still where that posterior
sits. :func:`trunk_drift` routes the window through the stored trunk and, at every stored
split, applies eq. (11) with split 1 fixed at the stored split (feature, bin): the
approximate posterior probability, given the window, that no other variable splits that
node's rows better (:func:`ebf.diagnostics._stability.split_match_at`, the signed form of
eq. 11). It also refits a trunk on the window (on the stored bins), reports how each
branch's share of rows moved and how well each branch predicts the window, and applies a
settable rule:
``"refit"`` the model when some split fails, else ``"update"`` its branches online.

This module reads the model and never changes it; it imports no dask (the retrain pipeline
calls it on a local model, possibly on a sample of a Dask window collected to pandas).
"""

from __future__ import annotations

import logging
import math
from numbers import Integral
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.utils.validation import check_is_fitted

from basics.familywise import check_correction
from basics.metrics import class_rows, nlpd, rmse
from basics.tasks import CLASSIFICATION, REGRESSION
from basics.validation import is_missing

from .._base import _one_column, regression_target
from ..binning import bin_data, n_bins_of
from ..ensemble import _EBF
from ..grower import BinnedSource, apply_binned, grow_trunk
from ..histogram import row_statistics
from ..subsample import _SSF
from ._drift_report import (
    COUNTED,
    SPLIT_COLUMNS,
    TOO_FEW,
    DriftReport,
    _decided,
    _unseen,
    with_performance,
)
from ._stability import _paths, _splits, node_rows, split_match_at
from ._window import DEFAULT_BLOCKS, DEFAULT_THRESHOLD, MIN_ROWS, block_ids

__all__ = ["DEFAULT_BLOCKS", "DEFAULT_MIN_GAIN", "DEFAULT_THRESHOLD", "MIN_NODE_ROWS",
           "DriftReport", "replicated_gain", "trunk_drift", "with_performance"]

logger = logging.getLogger(__name__)

#: A node needs at least this many window rows (and twice the scaled minimum leaf size) for
#: its probability to be computed and counted: eq. (11) is a central-limit approximation.
MIN_NODE_ROWS = MIN_ROWS

#: A refit must pay: the trunk refit on the window's first half must predict its second
#: half this much better than the stored trunk (:func:`replicated_gain`).
DEFAULT_MIN_GAIN = 0.01


def _check_model(model: Any) -> None:
    if isinstance(model, _SSF):
        raise TypeError(
            f"trunk drift needs an Empirical Bayesian Forest (a model with a trunk); "
            f"{type(model).__name__} has none. Use an EmpiricalBayesianForest* model."
        )
    if not isinstance(model, _EBF):
        hint = " (pass model.to_local())" if hasattr(model, "to_local") else ""
        raise TypeError(
            "trunk drift needs a fitted local EmpiricalBayesianForestRegressor or "
            f"EmpiricalBayesianForestClassifier; got {type(model).__name__}{hint}."
        )
    check_is_fitted(model, ["encoder_", "trunk_"])


def _check_arguments(threshold: Any, max_rows: Any) -> float:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) \
            or not 0.0 < float(threshold) < 1.0:
        raise ValueError(f"threshold must be a probability in (0, 1); got {threshold!r}.")
    if max_rows is not None and (isinstance(max_rows, bool) or not isinstance(max_rows, Integral)
                                 or max_rows < 1):
        raise ValueError(f"max_rows must be a positive integer or None; got {max_rows!r}.")
    return float(threshold)


def _window_target(model: Any, y: Any, n: int) -> np.ndarray:
    """The window's target, checked as the model's fit checks it (before any work)."""
    if model._task == REGRESSION:
        return regression_target(model, y, n)
    y = _one_column(model, y, n)
    missing = int(np.sum(is_missing(y)))
    if missing:
        raise ValueError(f"y has {missing} missing labels out of {n} window rows; drop "
                         "those rows before the drift check.")
    return y


def _take(X: Any, rows: np.ndarray) -> Any:
    return X.iloc[rows] if isinstance(X, pd.DataFrame) else np.asarray(X)[rows]


def trunk_drift(
    model: Any,
    X: Any,
    y: Any,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    max_rows: int | None = None,
    random_state: Any = 0,
    recalibrated: bool = True,
    blocks: int | None = DEFAULT_BLOCKS,
    min_gain: float = DEFAULT_MIN_GAIN,
    correction: str = "holm",
) -> DriftReport:
    """Check a fitted EBF's trunk against a new window of rows (eq. 6-11 of Taddy et al.).

    **Split probabilities.** The window's rows are encoded with the model's encoder,
    binned with the trunk's stored bin edges and routed through the stored trunk. At every
    stored split with enough rows, eq. (11) with split 1 = the stored split gives the
    approximate posterior probability, under the window's Bayesian-bootstrap posterior,
    that the stored split beats the best split on every other feature
    (:func:`ebf.diagnostics._stability.clt_split_match`, signed). Candidates on other features
    keep the trunk's minimum leaf size scaled to the window (``min_leaf_rows * n_window /
    n_fit``, at least 1). A node with fewer than ``max(MIN_NODE_ROWS, 2 * scaled min
    leaf)`` window rows gets NaN, status ``"too few rows"``, and does not count.

    **The rule.** ``decision = "refit"`` if some counted split fails and the change carries
    over in time. A split fails when its probability is below ``threshold`` after the
    correction for testing every counted split of the trunk at once (Holm's by default,
    :func:`basics.familywise.rejected`: on a stationary window the chance that any split
    fails stays at most ``threshold``); and the change carries over in time when a trunk
    refit on the window's first half predicts its second half at least ``min_gain`` better
    than the stored trunk (:func:`replicated_gain`, leaf values of both learnt on the first
    half); else
    ``"update"`` (the branches take the window online; the trunk stays). The default
    0.05 reads: the window is strong evidence (odds above 19 to 1) that another variable
    now splits this node better. Eq. (11) is a lower bound (a
    union bound over the features), so a probability near zero comes from a real change
    of the best variable, or from a split that was already a close contest at fit; a
    trunk whose splits were stable at fit (:func:`ebf.diagnostics.trunk_posterior`) scores
    near 1 at every node on a stationary window of a few thousand rows.

    **Dependent rows.** Eq. (10) treats rows as independent. The rows of a window often
    are not: the flights of one day share its weather, and one stormy day can favour
    another split variable over a whole month's window with a per-row z of 20 although
    the next month shows nothing of it (on the flight delays, every stored split of a
    January-June trunk failed on June itself, a month it was fit on). So the window is cut
    into ``blocks`` blocks of consecutive rows (in the order given, which should be time
    order) and the Bayesian bootstrap weights blocks, not rows
    (:func:`ebf.diagnostics._stability.clt_split_match` with ``blocks``): evidence must hold across
    the window's blocks to count. ``blocks=None`` is the paper's per-row eq. (10). Blocks
    cannot discount a split on a time-like variable (the day of the month splits a month's
    window into its stormy and calm stretches, block by block), which is what the
    second condition of the rule is for: such a split does not predict the second half.

    Nodes with too few rows give no evidence either way, so a window that tests nothing
    says ``"update"``. A classifier's window with labels it never saw says ``"refit"``: no
    update of the branches can add a class.

    **Also reported.** The trunk refit on the window (stored parameters and bins, the
    scaled minimum leaf size): per stored path, its feature and threshold there. Each
    branch's share of rows at fit and in the window, with a chi-square statistic over the
    branches. Each branch's error on the window, from the model's own predictions.

    **With a performance test.** The splits can hold while the model predicts worse (the
    noise grew, the target moved): :func:`ebf.diagnostics._drift_report.with_performance`
    adds a holdout-score test (:func:`ebf.diagnostics.performance.performance_drift`) to
    the family, so that the family-wise level covers both kinds of test.

    Parameters
    ----------
    model : EmpiricalBayesianForestRegressor or EmpiricalBayesianForestClassifier
        Fitted (or loaded) local model; read only.
    X : DataFrame or array-like of shape (n_rows, n_features)
        The new window, with the model's columns (checked by the model's encoder).
    y : array-like of shape (n_rows,)
        Its targets (regression) or labels (classification).
    threshold : float, default=DEFAULT_THRESHOLD (0.05)
        The family-wise level: the chance, on a stationary window, that some split fails.
    correction : {"holm", "bonferroni", "none"}, default="holm"
        How the counted splits are tested together (:func:`basics.familywise.rejected`);
        ``"none"`` tests each at ``threshold``.
    blocks : int or None, default=DEFAULT_BLOCKS (50)
        Blocks of consecutive rows the window is cut into for eq. (10) (see above);
        None: one per row.
    min_gain : float, default=DEFAULT_MIN_GAIN (0.01)
        A refit needs failing splits and a :func:`replicated_gain` at least this large;
        0 (or less) refits on failing splits alone.
    max_rows : int, optional
        Analyse a random sub-sample of this many rows (eq. 11 needs only a sample); the
        sample is drawn once from ``random_state``, so the report is reproducible.
    random_state : int, default=0
        Seed of the ``max_rows`` sub-sample.
    recalibrated : bool, default=True
        Regression: score the NLPD of the distribution the model predicts (recalibrated
        if it has a recalibration map); False scores its own mixture.

    Returns
    -------
    DriftReport

    Raises
    ------
    TypeError
        If ``model`` is not a local EBF (an SSF has no trunk; a Dask model needs
        ``to_local()``).
    sklearn.exceptions.NotFittedError
        If ``model`` is not fitted.
    ValueError
        On an empty window, a ``y`` of another length, missing or non-finite targets,
        columns the model does not know, or a bad ``threshold`` / ``max_rows``.

    Examples
    --------
    >>> from ebf import EmpiricalBayesianForestRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((4000, 3)); y = 4 * (X[:, 0] > 0.5) + rng.normal(size=4000)
    >>> ebf = EmpiricalBayesianForestRegressor(
    ...     n_estimators=5, trunk_max_leaves=2, random_state=0).fit(X, y)
    >>> X2 = rng.random((2000, 3)); y2 = 4 * (X2[:, 1] > 0.5) + rng.normal(size=2000)
    >>> trunk_drift(ebf, X2, y2).decision, trunk_drift(ebf, X, y).decision
    ('refit', 'update')
    """
    _check_model(model)
    threshold = _check_arguments(threshold, max_rows)
    check_correction(correction)
    n = int(X.shape[0]) if hasattr(X, "shape") else len(X)
    if n == 0:
        raise ValueError("the window X has no rows; trunk drift needs new rows to check.")
    y = _window_target(model, y, n)
    if max_rows is not None and n > max_rows:
        rows = np.sort(np.random.default_rng(random_state).choice(n, int(max_rows),
                                                                  replace=False))
        X, y, n = _take(X, rows), y[rows], int(max_rows)
    A = model._transform(X)

    task = model._task
    trunk = model.trunk_
    if task == CLASSIFICATION:
        codes = pd.Index(np.asarray(model.classes_)).get_indexer(y)
        seen = codes >= 0
        n_classes = len(model.classes_)
        target = codes[seen]
    else:
        seen = np.ones(n, dtype=bool)
        n_classes = 0
        target = y
    n_unseen = int(n - seen.sum())
    block = None if blocks is None else block_ids(n, blocks)[seen]
    splits, min_node, gain = _split_table(model, A[seen], target, n_classes, block)
    branches, statistic, pvalue = _branch_table(model, X, y, trunk.apply(A), recalibrated)
    report = _decided(DriftReport(
        splits=splits, branches=branches, share_statistic=statistic, share_pvalue=pvalue,
        threshold=threshold, decision="", reason="", n_rows=n, task=task,
        n_unseen_labels=n_unseen, min_node_rows=min_node, replicated_gain=gain,
        min_gain=min_gain, correction=correction), _unseen(y[~seen]))
    logger.info("trunk drift on %d rows: %s (%s)", n, report.decision, report.reason)
    return report


def _scaled_min_leaf(trunk: Any, n: int) -> int:
    """The trunk's minimum leaf size scaled to ``n`` rows (``min_leaf_rows * n / n_fit``, at
    least 1)."""
    return max(1, round((trunk.min_leaf_rows or 1) * n / int(trunk.trunk_.n_rows[0])))


def _refit_trunk(model: Any, binned: np.ndarray, S: np.ndarray) -> Any:
    """The trunk grown on these rows with the stored parameters and bins, its minimum leaf
    size scaled to the rows (``min_leaf_rows * n / n_fit``, at least 1)."""
    trunk = model.trunk_
    min_leaf = _scaled_min_leaf(trunk, binned.shape[0])
    return grow_trunk(BinnedSource(binned, S, n_bins_of(trunk.bin_edges_)), trunk.bin_edges_,
                      model._task, trunk.n_classes_ if model._task == CLASSIFICATION else None,
                      max_leaves=trunk.max_leaves_, min_leaf_rows=min_leaf,
                      min_leaf_weight=trunk.min_leaf_weight, max_depth=trunk.max_depth)


def _heldout_loss(t: Any, binned: np.ndarray, S: np.ndarray, half: int, task: str,
                  n_bins: int) -> float:
    """Loss on rows ``half:`` of trunk ``t``'s leaf predictions learnt on rows ``:half``:
    squared error of the leaf means (regression), log loss of the leaf class frequencies
    with add-one smoothing (classification); a leaf without learning rows predicts from
    all of them."""
    first, second = slice(0, half), slice(half, None)
    node_a = apply_binned(t, binned[first], n_bins)
    sums = np.zeros((t.n_nodes, S.shape[1]))
    np.add.at(sums, node_a, S[first])
    node_b = apply_binned(t, binned[second], n_bins)
    known = sums[node_b, 0] > 0
    learnt = np.where(known[:, None], sums[node_b], S[first].sum(axis=0))
    Sb = S[second]
    if task == CLASSIFICATION:
        p = (learnt[:, 1:] + 1.0) / (learnt[:, 1:].sum(axis=1, keepdims=True)
                                     + learnt.shape[1] - 1)
        return float(-np.sum(Sb[:, 1:] * np.log(p)))
    mean = learnt[:, 2] / np.maximum(learnt[:, 1], 1e-300)
    return float(np.sum(Sb[:, 3] - 2.0 * mean * Sb[:, 2] + mean * mean * Sb[:, 1]))


def replicated_gain(model: Any, binned: np.ndarray, S: np.ndarray) -> float:
    """How much better a trunk refit on the first half of the window predicts the second
    half than the stored trunk does (both trunks' leaf values learnt on the first half):
    ``1 - loss(refit) / loss(stored)``, NaN for fewer than ``2 * MIN_NODE_ROWS`` rows.

    The rows are in time order, so a split that only describes one stretch of the window
    (a time-like variable, a stormy day) does not carry over to the second half and earns
    nothing; a changed relation does, and earns its share of the error.
    """
    n = binned.shape[0]
    if n < 2 * MIN_NODE_ROWS:
        return math.nan
    half = n // 2
    refit = _refit_trunk(model, binned[:half], S[:half])
    n_bins = n_bins_of(model.trunk_.bin_edges_)
    stored = _heldout_loss(model.trunk_.trunk_, binned, S, half, model._task, n_bins)
    if stored <= 0:
        return 0.0
    return 1.0 - _heldout_loss(refit, binned, S, half, model._task, n_bins) / stored


def _split_table(model: Any, A: np.ndarray, target: np.ndarray, n_classes: int,
                 blocks: np.ndarray | None) -> tuple[pd.DataFrame, int, float]:
    """Eq. (11) at every stored split, and the trunk refit on the window at its path;
    also the window rows a node needs to be counted and :func:`replicated_gain`."""
    trunk = model.trunk_
    t = trunk.trunk_
    names = [str(s) for s in model.encoder_.names_]
    task = model._task
    edges = trunk.bin_edges_
    n_bins = n_bins_of(edges)
    n_win = int(target.shape[0])
    min_leaf = _scaled_min_leaf(trunk, n_win)
    min_node = max(MIN_NODE_ROWS, 2 * min_leaf)
    binned = bin_data(A, edges)
    w = np.ones(n_win)
    S = row_statistics(target, w, task, n_classes or None)
    refit = _splits(_refit_trunk(model, binned, S)) if n_win else {}
    node_of_row = apply_binned(t, binned, n_bins)
    rows = []
    for j, path in enumerate(_paths(t)):
        if t.feature[j] < 0:
            continue
        at = node_rows(t, j, node_of_row)
        count = int(at.sum())
        prob = math.nan
        if count >= min_node:
            prob = split_match_at(t, j, at, binned, S, target, w, n_bins, task, n_classes,
                                  min_leaf, blocks)
        f = int(t.feature[j])
        rf, rt = refit.get(path, (-1, math.nan))
        rows.append({
            "path": path, "feature": names[f], "threshold": float(t.threshold[j]),
            "n_window": count, "probability": prob,
            "status": COUNTED if count >= min_node else TOO_FEW,
            "refit_feature": names[rf] if rf >= 0 else None, "refit_threshold": rt,
            "same_feature": rf == f,
        })
    return (pd.DataFrame.from_records(rows, columns=SPLIT_COLUMNS), min_node,
            replicated_gain(model, binned, S))


def _branch_table(model: Any, X: Any, y: np.ndarray, leaf: np.ndarray,
                  recalibrated: bool) -> tuple[pd.DataFrame, float, float]:
    """Branch shares at fit and in the window, their chi-square, and per-branch errors."""
    n_fit = np.asarray(model.branch_sizes_, dtype=np.int64)
    share_fit = n_fit / n_fit.sum()
    n = leaf.shape[0]
    counts = np.bincount(leaf, minlength=n_fit.size)
    if n_fit.size > 1:
        test = stats.chisquare(counts, n * share_fit)
        statistic, pvalue = float(test.statistic), float(test.pvalue)
    else:
        statistic, pvalue = 0.0, 1.0
    table = pd.DataFrame({"branch": np.arange(n_fit.size), "n_fit": n_fit,
                          "share_fit": share_fit, "n": counts, "share_window": counts / n,
                          "share_change": counts / n - share_fit})
    if model._task == REGRESSION:
        dist = model.predict_distribution(X, recalibrated=recalibrated)
        mean = dist.mean

        def scores(r):
            return {"rmse": rmse(y[r], mean[r]), "nlpd": nlpd(y[r], dist[r]),
                    "bias": float(np.mean(y[r] - mean[r]))}
        keys = ("rmse", "nlpd", "bias")
    else:
        correct, loss, _ = class_rows(model.predict_proba(X), model.classes_, y)

        def scores(r):
            return {"log_loss": float(loss[r].mean()), "accuracy": float(correct[r].mean())}
        keys = ("log_loss", "accuracy")
    errors = [scores(leaf == b) if c else dict.fromkeys(keys, math.nan)
              for b, c in enumerate(counts)]
    return pd.concat([table, pd.DataFrame(errors, columns=list(keys))], axis=1), statistic, pvalue
