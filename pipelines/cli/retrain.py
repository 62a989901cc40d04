"""``ebf retrain REGISTRY NEW_DATA``: the scheduled retraining job
(:mod:`pipelines.registry.retrain`).

Exit status: 0 when the challenger is promoted (or version 1 is trained), 10 when the
champion is kept, the statuses of :func:`pipelines.cli.main` on failure, and 3 when the
version was written but its MLflow run (``--mlflow-uri``) could not be logged. A re-run with
the same inputs reports the version it made and exits as that run did; with
``--mlflow-uri`` it logs the version's run if no finished run holds it yet.
"""

from __future__ import annotations

import argparse
from typing import Any

from .arguments import add_training_arguments, fraction, non_negative_float, train_options
from .output import Output, add_json_flag, check_outputs, print_result
from .session import finish_job_parser, job
from .tracking import (
    add_tracking_arguments,
    register,
    track,
    tracker,
    tracking_line,
    tracking_status,
)

__all__ = ["add_retrain_parser"]


def add_retrain_parser(sub: argparse._SubParsersAction, data_help: str) -> None:
    """Add ``ebf retrain`` to the subcommands ``sub``."""
    from pipelines.registry.retrain import (
        DEFAULT_HOLDOUT,
        DEFAULT_PERFORMANCE_TOLERANCE,
        DEFAULT_TOLERANCES,
        EXIT_KEPT,
    )

    rt = sub.add_parser(
        "retrain", help="retrain a registry's model on new data: update or refit, gate, version",
        description=(
            "Retrain the model of REGISTRY on NEW_DATA. An empty registry gets version 1 "
            "(the training options below apply to it). Otherwise the current version is "
            "loaded, the trunk-drift check (eq. 11 per stored split) decides between extending "
            "its branches online (Mondrian branches, --branch mondrian; the others are always "
            "refit) and a refit, and the challenger is compared with the "
            "champion on the holdout (RMSE, NLPD, central and one-sided calibration gaps). A "
            "new version is written either way, with its metrics, decision and lineage; it "
            "becomes current only if it is promoted. Exit status 0: promoted or version 1; "
            f"{EXIT_KEPT}: champion kept."
        ),
    )
    rt.add_argument("registry", metavar="REGISTRY", help="registry root (path or fsspec URL)")
    rt.add_argument("data", metavar="NEW_DATA", help=data_help)
    rt.add_argument("--name", default="ebf", help="model name in the registry (default: ebf)")
    gate = rt.add_mutually_exclusive_group()
    gate.add_argument("--holdout", type=fraction(False), default=DEFAULT_HOLDOUT, metavar="F",
                      help="most recent share of NEW_DATA held out of training to compare "
                      f"champion and challenger (default: {DEFAULT_HOLDOUT})")
    gate.add_argument("--holdout-data", metavar="PATH",
                      help="a separate labelled dataset for the comparison instead")
    rt.add_argument("--target", metavar="COL", help="target column (version 1; later versions "
                    "use the recorded one)")
    rt.add_argument("--drift-threshold", type=fraction(False), default=None, metavar="P",
                    help="refit when a stored split holds with probability below P (or the "
                    "holdout score worsens), Holm-corrected for the number of tests: P is the "
                    "chance of a false alarm on a stationary window (default: "
                    "ebf.diagnostics._drift.DEFAULT_THRESHOLD, 0.05)")
    rt.add_argument("--drift-correction", choices=("holm", "bonferroni", "none"),
                    default="holm", help="how the splits and the holdout score are tested "
                    "together: Holm's step-down (default) or Bonferroni hold the chance of any "
                    "false alarm at the threshold; none tests each at it")
    rt.add_argument("--performance-drift", choices=("on", "off"), default="on",
                    help="also refit when the champion's holdout NLPD (log loss) is worse than "
                    "on its own holdout when it was made, tested in the same family as the "
                    "splits (default: on)")
    rt.add_argument("--performance-tolerance", type=non_negative_float, metavar="X",
                    default=DEFAULT_PERFORMANCE_TOLERANCE, help="a worsening of the holdout "
                    "score (nats per row) that does not count (default: "
                    f"{DEFAULT_PERFORMANCE_TOLERANCE})")
    rt.add_argument("--refit-on", choices=("all", "window"), default="all",
                    help="data of a refit: everything the model has seen plus NEW_DATA, or "
                    "NEW_DATA alone (default: all)")
    from basics.scores import SCORES

    for name, tol in DEFAULT_TOLERANCES.items():
        score = SCORES[name]  # the direction that is worse, and whether it is relative
        what = ("relative " if score.relative else "") + (
            "decrease" if score.better == "higher" else "increase")
        rt.add_argument(f"--tolerance-{name.replace('_', '-')}", dest=f"tol_{name}",
                        type=non_negative_float, default=tol, metavar="X",
                        help=f"promotion tolerance: {what} of {name} (default: {tol})")
    add_training_arguments(rt)
    add_json_flag(rt, "the version made: number, decision, action, its model's URL and its "
                  "whole record")
    add_tracking_arguments(rt, register=True)
    finish_job_parser(rt, _cmd_retrain)


