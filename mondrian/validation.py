"""Input checks shared by every estimator: errors that name the column and the count."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from numbers import Integral
from typing import Any

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


def state_array(state: dict, key: str, dtype: Any, shape: tuple,
                owned: bool = True) -> np.ndarray:
    """``state[key]`` as a C-contiguous array of ``dtype`` and ``shape``.

    For persistence states read from untrusted files: the stored dtype must cast to
    ``dtype`` safely (a float array where indices belong is refused, never truncated) and
    the shape must match exactly.

    Parameters
    ----------
    state : dict
    key : str
        The entry; named in the message.
    dtype : numpy dtype
    shape : tuple of int
    owned : bool, default True
        Copy unless the array owns its (writeable) data, for models that update their
        arrays in place; False keeps any C-contiguous array of ``dtype`` as it is (arrays
        that are never written, and ``np.load`` returns views).

    Returns
    -------
    ndarray

    Raises
    ------
    ValueError
        Naming ``key``, the dtype or shape found and the one expected.

    Examples
    --------
    >>> state_array({"a": np.arange(3)}, "a", np.int64, (3,)).dtype
    dtype('int64')
    """
    value = state[key]
    if not isinstance(value, np.ndarray) or not np.can_cast(value.dtype, dtype, "safe"):
        found = f"a {value.dtype} array" if isinstance(value, np.ndarray) else repr(value)[:60]
        raise ValueError(f"{key} must be an array of {np.dtype(dtype)}, got {found}")
    if value.shape != shape:
        raise ValueError(f"{key} has shape {value.shape}, expected {shape}")
    return np.require(value, dtype, ["C", "W", "O"] if owned else ["C"])


def state_int(state: dict, key: str, minimum: int) -> int:
    """``state[key]`` as an int ``>= minimum`` (JSON ints arrive as Python ints).

    Examples
    --------
    >>> state_int({"n": 3}, "n", 1)
    3
    """
    value = state[key]
    if not isinstance(value, Integral) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{key} must be an integer >= {minimum}, got {value!r:.60}")
    return int(value)


def check_classes(classes: np.ndarray, key: str = "classes_") -> np.ndarray:
    """``classes`` if it is a non-empty, sorted 1-D array of unique labels, else ValueError.

    Examples
    --------
    >>> check_classes(np.array([0, 1])).tolist()
    [0, 1]
    """
    try:
        sorted_unique = np.array_equal(np.unique(classes), classes)
    except TypeError:  # labels that do not compare with each other
        sorted_unique = False
    if classes.ndim != 1 or classes.shape[0] < 1 or not sorted_unique:
        raise ValueError(f"{key} must be a non-empty, sorted 1-D array of unique labels")
    return classes


def state_names(state: dict, key: str, n: int) -> np.ndarray | None:
    """``state[key]`` (absent or None: None) as an object array of ``n`` strings.

    Examples
    --------
    >>> state_names({"names": ["a", "b"]}, "names", 2).tolist()
    ['a', 'b']
    """
    names = state.get(key)
    if names is None:
        return None
    if not isinstance(names, list) or len(names) != n or not all(isinstance(c, str)
                                                                 for c in names):
        raise ValueError(f"{key} must be a list of {n} strings")
    return np.asarray(names, dtype=object)
