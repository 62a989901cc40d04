"""The fit pipeline of the Dask estimators: EBF and SSF fit on a cluster, returning the
single-process model.

Taddy et al. (2015), Sec. 4-5: the trunk is fit on all the data, acts as "a sorting
function to map observations to separate locations corresponding to each branch", and a
forest is fit "at each location (machine) for each branch". The phases of :meth:`fit`
(names used in logs, ``fit_timings_``, ``progress`` and the dashboard's spans):

``schema``     metadata checks, no data read (:func:`~ebf.dask.inputs.check_inputs`)
``summary``    one pass: lengths, categories, target and weight checks, the encoder
``encode``     one pass: partitions encoded on the workers (kept there)
``bin_edges``  the rows the local binning draws, gathered; the local ``bin_edges`` (EBF)
``trunk``      one histogram pass per trunk level, tree-reduced (EBF)
``route``      branch and global row id per row; rows moved, one partition per branch
``branches``   one task per branch / sub-sample: ``ebf.branches.fit_branch`` (and, with
               ``calibrate="auto"``, the branch's calibration groups)
``calibration`` an SSF's rows held out by its other sub-samples (``calibrate="auto"``)

The fitted model (``to_local()``) is an instance of the local class
(:class:`~ebf.EmpiricalBayesianForestRegressor`, ...) equal to the one its ``fit`` gives on
``X.compute()``: same encoder, bin edges, trunk structure and thresholds, and branches
fit on the same rows in the same order with the same seeds. Until it is gathered, every
branch stays in the memory of the worker that fit it (:mod:`ebf.dask.live`): ``model_``
holds the trunk, the encoder, the calibration map and a handle per branch, and prediction,
scoring and recalibration run each branch where it is. The estimator holds no client, but
its handles live as long as the client they were made with.
"""

from __future__ import annotations

import logging
from typing import Any

from distributed import Client
from sklearn.base import BaseEstimator, is_classifier
from sklearn.utils.validation import check_is_fitted

from basics.levels import DEFAULT_QUANTILES
from basics.pit import MIN_ROWS

from ..artifact import ModelStage
from ..ensemble import FitPlan
from ._predict import predict_frame, predict_series
from ._scoring import score
from ._shuffle import move_rows, route_by_subsample, route_by_trunk, routed_meta
from ._update import update_live, update_model, update_saved
from .branches import (
    BranchMemoryError,
    branch_memory_advice,
    fit_branches,
    held_out_by_subsamples,
    max_branch_rows,
    parse_branch_memory,
)
from .client import PhaseReport, Phases, current_client
from .histograms import fit_trunk, sample_bin_edges
from .inputs import EncodedData, check_inputs, encode, summarize
from .live import feature_importances, gather_model, has_live_parts

logger = logging.getLogger(__name__)


