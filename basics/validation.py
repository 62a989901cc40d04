"""Input checks shared by every estimator: errors that name the column and the count.

This is the bottom module of the input checks: ``mondrian`` and ``ebf`` estimators (and the
Dask layer's summary pass) call the same functions, so the same input gets the same error.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from numbers import Integral
from typing import Any

import numpy as np

#: Largest ``|y|`` a regressor accepts. The models keep sums of ``w * y**2`` (and products
#: of such sums); beyond about 1e150 they overflow float64 (max 1.8e308) and predictions
#: come out NaN or inf. 1e100 leaves room for 1e100 weighted rows, and no measured quantity
#: comes near it.
MAX_ABS_TARGET = 1e100


#: What to do about missing values a model cannot take: the advice of its error message.
NAN_FIX = ("drop or impute those values, or use a model that learns where missing values go: "
           "ebf's CART forests (BayesianForestRegressor / Classifier, or an Empirical Bayesian "
           "or sub-sample forest with branch='bayesian' or 'random'); Mondrian, SMC and BART "
           "models refuse them.")


def check_finite(A: np.ndarray, names: Sequence[str] | None, what: str, *,
                 allow_nan: bool = False, fix: str | None = None) -> None:
    """Raise ``ValueError`` naming every column of ``A`` that holds NaN or inf.

    Parameters
    ----------
    A : ndarray of shape (n_rows, n_columns)
    names : column names, or None for ``column 0, column 1, ...``
    what : what the array is (``"X"``, ``"y"``), used in the message.
    allow_nan : bool, default=False
        NaN (a missing value) is accepted; only infinities raise.
    fix : str, optional
        Replaces the message's advice (see :func:`raise_nonfinite`).
    """
    if A.size == 0 or np.isfinite(A).all():
        return
    nan = np.zeros(A.shape[1], np.int64) if allow_nan else np.isnan(A).sum(axis=0)
    raise_nonfinite(nan, np.isinf(A).sum(axis=0), names, A.shape[0], what, fix)


def raise_nonfinite(nan: np.ndarray, inf: np.ndarray, names: Sequence[str] | None, n_rows: int,
                    what: str, fix: str | None = None) -> None:
    """Raise ``ValueError`` naming every column with NaN or inf counts (no-op if none).

    Parameters
    ----------
    nan, inf : ndarray of shape (n_columns,)
        NaN and infinite values per column (e.g. summed over the partitions of a dataset).
    names : column names, or None for ``column 0, column 1, ...``
    n_rows : int
        Rows the counts are out of.
    what : what the array is (``"X"``, ``"y"``), used in the message.
    fix : str, optional
        What to do about it (default: drop or impute those values).
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
            f"{n_rows} rows; {fix or 'drop or impute those values before fitting or predicting.'}"
        )


def check_target_range(low: float, high: float, name: str = "y") -> None:
    """Refuse a regression target reaching beyond ``±MAX_ABS_TARGET``, naming the fix.

    Parameters
    ----------
    low, high : float
        The smallest and largest (finite) target values, e.g. from a summary pass.
    name : str, default="y"
        The target column, for the message.

    Raises
    ------
    ValueError
        Naming the column, its range, why (the sums overflow) and the fix (rescale).

    Examples
    --------
    >>> check_target_range(-3.0, 1e7, "price")
    >>> check_target_range(0.0, 2e200, "price")
    Traceback (most recent call last):
    ValueError: the regression target 'price' ranges from 0 to 2e+200: beyond ±1e+100 ...
    """
    biggest = max(abs(float(low)), abs(float(high)))
    if biggest <= MAX_ABS_TARGET:
        return
    scale = 10.0 ** math.floor(math.log10(biggest)) if math.isfinite(biggest) else None
    fix = f"divide it by {scale:.0e}" if scale else "divide it by a large power of ten"
    raise ValueError(
        f"the regression target {name!r} ranges from {float(low):.4g} to {float(high):.4g}: "
        f"beyond ±{MAX_ABS_TARGET:.0e} the sums the model keeps (of w*y^2) overflow and its "
        f"predictions would be NaN or inf; rescale the target before fitting ({fix}, or "
        "model log(y) for a positive target) and scale the predictions back."
    )


def check_regression_target(y: np.ndarray, name: str | None = None) -> None:
    """The checks of every regressor's target: finite, and within ``±MAX_ABS_TARGET``.

    Parameters
    ----------
    y : ndarray of shape (n_rows,), float64
    name : str, optional
        The target's column name (a pandas Series' ``name``); "y" if None.

    Raises
    ------
    ValueError
        Naming the NaN / inf counts (:func:`check_finite`) or the range
        (:func:`check_target_range`).
    """
    if y.size == 0 or (np.abs(y) <= MAX_ABS_TARGET).all():  # NaN and inf fail this too
        return
    label = "y" if name is None else str(name)
    check_finite(y[:, None], [label], "y")
    check_target_range(float(np.min(y)), float(np.max(y)), label)


