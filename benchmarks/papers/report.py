"""``REPRODUCTION.md``: one row per item, made from the item JSONs of the results folder.

The table is regenerated from every ``<item>.json`` present (items not run yet are listed
as such), so a run of some items keeps the rows of the others.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from basics.atomic import write_text

from .core import RESULTS, Item

HEADER = """# The papers' headline results, side by side with ours

Made by `python -m benchmarks.papers` from the item records in this folder (one JSON per
item: the paper's numbers, ours, the claim and its check, the data, the machine). Each
row's command reruns it; `--budget full` is the committed run unless the budget column
says otherwise. A claim "holds" when the check written beside it passes within its
tolerance; where it does not, the cause is given under the table.
"""


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def load_records(out_dir: Path = RESULTS) -> dict[str, dict]:
    records = {}
    for path in sorted(out_dir.glob("*.json")):
        record = json.loads(path.read_text())
        if isinstance(record, dict) and "key" in record:
            records[record["key"]] = record
    return records


def summary(items: Sequence[Item], records: dict[str, dict]) -> tuple[int, int, int]:
    """``(claims that hold, items run, items)``."""
    run = [records[it.key] for it in items if it.key in records]
    return sum(bool(r.get("holds")) for r in run), len(run), len(items)


def render(items: Sequence[Item], records: dict[str, dict],
           causes: dict[str, str] | None = None) -> str:
    """The markdown page: summary, table, then the cause of every claim that fails."""
    holds, run, total = summary(items, records)
    lines = [HEADER, f"**{holds} of {total} claims hold** ({run} of {total} items run).", "",
             "| item | paper | ours | ratio | claim holds? | data | budget | command |",
             "|---|---|---|---|---|---|---|---|"]
    for it in items:
        rec = records.get(it.key)
        name = f"{it.key}: {it.where}"
        if rec is None:
            lines.append(f"| {_cell(name)} | {_cell(it.paper_headline)} | not run | | | "
                         f"{_cell(it.data)} | | `{it.command()}` |")
            continue
        ratio = "" if rec.get("ratio") is None else f"{rec['ratio']:.2f}"
        verdict = "yes" if rec.get("holds") else "**no**"
        figures = " ".join(f"[{Path(f).name}]({Path(f).name})"
                           for f in (rec.get("ours") or {}).get("figures", []))
        lines.append(
            f"| {_cell(name)} | {_cell(it.paper_headline)} | {_cell(rec.get('headline'))} "
            f"{figures} | {ratio} | {verdict}: {_cell(rec.get('detail'))} | {_cell(it.data)} "
            f"| {rec.get('budget')} | `{rec.get('command')}` |")
    failing = [it for it in items if it.key in records and not records[it.key].get("holds")]
    if failing:
        lines += ["", "## Where a claim does not hold", ""]
        for it in failing:
            cause = (causes or {}).get(it.key, "cause not yet written")
            lines.append(f"- **{it.key}** ({it.claim}): {cause}")
    noted = [it for it in items if it.key in records and records[it.key].get("holds")
             and it.key in (causes or {})]
    if noted:
        lines += ["", "## Notes on claims that hold", ""]
        lines += [f"- **{it.key}**: {causes[it.key]}" for it in noted]
    lines += ["", "## The claims", ""]
    for it in items:
        lines.append(f"- **{it.key}** ({it.paper}, {it.where}; metric {it.metric}): "
                     f"{it.claim} Tolerance: {it.tolerance}.")
    return "\n".join(lines) + "\n"


def write_report(items: Sequence[Item], out_dir: Path = RESULTS,
                 causes: dict[str, str] | None = None) -> Path:
    path = out_dir / "REPRODUCTION.md"
    write_text(path, render(items, load_records(out_dir), causes))
    return path
