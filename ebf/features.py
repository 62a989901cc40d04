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
level WARNING, naming the column); they never raise. Infinite values in *numeric* columns
raise ``ValueError`` naming the column and the count, and so do missing ones unless the model
learns where they go (``allow_nan=True``: the CART forests, whose histogram trees give them a
bin of their own; they stay NaN in the encoded matrix).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype, is_bool_dtype
from sklearn.utils import check_array

from basics.columns import CATEGORICAL, NUMERIC, encoding
from basics.validation import NAN_FIX, check_finite, raise_nonfinite, state_array

__all__ = ["CATEGORICAL", "NUMERIC", "ColumnSummary", "FeatureEncoder"]

logger = logging.getLogger(__name__)

_BOOL_CATEGORIES = np.array(["False", "True"])


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


@dataclass
class ColumnSummary:
    """What one block of rows (a whole frame, or one Dask partition) says about its columns.

    Summaries of disjoint blocks of the same columns merge (:meth:`FeatureEncoder.from_summaries`)
    into the encoder a fit on all their rows gives, so a distributed fit needs one pass that
    sends only these (small) summaries to the driver.

    Attributes
    ----------
    names, kinds, dtypes : list of str
        Column names, ``"numeric"`` / ``"categorical"``, and dtypes as strings.
    bools : list of bool
        Whether a column has a bool dtype (its categories are ``["False", "True"]``).
    has_names : bool
        Whether the block was a DataFrame (an array has names ``x0 ..`` and no
        ``feature_names_in_``).
    n_rows : int
    nan, inf : ndarray of int64, shape (n_columns,)
        NaN and infinite values per numeric column (0 for categorical ones).
    categories : dict of int to (list of str or None, dict of str to int, int)
        Per categorical column: its ``category`` dtype's categories (None for other dtypes),
        the count of every value seen (as a string), and the number of missing values.
    """

    names: list[str]
    kinds: list[str]
    dtypes: list[str]
    bools: list[bool]
    has_names: bool
    n_rows: int
    nan: np.ndarray
    inf: np.ndarray
    categories: dict[int, tuple[list[str] | None, dict[str, int], int]] = field(
        default_factory=dict)


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

    def fit(self, X: Any, allow_nan: bool = False) -> FeatureEncoder:
        """Learn the columns of ``X`` (at least one row and one column).

        Parameters
        ----------
        X : pandas.DataFrame or array-like of shape (n_rows, n_features)
        allow_nan : bool, default=False
            Accept missing values in numeric columns (the model learns where they go).

        Returns
        -------
        self
        """
        self._fit_transform(X, allow_nan)
        return self

    def fit_transform(self, X: Any, allow_nan: bool = False) -> np.ndarray:
        """``fit(X)`` and return the encoded ``X``.

        Parameters
        ----------
        X : pandas.DataFrame or array-like of shape (n_rows, n_features)
        allow_nan : bool, default=False
            Accept missing values in numeric columns (kept as NaN).

        Returns
        -------
        ndarray of shape (n_rows, n_features), float64, C-contiguous
        """
        return self._fit_transform(X, allow_nan)

    def _fit_transform(self, X: Any, allow_nan: bool) -> np.ndarray:
        if not isinstance(X, pd.DataFrame):
            A = check_array(X, dtype=np.float64, order="C", ensure_all_finite=False)
            self._learn([self.summarize(A)], allow_nan)
            return A  # what ``transform`` would return: the checked float64 copy
        self._learn([self.summarize(X)], allow_nan)
        return self.transform(X, allow_nan=allow_nan)

    @staticmethod
    def summarize(X: Any) -> ColumnSummary:
        """The mergeable summary of one block of rows (see :class:`ColumnSummary`).

        Column kinds and dtypes are checked here (a ``TypeError`` names the column); values
        are checked when the summaries are merged, with counts over all blocks.

        Parameters
        ----------
        X : pandas.DataFrame or array-like of shape (n_rows, n_features)
            May have zero rows.

        Returns
        -------
        ColumnSummary

        Examples
        --------
        >>> s = FeatureEncoder.summarize(pd.DataFrame({"c": ["a", "b", "a"], "x": [1.0, 2, 3]}))
        >>> s.kinds, s.categories[0][1]
        (['categorical', 'numeric'], {'a': 2, 'b': 1})
        """
        if not isinstance(X, pd.DataFrame):
            A = check_array(X, dtype=np.float64, order="C", ensure_all_finite=False,
                            ensure_min_samples=0)
            d = A.shape[1]
            return ColumnSummary(
                names=[f"x{j}" for j in range(d)], kinds=[NUMERIC] * d,
                dtypes=[str(A.dtype)] * d, bools=[False] * d, has_names=False,
                n_rows=A.shape[0], nan=np.isnan(A).sum(axis=0).astype(np.int64),
                inf=np.isinf(A).sum(axis=0).astype(np.int64))
        names = [str(c) for c in X.columns]
        if len(set(names)) != len(names):
            dup = sorted({c for c in names if names.count(c) > 1})
            raise ValueError(f"X has duplicated column names {dup}; rename them.")
        d = len(names)
        out = ColumnSummary(
            names=names, kinds=[encoding(name, t) for name, t in zip(names, X.dtypes,
                                                                          strict=True)],
            dtypes=[str(t) for t in X.dtypes], bools=[is_bool_dtype(t) for t in X.dtypes],
            has_names=True, n_rows=len(X), nan=np.zeros(d, np.int64), inf=np.zeros(d, np.int64))
        for j, name in enumerate(names):
            col = X.iloc[:, j]
            if out.kinds[j] == NUMERIC:
                v = col.to_numpy(dtype=np.float64, na_value=np.nan)
                out.nan[j] = np.isnan(v).sum()
                out.inf[j] = np.isinf(v).sum()
                continue
            local, uniques, is_cat = _local_codes(name, col)
            counts = np.bincount(local[local >= 0], minlength=uniques.size)
            by_value: dict[str, int] = {}
            for u, c in zip(uniques.tolist(), counts.tolist(), strict=True):
                by_value[u] = by_value.get(u, 0) + int(c)
            out.categories[j] = (uniques.tolist() if is_cat else None, by_value,
                                 int((local < 0).sum()))
        return out

    @classmethod
    def from_summaries(cls, summaries: Sequence[ColumnSummary],
                       allow_nan: bool = False) -> FeatureEncoder:
        """The encoder that ``fit`` learns on the concatenation of the summarised blocks.

        Numeric columns stay as they are; a ``category`` column keeps its categories (the
        union in order of first appearance if blocks differ, as ``cat.as_known()`` and
        ``pd.concat`` build it), a bool column ``["False", "True"]``, a string column its
        sorted distinct strings; the fallback code is the most frequent category over all
        rows (ties: the smaller code).

        Parameters
        ----------
        summaries : sequence of ColumnSummary
            :meth:`summarize` of every block, in row order; all of the same columns.
        allow_nan : bool, default=False
            Accept missing values in numeric columns.

        Returns
        -------
        FeatureEncoder

        Raises
        ------
        ValueError
            No rows or no columns; blocks with other columns; NaN or inf in a numeric
            column (named, with the counts over all blocks); a categorical column with no
            value or with categories that coincide as strings.

        Examples
        --------
        >>> parts = [pd.DataFrame({"c": ["b", "b"]}), pd.DataFrame({"c": ["a"]})]
        >>> enc = FeatureEncoder.from_summaries([FeatureEncoder.summarize(p) for p in parts])
        >>> enc.categories_[0].tolist(), int(enc.fallback_[0])
        (['a', 'b'], 1)
        """
        return cls()._learn(summaries, allow_nan)

    def _learn(self, summaries: Sequence[ColumnSummary], allow_nan: bool) -> FeatureEncoder:
        if not summaries:
            raise ValueError("from_summaries needs the summary of at least one block of rows.")
        first = summaries[0]
        for s in summaries[1:]:
            if (s.names, s.kinds) != (first.names, first.kinds):
                raise ValueError(
                    f"blocks of rows have different columns or column kinds: "
                    f"{list(zip(first.names, first.kinds, strict=True))} and "
                    f"{list(zip(s.names, s.kinds, strict=True))}; give every block the same "
                    "columns and dtypes.")
        n, d = sum(s.n_rows for s in summaries), len(first.names)
        if d == 0:
            raise ValueError(f"0 feature(s) (shape=({n}, 0)) while a minimum of 1 is required.")
        if n == 0:
            raise ValueError(f"Found 0 rows (shape=(0, {d})) in {len(summaries)} block(s) "
                             "while a minimum of 1 is required.")
        nan = np.sum([s.nan for s in summaries], axis=0)
        raise_nonfinite(np.zeros_like(nan) if allow_nan else nan,
                        np.sum([s.inf for s in summaries], axis=0), first.names, n, "X",
                        None if allow_nan else NAN_FIX)
        cats, fallback = [], []
        for j, name in enumerate(first.names):
            if first.kinds[j] == NUMERIC:
                cats.append(np.array([], dtype=str))
                fallback.append(-1)
                continue
            categories, per_code = _merge_categories(name, first.bools[j],
                                                     [s.categories[j] for s in summaries])
            cats.append(categories)
            fallback.append(int(np.argmax(per_code)))
        self._set_columns(np.array(first.names, dtype=str), first.kinds, first.dtypes, cats,
                          fallback, has_names=first.has_names)
        return self

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

    def transform(self, X: Any, caller: str | None = None,
                  allow_nan: bool = False) -> np.ndarray:
        """Encode ``X`` with the columns learnt at fit (zero rows are allowed).

        Parameters
        ----------
        X : pandas.DataFrame or array-like of shape (n_rows, n_features)
            A DataFrame is matched by column name; an array by position.
        caller : str, optional
            Name of the estimator, used in messages.
        allow_nan : bool, default=False
            Keep missing values of numeric columns as NaN instead of raising.

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
            check_finite(A, self.names_, "X", allow_nan=allow_nan, fix=NAN_FIX)
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
            kind = encoding(name, col.dtype)
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
        check_finite(A, self.names_, "X", allow_nan=allow_nan, fix=NAN_FIX)
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


def _merge_categories(name: str, is_bool: bool,
                      parts: Sequence[tuple[list[str] | None, dict[str, int], int]]
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Categories of a column and their counts from the per-block summaries."""
    counts: dict[str, int] = {}
    order: dict[str, None] = {}  # category dtype: categories in order of first appearance
    is_cat = False
    for own, by_value, _ in parts:
        if own is not None:
            is_cat = True
            order.update(dict.fromkeys(own))
        for value, c in by_value.items():
            counts[value] = counts.get(value, 0) + c
    if is_cat:
        categories = np.array(list(order), dtype=str)
        if np.unique(categories).size != categories.size:
            raise ValueError(f"Column {name!r} has categories that coincide as strings; "
                             "rename them.")
    elif is_bool:
        categories = _BOOL_CATEGORIES
    else:
        categories = np.unique(np.array(list(counts), dtype=str))
    per_code = np.array([counts.get(c, 0) for c in categories.tolist()], dtype=np.int64)
    if per_code.sum() == 0:
        raise ValueError(f"Column {name!r} has no non-missing values; drop it.")
    return categories, per_code


def _lookup(categories: np.ndarray, uniques: np.ndarray) -> np.ndarray:
    """Code of every unique value among ``categories`` (``-1`` if absent), then a last
    ``-1`` so that indexing with the missing-value code ``-1`` gives ``-1``."""
    index = {c: i for i, c in enumerate(categories.tolist())}
    return np.array([index.get(u, -1) for u in uniques.tolist()] + [-1], dtype=np.int64)
