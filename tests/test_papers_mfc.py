"""The thesis Ch. 5 items' own pieces: dynaTree's committed evidence is read per budget and
over the seeds it has, and the online-cost check tells N log N from N^2 on made-up costs."""

from __future__ import annotations

import json

import numpy as np

from benchmarks.papers.thesis_mf import DATASETS
from benchmarks.papers.thesis_mf_online import check_online_cost, dynatree_curves


def test_dynatree_evidence_is_averaged_over_the_seeds_and_refused_when_it_differs(tmp_path):
    path = tmp_path / "dynatree.json"
    assert "absent" in dynatree_curves("full", [0], path)["missing"]
    runs = {str(s): {ds: [{"batches": 1, "n": 10, "accuracy": 0.5 + s / 10, "seconds": 1.0}]
                     for ds in DATASETS} for s in (0, 1)}
    path.write_text(json.dumps({"budget": "full", "runs": runs, "versions": {},
                                "settings": {}}))
    got = dynatree_curves("full", [0, 1], path)
    assert got["curves"]["dna"] == [{"batches": 1, "fraction": 0.01, "accuracy": 0.55}]
    assert "not quick" in dynatree_curves("quick", [0, 1], path)["missing"]
    assert dynatree_curves("full", [0, 2], path)["seeds"] == [0]
    assert "missing" in dynatree_curves("full", [2, 3], path)


def _cost(power: float) -> dict:
    ns = [10**4, 10**5, 10**6]
    rows = [{"n": n, "seconds": n**power * 1e-6, "visits": n * np.log2(n) * power}
            for n in ns]
    per = [r["visits"] / (r["n"] * np.log2(r["n"])) for r in rows]
    logs = np.log(ns)
    stat = {"time_exponent": power, "visits_exponent": float(np.polyfit(
        logs, np.log([r["visits"] for r in rows]), 1)[0]),
        "visits_per_nlog2n": per, "visits_spread": max(per) / min(per)}
    return {"runs": {str(s): rows for s in range(5)}, "stats": {str(s): stat for s in range(5)},
            "seeds": list(range(5)), "trees": 1, "fit_from": 10**4}


def test_online_cost_check_accepts_n_log_n_and_refuses_a_quadratic_cost():
    assert check_online_cost(_cost(1.1)).holds
    assert not check_online_cost(_cost(2.0)).holds
