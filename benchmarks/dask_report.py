"""Tables of ``bench_dask.py``: per size (fit phases, branch tasks, the model on disk, the
phases after the fit with their memory), and the summary across sizes.
"""

from __future__ import annotations

from typing import Any

from dask.utils import format_bytes

from benchmarks.common import print_table, ratio
from benchmarks.dask_probes import GB

TRUNK_RATIO_TARGET = 3.0
CRITICAL_RATIO_TARGET = 1.5
#: The issue's target for a compact Mondrian model.
BYTES_PER_ROW_TREE_TARGET = 40.0
#: The phases reported per size, and the memory-watch phases each covers.
PHASES = (("fit", "fit:"), ("save", "save"), ("predict", "predict"), ("evaluate", "evaluate"))


def _gb(value: float | None) -> float | None:
    return None if value is None else value / GB


def _label(rows: int) -> str:
    return f"{rows / 1e6:g}M" if rows >= 1_000_000 else f"{rows / 1e3:g}k"


def phase_memory(r: dict[str, Any], prefix: str) -> dict[str, int | None]:
    """Peak RSS of one worker and of the driver over the watch phases named ``prefix``..."""
    peaks = r.get("memory", {}).get("phase_peaks_bytes", {})
    hit = [p for name, p in peaks.items() if name == prefix or
           (prefix.endswith(":") and name.startswith(prefix))]
    if not hit:
        return {"worker_max": None, "driver": None}
    return {"worker_max": max(p["worker_max"] for p in hit),
            "driver": max(p["driver"] for p in hit)}


def phase_rows(r: dict[str, Any]) -> list[dict[str, Any]]:
    """Seconds, rows/s and peak memory of fit, save, predict and evaluate."""
    out = []
    for name, prefix in PHASES:
        phase = r.get(name if name != "save" else "model")
        mem = phase_memory(r, prefix)
        out.append({"phase": name,
                    "seconds": phase.get("seconds") if phase else None,
                    "rows_per_second": phase.get("rows_per_second") if phase else None,
                    "worker_gb": _gb(mem["worker_max"]), "driver_gb": _gb(mem["driver"]),
                    "status": "ok" if phase else next(
                        (f"FAILED: {f['error'][:60]}" for f in r.get("failed", ())
                         if f["phase"] == name), "skipped")})
    return out


def print_fit(r: dict[str, Any]) -> None:
    fit, t = r["fit"], r["fit"]["timings"]
    total = t["fit"]
    largest = fit["largest_branch_task"]
    rows = [{"phase": name, "seconds": t.get(key), "share": ratio(t.get(key), total)}
            for name, key in (("schema", "schema"), ("summary pass", "summary"),
                              ("encode pass", "encode"), ("quantiles (bin edges)", "bin_edges"),
                              ("trunk", "trunk"))]
    for lv in fit["trunk_levels"]:
        rows.append({"phase": f"  level {lv['level']} ({lv['open_nodes']} open)",
                     "seconds": lv["seconds"], "share": ratio(lv["seconds"], total)})
    rows += [{"phase": "row moving", "seconds": t.get("route"),
              "share": ratio(t.get("route"), total)},
             {"phase": "branch fits", "seconds": t.get("branches"),
              "share": ratio(t.get("branches"), total)}]
    if largest:
        rows.append({"phase": f"  largest task (branch {largest['branch']}, "
                              f"{largest['rows']:,} rows)", "seconds": largest["seconds"]})
        rows.append({"phase": f"  all {fit['n_branches']} branch tasks (sum)",
                     "seconds": fit["branch_work_seconds"]})
    known = sum(t.get(k, 0.0) for k in ("schema", "summary", "encode", "bin_edges", "trunk",
                                          "route", "branches"))
    rows += [{"phase": "other (assembly)", "seconds": total - known,
              "share": ratio(total - known, total)},
             {"phase": "fit total", "seconds": total, "share": 1.0}]
    if "read_hist_pass" in r:
        rows.append({"phase": "read-and-histogram pass",
                     "seconds": r["read_hist_pass"]["median_seconds"]})
    print_table(f"{_label(r['rows'])} rows: fit phases ({fit['n_partitions']} partitions, "
                f"{fit['n_branches']} branches, {r['n_estimators']} trees per branch)",
                [("phase", "phase", "s"), ("seconds", "seconds", ".2f"),
                 ("share", "of fit", ".1%")], rows)
    print_table(f"{_label(r['rows'])} rows: branch tasks", [
        ("branch", "branch", "d"), ("rows", "rows", ",d"), ("seconds", "seconds", ".2f"),
        ("worker", "worker", "s")], fit["branch_tasks"])
    if largest:
        print(f"  branch tasks ran {min(b['start'] for b in fit['branch_tasks']):.2f}s .. "
              f"{max(b['stop'] for b in fit['branch_tasks']):.2f}s into the fit; fit returned "
              f"{fit['after_last_branch_seconds']:.2f}s after the last one (gathering the "
              "fitted branches to the driver, assembly)")
    tg = r.get("targets")
    if tg:
        print(f"  trunk / read-and-histogram pass = {tg['trunk_seconds']:.2f} / "
              f"{tg['read_hist_pass_seconds']:.2f} = {tg['trunk_over_pass']:.2f}x "
              f"(target <= {TRUNK_RATIO_TARGET:g}x; with quantiles "
              f"{tg['trunk_and_quantiles_over_pass']:.2f}x)")
        print(f"  fit / critical path = {total:.2f} / {tg['critical_path_seconds']:.2f} = "
              f"{tg['fit_over_critical_path']:.2f}x (target <= {CRITICAL_RATIO_TARGET:g}x); "
              f"/ two-worker bound {tg['two_worker_bound_seconds']:.2f} = "
              f"{tg['fit_over_two_worker_bound']:.2f}x")


