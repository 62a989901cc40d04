"""Scheduled retraining into a model registry: update or refit, then a validation gate.

:func:`retrain` takes a registry (:mod:`pipelines.registry.store`) and a new window of data:

1. **Inputs.** The window's Parquet files are listed with their footer row counts and
   content hashes (:func:`pipelines.registry.lineage.data_identity`). The hashes and the
   options make the run's key: if a version with that key exists, the run is a no-op that
   reports it.
2. **Version 1.** On an empty registry, an EBF is trained on the window
   (:func:`pipelines.train.train`, with ``train_options``) and promoted.
3. **Otherwise** the current version (the champion) is loaded and the window is checked
   against its features and target. The champion is scored on the holdout (below), and
   the drift check decides, two kinds of test in one family at the family-wise level
   ``drift_threshold``: the trunk-drift check (:func:`ebf.trunk_drift`, Taddy et al. 2015
   eq. 6-11 on a sample of the window) and, with ``performance_drift``, the holdout-score
   test (:func:`ebf.diagnostics.performance.performance_drift`: is the champion's NLPD or
   log loss on the holdout worse than on its own holdout when it was made, by more than
   ``performance_tolerance``?), joined by :func:`ebf.with_performance`:

   - ``update``: the champion's Mondrian branches are extended online with the window's rows
     under its trunk (Dask ``partial_fit``), and the model is recalibrated on the most recent
     rows as at training (``calibrate``). The update starts on the workers before the
     decision, while the champion is scored (:mod:`pipelines.registry.update`): only the
     branches the rows reach are loaded and written, each on a worker, into a stage in the
     registry (:meth:`~pipelines.registry.store.Registry.scratch`); the others are carried
     over as they are (their shard files linked);
   - ``refit`` (a test fired): a new model on all the data of the lineage plus the window
     (``refit_on="all"``) or on the window alone (``"window"``), with the champion's
     training options. A model that cannot be updated (CART or predict-only branches) is
     always refit.
4. **Gate.** Champion and challenger are scored on the same holdout: the most recent
   ``holdout`` fraction of the window (kept out of the challenger's training) or
   ``holdout_data``. The challenger is promoted unless it is worse than the champion by more
   than the tolerances: RMSE by a relative ``rmse``, NLPD by ``nlpd``, the maximum
   central calibration gap by ``max_calibration_gap`` and the maximum one-sided gap (the
   fraction of targets below a predictive quantile, at 5%..95%) by ``max_one_sided_gap``
   (classifiers: log loss by ``log_loss``,
   accuracy by ``accuracy``).
5. **Version.** The challenger is written as a new version either way, with its metrics,
   the decision and its lineage (parent version, data with row counts and hashes, code
   version, parameters); the ``current`` pointer moves only on promotion.

The whole run holds the registry's lock: a concurrent run fails at once with a clear
message, and a killed run leaves the registry as it was (a version appears atomically; the
pointer is replaced atomically after it).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from numbers import Real
from typing import Any

import dask.dataframe as dd
import distributed

from basics.familywise import check_correction
from basics.locations import check_location
from basics.scores import SCORES, gate_check, scores_of
from basics.versions import library_version
from cluster import current_client
from ebf.artifact import FORMAT_VERSION
from ebf.dask.calibration import recalibrate
from ebf.dask.client import PhaseReport, Phases
from ebf.diagnostics import DEFAULT_THRESHOLD, performance, trunk_drift, with_performance
from ebf.learners import get_learner
from pipelines.io import read_dataset
from pipelines.options import TrainOptions
from pipelines.registry.lineage import data_identity, inputs_key
from pipelines.registry.store import Registry
from pipelines.registry.update import discard_update, finish_update, start_update
from pipelines.registry.window import Window, carried_rows, cut_window
from pipelines.schema import check_schema
from pipelines.scoring.tasks import evaluate_model
from pipelines.train import infer_task, train

__all__ = ["DEFAULT_HOLDOUT", "DEFAULT_PERFORMANCE_TOLERANCE", "DEFAULT_TOLERANCES", "EXIT_KEPT",
           "VERSION_1_OPTIONS", "RetrainResult", "gate", "retrain"]

logger = logging.getLogger(__name__)

#: Share of the window's most recent rows held out to compare champion and challenger.
DEFAULT_HOLDOUT = 0.1
#: How much worse than the champion the challenger may be and still be promoted: the
#: tolerances of the score records that have one (:data:`basics.scores.SCORES`; RMSE
#: relative, the others absolute).
DEFAULT_TOLERANCES = {s.name: s.tolerance for s in SCORES.values() if s.tolerance is not None}
#: Rows of the window the drift check samples (eq. 11 needs a sample, not every row).
DRIFT_ROWS = 200_000
#: Worsening of the champion's holdout NLPD / log loss the holdout-score test lets pass.
DEFAULT_PERFORMANCE_TOLERANCE = performance.DEFAULT_TOLERANCE
#: Exit status of ``ebf retrain`` when the champion is kept.
EXIT_KEPT = 10
#: The training options of version 1 where none are given: Mondrian branches (which later
#: versions extend online), recalibrated on the most recent rows when they are regressors.
VERSION_1_OPTIONS = TrainOptions(branch="mondrian", calibrate="auto")


@dataclass
class RetrainResult:
    """What :func:`retrain` did.

    Attributes
    ----------
    version : int
        The version written (or found, for a re-run).
    decision : {"trained", "promoted", "kept"}
    action : {"train", "update", "refit"}
    record : dict
        The version's record (``version.json``).
    reused : bool
        True when the run was a no-op that found an existing version with the same inputs.
    """

    version: int
    decision: str
    action: str
    record: dict
    reused: bool = False
    timings: dict = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        """0 when the challenger is current (promoted, or version 1), :data:`EXIT_KEPT`."""
        return EXIT_KEPT if self.decision == "kept" else 0


def _metrics(result: Mapping[str, Any]) -> dict[str, float]:
    """The rows and every score of the result's task (:func:`basics.scores.scores_of`; the
    RPS too for an integer-valued target)."""
    scores = scores_of(result["task"], bool(result.get("integer_target")))
    return {"n": int(result["n"]), **{s.name: float(result[s.name])
                                      for s in scores if s.name in result}}


def gate(champion: Mapping[str, float], challenger: Mapping[str, float],
         tolerances: Mapping[str, float]) -> tuple[bool, dict]:
    """Whether the challenger may replace the champion, and the check of every metric.

    Parameters
    ----------
    champion, challenger : mapping
        Holdout metrics (``rmse``, ``nlpd``, ``max_calibration_gap``,
        ``max_one_sided_gap`` for regressors;
        ``log_loss``, ``accuracy`` for classifiers).
    tolerances : mapping
        Score name to tolerance (:data:`DEFAULT_TOLERANCES` keys): each score worsens in
        the direction its record (:data:`basics.scores.SCORES`) says is worse, relative to the
        champion's value if the record says so (``rmse``), else absolute.

    Returns
    -------
    promote : bool
    checks : dict
        Metric -> ``champion``, ``challenger``, ``limit``, ``ok``.

    Examples
    --------
    >>> ok, checks = gate({"rmse": 10.0, "nlpd": 3.0, "max_calibration_gap": 0.02},
    ...                   {"rmse": 10.05, "nlpd": 3.02, "max_calibration_gap": 0.01},
    ...                   DEFAULT_TOLERANCES)
    >>> ok, checks["nlpd"]["ok"]
    (False, False)
    """
    checks = {}
    for name, tol in tolerances.items():
        if name not in champion or name not in challenger:
            continue
        a, b = float(champion[name]), float(challenger[name])
        limit, ok = gate_check(name, a, b, tol)
        checks[name] = {"champion": a, "challenger": b, "limit": limit, "ok": ok}
    return all(c["ok"] for c in checks.values()), checks


def _dask_class(model: Any) -> type:
    from ebf import dask as ebf_dask

    for name in ("DaskEmpiricalBayesianForestRegressor", "DaskEmpiricalBayesianForestClassifier"):
        cls = getattr(ebf_dask, name)
        if cls._local_class is type(model):
            return cls
    raise TypeError(f"the registry's model is a {type(model).__name__}; retrain updates "
                    "Empirical Bayesian Forests.")


@dataclass(frozen=True)
class _DriftRule:
    """The options of the drift check: family-wise level and correction, and whether (and
    with which tolerance) the holdout-score test joins the split tests."""

    threshold: float
    correction: str
    performance: bool
    tolerance: float


def _drift(model: Any, window: Window, features: list[str], target: str,
           rule: _DriftRule, seed: int, client: distributed.Client) -> Any:
    """The trunk-drift report of the window's fit rows."""
    frame = window.fit[[*features, target]]
    if window.n_rows > DRIFT_ROWS:  # n_rows bounds the fit rows: at most DRIFT_ROWS sampled
        frame = frame.sample(frac=DRIFT_ROWS / window.n_rows, random_state=seed)
    sample = client.compute(frame).result()
    return trunk_drift(model, sample[features], sample[target], threshold=rule.threshold,
                       correction=rule.correction, random_state=seed)


