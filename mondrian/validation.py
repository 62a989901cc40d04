"""Input checks shared by every estimator: errors that name the column and the count."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np


def check_finite(A: np.ndarray, names: Sequence[str] | None, what: str) -> None:
    """Raise ``ValueError`` naming every column of ``A`` that holds NaN or inf.

    Parameters
    ----------
    A : ndarray of shape (n_rows, n_columns)
    names : column names, or None for ``column 0, column 1, ...``
    what : what the array is (``"X"``, ``"y"``), used in the message.
    """
    if A.size == 0 or np.isfinite(A).all():
        return
    bad_nan = np.isnan(A).sum(axis=0)
    bad_inf = np.isinf(A).sum(axis=0)
    parts = []
    for c in np.flatnonzero(bad_nan + bad_inf):
        label = str(names[c]) if names is not None else f"column {c}"
        kinds = []
        if bad_nan[c]:
            kinds.append(f"{int(bad_nan[c])} NaN")
        if bad_inf[c]:
            kinds.append(f"{int(bad_inf[c])} inf")
        parts.append(f"{label!r}: {' and '.join(kinds)}")
    raise ValueError(
        f"{what} contains NaN or inf in {len(parts)} column(s) ({'; '.join(parts)}) out of "
        f"{A.shape[0]} rows; drop or impute those values before fitting or predicting."
    )


@contextmanager
def unchanged_on_error(estimator: object) -> Iterator[None]:
    """Restore the estimator's attributes if the block raises (a failed fit changes nothing).

    Fitting code rebinds attributes rather than mutating arrays in place, so a shallow
    snapshot of ``__dict__`` is enough.
    """
    snapshot = dict(estimator.__dict__)
    try:
        yield
    except BaseException:
        estimator.__dict__.clear()
        estimator.__dict__.update(snapshot)
        raise
