"""Plain-NumPy reference implementations (oracles) that the numba kernels are tested against.

Every function here is written for clarity, not speed: loops, dense linear algebra and
enumeration. Each section belongs to one area of the package.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

# ---------------------------------------------------------------- predictive mixtures (oracles)

# ---------------------------------------------------------------- Gaussian belief propagation

# ---------------------------------------------------------------- IKN classification counts

# ---------------------------------------------------------------- Mondrian tree sampling
