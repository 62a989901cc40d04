"""The score records (basics.scores): partial sums of blocks add up to the sums of the whole,
every record's value equals the plain metric of basics.metrics, the gate follows each
record's direction."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from basics.metrics import (
    CALIBRATION_LEVELS,
    calibration_table,
    crps,
    crps_rows,
    interval_score,
    nlpd,
    one_sided_table,
    rmse,
)
from basics.mixture import GaussianMixture
from basics.scores import (
    SCORES,
    Layout,
    RegressionRows,
    finish,
    gate_check,
    partial_sums,
    quantile_levels,
    scores_of,
    values,
)


@pytest.fixture(scope="module")
def scored():
    rng = np.random.default_rng(3)
    n = 2000
    mean, std = rng.normal(size=n), rng.gamma(3.0, size=n) / 3
    y = mean + std * rng.standard_t(6, size=n)
    gm = GaussianMixture.from_moments(mean, std**2)
    levels = quantile_levels(scores_of("regression"))
    q = gm.quantile(np.asarray(levels))
    rows = RegressionRows(y=y, point=mean, logpdf=gm.logpdf(y), crps=crps_rows(gm, y),
                          pit=np.clip(gm.cdf(y), 0, 1),
                          quantiles={lv: q[:, j] for j, lv in enumerate(levels)})
    return y, gm, rows


def test_records_are_the_plain_metrics(scored):
    y, gm, rows = scored
    got = values(rows)
    assert set(got) == {s.name for s in scores_of("regression")}
    assert got["rmse"] == pytest.approx(rmse(y, gm.mean), rel=1e-12)
    assert got["nlpd"] == pytest.approx(nlpd(y, gm), rel=1e-12)
    assert got["crps"] == pytest.approx(crps(y, gm), rel=1e-12)
    assert got["interval_score_90"] == pytest.approx(interval_score(y, gm, 0.9), rel=1e-12)
    assert got["interval_score_50"] == pytest.approx(interval_score(y, gm, 0.5), rel=1e-12)
    gaps = calibration_table(y, gm, CALIBRATION_LEVELS)["observed_minus_nominal"]
    assert got["max_calibration_gap"] == pytest.approx(np.abs(gaps).max(), abs=1e-12)
    below = one_sided_table(y, gm)["observed_minus_nominal"]
    assert got["max_one_sided_gap"] == pytest.approx(np.abs(below).max(), abs=1e-12)
    assert abs(got["pit_distance"] - stats.kstest(rows.pit, "uniform").statistic) <= 1e-3
    assert values(rows._replace(logpdf=None, quantiles=None))["nlpd"] is None


def test_blocks_add_up_to_the_whole(scored):
    """Sums, counts and histograms: the partial sums of any split of the rows add up to those
    of all rows, so partitions and branches give the same value."""
    _, _, rows = scored
    cuts = [0, 7, 700, 701, 1500, 2000]
    for s in scores_of("regression"):
        whole = partial_sums(s, s.row(rows))
        parts = sum(partial_sums(s, s.row(RegressionRows(
            *(f[a:b] if isinstance(f, np.ndarray) else None if f is None else
              {k: v[a:b] for k, v in f.items()} for f in rows))))
            for a, b in zip(cuts[:-1], cuts[1:], strict=True))
        np.testing.assert_allclose(parts, whole, rtol=1e-12, err_msg=s.name)
        assert finish(s, parts, 2000) == pytest.approx(finish(s, whole, 2000), rel=1e-12)


def test_every_record_is_complete():
    for s in SCORES.values():
        assert s.better in ("lower", "higher") and s.unit in ("target", "nats", "fraction")
        assert s.task in ("regression", "classification") and format(1.0, s.fmt)
        assert all(0 < q < 1 for q in s.quantiles)


def test_the_gate_follows_the_records_direction():
    assert gate_check("nlpd", 1.0, 1.009, 0.01) == (1.01, True)
    assert gate_check("nlpd", 1.0, 1.011, 0.01)[1] is False
    assert gate_check("rmse", 10.0, 10.09, 0.01) == (pytest.approx(10.1), True)
    assert gate_check("accuracy", 0.9, 0.894, 0.005)[1] is False
    assert gate_check("accuracy", 0.9, 0.99, 0.005)[1] is True


def test_layout_names_its_slices():
    lay = Layout([("a", 2), ("b", 0), ("c", 1)])
    assert lay.size == 3 and lay.names == ["a", "b", "c"] and lay.index("c") == 2
    assert lay.pack({"c": 5.0}).tolist() == [0.0, 0.0, 5.0]
    with pytest.raises(ValueError, match="twice"):
        Layout([("a", 1), ("a", 2)])


def test_the_rps_record_is_scored_for_integer_targets_only(scored):
    from basics.discrete import mixture_rps

    y, gm, rows = scored
    whole = np.round(y)
    rps = mixture_rps(gm, whole)[:, 0]
    got = values(rows._replace(y=whole, rps=rps))
    assert got["rps"] == pytest.approx(rps.mean(), rel=1e-12)
    assert "rps" not in values(rows)
    assert [s.name for s in scores_of("regression", integer=True)] == [
        *(s.name for s in scores_of("regression")[:3]), "rps",
        *(s.name for s in scores_of("regression")[3:])]
    assert SCORES["rps"].discrete and SCORES["rps"].better == "lower"
