"""The nightly retraining job as a Prefect flow (``pip install -e ".[schedule]"``).

``nightly_retrain(registry, root, day=None)`` connects to Dask (``cluster.connect``: a local
cluster, or ``scheduler``), finds the day's partition of the date-partitioned dataset
(default: yesterday's) and retrains the registry's model on it with
:func:`pipelines.registry.retrain.retrain`, through the functions of ``retrain_job.py``. A kept
champion is a successful run (the version is written, the pointer stays); a missing
partition, bad data or a busy registry fail the run. The retrain task may be retried
safely: a re-run on the same partition is a no-op that reports the version it made.

Each run publishes a table artifact, key :data:`ARTIFACT_KEY` (``ebf-retrain-metrics``): the
champion's and the challenger's holdout metrics, one row per metric, described by the
version, its action (update / refit) and decision (promoted / kept). Prefect keeps the
artifacts of a key as its history, so the UI shows the metrics night by night.

Run it once, or serve it on a schedule (Prefect 3)::

    python examples/prefect_flow.py REGISTRY ROOT --day 2013-08-01 --target arr_delay
    python examples/prefect_flow.py REGISTRY ROOT --serve --cron "30 2 * * *"

The Prefect decorators are applied only when Prefect is installed: without it this module
still imports, ``nightly_retrain`` runs as a plain function and the task functions can be
called (and tested) directly.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from retrain_job import parse_day, partition_path, run_retrain

try:
    import prefect
except ImportError:  # the schedule extra is optional: plain functions then
    prefect = None

__all__ = ["ARTIFACT_KEY", "find_partition", "metrics_description", "metrics_table",
           "nightly_retrain", "publish_metrics", "retrain_partition"]

logger = logging.getLogger(__name__)

#: The retrain task's retries (a re-run is a no-op, so a retry is safe) and their delay:
#: long enough for a concurrent run holding the registry's lock to finish.
RETRIES, RETRY_DELAY_S = 1, 300
#: The key of the metrics artifact of every run (lowercase letters, digits and dashes).
ARTIFACT_KEY = "ebf-retrain-metrics"


def _prefect(kind: str, **kwargs: Any) -> Callable[[Callable], Callable]:
    """``prefect.task(**kwargs)`` / ``prefect.flow(**kwargs)``, or nothing without Prefect."""

    def decorate(fn: Callable) -> Callable:
        return fn if prefect is None else getattr(prefect, kind)(**kwargs)(fn)

    return decorate


def _logger() -> logging.Logger | logging.LoggerAdapter:
    """Prefect's run logger inside a run (its lines reach the UI), else this module's."""
    if prefect is not None:
        from prefect.exceptions import MissingContextError

        try:
            return prefect.get_run_logger()
        except MissingContextError:  # a task function called outside a run
            pass
    return logger


@_prefect("task", name="find partition")
def find_partition(root: str, day: str) -> str:
    """The day's partition directory (``ROOT/date=YYYY-MM-DD``); fails naming the days there.

    Parameters
    ----------
    root : str
        The date-partitioned dataset.
    day : str
        ISO date.

    Returns
    -------
    str
    """
    return partition_path(root, day)


@_prefect("task", name="retrain", retries=RETRIES, retry_delay_seconds=RETRY_DELAY_S)
def retrain_partition(registry: str, root: str, day: str,
                      options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Retrain the registry's model on the day's partition (on the default Dask client).

    Parameters
    ----------
    registry, root : str
        Registry root and dataset root.
    day : str
        ISO date.
    options : mapping, optional
        Keyword arguments of :func:`pipelines.registry.retrain.retrain` (``target`` and
        ``train_options`` for version 1...).

    Returns
    -------
    dict
        ``retrain_job.summarize``: version, decision, action, exit_code, drift, metrics...
    """
    summary = run_retrain(registry, root, day, **dict(options or {}))
    log = _logger()
    what = (f"version {summary['version']}: {summary['action']}, {summary['decision']} "
            f"({summary['reason']})")
    if summary["decision"] == "kept":
        log.warning("%s; the champion stays current", what)
    else:
        log.info("%s", what)
    return summary


