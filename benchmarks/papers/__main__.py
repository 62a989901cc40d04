"""``python -m benchmarks.papers --items PATTERN ... --budget smoke|quick|full``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import all_causes, all_items
from .check_history import load as load_history
from .core import BUDGETS, RESULTS, recheck_item, run_item, select
from .report import write_report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.papers", description=__doc__)
    parser.add_argument("--items", nargs="+", default=["*"],
                        help="item keys or shell patterns (default: every item)")
    parser.add_argument("--budget", choices=BUDGETS, default="quick")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS,
                        help="folder of the item JSONs and REPRODUCTION.md")
    parser.add_argument("--list", action="store_true", help="list the items and stop")
    parser.add_argument("--recheck", action="store_true",
                        help="re-derive the verdicts of the items from their stored JSONs "
                             "under the current checks (no run), then write the report")
    parser.add_argument("--report", action="store_true",
                        help="only write REPRODUCTION.md from the stored JSONs")
    args = parser.parse_args(argv)
    items = all_items()
    if args.list:
        for it in items:
            print(f"{it.key:28s} {it.paper}, {it.where}: {it.title}")
        return 0
    for it in select(items, args.items) if args.recheck else []:
        try:
            rec = recheck_item(it, args.out)
        except (KeyError, TypeError, ValueError) as exc:  # JSON turned its int keys to text
            print(f"{it.key}: not re-derived from its JSON ({type(exc).__name__}: {exc})")
            continue
        if rec is not None:
            print(f"{it.key}: claim {'holds' if rec['holds'] else 'does NOT hold'}: "
                  f"{rec['detail']}", flush=True)
    for it in [] if args.recheck or args.report else select(items, args.items):
        rec = run_item(it, args.budget, args.seed, args.out)
        status = "holds" if rec["holds"] else "does NOT hold"
        print(f"{it.key}: {rec['headline']} (paper {it.paper_headline}); claim {status}: "
              f"{rec['detail']} [{rec['seconds']:.1f} s]", flush=True)
    print(f"wrote {write_report(items, args.out, all_causes(), load_history())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