def _holdout_kind(fraction: float | None) -> str:
    return ("a separate dataset" if fraction is None
            else f"the most recent {fraction:g} of its window")


def _reference(parent_record: Mapping[str, Any], fraction: float | None,
               score: str) -> tuple[float, int] | str:
    """The champion's mean ``score`` on its own holdout when it was made, and its rows
    (its record's challenger metrics); or why there is no comparable one: its holdout must
    be cut as this run's is (the same most recent share of a window, or both separate
    datasets), else the two means differ by the rows they cover."""
    own = (parent_record.get("metrics") or {}).get("challenger") or {}
    if own.get(score) is None or not own.get("n"):
        return f"the champion's record has no holdout {score}"
    then = (parent_record.get("lineage") or {}).get("holdout") or {}
    if then.get("fraction") != fraction:
        return (f"the champion's holdout was {_holdout_kind(then.get('fraction'))}, this "
                f"run's is {_holdout_kind(fraction)}")
    return float(own[score]), int(own["n"])


def _with_holdout_test(drift: Any, rule: _DriftRule, parent_record: Mapping[str, Any],
                       fraction: float | None, held: Mapping[str, Any],
                       seed: int | None) -> tuple[Any, str]:
    """The drift report with the holdout-score test in its family (``rule.performance``),
    and a note for the reason when the test could not run."""
    if not rule.performance:
        return drift, ""
    score = "nlpd" if held["task"] == "regression" else "log_loss"
    reference = _reference(parent_record, fraction, score)
    if isinstance(reference, str):
        logger.warning("retrain: the holdout score is not tested: %s", reference)
        return drift, f"; holdout {score} not tested: {reference}"
    test = performance.performance_drift(
        held["row_scores"], *reference, score=score, level=rule.threshold,
        tolerance=rule.tolerance, random_state=seed)
    return with_performance(drift, test), ""