def metrics_table(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The artifact's table: one row per holdout metric, the champion's and the challenger's
    values (None where a model has none: version 1 has no champion).

    Parameters
    ----------
    summary : mapping
        The retrain task's summary (``retrain_job.summarize``).

    Returns
    -------
    list of dict
        ``metric``, ``champion``, ``challenger``.

    Examples
    --------
    >>> metrics_table({"metrics": {"champion": None, "challenger": {"n": 150, "rmse": 1.2}}})
    [{'metric': 'n', 'champion': None, 'challenger': 150}, \
{'metric': 'rmse', 'champion': None, 'challenger': 1.2}]
    """
    metrics = summary.get("metrics") or {}
    champion, challenger = metrics.get("champion") or {}, metrics.get("challenger") or {}
    return [{"metric": name, "champion": champion.get(name), "challenger": challenger.get(name)}
            for name in dict.fromkeys([*challenger, *champion])]


def metrics_description(summary: Mapping[str, Any]) -> str:
    """The artifact's description (Markdown): the day, the version, what was done and why.

    Examples
    --------
    >>> print(metrics_description({"day": "2024-03-02", "version": 2, "action": "update",
    ...                            "decision": "kept", "reason": "the gate failed on nlpd",
    ...                            "drift": "update", "reused": False}))
    ebf retrain of 2024-03-02: version 2, update, **kept** (the gate failed on nlpd); drift \
check: update
    """
    again = " (a re-run: the version was made before)" if summary.get("reused") else ""
    return (f"ebf retrain of {summary['day']}: version {summary['version']}, "
            f"{summary['action']}, **{summary['decision']}** ({summary['reason']}); drift "
            f"check: {summary.get('drift') or 'none (version 1)'}{again}")


@_prefect("task", name="publish metrics")
def publish_metrics(summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Publish the run's metrics as the table artifact :data:`ARTIFACT_KEY` (with Prefect).

    Parameters
    ----------
    summary : mapping
        The retrain task's summary.

    Returns
    -------
    list of dict
        The table (:func:`metrics_table`), published or not.
    """
    table = metrics_table(summary)
    if prefect is not None:
        from prefect.artifacts import create_table_artifact

        create_table_artifact(table=table, key=ARTIFACT_KEY,
                              description=metrics_description(summary))
    return table


@_prefect("flow", name="ebf-nightly-retrain")
def nightly_retrain(registry: str, root: str, day: str | None = None,
                    scheduler: str | None = None,
                    options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Retrain the registry's model on one day of a date-partitioned dataset.

    Parameters
    ----------
    registry : str
        Registry root (a local path or an fsspec URL).
    root : str
        The dataset root: one ``date=YYYY-MM-DD`` directory per day.
    day : str, optional
        ISO date; default yesterday (the machine's local date).
    scheduler : str, optional
        Dask scheduler address; default ``cluster.connect()``'s choice (a configured
        scheduler, else a local cluster, of threads if ``EBF_LOCAL_PROCESSES=0``).
    options : dict, optional
        Keyword arguments of :func:`pipelines.registry.retrain.retrain`.

    Returns
    -------
    dict
        The retrain task's summary.
    """
    import cluster
    from pipelines.cli.arguments import local_processes

    day = parse_day(day).isoformat()
    find_partition(root, day)  # fails before a cluster is started
    client = cluster.connect(scheduler, processes=local_processes())
    try:
        summary = retrain_partition(registry, root, day, options)
    finally:
        client.close()
    publish_metrics(summary)
    return summary


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("registry", help="registry root")
    p.add_argument("root", help="dataset root with one date=YYYY-MM-DD directory per day")
    p.add_argument("--day", help="ISO date (default: yesterday)")
    p.add_argument("--target", help="target column (version 1 only)")
    p.add_argument("--scheduler", help="Dask scheduler address (default: a local cluster)")
    p.add_argument("--serve", action="store_true",
                   help="serve the flow on a schedule (needs Prefect) instead of running once")
    p.add_argument("--cron", default="30 2 * * *",
                   help="schedule of --serve (default: 02:30 every night)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the flow once (exit 0, or 10 when the champion is kept), or serve it."""
    args = _parse(argv)
    options = {"target": args.target} if args.target else None
    params = {"registry": args.registry, "root": args.root, "scheduler": args.scheduler,
              "options": options}
    if args.serve:
        if prefect is None:
            print("--serve needs Prefect: pip install -e '.[schedule]'", file=sys.stderr)
            return 2
        # the day stays unset: every scheduled run takes its own yesterday
        nightly_retrain.serve(name="nightly", cron=args.cron, parameters=params)
        return 0
    summary = nightly_retrain(day=args.day, **params)
    print(json.dumps(summary, indent=1))
    return summary["exit_code"]


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    sys.exit(main())
