"""Argument types and the cluster options of the ``ebf`` command's subcommands.

The value types (:func:`count`, :func:`fraction`, :func:`memory_size`...) raise
``argparse.ArgumentTypeError`` with a message saying what is expected, so argparse prints one
line and exits with status 2. :func:`add_cluster_arguments` adds the options every Dask
subcommand shares; :func:`local_processes` reads ``EBF_LOCAL_PROCESSES``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import Any

from .failures import UsageError

__all__ = [
    "LOCAL_PROCESSES_ENV", "add_cluster_arguments", "columns", "count", "fraction",
    "int_at_least", "local_processes", "memory_size", "model_memory_size", "positive_float",
    "positive_int", "worker_count",
]


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def worker_count(text: str) -> int:
    """``--n-workers``: a positive integer at most ``cluster.connect.MAX_LOCAL_WORKERS``,
    refused before anything starts (a typo such as 100000 would fork until the machine
    gives out)."""
    from cluster.connect import MAX_LOCAL_WORKERS

    value = positive_int(text)
    if value > MAX_LOCAL_WORKERS:
        raise argparse.ArgumentTypeError(
            f"{value} is above the cap of {MAX_LOCAL_WORKERS} workers of a local cluster; ask "
            f"for at most {MAX_LOCAL_WORKERS}, or start the workers as a cluster (dask "
            "scheduler and dask worker, or ebf cluster) and pass --scheduler")
    return value


def int_at_least(low: int):
    """An argparse type: an integer >= ``low``."""

    def parse(text: str) -> int:
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {text}")
        return value

    return parse


def count(text: str) -> int:
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


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value


def fraction(low_open: bool):
    """An argparse type: a number in [0, 1], or (0, 1) if ``low_open``."""

    def parse(text: str) -> float:
        value = float(text)
        if not (0 < value < 1 if low_open else 0 <= value <= 1):
            raise argparse.ArgumentTypeError(f"must be in {'(0, 1)' if low_open else '[0, 1]'}")
        return value

    return parse


def level(interior: bool):
    """An argparse type: one probability level, by the library's one rule
    (:func:`basics.levels.check_levels`): a quantile level in [0, 1], or with ``interior``
    the coverage of a central interval, in (0, 1)."""

    def parse(text: str) -> float:
        from basics.levels import check_levels  # numpy: imported once an argument is parsed

        try:
            return float(check_levels(text, "the value", interior=interior))
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return parse


class QuantileLevels(argparse.Action):
    """``--quantiles``: the levels (each parsed by :func:`level`) must name distinct columns
    (:func:`ebf.frames.quantile_columns`), else a usage error now, before any work."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        from ebf.frames import quantile_columns

        try:
            quantile_columns(values)
        except ValueError as e:
            raise argparse.ArgumentError(self, str(e)) from None
        setattr(namespace, self.dest, values)


def memory_size(text: str) -> str:
    """A memory size such as ``2GB`` or ``512MiB`` (``dask.utils.parse_bytes``)."""
    from dask.utils import parse_bytes

    try:
        assert parse_bytes(text) > 0
    except (ValueError, TypeError, AssertionError):
        raise argparse.ArgumentTypeError(f"not a memory size: {text!r} (e.g. 2GB)") from None
    return text


def model_memory_size(text: str) -> str:
    """``auto`` or a :func:`memory_size` (``--model-memory``)."""
    return text if text == "auto" else memory_size(text)


def columns(values: Sequence[str] | None) -> list[str] | None:
    """``--features a b,c`` -> ``["a", "b", "c"]``."""
    if values is None:
        return None
    return [c for value in values for c in value.split(",") if c]


LOCAL_PROCESSES_ENV = "EBF_LOCAL_PROCESSES"
_FALSE = ("0", "false", "no", "off")
_TRUE = ("1", "true", "yes", "on", "")


