"""The one traversal order of a flat tree (parents before children)."""

from __future__ import annotations

import numba
import numpy as np

from .config import INDEX, JIT, NO_NODE


@numba.njit(**JIT)
def preorder(left, right, root, n_nodes):
    """Live slots in depth-first preorder: parents before children (explicit stack).

    The one traversal order of the package: top-down passes walk it forwards, bottom-up
    passes backwards (slot order itself is not topological after online updates).
    """
    order = np.empty(n_nodes, INDEX)
    stack = np.empty(n_nodes + 1, INDEX)
    stack[0] = root
    top = 1
    k = 0
    while top > 0:
        top -= 1
        j = stack[top]
        order[k] = j
        k += 1
        if left[j] != NO_NODE:
            stack[top] = right[j]
            stack[top + 1] = left[j]
            top += 2
    return order[:k]
