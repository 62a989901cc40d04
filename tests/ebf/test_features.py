"""Tests of ``ebf.features.FeatureEncoder``: codes, fallbacks, errors naming the column."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pandas as pd
import pytest

from ebf.features import FeatureEncoder


def _frame(n: int = 12) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "num": rng.normal(size=n),
            "cat": pd.Categorical(["z", "a", "m", "z"] * (n // 4), categories=["z", "a", "m"]),
            "txt": (["pear", "apple", "apple"] * n)[:n],
            "flag": np.arange(n) % 3 == 0,
            "count": np.arange(n, dtype=np.int32),
        }
    )


def state_leaves(state):
    """Every leaf of a persistence state (nested dicts and lists), for checks of its types."""
    if isinstance(state, dict):
        for v in state.values():
            yield from state_leaves(v)
    elif isinstance(state, list):
        for v in state:
            yield from state_leaves(v)
    else:
        yield state


def test_codes_names_and_kinds():
    df = _frame()
    enc = FeatureEncoder()
    A = enc.fit_transform(df)
    assert A.dtype == np.float64 and A.flags.c_contiguous and A.shape == (12, 5)
    assert enc.feature_names_in_.dtype == object
    assert enc.feature_names_in_.tolist() == ["num", "cat", "txt", "flag", "count"]
    assert enc.kinds_.tolist() == ["numeric", "categorical", "categorical", "categorical",
                                   "numeric"]
    # category dtype: pandas' order of categories, not sorted
    assert enc.categories_[1].tolist() == ["z", "a", "m"]
    np.testing.assert_array_equal(A[:4, 1], [0, 1, 2, 0])
    # strings: sorted unique strings
    assert enc.categories_[2].tolist() == ["apple", "pear"]
    np.testing.assert_array_equal(A[:3, 2], [1, 0, 0])
    # bool: False -> 0, True -> 1
    assert enc.categories_[3].tolist() == ["False", "True"]
    np.testing.assert_array_equal(A[:, 3], (np.arange(12) % 3 == 0).astype(float))
    np.testing.assert_array_equal(A[:, 0], df["num"].to_numpy())
    np.testing.assert_array_equal(A[:, 4], np.arange(12))
    assert enc.categories_[0].dtype.kind == "U" and enc.categories_[0].size == 0


def test_transform_selects_columns_by_name():
    df = _frame()
    enc = FeatureEncoder().fit(df)
    shuffled = df[["txt", "count", "flag", "num", "cat"]].assign(extra=1.0)
    np.testing.assert_array_equal(enc.transform(shuffled), enc.transform(df))
    with pytest.raises(ValueError, match=r"lacks 1 column\(s\).*'txt'"):
        enc.transform(df.drop(columns="txt"))


def test_unseen_and_missing_categories_use_the_most_frequent(caplog):
    df = _frame()
    enc = FeatureEncoder().fit(df)
    new = df.head(4).copy()
    new["txt"] = ["kiwi", None, "pear", "kiwi"]
    new["cat"] = pd.Categorical(["a", "q", None, "m"])
    with caplog.at_level(logging.WARNING, logger="ebf.features"):
        A = enc.transform(new)
    top_txt = enc.fallback_[2]
    assert enc.categories_[2][top_txt] == "apple"  # 8 of 12 rows
    np.testing.assert_array_equal(A[:, 2], [top_txt, top_txt, 1, top_txt])
    assert enc.categories_[1][enc.fallback_[1]] == "z"
    np.testing.assert_array_equal(A[:, 1], [1, 0, 0, 2])
    text = caplog.text
    assert "'txt': 2 row(s) with categories unseen" in text and "1 missing" in text
    assert "'cat': 1 row(s)" in text


def test_missing_category_at_fit_falls_back():
    df = pd.DataFrame({"c": ["b", None, "b", "a"], "x": [1.0, 2.0, 3.0, 4.0]})
    enc = FeatureEncoder()
    A = enc.fit_transform(df)
    assert enc.categories_[0].tolist() == ["a", "b"]
    np.testing.assert_array_equal(A[:, 0], [1, 1, 1, 0])


def test_numeric_nan_and_inf_name_the_column():
    df = _frame()
    enc = FeatureEncoder().fit(df)
    bad = df.copy()
    bad.loc[[1, 3], "num"] = np.nan
    bad.loc[5, "count"] = 0  # fine
    with pytest.raises(ValueError, match=r"'num': 2 NaN"):
        enc.transform(bad)
    with pytest.raises(ValueError, match=r"'num': 2 NaN"):
        FeatureEncoder().fit(bad)
    nullable = pd.DataFrame({"i": pd.array([1, None, 3], dtype="Int64")})
    with pytest.raises(ValueError, match=r"'i': 1 NaN"):
        FeatureEncoder().fit(nullable)
    with pytest.raises(ValueError, match=r"'x1': 1 inf"):
        FeatureEncoder().fit(np.array([[1.0, np.inf], [2.0, 3.0]]))


def test_kind_mismatch_names_column_and_dtype():
    df = _frame()
    enc = FeatureEncoder().fit(df)
    with pytest.raises(TypeError, match=r"'num' was numeric \(float64\).*categorical"):
        enc.transform(df.assign(num=df["num"].astype(str)))
    with pytest.raises(TypeError, match=r"'txt' was categorical.*numeric \(int64\)"):
        enc.transform(df.assign(txt=np.arange(12)))


@pytest.mark.parametrize(
    "column, fix",
    [
        (pd.to_datetime(["2020-01-01", "2020-01-02"]), "datetime"),
        (np.array([1 + 1j, 2 + 0j]), "complex"),
        (pd.Series([[1], [2]]), "holds mixed values"),
        (pd.Series([{"a": 1}, {"b": 2}]), "holds mixed values"),
        (pd.Series([1.5, "a"], dtype=object), "holds mixed"),
    ],
)
def test_unusable_dtypes_name_the_column(column, fix):
    df = pd.DataFrame({"ok": [1.0, 2.0], "bad": column})
    with pytest.raises(TypeError, match=rf"'bad'.*{fix}"):
        FeatureEncoder().fit(df)


def test_plain_arrays():
    X = np.arange(6.0).reshape(3, 2)
    enc = FeatureEncoder().fit(X.astype(np.float32))
    assert not hasattr(enc, "feature_names_in_")
    assert enc.names_.tolist() == ["x0", "x1"] and enc.n_features_in_ == 2
    np.testing.assert_array_equal(enc.transform(X), X)
    with pytest.raises(ValueError, match="X has 3 features, but Model is expecting 2"):
        enc.transform(np.ones((2, 3)), caller="Model")
    assert enc.transform(np.empty((0, 2))).shape == (0, 2)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        enc.transform(pd.DataFrame(X, columns=["a", "b"]))
    assert any("fitted without feature names" in str(r.message) for r in rec)


def test_array_after_dataframe_fit():
    df = _frame()
    enc = FeatureEncoder().fit(df)
    with pytest.raises(TypeError, match=r"categorical column\(s\) \['cat', 'txt', 'flag'\]"):
        enc.transform(np.ones((2, 5)))
    num = FeatureEncoder().fit(df[["num", "count"]])
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        A = num.transform(df[["num", "count"]].to_numpy())
    np.testing.assert_array_equal(A, num.transform(df))


def test_column_names_as_strings_and_duplicates():
    enc = FeatureEncoder().fit(pd.DataFrame(np.ones((2, 2))))
    assert enc.feature_names_in_.tolist() == ["0", "1"]
    np.testing.assert_array_equal(enc.transform(pd.DataFrame(np.zeros((1, 2)))), [[0, 0]])
    dup = pd.DataFrame(np.ones((2, 2)), columns=["a", "a"])
    with pytest.raises(ValueError, match=r"duplicated column names \['a'\]"):
        FeatureEncoder().fit(dup)
    with pytest.raises(ValueError, match="0 feature"):
        FeatureEncoder().fit(pd.DataFrame(index=range(3)))
    with pytest.raises(ValueError, match="no non-missing values"):
        FeatureEncoder().fit(pd.DataFrame({"c": pd.Series([None, None], dtype=object)}))


def test_integer_categories_and_string_dtype():
    df = pd.DataFrame({
        "k": pd.Categorical([3, 1, 2, 3], categories=[3, 1, 2]),
        "s": pd.Series(["b", "a", "b", "c"], dtype="string"),
    })
    enc = FeatureEncoder()
    A = enc.fit_transform(df)
    assert enc.categories_[0].tolist() == ["3", "1", "2"]
    np.testing.assert_array_equal(A, [[0, 1], [1, 0], [2, 1], [0, 2]])
    # the category column may come back as plain strings (e.g. after a Parquet round trip)
    back = pd.DataFrame({"k": ["2", "3"], "s": ["c", "a"]})
    np.testing.assert_array_equal(enc.transform(back), [[2, 2], [0, 0]])


def test_state_round_trip():
    df = _frame()
    enc = FeatureEncoder().fit(df)
    state = enc._get_state()
    for leaf in state_leaves(state):
        assert isinstance(leaf, (str, int, float, bool, type(None), np.ndarray))
        if isinstance(leaf, np.ndarray):
            assert leaf.dtype != object
    other = FeatureEncoder()
    other._set_state(state)
    np.testing.assert_array_equal(other.transform(df), enc.transform(df))
    assert other.feature_names_in_.tolist() == enc.feature_names_in_.tolist()
    plain = FeatureEncoder().fit(np.ones((2, 3)))
    again = FeatureEncoder()
    again._set_state(plain._get_state())
    assert not hasattr(again, "feature_names_in_") and again.n_features_in_ == 3
