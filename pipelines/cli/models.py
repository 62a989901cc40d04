"""The model commands: ``ebf train``, ``ebf predict``, ``ebf evaluate``, ``ebf migrate-model``.

``ebf train`` builds its :class:`pipelines.options.TrainOptions` from the arguments
(:func:`pipelines.cli.arguments.train_options`, checked before any work) and runs
:func:`pipelines.train.train`; ``ebf predict`` runs :func:`pipelines.predict.predict_to_parquet`
and ``ebf evaluate`` :func:`pipelines.report.evaluate.evaluate`.
"""

from __future__ import annotations

import argparse
import json
import sys

from .arguments import QuantileLevels, add_training_arguments, columns, level, train_options
from .failures import UsageError
from .output import Output, add_json_flag, check_outputs, print_result, to_json
from .session import finish_job_parser, job
from .tracking import add_tracking_arguments, track, tracker, tracking_line, tracking_status

__all__ = ["DATA_HELP", "add_evaluate_parser", "add_migrate_parser", "add_predict_parser",
           "add_train_parser"]


DATA_HELP = "Parquet file, directory (hive partitions too), glob or fsspec URL"
_MODEL_HELP = ("model directory (ebf train), or REGISTRY[@VERSION]: a model registry (ebf "
               "retrain), its current version unless @3 / @v3 / @v0003 names one")


def add_train_parser(sub: argparse._SubParsersAction) -> None:
    tr = sub.add_parser(
        "train", help="fit an Empirical Bayesian Forest on a Parquet dataset, on Dask",
        description=(
            "Fit an Empirical Bayesian Forest on a Parquet dataset on Dask: schema check, trunk "
            "over all rows, one branch forest per trunk leaf on the workers. The model directory "
            "(manifest.json with the training metadata, checksummed arrays) appears atomically."
        ),
    )
    tr.add_argument("data", metavar="DATA", help=DATA_HELP)
    tr.add_argument("--target", required=True, metavar="COL", help="target column")
    add_training_arguments(tr)
    tr.add_argument("--baseline-out", metavar="DIR",
                    help="also fit the sub-sample forest baseline and save it here")
    tr.add_argument("--out", required=True, metavar="MODEL_DIR", help="model directory")
    tr.add_argument("--overwrite", action="store_true", help="replace an existing model")
    add_json_flag(tr, "the training summary (the model's metadata, hash and URL)")
    add_tracking_arguments(tr)
    finish_job_parser(tr, _cmd_train)


def add_predict_parser(sub: argparse._SubParsersAction) -> None:
    pr = sub.add_parser(
        "predict", help="predict a Parquet dataset with a saved model, on Dask, to Parquet",
        description=(
            "Predict every row of DATA with MODEL on Dask and write Parquet: mean, std and "
            "quantiles (regressors) or class probabilities and the class (classifiers), plus the "
            "branch; one file per input partition, rows in input order, the model's version and "
            "content hash in the schema metadata. PRED_DIR appears only when every file is written."
        ),
    )
    pr.add_argument("model", metavar="MODEL", help=_MODEL_HELP)
    pr.add_argument("data", metavar="DATA", help=DATA_HELP)
    pr.add_argument("--out", required=True, metavar="PRED_DIR", help="output directory")
    _add_prediction_arguments(pr)
    pr.add_argument("--overwrite", action="store_true", help="replace an existing PRED_DIR")
    _add_strategy_argument(pr)
    add_json_flag(pr, "what was written (path, rows, columns, files, seconds, model hash)")
    finish_job_parser(pr, _cmd_predict)


def _add_prediction_arguments(parser: argparse.ArgumentParser) -> None:
    from basics.levels import DEFAULT_QUANTILES  # numpy: imported once a parser is built

    parser.add_argument("--quantiles", nargs="+", type=level(False), action=QuantileLevels,
                        default=list(DEFAULT_QUANTILES), metavar="Q",
                        help="regressors: quantile levels (default: "
                        f"{' '.join(map(str, DEFAULT_QUANTILES))})")
    parser.add_argument("--keep", nargs="+", default=[], metavar="COL",
                        help="input columns copied into the predictions (ids, keys, the "
                        "target...)")


