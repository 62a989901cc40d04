"""Testing several hypotheses at once at a family-wise level (Holm 1979; Bonferroni).

A trunk-drift check (:func:`ebf.trunk_drift`) reads each stored split's probability as the
p-value of "the stored variable still splits this node best". Testing each of ``m`` splits
at a level ``alpha`` calls a change somewhere on a stationary window with a chance up to
``m * alpha``; :func:`rejected` holds the chance of any false rejection (the family-wise
error rate) at ``alpha`` instead, for p-values of any dependence.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["CORRECTIONS", "check_correction", "rejected"]

#: ``"holm"``: Holm's step-down procedure; ``"bonferroni"``: every test at ``alpha / m``;
#: ``"none"``: every test at ``alpha`` (no family-wise control).
CORRECTIONS = ("holm", "bonferroni", "none")


def check_correction(correction: Any) -> str:
    """``correction`` if it is one of :data:`CORRECTIONS`, else a ``ValueError``."""
    if correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {CORRECTIONS}; got {correction!r}.")
    return str(correction)


def rejected(p: Any, alpha: float, correction: str = "holm") -> np.ndarray:
    """Which of the hypotheses with p-values ``p`` are rejected at family-wise level
    ``alpha``.

    Holm (1979): with the p-values sorted, ``p_(1) <= ... <= p_(m)``, reject ``H_(k)``
    while ``p_(k) < alpha / (m - k + 1)``, and stop at the first that is not; as powerful as
    Bonferroni's ``p < alpha / m`` or more, with the same guarantee. Ties keep their order.

    Parameters
    ----------
    p : array-like of float, shape (m,)
        P-values (NaN is never rejected).
    alpha : float
        The family-wise level.
    correction : {"holm", "bonferroni", "none"}, default="holm"

    Returns
    -------
    ndarray of bool, shape (m,)
        In the order of ``p``.

    Examples
    --------
    >>> rejected([0.004, 0.02, 0.3], 0.05).tolist()
    [True, True, False]
    >>> rejected([0.004, 0.02, 0.3], 0.05, "bonferroni").tolist()
    [True, False, False]
    >>> rejected([0.004, 0.02, 0.3], 0.01, "none").tolist()
    [True, False, False]
    """
    check_correction(correction)
    p = np.asarray(p, dtype=np.float64)
    m = p.size
    if correction == "none":
        return p < alpha
    if correction == "bonferroni":
        return p < alpha / max(m, 1)
    out = np.zeros(m, dtype=bool)
    for k, i in enumerate(np.argsort(p, kind="stable")):
        if not p[i] < alpha / (m - k):
            break
        out[i] = True
    return out
