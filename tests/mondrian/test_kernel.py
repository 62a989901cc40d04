"""MondrianKernelFeatures: the Laplace kernel approximation, new rows, online extension."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from ebf.artifact import ModelFormatError
from ebf.artifact.classes import estimator_from_state, estimator_state
from mondrian._kernel_features import MondrianKernelFeatures
from mondrian._kernel_ridge import MondrianKernelClassifier, MondrianKernelRegressor
from mondrian.kernel_sweep import log_evidence, probe_lifetime, ridge_solve, width_sweep
from tests.ebf.model_helpers import assert_roundtrip
from tests.naive import naive_cell_columns, naive_kernel_cells, naive_mondrian_box_cells


def _laplace(A, B, lam):
    return np.exp(-lam * np.abs(A[:, None] - B[None]).sum(-1))


def _square(n=100, seed=0):
    return np.random.default_rng(seed).random((n, 2))


@parametrize_with_checks([MondrianKernelFeatures(n_mondrians=5, random_state=0)])
def test_sklearn_compatible_transformer(estimator, check):
    check(estimator)


def test_features_are_one_cell_per_partition():
    X = _square()
    f = MondrianKernelFeatures(n_mondrians=30, lifetime=3.0, random_state=0).fit(X)
    Z = f.transform(X)
    assert Z.shape == (100, f.n_features_out_) and f.n_features_out_ == f.n_cells_.sum() + 30
    np.testing.assert_array_equal(Z.getnnz(axis=1), 30)
    np.testing.assert_allclose(Z.data, 1 / np.sqrt(30))
    # partition t owns the columns [offset_t, offset_t + n_cells_t]; a training row is in
    # one of its cells, never its unseen column (the last)
    offsets = np.concatenate([[0], np.cumsum(f.n_cells_ + 1)])
    cols = Z.indices.reshape(100, 30)
    assert np.all((cols >= offsets[:-1]) & (cols < offsets[1:] - 1))
    assert len(f.get_feature_names_out()) == f.n_features_out_
    assert f.get_feature_names_out()[offsets[1] - 1] == "mondrian0_unseen"


@pytest.mark.parametrize("lam", [3.0, 1.2])
def test_cells_match_a_python_descent(lam):
    """Every row's cell, new rows outside the box included, against the conditional
    Mondrian walked in Python with the same hash."""
    X = _square()
    new = np.random.default_rng(5).uniform(-0.5, 1.5, (60, 2))
    f = MondrianKernelFeatures(n_mondrians=6, lifetime=3.0, random_state=1).fit(X)
    cols = f.transform(new, lifetime=None if lam == 3.0 else lam).indices.reshape(60, 6)
    seeds = np.random.SeedSequence(f.entropy_, spawn_key=(2**31 - 1,)).generate_state(
        6, dtype=np.uint64)
    offset, cut_off = 0, 0
    for t, tree in enumerate(f.trees_):
        expected = naive_kernel_cells(new, tree, lam, seeds[t])
        np.testing.assert_array_equal(cols[:, t] - offset, expected)
        n_cells = naive_cell_columns(tree, lam)[1]
        cut_off += np.sum(expected == n_cells)
        offset += n_cells + 1
    assert cut_off > 0  # the unseen columns were exercised


def test_kernel_estimate_is_unbiased():
    """Seeded statistical test: averaged over 40 fits of M = 50 partitions (2,000
    partitions), every entry of Z Z^T is within 5 binomial standard deviations of
    exp(-lambda ||x - x'||_1), and so is the whole-box Mondrian of numpy (the oracle)."""
    X = _square(40)
    lam, reps, m = 2.0, 40, 50
    exact = _laplace(X, X, lam)
    ours = np.mean([(Z @ Z.T).toarray() for Z in (
        MondrianKernelFeatures(n_mondrians=m, lifetime=lam, random_state=s).fit_transform(X)
        for s in range(reps))],
        axis=0)
    rng = np.random.default_rng(0)
    naive = np.zeros_like(exact)
    for _ in range(reps * m):
        c = naive_mondrian_box_cells(X, X.min(0), X.max(0), lam, rng)
        naive += c[:, None] == c[None]
    naive /= reps * m
    sd = np.sqrt(exact * (1 - exact) / (reps * m)) + 1e-12
    assert np.max(np.abs(ours - exact) / sd) < 5
    assert np.max(np.abs(naive - exact) / sd) < 5


def test_approximation_error_falls_as_one_over_sqrt_m():
    """Fig. 5's shape: the largest error against the Laplace kernel on 100 uniform points in
    the unit square falls with M at a log-log slope near -1/2 (mean of 4 seeds)."""
    X = _square()
    exact = _laplace(X, X, 2.0)
    ms = np.array([10, 40, 160, 640])
    err = [np.mean([np.abs((Z @ Z.T).toarray() - exact).max() for Z in (
        MondrianKernelFeatures(n_mondrians=int(m), lifetime=2.0, random_state=s).fit_transform(X)
        for s in range(4))]) for m in ms]
    slope = np.polyfit(np.log(ms), np.log(err), 1)[0]
    assert -0.65 < slope < -0.35, (slope, err)
    assert err[-1] < 0.08


def test_new_rows_have_the_law_of_rows_in_the_fit():
    """Seeded statistical test. A new row (outside the box or inside it) shares a cell with
    a training row in a fraction of 4,000 partitions within 5 binomial sd of the Laplace
    kernel, as it does when it is part of the fit."""
    X = _square(30)
    new = np.array([[1.3, -0.2], [0.5, 0.5], [-0.4, 0.9]])
    lam, m = 2.0, 4000
    exact = _laplace(new, X, lam)
    sd = np.sqrt(exact * (1 - exact) / m) + 1e-12
    f = MondrianKernelFeatures(n_mondrians=m, lifetime=lam, random_state=3).fit(X)
    K_new = (f.transform(new) @ f.transform(X).T).toarray()
    assert np.max(np.abs(K_new - exact) / sd) < 5
    Z = MondrianKernelFeatures(n_mondrians=m, lifetime=lam,
                               random_state=4).fit_transform(np.vstack([X, new]))
    K_fit = (Z[30:] @ Z[:30].T).toarray()
    assert np.max(np.abs(K_fit - exact) / sd) < 5


def test_same_row_same_features_and_subsets_agree():
    X = _square()
    f = MondrianKernelFeatures(n_mondrians=20, lifetime=4.0, random_state=0).fit(X)
    new = np.random.default_rng(1).uniform(-1, 2, (50, 2))
    full = f.transform(new).toarray()
    np.testing.assert_array_equal(f.transform(new[::-1]).toarray(), full[::-1])
    np.testing.assert_array_equal(f.transform(np.vstack([new[:5], new[:5]])).toarray()[5:],
                                  full[:5])
    np.testing.assert_array_equal(f.transform(-0.0 * new[:1] + new[:1]).toarray(), full[:1])
    again = MondrianKernelFeatures(n_mondrians=20, lifetime=4.0, random_state=0, n_jobs=2)
    np.testing.assert_array_equal(again.fit(X).transform(new).toarray(), full)


def test_coarser_widths_are_unions_of_cells():
    """transform(X, lifetime) reads the same partitions at a smaller width (Sec. 4): every
    fine cell lies in one coarse cell, and the coarse kernel estimates exp(-lam' L1)."""
    X = _square(60)
    f = MondrianKernelFeatures(n_mondrians=400, lifetime=4.0, random_state=2).fit(X)
    fine, coarse = f.transform(X), f.transform(X, lifetime=1.0)
    assert coarse.shape[1] < fine.shape[1]
    pairs = set(zip(fine.indices, coarse.indices, strict=True))
    assert len({a for a, _ in pairs}) == len(pairs)  # a fine column maps to one coarse one
    err = np.abs((coarse @ coarse.T).toarray() - _laplace(X, X, 1.0)).max()
    assert err < 0.12
    with pytest.raises(ValueError, match=r"lifetime=5.0 must be in \(0, 4.0\]"):
        f.transform(X, lifetime=5.0)


def test_partial_fit_extends_the_partitions():
    """Online (Sec. 5): rows added by partial_fit land in cells (never the unseen column),
    earlier rows keep sharing the cells they shared, and the kernel on all rows is still
    estimated without bias."""
    X = _square(40)
    X2 = np.random.default_rng(9).uniform(-0.5, 1.5, (20, 2))
    lam, m = 2.0, 3000
    f = MondrianKernelFeatures(n_mondrians=m, lifetime=lam, random_state=5).fit(X)
    before = f.transform(X)
    f.partial_fit(X2)
    assert f.n_samples_seen_ == 60
    Z = f.transform(np.vstack([X, X2]))
    offsets = np.concatenate([[0], np.cumsum(f.n_cells_ + 1)])
    assert np.all(Z.indices.reshape(60, m) < offsets[1:] - 1)
    # a split only separates: rows apart before stay apart
    K0, K1 = (before @ before.T).toarray(), (Z[:40] @ Z[:40].T).toarray()
    assert np.all(K1 <= K0 + 1e-12)
    all_rows = np.vstack([X, X2])
    exact = _laplace(all_rows, all_rows, lam)
    sd = np.sqrt(exact * (1 - exact) / m) + 1e-12
    assert np.max(np.abs((Z @ Z.T).toarray() - exact) / sd) < 5


def test_bad_input_is_named_and_leaves_the_model_unchanged():
    X = _square()
    f = MondrianKernelFeatures(n_mondrians=3, random_state=0).fit(X)
    trees = f.trees_
    bad = pd.DataFrame({"a": [0.1, np.nan], "b": [0.2, 0.3]})
    with pytest.raises(ValueError, match="'a'"):
        MondrianKernelFeatures().fit(bad)
    with pytest.raises(ValueError, match="2 features"):
        f.partial_fit(np.zeros((2, 3)))
    assert f.trees_ is trees and f.n_samples_seen_ == 100
    with pytest.raises(ValueError, match="lifetime"):
        MondrianKernelFeatures(lifetime=np.inf).fit(X)


# ------------------------------------------------------------------------- the width sweep


def _smooth(n=600, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, 3))
    return X, np.sin(6 * X[:, 0]) + X[:, 1] + 0.1 * rng.normal(size=n)


