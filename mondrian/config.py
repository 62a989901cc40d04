"""Numba flags and numeric constants shared by every kernel of the package.

All kernels are plain functions over arrays compiled with ``njit(**JIT)``; no jitclass
(it does not pickle, so it would break Dask).
"""

from __future__ import annotations

import numpy as np

#: Flags for every numba kernel: compiled once per machine, GIL released so that
#: ``n_jobs`` threads over trees run in parallel.
JIT = dict(cache=True, nogil=True)

#: Index dtype of the flat tree arrays; ``NO_NODE`` marks a missing child/parent.
INDEX = np.int64
NO_NODE = -1

#: Statistics kept per node by regression Mondrian trees: ``stats[j] = (n_j, sum y, sum y^2)``.
NODE_REG_STATS = 3

#: Prediction kernels may reassociate sums (the distance to a block is a sum over features,
#: which then vectorises); no flag that assumes finite values (split times can be inf).
PREDICT_JIT = dict(JIT, fastmath={"reassoc", "nsz", "contract"})