def _recalibrate(model: Any, window: Window, features: list[str], target: str,
                 options: TrainOptions, client: distributed.Client) -> dict:
    """Learn the model's PIT map on the window's calibration slice (if it has one)."""
    if window.cal is None:
        return {"method": "none"}
    recalibrate(model, window.cal[features], window.cal[target], client=client)
    return {"method": options.calibrate, "fraction": float(options.calibration_fraction),
            "knots": model.recalibration_.n_knots}


def _fit(data: dd.DataFrame, target: str, features: list[str], options: TrainOptions,
         client: distributed.Client, progress: PhaseReport | None,
         storage_options: Any) -> Any:
    """:func:`pipelines.train.train` on rows already cut (no calibration of its own)."""
    return train(data, target, options.replace(calibrate="none"), features=features,
                 client=client, progress=progress, storage_options=storage_options)


def retrain(
    registry: str,
    data: str,
    *,
    name: str = "ebf",
    target: str | None = None,
    features: Sequence[str] | None = None,
    holdout: float | None = DEFAULT_HOLDOUT,
    holdout_data: str | None = None,
    train_options: TrainOptions | Mapping[str, Any] | None = None,
    drift_threshold: float = DEFAULT_THRESHOLD,
    tolerances: Mapping[str, float] | None = None,
    refit_on: str = "all",
    drift_correction: str = "holm",
    performance_drift: bool = True,
    performance_tolerance: float = DEFAULT_PERFORMANCE_TOLERANCE,
    client: distributed.Client | None = None,
    progress: PhaseReport | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> RetrainResult:
    """Retrain the registry's model on a new window of data (see the module docstring).

    Parameters
    ----------
    registry : str
        Registry root (local path or fsspec URL).
    data : str
        The new window: a Parquet file, directory or glob.
    name : str, default="ebf"
        The model's name in the registry (``models/NAME``).
    target, features :
        Version 1 only (later versions use the recorded ones): the target column and the
        feature columns (default: every other column).
    holdout : float in (0, 1), default=0.1
        Most recent share of the window held out for the gate (ignored with
        ``holdout_data``).
    holdout_data : str, optional
        A separate labelled dataset for the gate; the whole window is then trained on.
    train_options : TrainOptions or mapping, optional
        How version 1 is trained; a mapping (e.g. a scheduler's JSON) names fields of
        :class:`pipelines.options.TrainOptions`, the others from
        :data:`VERSION_1_OPTIONS` (Mondrian branches, ``calibrate="auto"``). Later versions
        refit with the options version 1 recorded.
    drift_threshold : float, default=ebf.diagnostics._drift.DEFAULT_THRESHOLD
        The family-wise level of the drift check: refit when a stored split's probability
        of still holding (or the holdout-score test's p-value) is below it, after the
        ``drift_correction`` for testing every split and the holdout score at once: the
        chance of a false alarm on a stationary window.
    drift_correction : {"holm", "bonferroni", "none"}, default="holm"
        How the drift check's tests (the trunk's splits and the holdout score) are tested
        together (:func:`basics.familywise.rejected`).
    performance_drift : bool, default=True
        Also refit when the champion's holdout score (NLPD, or log loss) is worse than on
        its own holdout when it was made (the family-wise level covers both tests).
    performance_tolerance : float, default=DEFAULT_PERFORMANCE_TOLERANCE (0.01)
        A worsening of the mean score that does not count (nats per row).
    tolerances : mapping, optional
        Overrides of :data:`DEFAULT_TOLERANCES`.
    refit_on : {"all", "window"}, default="all"
        Data of a refit: the lineage's data plus the window, or the window alone.
    client : distributed.Client, optional
    progress : callable ``progress(phase, done, total)``, optional
    storage_options : dict, optional
        fsspec options of the registry and the data.

    Returns
    -------
    RetrainResult

    Raises
    ------
    pipelines.registry.store.RegistryBusyError
        If another run holds the registry (before any work).
    pipelines.schema.SchemaError
        If the window lacks the model's columns (before any row is read).
    """
    t0 = time.perf_counter()
    if refit_on not in ("all", "window"):
        raise ValueError(f"refit_on must be 'all' or 'window'; got {refit_on!r}.")
    if holdout_data is None and not (holdout is not None and 0 < holdout < 1):
        raise ValueError(f"holdout must be a fraction in (0, 1) (or pass holdout_data); got "
                         f"{holdout!r}.")
    options = (train_options if isinstance(train_options, TrainOptions)
               else TrainOptions.from_dict(train_options or {}, VERSION_1_OPTIONS))
    tolerances = {**DEFAULT_TOLERANCES, **dict(tolerances or {})}
    check_correction(drift_correction)  # before any work
    if not isinstance(performance_drift, bool):
        raise ValueError(f"performance_drift must be True or False; got "
                         f"{performance_drift!r}.")
    if isinstance(performance_tolerance, bool) or not isinstance(performance_tolerance, Real) \
            or not 0 <= performance_tolerance < math.inf:
        raise ValueError(f"performance_tolerance must be a finite number >= 0 (nats per row); "
                         f"got {performance_tolerance!r}.")
    rule = _DriftRule(drift_threshold, drift_correction, performance_drift,
                      float(performance_tolerance))
    reg = Registry(registry, name=name, storage_options=storage_options)
    check_location(reg.url, "the model registry", storage_options=storage_options,
                   inputs={"the new data": data, "the holdout data": holdout_data})
    window_id = data_identity(data, storage_options)
    holdout_id = None if holdout_data is None else data_identity(holdout_data, storage_options)
    # the key of a run: its inputs and the options that change its result; target,
    # features and train options only change version 1 (later ones reuse the recorded)
    run = {"name": name, "holdout": None if holdout_data is not None else holdout,
           "drift_threshold": drift_threshold, "tolerances": tolerances, "refit_on": refit_on}
    # keys of runs with the defaults are those of earlier runs
    for name, value, default in (("drift_correction", drift_correction, "holm"),
                                 ("performance_drift", performance_drift, True),
                                 ("performance_tolerance", rule.tolerance,
                                  DEFAULT_PERFORMANCE_TOLERANCE)):
        if value != default:
            run[name] = value
    later_key = inputs_key([window_id, holdout_id], run)
    first_key = inputs_key([window_id, holdout_id], {
        **run, "target": target, "features": list(features or []) or None,
        "options": options.to_dict()})
    client = current_client(client)
    with reg.lock():
        found = reg.find(first_key) or reg.find(later_key)  # versions count from 1
        if found is not None:
            record = reg.record(found)
            logger.info("retrain: the same inputs made version %d; nothing to do", found)
            return RetrainResult(found, record["decision"], record["action"], record,
                                 reused=True)
        parent = reg.current()
        key = first_key if parent is None else later_key
        lineage = {"parent": parent, "new_data": window_id,
                   "holdout": ({"data": holdout_id} if holdout_id is not None
                               else {"fraction": holdout}),
                   "code_version": library_version()}
        with ExitStack() as stack:
            if parent is None:
                model, meta, record = _first_version(data, target, features, holdout,
                                                     holdout_data, options, client, progress,
                                                     storage_options)
                lineage["data"] = [window_id]
            else:
                scratch = stack.enter_context(reg.scratch())
                model, meta, record = _challenger(reg, parent, data, holdout, holdout_data,
                                                  window_id, rule, tolerances, refit_on,
                                                  client, progress, storage_options, scratch)
                lineage["data"] = record.pop("data")
            lineage["params"] = meta["lineage_params"]
            del meta["lineage_params"]
            record.update(key=key, lineage=lineage,
                          seconds=round(time.perf_counter() - t0, 3))
            promote = record["decision"] != "kept"

            def write(model_dir: str) -> None:
                from ebf.artifact import save

                # a staged model (its reader) is linked into place, file by file
                save(model, model_dir, metadata=meta, storage_options=storage_options)

            version = reg.publish(write, record, promote=promote)
    logger.info("retrain: version %d, %s (%s)", version, record["decision"], record["action"])
    return RetrainResult(version, record["decision"], record["action"], reg.record(version),
                         timings={"total": time.perf_counter() - t0})


def _first_version(data: str, target: str | None, features: Sequence[str] | None,
                   holdout: float | None, holdout_data: str | None, options: TrainOptions,
                   client: distributed.Client, progress: PhaseReport | None,
                   storage_options: Any) -> tuple[Any, dict, dict]:
    if target is None:
        raise ValueError("the registry is empty: version 1 needs the target column "
                         "(target=, CLI --target).")
    chosen, info = check_schema(data, target, features, storage_options=storage_options)
    if options.task == "auto":
        ddf = read_dataset(data, [target], storage_options=storage_options)
        options = options.replace(task=infer_task(info, ddf[target], client=client))
    if options.calibrate == "auto":
        options = options.replace(calibrate="recent" if options.task == "regression"
                                  else "none")
    window = cut_window(data, [*chosen, target], holdout, holdout_data, options, client,
                        storage_options)
    res = _fit(window.fit, target, chosen, options, client, progress, storage_options)
    calibration = _recalibrate(res.model, window, chosen, target, options, client)
    metrics = _metrics(evaluate_model(res.model, window.holdout, target=target,
                                      features=chosen, client=client))
    meta = {**res.metadata(), "data": data, "calibration": calibration}
    meta["lineage_params"] = {"target": target, "features": chosen, "task": res.task,
                              "train_options": options.to_dict()}
    record = {"decision": "trained", "action": "train", "reason": "empty registry",
              "metrics": {"challenger": metrics, "champion": None}, "gate": None,
              "drift": None, "timings": {k: round(v, 3) for k, v in res.timings.items()}}
    return res.model, meta, record


def _challenger(reg: Registry, parent: int, data: str, holdout: float | None,
                holdout_data: str | None, window_id: dict, drift_rule: _DriftRule,
                tolerances: dict, refit_on: str, client: distributed.Client,
                progress: PhaseReport | None, storage_options: Any,
                scratch: str) -> tuple[Any, dict, dict]:
    """The challenger (a model, or the staged model's reader), its metadata and record.

    A champion that can be updated is updated on the workers from the start, into the
    ``scratch`` stage, while this process scores it on the holdout and runs the drift check
    (:mod:`pipelines.registry.update`); a refit decision drops that update."""
    from ebf.artifact import open_model

    parent_record = reg.record(parent)
    params = parent_record["lineage"]["params"]
    target, features = params["target"], list(params["features"])
    recorded = params["train_options"]
    options = TrainOptions.from_dict({k: v for k, v in recorded.items()
                                      if k in TrainOptions.names()}, VERSION_1_OPTIONS)
    check_schema(data, target, features, storage_options=storage_options)
    if holdout_data is not None:
        check_schema(holdout_data, target, features, storage_options=storage_options)
    phases = Phases(None)
    with phases("load"):
        reader = open_model(reg.verified_model(parent), storage_options)
        champion = reader.load()
        user = reader.manifest.get("metadata", {}).get("user")
        meta = dict(user) if isinstance(user, dict) else {}
    columns = [*features, target]
    with phases("window"):
        window = cut_window(data, columns, holdout, holdout_data, options, client,
                            storage_options, persist=True)
    online = get_learner(champion.branch).online
    seen = list(parent_record["lineage"]["data"])
    update = None
    if online and not champion.compact_:
        with phases("carried"):
            rows = dd.concat([*carried_rows(parent_record, columns, options, client,
                                        storage_options), window.fit])
        if reader.format_version == FORMAT_VERSION:  # else updated in memory, below
            update = start_update(client, champion, reader, rows[features], rows[target],
                                  scratch, options.branch_memory, progress, storage_options)
    try:
        # the champion's holdout scores, row by row for the holdout-score test: before
        # the decision, while the workers update
        with phases("champion_score"):
            held = evaluate_model(champion, window.holdout, target=target, features=features,
                                  client=client, row_scores=True)
        with phases("drift"):
            drift = _drift(champion, window, features, target, drift_rule,
                           options.random_state, client)
    except BaseException:
        if update is not None:
            discard_update(update, wait=False)
        raise
    drift, note = _with_holdout_test(drift, drift_rule, parent_record,
                                     holdout if holdout_data is None else None, held,
                                     options.random_state)
    action, reason = drift.decision, drift.reason + note
    if action == "update" and (not online or champion.compact_):
        action = "refit"
        reason = (f"the champion's branch={champion.branch!r} forests cannot be extended "
                  "online" if not online
                  else "the champion is predict-only (compact)")
    t_fit = time.perf_counter()
    staged = None
    if action == "update":
        with phases("update"):
            if update is not None:
                staged, challenger, timings = finish_update(update, champion)
            else:
                challenger = reader.load()  # the champion stays as it is
                est = _dask_class(challenger).from_local(challenger, client=client,
                                                         branch_memory=options.branch_memory)
                est.partial_fit(rows[features], rows[target], progress=progress)
                timings = dict(est.fit_timings_)
        meta.update(rows=int(challenger.branch_sizes_.sum()), timings=timings)
        data_seen = [*seen, window_id]
    else:
        if update is not None:
            discard_update(update)
        old = [d["path"] for d in seen] if refit_on == "all" else []
        frames = [read_dataset(p, columns, storage_options=storage_options) for p in old]
        with phases("refit"):
            res = _fit(dd.concat([*frames, window.fit]) if frames else window.fit, target,
                       features, options, client, progress, storage_options)
        challenger, meta = res.model, res.metadata()
        data_seen = [*(seen if refit_on == "all" else []), window_id]
    with phases("recalibrate"):
        meta["calibration"] = _recalibrate(challenger, window, features, target, options,
                                           client)
    meta.update(data=data, trained_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    fit_seconds = time.perf_counter() - t_fit
    with phases("challenger_score"):
        scores = {"champion": _metrics(held),
                  "challenger": _metrics(evaluate_model(challenger, window.holdout,
                                                        target=target, features=features,
                                                        client=client))}
    if staged is not None:  # the head, recalibrated like the challenger
        with phases("stage"):
            staged.__dict__.update({k: v for k, v in challenger.__dict__.items()
                                    if k != "branches_"})
            challenger = update.stage.write(staged)
    promote, checks = gate(scores["champion"], scores["challenger"], tolerances)
    meta["lineage_params"] = params
    record = {"decision": "promoted" if promote else "kept", "action": action,
              "reason": reason, "metrics": scores,
              "gate": {"tolerances": tolerances, "checks": checks},
              "drift": drift.to_dict(),
              "timings": {"fit": round(fit_seconds, 3),
                          **{k: round(v, 3) for k, v in phases.timings.items()}},
              "data": data_seen}
    return challenger, meta, record
