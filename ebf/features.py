"""Model input: a pandas DataFrame or an array-like -> a float64 C-contiguous matrix.

Trees split on ordered values, so a categorical column becomes ordinal codes ``0 .. K-1``:

- pandas ``category`` columns keep the order of their categories (``series.cat.categories``),
- ``object`` / string columns use their sorted unique strings,
- ``bool`` columns use ``["False", "True"]`` (codes 0 and 1).

Categories are stored as strings and incoming values are matched by their string form.
Numeric columns are copied as float64.

Fallback for categorical values that cannot be coded: a category unseen at fit, or a missing
value (NaN / None / NA) in a categorical column, takes the code of the column's most frequent
training category (ties: the smaller code). Such rows are counted and logged (``logging``,
level WARNING, naming the column); they never raise. Missing or infinite values in *numeric*
columns raise ``ValueError`` naming the column and the count.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype, is_bool_dtype, is_numeric_dtype
from sklearn.utils import check_array

from mondrian.validation import check_finite, state_array

__all__ = ["CATEGORICAL", "NUMERIC", "FeatureEncoder"]

logger = logging.getLogger(__name__)

NUMERIC = "numeric"
CATEGORICAL = "categorical"
_BOOL_CATEGORIES = np.array(["False", "True"])


def _column_kind(name: str, dtype: Any) -> str:
    """``NUMERIC`` or ``CATEGORICAL`` for a column dtype, else a TypeError with the fix."""
    if isinstance(dtype, (pd.CategoricalDtype, pd.StringDtype)) or is_bool_dtype(dtype):
        return CATEGORICAL
    if isinstance(dtype, np.dtype) and dtype.kind == "O":
        return CATEGORICAL  # must hold strings: checked when the values are coded
    if is_numeric_dtype(dtype) and np.dtype(getattr(dtype, "numpy_dtype", dtype)).kind != "c":
        return NUMERIC
    raise TypeError(
        f"Column {name!r} has dtype {dtype}, which the model cannot use; convert it to a "
        "numeric column (e.g. datetimes to seconds with .astype('int64'), complex numbers to "
        "their real and imaginary parts) or to strings / 'category', or drop it."
    )


def _local_codes(name: str, col: pd.Series) -> tuple[np.ndarray, np.ndarray, bool]:
    """Codes of a categorical column into its own uniques (``-1`` for missing).

    Returns ``(codes, uniques as str, is_category_dtype)``.
    """
    if isinstance(col.dtype, pd.CategoricalDtype):
        uniques = [str(c) for c in col.cat.categories]
        return col.cat.codes.to_numpy(np.int64), np.array(uniques, dtype=str), True
    if not is_bool_dtype(col.dtype) and not isinstance(col.dtype, pd.StringDtype):
        kind = infer_dtype(col, skipna=True)
        if kind not in ("string", "boolean", "empty"):
            raise TypeError(
                f"Column {name!r} has dtype object but holds {kind} values, not strings; "
                "convert it with .astype(str) (categorical) or to a numeric dtype."
            )
    codes, uniques = pd.factorize(col, use_na_sentinel=True)
    return codes.astype(np.int64), np.array([str(u) for u in uniques], dtype=str), False


class FeatureEncoder:
    """Encode model input into a float64 matrix: names, ordinal codes, errors by column.

    ``fit`` learns the columns (names, kinds, categories); ``transform`` selects the
    columns of a DataFrame by name (extra columns are ignored, order does not matter) and
    codes categorical values with the training categories (see the module docstring for the
    fallback of unseen and missing categories). A plain array is used as is, with names
    ``x0 .. x{d-1}`` in messages and no ``feature_names_in_``.

    Attributes
    ----------
    n_features_in_ : int
    feature_names_in_ : ndarray of str (object dtype)
        Column names (as strings); only when fit on a DataFrame.
    names_ : ndarray of str
        Column names used in messages (``x0 ..`` for arrays).
    kinds_ : ndarray of str
        ``"numeric"`` or ``"categorical"`` per column.
    dtypes_ : ndarray of str
        The dtype of every column at fit.
    categories_ : list of ndarray of str
        Categories per column, in code order (empty for numeric columns).
    fallback_ : ndarray of int64
        Code of the most frequent training category per column (``-1`` for numeric ones).

    Examples
    --------
    >>> df = pd.DataFrame({"size": [1.0, 2.0, 3.0], "colour": ["red", "blue", "red"]})
    >>> enc = FeatureEncoder().fit(df)
    >>> enc.categories_[1].tolist()
    ['blue', 'red']
    >>> enc.transform(df[["colour", "size"]]).tolist()
    [[1.0, 1.0], [2.0, 0.0], [3.0, 1.0]]
    """

    def fit(self, X: Any) -> FeatureEncoder:
        """Learn the columns of ``X`` (at least one row and one column).

        Parameters
        ----------
        X : pandas.DataFrame or array-like of shape (n_rows, n_features)

        Returns
        -------
        self
        """
        self._fit_transform(X)
        return self

    def fit_transform(self, X: Any) -> np.ndarray:
        """``fit(X)`` and return the encoded ``X``.

        Parameters
        ----------
        X : pandas.DataFrame or array-like of shape (n_rows, n_features)

        Returns
        -------
        ndarray of shape (n_rows, n_features), float64, C-contiguous
        """
        return self._fit_transform(X)

    def _fit_transform(self, X: Any) -> np.ndarray:
        if not isinstance(X, pd.DataFrame):
            A = check_array(X, dtype=np.float64, order="C", ensure_all_finite=False)
            names = np.array([f"x{j}" for j in range(A.shape[1])], dtype=str)
            check_finite(A, names, "X")
            self._set_columns(names, [NUMERIC] * A.shape[1], [str(A.dtype)] * A.shape[1],
                              [np.array([], dtype=str)] * A.shape[1], [-1] * A.shape[1],
                              has_names=False)
            return A
        names = [str(c) for c in X.columns]
        if len(set(names)) != len(names):
            dup = sorted({c for c in names if names.count(c) > 1})
            raise ValueError(f"X has duplicated column names {dup}; rename them.")
        n, d = X.shape
        if d == 0:
            raise ValueError(f"0 feature(s) (shape=({n}, 0)) while a minimum of 1 is required.")
        if n == 0:
            raise ValueError(f"Found array with 0 sample(s) (shape=(0, {d})) while a minimum of "
                             "1 is required.")
        A = np.empty((n, d))
        kinds, cats, fallback = [], [], []
        for j, name in enumerate(names):
            col = X.iloc[:, j]
            kind = _column_kind(name, col.dtype)
            kinds.append(kind)
            if kind == NUMERIC:
                A[:, j] = col.to_numpy(dtype=np.float64, na_value=np.nan)
                cats.append(np.array([], dtype=str))
                fallback.append(-1)
                continue
            local, uniques, is_cat = _local_codes(name, col)
            if is_cat:
                categories = uniques
                if np.unique(categories).size != categories.size:
                    raise ValueError(f"Column {name!r} has categories that coincide as strings; "
                                     "rename them.")
            elif is_bool_dtype(col.dtype):
                categories = _BOOL_CATEGORIES
            else:
                categories = np.unique(uniques)
            codes = _lookup(categories, uniques)[local]
            seen = codes[codes >= 0]
            if seen.size == 0:
                raise ValueError(f"Column {name!r} has no non-missing values; drop it.")
            top = int(np.argmax(np.bincount(seen, minlength=categories.size)))
            A[:, j] = self._fill(name, codes, local, uniques, top, categories)
            cats.append(categories)
            fallback.append(top)
        check_finite(A, names, "X")
        self._set_columns(np.array(names, dtype=str), kinds,
                          [str(X.dtypes.iloc[j]) for j in range(d)], cats, fallback,
                          has_names=True)
        return A

    def _set_columns(self, names, kinds, dtypes, cats, fallback, has_names: bool) -> None:
        self.names_ = np.asarray(names, dtype=str)
        self.kinds_ = np.asarray(kinds, dtype=str)
        self.dtypes_ = np.asarray(dtypes, dtype=str)
        self.categories_ = [np.asarray(c, dtype=str) for c in cats]
        self.fallback_ = np.asarray(fallback, dtype=np.int64)
        self.n_features_in_ = int(self.names_.shape[0])
        if has_names:
            self.feature_names_in_ = self.names_.astype(object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_

    @staticmethod
    def _fill(name: str, codes: np.ndarray, local: np.ndarray, uniques: np.ndarray, top: int,
              categories: np.ndarray) -> np.ndarray:
        """Codes as float64 with the fallback for unseen (``-1``) and missing values."""
        bad = codes < 0
        if bad.any():
            missing = local < 0
            n_missing = int(missing.sum())
            n_unseen = int(bad.sum()) - n_missing
            example = str(uniques[local[bad & ~missing][0]]) if n_unseen else None
            logger.warning(
                "Column %r: %d row(s) with categories unseen at fit%s and %d missing value(s) "
                "coded as the most frequent training category %r (code %d).",
                name, n_unseen, f" (e.g. {example!r})" if example is not None else "",
                n_missing, str(categories[top]), top,
            )
            codes = np.where(bad, top, codes)
        return codes.astype(np.float64)

    def transform(self, X: Any, caller: str | None = None) -> np.ndarray:
        """Encode ``X`` with the columns learnt at fit (zero rows are allowed).

        Parameters
        ----------
        X : pandas.DataFrame or array-like of shape (n_rows, n_features)
            A DataFrame is matched by column name; an array by position.
        caller : str, optional
            Name of the estimator, used in messages.

        Returns
        -------
        ndarray of shape (n_rows, n_features_in_), float64, C-contiguous

        Raises
        ------
        ValueError
            On a missing column (named), a wrong number of array columns, NaN or inf in a
            numeric column (named, with the count).
        TypeError
            When a column arrives with a kind other than at fit (numeric vs. categorical)
            or an unusable dtype (named, with the dtype).
        """
        caller = caller or type(self).__name__
        fitted_names = hasattr(self, "feature_names_in_")
        if not isinstance(X, pd.DataFrame):
            A = check_array(X, dtype=np.float64, order="C", ensure_all_finite=False,
                            ensure_min_samples=0)
            self._check_width(A.shape[1], caller)
            if fitted_names:
                cat = self.names_[self.kinds_ == CATEGORICAL]
                if cat.size:
                    raise TypeError(
                        f"X is a plain array, but {caller} was fitted on a DataFrame with the "
                        f"categorical column(s) {cat.tolist()}; pass a DataFrame."
                    )
                warnings.warn(f"X does not have valid feature names, but {caller} was fitted "
                              "with feature names", UserWarning, stacklevel=3)
            check_finite(A, self.names_, "X")
            return A
        if fitted_names:
            X = self._select(X)
        else:
            self._check_width(X.shape[1], caller)
            warnings.warn(f"X has feature names, but {caller} was fitted without feature names",
                          UserWarning, stacklevel=3)
        A = np.empty((X.shape[0], self.n_features_in_))
        for j, name in enumerate(self.names_.tolist()):
            col = X.iloc[:, j]
            kind = _column_kind(name, col.dtype)
            if kind != self.kinds_[j]:
                raise TypeError(
                    f"Column {name!r} was {self.kinds_[j]} ({self.dtypes_[j]}) at fit but "
                    f"arrives as {kind} ({col.dtype}); convert it back to {self.dtypes_[j]}."
                )
            if kind == NUMERIC:
                A[:, j] = col.to_numpy(dtype=np.float64, na_value=np.nan)
                continue
            local, uniques, _ = _local_codes(name, col)
            categories = self.categories_[j]
            codes = _lookup(categories, uniques)[local]
            A[:, j] = self._fill(name, codes, local, uniques, int(self.fallback_[j]), categories)
        check_finite(A, self.names_, "X")
        return A

    def _check_width(self, d: int, caller: str) -> None:
        if d != self.n_features_in_:
            raise ValueError(f"X has {d} features, but {caller} is expecting "
                             f"{self.n_features_in_} features as input.")

    def _select(self, X: pd.DataFrame) -> pd.DataFrame:
        """The fitted columns of ``X`` by name, in fit order."""
        position: dict[str, int] = {}
        for j, c in enumerate(X.columns):
            position.setdefault(str(c), j)
        missing = [c for c in self.names_.tolist() if c not in position]
        if missing:
            raise ValueError(
                f"X lacks {len(missing)} column(s) seen at fit: {missing[:10]}; add them "
                "(extra columns are ignored, the order does not matter)."
            )
        return X.iloc[:, [position[c] for c in self.names_.tolist()]]

    # ------------------------------------------------------------------ persistence

    def _get_state(self) -> dict[str, Any]:
        """Fitted state: a dict of numpy arrays (no object dtype), lists and scalars."""
        return {
            "names": self.names_,
            "kinds": self.kinds_,
            "dtypes": self.dtypes_,
            "categories": list(self.categories_),
            "fallback": self.fallback_,
            "has_names": hasattr(self, "feature_names_in_"),
        }

    def _set_state(self, state: dict[str, Any]) -> None:
        """Restore the state of :meth:`_get_state`, checking it first (it may come from an
        untrusted file): one name, kind and dtype string per column, unique names, unique
        string categories (none for numeric columns), and fallback codes that are categories
        of their column (-1 for numeric ones). Raises ``ValueError`` naming the column.
        """
        strings = {}
        for key in ("names", "kinds", "dtypes"):
            a = state[key]
            if not isinstance(a, np.ndarray) or a.dtype.kind != "U" or a.ndim != 1:
                raise ValueError(f"encoder {key} must be a 1-D array of strings.")
            strings[key] = a
        d = strings["names"].shape[0]
        cats, fallback, has_names = state["categories"], state["fallback"], state["has_names"]
        if not isinstance(has_names, bool) or not isinstance(cats, list):
            raise ValueError("encoder has_names must be a bool and categories a list.")
        fallback = state_array(state, "fallback", np.int64, (d,))
        if d < 1 or {a.shape[0] for a in strings.values()} != {d} or len(cats) != d:
            raise ValueError(
                f"encoder state: {d} names, {strings['kinds'].shape[0]} kinds, "
                f"{strings['dtypes'].shape[0]} dtypes, {len(cats)} category lists; one per "
                "column (at least one) is needed.")
        if np.unique(strings["names"]).size != d:
            raise ValueError("encoder names are not unique.")
        for j, (name, kind, c) in enumerate(zip(strings["names"].tolist(),
                                                strings["kinds"].tolist(), cats, strict=True)):
            if kind not in (NUMERIC, CATEGORICAL) or not isinstance(c, np.ndarray) or (
                    c.ndim != 1 or c.dtype.kind != "U"):
                raise ValueError(f"encoder column {name!r}: kind {kind!r} or its categories "
                                 "are not valid.")
            low, high = (-1, 0) if kind == NUMERIC else (0, c.size)
            if (np.unique(c).size != c.size or (kind == NUMERIC) == (c.size > 0)
                    or not low <= fallback[j] < high):
                raise ValueError(
                    f"encoder column {name!r} ({kind}): {c.size} categories (unique, none for "
                    f"a numeric column) and fallback code {fallback[j]} (-1 for numeric "
                    "columns, else a category code) do not fit.")
        self._set_columns(strings["names"], strings["kinds"], strings["dtypes"], cats, fallback,
                          has_names)


def _lookup(categories: np.ndarray, uniques: np.ndarray) -> np.ndarray:
    """Code of every unique value among ``categories`` (``-1`` if absent), then a last
    ``-1`` so that indexing with the missing-value code ``-1`` gives ``-1``."""
    index = {c: i for i, c in enumerate(categories.tolist())}
    return np.array([index.get(u, -1) for u in uniques.tolist()] + [-1], dtype=np.int64)
