"""``n_jobs`` to a number of threads, one rule for every estimator.

Tree ensembles here run their numba kernels and scikit-learn tree builders (both release
the GIL) in a thread pool; ``n_jobs`` follows joblib: None is 1, ``-1`` all cores, ``-2``
all but one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from numbers import Integral
from typing import Any

from joblib import effective_n_jobs
from sklearn.utils._param_validation import Interval

__all__ = ["N_JOBS", "n_threads", "thread_map"]

#: The ``_parameter_constraints`` entry of ``n_jobs``: any int but 0 (which joblib refuses
#: only when threads start, so a model loaded with ``n_jobs=0`` would fail at predict), or None.
N_JOBS = [Interval(Integral, None, -1, closed="right"), Interval(Integral, 1, None, closed="left"),
          None]


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


def thread_map(fn: Callable[[Any], Any], items: Iterable[Any], n_jobs: int | None) -> list:
    """``[fn(item) for item in items]``, in up to ``n_threads(n_jobs)`` threads.

    Results keep the order of ``items``; one item, or one thread, runs in the caller's
    thread (no pool). The functions mapped here release the GIL (numba ``nogil`` kernels,
    scikit-learn's tree builders), so threads run in parallel.

    Examples
    --------
    >>> thread_map(lambda x: x * x, range(4), n_jobs=2)
    [0, 1, 4, 9]
    """
    items = list(items)
    k = min(n_threads(n_jobs), len(items))
    if k <= 1:
        return [fn(item) for item in items]
    with ThreadPoolExecutor(k) as pool:
        return list(pool.map(fn, items))
