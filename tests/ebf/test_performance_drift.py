"""The performance-drift test (ebf.diagnostics.performance): the block Bayesian bootstrap
against its oracle, its false-alarm rate and power on simulated scores, and the family it
forms with the split tests (ebf.diagnostics._drift_report.with_performance)."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from scipy.signal import lfilter

from ebf import DriftReport, PerformanceDrift, performance_drift, with_performance
from ebf.diagnostics._drift_report import SPLIT_COLUMNS
from ebf.diagnostics._window import block_ids
from tests.naive import naive_performance_drift

#: Correlation of consecutive rows' latent errors: the rows of a window are dependent.
PHI = 0.7
#: Windows of the simulations, and the bootstrap draws of each (p-values to 1/501).
WINDOWS, DRAWS = 400, 500


def _scores(rng, windows, n, shift=0.0):
    """Per-row NLPD of a N(0, 1) prediction of AR(1) targets (``corr = PHI`` between
    consecutive rows), one window per row of the result, plus ``shift`` (a worse model)."""
    e = rng.normal(size=(windows, n + 200))
    z = lfilter([math.sqrt(1 - PHI ** 2)], [1, -PHI], e, axis=1)[:, 200:]
    return 0.5 * z * z + 0.5 * math.log(2 * math.pi) + shift


def _rate(windows, references, reference=lambda r: (r.mean(), r.size), **kw):
    kw = {"tolerance": 0.0, "n_draws": DRAWS, **kw}
    return np.mean([performance_drift(w, *reference(r), random_state=i, **kw).fired
                    for i, (w, r) in enumerate(zip(windows, references, strict=True))])


# ------------------------------------------------------------------ the oracle


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("blocks", [None, 7, 50])
@pytest.mark.parametrize("kind", ["mean with rows", "exact mean", "per-row"])
def test_matches_the_oracle(seed, blocks, kind):
    rng = np.random.default_rng(seed)
    x = rng.gamma(2.0, 0.5, size=int(rng.integers(60, 140))) + 0.1 * seed
    ref_rows = rng.gamma(2.0, 0.5, size=int(rng.integers(40, 120)))
    reference, n_reference = {"mean with rows": (ref_rows.mean(), ref_rows.size),
                              "exact mean": (ref_rows.mean(), None),
                              "per-row": (ref_rows, None)}[kind]
    tolerance = [0.0, 0.05, -0.0][seed]
    got = performance_drift(x, reference, n_reference, blocks=blocks, level=0.1,
                            tolerance=tolerance, n_draws=300, random_state=seed)
    want = naive_performance_drift(x, reference, n_reference, blocks, 0.1, tolerance, 300,
                                   seed)
    np.testing.assert_allclose([got.difference, got.lower, got.upper, got.pvalue], want,
                               rtol=1e-10, atol=1e-12)
    assert got.fired == (want[3] < 0.1) and got.n == x.size
    assert got.blocks == (x.size if blocks is None else blocks)
    assert got.n_reference == (ref_rows.size if n_reference or kind == "per-row" else None)


def test_blocks_are_consecutive_and_even():
    for n, b in ((10, 3), (7, 7), (5, 9), (100, 50)):
        ids = block_ids(n, b)
        assert (np.diff(ids) >= 0).all() and ids[0] == 0 and ids[-1] == min(n, b) - 1
        counts = np.bincount(ids)
        assert counts.min() >= 1 and counts.max() - counts.min() <= 1


def test_chunked_draws_are_the_draws_of_one_array():
    """A bootstrap over many blocks draws its weights in chunks (here 3 of at most 838
    draws): the same stream as one array of every draw's weights."""
    x = np.random.default_rng(3).random(5000)
    got = performance_drift(x, 0.5, 5000, blocks=None, n_draws=1700)
    m = []
    for key in (0, 1):
        w = np.random.default_rng(np.random.SeedSequence(0, spawn_key=(key,))) \
            .standard_exponential((1700, 5000))
        m.append(w @ x / w.sum(axis=1))
    d = m[0] - (0.5 + m[1] - x.mean())
    np.testing.assert_allclose([got.lower, got.upper], np.quantile(d, [0.05, 0.95]),
                               rtol=1e-10)
    assert got.pvalue == (1 + np.sum(d <= 0.01)) / 1701


