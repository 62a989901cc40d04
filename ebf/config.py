"""Numba flags, dtypes and defaults shared by the kernels of the ``ebf`` package."""

from __future__ import annotations

import numpy as np

#: Flags for every numba kernel: compiled once per machine, GIL released so that threads
#: over trees or row blocks run in parallel.
JIT = dict(cache=True, nogil=True)

#: Node index dtype of flat trees; ``NO_NODE`` marks a missing child.
INDEX = np.int64
NO_NODE = -1

#: Bin codes fit in one byte: at most ``MAX_BINS`` bins, so ``MAX_BINS - 1`` edges per feature.
BIN_DTYPE = np.uint8
MAX_BINS = 255

#: Regression per-row statistics ``[1, w, w*y, w*y**2]`` (see ``LAYOUT.md``).
REG_STATS = 4
