"""The training job: a Parquet dataset in, a fitted Empirical Bayesian Forest out.

:func:`train` runs the steps of the data flow in ``docs/architecture.md`` on a Dask cluster:

1. **schema check** (:func:`pipelines.schema.check_schema`): footers only, before any row is
   read; every problem is reported at once, naming its column;
2. **task** (``task="auto"``, see :func:`infer_task`): regression or classification from the
   target's type (and, for an integer target, its number of distinct values);
3. **read** with projection (:func:`pipelines.io.read_dataset`): only the feature and target
   columns leave the files;
4. **fit** the Dask estimator (:mod:`ebf.dask`): summary and encoding passes, bin edges, the
   trunk level by level, rows moved to their branch, one task per branch; optionally also the
   sub-sample forest baseline (SSF) with as many sub-samples as the EBF has branches, so both
   fit the same number of equally sized tasks; how, is a :class:`pipelines.options.TrainOptions`
   (learner, trees, trunk size, budgets, recalibration, seed), checked before any work;
5. return the single-process models (``to_local()``), the timings and the training metadata
   that :func:`ebf.artifact.save` stores in the manifest; or, given ``out=``, write the
   models as they are fit: every branch task writes its shard from its worker
   (:func:`ebf.artifact.stage_model`), recalibration predicts from the staged shards, and
   the driver, which never holds a branch, writes the heads and moves each model into
   place whole (the CLI's way).

Library code: it logs and never prints; ``progress(phase, done, total)`` reports the long
phases (``summary``, ``encode``, ``trunk``, ``route``, ``branches``; the baseline's phases are
prefixed ``"baseline "``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

import dask.dataframe as dd
import distributed
import numpy as np
import pandas as pd

from basics.pit import MIN_ROWS
from basics.versions import library_version
from cluster import current_client
from ebf.calibration import min_training_rows
from ebf.dask.calibration import calibration_rows, recalibrate
from ebf.dask.client import PhaseReport
from ebf.learners import get_learner
from pipelines.footers import Footers, read_footers
from pipelines.io import Source, describe_source, read_columns
from pipelines.options import TrainOptions
from pipelines.schema import ColumnInfo, check_schema
from pipelines.sizing import SizePlan, check_partitions, model_budget, plan_model_size

__all__ = [
    "MAX_AUTO_CLASSES",
    "TrainResult",
    "ensemble_facts",
    "infer_task",
    "train",
]

logger = logging.getLogger(__name__)

#: ``task="auto"``: an integer target with at most this many distinct values is a class label.
MAX_AUTO_CLASSES = 20



@dataclass
class TrainResult:
    """What :func:`train` fitted.

    Attributes
    ----------
    model : EmpiricalBayesianForestRegressor, EmpiricalBayesianForestClassifier or ModelReader
        The fitted single-process model (``to_local()`` of the Dask estimator): save it with
        :func:`ebf.artifact.save`, predict with it locally or with :mod:`ebf.dask`. With
        ``out=``, the saved model, opened (:func:`ebf.artifact.open_model`).
    baseline : SubsampleForestRegressor, SubsampleForestClassifier, ModelReader or None
        The sub-sample forest, if ``baseline=True`` (opened from ``baseline_out=``).
    task : str
        ``"regression"`` or ``"classification"``.
    target : str
    features : list of str
    rows : int
        Training rows.
    n_partitions : int
        Partitions of the training input.
    data : str
        The dataset (path or URL; ``"<dask DataFrame>"`` for a collection).
    timings : dict of str to float
        Seconds per phase of the EBF fit (``fit`` the total), plus ``schema`` (the
        checks before it).
    baseline_timings : dict of str to float
        Seconds per phase of the baseline's fit (empty without a baseline).
    params : dict
        The estimator's parameters from the :class:`~pipelines.options.TrainOptions` (branch,
        trees, trunk limits, seed, ``branch_params``, ``compact``).
    size_plan : pipelines.sizing.SizePlan or None
        What ``model_memory`` chose (trees per branch, leaf size, the estimate).
    calibration : dict
        How the models were recalibrated: ``method`` (``"none"``, ``"recent"`` or
        ``"holdout"``), and with a method its ``fraction``, ``seconds`` and, under ``ebf``
        and ``ssf``, the ``knots`` and ``max_deviation`` (``max |R(p) - p|``) of each map.
    trained_utc : str
        When the fit finished, ``YYYY-MM-DDTHH:MM:SSZ``.
    """

    model: Any
    baseline: Any
    task: str
    target: str
    features: list[str]
    rows: int
    n_partitions: int
    data: str
    timings: dict[str, float]
    baseline_timings: dict[str, float] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    size_plan: Any = None
    calibration: dict[str, Any] = field(default_factory=lambda: {"method": "none"})
    trained_utc: str = ""

    @property
    def fit_seconds(self) -> float:
        """Wall time of the EBF fit (all its phases)."""
        return float(self.timings.get("fit", 0.0))

    def metadata(self, baseline: bool = False) -> dict[str, Any]:
        """Training metadata for ``ebf.artifact.save(..., metadata=...)``.

        Parameters
        ----------
        baseline : bool, default=False
            Describe the baseline (its timings and ``model: "ssf"``) instead of the EBF.

        Returns
        -------
        dict
            JSON-ready: ``data``, ``rows``, ``n_partitions``, ``features``, ``target``,
            ``task``, ``model`` (``"ebf"`` / ``"ssf"``), ``params``, ``timings``,
            ``calibration``, ``ebf_version``, ``trained_utc``.
            :func:`pipelines.report.evaluate.evaluate` reads the target from it.

        Examples
        --------
        >>> res = train("data/", "y", client=client)  # doctest: +SKIP
        >>> ebf.artifact.save(res.model, "model/", metadata=res.metadata())  # doctest: +SKIP
        """
        timings = self.baseline_timings if baseline else self.timings
        return {
            "data": self.data,
            "rows": int(self.rows),
            "n_partitions": int(self.n_partitions),
            "features": list(self.features),
            "target": self.target,
            "task": self.task,
            "model": "ssf" if baseline else "ebf",
            "params": _json_params(self.params),
            "timings": {k: round(float(v), 6) for k, v in timings.items()},
            "calibration": dict(self.calibration),
            "ebf_version": library_version(),
            "trained_utc": self.trained_utc,
        }


def ensemble_facts(model: Any) -> tuple[str, int]:
    """``(class name, parts)`` of a fitted ensemble, in memory or saved (a ``ModelReader``):
    parts are branches (EBF) or sub-sample forests (SSF).

    Examples
    --------
    >>> import numpy as np
    >>> from ebf import SubsampleForestRegressor
    >>> X = np.random.default_rng(0).random((60, 2))
    >>> ensemble_facts(SubsampleForestRegressor(n_estimators=2, n_subsamples=3).fit(X, X[:, 0]))
    ('SubsampleForestRegressor', 3)
    """
    from ebf.artifact import ModelReader

    if isinstance(model, ModelReader):
        return model.manifest["class"].rsplit(".", 1)[-1], model.n_parts
    return type(model).__name__, len(getattr(model, f"{type(model)._parts}_"))


def _json_params(params: Mapping[str, Any]) -> dict[str, Any]:
    return {k: (v if v is None or isinstance(v, (bool, int, float, str)) else str(v))
            for k, v in params.items()}


def _first_uniques(s: pd.Series, limit: int) -> pd.Series:
    """At most ``limit`` distinct non-null values of one partition."""
    values = pd.unique(s.dropna())[:limit]
    return pd.Series(values, dtype=s.dtype, name=s.name)


def infer_task(
    target: ColumnInfo,
    values: dd.Series | None = None,
    *,
    client: distributed.Client | None = None,
    max_classes: int = MAX_AUTO_CLASSES,
) -> str:
    """``task="auto"``: regression or classification from the target column.

    - ``float`` targets: regression;
    - ``boolean``, ``string`` and ``categorical`` targets: classification (labels);
    - ``integer`` targets: classification if they take at most ``max_classes`` distinct
      values (class codes such as 0/1/2), else regression (counts, minutes, ...). Counting
      reads the target column once (each partition sends at most ``max_classes + 1`` values).

    Pass ``task=`` explicitly to :func:`train` to override the rule.

    Parameters
    ----------
    target : ColumnInfo
        From :func:`pipelines.schema.check_schema`.
    values : dask.dataframe.Series, optional
        The target column; needed for an integer target.
    client : distributed.Client, optional
        For counting; the current client by default.
    max_classes : int, default=MAX_AUTO_CLASSES

    Returns
    -------
    str
        ``"regression"`` or ``"classification"``.

    Examples
    --------
    >>> from pipelines.schema import ColumnInfo
    >>> infer_task(ColumnInfo("y", "double", "float"))
    'regression'
    >>> infer_task(ColumnInfo("label", "string", "string"))
    'classification'
    """
    if target.kind == "float":
        return "regression"
    if target.kind in ("boolean", "string", "categorical"):
        return "classification"
    if target.kind != "integer":
        raise ValueError(f"target column {target.name!r} of kind {target.kind!r} is not usable")
    if values is None:
        raise ValueError(f"integer target {target.name!r}: pass its values to count classes")
    client = current_client(client)
    firsts = values.map_partitions(_first_uniques, max_classes + 1, meta=values._meta)
    distinct = pd.unique(client.compute(firsts).result())
    task = "classification" if len(distinct) <= max_classes else "regression"
    logger.info(
        "task auto: integer target %r has %s distinct values -> %s",
        target.name,
        len(distinct) if len(distinct) <= max_classes else f"more than {max_classes}",
        task,
    )
    return task


def _estimator_classes(task: str) -> tuple[type, type]:
    from ebf.dask import (
        DaskEmpiricalBayesianForestClassifier,
        DaskEmpiricalBayesianForestRegressor,
        DaskSubsampleForestClassifier,
        DaskSubsampleForestRegressor,
    )

    if task == "classification":
        return DaskEmpiricalBayesianForestClassifier, DaskSubsampleForestClassifier
    return DaskEmpiricalBayesianForestRegressor, DaskSubsampleForestRegressor


def _prefixed(progress: PhaseReport | None, prefix: str) -> PhaseReport | None:
    if progress is None:
        return None
    return lambda phase, done, total: progress(f"{prefix}{phase}", done, total)


def _rows(model: Any) -> int:
    sizes = getattr(model, "subsample_sizes_", None)
    if sizes is None:
        sizes = model.branch_sizes_
    return int(np.sum(sizes))


def _check_rows(footers: Footers, calibrate: str, fraction: float) -> None:
    """Enough rows to fit on and, with recalibration, to hold out (counted in the footers)."""
    need = min_training_rows(calibrate, fraction)
    if calibrate == "none":
        why = f"training needs at least {need} row: add rows"
    else:
        why = (f"training with calibrate={calibrate!r} needs at least {need} rows (a fraction "
               f"of {fraction:g} held out must hold {MIN_ROWS} rows, and one row is left to fit "
               "on): add rows, raise the calibration fraction, or train without "
               "recalibration (calibrate='none', ebf train --calibrate none)")
    footers.check_rows(need, why)


@dataclass
class _Inputs:
    """The checked input of a fit: its rows (projected), columns and where they came from."""

    ddf: dd.DataFrame
    features: list[str]
    target: str
    target_info: ColumnInfo
    footers: Footers | None
    where: str


def _read_inputs(data: Source, target: str, features: Sequence[str] | None,
                 storage_options: Mapping[str, Any] | None, allow_nulls: bool) -> _Inputs:
    """Schema check (footers only, before any row is read), then the projected read;
    ``allow_nulls``: the learner takes missing values."""
    footers = None if isinstance(data, dd.DataFrame) else read_footers(data, storage_options)
    chosen, target_info = check_schema(data, target, features, storage_options=storage_options,
                                       footers=footers, allow_nulls=allow_nulls)
    ddf = read_columns(data, [*chosen, target], storage_options)
    return _Inputs(ddf, list(chosen), target, target_info, footers, describe_source(data))


def _resolve(options: TrainOptions, inputs: _Inputs,
             client: distributed.Client) -> TrainOptions:
    """``task="auto"`` and ``calibrate="auto"`` decided; a recalibrated classifier refused."""
    task = options.task
    if task == "auto":
        task = infer_task(inputs.target_info, inputs.ddf[inputs.target], client=client)
    calibrate = options.calibrate
    if calibrate not in ("none", "auto") and task != "regression":
        raise ValueError(f"calibrate={calibrate!r} recalibrates regressors on held-out rows; "
                         f"the {task} of {inputs.target!r} is calibrated by "
                         "calibrate='auto' (or not: 'none').")
    return options.replace(task=task, calibrate=calibrate)


def _hold_out(ddf: dd.DataFrame, options: TrainOptions,
              client: distributed.Client) -> tuple[dd.DataFrame, dd.DataFrame | None]:
    """The rows to fit on and those held out for recalibration (None without it)."""
    if options.calibrate in ("none", "auto"):  # "auto" holds no row out
        return ddf, None
    fit, cal, _ = calibration_rows(ddf, options.calibrate, options.calibration_fraction,
                                   options.random_state, client)
    return fit, cal


def _plan_size(options: TrainOptions, ddf: dd.DataFrame, n_features: int) -> SizePlan | None:
    """What ``model_memory`` chooses (None without a budget or with ``min_samples_split``)."""
    if options.model_memory is None or options.min_samples_split is not None:
        return None
    budget, from_rows = model_budget(options.model_memory)
    plan = plan_model_size(budget, int(ddf.shape[0].compute()), n_features, options.branch,
                           n_estimators=options.n_estimators, compact=options.compact,
                           from_rows=from_rows)
    logger.info("%s", plan.message)
    return plan


def _estimator_params(options: TrainOptions, plan: SizePlan | None) -> dict[str, Any]:
    """The Dask estimator's parameters (also the ``params`` of the training metadata)."""
    params = {
        "branch": options.branch,
        "n_estimators": options.trees() if plan is None else plan.n_estimators,
        "trunk_max_leaves": options.trunk_leaves,
        "trunk_min_leaf_rows": options.min_leaf_rows,
        "branch_memory": options.branch_memory,
        "random_state": options.random_state,
        "predict_only": options.compact,  # branches compacted on the workers, as soon as fit
    }
    # held-out calibration groups on the workers (or none: the pipeline holds rows out)
    params["calibrate"] = "auto" if options.calibrate == "auto" else "none"
    branch_params = options.branch_params(None if plan is None else plan.min_samples_split)
    if branch_params is not None:
        params["branch_params"] = branch_params
    if plan is not None and plan.min_samples_leaf is not None:
        params["min_samples_leaf"] = plan.min_samples_leaf
    return params