def print_size(r: dict[str, Any]) -> None:
    """Every table of one size (what the size got to, when a phase failed)."""
    if "fit" in r:
        print_fit(r)
    m = r.get("model")
    if m:
        print(f"  model ({'compact' if m['compact'] else 'full'}, format "
              f"{m['format_version']}): {format_bytes(m['bytes_on_disk'])} on disk, "
              f"{m['bytes_per_row_per_tree']:.1f} bytes per row per tree (target <= "
              f"{m['bytes_per_row_per_tree_target']:g} compact), {m['files']} files, "
              f"{m['n_shards']} shards, largest {format_bytes(m['largest_shard_bytes'] or 0)}, "
              f"head {format_bytes(m['head_bytes'] or 0)}")
    d = r.get("drop")
    if d:
        print(f"  driver RSS when the model was dropped: "
              f"{format_bytes(d['driver_rss_before_bytes'] or 0)} -> "
              f"{format_bytes(d['driver_rss_after_bytes'] or 0)}"
              + (f" (still referenced: {d['still_referenced']})" if d["still_referenced"]
                 else ""))
    if "predict" in r:
        p = r["predict"]
        print(f"  predict: strategy {p['strategy_used']} (choose_strategy: "
              f"{p['strategy_chosen']}); {p['compute_seconds']:.1f}s of task compute in "
              f"{p['seconds']:.1f}s wall; shard cache peak per worker "
              + ", ".join(format_bytes(v) for v in p["worker_cache_peak_bytes"].values()))
    if "evaluate" in r:
        e = r["evaluate"]
        cover = ", ".join(f"{float(z):.0%}: {o:.3f}" for z, o in e["coverage"].items()
                          if round(float(z), 2) in (0.5, 0.9))
        print(f"  evaluate: RMSE {e['rmse']:.4f}, NLPD {e['nlpd']:.4f}, coverage {cover}, "
              f"max |calibration gap| {e['max_calibration_gap']:.3f}")
    print_table(f"{_label(r['rows'])} rows: phases (peak RSS: sampled and kernel high-water "
                "mark)", [
        ("phase", "phase", "s"), ("seconds", "seconds", ".1f"),
        ("rows_per_second", "rows/s", ",.0f"), ("worker_gb", "one worker GB", ".2f"),
        ("driver_gb", "driver GB", ".2f"), ("status", "status", "s")], phase_rows(r))
    mem, w = r.get("memory"), r.get("workers")
    if mem and w:
        probes = [r[k] for k in ("cpu_probe_start", "cpu_probe_end") if k in r]
        print(f"\n  effective cores for the {w['expected']} workers (CPU probe, start / end): "
              + " / ".join(f"{p['effective_cores']:.2f}" for p in probes)
              + f"; load average {r['loadavg_start'][0]:.2f} / {r['loadavg_end'][0]:.2f}")
        peak = mem["peak_rss_worker_bytes"]
        print(f"  peak worker RSS {format_bytes(peak) if peak else '-'} of "
              f"{format_bytes(mem['limit_per_worker_bytes'])}; spilled to disk "
              f"{format_bytes(mem['spilled_to_disk_bytes'])}; workers alive "
              f"{w['alive_at_end']}/{w['expected']}, processes seen {w['processes_seen']}, "
              f"lost per phase {w['lost_per_phase'] or 'none'}")
        print_table(f"{_label(r['rows'])} rows: peak RSS per watch phase (sampled every "
                    f"{mem['interval_seconds']:g}s, or the kernel's high-water mark)", [
            ("phase", "phase", "s"), ("worker_max", "one worker GB", ".2f"),
            ("workers_total", "all workers GB", ".2f"), ("driver", "driver GB", ".2f")],
            [{"phase": k, **{f: _gb(v) for f, v in p.items()}}
             for k, p in mem["phase_peaks_bytes"].items()])
    for f in r.get("failed", ()):
        print(f"  FAILED in {f['phase']}: {f['error']}")
    if "local" in r:
        loc = r["local"]
        print_table(f"{_label(r['rows'])} rows: Dask ({r['workers']['expected']} workers) vs "
                    "single-process EBF (1 thread)", [
            ("what", "", "s"), ("dask", "dask s", ".2f"), ("local", "local s", ".2f"),
            ("ratio", "dask/local", ".2f")], [
            {"what": "fit", "dask": r["fit"]["timings"]["fit"], "local": loc["fit_seconds"],
             "ratio": loc["dask_over_local_fit"]},
            {"what": "predict", "dask": r["predict"]["seconds"],
             "local": loc["predict_seconds"], "ratio": loc["dask_over_local_predict"]}])
        print(f"  predictions identical: sample of {loc['sample_rows']:,} rows "
              f"{loc['sample_identical']}, all rows {loc['all_rows_identical']} (max |diff| "
              f"{loc['max_abs_difference']:.3g}); same trunk {loc['same_trunk']}, same branch "
              f"sizes {loc['same_branch_sizes']}")


