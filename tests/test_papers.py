"""The paper items: each runs at the ``smoke`` budget, its claim is evaluated and its JSON is
well formed (not the paper's number: smoke sizes are tiny); the report lists every item."""

from __future__ import annotations

import dataclasses
import json

import pytest

from benchmarks.papers import all_items
from benchmarks.papers.core import Item, Verdict, run_item, select
from benchmarks.papers.report import render, write_report

ITEMS = all_items()
FIELDS = {"key", "paper", "where", "title", "paper_numbers", "paper_headline", "data",
          "substitutes", "metric", "claim", "tolerance", "budget", "seed", "command", "ours",
          "headline", "holds", "detail", "ratio", "error", "seconds", "machine", "versions"}


def _toy(key: str, fail: bool = False) -> Item:
    def run(budget, seed, out_dir):
        if fail:
            raise RuntimeError("broken on purpose")
        return {"rmse": 1.0 + seed}

    return Item(key=key, paper="A (2015)", where="Table 9", title="toy",
                paper_numbers={"rmse": 1.0}, paper_headline="RMSE 1.0", data="none",
                metric="RMSE", claim="RMSE within 10% of the paper's.", tolerance="10%",
                run=run, check=lambda ours: Verdict(abs(ours["rmse"] - 1) <= 0.1,
                                                    f"RMSE {ours['rmse']:.2f}", ours["rmse"]),
                headline=lambda ours: f"RMSE {ours['rmse']:.2f}")


def test_records_and_report_from_toy_items(tmp_path):
    good, bad, broken = _toy("a.good"), _toy("a.bad"), _toy("a.broken", fail=True)
    assert run_item(good, "smoke", 0, tmp_path)["holds"]
    assert not run_item(bad, "smoke", 1, tmp_path)["holds"]
    rec = run_item(broken, "smoke", 0, tmp_path)
    assert not rec["holds"] and rec["detail"] == "RuntimeError: broken on purpose"
    for key in ("a.good", "a.bad", "a.broken"):
        assert set(json.loads((tmp_path / f"{key}.json").read_text())) == FIELDS
    page = write_report([good, bad, broken, _toy("a.later")], tmp_path,
                        {"a.bad": "the toy's seed"}).read_text()
    assert "**1 of 4 claims hold** (3 of 4 items run)" in page
    assert "- **a.bad** (RMSE within 10% of the paper's.): the toy's seed" in page
    assert "cause not yet written" in page  # a.broken has none
    assert "| a.later: Table 9 | RMSE 1.0 | not run |" in page
    assert select([good, bad], ["a.g*"]) == [good]
    with pytest.raises(SystemExit, match="no item matches"):
        select([good], ["b.*"])


def test_item_keys_are_unique_and_documented():
    assert len({it.key for it in ITEMS}) == len(ITEMS)
    for it in ITEMS:
        assert it.key.split(".")[0] in {"taddy", "mf", "kernel", "smc", "bart", "mfc"}, it.key
        assert it.paper_numbers and it.claim.endswith(".") and it.data and it.tolerance


@pytest.mark.timeout(900)
@pytest.mark.parametrize("item", ITEMS, ids=lambda it: it.key)
def test_every_item_runs_at_the_smoke_budget(item, tmp_path):
    rec = run_item(item, "smoke", 0, tmp_path)
    assert rec["error"] is None, rec["detail"] + "\n" + "\n".join(rec["error"] or [])
    assert set(rec) == FIELDS and isinstance(rec["holds"], bool) and rec["detail"]
    json.dumps(rec)
    for fig in (rec["ours"] or {}).get("figures", []):
        assert (tmp_path / fig).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", fig
    assert render(ITEMS, {item.key: rec})


def test_check_history_column(tmp_path):
    from benchmarks.papers.check_history import check_at

    now = check_at("HEAD", "taddy.fig2")
    assert now and "def check_fig2" in now["check"] and now["tolerance"]
    assert check_at("HEAD", "no.such.item") is None
    item = _toy("a.good")
    run_item(item, "smoke", 0, tmp_path)
    change = {"commit": "0123456789", "date": "2026-01-02T00:00:00+00:00", "subject": "s",
              "after_first_run": True, "what": ["tolerance"], "before": {}, "after": {}}
    history = {"a.good": {"first_run": {"commit": "f", "date": "d"}, "changes": [change]}}
    page = write_report([item], tmp_path, history=history).read_text()
    assert "| yes: 0123456 (2026-01-02: tolerance) |" in page
    change["after_first_run"] = False
    page = write_report([item], tmp_path, history=history).read_text()
    assert "| no (changed before it: 0123456) |" in page


def test_recheck_keeps_the_run_and_its_first_verdict(tmp_path):
    from benchmarks.papers.core import recheck_item

    loose = _toy("a.toy")
    run_item(loose, "smoke", 0, tmp_path)
    first = json.loads((tmp_path / "a.toy.json").read_text())
    strict = dataclasses.replace(loose, tolerance="0%",
                                 check=lambda ours: Verdict(False, "strict", None))
    rec = recheck_item(strict, tmp_path)
    assert not rec["holds"] and rec["rechecked"] == {"holds_before": True}
    assert rec["ours"] == first["ours"] and rec["seconds"] == first["seconds"]
    assert recheck_item(loose, tmp_path)["rechecked"] == {"holds_before": True}
    assert recheck_item(_toy("a.none"), tmp_path) is None