# ------------------------------------------------------------------ error rates


def test_a_window_like_the_reference_fires_at_most_at_the_level():
    """400 windows of 1,000 dependent rows against a reference measured on 1,000 rows of its
    own, at level 0.05 and no tolerance: the test fires in at most 0.05 + 0.02 of them with
    the reference as a mean of ``n_reference`` rows (a version record) or as rows. Without
    the reference's own spread (an exact mean) it fires about 2.5 times too often, and a
    bootstrap of rows instead of blocks about 3 times."""
    rng = np.random.default_rng(0)
    windows, references = _scores(rng, WINDOWS, 1000), _scores(rng, WINDOWS, 1000)
    assert _rate(windows, references) <= 0.05 + 0.02
    assert _rate(windows, references, lambda r: (r, None)) <= 0.05 + 0.02
    assert _rate(windows, references, lambda r: (r.mean(), None)) >= 0.1
    few = slice(0, 150)
    assert _rate(windows[few], references[few], blocks=None, n_draws=200) >= 0.1


def test_a_worsening_at_the_tolerance_fires_at_most_at_the_level():
    rng = np.random.default_rng(1)
    windows, references = _scores(rng, WINDOWS, 1000, shift=0.1), _scores(rng, WINDOWS, 1000)
    assert _rate(windows, references, tolerance=0.1) <= 0.05 + 0.02
    assert _rate(windows, references, tolerance=0.0) >= 0.5  # worse, beyond no tolerance


def test_a_clear_worsening_fires():
    """0.2 nats per row worse (the scores' sd is 0.7): fires in at least 95% of windows."""
    rng = np.random.default_rng(2)
    windows, references = _scores(rng, WINDOWS, 1000, shift=0.2), _scores(rng, WINDOWS, 1000)
    assert _rate(windows, references, tolerance=0.01) >= 0.95
    r = performance_drift(windows[0], references[0].mean(), 1000, score="nlpd")
    assert r.fired and r.lower > 0.01 and r.lower < r.difference < r.upper
    assert "holdout NLPD" in r.describe() and "one-sided 95% bound" in r.describe()


# ------------------------------------------------------------------ the family


def _report(p, correction="holm", gain=0.5):
    """A drift report whose counted splits have probabilities ``p``, and a replicated gain
    that lets every failing split refit (the worst case for false alarms)."""
    splits = pd.DataFrame({
        "path": ["", *[f"L{'R' * i}" for i in range(len(p) - 1)]], "feature": "x0",
        "threshold": 0.5, "n_window": 1000, "probability": p, "status": "counted",
        "refit_feature": "x0", "refit_threshold": 0.5, "same_feature": True,
    }, columns=SPLIT_COLUMNS)
    return DriftReport(splits=splits, branches=pd.DataFrame({"branch": [0]}),
                       share_statistic=0.0, share_pvalue=1.0, threshold=0.05, decision="",
                       reason="", n_rows=1000, replicated_gain=gain, min_gain=0.01,
                       correction=correction)


def test_the_splits_and_the_holdout_score_hold_the_family_wise_level():
    """200 stationary days: 7 split tests with uniform p-values (a true null, refitting
    whenever rejected) and the holdout-score test on scores like the reference's. The
    family refits in at most 0.05 + 0.02 of them with Holm's correction over the 8 tests
    (Bonferroni's rejects a subset of Holm's); testing each at 0.05 refits in about a
    third."""
    days = 200
    rng = np.random.default_rng(4)
    windows, references = _scores(rng, days, 1000), _scores(rng, days, 1000)
    reports = [_report(p) for p in rng.random((days, 7))]
    perf = [performance_drift(w, r.mean(), r.size, tolerance=0.0, n_draws=DRAWS,
                              random_state=i)
            for i, (w, r) in enumerate(zip(windows, references, strict=True))]
    for correction, bound in (("holm", 0.05 + 0.02), ("none", 1.0)):
        decided = [with_performance(replace(r, correction=correction), q)
                   for r, q in zip(reports, perf, strict=True)]
        refits = np.mean([d.decision == "refit" for d in decided])
        assert refits <= bound
        assert all(d.performance.tests == 8 and d.performance.correction == correction
                   for d in decided)
    assert refits > 0.25  # each at 0.05: about 1 - 0.95 ** 8


