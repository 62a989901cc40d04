"""Data and comparison shared by the trunk tests (``test_trunk``, ``test_trunk_grower``)."""

from __future__ import annotations

import numpy as np

STRUCTURE = ("feature", "threshold_bin", "threshold", "left", "right", "depth", "n_rows",
             "leaf_id")
SUMS = ("weight", "stats", "gain")


def trunk_data(seed, n=600, task="regression", n_classes=3, weighted=True):
    """Features with few distinct values (exact bins), labels depending on them."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([
        rng.integers(0, 12, n).astype(float),
        np.round(rng.normal(size=n), 1),
        rng.integers(0, 3, n) * 2.5,
        rng.integers(0, 40, n) / 4.0,
    ])
    signal = (X[:, 0] > 5) * 2.0 + np.sin(X[:, 1]) + 0.1 * X[:, 3]
    if task == "regression":
        y = signal + 0.3 * rng.normal(size=n)
    else:
        y = np.digitize(signal + 0.5 * rng.normal(size=n), [0.8, 2.0])
        y = np.minimum(y, n_classes - 1)
    w = rng.exponential(size=n) if weighted else np.ones(n)
    return X, y, w


def assert_same_trunk(a, b, exact_sums=False):
    """Assert two trunks (or their ``to_dict``) have the same structure and sums."""
    a = a if isinstance(a, dict) else a.to_dict()
    b = b if isinstance(b, dict) else b.to_dict()
    for name in STRUCTURE:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    for name in SUMS:
        if exact_sums:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)
        else:
            np.testing.assert_allclose(a[name], b[name], rtol=1e-9, atol=1e-9, err_msg=name)
