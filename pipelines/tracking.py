"""Tracking the training jobs in MLflow: one run per ``train`` or ``retrain`` (the ``mlflow``
extra, ``pip install "ebf[mlflow]"``).

What a run holds is read off the job's result as the CLI's ``--json`` prints it, nothing is
computed for it (a retraining run's scores are the score records of :mod:`basics.scores`,
named as the records name them): :func:`train_run` and :func:`retrain_run` turn that summary into a
:class:`RunContent` (parameters, metrics, tags and the summary itself), and :func:`log_run`
logs it. The model is never uploaded (a model can take gigabytes): its URL is the tag
``ebf.model_url``, its content hash ``ebf.model_hash``, and the summary is a small JSON
artifact, :data:`SUMMARY_ARTIFACT`.

The order is the job's to keep: :func:`connect` checks everything that can be checked
without the network before any work (MLflow installed, a store MLflow can open, a local store
outside the job's inputs and outputs); the job writes its model; :func:`log_run` logs the run
afterwards, so a tracking server that is down costs the run's record, never the model
(:class:`TrackingError`).

A retraining run is logged once per registry version: :func:`log_run` first looks for a
finished run of the same version (its key, registry and model hash), so a re-run of ``ebf
retrain`` on the same inputs, a no-op for the registry, logs the version only if an earlier
run could not.

A new champion can also go to MLflow's Model Registry (``ebf retrain --mlflow-register
NAME``): :func:`register_champion` logs its model in the version's run with the ebf flavor
(:mod:`ebf.mlflow`: the model's files, its manifest and calibration, a pyfunc), registers it
as a version of ``NAME`` and points the alias :data:`CHAMPION_ALIAS` at it, once per run.

Library code: it logs and never prints. ``mlflow`` is imported inside the functions that use
it (:func:`connect` first).
"""

from __future__ import annotations

import logging
import math
import os
import posixpath
import re
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

__all__ = ["CHAMPION_ALIAS", "DEFAULT_EXPERIMENT", "INSTALL", "REGISTER_FAILED", "SUMMARY_ARTIFACT",
           "RunContent", "TrackingError", "TrackingSetupError", "Tracker", "connect",
           "log_run", "metric_key", "register_champion", "retrain_run", "train_run"]

logger = logging.getLogger(__name__)

#: The MLflow experiment of the runs unless one is named.
DEFAULT_EXPERIMENT = "ebf"
#: How to get MLflow.
INSTALL = 'pip install "ebf[mlflow]"'
#: The run's one artifact: the job's summary, as ``--json`` prints it.
SUMMARY_ARTIFACT = "ebf_summary.json"

#: The Model Registry alias of the registry's current version (:func:`register_champion`).
CHAMPION_ALIAS = "champion"
#: How the error of :func:`register_champion` begins.
REGISTER_FAILED = "MLflow could not register the champion"
#: The champion's artifact path (logged model name) in its run.
MODEL_ARTIFACT = "model"

#: Characters MLflow accepts in parameter and metric names on every system.
_KEY_CHARS = re.compile(r"[^/\w.\- ]")


class TrackingSetupError(ValueError):
    """The tracking options cannot work (an MLflow store that cannot be opened), found
    before any work."""


class TrackingError(RuntimeError):
    """The job's outputs are written, but MLflow could not log its run."""


@dataclass
class RunContent:
    """One MLflow run: what :func:`log_run` logs.

    Attributes
    ----------
    name : str
        The run's name.
    params, tags : dict of str to str
    metrics : dict of str to float
    summary : dict
        The job's JSON summary, logged as :data:`SUMMARY_ARTIFACT`.
    same : dict of str to str
        Tags that identify the job's result: a finished run with all of them logged it
        already (empty: never).
    """

    name: str
    params: dict[str, str]
    metrics: dict[str, float]
    tags: dict[str, str]
    summary: dict[str, Any]
    same: dict[str, str] = field(default_factory=dict)


@dataclass
class Tracker:
    """Where runs go: a tracking URI, an experiment and the MLflow client (:func:`connect`)."""

    uri: str
    experiment: str
    client: Any


def metric_key(*parts: object) -> str:
    """A parameter or metric name MLflow accepts: the parts joined by ``/`` (MLflow groups
    names by their prefix), each part's other characters replaced by ``_``.

    Examples
    --------
    >>> metric_key("seconds", "bin_edges")
    'seconds/bin_edges'
    >>> metric_key("drift", "p(root)", "..")
    'drift/p_root_/__'
    """
    cleaned = [_KEY_CHARS.sub("_", str(p)).strip() or "_" for p in parts]
    return "/".join("_" * len(p) if p in (".", "..") else p for p in cleaned)


