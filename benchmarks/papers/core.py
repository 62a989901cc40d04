"""What a paper item is, how it runs and what it leaves: one JSON per item.

An :class:`Item` is one table, figure or claim of a source paper. It declares the paper's
numbers (literal, with where they are printed), the data we run it on (every substitute
named), the metric, and the paper's claim as a statement a function can check on our
numbers within a stated tolerance. Running an item at a budget gives a JSON record
(:func:`run_item`) from which ``REPRODUCTION.md`` is made (:mod:`benchmarks.papers.report`).
"""

from __future__ import annotations

import fnmatch
import json
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import machine_info, versions, write_json

#: ``smoke`` checks an item runs (seconds, tiny sizes: its claim is evaluated, not expected
#: to hold); ``quick`` runs every item within an hour in total on 2 cores; ``full`` is the
#: committed run, at the papers' sizes where this machine allows.
BUDGETS = ("smoke", "quick", "full")

RESULTS = Path(__file__).resolve().parents[1] / "results" / "papers"


@dataclass(frozen=True)
class Verdict:
    """The claim checked on our numbers: ``holds`` and one line of what was compared."""

    holds: bool
    detail: str
    ratio: float | None = None  # ours / paper of the item's headline number, if one


@dataclass(frozen=True)
class Item:
    """One table, figure or claim of a paper, runnable at a budget.

    ``run(budget, seed, out_dir)`` returns our numbers (a JSON-able dict; it may draw a
    figure into ``out_dir`` and name it under ``"figures"``); ``check(ours)`` evaluates the
    claim on them; ``headline(ours)`` is the short "ours" cell of the table.
    """

    key: str
    paper: str
    where: str
    title: str
    paper_numbers: Mapping[str, Any]
    paper_headline: str
    data: str
    metric: str
    claim: str
    tolerance: str
    run: Callable[[str, int, Path], dict]
    check: Callable[[dict], Verdict]
    headline: Callable[[dict], str]
    substitutes: tuple[str, ...] = field(default_factory=tuple)
    #: Why our analogue differs from the paper's setup so that the claim cannot hold as
    #: written (empty: it can); a failing check then reads "differs", never "holds".
    differs: str = ""

    def command(self, budget: str = "quick") -> str:
        return f"python -m benchmarks.papers --items {self.key} --budget {budget}"


def select(items: Iterable[Item], patterns: Iterable[str]) -> list[Item]:
    """Items whose key matches any of the shell-style ``patterns`` (``taddy.*``), in order."""
    patterns = list(patterns)
    chosen = [it for it in items if any(fnmatch.fnmatchcase(it.key, p) for p in patterns)]
    if not chosen:
        keys = ", ".join(it.key for it in items)
        raise SystemExit(f"no item matches {patterns}; the items are: {keys}")
    return chosen


def run_item(item: Item, budget: str, seed: int = 0, out_dir: Path = RESULTS) -> dict:
    """Run ``item`` at ``budget``, check its claim and write ``out_dir/<key>.json``.

    An item that raises is recorded as failed (with the last lines of the traceback) rather
    than stopping the other items; its claim does not hold.
    """
    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {BUDGETS}, got {budget!r}")
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    record: dict[str, Any] = {
        "key": item.key, "paper": item.paper, "where": item.where, "title": item.title,
        "paper_numbers": dict(item.paper_numbers), "paper_headline": item.paper_headline,
        "data": item.data, "substitutes": list(item.substitutes), "metric": item.metric,
        "claim": item.claim, "tolerance": item.tolerance, "budget": budget, "seed": seed,
        "command": item.command(budget),
    }
    try:
        ours = item.run(budget, seed, out_dir)
        verdict = item.check(ours)
        record.update(ours=ours, headline=item.headline(ours), holds=bool(verdict.holds),
                      detail=verdict.detail, ratio=verdict.ratio, error=None)
    except Exception as exc:  # noqa: BLE001 - recorded, the other items still run
        tail = traceback.format_exc().strip().splitlines()[-6:]
        record.update(ours=None, headline="failed", holds=False, ratio=None,
                      detail=f"{type(exc).__name__}: {exc}", error=tail)
    record.update(seconds=round(time.perf_counter() - start, 2), machine=machine_info(),
                  versions=versions())
    write_json(record, out_dir / f"{item.key}.json")
    return record


def recheck_item(item: Item, out_dir: Path = RESULTS) -> dict | None:
    """Re-derive the verdict of ``out_dir/<key>.json`` from its stored numbers, no rerun.

    The item's current claim, tolerance and check are applied to the record's ``ours``; when
    they change the record, it is marked ``rechecked`` with the verdict of its run
    (``{"holds_before": ...}``, kept over later rechecks). None when the item has no stored
    run with numbers.
    """
    path = out_dir / f"{item.key}.json"
    if not path.exists():
        return None
    record = json.loads(path.read_text())
    if record.get("ours") is None:
        return None
    verdict = item.check(record["ours"])
    new = {"claim": item.claim, "tolerance": item.tolerance, "holds": bool(verdict.holds),
           "detail": verdict.detail, "ratio": verdict.ratio,
           "headline": item.headline(record["ours"])}
    if any(record.get(k) != v for k, v in new.items()):
        before = record.get("rechecked") or {"holds_before": record.get("holds")}
        record.update(new, rechecked=before)
        write_json(record, path)
    return record


def relative(ours: float, paper: float) -> float:
    """``ours / paper`` (the ratio column)."""
    return float(ours) / float(paper)


def percent_worse(value: float, best: float) -> float:
    """The papers' "% worse than best": ``100 (value - best) / best``."""
    return 100.0 * (float(value) - float(best)) / float(best)