def local_processes() -> bool:
    """``EBF_LOCAL_PROCESSES``: worker processes (default) or threads for a local cluster."""
    value = os.environ.get(LOCAL_PROCESSES_ENV, "1").strip().lower()
    if value in _FALSE:
        return False
    if value in _TRUE:
        return True
    raise UsageError(
        f"{LOCAL_PROCESSES_ENV}={value!r} is not understood; use 1 (worker processes, the "
        "default) or 0 (threads in this process)"
    )


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of every subcommand that runs on Dask (see
    :func:`pipelines.cli.session.dask_client`)."""
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
        type=positive_float,
        default=None,
        metavar="SECONDS",
        help="wait this long for the scheduler (default: 10), or for a local cluster to "
        "start (default: 60)",
    )
    group.add_argument(
        "--n-workers", type=worker_count, default=None,
        help="local cluster: workers (at most 256)"
    )
    group.add_argument(
        "--threads-per-worker", type=positive_int, default=None, help="local cluster: threads"
    )


def branch_help() -> str:
    """The ``--branch`` help: one line per learner of :data:`ebf.learners.LEARNERS`, and
    the default, :data:`ebf.learners.DEFAULT_BRANCH`."""
    from ebf.learners import DEFAULT_BRANCH, LEARNERS

    return ("branch learner: " + "; ".join(f"{name}: {rec.help}"
                                           for name, rec in LEARNERS.items())
            + f" (default: {DEFAULT_BRANCH})")


def add_training_arguments(parser: argparse.ArgumentParser) -> None:
    """The model options of ``ebf train`` (and of ``ebf retrain``'s version 1): features,
    task, branch learner, trees, trunk size, size budgets, recalibration, seed. The
    learners, their help and default trees come from :data:`ebf.learners.LEARNERS`, the
    default learner from :data:`ebf.learners.DEFAULT_BRANCH`, as in the library."""
    from ebf.learners import DEFAULT_BRANCH, LEARNERS
    from pipelines.sizing import DEFAULT_MODEL_MEMORY, sized_by_rows

    add = parser.add_argument
    add("--features", nargs="+", metavar="COL",
        help="feature columns, space or comma separated (default: all but target)")
    add("--task", choices=("auto", "regression", "classification"), default="auto",
        help="auto: float -> regression; bool, string, category -> classification; "
        "integer -> classification if at most 20 distinct values (default: auto)")
    add("--branch", choices=list(LEARNERS), default=DEFAULT_BRANCH, help=branch_help())
    add("--n-estimators", type=positive_int, default=None,
        help="trees per branch (default: the learner's, as in the library: "
        + ", ".join(f"{name} {rec.default_trees}" for name, rec in LEARNERS.items()) + ")")
    add("--model-memory", type=model_memory_size, metavar="SIZE",
        help="budget for the saved model: picks the trees per branch, or the leaf size, "
        "from the rows and an estimate of bytes per row per tree; auto: bootstrap-forest "
        f"leaves grow with the rows too, in a budget of {DEFAULT_MODEL_MEMORY} (default: "
        f"auto for {', '.join(sized_by_rows())} branches)")
    add("--compact", action=argparse.BooleanOptionalAction, default=False,
        help="save predict-only models: Mondrian branches without their online "
        "state, about 4x smaller (default: --no-compact)")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--trunk-leaves", type=positive_int, metavar="N", help="trunk leaves")
    size.add_argument("--min-leaf-rows", type=count, metavar="N", help="min rows per trunk leaf")
    size.add_argument("--branch-memory", type=memory_size, metavar="SIZE",
                      help="memory per branch task (2GB): the trunk grows until branches fit")
    add("--calibrate", choices=("auto", "none", "recent", "holdout"), default="auto",
        help="recalibrate the predictive distribution of a regressor: auto = on every row, "
        "each predicted by small calibration forests fit without it (no row held out of "
        "the model); recent = on the last --calibration-fraction of the rows in dataset "
        "order (data in time order), holdout = on a random fraction (default: auto)")
    add("--calibration-fraction", type=fraction(False), default=0.1, metavar="F",
        help="share of the rows the calibration uses (default: 0.1)")
    add("--seed", type=int, default=0, help="random_state (default: 0)")


def train_options(args: argparse.Namespace) -> Any:
    """The :class:`pipelines.options.TrainOptions` of the arguments of
    :func:`add_training_arguments` (checked once, before any work); ``--model-memory``
    defaults by learner (:func:`pipelines.sizing.default_model_memory`)."""
    from pipelines.options import TrainOptions
    from pipelines.sizing import default_model_memory

    return TrainOptions(
        task=args.task, branch=args.branch, n_estimators=args.n_estimators,
        trunk_leaves=args.trunk_leaves, min_leaf_rows=args.min_leaf_rows,
        branch_memory=args.branch_memory,
        model_memory=default_model_memory(args.branch, args.model_memory),
        compact=args.compact, calibrate=args.calibrate,
        calibration_fraction=args.calibration_fraction, random_state=args.seed)