def _cmd_retrain(args: argparse.Namespace) -> int:
    from ebf.diagnostics import DEFAULT_THRESHOLD
    from pipelines.cli.arguments import columns
    from pipelines.registry.retrain import DEFAULT_TOLERANCES, retrain
    from pipelines.registry.store import Registry
    from pipelines.tracking import retrain_run

    options = train_options(args)
    tolerances = {k: getattr(args, f"tol_{k}") for k in DEFAULT_TOLERANCES}
    run = {"holdout": None if args.holdout_data else args.holdout,
           "drift_threshold": DEFAULT_THRESHOLD if args.drift_threshold is None
           else args.drift_threshold, "drift_correction": args.drift_correction,
           "performance_drift": args.performance_drift == "on",
           "performance_tolerance": args.performance_tolerance, "refit_on": args.refit_on}
    registry = Registry(args.registry, name=args.name)
    written = check_outputs([Output("REGISTRY", registry.url, "registry", "the model registry")],
                            {"the new data": args.data, "the holdout data": args.holdout_data})
    where = tracker(args, written)  # an MLflow file store overlaps none of them
    with job(args) as (client, bars):
        res = retrain(
            args.registry, args.data, name=args.name, target=args.target,
            features=columns(args.features), holdout=run["holdout"],
            holdout_data=args.holdout_data, train_options=options,
            drift_threshold=run["drift_threshold"], tolerances=tolerances,
            refit_on=args.refit_on, drift_correction=args.drift_correction,
            performance_drift=run["performance_drift"],
            performance_tolerance=args.performance_tolerance, client=client, progress=bars)
    body = {"version": res.version, "decision": res.decision, "action": res.action,
            "reused": res.reused, "model_url": registry.model_path(res.version),
            "record": res.record}
    # the version is written: a tracking failure loses no model
    error = track(where, lambda summary: retrain_run(
        summary, registry=registry.url, options={**run, "tolerance": tolerances}),
        "retraining", body)
    error = error or register(where, args.mlflow_register, body,
                              res.decision != "kept" and registry.current() == res.version,
                              registry.storage_options)
    if res.reused:
        print_result(args, "retraining", body, "\n".join([
            f"version {res.version} was made from the same inputs ({res.decision}, "
            f"{res.action}); nothing to do", *tracking_line(body)]))
    else:
        print_result(args, "retraining", body, _report(res, body))
    return tracking_status(args, error, body["model_url"], res.exit_code)


def _report(res: Any, body: dict) -> str:
    """The text report of a new version."""
    rec = res.record
    lines = [f"version {res.version}: {res.action}, {res.decision}",
             f"  why: {rec.get('reason')}"]
    metrics = rec.get("metrics") or {}
    for who in ("champion", "challenger"):
        if metrics.get(who):
            lines.append(f"  {who:10s} " + "  ".join(f"{k} {v:.4g}"
                                                      for k, v in metrics[who].items()))
    checks = (rec.get("gate") or {}).get("checks") or {}
    failed = [k for k, c in checks.items() if not c["ok"]]
    if failed:
        lines.append("  gate failed on " + ", ".join(
            f"{k} ({checks[k]['challenger']:.4g} > limit {checks[k]['limit']:.4g})"
            if k != "accuracy" else f"{k} ({checks[k]['challenger']:.4g} < limit "
            f"{checks[k]['limit']:.4g})" for k in failed))
    if rec.get("drift"):
        from ebf.diagnostics import drift_summary

        lines.append(f"  drift check: {drift_summary(rec['drift'])}")
    lines += tracking_line(body)  # machines read --json: one object, nothing else
    return "\n".join(lines)