class _DaskEnsemble(BaseEstimator):
    """Shared by the Dask estimators: parameters, the fit pipeline, prediction.

    The local estimator plans the fit (``_fit_plan``) and assembles the fitted parts
    (``_from_parts``); subclasses define ``_local_class`` and ``_fit_parts(client, data,
    plan, summary, max_rows, phases, stage) -> (local, plan, branches, trunk)``, which fits
    the branches (EBF: the trunk first).
    """

    _local_class: type
    _dask_params = ("branch_memory", "client")

    def _local_estimator(self, **overrides: Any) -> Any:
        params = {k: v for k, v in self.get_params(deep=False).items()
                  if k not in self._dask_params}
        return self._local_class(**{**params, **overrides})

    def fit(self, X: Any, y: Any, *, sample_weight: Any = None,
            progress: PhaseReport | None = None, stage: ModelStage | None = None
            ) -> _DaskEnsemble:
        """Fit on a dask DataFrame; see the module docstring for the phases.

        Parameters
        ----------
        X : dask.dataframe.DataFrame
            Feature columns (numeric, bool, string or category).
        y : dask.dataframe.Series
            Target, partitioned like ``X`` (e.g. ``ddf[target]`` with ``X = ddf[features]``).
        sample_weight : dask.dataframe.Series, optional
            Non-negative weights, partitioned like ``X``.
        progress : callable ``progress(phase, done, total)``, optional
            Called as partitions, trunk levels and branches finish (``total`` 0: unknown).
        stage : ebf.artifact.ModelStage, optional
            Write the model as it is fit (:func:`ebf.artifact.stage_model`): each branch
            task writes its branch's shard to the stage, so the branches' arrays never
            reach this process. ``model_`` then holds :class:`ebf.artifact.StoredPart`
            references in place of its branches: write its head with ``stage.write(model_,
            metadata)``, which returns the staged model to predict from
            (:func:`ebf.dask.predict_frame`, :func:`ebf.dask.recalibrate` with ``saved=``).

        Returns
        -------
        self

        Examples
        --------
        >>> from ebf.artifact import stage_model
        >>> with stage_model("models/big") as stage:  # doctest: +SKIP
        ...     est.fit(ddf[features], ddf[target], stage=stage)
        ...     stage.write(est.model_)
        """
        local = self._local_estimator()
        local._validate_params()  # scikit-learn's public parameter check, before any work
        if getattr(local, "calibrate", "none") in ("holdout", "recent"):
            raise ValueError(
                f"calibrate={local.calibrate!r} holds rows out of the fit; on a cluster choose "
                "them with ebf.dask.calibration.calibration_rows, fit with calibrate='none' "
                "and call recalibrate on them (as ebf train --calibrate does), or use "
                "calibrate='auto', which holds no rows out.")
        budget = parse_branch_memory(self.branch_memory)
        client = current_client(self.client)
        logger.info("fitting %s on %s (dashboard %s)", type(local).__name__, client,
                    getattr(client, "dashboard_link", None))
        task = "classification" if is_classifier(local) else "regression"
        phases = Phases(progress)
        with phases("fit"):
            with phases("schema"):
                frame, layout = check_inputs(X, y, sample_weight, task)
            with phases("summary"):
                summary = summarize(client, frame, layout, phases.report("summary"),
                                    allow_nan=local._missing_values)
            plan = local._fit_plan(summary.encoder, summary.classes, summary.n)
            with phases("encode"):
                data = encode(client, frame, layout, summary, phases.report("encode"))
            max_rows = max_branch_rows(budget, data.n_features, data.has_weight, plan.spec)
            crossfit = getattr(local, "calibrate", "none") == "auto" and summary.n >= MIN_ROWS
            local, plan, branches, trunk, held_out = self._fit_parts(
                client, local, plan, data, max_rows, phases, stage, crossfit)
            model = local._from_parts(plan, branches, trunk)
            if held_out is not None:  # the local estimator's seam learns the map
                model._set_auto_map(held_out)
        self.model_ = model
        self.fit_timings_ = phases.timings
        self.n_partitions_ = int(summary.lengths.size)
        self.max_branch_rows_ = max_rows
        return self

    @classmethod
    def from_local(cls, model: Any, *, client: Client | None = None,
                   branch_memory: int | str | None = None) -> Any:
        """A fitted Dask estimator around a fitted local model (shared, not copied), e.g. a
        loaded model to update on the cluster with :meth:`partial_fit`.

        Parameters
        ----------
        model : estimator
            A fitted instance of this class's local counterpart.
        client : distributed.Client, optional
        branch_memory : int or str, optional

        Returns
        -------
        estimator
            ``to_local()`` is ``model``.
        """
        if type(model) is not cls._local_class:
            raise TypeError(f"{cls.__name__}.from_local takes a {cls._local_class.__name__}, "
                            f"got a {type(model).__name__}.")
        check_is_fitted(model, "encoder_")
        est = cls(**model.get_params(deep=False), client=client, branch_memory=branch_memory)
        est.model_ = model
        return est

    def to_local(self) -> Any:
        """The fitted single-process estimator: its branches gathered from the workers
        (each call gathers them again; a model whose branches are all local, e.g. from
        :meth:`from_local` or fit with a stage, is returned as it is).

        Returns
        -------
        EmpiricalBayesianForest{Regressor,Classifier} or SubsampleForest{Regressor,Classifier}
            Saves, loads and predicts like any local model.
        """
        check_is_fitted(self, "model_")
        return gather_model(self.model_)

    def predict_frame(self, X: Any, quantiles: Any = DEFAULT_QUANTILES) -> Any:
        """Lazy predictions per row (:func:`ebf.dask._predict.predict_frame`).

        Parameters
        ----------
        X : dask.dataframe.DataFrame
        quantiles : sequence of float, default=DEFAULT_QUANTILES

        Returns
        -------
        dask.dataframe.DataFrame
            ``mean, std, q05, q50, q95`` (regressors) or ``proba_<class>..., predicted``
            (classifiers), plus ``branch`` for EBF; index and order of ``X``.
        """
        return predict_frame(self.model_, X, quantiles, client=self.client)

    def predict(self, X: Any) -> Any:
        """Lazy predictive mean (regressors) or most probable class (classifiers).

        Parameters
        ----------
        X : dask.dataframe.DataFrame

        Returns
        -------
        dask.dataframe.Series
        """
        return predict_series(self.model_, X, client=self.client)

    def score(self, X: Any, y: Any, *, sample_weight: Any = None) -> float:
        """R² (regressors) or accuracy (classifiers) on Dask collections, in one pass
        (:func:`ebf.dask._scoring.score`): scikit-learn's ``score`` on the computed data.

        Parameters
        ----------
        X : dask.dataframe.DataFrame
        y, sample_weight : dask.dataframe.Series
            Partitioned like ``X``; weights optional.

        Returns
        -------
        float
        """
        return score(self.model_, X, y, sample_weight, client=self.client)

    def __getattr__(self, name: str) -> Any:
        # fitted attributes of the local model (trunk_, branches_, classes_, ...)
        if name.endswith("_") and not name.startswith("_") and name != "model_":
            model = self.__dict__.get("model_")
            if model is not None and name == "feature_importances_" and has_live_parts(model):
                return feature_importances(model)  # each branch's share where it lives
            if model is not None:
                return getattr(model, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __getstate__(self) -> dict:
        state = dict(super().__getstate__())
        state["client"] = None  # a client never travels with the model
        if "model_" in state:  # nor handles to its workers: the pickle holds the branches
            state["model_"] = self.to_local()
        return state


class _DaskEBF(_DaskEnsemble):
    def _fit_parts(self, client: Client, local: Any, plan: FitPlan, data: EncodedData,
                   max_rows: int | None, phases: Phases, stage: ModelStage | None,
                   crossfit: bool = False) -> tuple:
        with phases("bin_edges"):
            edges = sample_bin_edges(client, data, plan.trunk.max_bins)
        with phases("trunk"):
            trunk = fit_trunk(client, data, plan.trunk, edges, max_rows,
                              grow_budget=self.trunk_max_leaves is None,
                              report=phases.report("trunk"),
                              budget_bytes=parse_branch_memory(self.branch_memory))
            if trunk.max_leaves != plan.trunk.max_leaves:
                # the model carries the leaf budget it was grown with, so that a local refit
                # with its parameters grows the same trunk
                local = self._local_estimator(trunk_max_leaves=trunk.max_leaves)
                plan = local._fit_plan(plan.encoder, plan.classes, plan.n_rows)
        with phases("route"):
            routed = route_by_trunk(client, data, trunk)
            moved = move_rows(client, routed, routed_meta(data), trunk.n_leaves_,
                              report=phases.report("route"))
            data.release()
            del routed
        with phases("branches"):
            branches, held_out = fit_branches(client, moved, plan.spec, plan.entropy,
                                              data.n_features, data.has_weight,
                                              trunk.leaf_rows_, phases.report("branches"),
                                              stage, crossfit)
        return local, plan, branches, trunk, held_out


    def partial_fit(self, X: Any, y: Any, *, progress: PhaseReport | None = None,
                    stage: ModelStage | None = None, saved: Any = None) -> _DaskEBF:
        """Take new rows under the stored trunk, on the cluster; unfitted: :meth:`fit`.

        The local :meth:`~ebf.EmpiricalBayesianForestRegressor.partial_fit` on the
        cluster: the rows are checked, encoded with the model's encoder and routed by its
        trunk; each branch that receives rows is updated by ``ebf.updates.update_branch`` in
        one task on the worker holding its rows (phases ``schema``, ``summary``, ``encode``,
        ``route``, ``branches``), and the model records the update
        (``_with_updates``). The result equals the local ``partial_fit`` on
        ``X.compute()``. Only online (Mondrian) branches are updated here; a CART model is
        updated locally with its earlier rows (``to_local().partial_fit(..., previous=)``)
        or refit.

        Parameters
        ----------
        X : dask.dataframe.DataFrame
            The training feature columns.
        y : dask.dataframe.Series
            Targets, partitioned like ``X``.
        progress : callable ``progress(phase, done, total)``, optional
        stage : ebf.artifact.ModelStage, optional
            Write the updated model there instead (with ``saved``): the model stays as
            it is, each branch the rows reach is loaded from ``saved``, updated and
            written to the stage by one task on a worker, the others are carried over
            unchanged (:func:`ebf.dask._update.update_saved`); ``model_`` then holds the
            updated model with :class:`ebf.artifact.StoredPart` branches, whose head
            ``stage.write(model_, metadata)`` writes.
        saved : ebf.artifact.ModelReader, optional
            The model, saved (``ebf.artifact.open_model``); required with ``stage``.

        Returns
        -------
        self
        """
        model = self.__dict__.get("model_")
        if model is None:
            return self.fit(X, y, progress=progress, stage=stage)
        if (stage is None) != (saved is None):
            raise ValueError("partial_fit writes to a stage from the saved model: give both "
                             "stage and saved, or neither.")
        phases = Phases(progress)
        with phases("partial_fit"):
            if stage is None:  # where the branches are: on the workers, or here
                update = update_live if has_live_parts(model) else update_model
                self.model_ = update(current_client(self.client), model, X, y, phases)
            else:
                self.model_ = update_saved(current_client(self.client), model, saved, X, y,
                                           stage, phases)
        self.fit_timings_ = phases.timings
        return self


class _DaskSSF(_DaskEnsemble):
    def _fit_parts(self, client: Client, local: Any, plan: FitPlan, data: EncodedData,
                   max_rows: int | None, phases: Phases, stage: ModelStage | None,
                   crossfit: bool = False) -> tuple:
        sizes, k = plan.subsample_sizes, len(plan.subsample_sizes)
        if max_rows is not None and sizes.max() > max_rows:
            raise BranchMemoryError(
                f"A sub-sample has {int(sizes.max())} rows, more than the {max_rows} rows that "
                f"fit branch_memory. "
                f"{branch_memory_advice(client, parse_branch_memory(self.branch_memory))} "
                f"(use n_subsamples >= {-(-plan.n_rows // max_rows)}, or fewer trees)."
            )
        with phases("route"):
            routed = route_by_subsample(client, data, plan.entropy, k)
            moved = move_rows(client, routed, routed_meta(data), k,
                              report=phases.report("route"))
            data.release()
            del routed
        with phases("branches"):  # one sub-sample: its own calibration groups
            subsamples, held_out = fit_branches(client, moved, plan.spec, plan.entropy,
                                                data.n_features, data.has_weight, sizes,
                                                phases.report("branches"), stage,
                                                crossfit and k < 2)
        if crossfit and k >= 2:  # every row held out by the other sub-samples
            with phases("calibration"):
                reader = None if stage is None else stage.write(
                    local._from_parts(plan, subsamples))
                held_out = held_out_by_subsamples(client, moved, subsamples, reader,
                                                  data.n_features, plan.spec.task,
                                                  phases.report("calibration"))
        return local, plan, subsamples, None, held_out