def _local_store(uri: str) -> str | None:
    """The directory of a file store (``file:`` or a plain path), else None."""
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return parsed.path or None
    if parsed.scheme == "" or (len(parsed.scheme) == 1 and os.name == "nt"):  # C:\...
        return uri
    return None


def connect(uri: str, experiment: str = DEFAULT_EXPERIMENT, *,
            inputs: Mapping[str, Any] | None = None) -> Tracker:
    """Check the tracking options before any work and open the MLflow client.

    Nothing is sent over the network: a server that does not answer is found when the run
    is logged (:func:`log_run`), after the job's outputs are written.

    Parameters
    ----------
    uri : str
        An MLflow tracking URI: ``http(s)://host:5000`` (a tracking server),
        ``databricks``, or a file store ``file:///path/mlruns`` (MLflow 3 opens a file store
        only with ``MLFLOW_ALLOW_FILE_STORE=true``).
    experiment : str, default=DEFAULT_EXPERIMENT
        The experiment's name (created when the first run is logged).
    inputs : mapping of str to path, optional
        What the job reads and writes, by description: a file store may not overlap any of
        them, nor lie inside an ebf output or be one (:func:`basics.locations.check_location`).

    Returns
    -------
    Tracker

    Raises
    ------
    ImportError
        If MLflow is not installed (the message says how to install it).
    TrackingSetupError
        If the experiment's name is empty or MLflow cannot open the store (an unknown
        scheme, a file store MLflow refuses, a database store without its packages).
    basics.locations.UnsafeOutputError
        If a file store overlaps an input or an output, or lies in an ebf output.

    Examples
    --------
    >>> tracker = connect("http://mlflow.example:5000", "friedman")  # doctest: +SKIP
    """
    if not isinstance(experiment, str) or not experiment.strip():
        raise TrackingSetupError(f"the MLflow experiment's name is empty ({experiment!r}); "
                                 "name one, e.g. --mlflow-experiment ebf")
    try:
        from mlflow import MlflowClient
    except ImportError as exc:
        raise ImportError(f"tracking in MLflow (--mlflow-uri {uri}) needs MLflow, which is not "
                          f"installed: {INSTALL}") from exc
    local = _local_store(uri)
    if local is not None:
        from basics.locations import UnsafeOutputError, check_location, output_kind

        what = "the MLflow tracking store"
        check_location(local, what, inputs=inputs or {})
        kind = output_kind(local)
        if kind is not None:
            raise UnsafeOutputError(f"refusing to write {what} to {local!r}: it is an ebf "
                                    f"{kind}; choose a directory of its own (e.g. ./mlruns)")
    try:
        client = MlflowClient(tracking_uri=uri)
    except Exception as exc:  # noqa: BLE001 - MLflow's errors name the cause; the fix is ours
        raise TrackingSetupError(
            f"MLflow cannot open the tracking store {uri!r}: {_one_line(exc).rstrip('.')}. "
            "Use a tracking server (http://host:5000), databricks, or a file store "
            "(file:///path/mlruns; MLflow 3 needs MLFLOW_ALLOW_FILE_STORE=true for it); a "
            "database store (sqlite://...) needs the full mlflow package") from exc
    return Tracker(uri, experiment, client)


def _no_stdout() -> Any:
    """MLflow's client prints the run's URL on stdout when it ends a run on a tracking
    server: to stderr with it, so that stdout holds the command's report alone (``--json``:
    one object)."""
    return redirect_stdout(sys.stderr)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _experiment_id(client: Any, name: str) -> str:
    found = client.get_experiment_by_name(name)
    if found is None:
        try:
            return client.create_experiment(name)
        except Exception:  # created meanwhile by a concurrent job?
            found = client.get_experiment_by_name(name)
            if found is None:
                raise
    if found.lifecycle_stage != "active":
        raise TrackingError(f"the MLflow experiment {name!r} is deleted; restore it (mlflow "
                            "experiments restore) or name another one")
    return found.experiment_id


def _logged_before(client: Any, experiment_id: str, same: Mapping[str, str]) -> str | None:
    """The id of a finished run whose tags include ``same``, if any."""
    if not same:
        return None
    first, value = next(iter(same.items()))
    runs = client.search_runs([experiment_id],
                              filter_string=f"tags.`{first}` = '{value}' and "
                              "attributes.status = 'FINISHED'", max_results=50)
    for run in runs:
        if all(run.data.tags.get(k) == v for k, v in same.items()):
            return run.info.run_id
    return None


