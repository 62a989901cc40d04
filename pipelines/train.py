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
   fit the same number of equally sized tasks;
5. return the single-process models (``to_local()``), the timings and the training metadata
   that :func:`ebf.artifact.save` stores in the manifest (the CLI saves atomically).

Library code: it logs and never prints; ``progress(phase, done, total)`` reports the long
phases (``summary``, ``encode``, ``trunk``, ``route``, ``branches``; the baseline's phases are
prefixed ``"baseline "``).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import dask.dataframe as dd
import distributed
import numpy as np
import pandas as pd

from basics.pit import MIN_ROWS
from basics.versions import library_version
from cluster import current_client
from ebf.calibration import (
    CALIBRATION_METHODS,
    DEFAULT_FRACTION,
    check_fraction,
    min_training_rows,
)
from ebf.dask.calibration import calibration_rows, recalibrate
from ebf.dask.client import PhaseReport
from pipelines.footers import Footers, read_footers
from pipelines.io import read_dataset
from pipelines.schema import ColumnInfo, check_schema

__all__ = [
    "MAX_AUTO_CLASSES",
    "TASKS",
    "TrainResult",
    "infer_task",
    "train",
]

logger = logging.getLogger(__name__)

#: ``task`` values of :func:`train`.
TASKS: tuple[str, ...] = ("auto", "regression", "classification")

#: ``task="auto"``: an integer target with at most this many distinct values is a class label.
MAX_AUTO_CLASSES = 20



