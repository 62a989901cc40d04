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
tolerance; where it does not, the cause is given under the table ("differs": our analogue
differs from the paper's setup, for the reason given there). The column "check changed after
first run" is read from git (`python -m benchmarks.papers.check_history` writes
`benchmarks/papers/check_history.json`): the commits after the item's first committed run
that changed its claim, tolerance or check function; a verdict "re-derived" was recomputed
from the stored numbers under the changed check, without a rerun.
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


def _changed(history: dict | None, record: dict) -> str:
    """The "check changed after first run" cell of an item's git history."""
    if history is None:
        return ""
    after = [c for c in history["changes"] if c["after_first_run"]]
    earlier = [c for c in history["changes"] if not c["after_first_run"]]
    cell = "; ".join(f"yes: {c['commit'][:7]} ({c['date'][:10]}: {', '.join(c['what'])})"
                     for c in after) or "no"
    if after and record.get("rechecked"):
        was = "yes" if record["rechecked"].get("holds_before") else "no"
        cell += f", verdict re-derived from the stored run (it was {was})"
    if earlier:
        cell += " (changed before it: " + ", ".join(c["commit"][:7] for c in earlier) + ")"
    return cell


def _verdict(item: Item, record: dict) -> str:
    if record.get("holds"):
        return "yes"
    return "**differs**" if item.differs else "**no**"


def render(items: Sequence[Item], records: dict[str, dict],
           causes: dict[str, str] | None = None,
           history: dict[str, dict] | None = None) -> str:
    """The markdown page: summary, table, then the cause of every claim that fails.

    ``history`` is item key -> its check's git history (``check_history.json``).
    """
    holds, run, total = summary(items, records)
    history = history or {}
    lines = [HEADER, f"**{holds} of {total} claims hold** ({run} of {total} items run).", "",
             "| item | paper | ours | ratio | claim holds? | check changed after first run "
             "| data | budget | command |",
             "|---|---|---|---|---|---|---|---|---|"]
    for it in items:
        rec = records.get(it.key)
        name = f"{it.key}: {it.where}"
        if rec is None:
            lines.append(f"| {_cell(name)} | {_cell(it.paper_headline)} | not run | | | | "
                         f"{_cell(it.data)} | | `{it.command()}` |")
            continue
        ratio = "" if rec.get("ratio") is None else f"{rec['ratio']:.2f}"
        verdict = _verdict(it, rec)
        figures = " ".join(f"[{Path(f).name}]({Path(f).name})"
                           for f in (rec.get("ours") or {}).get("figures", []))
        lines.append(
            f"| {_cell(name)} | {_cell(it.paper_headline)} | {_cell(rec.get('headline'))} "
            f"{figures} | {ratio} | {verdict}: {_cell(rec.get('detail'))} "
            f"| {_cell(_changed(history.get(it.key), rec))} | {_cell(it.data)} "
            f"| {rec.get('budget')} | `{rec.get('command')}` |")
    failing = [it for it in items if it.key in records and not records[it.key].get("holds")]
    if failing:
        lines += ["", "## Where a claim does not hold", ""]
        for it in failing:
            cause = (causes or {}).get(it.key, "cause not yet written")
            if it.differs:
                cause = f"differs: {it.differs} {cause}"
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
                 causes: dict[str, str] | None = None,
                 history: dict[str, dict] | None = None) -> Path:
    path = out_dir / "REPRODUCTION.md"
    write_text(path, render(items, load_records(out_dir), causes, history))
    return path
