"""``random_state`` to the integer seed a fitted model stores.

Every model draws its randomness from ``numpy.random.SeedSequence(entropy, spawn_key=key)``
with keys that name what is drawn (a branch, a tree, an update), never the order in which
tasks run; the seed a model stores is that ``entropy``.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any

import numpy as np
from sklearn.utils import check_random_state

__all__ = ["ENTROPY_HIGH", "resolve_entropy"]

#: Entropy drawn for ``random_state=None`` (or a RandomState) lies in ``[0, 2**32)``, the
#: range of integer seeds scikit-learn accepts, so it can be passed back as ``random_state``.
ENTROPY_HIGH = 2**32


def resolve_entropy(random_state: Any) -> int:
    """Turn ``random_state`` into the integer entropy a fitted model stores.

    An ``int`` is its own entropy. ``None``, a ``RandomState`` or a ``Generator`` is asked for
    one integer, once, at fit; storing that integer makes the fitted model reproducible (a
    refit with ``random_state=entropy`` gives the same model).

    Parameters
    ----------
    random_state : int, numpy.random.RandomState, numpy.random.Generator or None

    Returns
    -------
    int
        A non-negative integer.

    Raises
    ------
    ValueError
        For a negative integer.

    Examples
    --------
    >>> resolve_entropy(42)
    42
    >>> 0 <= resolve_entropy(None) < 2**32
    True
    """
    if isinstance(random_state, Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be a non-negative integer; got {random_state}.")
        return int(random_state)
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, ENTROPY_HIGH))
    rs = check_random_state(random_state)
    return int(rs.randint(0, ENTROPY_HIGH, dtype=np.int64))
