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
    raise_nonfinite(np.isnan(A).sum(axis=0), np.isinf(A).sum(axis=0), names, A.shape[0], what)


def raise_nonfinite(nan: np.ndarray, inf: np.ndarray, names: Sequence[str] | None, n_rows: int,
                    what: str) -> None:
    """Raise ``ValueError`` naming every column with NaN or inf counts (no-op if none).

    Parameters
    ----------
    nan, inf : ndarray of shape (n_columns,)
        NaN and infinite values per column (e.g. summed over the partitions of a dataset).
    names : column names, or None for ``column 0, column 1, ...``
    n_rows : int
        Rows the counts are out of.
    what : what the array is (``"X"``, ``"y"``), used in the message.
    """
    parts = []
    for c in np.flatnonzero(np.asarray(nan) + np.asarray(inf)):
        label = str(names[c]) if names is not None else f"column {c}"
        kinds = []
        if nan[c]:
            kinds.append(f"{int(nan[c])} NaN")
        if inf[c]:
            kinds.append(f"{int(inf[c])} inf")
        parts.append(f"{label!r}: {' and '.join(kinds)}")
    if parts:
        raise ValueError(
            f"{what} contains NaN or inf in {len(parts)} column(s) ({'; '.join(parts)}) out of "
            f"{n_rows} rows; drop or impute those values before fitting or predicting."
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
