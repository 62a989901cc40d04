"""``--mlflow-uri`` and ``--mlflow-experiment`` of ``ebf train`` and ``ebf retrain``: the job as
one MLflow run (:mod:`pipelines.tracking`).

:func:`tracker` checks the options before any work; once the model is written,
:func:`track` logs the run and adds ``"mlflow"`` to the ``--json`` object (the run's id, or
the error); :func:`tracking_status` prints a failure and gives the command's exit status:
:data:`pipelines.cli.failures.TRACKING_FAILED` (3) when the model was written but its run
could not be logged. With ``--mlflow-register NAME`` (``ebf retrain``),
:func:`register` also puts a new champion into MLflow's Model Registry
(:func:`pipelines.tracking.register_champion`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from typing import Any

from .failures import TRACKING_FAILED, UsageError
from .output import to_json

__all__ = ["add_tracking_arguments", "register", "track", "tracker", "tracking_line",
           "tracking_status"]


def add_tracking_arguments(parser: argparse.ArgumentParser, register: bool = False) -> None:
    """``--mlflow-uri URI`` and ``--mlflow-experiment NAME`` (and with ``register``,
    ``--mlflow-register NAME``)."""
    from pipelines.tracking import CHAMPION_ALIAS, DEFAULT_EXPERIMENT, INSTALL, SUMMARY_ARTIFACT

    files = ("the model's files only with --mlflow-register" if register
             else "never the model's files")
    group = parser.add_argument_group(
        "tracking",
        "With --mlflow-uri, the job is logged as one MLflow run once its model is written: "
        "parameters, metrics, the model's URL and hash as tags and the --json summary as "
        f"the artifact {SUMMARY_ARTIFACT} ({files}). Needs {INSTALL}. If "
        f"the run cannot be logged, the model stays written and the exit status is "
        f"{TRACKING_FAILED}.")
    group.add_argument("--mlflow-uri", metavar="URI",
                       help="MLflow tracking URI: a server (http://host:5000), databricks, or "
                       "a file store (file:///path/mlruns; MLflow 3 opens one only with "
                       "MLFLOW_ALLOW_FILE_STORE=true)")
    group.add_argument("--mlflow-experiment", metavar="NAME",
                       help=f"the run's MLflow experiment (default: {DEFAULT_EXPERIMENT}); "
                       "created if absent")
    if register:
        group.add_argument("--mlflow-register", metavar="NAME",
                           help="with --mlflow-uri: when the version becomes the champion, "
                           "log its model in the run with the ebf MLflow flavor (the model's "
                           "files are copied to MLflow's artifact store), register it as a "
                           f"new version of NAME in MLflow's Model Registry and point the "
                           f"alias '{CHAMPION_ALIAS}' at it")


def tracker(args: argparse.Namespace, inputs: Mapping[str, Any]) -> Any:
    """The :class:`pipelines.tracking.Tracker` of the options, checked before any work
    (None without ``--mlflow-uri``); ``inputs``: what the job reads and writes, which a file
    store may not overlap."""
    from pipelines.tracking import DEFAULT_EXPERIMENT, TrackingSetupError, connect

    register = getattr(args, "mlflow_register", None)
    if register is not None and not register.strip():
        raise UsageError("--mlflow-register: the registered model's name is empty; name one, "
                         "e.g. --mlflow-register friedman")
    if not args.mlflow_uri:
        for option, value in (("--mlflow-experiment", args.mlflow_experiment),
                              ("--mlflow-register", register)):
            if value is not None:
                raise UsageError(f"{option} needs an MLflow tracking store: give --mlflow-uri "
                                 f"URI too (or leave {option} out)")
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


def register(where: Any, name: str | None, body: dict[str, Any], champion: bool,
             storage_options: Mapping[str, Any] | None = None) -> str | None:
    """Put the version's model into MLflow's Model Registry as ``name`` if it is the
    ``champion`` (the registry's current version) and its run is logged
    (:func:`pipelines.tracking.register_champion`); adds ``body["mlflow"]["registered"]``
    and returns the error's message if MLflow failed."""
    run = body.get("mlflow") or {}
    if where is None or not name or not champion or "run_id" not in run:
        return None
    from pipelines.tracking import TrackingError, register_champion

    try:
        run["registered"] = register_champion(where, run["run_id"], body["model_url"], name,
                                              storage_options=storage_options)
    except TrackingError as exc:
        run["error"] = str(exc)
        return str(exc)
    return None


def tracking_line(body: Mapping[str, Any]) -> list[str]:
    """The text report's lines about the run and the registered champion (none without
    tracking or after a failure)."""
    run = body.get("mlflow")
    if not run or "run_id" not in run:
        return []
    how = "logged as" if run["logged"] else "already logged as"
    lines = [f"MLflow: {how} run {run['run_id']} of experiment {run['experiment']!r} at "
             f"{run['tracking_uri']}"]
    reg = run.get("registered")
    if reg:
        lines.append(f"MLflow Model Registry: {reg['name']} version {reg['version']}, alias "
                     f"{reg['alias']!r} ({reg['model_uri']})")
    return lines


def tracking_status(args: argparse.Namespace, error: str | None, model: str,
                    status: int = 0) -> int:
    """``status``, or after a tracking failure its one line on stderr and
    :data:`~pipelines.cli.failures.TRACKING_FAILED`."""
    from pipelines.tracking import REGISTER_FAILED

    if error is None:
        return status
    again = (" (ebf retrain on the same inputs logs the version it made without retraining)"
             if args.command == "retrain" else "")
    missing = ("its MLflow Model Registry version" if error.startswith(REGISTER_FAILED)
               else "its MLflow run")
    print(f"ebf {args.command}: error: {error}; the model is written ({model}), only {missing} "
          f"is missing: check --mlflow-uri and that the tracking server answers{again}",
          file=sys.stderr, flush=True)
    return TRACKING_FAILED
