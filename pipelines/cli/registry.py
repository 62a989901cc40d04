"""``ebf registry list|show|promote|rollback|unlock``: the versions of a model registry.

The registry (:mod:`pipelines.registry.store`) is ``ROOT/models/NAME/v0001/`` ... with a
``current.json`` pointer; ``ebf retrain`` writes it, ``ebf predict`` and ``ebf evaluate``
read ``REGISTRY[@version]``. These subcommands read records and move the pointer only: no
Dask cluster. They follow the conventions of :mod:`pipelines.cli` (one line on stderr per
failure; exit 1 for a broken or busy registry, 2 for a version or registry that is not there).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from .failures import UsageError
from .output import add_json_flag, print_result
from .session import finish_job_parser, job

__all__ = ["format_versions"]

_REGISTRY_HELP = ("registry root (a path or fsspec URL holding models/NAME/) or ROOT/models/NAME; "
                  "a root must hold one model name unless --name is given")
_WIDTH = 40  # longest text cell printed from a record (records are untrusted input)
#: Longest metric name printed whole: ebf's own (``expected_calibration_error``) fit.
_METRIC_WIDTH = 32


def add_registry_parser(sub: argparse._SubParsersAction) -> None:
    rg = sub.add_parser(
        "registry", help="list, show, promote or roll back the versions of a model registry",
        description=(
            "A model registry holds the versions of a model (ROOT/models/NAME/v0001/ ..., each "
            "a saved model and its record) and a pointer to the current one, replaced "
            "atomically; ebf retrain writes it, ebf predict and ebf evaluate take "
            "REGISTRY[@version] wherever they take a model directory."
        ),
    )
    actions = rg.add_subparsers(dest="action", metavar="ACTION", required=True)
    ls = actions.add_parser(
        "list", help="one line per version: current, created, decision, parent, metrics",
        description="List the versions, newest last: * marks the current one.")
    ls.add_argument("registry", metavar="REGISTRY", help=_REGISTRY_HELP)
    add_json_flag(ls, "the registry, its current version and every version's record")
    sh = actions.add_parser(
        "show", help="a version's record as JSON (default: the current version)",
        description="Print the record of a version (version.json) as indented JSON.")
    sh.add_argument("registry", metavar="REGISTRY[@VERSION]",
                    help=_REGISTRY_HELP + "; @3, @v3 or @v0003 names a version")
    add_json_flag(sh, "the registry, the version's number and its record")
    pr = actions.add_parser(
        "promote", help="make a version the current one",
        description="Point the registry at VERSION (the previous current version is kept in "
        "the history, for rollback). Takes the registry's lock.")
    pr.add_argument("registry", metavar="REGISTRY@VERSION", help=_REGISTRY_HELP)
    rb = actions.add_parser(
        "rollback", help="point back to the previously current version",
        description="Point the registry back at the version that was current before the "
        "current one. Takes the registry's lock.")
    rb.add_argument("registry", metavar="REGISTRY", help=_REGISTRY_HELP)
    ul = actions.add_parser(
        "unlock", help="remove the lock a killed writer left",
        description="Remove the registry's writer lock if the process holding it no longer "
        "runs on this host (it was killed before it could release it). A lock whose holder "
        "still runs, or runs on another host, is kept: the error names the holder.")
    ul.add_argument("registry", metavar="REGISTRY", help=_REGISTRY_HELP)
    cp = actions.add_parser(
        "compare", help="score versions on the same data, in one pass (one table)",
        description="Score the versions (all by default) on one labelled dataset, on Dask: "
        "the data is read once and every version scored as ebf evaluate scores it, so the "
        "numbers compare (each version's recorded metrics come from its own holdout).")
    cp.add_argument("registry", metavar="REGISTRY", help=_REGISTRY_HELP)
    cp.add_argument("data", metavar="DATA", help="labelled Parquet data (path or fsspec URL)")
    cp.add_argument("--versions", type=int, nargs="+", metavar="V",
                    help="the versions to score (default: all)")
    cp.add_argument("--target", metavar="COL", help="the target (default: the recorded one)")
    add_json_flag(cp, "the registry, the data and every version's scores")
    for parser, handler in ((ls, _cmd_list), (sh, _cmd_show), (pr, _cmd_promote),
                            (rb, _cmd_rollback), (ul, _cmd_unlock), (cp, _cmd_compare)):
        parser.add_argument("--name", metavar="NAME",
                            help="the model name, for a root holding several")
        parser.set_defaults(handler=handler)
    finish_job_parser(cp, _cmd_compare)


def _text(value: Any, width: int = _WIDTH) -> str:
    """A record value as one printable cell (no control characters, bounded)."""
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    text = "".join(ch if ch.isprintable() else "?" for ch in str(value))
    return text if len(text) <= width else text[: width - 3] + "..."


def _version_cell(value: Any) -> str:
    return f"v{value:04d}" if type(value) is int and value >= 0 else _text(value)


def _row(version: int, record: dict, current: int | None) -> list[str]:
    lineage = record.get("lineage")
    parent = lineage.get("parent") if isinstance(lineage, dict) else None
    metrics = record.get("metrics")
    if isinstance(metrics, dict) and isinstance(metrics.get("challenger"), dict):
        metrics = metrics["challenger"]  # ebf retrain's record: the version's own scores
    shown = (" ".join(f"{_text(k, _METRIC_WIDTH)}={_text(v, 12)}"
                      for k, v in list(metrics.items())[:8])
             if isinstance(metrics, dict) else "")
    decision = record.get("decision")
    return ["*" if version == current else "", _version_cell(version),
            _text(record.get("created_utc", "")), "" if decision is None else _text(decision),
            "" if parent is None else _version_cell(parent), shown]


def format_versions(registry: Any) -> tuple[str, list[str]]:
    """The table of ``ebf registry list`` and the warnings about unreadable parts.

    Parameters
    ----------
    registry : pipelines.registry.store.Registry

    Returns
    -------
    (str, list of str)
        The table (a header line, then one line per version, oldest first) and one warning
        per record or pointer that cannot be read.
    """
    current, records, warnings = _listing(registry)
    versions = [v for v, _ in records]
    rows = [["", "version", "created_utc", "decision", "parent", "metrics"]]
    for version, record in records:
        if record is not None:
            rows.append(_row(version, record, current))
        else:
            rows.append(["*" if version == current else "", _version_cell(version),
                         "(unreadable record)", "", "", ""])
    state = f"current {_version_cell(current)}" if current is not None else "no current version"
    title = f"{registry.url}: {len(versions)} versions, {state}"
    if not versions:
        return title, warnings
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
             for r in rows]
    return "\n".join([title, *lines]), warnings


def _listing(registry: Any) -> tuple[int | None, list[tuple[int, dict | None]], list[str]]:
    """``(current version, [(version, record or None if unreadable)], warnings)``."""
    from pipelines.registry.store import RegistryError

    warnings = []
    try:
        current = registry.current()
    except RegistryError as exc:
        current = None
        warnings.append(str(exc))
    records: list[tuple[int, dict | None]] = []
    for version in registry.versions():
        try:
            records.append((version, registry.record(version)))
        except RegistryError as exc:
            warnings.append(str(exc))
            records.append((version, None))
    return current, records, warnings


def _whole_registry(args: argparse.Namespace, advice: str = "") -> Any:
    """The registry of a command that takes no version (``REGISTRY@N`` is a usage error)."""
    registry, version = _open(args)
    if version is not None:
        raise UsageError(f"ebf registry {args.action} takes a registry, not a version "
                         f"({args.registry}){'; ' + advice if advice else ''}")
    return registry


def _open(args: argparse.Namespace) -> tuple[Any, int | None]:
    from pipelines.registry.store import Registry

    return Registry.parse(args.registry, name=args.name)


def _cmd_list(args: argparse.Namespace) -> int:
    registry = _whole_registry(args, f"use ebf registry show {args.registry}")
    if args.json:
        current, records, warnings = _listing(registry)
        print_result(args, "registry", {
            "registry": registry.url, "current": current,
            "versions": [{"version": v, "record": r} for v, r in records]}, "")
    else:
        table, warnings = format_versions(registry)
        print(table)
    for warning in warnings:
        print(f"ebf registry list: warning: {warning}", file=sys.stderr)
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    registry, version = _open(args)
    number = registry.resolve(version)
    record = registry.record(number)
    print_result(args, "version", {"registry": registry.url, "version": number,
                                   "record": record}, json.dumps(record, indent=2))
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from pipelines.report.compare import compare, format_comparison_table
    from pipelines.report.metrics import result_to_json

    registry = _whole_registry(args, "name versions with --versions")
    known = registry.versions()  # one listing
    versions = args.versions or known
    if not versions:
        raise UsageError(f"{registry.url} has no version to compare")
    twice = sorted({v for v in versions if versions.count(v) > 1})
    if twice:
        raise UsageError(f"--versions names {', '.join(_version_cell(v) for v in twice)} "
                         "more than once; name each version once")
    missing = [v for v in versions if v not in known]
    if missing:
        raise UsageError(f"version(s) {missing} are not in {registry.url}; it has "
                         f"{sorted(known)}")
    models = [registry.verified_model(v) for v in versions]  # checked before the cluster
    with job(args) as (client, bars):
        results = compare(models, args.data, target=args.target, client=client,
                          progress=lambda done, total: bars("evaluate", done, total))
    names = [_version_cell(v) for v in versions]
    body = {"registry": registry.url, "data": args.data,
            "versions": [{"version": v, **{k: x for k, x in result_to_json(r).items()
                                           if k != "coverage"}}
                         for v, r in zip(versions, results, strict=True)]}
    print_result(args, "comparison", body,
                 f"{registry.url} on {args.data}\n" + format_comparison_table(names, results))
    return 0


def _cmd_promote(args: argparse.Namespace) -> int:
    registry, version = _open(args)
    if version is None:
        raise UsageError(f"name the version to promote: ebf registry promote "
                         f"{args.registry}@N (ebf registry list {args.registry} shows them)")
    before = _current_or_none(registry)
    registry.promote(version)
    was = f"was {_version_cell(before)}" if before is not None else "there was none"
    print(f"{registry.url}: current version {_version_cell(version)} ({was})")
    return 0


def _cmd_rollback(args: argparse.Namespace) -> int:
    registry = _whole_registry(args, "to pick a version use ebf registry promote")
    before = _current_or_none(registry)
    now = registry.rollback()
    print(f"{registry.url}: rolled back from {_version_cell(before)} to {_version_cell(now)}")
    return 0


def _cmd_unlock(args: argparse.Namespace) -> int:
    registry = _whole_registry(args)
    holder = registry.unlock()
    if holder is None:
        print(f"{registry.url}: not locked")
    else:
        print(f"{registry.url}: removed the stale lock of process {holder['pid']} on host "
              f"{holder['host']} (since {holder['started']} UTC; no longer running)")
    return 0


def _current_or_none(registry: Any) -> int | None:
    from pipelines.registry.store import RegistryError

    try:
        return registry.current()
    except RegistryError:
        return None