def _add_strategy_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--strategy", choices=("auto", "broadcast", "sharded"), default="auto",
        help="broadcast: every worker holds the whole model; sharded: each task loads one "
        "branch; auto: sharded for an EBF, broadcast for a sub-sample forest that takes at "
        "most a quarter of a worker's memory (default: auto)")


def add_evaluate_parser(sub: argparse._SubParsersAction) -> None:
    ev = sub.add_parser(
        "evaluate", help="score a saved model on a labelled Parquet dataset, on Dask",
        description=(
            "Score MODEL on DATA, streaming the partitions: RMSE, NLPD, CRPS, interval "
            "coverage and the calibration table of the exact predictive intervals, before and "
            "after recalibration if the model recalibrates (regressors), log loss, accuracy and "
            "ECE (classifiers, as predicted: through the class calibration map if any). With "
            "--predictions, the same pass also writes every row's predictions, the files ebf "
            "predict writes: one prediction per row for both."
        ),
    )
    ev.add_argument("model", metavar="MODEL", help=_MODEL_HELP)
    ev.add_argument("data", metavar="DATA", help=DATA_HELP)
    ev.add_argument("--target", metavar="COL", help="target column (default: the training one)")
    ev.add_argument("--levels", nargs="+", type=level(True), default=None, metavar="Z",
                    help="nominal coverages of the calibration table (default: 0.1 ... 0.9)")
    ev.add_argument("--json", nargs="?", const="-", metavar="PATH",
                    help="the results as one JSON object: alone, on stdout instead of the text; "
                    "with PATH, also written to that file")
    ev.add_argument("--report", metavar="HTML",
                    help="also write a self-contained HTML report (the run and model, tables, "
                    "reliability diagram, PIT histogram, interval width vs error, per-branch "
                    "scores), and its figures as PNGs in HTML_STEM_figures/ next to it (needs "
                    "the examples extra)")
    ev.add_argument("--target-unit", metavar="UNIT",
                    help="the target's unit, for the --report's RMSE, CRPS and axes (e.g. "
                    "minutes; default: 'target units')")
    ev.add_argument("--predictions", metavar="PRED_DIR",
                    help="also write the predictions there, as ebf predict does, from the same "
                    "pass (rows without a target are predicted, not scored)")
    ev.add_argument("--importance", action="store_true",
                    help="also compute permutation importances on the same data (ebf "
                    "importance with its defaults, in the same session) and show them in the "
                    "text, --json and --report")
    _add_prediction_arguments(ev)
    ev.add_argument("--overwrite", action="store_true",
                    help="replace an existing --json / --report (and its figures) or "
                    "--predictions that ebf wrote")
    _add_strategy_argument(ev)
    finish_job_parser(ev, _cmd_evaluate)


def add_migrate_parser(sub: argparse._SubParsersAction) -> None:
    mi = sub.add_parser(
        "migrate-model", help="rewrite a saved model in the current format (sharded by branch)",
        description=(
            "Load OLD_DIR (any format this ebf reads, every checksum and tree checked) and save "
            "it to NEW_DIR in the current format: format 2 keeps each branch in its own shard, "
            "so prediction on Dask can load one branch per task. Predictions are unchanged; the "
            "model hash changes with the format."
        ),
    )
    mi.add_argument("old", metavar="OLD_DIR", help="model directory or fsspec URL")
    mi.add_argument("new", metavar="NEW_DIR", help="new model directory or fsspec URL")
    mi.add_argument("--overwrite", action="store_true", help="replace an existing NEW_DIR")
    mi.set_defaults(handler=_cmd_migrate_model)


