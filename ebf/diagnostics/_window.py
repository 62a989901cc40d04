"""What the drift tests of a new window share (:mod:`ebf.diagnostics._drift`,
:mod:`ebf.diagnostics.performance`): the family-wise level they are tested at, the blocks of
consecutive rows their Bayesian bootstraps weight, the fewest rows a test counts on, and
their reports' values as JSON.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["DEFAULT_BLOCKS", "DEFAULT_THRESHOLD", "MIN_ROWS", "block_ids", "json_value"]

#: The family-wise level of a drift check: the chance that some test of a stationary
#: window fires (a split fails, or the holdout score worsens).
DEFAULT_THRESHOLD = 0.05

#: Blocks of consecutive window rows the Bayesian bootstrap weights (see
#: :func:`ebf.trunk_drift`, "Dependent rows"): a month of flights in blocks of about 14 hours.
DEFAULT_BLOCKS = 50

#: A test on fewer window rows gives no evidence either way (it is not counted): both the
#: split test (eq. 11) and the bootstrap of a mean score are central-limit approximations.
MIN_ROWS = 30


def block_ids(n: int, blocks: int | None) -> np.ndarray:
    """The block of each of ``n`` consecutive rows cut into ``blocks`` blocks of (nearly)
    equal size, in order; None (or more blocks than rows): one block per row.

    Examples
    --------
    >>> block_ids(5, 2).tolist(), block_ids(3, None).tolist()
    ([0, 0, 0, 1, 1], [0, 1, 2])
    """
    if blocks is None or blocks >= n:
        return np.arange(n)
    return np.arange(n) * int(blocks) // n


def json_value(v: Any) -> Any:
    """A JSON value: numpy scalars as Python ones, NaN / inf as None, lists element-wise."""
    if isinstance(v, (list, tuple)):
        return [json_value(x) for x in v]
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v
