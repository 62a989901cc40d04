"""The class calibration map (basics.class_calibration) and the ECE (basics.metrics,
basics.scores), against the plain-NumPy oracles of tests/naive/ and on probabilities whose
calibration is known."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, special
from sklearn.isotonic import IsotonicRegression

from basics.class_calibration import (
    DIRICHLET_L2,
    FLOOR,
    MIN_ROWS,
    ClassCalibrationMap,
    _dirichlet_objective,
    candidate_losses,
    fit_candidate,
    half_of,
)
from basics.metrics import (
    ECE_BINS,
    class_rows,
    confidence_bins,
    ece_binned,
    expected_calibration_error,
)
from basics.scores import SCORES, ClassRows, finish, partial_sums, scores_of, value, values
from tests.naive import naive_dirichlet_predict, naive_ece, naive_half


def _true_model(n: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Probabilities of a known model and labels drawn from them."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, k)) * 1.5
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    codes = (rng.random(n)[:, None] > np.cumsum(p, axis=1)).sum(axis=1)
    return p, np.minimum(codes, k - 1)


def _sharpened(p: np.ndarray, power: float = 3.0) -> np.ndarray:
    q = p ** power
    return q / q.sum(axis=1, keepdims=True)


def _log_loss(q: np.ndarray, codes: np.ndarray) -> float:
    return float(class_rows(q, np.arange(q.shape[1]), codes)[1].mean())


# ----------------------------------------------------------------------------- ECE


@pytest.mark.parametrize("k", [2, 5])
def test_ece_is_the_oracle(k):
    p, codes = _true_model(700, k, seed=k)
    q = _sharpened(p)
    assert expected_calibration_error(q, codes) == pytest.approx(naive_ece(q, codes),
                                                                 rel=1e-12)
    correct, loss, _ = class_rows(q, np.arange(k), codes)
    rows = ClassRows(correct, loss, q.max(axis=1))
    assert value("ece", rows) == pytest.approx(naive_ece(q, codes), rel=1e-12)
    assert expected_calibration_error(q, codes, n_bins=4) == pytest.approx(
        naive_ece(q, codes, 4), rel=1e-12)


def test_ece_partial_sums_add_up_over_partitions():
    p, codes = _true_model(1000, 3, seed=7)
    q = _sharpened(p, 2.0)
    correct, loss, _ = class_rows(q, np.arange(3), codes)
    score = SCORES["ece"]
    rows = ClassRows(correct, loss, q.max(axis=1))
    per_row = score.row(rows)
    parts = np.split(np.arange(1000), [13, 400, 401, 777])
    total = sum(partial_sums(score, per_row[i]) for i in parts)
    whole = partial_sums(score, per_row)
    np.testing.assert_array_equal(total[:ECE_BINS], whole[:ECE_BINS])  # counts: exact
    np.testing.assert_allclose(total, whole, rtol=1e-12)
    assert finish(score, total, 1000) == pytest.approx(value("ece", rows), rel=1e-12)
    np.testing.assert_array_equal(whole, confidence_bins(q.max(axis=1), correct))
    assert ece_binned(whole) == expected_calibration_error(q, codes)


def test_ece_record_keeps_a_wrong_zero_confidence_wrong():
    rows = ClassRows(np.array([False, True]), np.zeros(2), np.array([0.0, 0.0]))
    sums = partial_sums(SCORES["ece"], SCORES["ece"].row(rows))
    assert sums[ECE_BINS] == 1.0  # one correct row in the first bin, not two


def test_ece_is_a_classification_score_after_log_loss_and_accuracy():
    assert [s.name for s in scores_of("classification")] == ["log_loss", "accuracy", "ece"]
    s = SCORES["ece"]
    assert (s.better, s.unit, s.tolerance) == ("lower", "fraction", None)
    rows = ClassRows(np.array([True]), np.array([0.1]))  # no confidence: no ECE
    assert values(rows)["ece"] is None


def test_calibrated_probabilities_have_a_small_ece():
    p, codes = _true_model(50_000, 3, seed=8)
    assert expected_calibration_error(p, codes) < 0.01
    assert expected_calibration_error(_sharpened(p), codes) > 0.05


# ----------------------------------------------------------------------------- the map


def test_dirichlet_prediction_is_the_oracle():
    rng = np.random.default_rng(1)
    p, _ = _true_model(300, 4, seed=1)
    p[:5, 0] = 0.0  # zeros are floored before the log
    weights, intercepts = rng.normal(size=(4, 4)), rng.normal(size=4)
    m = ClassCalibrationMap("dirichlet", 4, 300, weights=weights, intercepts=intercepts)
    np.testing.assert_allclose(m(p), naive_dirichlet_predict(p, weights, intercepts, FLOOR),
                               rtol=1e-12, atol=1e-15)


def test_dirichlet_fit_is_a_minimum_of_its_objective():
    p, codes = _true_model(2000, 3, seed=2)
    q = _sharpened(p)
    m = fit_candidate("dirichlet", q, codes)
    L = np.log(np.maximum(q, FLOOR))
    theta = np.concatenate([m.weights.ravel(), m.intercepts])

    def objective(t):
        return _dirichlet_objective(t, L, codes, DIRICHLET_L2)

    # the objective is the mean log loss plus the ODIR penalty (dense NumPy)
    Z = L @ m.weights.T + m.intercepts
    log_q = Z - special.logsumexp(Z, axis=1, keepdims=True)
    off = m.weights - np.diag(np.diag(m.weights))
    penalty = DIRICHLET_L2 * (np.sum(off ** 2) / 6 + m.intercepts @ m.intercepts / 3)
    assert objective(theta)[0] == pytest.approx(
        -log_q[np.arange(2000), codes].mean() + penalty, rel=1e-12)
    # the analytic gradient is right, and vanishes at the fit
    assert optimize.check_grad(lambda t: objective(t)[0], lambda t: objective(t)[1],
                               theta + 0.1) < 1e-5
    assert np.max(np.abs(objective(theta)[1])) < 1e-4
    # the over-confident p^3 is undone by weights near I / 3
    np.testing.assert_allclose(np.diag(m.weights) - m.weights.mean(axis=0), 1 / 3 - 1 / 9,
                               atol=0.06)


def test_isotonic_is_scikit_learns_per_class_then_floored_and_renormalised():
    p, codes = _true_model(1500, 3, seed=3)
    q = _sharpened(p)
    m = fit_candidate("isotonic", q, codes)
    raw = np.column_stack([
        IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(
            q[:, k], codes == k).predict(q[:, k]) for k in range(3)])
    want = np.maximum(raw, FLOOR)
    want /= want.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(m(q), want, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("k", [2, 4])
def test_map_of_over_confident_probabilities_recovers_the_true_model(k):
    p, codes = _true_model(3000, k, seed=10 + k)
    p_test, codes_test = _true_model(30_000, k, seed=20 + k)
    m = ClassCalibrationMap.fit(_sharpened(p), codes)
    assert m.method in ("dirichlet", "isotonic") and m.n_rows == 3000
    over, fixed = _sharpened(p_test), m(_sharpened(p_test))
    true_loss = _log_loss(p_test, codes_test)
    assert _log_loss(over, codes_test) > true_loss + 0.1
    assert _log_loss(fixed, codes_test) < true_loss + 0.01
    assert expected_calibration_error(over, codes_test) > 0.05
    assert expected_calibration_error(fixed, codes_test) < 0.015
    np.testing.assert_allclose(fixed.sum(axis=1), 1.0, rtol=1e-12)
    assert fixed.min() >= 0.0 and fixed.max() <= 1.0


@pytest.mark.parametrize("k", [2, 3])
def test_map_of_calibrated_probabilities_does_no_harm(k):
    p, codes = _true_model(3000, k, seed=30 + k)
    p_test, codes_test = _true_model(30_000, k, seed=40 + k)
    m = ClassCalibrationMap.fit(p, codes)
    assert _log_loss(m(p_test), codes_test) < _log_loss(p_test, codes_test) + 0.005


def test_the_choice_is_the_lowest_held_out_loss_refitted_on_every_row():
    p, codes = _true_model(600, 3, seed=5)
    q = _sharpened(p, 2.0)
    losses = candidate_losses(q, codes)
    assert set(losses) == {"identity", "dirichlet", "isotonic"}
    assert losses["identity"] == pytest.approx(_log_loss(q, codes), rel=1e-12)
    m = ClassCalibrationMap.fit(q, codes)
    assert m.method == min(losses, key=losses.get)
    assert m == fit_candidate(m.method, q, codes)


def test_halves_hash_the_positions_so_any_order_gives_the_same_map():
    positions = np.arange(10_000)
    half = half_of(positions)
    assert 0.48 < half.mean() < 0.52
    some = [0, 1, 2, 77, 9_999, 2**40 + 3]
    assert half_of(some).tolist() == [naive_half(i, 42) for i in some]
    assert half_of(some, seed=7).tolist() == [naive_half(i, 7) for i in some]
    perm = np.random.default_rng(0).permutation(10_000)
    np.testing.assert_array_equal(half_of(perm), half[perm])
    p, codes = _true_model(500, 3, seed=6)
    q = _sharpened(p)
    order = np.random.default_rng(1).permutation(500)
    a = candidate_losses(q, codes)
    b = candidate_losses(q[order], codes[order], positions=order)
    assert a == pytest.approx(b, rel=1e-9)


def test_too_few_rows_or_bad_input_raise():
    p, codes = _true_model(MIN_ROWS, 2, seed=9)
    ClassCalibrationMap.fit(p, codes)
    with pytest.raises(ValueError, match="at least 50 held-out rows"):
        ClassCalibrationMap.fit(p[:-1], codes[:-1])
    with pytest.raises(ValueError, match="codes holds 1 value"):
        ClassCalibrationMap.fit(p, np.where(np.arange(MIN_ROWS) == 3, 2, codes))
    with pytest.raises(ValueError, match="proba holds"):
        ClassCalibrationMap.fit(np.where(p > 0.5, np.nan, p), codes)
    with pytest.raises(ValueError, match="integer class codes"):
        ClassCalibrationMap.fit(p, codes.astype(float))
    with pytest.raises(ValueError, match="positions must be the integer positions of the 50"):
        ClassCalibrationMap.fit(p, codes, positions=np.arange(49))
    with pytest.raises(ValueError, match="with 2 classes"):
        ClassCalibrationMap.identity(2)(np.full((3, 3), 1 / 3))


def test_identity_changes_nothing():
    p, _ = _true_model(20, 3, seed=0)
    np.testing.assert_array_equal(ClassCalibrationMap.identity(3)(p), p)


# ----------------------------------------------------------------------------- state


@pytest.fixture(scope="module")
def maps() -> dict:
    p, codes = _true_model(800, 3, seed=11)
    q = _sharpened(p)
    return {m: fit_candidate(m, q, codes) for m in ("identity", "dirichlet", "isotonic")}


@pytest.mark.parametrize("method", ["identity", "dirichlet", "isotonic"])
def test_state_round_trip(maps, method):
    m = maps[method]
    state = m.to_state()
    back = ClassCalibrationMap.from_state(state, n_classes=3)
    assert back == m and back.method == method and back.n_rows == 800
    p, _ = _true_model(50, 3, seed=12)
    np.testing.assert_array_equal(back(p), m(p))
    assert m != maps["identity" if method != "identity" else "dirichlet"]


def _forged(maps: dict, method: str, change) -> dict:
    state = maps[method].to_state()
    change(state)
    return state


def _set(key, value):
    return lambda s: s.__setitem__(key, value)


def _knot(key, j, i, value):
    def change(s):
        s[key][j] = s[key][j].copy()
        s[key][j][i] = value
    return change


FORGED = {
    "method": ("identity", _set("method", "platt"), "method must be one of"),
    "n_classes": ("identity", _set("n_classes", 1), "n_classes"),
    "n_rows": ("identity", _set("n_rows", -3), "n_rows must be an integer >= 0"),
    "n_rows_float": ("identity", _set("n_rows", 3.5), "n_rows must be an integer"),
    "extra": ("identity", _set("weights", np.eye(3)), "takes no arrays"),
    "unknown": ("identity", _set("pickle", b"x"), "unknown field"),
    "missing": ("dirichlet", lambda s: s.pop("intercepts"), "takes"),
    "nan_weight": ("dirichlet", lambda s: s["weights"].__setitem__((0, 1), np.nan),
                   "weights holds 1 value"),
    "weights_shape": ("dirichlet", _set("weights", np.eye(2)), r"weights has shape \(2, 2\)"),
    "weights_dtype": ("dirichlet", _set("weights", np.eye(3, dtype=np.float32)),
                      "weights must be a float64 array"),
    "huge_intercept": ("dirichlet", _set("intercepts", np.array([0.0, 1e300, 0.0])),
                       "intercepts holds 1 value"),
    "knots_decrease": ("isotonic", _knot("knots_x", 1, 1, -0.0),
                       r"knots_x\[1\] must be strictly increasing"),
    "knots_y_decrease": ("isotonic", _knot("knots_y", 0, -1, 0.0), "non-decreasing"),
    "knots_y_nan": ("isotonic", _knot("knots_y", 2, 0, np.nan), r"knots_y\[2\] holds"),
    "knots_outside": ("isotonic", _knot("knots_x", 0, -1, 1.5), r"knots_x\[0\] holds"),
    "knots_count": ("isotonic", lambda s: s["knots_x"].pop(), "list of 3 arrays"),
    "knots_lengths": ("isotonic", lambda s: s["knots_y"].__setitem__(0, s["knots_y"][0][:-1]),
                      r"knots_y\[0\] has shape"),
    "not_a_dict": ("identity", None, "expected a dict"),
}


@pytest.mark.parametrize("name", sorted(FORGED))
def test_forged_states_raise_naming_the_field(maps, name):
    method, change, message = FORGED[name]
    state = [1, 2] if change is None else _forged(maps, method, change)
    with pytest.raises(ValueError, match=message) as err:
        ClassCalibrationMap.from_state(state, "class_calibration", n_classes=3)
    assert str(err.value).startswith("class_calibration")


def test_a_map_for_another_class_count_is_refused(maps):
    with pytest.raises(ValueError, match="class_calibration.n_classes: the map is for 3"):
        ClassCalibrationMap.from_state(maps["dirichlet"].to_state(), n_classes=4)
    with pytest.raises(ValueError, match="n_classes must be an integer >= 2"):
        ClassCalibrationMap.from_state({**maps["identity"].to_state(), "n_classes": 1})
