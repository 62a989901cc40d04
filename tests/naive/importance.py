"""Oracle of impurity importances (``ebf.importance``): every split's decrease recomputed
from the training rows that reach its node, with the tree's own bootstrap weights."""

from __future__ import annotations

import numpy as np

from .cart import naive_path


def _impurity(y: np.ndarray, w: np.ndarray, n_classes: int) -> float:
    """Weighted squared error (``n_classes == 0``) or weighted Gini of rows ``y`` (codes)."""
    W = w.sum()
    if W <= 0:
        return 0.0
    if n_classes == 0:
        mu = (w * y).sum() / W
        return float((w * (y - mu) ** 2).sum())
    p = np.array([w[y == c].sum() for c in range(n_classes)]) / W
    return float(W * (1.0 - (p ** 2).sum()))


def naive_tree_decrease(left, right, feature, threshold, root, X, y, w, n_features,
                        n_classes=0, missing_left=None) -> np.ndarray:
    """Per feature, the sum over one tree's splits of ``I_P - I_L - I_R``, each impurity
    computed from the rows (weights ``w > 0``) that reach the node."""
    members: dict[int, list[int]] = {}
    for i in np.flatnonzero(w > 0):
        for node in naive_path(left, right, feature, threshold, root, X[i], missing_left):
            members.setdefault(node, []).append(i)
    out = np.zeros(n_features)
    for node, rows in members.items():
        if left[node] == -1:
            continue
        parts = [np.asarray(members.get(int(c), []), int) for c in (left[node], right[node])]
        rows = np.asarray(rows)
        dec = _impurity(y[rows], w[rows], n_classes) - sum(
            _impurity(y[r], w[r], n_classes) for r in parts)
        out[feature[node]] += dec
    return out