def test_ridge_solve_against_numpy():
    X, y = _smooth(300)
    Z = MondrianKernelFeatures(n_mondrians=10, lifetime=3.0, random_state=0).fit_transform(X)
    W, G_inv, log_det = ridge_solve(Z, np.column_stack([y, -2 * y]), 0.3)
    G = (Z.T @ Z).toarray() + 0.3 * np.eye(Z.shape[1])
    np.testing.assert_allclose(G_inv, np.linalg.inv(G), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(W[:, 0], np.linalg.solve(G, Z.T @ y), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(W[:, 1], -2 * W[:, 0], rtol=1e-12)
    assert log_det == pytest.approx(np.linalg.slogdet(G)[1], rel=1e-10)


@pytest.mark.parametrize("solver", ["exact", "cg"])
def test_sweep_equals_a_refit_at_every_width(solver):
    """At every width the sweep evaluates, its validation MSE (and, exact, its log
    evidence) are those of a ridge solved from scratch on the features of the same
    partitions at that width."""
    X, y = _smooth()
    Xf, Yf, Xv, Yv = X[:500], y[:500, None], X[500:], y[500:, None]
    f = MondrianKernelFeatures(n_mondrians=20, lifetime=probe_lifetime(Xf, 30, 0),
                               random_state=0).fit(Xf)
    sweep = width_sweep(f, Yf, Xv, Yv, 0.1, 600, 8, solver)
    assert sweep["n_features"][-1] > 300 and len(sweep["lifetime"]) == 8
    for lam, n_feat, mse, evidence in zip(*(sweep[k] for k in (
            "lifetime", "n_features", "validation_mse", "log_evidence")), strict=True):
        layout = f.cell_layout(lam)
        Z = f.cells_matrix(Xf, lam, layout)
        W, _, log_det = ridge_solve(Z, Yf, 0.1)
        assert Z.shape[1] == n_feat + 20  # and one unseen column per partition
        refit = np.mean((f.cells_matrix(Xv, lam, layout) @ W - Yv) ** 2)
        assert mse == pytest.approx(refit, rel=1e-9 if solver == "exact" else 1e-6)
        if solver == "cg":
            assert np.isnan(evidence)
            continue
        # an unseen column adds alpha to G's diagonal and log alpha to both log-det terms
        expected = log_evidence(np.array([Yf[:, 0] @ Yf[:, 0]]), (Z.T @ Yf)[:, 0] @ W,
                                log_det, 500, Z.shape[1], 0.1)
        assert evidence == pytest.approx(expected, rel=1e-9)


def _laplace_gp(n, lam, seed):
    rng = np.random.default_rng(seed)
    X = rng.random((n, 2))
    K = _laplace(X, X, lam) + 1e-9 * np.eye(n)
    return X, np.linalg.cholesky(K) @ rng.normal(size=n) + 0.05 * rng.normal(size=n)


@pytest.mark.parametrize("lam", [1.0, 3.0])
def test_width_is_recovered_from_a_laplace_gp(lam):
    """Fig. 7: on a draw of a GP with the Laplace kernel of lifetime lambda (500 points in
    the unit square, noise sd 0.05), the width chosen by the evidence is within a factor of
    10 of lambda. (Measured over seeds 0-2: 1.75-4.7 for lambda = 1, 4.5-8.9 for 3: with
    M = 50 the choice leans to larger widths.)"""
    X, y = _laplace_gp(500, lam, seed=int(lam))
    reg = MondrianKernelRegressor(n_mondrians=50, alpha=0.01, max_features=3000,
                                  select="evidence", random_state=0).fit(X, y)
    assert reg.sweep_["lifetime"][-1] > 2 * lam  # the sweep went past the truth
    assert lam / 10 < reg.lifetime_ < 10 * lam, reg.lifetime_


def test_regressor_predictive():
    X, y = _smooth()
    reg = MondrianKernelRegressor(n_mondrians=30, max_features=800, random_state=0).fit(X, y)
    assert 0 < reg.lifetime_ <= reg.lifetime_max_
    Xt, yt = _smooth(400, seed=1)
    mean, std = reg.predict(Xt, return_std=True)
    assert np.sqrt(np.mean((mean - yt) ** 2)) < 0.25
    z = (yt - mean) / std
    assert 0.8 < np.mean(np.abs(z) < 1.645) < 0.97
    far = reg.predict(np.full((1, 3), 5.0), return_std=True)[1]
    assert far[0] > 2 * np.median(std)  # cut off from every cell: the prior's variance
    dist = reg.predict_distribution(Xt[:5])
    np.testing.assert_allclose(dist.mean, mean[:5])
    # quantiles of the Gaussian predictive: m + s * z, also as predict(X, quantiles=...)
    q = reg.predict_quantiles(Xt[:5], [0.05, 0.5])
    np.testing.assert_allclose(q, mean[:5, None] + std[:5, None] * [-1.6448536269514722, 0.0],
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(reg.predict(Xt[:5], quantiles=0.05), q[:, 0])
    fixed = MondrianKernelRegressor(n_mondrians=30, lifetime=reg.lifetime_,
                                    random_state=0).fit(X, y)
    assert fixed.sweep_ is None and fixed.lifetime_ == reg.lifetime_


def test_solvers_choose_the_same_width():
    X, y = _smooth()
    exact = MondrianKernelRegressor(n_mondrians=20, max_features=600, random_state=0).fit(X, y)
    cg = MondrianKernelRegressor(n_mondrians=20, max_features=600, solver="cg",
                                 random_state=0).fit(X, y)
    assert cg.lifetime_ == exact.lifetime_
    np.testing.assert_allclose(cg.sweep_["validation_mse"], exact.sweep_["validation_mse"],
                               rtol=1e-6)
    np.testing.assert_allclose(cg.predict(X[:50]), exact.predict(X[:50]), rtol=1e-12)
    with pytest.raises(ValueError, match="select='evidence' needs solver='exact'"):
        MondrianKernelRegressor(select="evidence", solver="cg").fit(X, y)
    with pytest.raises(ValueError, match="needs at least 4 rows, got n_samples=3"):
        MondrianKernelRegressor().fit(X[:3], y[:3])
    with pytest.raises(ValueError, match=r"lifetime=50 splits the 600 rows into \d+ cells"):
        MondrianKernelRegressor(lifetime=50.0, max_features=100).fit(X, y)
    before = exact.predict(X[:5])
    exact.set_params(lifetime=50.0, max_features=100)
    with pytest.raises(ValueError, match="cells"):  # a failed refit leaves the model as it was
        exact.fit(X[:, :2], y)
    assert exact.n_features_in_ == 3
    np.testing.assert_array_equal(exact.predict(X[:5]), before)


def test_partial_fit_extends_the_model():
    """Online (Sec. 5): fit on half the rows then partial_fit the rest gives a model at the
    same width whose weights are the exact ridge on all rows seen (a refit on the extended
    partitions), and its test error drops."""
    X, y = _smooth(800)
    Xt, yt = _smooth(400, seed=1)
    reg = MondrianKernelRegressor(n_mondrians=20, max_features=800, random_state=0)
    reg.fit(X[:400], y[:400])
    before = np.sqrt(np.mean((reg.predict(Xt) - yt) ** 2))
    lam, features = reg.lifetime_, reg.features_
    reg.partial_fit(X[400:], y[400:])
    assert reg.lifetime_ == lam and reg.features_.n_samples_seen_ == 800
    assert features.n_samples_seen_ == 400  # the earlier partitions were not touched
    seen = reg.features_.rows_seen_
    label = {row.tobytes(): v for row, v in zip(X, y, strict=True)}
    y_seen = np.array([label[row.tobytes()] for row in seen]) - reg.intercept_[0]
    Z = reg.features_.transform(seen, lifetime=lam)
    W, _, _ = ridge_solve(Z, y_seen[:, None], reg.alpha)
    np.testing.assert_allclose(reg.coef_, W, rtol=1e-9, atol=1e-12)
    after = np.sqrt(np.mean((reg.predict(Xt) - yt) ** 2))
    assert after < before
    with pytest.raises(ValueError, match="2 features"):
        reg.partial_fit(np.zeros((2, 2)), np.zeros(2))
    assert reg.features_.n_samples_seen_ == 800


def test_classifier_learns_the_width_and_classes():
    rng = np.random.default_rng(0)
    X = rng.random((600, 2))
    y = np.where(np.sin(6 * X[:, 0]) > X[:, 1] - 0.5, "up", "down")
    y[X[:, 1] > 0.9] = "top"
    clf = MondrianKernelClassifier(n_mondrians=30, max_features=900, random_state=0).fit(X, y)
    Xt = rng.random((400, 2))
    yt = np.where(np.sin(6 * Xt[:, 0]) > Xt[:, 1] - 0.5, "up", "down")
    yt[Xt[:, 1] > 0.9] = "top"
    assert list(clf.classes_) == ["down", "top", "up"]
    assert np.mean(clf.predict(Xt) == yt) > 0.9
    proba = clf.predict_proba(Xt)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(clf.classes_[proba.argmax(axis=1)], clf.predict(Xt))
    clf.partial_fit(Xt, yt)
    assert clf.features_.n_samples_seen_ == 1000
    with pytest.raises(ValueError, match="1 label.* not seen at fit .first: 'new'"):
        clf.partial_fit(Xt[:2], np.array(["up", "new"]))


@parametrize_with_checks([
    MondrianKernelRegressor(n_mondrians=10, max_features=1000, n_widths=5, random_state=0),
    MondrianKernelClassifier(n_mondrians=10, max_features=1000, n_widths=5, random_state=0)])
def test_sklearn_compatible_estimators(estimator, check):
    check(estimator)


# ------------------------------------------------------------------------ persistence


@pytest.mark.parametrize("kind", ["features", "regressor", "classifier"])
def test_save_load_roundtrip(kind, tmp_path):
    X, y = _smooth(300)
    frame = pd.DataFrame(X, columns=["u", "v", "w"])
    if kind == "features":
        model = MondrianKernelFeatures(n_mondrians=8, lifetime=3.0, random_state=0).fit(frame)
    elif kind == "regressor":
        model = MondrianKernelRegressor(n_mondrians=8, max_features=200, random_state=0)
        model.fit(frame, y)
    else:
        model = MondrianKernelClassifier(n_mondrians=8, max_features=200, random_state=0)
        model.fit(frame, np.where(y > np.median(y), "hi", "lo"))
    new = pd.DataFrame(np.random.default_rng(1).uniform(-0.5, 1.5, (40, 3)),
                       columns=["u", "v", "w"])
    loaded = assert_roundtrip(model, new, tmp_path)
    assert list(loaded.feature_names_in_) == ["u", "v", "w"]
    if kind == "features":
        assert (loaded.transform(new) != model.transform(new)).nnz == 0
        return
    more = frame.iloc[:30] + 0.01
    y_more = y[:30] if kind == "regressor" else np.where(y[:30] > 0, "hi", "lo")
    a, b = model.partial_fit(more, y_more), loaded.partial_fit(more, y_more)
    np.testing.assert_array_equal(a.predict(new), b.predict(new))


@pytest.fixture(scope="module")
def fitted_regressor():
    X, y = _smooth(300)
    return MondrianKernelRegressor(n_mondrians=6, max_features=150, random_state=0).fit(X, y)


@pytest.mark.parametrize(("edit", "match"), [
    (lambda s: s["features"]["trees_"][0]["left"].__setitem__(0, 10**9), r"trees_\[0\]"),
    (lambda s: s["features"]["trees_"][1]["tau"].__setitem__(0, 1e9), r"trees_\[1\]"),
    (lambda s: s["features"].__setitem__("trees_", s["features"]["trees_"][:2]),
     "n_mondrians=6"),
    (lambda s: s.__setitem__("coef_", s["coef_"][:-1]), "coef_ has shape"),
    (lambda s: s.__setitem__("G_inv", s["G_inv"][:, :-1]), "G_inv has shape"),
    (lambda s: s.__setitem__("lifetime_", 1e9), "past lifetime_max_"),
    (lambda s: s.__setitem__("lifetime_", -1.0), "lifetime_ must be a finite positive"),
    (lambda s: s["noise_variance_"].__setitem__(0, -1.0), "noise_variance_ must be positive"),
    (lambda s: s["features"]["_X"].__setitem__((0, 0), np.nan), "_X holds NaN"),
    (lambda s: s.__setitem__("sweep_", {"lifetime": 1}), "sweep_ must be None or"),
])
def test_crafted_states_are_refused(fitted_regressor, edit, match):
    d = estimator_state(fitted_regressor)
    state = copy.deepcopy(d["state"])
    edit(state)
    with pytest.raises(ModelFormatError, match=match):
        estimator_from_state({**d, "state": state})