def _fit_baseline(ssf_class: type, params: dict[str, Any], n_subsamples: int,
                  ddf: dd.DataFrame, inputs: _Inputs, client: distributed.Client,
                  progress: PhaseReport | None, stage: Any) -> tuple[Any, dict[str, float]]:
    """The sub-sample forest with the EBF's learner and trees, one sub-sample per branch."""
    # the last three only if set: else the defaults
    keep = ("n_estimators", "branch", "branch_memory", "random_state", "predict_only",
            "branch_params", "min_samples_leaf", "calibrate")
    ssf = ssf_class(**{k: params[k] for k in keep if k in params},
                    n_subsamples=n_subsamples, client=client)
    ssf.fit(ddf[inputs.features], ddf[inputs.target], progress=_prefixed(progress, "baseline "),
            stage=stage)
    logger.info("SSF fit: %d sub-samples in %.2fs", ssf.n_subsamples, ssf.fit_timings_["fit"])
    return ssf.to_local(), dict(ssf.fit_timings_)


def _recalibrate(models: dict[str, Any], cal_ddf: dd.DataFrame | None, inputs: _Inputs,
                 options: TrainOptions, client: distributed.Client,
                 stages: Mapping[str, Any]) -> dict[str, Any]:
    """Learn the PIT map of every model on the held-out rows (if any); a staged model's
    branches predict from its staged shards."""
    calibration: dict[str, Any] = {"method": options.calibrate}
    if options.calibrate == "auto":  # the maps were learnt in the fit, on held-out groups
        for name, m in models.items():
            if m is None or getattr(m, "calibration_", None) is None:
                continue
            groups = {k: v for k, v in m.calibration_.items() if k != "method"}
            if getattr(m, "recalibration_", None) is not None:
                calibration[name] = {"knots": m.recalibration_.n_knots,
                                     "max_deviation": round(m.recalibration_.max_deviation(), 6),
                                     **groups}
            else:  # a classifier's map: its kind
                calibration[name] = {"map": m.class_calibration_.method, **groups}
        return calibration
    if cal_ddf is None:
        return calibration
    t_cal = time.perf_counter()
    cal_ddf = cal_ddf[cal_ddf[inputs.target].notnull()]
    for name, m in models.items():
        if m is not None:
            saved = stages[name].write(m) if name in stages else None
            recalibrate(m, cal_ddf[inputs.features], cal_ddf[inputs.target], client=client,
                        saved=saved)
            calibration[name] = {"knots": m.recalibration_.n_knots,
                                 "max_deviation": round(m.recalibration_.max_deviation(), 6)}
    calibration.update(fraction=float(options.calibration_fraction),
                       seconds=round(time.perf_counter() - t_cal, 6))
    logger.info("recalibrated: %s", calibration)
    return calibration