def _cmd_migrate_model(args: argparse.Namespace) -> int:
    from ebf.artifact import load, read_manifest, save

    check_outputs([Output("NEW_DIR", args.new, "model")], {"the model OLD_DIR": args.old},
                  overwrite=args.overwrite)
    manifest = read_manifest(args.old)
    model = load(args.old)
    user = (manifest.get("metadata") or {}).get("user")
    save(model, args.new, overwrite=args.overwrite, metadata=user if isinstance(user, dict)
         else None)
    new = read_manifest(args.new)
    print(f"migrated {args.old} (format {manifest['format_version']}) to {args.new} (format "
          f"{new['format_version']}, {len(new.get('shards', []))} shards); model hash "
          f"{new['model_hash'][:16]}")
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    from basics.places import Place
    from pipelines.tracking import train_run
    from pipelines.train import ensemble_facts, train
    from pipelines.warm import warm_workers

    options = train_options(args)  # checked before any work
    written = check_outputs([Output("--out", args.out, "model"),
                             Output("--baseline-out", args.baseline_out, "model")],
                            {"the training data": args.data}, overwrite=args.overwrite)
    where = tracker(args, written)  # an MLflow file store overlaps none of them
    with job(args) as (client, bars):
        # the first fit on a machine compiles the kernels: say so, and split it across the
        # workers (later runs load them from numba's cache and skip this)
        warm_workers(client, options.branch, only_if_cold=True, progress=bars)
        # the workers write the branches; the models appear whole when train returns
        res = train(args.data, args.target, options, features=columns(args.features),
                    baseline=args.baseline_out is not None, client=client, progress=bars,
                    out=args.out, baseline_out=args.baseline_out, overwrite=args.overwrite)
    name, branches = ensemble_facts(res.model)
    lines = [] if res.size_plan is None else [res.size_plan.message]
    phases = ", ".join(f"{k} {v:.2f}s" for k, v in res.timings.items() if k != "fit")
    lines.append(
        f"trained {name} ({res.task}; {branches} branches x "
        f"{res.params['n_estimators']} {args.branch} trees) on {res.rows:,} rows x "
        f"{len(res.features)} features of {res.data} in {res.fit_seconds:.1f}s ({phases})\n"
        f"saved to {args.out} (model hash {res.model.model_hash[:16]})")
    cal = res.calibration
    if cal["method"] == "auto" and "ebf" in cal:
        e = cal["ebf"]
        made = (f"PIT map of {e['knots']} segments, max |R(p) - p| {e['max_deviation']:.3f}"
                if "knots" in e else f"{e['map']} class calibration map")
        lines.append(f"recalibrated on all {e['rows']:,} rows, each predicted by "
                     f"{e['folds']} calibration groups of {e['group_trees']} trees fit "
                     f"without it: {made}")
    elif cal["method"] not in ("none", "auto"):
        lines.append(f"recalibrated on the {cal['method']} {cal['fraction']:.0%} of the rows "
                     f"(held out of the fit): PIT map of {cal['ebf']['knots']} segments, max "
                     f"|R(p) - p| {cal['ebf']['max_deviation']:.3f}")
    # the metadata's "model" is the kind ("ebf"): the class says it; "model" is the --out
    body = {**res.metadata(), "model": args.out, "model_url": Place.of(args.out, None).url,
            "model_hash": res.model.model_hash, "class": name, "branches": branches,
            "size_plan": None if res.size_plan is None else res.size_plan.message,
            "baseline": None}
    if res.baseline is not None:
        ssf, subsamples = ensemble_facts(res.baseline)
        lines.append(f"baseline {ssf} ({subsamples} sub-samples) in "
                     f"{res.baseline_timings['fit']:.1f}s, saved to {args.baseline_out}")
        body["baseline"] = {"model": args.baseline_out,
                            "model_url": Place.of(args.baseline_out, None).url,
                            "model_hash": res.baseline.model_hash, "class": ssf,
                            "subsamples": subsamples, "timings": res.baseline_timings}
    # the models are written: a tracking failure loses no model
    error = track(where, train_run, "training", body)
    print_result(args, "training", body, "\n".join([*lines, *tracking_line(body)]))
    return tracking_status(args, error, body["model_url"])


def _cmd_predict(args: argparse.Namespace) -> int:
    from pipelines.predict import check_prediction_data, predict_to_parquet, prediction_inputs
    from pipelines.registry.resolve import resolve_model

    model = resolve_model(args.model)  # once, before any Dask work: a registry's version
    check_outputs([Output("--out", args.out, "predictions")], prediction_inputs(model, args.data),
                  overwrite=args.overwrite)
    check_prediction_data(model, args.data, args.keep, quantiles=args.quantiles)  # no cluster yet
    with job(args) as (client, bars):
        res = predict_to_parquet(
            model, args.data, args.out, quantiles=tuple(args.quantiles),
            keep_columns=args.keep, overwrite=args.overwrite, client=client,
            progress=lambda done, total: bars("predict", done, total), strategy=args.strategy,
            data_checked=True,
        )
    print_result(args, "predictions", {
        "path": res.path, "rows": res.rows, "columns": list(res.columns), "files": res.files,
        "seconds": res.seconds, "model_hash": res.metadata["ebf.model_hash"]},
        f"wrote {res.rows:,} rows ({', '.join(res.columns)}) in {res.files} Parquet files to "
        f"{res.path} in {res.seconds:.1f}s; model hash {res.metadata['ebf.model_hash'][:16]}")
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from pipelines.registry.resolve import resolve_model
    from pipelines.report.evaluate import evaluate, format_evaluation
    from pipelines.report.metrics import DEFAULT_LEVELS, result_to_json

    if args.report:
        from pipelines.report.html import require_matplotlib

        require_matplotlib()  # before the evaluation, not after it
    model = resolve_model(args.model)  # once, before any Dask work: a registry's version
    _check_evaluate_outputs(args, model)
    with job(args) as (client, bars):
        res = evaluate(
            model, args.data, target=args.target,
            levels=tuple(args.levels) if args.levels else DEFAULT_LEVELS, client=client,
            progress=lambda done, total: bars("evaluate", done, total), strategy=args.strategy,
            predictions=args.predictions, quantiles=tuple(args.quantiles),
            keep_columns=args.keep, overwrite=args.overwrite,
        )
        if args.importance:
            from pipelines.importance import permutation_importance

            imp = permutation_importance(
                model, args.data, target=args.target, client=client,
                progress=lambda done, total: bars("importance", done, total))
            res["importance"] = {**imp, "importances": imp["importances"].to_dict("records")}
    for warning in res.get("warnings", []):
        print(f"ebf evaluate: warning: {warning}", file=sys.stderr)
    lines = [format_evaluation(res, title=f"{args.model} on {args.data}")]
    if args.importance:
        from pipelines.importance import format_importances

        lines.append(format_importances(res["importance"]))
    body = {k: v for k, v in result_to_json(res).items() if k not in ("coverage", "predictions")}
    if args.predictions:
        pred = res["predictions"]
        lines.append(f"wrote {pred.rows:,} rows ({', '.join(pred.columns)}) in {pred.files} "
                     f"Parquet files to {pred.path}")
        body["predictions"] = {"path": pred.path, "rows": pred.rows, "files": pred.files,
                               "columns": list(pred.columns)}
    if args.json not in (None, "-"):
        from basics.atomic import write_bytes

        write_bytes(args.json, json.dumps(to_json({"ebf_output": "evaluation", **body}),
                                          allow_nan=False).encode())
    if args.report:
        from pipelines.report.html import write_evaluation_report

        written = write_evaluation_report(res, args.report, title=f"{args.model} on {args.data}",
                                          target_unit=args.target_unit)
        figures = ", ".join(written) or "none: a classifier's scores have no figure"
        lines.append(f"report: {args.report} (figures: {figures})")
    print_result(args, "evaluation", body, "\n".join(lines))
    return 0


def _check_evaluate_outputs(args: argparse.Namespace, model: str) -> None:
    """Refuse ``--predictions`` / ``--json`` / ``--report`` (and its figures) before any
    work: inside a model, predictions, dataset or registry, over an input or another output
    of the command, or over a file that is not ebf's of the same kind (:func:`check_outputs`)."""
    from pipelines.predict import prediction_inputs
    from pipelines.report.html import figures_dir

    if args.keep and not args.predictions:
        raise UsageError("--keep copies columns into --predictions; give --predictions too")
    if args.target_unit is not None and not args.report:
        raise UsageError("--target-unit labels the --report; give --report too")
    check_outputs([
        Output("--predictions", args.predictions, "predictions"),
        Output("--json", args.json, "evaluation"),
        Output("--report", args.report, "report"),
        Output("--report", args.report and figures_dir(args.report), "figures",
               "the --report's figures folder"),
    ], prediction_inputs(model, args.data), overwrite=args.overwrite)