def log_run(tracker: Tracker, content: RunContent) -> dict[str, Any]:
    """Log one run (parameters, metrics, tags, the summary artifact), unless a finished run
    with the tags ``content.same`` logged it already.

    Parameters
    ----------
    tracker : Tracker
        From :func:`connect`.
    content : RunContent
        From :func:`train_run` or :func:`retrain_run`.

    Returns
    -------
    dict
        ``tracking_uri``, ``experiment``, ``experiment_id``, ``run_id`` and ``logged``
        (False when an earlier run had logged the same result).

    Raises
    ------
    TrackingError
        If MLflow fails (a server that does not answer, a refused request): a run
        half-logged is marked failed where the server lets it.
    """
    client = tracker.client
    try:
        with _no_stdout():
            experiment_id = _experiment_id(client, tracker.experiment)
            run_id = _logged_before(client, experiment_id, content.same)
            logged = run_id is None
            if logged:
                run_id = _new_run(client, experiment_id, content)
    except TrackingError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever MLflow raises, the model is safe
        raise TrackingError(f"MLflow could not log the run at {tracker.uri}: "
                            f"{_one_line(exc)}") from exc
    logger.info("MLflow run %s in experiment %s (%s)%s", run_id, tracker.experiment,
                tracker.uri, "" if logged else ": logged before")
    return {"tracking_uri": tracker.uri, "experiment": tracker.experiment,
            "experiment_id": experiment_id, "run_id": run_id, "logged": logged}


def _new_run(client: Any, experiment_id: str, content: RunContent) -> str:
    from mlflow.entities import Metric, Param, RunTag

    run = client.create_run(experiment_id, run_name=content.name)
    run_id = run.info.run_id
    try:
        now = int(time.time() * 1000)
        client.log_batch(run_id,
                         metrics=[Metric(k, v, now, 0) for k, v in content.metrics.items()],
                         params=[Param(k, v) for k, v in content.params.items()],
                         tags=[RunTag(k, v) for k, v in content.tags.items()])
        client.log_dict(run_id, content.summary, SUMMARY_ARTIFACT)
    except BaseException:
        try:
            client.set_terminated(run_id, "FAILED")
        except Exception:  # noqa: BLE001 - the server is gone: the first error says why
            logger.debug("could not mark MLflow run %s failed", run_id, exc_info=True)
        raise
    client.set_terminated(run_id, "FINISHED")
    return run_id


@contextmanager
def _tracking_uri(uri: str) -> Iterator[None]:
    """MLflow's fluent API (``Model.log``) at ``uri`` for the block, the caller's URI after."""
    import mlflow

    before = mlflow.get_tracking_uri() if mlflow.is_tracking_uri_set() else None
    mlflow.set_tracking_uri(uri)
    try:
        yield
    finally:
        mlflow.set_tracking_uri(before)