@dataclass
class TrainResult:
    """What :func:`train` fitted.

    Attributes
    ----------
    model : EmpiricalBayesianForestRegressor or EmpiricalBayesianForestClassifier
        The fitted single-process model (``to_local()`` of the Dask estimator): save it with
        :func:`ebf.artifact.save`, predict with it locally or with :mod:`ebf.dask`.
    baseline : SubsampleForestRegressor, SubsampleForestClassifier or None
        The sub-sample forest, if ``baseline=True``.
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
        The parameters :func:`train` was called with (branch, trees, trunk limits, seed,
        Mondrian ``branch_params``, ``compact``).
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
            :func:`pipelines.score.evaluate` reads the target from it.

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


def train(
    data: str | os.PathLike[str] | Sequence[str] | dd.DataFrame,
    target: str,
    features: Sequence[str] | None = None,
    *,
    task: str = "auto",
    branch: str = "bayesian",
    n_estimators: int | None = None,
    trunk_leaves: int | None = None,
    min_leaf_rows: int | None = None,
    branch_memory: int | str | None = None,
    min_samples_split: int | None = None,
    model_memory: int | str | None = None,
    compact: bool = False,
    baseline: bool = False,
    calibrate: str = "none",
    calibration_fraction: float = DEFAULT_FRACTION,
    random_state: int | None = 0,
    client: distributed.Client | None = None,
    progress: PhaseReport | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> TrainResult:
    """Fit an Empirical Bayesian Forest (and optionally the SSF baseline) on a Dask cluster.

    Parameters
    ----------
    data : str, path-like, list of str or dask.dataframe.DataFrame
        A Parquet file, directory (hive partitions included), glob or fsspec URL; or a Dask
        DataFrame.
    target : str
        Target column.
    features : sequence of str, optional
        Feature columns; ``None`` uses every column but the target.
    task : {"auto", "regression", "classification"}, default="auto"
        ``"auto"`` follows :func:`infer_task`: float targets are regression; bool, string
        and category targets classification; integer targets classification if they have
        at most :data:`MAX_AUTO_CLASSES` distinct values, else regression.
    branch : {"bayesian", "random", "mondrian", "smc", "bart"}, default="bayesian"
        Branch learner (Bayesian-bootstrap CART, random forest, Mondrian forest, Bayesian
        trees by SMC, BART by particle Gibbs; see :mod:`ebf.branches`).
    n_estimators : int, optional
        Trees per branch (and per sub-sample of the baseline); by default
        :data:`pipelines.sizing.DEFAULT_TREES` of the learner: 10 Mondrian trees (as in the
        Mondrian papers), 100 Bayesian or random ones (fewer if ``model_memory`` says so).
    trunk_leaves : int, optional
        Maximum trunk leaves (branches); ``trunk_max_leaves`` of the estimator.
    min_leaf_rows : int, optional
        Minimum rows per trunk leaf; ``trunk_min_leaf_rows``. With neither limit the
        trunk has up to 5 leaves (the paper's default).
    branch_memory : int or str, optional
        Memory budget per branch task (``"2GB"``): the trunk grows until every branch fits.
    min_samples_split : int, optional
        Mondrian branches: leaf size (a block with fewer rows is not split); default 10.
    model_memory : int or str, optional
        Budget for the whole model (``"2GB"``): the rows are counted and
        :func:`pipelines.sizing.plan_model_size` picks the trees per branch (if not given) or
        the leaf size (Mondrian ``min_samples_split``, CART ``min_samples_leaf``); the choice
        is logged and kept in ``TrainResult.size_plan``.
    compact : bool, default=False
        Fit predict-only models (``predict_only=True``: every branch compacted on its worker
        as soon as it is fit, :meth:`ebf.ensemble._BranchedEnsemble.compact`):
        Mondrian branches without their online state, several times smaller.
    baseline : bool, default=False
        Also fit the sub-sample forest (same branch learner and ``n_estimators``, as many
        sub-samples as the EBF has branches).
    calibrate : {"none", "recent", "holdout", "auto"}, default="none"
        Recalibrate the predictive distributions of regressors (:mod:`ebf.calibration`):
        the models are fit on the other rows and learn their PIT maps on the last
        ``calibration_fraction`` of the rows in dataset order (``"recent"``, for data in
        time order that drifts) or on a position-hashed random fraction (``"holdout"``),
        on the workers (:mod:`ebf.dask.calibration`). ``"auto"`` is ``"recent"`` for
        regression and ``"none"`` for classification (which has no PIT).
    calibration_fraction : float in (0, 1), default=0.1
    random_state : int or None, default=0
        Seed; the same seed gives the same model on any cluster.
    client : distributed.Client, optional
        The current client by default; no cluster is started here.
    progress : callable ``progress(phase, done, total)``, optional
        Called as partitions, trunk levels and branches finish (see the module docstring).
    storage_options : dict, optional
        fsspec options for a URL.

    Returns
    -------
    TrainResult

    Raises
    ------
    pipelines.schema.SchemaError
        Before any row is read, if columns are missing or unusable.
    ValueError
        On an invalid ``task`` or ``branch``; before any row is read, a file that is not
        Parquet, nulls in a numeric feature or too few rows for the fit and the calibration
        (:func:`ebf.calibration.min_training_rows`; from the footers); or from the
        estimator's own checks (NaN in features, targets out of range...) in its first pass.
    ebf.dask.BranchMemoryError
        If a branch cannot be made to fit ``branch_memory``.

    Examples
    --------
    >>> from cluster import connect
    >>> from ebf.artifact import save
    >>> client = connect()  # doctest: +SKIP
    >>> res = train("data/friedman", "y", branch="mondrian", trunk_leaves=32,
    ...             n_estimators=20)  # doctest: +SKIP
    >>> save(res.model, "models/friedman", metadata=res.metadata())  # doctest: +SKIP
    """
    from ebf.branches import BRANCH_LEARNERS
    from pipelines.sizing import default_trees, plan_model_size

    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    if calibrate not in (*CALIBRATION_METHODS, "auto"):
        raise ValueError(f"calibrate must be one of {(*CALIBRATION_METHODS, 'auto')}, got "
                         f"{calibrate!r}")
    if calibrate != "none":
        check_fraction(calibration_fraction)  # a bad fraction fails before any work
    if branch not in BRANCH_LEARNERS:
        raise ValueError(f"branch must be one of {sorted(BRANCH_LEARNERS)}, got {branch!r}")
    client = current_client(client)
    t0 = time.perf_counter()
    footers = None if isinstance(data, dd.DataFrame) else read_footers(data, storage_options)
    chosen, target_info = check_schema(data, target, features, storage_options=storage_options,
                                       footers=footers)
    columns = [*chosen, target]
    if isinstance(data, dd.DataFrame):
        ddf, where = data[columns], "<dask DataFrame>"
    else:
        ddf = read_dataset(data, columns, storage_options=storage_options)
        where = (", ".join(os.fspath(p) for p in data) if isinstance(data, (list, tuple))
                 else os.fspath(data))
    if task == "auto":
        task = infer_task(target_info, ddf[target], client=client)
    if calibrate == "auto":
        calibrate = "recent" if task == "regression" else "none"
    if calibrate != "none" and task != "regression":
        raise ValueError(f"calibrate={calibrate!r} recalibrates regressors; the {task} of "
                         f"{target!r} has no PIT. Use calibrate='none'.")
    if footers is not None:  # before any pass over the rows
        _check_rows(footers, calibrate, calibration_fraction)
    cal_ddf = None
    if calibrate != "none":
        ddf, cal_ddf, _ = calibration_rows(ddf, calibrate, calibration_fraction, random_state,
                                           client)
    size_plan = None
    if model_memory is not None and min_samples_split is None:
        from dask.utils import parse_bytes

        n_rows = int(ddf.shape[0].compute())
        size_plan = plan_model_size(parse_bytes(model_memory), n_rows, len(chosen), branch,
                                    n_estimators=n_estimators, compact=compact)
        n_estimators, min_samples_split = size_plan.n_estimators, size_plan.min_samples_split
        logger.info("%s", size_plan.message)
    if n_estimators is None:
        n_estimators = default_trees(branch)
    schema_seconds = time.perf_counter() - t0

    ebf_class, ssf_class = _estimator_classes(task)
    params = {
        "branch": branch,
        "n_estimators": n_estimators,
        "trunk_max_leaves": trunk_leaves,
        "trunk_min_leaf_rows": min_leaf_rows,
        "branch_memory": branch_memory,
        "random_state": random_state,
        "predict_only": bool(compact),  # branches compacted on the workers, as soon as fit
    }
    if min_samples_split is not None and branch == "mondrian":
        params["branch_params"] = {"min_samples_split": int(min_samples_split)}
    if size_plan is not None and size_plan.min_samples_leaf is not None:
        params["min_samples_leaf"] = size_plan.min_samples_leaf
    logger.info("training %s (%s) on %s: %d features, target %r", ebf_class.__name__, task,
                where, len(chosen), target)
    estimator = ebf_class(**params, client=client)
    estimator.fit(ddf[chosen], ddf[target], progress=progress)
    model = estimator.to_local()
    timings = {"schema": schema_seconds, **estimator.fit_timings_}
    logger.info("EBF fit: %d branches in %.2fs", len(model.branches_), timings["fit"])

    ssf_model, ssf_timings = None, {}
    if baseline:
        ssf = ssf_class(
            n_estimators=n_estimators,
            n_subsamples=int(model.trunk_.n_leaves_),
            branch=branch,
            branch_memory=branch_memory,
            branch_params=params.get("branch_params"),
            min_samples_leaf=params.get("min_samples_leaf", 5),
            random_state=random_state,
            predict_only=bool(compact),
            client=client,
        )
        ssf.fit(ddf[chosen], ddf[target], progress=_prefixed(progress, "baseline "))
        ssf_model, ssf_timings = ssf.to_local(), dict(ssf.fit_timings_)
        logger.info("SSF fit: %d sub-samples in %.2fs", ssf.n_subsamples, ssf_timings["fit"])

    calibration: dict[str, Any] = {"method": calibrate}
    if cal_ddf is not None:
        t_cal = time.perf_counter()
        cal_ddf = cal_ddf[cal_ddf[target].notnull()]
        for name, m in (("ebf", model), ("ssf", ssf_model)):
            if m is not None:
                recalibrate(m, cal_ddf[chosen], cal_ddf[target], client=client)
                calibration[name] = {"knots": m.recalibration_.n_knots,
                                     "max_deviation": round(m.recalibration_.max_deviation(), 6)}
        calibration.update(fraction=float(calibration_fraction),
                           seconds=round(time.perf_counter() - t_cal, 6))
        logger.info("recalibrated: %s", calibration)

    return TrainResult(
        model=model,
        baseline=ssf_model,
        task=task,
        target=target,
        features=list(chosen),
        rows=_rows(model),
        n_partitions=int(estimator.n_partitions_),
        data=where,
        timings=timings,
        baseline_timings=ssf_timings,
        params={**params, "compact": bool(compact)},
        size_plan=size_plan,
        calibration=calibration,
        trained_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )
