"""The summary table of a soak run (``tests/pipelines/test_soak.py``) as Markdown.

Usage: ``python benchmarks/soak_table.py SOAK.json OUT.md``, where ``SOAK.json`` is what
``EBF_SOAK_REPORT`` wrote (a run cut short has its runs and no summary: the table is made
from the runs). Writes jobs by command and exit status, by disturbance and outcome, the
seconds per command, and every violation of the exit-status contract.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path


def table(report: dict) -> str:
    """The Markdown summary of a soak report."""
    runs = report["runs"]
    summary = report.get("summary") or {}
    statuses = sorted({r["rc"] for r in runs})
    by_op: dict[str, Counter] = defaultdict(Counter)
    seconds: dict[str, list[float]] = defaultdict(list)
    for r in runs:
        by_op[r["op"]][r["rc"]] += 1
        seconds[r["op"]].append(r["seconds"])
    lines = [f"# Soak: {len(runs)} jobs", ""]
    if summary:
        lines += [f"Wall time {summary.get('minutes', '?')} min; {summary.get('versions')} "
                  f"registry versions at the end (every one verified, every file); "
                  f"{summary.get('predictions_compared')} completed predictions equal to the "
                  f"undisturbed prediction of their model, {summary.get('trains_compared')} "
                  f"completed trains with one model hash; temporaries left by SIGKILLed jobs: "
                  f"{summary.get('leftovers_of_sigkilled_jobs')}, other leftovers: "
                  f"{len(summary.get('leftovers') or [])}.", ""]
    lines += ["## Jobs by command and exit status", "",
              "| command | jobs | " + " | ".join(f"status {s}" for s in statuses)
              + " | median s | max s |",
              "|---|---:|" + "---:|" * len(statuses) + "---:|---:|"]
    for op in sorted(by_op):
        cells = " | ".join(str(by_op[op].get(s, 0)) for s in statuses)
        lines.append(f"| {op} | {sum(by_op[op].values())} | {cells} | "
                     f"{statistics.median(seconds[op]):.1f} | {max(seconds[op]):.1f} |")
    outcomes: dict[str, Counter] = defaultdict(Counter)
    for r in runs:
        outcome = ("committed" if r.get("committed") else "invalid output"
                   if r.get("committed") is False else "nothing written")
        outcomes[r["disturbance"] or "none"][f"{outcome}, status {r['rc']}"] += 1
    lines += ["", "## Disturbances and outcomes", "", "| disturbance | jobs | outcomes |",
              "|---|---:|---|"]
    for what in sorted(outcomes):
        detail = ", ".join(f"{k}: {n}" for k, n in sorted(outcomes[what].items()))
        lines.append(f"| {what} | {sum(outcomes[what].values())} | {detail} |")
    bad = [r for r in runs if r.get("violations")]
    lines += ["", f"## Violations of the exit-status contract: {len(bad)}", ""]
    lines += [f"- `{' '.join(r['argv'][:2])}` status {r['rc']} ({r['disturbance']} at "
              f"{r['at']} s): {'; '.join(r['violations'])}" for r in bad]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    Path(sys.argv[2]).write_text(table(json.loads(Path(sys.argv[1]).read_text())))
