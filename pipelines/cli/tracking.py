"""``--mlflow-uri`` and ``--mlflow-experiment`` of ``ebf train`` and ``ebf retrain``: the job as
one MLflow run (:mod:`pipelines.tracking`).

:func:`tracker` checks the options before any work; once the model is written,
:func:`track` logs the run and adds ``"mlflow"`` to the ``--json`` object (the run's id, or
the error); :func:`tracking_status` prints a failure and gives the command's exit status:
:data:`pipelines.cli.failures.TRACKING_FAILED` (3) when the model was written but its run
could not be logged.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from typing import Any

from .failures import TRACKING_FAILED, UsageError
from .output import to_json

__all__ = ["add_tracking_arguments", "track", "tracker", "tracking_line", "tracking_status"]


def add_tracking_arguments(parser: argparse.ArgumentParser) -> None:
    """``--mlflow-uri URI`` and ``--mlflow-experiment NAME``."""
    from pipelines.tracking import DEFAULT_EXPERIMENT, INSTALL, SUMMARY_ARTIFACT

    group = parser.add_argument_group(
        "tracking",
        "With --mlflow-uri, the job is logged as one MLflow run once its model is written: "
        "parameters, metrics, the model's URL and hash as tags and the --json summary as "
        f"the artifact {SUMMARY_ARTIFACT} (never the model's files). Needs {INSTALL}. If "
        f"the run cannot be logged, the model stays written and the exit status is "
        f"{TRACKING_FAILED}.")
    group.add_argument("--mlflow-uri", metavar="URI",
                       help="MLflow tracking URI: a server (http://host:5000), databricks, or "
                       "a file store (file:///path/mlruns; MLflow 3 opens one only with "
                       "MLFLOW_ALLOW_FILE_STORE=true)")
    group.add_argument("--mlflow-experiment", metavar="NAME",
                       help=f"the run's MLflow experiment (default: {DEFAULT_EXPERIMENT}); "
                       "created if absent")


def tracker(args: argparse.Namespace, inputs: Mapping[str, Any]) -> Any:
    """The :class:`pipelines.tracking.Tracker` of the options, checked before any work
    (None without ``--mlflow-uri``); ``inputs``: what the job reads and writes, which a file
    store may not overlap."""
    from pipelines.tracking import DEFAULT_EXPERIMENT, TrackingSetupError, connect

    if not args.mlflow_uri:
        if args.mlflow_experiment is not None:
            raise UsageError("--mlflow-experiment names the experiment of --mlflow-uri; give "
                             "--mlflow-uri URI too (or leave the experiment out)")
        return None
    try:
        return connect(args.mlflow_uri, args.mlflow_experiment or DEFAULT_EXPERIMENT,
                       inputs=inputs)
    except TrackingSetupError as exc:
        raise UsageError(f"--mlflow-uri: {exc}") from exc


def track(where: Any, content: Callable[[dict], Any], kind: str,
          body: dict[str, Any]) -> str | None:
    """Log the run of ``body`` with ``where`` (a tracker, or None: nothing);
    ``content(summary)`` builds the run from the summary, the ``--json`` object of ``kind``
    (:func:`pipelines.cli.output.print_result`). Adds ``body["mlflow"]`` and returns the
    error's message if the run could not be logged."""
    if where is None:
        return None
    from pipelines.tracking import TrackingError, log_run

    try:
        body["mlflow"] = log_run(where, content(to_json({"ebf_output": kind, **body})))
    except TrackingError as exc:
        body["mlflow"] = {"tracking_uri": where.uri, "error": str(exc)}
        return str(exc)
    return None


def tracking_line(body: Mapping[str, Any]) -> list[str]:
    """The text report's line about the run (none without tracking or after a failure)."""
    run = body.get("mlflow")
    if not run or "run_id" not in run:
        return []
    how = "logged as" if run["logged"] else "already logged as"
    return [f"MLflow: {how} run {run['run_id']} of experiment {run['experiment']!r} at "
            f"{run['tracking_uri']}"]


def tracking_status(args: argparse.Namespace, error: str | None, model: str,
                    status: int = 0) -> int:
    """``status``, or after a tracking failure its one line on stderr and
    :data:`~pipelines.cli.failures.TRACKING_FAILED`."""
    if error is None:
        return status
    again = (" (ebf retrain on the same inputs logs the version it made without retraining)"
             if args.command == "retrain" else "")
    print(f"ebf {args.command}: error: {error}; the model is written ({model}), only its MLflow "
          f"run is missing: check --mlflow-uri and that the tracking server answers{again}",
          file=sys.stderr, flush=True)
    return TRACKING_FAILED
