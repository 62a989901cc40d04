"""The one check of probability levels: quantile levels and the masses of central intervals.

Every caller checks levels here: the mixture's quantiles and summaries
(:mod:`basics.mixture`), the metrics' coverages (:mod:`basics.metrics`), the estimators'
``predict_quantiles`` / ``predict_summary`` (:mod:`basics.predictive`), the Dask layer's
quantile columns and the command line's ``--quantiles`` / ``--levels``.

The rule: numbers, a scalar or a 1-D array (or, where a caller takes levels per row, a 2-D
``(n_rows, m)`` array), every value a probability in [0, 1] (NaN never is); with
``interior``, strictly inside (0, 1). Quantile levels may be 0 and 1 (their quantiles are
-inf and +inf, which inverse-transform sampling meets); the mass of a central interval
must be inside: an interval of mass 0 or 1 says nothing about calibration. Order and
repeats are free (no caller needs sorted levels); a caller that needs at least one level
says so itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["DEFAULT_QUANTILES", "check_levels"]

#: The quantile levels every prediction reports unless told otherwise: the median and the
#: ends of the central 90% interval (``predict_quantiles``, ``predict_summary``, the Dask
#: layer's quantile columns, ``ebf predict --quantiles``, ...).
DEFAULT_QUANTILES = (0.05, 0.5, 0.95)

_EXAMPLES = {False: ", ".join(map(str, DEFAULT_QUANTILES)), True: "0.5, 0.9"}


def check_levels(levels: Any, name: str = "q", *, interior: bool = False,
                 n_rows: int | None = None) -> np.ndarray:
    """Probability levels as a float64 array of the same shape, after checking them.

    Parameters
    ----------
    levels : float or array-like of shape (n_levels,)
        With ``n_rows``, also of shape (n_rows, n_levels): the levels of each row.
    name : str, default "q"
        How the error names the argument.
    interior : bool, default=False
        Levels strictly inside (0, 1) (masses of central intervals); else in [0, 1].
    n_rows : int, optional
        Also accept one row of levels per row of the caller's ``n_rows`` rows.

    Returns
    -------
    ndarray of float64
        0-D for a scalar.

    Raises
    ------
    ValueError
        Naming the argument, how many values are wrong, the first one and the fix.

    Examples
    --------
    >>> check_levels([0.05, 0.95]).tolist()
    [0.05, 0.95]
    >>> check_levels([0.5, 1.5])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: q must hold probability levels in [0, 1]: 1 of 2 values is not, q[1] = 1.5; ...
    """
    try:
        qa = np.asarray(levels, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be numbers (probability levels such as "
                         f"{_EXAMPLES[interior]}); got "
                         f"{levels!r:.80}.") from None
    per_row = n_rows is not None and qa.ndim == 2 and qa.shape[0] == n_rows
    if qa.ndim > 1 and not per_row:
        want = "a number or a 1-D array of levels" + (
            "" if n_rows is None else f", or a ({n_rows}, m) array of levels per row")
        raise ValueError(f"{name} must be {want}; got shape {qa.shape}.")
    inside = (qa > 0) & (qa < 1) if interior else (qa >= 0) & (qa <= 1)
    if not np.all(inside):
        bad = np.argwhere(~inside.reshape(qa.shape))
        first = tuple(int(i) for i in bad[0])
        at = name + (f"[{', '.join(map(str, first))}]" if first else "")
        n_bad = bad.shape[0]
        raise ValueError(
            f"{name} must hold probability levels in {'(0, 1)' if interior else '[0, 1]'}: "
            f"{n_bad} of {qa.size} value{'s' if qa.size > 1 else ''} "
            f"{'is' if n_bad == 1 else 'are'} not, {at} = {qa[first]}; pass levels such as "
            f"{_EXAMPLES[interior]}.")
    return qa
