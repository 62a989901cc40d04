"""SMCTreeClassifier / SMCTreeRegressor: predictions against oracles, persistence, seams."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.special import logsumexp

from ebf import SMCTreeClassifier, SMCTreeRegressor
from ebf.artifact import ModelFormatError, load
from ebf.artifact.classes import estimator_from_state, estimator_state
from ebf.bayestrees._particles import leaf_values, weighted_values
from tests.ebf.model_helpers import assert_roundtrip, load_manifest, rewrite_array, save
from tests.naive import (
    naive_bayestree_rows,
    naive_dirichlet_multinomial_polya,
    naive_nig_marginal_sequential,
    naive_trunk_apply,
)


def _classes(n=150, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, 3))
    y = np.where(X[:, 0] + 0.3 * rng.normal(size=n) > 0.5, "b", "a")
    y[X[:, 1] > 0.85] = "c"
    return X, y


def _targets(n=150, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, 3))
    return X, 3 * (X[:, 0] > 0.5) + X[:, 1] + 0.3 * rng.normal(size=n)


def _trees(model):
    """Every kept tree as local arrays, with its weight and its leaf per row."""
    t = model.trees_
    for k in range(t.n_trees):
        a, b = t.offsets[k], t.offsets[k + 1]
        local = {"feature": t.feature[a:b], "threshold": t.threshold[a:b]}
        for name in ("left", "right"):
            v = getattr(t, name)[a:b]
            local[name] = np.where(v >= 0, v - a, -1)
        yield local, model.tree_weight_[k]


def _leaf_rows(arrays, X_train, X):
    """Training rows of the leaf every row of ``X`` falls in (plain-NumPy descent)."""
    rows = naive_bayestree_rows(arrays, X_train)
    leaf = naive_trunk_apply(X, {**arrays, "leaf_id": np.arange(arrays["feature"].size)})
    return [rows[j] for j in leaf]


def test_classifier_probabilities_are_the_weighted_polya_predictives():
    """p(y = k | x) = sum_t w_t p(k | labels of x's leaf in tree t), the Polya-urn
    predictive exp(log l(labels + k) - log l(labels)) of eq. (3.2)."""
    X, y = _classes()
    clf = SMCTreeClassifier(n_particles=20, n_islands=3, alpha=2.0, random_state=1).fit(X, y)
    codes = np.searchsorted(clf.classes_, y)
    Xt = np.random.default_rng(9).random((25, 3))
    expected = np.zeros((25, 3))
    for arrays, w in _trees(clf):
        for i, rows in enumerate(_leaf_rows(arrays, X, Xt)):
            base = naive_dirichlet_multinomial_polya(codes[rows], 2.0, 3)
            for k in range(3):
                expected[i, k] += w * np.exp(
                    naive_dirichlet_multinomial_polya(np.append(codes[rows], k), 2.0, 3) - base)
    np.testing.assert_allclose(clf.predict_proba(Xt), expected, rtol=1e-10)
    np.testing.assert_allclose(clf.tree_weight_.sum(), 1.0)
    island = clf.trees_.island_of_tree
    np.testing.assert_allclose(np.bincount(island, clf.tree_weight_), 1 / 3)  # "equal"


def test_regressor_mixture_is_the_weighted_leaf_predictive():
    """The density at y* is sum_t w_t p(y* | labels of x's leaf), eq. (4.9)'s predictive
    exp(log l(labels + y*) - log l(labels)) with the joint Normal of the leaf's labels."""
    X, y = _targets()
    reg = SMCTreeRegressor(n_particles=20, n_islands=2, noise="shared",
                           random_state=2).fit(X, y)
    s2, mu0, t2 = reg.noise_variance_, reg.leaf_prior_mean_, reg.leaf_prior_var_

    def log_l(v):
        return stats.multivariate_normal.logpdf(v, np.full(v.size, mu0),
                                                s2 * np.eye(v.size) + t2)

    Xt = np.random.default_rng(3).random((8, 3))
    y_star = np.linspace(-1, 5, 8)
    density = np.zeros(8)
    for arrays, w in _trees(reg):
        for i, rows in enumerate(_leaf_rows(arrays, X, Xt)):
            density[i] += w * np.exp(log_l(np.append(y[rows], y_star[i])) - log_l(y[rows]))
    mixture = reg.predict_distribution(Xt)
    np.testing.assert_allclose(mixture.logpdf(y_star), np.log(density), rtol=1e-8)
    assert mixture.n_components == reg.n_trees_


def test_regressor_leaf_noise_components_are_the_student_t_moments():
    """``noise="leaf"``: a tree's component is the mean and variance of its leaf's
    Student-t predictive, the normal-inverse-gamma posterior updated one label at a time,
    with BART's variance prior (P(sigma^2 < sigma_hat^2) = q) and Var(mu) = tau^2 at its
    scale."""
    X, y = _targets()
    reg = SMCTreeRegressor(n_particles=20, n_islands=2, nu=4.0, q=0.8,
                           random_state=2).fit(X, y)
    s2, mu0, t2 = reg.noise_variance_, reg.leaf_prior_mean_, reg.leaf_prior_var_
    lam = s2 * stats.chi2.ppf(0.2, 4.0) / 4.0
    Xt = np.random.default_rng(3).random((8, 3))
    means, variances = [], []
    for arrays, _ in _trees(reg):
        moments = [naive_nig_marginal_sequential(y[rows] - mu0, 4.0, lam, 0.0, lam / t2)[1:]
                   for rows in _leaf_rows(arrays, X, Xt)]
        means.append([mu0 + m for m, _ in moments])
        variances.append([v for _, v in moments])
    mixture = reg.predict_distribution(Xt)
    np.testing.assert_allclose(mixture.means, np.transpose(means), rtol=1e-9)
    np.testing.assert_allclose(mixture.variances, np.transpose(variances), rtol=1e-9)
    np.testing.assert_allclose(mixture.weights[0], reg.tree_weight_)


def _tree_data(n, rng):
    """A 4-leaf tree with noise sd 0.5 left of x0 = 0.5 and 1.5 right of it."""
    X = rng.random((n, 3))
    mean = np.where(X[:, 0] < 0.5, np.where(X[:, 1] < 0.3, 0.0, 3.0), 6.0 * (X[:, 1] > 0.6) - 2)
    return X, mean + np.where(X[:, 0] < 0.5, 0.5, 1.5) * rng.normal(size=n)


def test_leaf_noise_intervals_are_calibrated_when_the_truth_is_a_tree():
    """Seeded statistical test. On 2,000 held-out rows of a heteroscedastic tree, the
    per-leaf variances give central intervals within 0.05 of nominal (the binomial sd of a
    coverage is 0.011 at 50%); one shared sigma_hat^2 (the linear fit's residual variance,
    an over-estimate) covers over 0.15 too much at 50% and has a worse NLPD."""
    rng = np.random.default_rng(0)
    X, y = _tree_data(1000, rng)
    Xt, yt = _tree_data(2000, rng)
    gaps, nlpd = {}, {}
    for noise in ("leaf", "shared"):
        reg = SMCTreeRegressor(n_particles=50, n_islands=2, noise=noise, random_state=1)
        dist = reg.fit(X, y).predict_distribution(Xt)
        nlpd[noise] = -dist.logpdf(yt).mean()
        gaps[noise] = []
        for level in (0.5, 0.9):
            lo, hi = dist.interval(level)
            gaps[noise].append(np.mean((yt >= lo) & (yt <= hi)) - level)
    assert max(abs(g) for g in gaps["leaf"]) < 0.05, gaps
    assert gaps["shared"][0] > 0.15, gaps
    assert nlpd["leaf"] < nlpd["shared"] - 0.2, nlpd


def test_regressor_prior_is_scaled_from_the_target():
    X, y = _targets()
    reg = SMCTreeRegressor(n_particles=5, n_islands=1, k=3.0, random_state=0).fit(X, y)
    assert reg.leaf_prior_mean_ == pytest.approx((y.max() + y.min()) / 2)
    assert reg.leaf_prior_var_ == pytest.approx(((y.max() - y.min()) / 6) ** 2)
    design = np.column_stack([np.ones(150), X])
    resid = y - design @ np.linalg.lstsq(design, y, rcond=None)[0]
    assert reg.noise_variance_ == pytest.approx(resid @ resid / (150 - 4))
    fixed = SMCTreeRegressor(n_particles=5, n_islands=1, noise_variance=0.25,
                             random_state=0).fit(X, y)
    assert fixed.noise_variance_ == 0.25


def test_prediction_kernels_match_a_plain_descent():
    X, y = _targets(80)
    reg = SMCTreeRegressor(n_particles=10, n_islands=2, random_state=5).fit(X, y)
    Xt = np.random.default_rng(1).random((30, 3))
    value = np.random.default_rng(2).random((reg.trees_.feature.size, 2))
    leaves = np.column_stack([
        naive_trunk_apply(Xt, {**arrays, "leaf_id": np.arange(arrays["feature"].size)}) + a
        for (arrays, _), a in zip(_trees(reg), reg.trees_.offsets[:-1], strict=False)])
    first, second = leaf_values(reg.trees_, Xt, value)
    np.testing.assert_array_equal(first, value[leaves, 0])
    np.testing.assert_array_equal(second, value[leaves, 1])
    w = reg.tree_weight_
    np.testing.assert_allclose(weighted_values(reg.trees_, Xt, w, value),
                               np.einsum("t,itk->ik", w, value[leaves]), rtol=1e-12)


def test_evidence_weighting_of_islands():
    X, y = _classes(seed=3)
    clf = SMCTreeClassifier(n_particles=10, n_islands=3, island_weights="evidence",
                            random_state=0).fit(X, y)
    z = np.exp(clf.log_evidence_ - logsumexp(clf.log_evidence_))
    np.testing.assert_allclose(np.bincount(clf.trees_.island_of_tree, clf.tree_weight_), z)
    assert clf.expected_n_leaves_ == pytest.approx(clf.tree_weight_ @ clf.n_leaves_)
    assert clf.n_stages_.shape == clf.n_resampled_.shape == (3,)
    assert (clf.max_depth_ >= 0).all() and clf.n_leaves_.shape == (clf.n_trees_,)


def test_same_seed_same_model_whatever_the_threads():
    X, y = _classes()
    a = SMCTreeClassifier(n_particles=10, n_islands=4, random_state=3, n_jobs=1).fit(X, y)
    b = SMCTreeClassifier(n_particles=10, n_islands=4, random_state=3, n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    c = SMCTreeClassifier(n_particles=10, n_islands=4, random_state=None).fit(X, y)
    d = SMCTreeClassifier(n_particles=10, n_islands=4, random_state=c.entropy_).fit(X, y)
    np.testing.assert_array_equal(c.predict_proba(X), d.predict_proba(X))


def test_branch_seam_keeps_every_class_column():
    """The EBF branch learner fits encoded rows and codes of a fixed number of classes."""
    X, y = _classes()
    codes = np.searchsorted(["a", "b", "c"], y)  # codes 0..2 of an ensemble with 5 classes
    clf = SMCTreeClassifier(n_particles=10, n_islands=2)._fit_branch(
        X, codes, None, entropy=7, branch=3, n_classes=5)
    proba = clf.predict_proba(X[:10])
    assert proba.shape == (10, 5) and np.all(proba[:, 3:] > 0)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    again = SMCTreeClassifier(n_particles=10, n_islands=2)._fit_branch(
        X, codes, np.ones(150), entropy=7, branch=3, n_classes=5)
    np.testing.assert_array_equal(again.predict_proba(X[:10]), proba)
    other = SMCTreeClassifier(n_particles=10, n_islands=2)._fit_branch(
        X, codes, None, entropy=7, branch=4, n_classes=5)
    assert not np.array_equal(other.log_evidence_, clf.log_evidence_)


def test_sample_weights_equal_or_zero_only():
    X, y = _targets()
    base = SMCTreeRegressor(n_particles=10, n_islands=2, random_state=0).fit(X, y)
    equal = SMCTreeRegressor(n_particles=10, n_islands=2, random_state=0).fit(
        X, y, sample_weight=np.full(150, 2.5))
    np.testing.assert_array_equal(base.predict(X), equal.predict(X))
    keep = np.arange(150) % 3 > 0
    dropped = SMCTreeRegressor(n_particles=10, n_islands=2, random_state=0).fit(
        X, y, sample_weight=keep.astype(float))
    subset = SMCTreeRegressor(n_particles=10, n_islands=2, random_state=0).fit(X[keep], y[keep])
    np.testing.assert_array_equal(dropped.trees_.stats, subset.trees_.stats)
    w = np.ones(150)
    w[[4, 9]] = 2.0
    with pytest.raises(ValueError, match=r"unequal sample weights .* 2 of 150 .*np\.repeat"):
        base.fit(X, y, sample_weight=w)
    with pytest.raises(ValueError, match="at least one non-zero"):
        base.fit(X, y, sample_weight=np.zeros(150))
    np.testing.assert_array_equal(base.predict(X), equal.predict(X))  # unchanged


def test_failed_fit_leaves_the_model_unchanged():
    X, y = _classes()
    clf = SMCTreeClassifier(n_particles=5, n_islands=1, random_state=0).fit(X, y)
    before = clf.predict_proba(X)
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        clf.fit(bad, y)
    clf.set_params(n_particles=0)
    with pytest.raises(ValueError, match="n_particles"):
        clf.fit(X, y)
    np.testing.assert_array_equal(clf.predict_proba(X), before)


@pytest.mark.parametrize("kind", ["classifier", "regressor"])
def test_save_load_roundtrip(kind, tmp_path):
    if kind == "classifier":
        X, y = _classes()
        model = SMCTreeClassifier(n_particles=10, n_islands=2, proposal="optimal",
                                  random_state=0)
    else:
        X, y = _targets()
        model = SMCTreeRegressor(n_particles=10, n_islands=2, random_state=0)
    frame = pd.DataFrame(X, columns=["u", "v", "w"])
    model.fit(frame, y)
    loaded = assert_roundtrip(model, frame.iloc[:20], tmp_path)
    assert list(loaded.feature_names_in_) == ["u", "v", "w"]
    np.testing.assert_array_equal(loaded.log_evidence_, model.log_evidence_)
    if kind == "regressor":
        loaded.recalibrate(frame.iloc[100:], y[100:])
        again = assert_roundtrip(loaded, frame.iloc[:20], tmp_path, "recalibrated")
        assert again.recalibration_ is not None


# ------------------------------------------------------------------------ hostile states


@pytest.fixture(scope="module")
def fitted():
    X, y = _targets()
    return SMCTreeRegressor(n_particles=10, n_islands=2, random_state=0).fit(X, y), X


def _crafted(model, edit):
    d = estimator_state(model)
    state = {**d["state"], "trees": {k: v.copy() for k, v in d["state"]["trees"].items()}}
    edit(state)
    return {**d, "state": state}


def _internal(model):
    return int(np.flatnonzero(model.trees_.feature >= 0)[0])


@pytest.mark.parametrize(("edit", "match"), [
    (lambda s, j: s["trees"]["left"].__setitem__(j, 10**12), "left child 1000000000000 is "
     "outside"),
    (lambda s, j: s["trees"]["right"].__setitem__(j, j), "is not numbered after it"),
    (lambda s, j: s["trees"]["feature"].__setitem__(j, 3), "split feature 3 is outside"),
    (lambda s, j: s["trees"]["threshold"].__setitem__(j, np.nan), "non-finite split threshold"),
    (lambda s, j: s["trees"]["offsets"].__setitem__(1, 10**9), "offsets must increase"),
    (lambda s, j: s["trees"]["islands"].__setitem__(1, 0), "islands must increase"),
    (lambda s, j: s["trees"].__setitem__("offsets", s["trees"]["offsets"][:1]),
     "offsets needs at least two entries"),
    (lambda s, j: s["trees"]["stats"].__setitem__((j, 0), -1.0), "negative count"),
    (lambda s, j: s["trees"]["stats"].__setitem__((j, 1), np.inf), "are not finite"),
    (lambda s, j: s["trees"]["weight"].__setitem__(0, 5.0), "weights of island 0 sum to"),
    (lambda s, j: s["trees"]["weight"].__setitem__(0, np.nan), "weight holds negative"),
    (lambda s, j: s["trees"]["log_evidence"].__setitem__(0, np.nan), "log_evidence holds"),
    (lambda s, j: s["trees"].__setitem__("left", s["trees"]["left"].astype(float)),
     "left must be an array of int64"),
    (lambda s, j: s["trees"].__setitem__("stats", s["trees"]["stats"][:, :2]),
     r"stats has shape"),
    (lambda s, j: s["trees"].pop("weight"), "lacks the array 'weight'"),
    (lambda s, j: s.__setitem__("trees", [1, 2]), "trees must be a dict"),
    (lambda s, j: s.__setitem__("noise_variance", -1.0),
     r"noise_variance must be a float in \(0, 1e\+220\] \(MAX_VARIANCE\), got -1.0"),
    (lambda s, j: s.__setitem__("leaf_prior_mean", "0"), "leaf_prior_mean must be a float in"),
    (lambda s, j: s.__setitem__("leaf_prior_mean", 1e160),
     r"leaf_prior_mean must be a float in \[-1e\+110, 1e\+110\] \(MAX_ABS_LOCATION\)"),
    (lambda s, j: s["trees"]["stats"].__setitem__((0, 0), 0.5),
     r"trees.stats \(counts\) holds 1 count\(s\) that are not whole numbers: 0.5 at index 0"),
    (lambda s, j: s["trees"]["stats"].__setitem__((j, 1), 1e300),
     r"trees.stats \(sums\) holds 1 value\(s\) outside count \* MAX_ABS_LOCATION: 1e\+300 "
     r"at index \d+ is not in"),
])
def test_crafted_states_are_refused_naming_the_entry(fitted, edit, match):
    model, X = fitted
    j = _internal(model)
    with pytest.raises(ModelFormatError, match=match):
        estimator_from_state(_crafted(model, lambda s: edit(s, j)))


def test_island_count_must_match_the_parameters(fitted):
    model, _ = fitted
    d = estimator_state(model)
    d["params"]["n_islands"] = 3
    with pytest.raises(ModelFormatError, match="from 2 islands but n_islands is 3"):
        estimator_from_state(d)


def test_crafted_model_files_are_refused(fitted, tmp_path):
    """A cycle written into a saved model, checksums recomputed, is caught at load."""
    model, X = fitted
    path = save(model, tmp_path / "model")
    manifest = load_manifest(path)
    entry = manifest["state"]["trees"]["left"]
    left = np.load(path / entry["__ndarray__"], allow_pickle=False).copy()
    j = _internal(model)
    left[j] = 0
    rewrite_array(path, manifest, entry, left)
    with pytest.raises(ModelFormatError, match=f"node {j}: .*child 0"):
        load(path)