def refuse_scored_targets(count: int, name: str, n_rows: int | None = None,
                          low: float | None = None, high: float | None = None) -> None:
    """Refuse to score ``count`` targets beyond ``±MAX_ABS_TARGET`` (no-op if none).

    A model is fit only on targets within the bound; scores of targets beyond it overflow
    float64 (the squared error of 1e160 is inf), so RMSE and CRPS would come out inf.

    Parameters
    ----------
    count : int
        Targets beyond the bound (infinities included, NaN not: a missing target).
    name : str
        The target column, for the message.
    n_rows : int, optional
        The rows they are out of.
    low, high : float, optional
        The smallest and largest target, if known.

    Raises
    ------
    ValueError
        Naming the column, the count, the bound and the fix.

    Examples
    --------
    >>> refuse_scored_targets(0, "price")
    >>> refuse_scored_targets(2, "price", 10, -1.0, 3e160)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: the target 'price' has 2 of 10 rows beyond ±1e+100 (from -1 to 3e+160): ...
    """
    if not count:
        return
    of = f" of {n_rows:,}" if n_rows is not None else ""
    span = f" (from {low:.4g} to {high:.4g})" if low is not None and high is not None else ""
    raise ValueError(
        f"the target {name!r} has {int(count):,}{of} rows beyond ±{MAX_ABS_TARGET:.0e}{span}: "
        "no model is fit on such targets and their scores overflow (RMSE and CRPS would be "
        "inf); drop those rows, or rescale the target (e.g. divide it by a power of ten) "
        "and score a model trained on the rescaled target")


def check_scored_targets(y: Any, name: str | None = None) -> None:
    """Refuse regression targets to score beyond ``±MAX_ABS_TARGET`` (NaN is let through:
    a missing target), before any score is computed (:func:`refuse_scored_targets`).
    ``name`` defaults to ``y.name`` (a pandas Series), else ``"y"``.

    Examples
    --------
    >>> check_scored_targets(np.array([1.0, np.nan]))
    >>> check_scored_targets(np.array([1.0, 1e160, -np.inf]))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: the target 'y' has 2 of 3 rows beyond ±1e+100 (from -inf to 1e+160): ...
    """
    if name is None:
        name = getattr(y, "name", None)
    y = np.asarray(y, dtype=np.float64)
    beyond = np.abs(y) > MAX_ABS_TARGET
    if beyond.any():
        refuse_scored_targets(int(beyond.sum()), "y" if name is None else str(name), y.size,
                              float(np.nanmin(y)), float(np.nanmax(y)))


def is_missing(y: np.ndarray) -> np.ndarray:
    """NaN / None / pandas NA per label."""
    if y.dtype.kind in "fc":
        return np.isnan(y)
    if y.dtype == object:
        import pandas as pd

        return np.asarray(pd.isna(y), dtype=bool)
    return np.zeros(y.shape, dtype=bool)


def check_target_not_in_features(X: Any, y: Any) -> None:
    """Refuse a target that is also a feature column (a leak that makes every fit useless).

    Only decidable when ``X`` is a DataFrame and ``y`` a named Series.
    """
    name = getattr(y, "name", None)
    columns = getattr(X, "columns", None)
    if name is not None and columns is not None and name in set(columns):
        raise ValueError(
            f"The target column {name!r} is also among the {len(columns)} feature columns; "
            f"drop it from X (X.drop(columns=[{name!r}]))."
        )


def check_numeric_columns(X: Any, estimator: str) -> None:
    """Refuse DataFrame columns that are not numbers (strings, datetimes), naming each one.

    Parameters
    ----------
    X : object
        Checked only if it is a DataFrame (has ``columns`` and ``dtypes``); numeric and
        boolean columns pass without a copy, object / string / category columns pass if
        every value converts to float.
    estimator : str
        The estimator's name, for the message.

    Raises
    ------
    ValueError
        Naming every column that is not numeric, with its dtype and the fix.
    """
    dtypes = getattr(X, "dtypes", None)
    if dtypes is None or not hasattr(X, "columns") or not hasattr(dtypes, "items"):
        return
    bad = []
    for name, dtype in dtypes.items():
        kind = getattr(dtype, "kind", "O")
        if kind in "biuf":
            continue
        if kind in "mM":
            bad.append(f"{name!r} ({dtype}: convert it to a number, e.g. seconds since a date, "
                       "or to features such as the day of the year and the hour)")
            continue
        try:
            np.asarray(X[name], dtype=np.float64)
        except (TypeError, ValueError):
            values = X[name].dropna()
            example = values.iloc[0] if len(values) else None
            bad.append(f"{name!r} ({dtype}, e.g. {example!r}: encode it as numbers, e.g. "
                       "pandas.get_dummies or .astype('category').cat.codes)")
    if bad:
        raise ValueError(
            f"{estimator} needs numeric features, but {len(bad)} column(s) of X are not "
            f"numbers: {'; '.join(bad)}."
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