def test_the_decision_line_names_the_test_that_fired():
    calm, worse = (performance_drift(np.full(100, 1.0) + np.tile([-0.1, 0.1], 50), 1.0 - d,
                                     100, score="nlpd") for d in (0.0, 0.5))
    assert not calm.fired and worse.fired
    holds, fails = _report([0.9, 0.8]), _report([1e-6, 0.8])
    cases = [(holds, calm, "update", "no test fired: every tested split holds"),
             (holds, worse, "refit", "the holdout-score test fired: every tested"),
             (fails, calm, "refit", "the split test fired: split probability below"),
             (fails, worse, "refit", "the split and holdout-score tests fired: split")]
    for report, perf, decision, start in cases:
        out = with_performance(report, perf)
        assert out.decision == decision and out.reason.startswith(start), out.reason
        assert "holdout NLPD" in out.reason and out.performance.fired == perf.fired
        assert "over 2 tested splits and the holdout score" in out.reason or not out.failing
        assert report.performance is None and report.decision == ""  # unchanged
    # a failing split that does not carry over in time is no refit
    out = with_performance(_report([1e-6, 0.8], gain=0.0), calm)
    assert out.decision == "update" and out.reason.startswith("no test fired: split prob")
    # too few rows: reported, not counted
    few = performance_drift(np.ones(10), 0.5, 100)
    assert math.isnan(few.pvalue) and not few.fired and not few.tested
    out = with_performance(fails, few)
    assert out.performance.tests == 2 and "not tested: 10 rows" in out.reason
    assert "over 2 tested splits)" in out.reason and out.decision == "refit"


def test_the_performance_test_round_trips_with_its_report():
    perf = performance_drift(np.linspace(1, 2, 300), 1.2, 300, score="log_loss")
    out = with_performance(_report([0.9, 0.3]), perf)
    d = json.loads(json.dumps(out.to_dict(), allow_nan=False))
    back = DriftReport.from_dict(d)
    assert back.performance == out.performance and back.to_dict() == out.to_dict()
    last = str(back).splitlines()[-1]
    assert last.startswith("holdout log loss") and last.endswith(
        ": fired" if out.performance.fired else ": did not fire")
    assert PerformanceDrift.from_dict(perf.to_dict()) == perf
    untested = performance_drift(np.ones(5), 1.0, 5)
    assert math.isnan(PerformanceDrift.from_dict(json.loads(json.dumps(
        untested.to_dict()))).lower)
    old = {k: v for k, v in d.items() if k != "performance"}  # reports without the test
    assert DriftReport.from_dict(old).performance is None


def test_bad_input_is_refused_with_the_option_named():
    x = np.ones(50)
    for kwargs, match in (({"level": 1.0}, "level"), ({"level": "0.05"}, "level"),
                          ({"tolerance": -0.1}, "tolerance"), ({"tolerance": math.inf},
                                                               "tolerance"),
                          ({"n_draws": 0}, "n_draws"), ({"blocks": 2.5}, "blocks")):
        with pytest.raises(ValueError, match=match):
            performance_drift(x, 1.0, 50, **kwargs)
    with pytest.raises(ValueError, match="not finite"):
        performance_drift(np.r_[x, np.nan], 1.0, 50)
    with pytest.raises(ValueError, match="1-D"):
        performance_drift(x.reshape(5, 10), 1.0, 50)
    with pytest.raises(ValueError, match="empty"):
        performance_drift([], 1.0, 50)
    with pytest.raises(ValueError, match="n_reference"):
        performance_drift(x, 1.0, 0)
    with pytest.raises(ValueError, match="n_reference is for a reference mean"):
        performance_drift(x, x, 50)
    with pytest.raises(ValueError, match="reference must be a finite"):
        performance_drift(x, math.nan, 50)
    report = _report([0.5])
    with pytest.raises(ValueError, match="level=0.05"):
        with_performance(report, performance_drift(x, 1.0, 50, level=0.1))
    with pytest.raises(ValueError, match="already has"):
        with_performance(with_performance(report, performance_drift(x, 1.0, 50)),
                         performance_drift(x, 1.0, 50))
    with pytest.raises(TypeError, match="PerformanceDrift"):
        with_performance(report, {"pvalue": 0.01})
