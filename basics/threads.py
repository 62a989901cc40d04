"""``n_jobs`` to a number of threads, one rule for every estimator.

Tree ensembles here run their numba kernels and scikit-learn tree builders (both release
the GIL) in a thread pool; ``n_jobs`` follows joblib: None is 1, ``-1`` all cores, ``-2``
all but one.
"""

from __future__ import annotations

from joblib import effective_n_jobs

__all__ = ["n_threads"]


def n_threads(n_jobs: int | None) -> int:
    """Number of threads for ``n_jobs`` (None -> 1, -1 -> all cores), as joblib counts.

    Parameters
    ----------
    n_jobs : int or None

    Returns
    -------
    int
        At least 1.

    Examples
    --------
    >>> n_threads(None), n_threads(3)
    (1, 3)
    """
    return max(1, int(effective_n_jobs(n_jobs)))