def train(
    data: Source,
    target: str,
    options: TrainOptions | None = None,
    *,
    features: Sequence[str] | None = None,
    baseline: bool = False,
    client: distributed.Client | None = None,
    progress: PhaseReport | None = None,
    storage_options: Mapping[str, Any] | None = None,
    out: str | None = None,
    baseline_out: str | None = None,
    overwrite: bool = False,
) -> TrainResult:
    """Fit an Empirical Bayesian Forest (and optionally the SSF baseline) on a Dask cluster.

    Parameters
    ----------
    data : str, path-like, list of str or dask.dataframe.DataFrame
        A Parquet file, directory (hive partitions included), glob or fsspec URL; or a Dask
        DataFrame.
    target : str
        Target column.
    options : TrainOptions, optional
        How to fit (learner, trees, trunk size, budgets, recalibration, seed), checked when
        built; ``TrainOptions()`` by default.
    features : sequence of str, optional
        Feature columns; ``None`` uses every column but the target.
    baseline : bool, default=False
        Also fit the sub-sample forest (same branch learner and trees, as many sub-samples
        as the EBF has branches).
    client : distributed.Client, optional
        The current client by default; no cluster is started here.
    progress : callable ``progress(phase, done, total)``, optional
        Called as partitions, trunk levels and branches finish (see the module docstring).
    storage_options : dict, optional
        fsspec options for a URL (the data's and the models').
    out : str or path-like, optional
        Write the model here as it is fit (the metadata of :meth:`TrainResult.metadata` in
        its manifest): each branch's shard from the worker that fit it, so this process
        never holds a branch. The model appears whole when ``train`` returns, or not at
        all. ``TrainResult.model`` is then the saved model, opened.
    baseline_out : str or path-like, optional
        Where the baseline goes with ``out`` (required then with ``baseline=True``).
    overwrite : bool, default=False
        Replace models at ``out`` / ``baseline_out``.

    Returns
    -------
    TrainResult

    Raises
    ------
    pipelines.schema.SchemaError
        Before any row is read, if columns are missing or unusable.
    ValueError
        Before any row is read (from the footers), a file that is not Parquet, nulls in a
        numeric feature or too few rows (:func:`ebf.calibration.min_training_rows`); or
        from the estimator's checks (NaN in features...) in its first pass.
    ebf.dask.BranchMemoryError
        If a branch cannot be made to fit ``branch_memory``.

    Examples
    --------
    >>> from ebf.artifact import save
    >>> res = train("data/friedman", "y", TrainOptions(trunk_leaves=32,
    ...             n_estimators=20))  # doctest: +SKIP
    >>> save(res.model, "models/friedman", metadata=res.metadata())  # doctest: +SKIP
    >>> train("data/friedman", "y", out="models/friedman").model.n_parts  # doctest: +SKIP
    16
    """
    options = TrainOptions() if options is None else options
    if (out is None and baseline_out is not None) or (
            out is not None and baseline and baseline_out is None):
        raise ValueError("give both out and baseline_out to write the model and its baseline "
                         "(baseline=True), or neither.")
    client = current_client(client)
    t0 = time.perf_counter()
    inputs = _read_inputs(data, target, features, storage_options,
                          get_learner(options.branch).missing_values)
    options = _resolve(options, inputs, client)
    if inputs.footers is not None:  # before any pass over the rows
        _check_rows(inputs.footers, options.calibrate, options.calibration_fraction)
    check_partitions(inputs.ddf.npartitions, client,
                     None if inputs.footers is None else inputs.footers.rows)
    ddf, cal_ddf = _hold_out(inputs.ddf, options, client)
    size_plan = _plan_size(options, ddf, len(inputs.features))
    schema_seconds = time.perf_counter() - t0

    ebf_class, ssf_class = _estimator_classes(options.task)
    params = _estimator_params(options, size_plan)
    logger.info("training %s (%s) on %s: %d features, target %r", ebf_class.__name__,
                options.task, inputs.where, len(inputs.features), target)
    with ExitStack() as stack:
        stages = _stages(stack, out, baseline_out if baseline else None, overwrite,
                         storage_options)
        estimator = ebf_class(**params, client=client)
        estimator.fit(ddf[inputs.features], ddf[target], progress=progress,
                      stage=stages.get("ebf"))
        model = estimator.to_local()
        timings = {"schema": schema_seconds, **estimator.fit_timings_}
        logger.info("EBF fit: %d branches in %.2fs", ensemble_facts(model)[1], timings["fit"])
        ssf_model, ssf_timings = None, {}
        if baseline:
            ssf_model, ssf_timings = _fit_baseline(ssf_class, params,
                                                   int(model.trunk_.n_leaves_), ddf, inputs,
                                                   client, progress, stages.get("ssf"))
        models = {"ebf": model, "ssf": ssf_model}
        res = TrainResult(
            model=model, baseline=ssf_model, task=options.task, target=target,
            features=inputs.features, rows=_rows(model),
            n_partitions=int(estimator.n_partitions_), data=inputs.where, timings=timings,
            baseline_timings=ssf_timings, params={**params, "compact": options.compact},
            size_plan=size_plan,
            calibration=_recalibrate(models, cal_ddf, inputs, options, client, stages),
            trained_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        )
        for name, stage in stages.items():
            stage.write(models[name], metadata=res.metadata(baseline=name == "ssf"))
    if out is not None:
        from ebf.artifact import open_model

        res.model = open_model(out, storage_options)
        if baseline:
            res.baseline = open_model(baseline_out, storage_options)
    return res


def _stages(stack: ExitStack, out: Any, baseline_out: Any, overwrite: bool,
            storage_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The model stages of ``train(out=...)`` (:func:`ebf.artifact.stage_model`), by model."""
    from ebf.artifact import stage_model

    where = {"ebf": out, "ssf": baseline_out}
    return {name: stack.enter_context(stage_model(path, overwrite=overwrite,
                                                  storage_options=storage_options))
            for name, path in where.items() if path is not None}