def _quoted(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def register_champion(tracker: Tracker, run_id: str, model_url: str, name: str, *,
                      alias: str = CHAMPION_ALIAS,
                      storage_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Log a new champion in its run with the ebf flavor, register it in MLflow's Model
    Registry and point ``alias`` at it; once per run.

    Parameters
    ----------
    tracker : Tracker
        From :func:`connect`; its tracking URI is the Model Registry's too.
    run_id : str
        The run of the registry version (:func:`log_run`).
    model_url : str
        The version's model directory (:meth:`pipelines.registry.store.Registry.model_path`).
    name : str
        The registered model's name (created if absent).
    alias : str, default=CHAMPION_ALIAS
    storage_options : mapping, optional
        fsspec options of ``model_url``.

    Returns
    -------
    dict
        ``name``, ``version`` (the Model Registry's), ``alias``, ``model_uri``
        (``models:/<name>@<alias>``) and ``logged`` (False when a version of ``name`` from
        this run existed: only the alias is set).

    Raises
    ------
    TrackingError
        If MLflow fails; the ebf registry is untouched.
    """
    from ebf.mlflow import log_model

    client = tracker.client
    try:
        found = client.search_model_versions(
            f"name = {_quoted(name)} and run_id = {_quoted(run_id)}")
        if found:
            version = str(found[0].version)
        else:
            with _tracking_uri(tracker.uri), _no_stdout():
                info = log_model(model_url, MODEL_ARTIFACT, run_id=run_id,
                                 registered_model_name=name, storage_options=storage_options)
            version = str(info.registered_model_version)
        client.set_registered_model_alias(name, alias, version)
    except Exception as exc:  # noqa: BLE001 - whatever MLflow raises, the model is safe
        raise TrackingError(f"{REGISTER_FAILED} as {name!r} at {tracker.uri}: "
                            f"{_one_line(exc)}") from exc
    logger.info("MLflow Model Registry: %s version %s, alias %s (run %s)", name, version,
                alias, run_id)
    return {"name": name, "version": int(version), "alias": alias,
            "model_uri": f"models:/{name}@{alias}", "logged": not found}


# ----------------------------------------------------------------------- what a run holds


def _leaves(tree: Mapping[str, Any], *prefix: str) -> Iterator[tuple[tuple[str, ...], Any]]:
    for key, value in tree.items():
        if isinstance(value, Mapping):
            yield from _leaves(value, *prefix, str(key))
        else:
            yield (*prefix, str(key)), value


def _params(tree: Mapping[str, Any], *prefix: str) -> dict[str, str]:
    """The leaves of ``tree`` as MLflow parameters (text; None left out)."""
    return {metric_key(*path): _text(v) for path, v in _leaves(tree, *prefix) if v is not None}


def _text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    return str(value)


def _metrics(tree: Mapping[str, Any] | None, *prefix: str) -> dict[str, float]:
    """The numeric leaves of ``tree`` as MLflow metrics (booleans, None and text left out)."""
    return {metric_key(*path): float(v) for path, v in _leaves(tree or {}, *prefix)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


def train_run(summary: Mapping[str, Any]) -> RunContent:
    """The MLflow run of an ``ebf train``, from its ``--json`` summary.

    Parameters
    ----------
    summary : mapping
        What ``ebf train --json`` prints (JSON-ready): the training metadata
        (:meth:`pipelines.train.TrainResult.metadata`), ``model_url``, ``model_hash``,
        ``class``, ``branches`` and ``baseline``.

    Returns
    -------
    RunContent
        Parameters: ``data``, ``target``, ``task``, ``rows``, ``n_partitions``,
        ``n_features``, ``ebf_version``, the estimator's ``params`` and the calibration
        ``method`` and ``fraction``. Metrics: ``branches``, ``seconds/<phase>`` of the fit
        (``seconds/fit`` the total), the recalibration's ``calibration/seconds`` and
        ``calibration/<model>/knots`` and ``max_deviation``; with a baseline,
        ``baseline/subsamples`` and ``baseline/seconds/<phase>``. Tags: ``ebf.command``,
        ``ebf.model_url``, ``ebf.model_hash``, ``ebf.class`` (and ``ebf.baseline_url``).

    Examples
    --------
    >>> run = train_run({"model_url": "/models/m", "model_hash": "ab", "class": "EBF",
    ...                  "branches": 4, "data": "d", "target": "y", "task": "regression",
    ...                  "rows": 100, "n_partitions": 1, "features": ["a", "b"],
    ...                  "params": {"n_estimators": 3}, "timings": {"fit": 1.5},
    ...                  "calibration": {"method": "none"}, "baseline": None})
    >>> run.name, run.params["n_estimators"], run.metrics
    ('train m', '3', {'branches': 4.0, 'seconds/fit': 1.5})
    """
    s = dict(summary)
    calibration = dict(s.get("calibration") or {})
    params = {
        **_params({k: s.get(k) for k in ("data", "target", "task", "rows", "n_partitions")}),
        "n_features": str(len(s.get("features") or [])),
        **_params({k: s.get(k) for k in ("ebf_version",)}),
        **_params(s.get("params") or {}),
        **_params({k: calibration.get(k) for k in ("method", "fraction")}, "calibration"),
    }
    metrics = {"branches": float(s["branches"]), **_metrics(s.get("timings"), "seconds"),
               **_metrics({k: v for k, v in calibration.items() if k != "fraction"},
                          "calibration")}
    tags = {"ebf.command": "train", "ebf.model_url": s["model_url"],
            "ebf.model_hash": s["model_hash"], "ebf.class": s["class"]}
    baseline = s.get("baseline")
    if baseline:
        metrics.update(_metrics({"subsamples": baseline.get("subsamples"),
                                 "seconds": baseline.get("timings")}, "baseline"))
        tags["ebf.baseline_url"] = baseline["model_url"]
    name = f"train {posixpath.basename(s['model_url'].rstrip('/'))}"
    return RunContent(name, params, metrics, tags, s)


def _drift_metrics(drift: Mapping[str, Any] | None) -> dict[str, float]:
    """The drift check's numbers: the smallest eq. 11 probability of a tested split, the
    counts of tested and failing splits, the branch shares' chi-square and p-value, the
    replicated gain of a refit trunk and the rows analysed."""
    if not drift:
        return {}
    tested = [s["probability"] for s in drift.get("splits") or []
              if s.get("status") == "counted" and s.get("probability") is not None]
    return _metrics({
        "min_split_probability": min(tested) if tested else None,
        "tested_splits": len(tested), "failing_splits": len(drift.get("failing") or []),
        **{k: drift.get(k) for k in ("share_statistic", "share_pvalue", "replicated_gain",
                                     "n_rows")}}, "drift")


def retrain_run(summary: Mapping[str, Any], *, registry: str,
                options: Mapping[str, Any] | None = None) -> RunContent:
    """The MLflow run of an ``ebf retrain``, from its ``--json`` summary.

    Parameters
    ----------
    summary : mapping
        What ``ebf retrain --json`` prints (JSON-ready): ``version``, ``decision``, ``action``,
        ``model_url`` and the version's ``record`` (a re-run's too: it reports the version
        it found).
    registry : str
        The registry's URL (``Registry.url``).
    options : mapping, optional
        The run's options that the record does not hold (``holdout``, ``drift_threshold``,
        ``drift_correction``, ``refit_on``, ``tolerances``...), logged as parameters.

    Returns
    -------
    RunContent
        Parameters: ``registry``, ``name``, ``version``, ``parent``, ``data`` and
        ``data_rows`` (the new window), ``target``, ``task``, ``n_features``,
        ``code_version``, ``train_options/<option>`` and ``options``. Metrics: the holdout
        scores ``challenger/<score>`` and ``champion/<score>`` (``n`` and every score
        record of the task, :data:`basics.scores.SCORES`, by its name), the gate's
        ``gate/<metric>/limit``, the drift check's ``drift/...`` (smallest split
        probability, tested and failing splits, branch-share p-value...) and
        ``seconds/<phase>`` (``seconds/total``: the whole run). Tags: ``ebf.command``,
        ``ebf.model_url``, ``ebf.model_hash``, ``ebf.registry``, ``ebf.registry_version``,
        ``ebf.decision`` (trained / promoted / kept), ``ebf.action`` (train / update /
        refit), ``ebf.drift``, ``ebf.reason`` and ``ebf.key`` (the inputs' key).
    """
    s = dict(summary)
    rec = s["record"]
    lineage = rec.get("lineage") or {}
    lp = lineage.get("params") or {}
    new = lineage.get("new_data") or {}
    held = lineage.get("holdout") or {}
    params = _params({
        "registry": registry, "name": rec.get("name"), "version": s["version"],
        "parent": lineage.get("parent"), "data": new.get("path"), "data_rows": new.get("rows"),
        "holdout_data": (held.get("data") or {}).get("path"), "target": lp.get("target"),
        "task": lp.get("task"), "n_features": len(lp.get("features") or []),
        "code_version": lineage.get("code_version"),
        "train_options": lp.get("train_options") or {}, **dict(options or {})})
    gate = (rec.get("gate") or {}).get("checks") or {}
    metrics = {**_metrics(rec.get("metrics")),
               **_metrics({k: {"limit": c.get("limit")} for k, c in gate.items()}, "gate"),
               **_drift_metrics(rec.get("drift")),
               **_metrics({**(rec.get("timings") or {}), "total": rec.get("seconds")},
                          "seconds")}
    drift = (rec.get("drift") or {}).get("decision")
    tags = {"ebf.command": "retrain", "ebf.model_url": s["model_url"],
            "ebf.model_hash": rec.get("model_hash"), "ebf.registry": registry,
            "ebf.registry_version": str(s["version"]), "ebf.decision": s["decision"],
            "ebf.action": s["action"], "ebf.drift": drift, "ebf.reason": rec.get("reason"),
            "ebf.key": rec.get("key")}
    tags = {k: str(v) for k, v in tags.items() if v is not None}
    same = {k: tags[k] for k in ("ebf.key", "ebf.registry", "ebf.model_hash") if k in tags}
    name = f"{rec.get('name', 'ebf')} v{s['version']}"
    return RunContent(name, params, metrics, tags, s, same if len(same) == 3 else {})