def summary_rows(results: dict[str, dict]) -> list[dict[str, Any]]:
    """One row per size: the model, the rows/s and peak memory of every phase."""
    rows = []
    for r in results.values():
        m, w = r.get("model") or {}, r.get("workers") or {}
        row: dict[str, Any] = {
            "rows": _label(r["rows"]), "trees": r["n_estimators"],
            "branches": (r.get("fit") or {}).get("n_branches"),
            "b_row_tree": m.get("bytes_per_row_per_tree"), "files": m.get("files"),
            "shard_mb": None if m.get("largest_shard_bytes") is None
            else m["largest_shard_bytes"] / 1e6,
            "strategy": (r.get("predict") or {}).get("strategy_used"),
            "rmse": (r.get("evaluate") or {}).get("rmse"),
            "nlpd": (r.get("evaluate") or {}).get("nlpd"),
            "died": w.get("died"),
            "failed": ",".join(f["phase"] for f in r.get("failed", ())) or "-",
        }
        for p in phase_rows(r):
            row[f"{p['phase']}_rps"] = p["rows_per_second"]
            row[f"{p['phase']}_w"] = p["worker_gb"]
            row[f"{p['phase']}_d"] = p["driver_gb"]
        rows.append(row)
    return rows


def print_summary(rows: list[dict[str, Any]]) -> None:
    print_table(f"summary: the model (target <= {BYTES_PER_ROW_TREE_TARGET:g} bytes per row "
                "per tree compact, files O(branches)) and the evaluation", [
        ("rows", "rows", "s"), ("trees", "trees", "d"), ("branches", "branches", "d"),
        ("b_row_tree", "B/row/tree", ".1f"), ("files", "files", "d"),
        ("shard_mb", "largest shard MB", ".1f"), ("strategy", "strategy", "s"),
        ("rmse", "RMSE", ".4f"), ("nlpd", "NLPD", ".4f"), ("died", "workers died", "d"),
        ("failed", "failed", "s")], rows)
    cols = [("rows", "rows", "s")]
    for name, _ in PHASES:
        cols += [(f"{name}_rps", f"{name} rows/s", ",.0f"),
                 (f"{name}_w", f"{name} worker GB", ".2f"),
                 (f"{name}_d", f"{name} driver GB", ".2f")]
    print_table("summary: rows/s and peak RSS (one worker, the driver) per phase", cols, rows)
