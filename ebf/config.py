"""Dtypes and defaults shared by the kernels of the ``ebf`` package (the numba flags are
:data:`basics.jit.JIT`, the flat-tree index dtype :mod:`basics.flat_tree`'s)."""

from __future__ import annotations

import numpy as np

#: Bin codes fit in one byte: at most ``MAX_BINS`` bins, so ``MAX_BINS - 1`` edges per feature.
#: The trunk and its distributed histograms keep to this.
BIN_DTYPE = np.uint8
MAX_BINS = 255
#: The histogram trees of a forest keep one bin per value of a feature with at most
#: ``EXACT_BINS`` distinct values (flight times in minutes, codes), with two-byte codes
#: (``WIDE_BIN_DTYPE``) beyond ``MAX_BINS``: a deep tree needs the thresholds exact CART
#: would see there. Continuous features get ``MAX_BINS`` quantile bins: finer ones change
#: nothing measurable and cost time (each bin is a candidate threshold).
WIDE_BIN_DTYPE = np.uint16
MAX_WIDE_BINS = 65535
EXACT_BINS = 4096

#: Minimum rows per leaf of branch trees, the default of every forest and ensemble estimator
#: and of every branch learner's record (:data:`ebf.learners.LEARNERS`; Mondrian branches
#: split at ``2 * MIN_SAMPLES_LEAF`` rows, the Mondrian paper's 10).
MIN_SAMPLES_LEAF = 5

#: Regression per-row statistics of histograms, ``[1, w, w*y, w*y**2]`` (``docs/architecture.md``).
ROW_REG_STATS = 4

#: Rows drawn (without replacement) to compute quantile bin edges in one process; the
#: quantiles of 200k rows are within ~0.2% in rank of the exact ones (as in scikit-learn's
#: histogram gradient boosting).
BIN_SUBSAMPLE = 200_000

#: The trunk grower asks its histogram source for at most this many bytes of histograms at
#: once; a level with more open nodes is requested in several chunks of nodes.
HIST_MAX_BYTES = 64 * 2**20

#: A split is taken only if its impurity decrease exceeds ``SPLIT_RTOL`` times the scale of
#: the sums that cancel in it (``sum w y**2`` for regression, ``sum w`` for Gini): smaller
#: decreases are rounding noise, e.g. in a node whose labels are all equal.
SPLIT_RTOL = 64 * float(np.finfo(np.float64).eps)
