"""The Dask estimators: EBF and SSF regressors and classifiers fit on a cluster.

Their parameters are the local estimators' plus ``branch_memory`` and ``client``; the fit
pipeline (its phases, the model it returns) is :mod:`ebf.dask._fitting`'s. Prediction,
scoring and recalibration run on the cluster, each branch where the fit left it
(:mod:`ebf.dask.live`); ``to_local()`` gathers the model.
"""

from __future__ import annotations

from typing import Any

from sklearn.utils.validation import check_is_fitted

from basics.levels import DEFAULT_QUANTILES
from basics.predictive import predicted_quantiles

from ..config import MAX_BINS, MIN_SAMPLES_LEAF
from ..estimators import (
    EmpiricalBayesianForestClassifier,
    EmpiricalBayesianForestRegressor,
    SubsampleForestClassifier,
    SubsampleForestRegressor,
)
from ..learners import DEFAULT_BRANCH
from ._fitting import _DaskEBF, _DaskSSF
from .calibration import recalibrate
from .distribution import (
    DaskDistribution,
    predict_distribution,
    predict_proba,
    predict_quantiles,
)

_DASK_PARAMS_DOC = """
    branch_memory : int, str or None, default=None
        Memory budget of one branch task, e.g. ``"2GB"`` (Sec. 4.2: "branch size so that
        the working memory required to fit a forest at each branch is slightly less than
        the memory available on each machine"). Turned into a maximum of rows per branch by
        :func:`ebf.dask.branches.max_branch_rows`; EBF grows the trunk (raising its leaf budget
        unless ``trunk_max_leaves`` is set) until every branch is under it, else raises
        :class:`ebf.dask.branches.BranchMemoryError` with advice. None: no limit.
    client : distributed.Client or None, default=None
        Client to run on; None uses the default client at call time
        (``distributed.get_client()``). No cluster is ever started here, and the fitted
        model holds no client.
"""

_FITTED_DOC = """
    Attributes
    ----------
    model_ : the local estimator, its branches (``branches_``, ``subsamples_``) handles to
        the workers' memory (:class:`ebf.dask.live.LivePart`) until :meth:`to_local` gathers
        them; its fitted attributes (``trunk_``, ``classes_``, ``encoder_``, ...) are also
        readable on this estimator.
    fit_timings_ : dict of str to float
        Seconds per phase (see :mod:`ebf.dask._fitting`), ``"fit"`` the total.
    n_partitions_ : int
        Partitions of the training input.
    max_branch_rows_ : int or None
        Row limit per branch derived from ``branch_memory``.
"""


class _DaskRegressor:
    """The distribution API and ``recalibrate`` of the Dask regressors: the local
    regressors' methods on dask DataFrames, lazily (:mod:`ebf.dask.distribution`)."""

    def predict(self, X: Any, *, quantiles: Any = None) -> Any:
        """Lazy predictive mean of every row, or its quantiles.

        Parameters
        ----------
        X : dask.dataframe.DataFrame
        quantiles : float or sequence of float, optional
            Return these quantiles instead (:meth:`predict_quantiles`; one column less for
            a scalar level), as quantile regression forests' ``predict`` does.

        Returns
        -------
        dask.dataframe.Series named ``mean``, or a dask.array.Array of quantiles
        """
        if quantiles is None:
            return super().predict(X)
        return predicted_quantiles(self, X, quantiles, False)

    def predict_quantiles(self, X: Any, q: Any = DEFAULT_QUANTILES) -> Any:
        """Lazy quantiles of every row's predictive distribution (recalibrated, if the model
        has a map; :func:`ebf.dask.distribution.predict_quantiles`).

        Parameters
        ----------
        X : dask.dataframe.DataFrame
        q : float or sequence of float, default=DEFAULT_QUANTILES

        Returns
        -------
        dask.array.Array of shape (n_rows, n_levels)
            The local model's ``predict_quantiles`` on ``X.compute()``, bit for bit.
        """
        check_is_fitted(self, "model_")
        return predict_quantiles(self.model_, X, q, client=self.client)

    def predict_distribution(self, X: Any) -> DaskDistribution:
        """The lazy predictive distribution of every row, one mixture per partition
        (:class:`ebf.dask.distribution.DaskDistribution`: the local distribution's methods
        as dask arrays).

        Parameters
        ----------
        X : dask.dataframe.DataFrame

        Returns
        -------
        ebf.dask.distribution.DaskDistribution
        """
        check_is_fitted(self, "model_")
        return predict_distribution(self.model_, X, client=self.client)

    def recalibrate(self, X: Any, y: Any, *, n_knots: int | None = None) -> Any:
        """Learn the fitted model's PIT map on calibration rows (:mod:`ebf.dask.calibration`;
        the map the local ``recalibrate`` learns on the same rows).

        Parameters
        ----------
        X : dask.dataframe.DataFrame
            Rows the model was not fit on (a holdout, or the most recent window).
        y : dask.dataframe.Series
        n_knots : int, optional

        Returns
        -------
        self
        """
        check_is_fitted(self, "model_")
        recalibrate(self.model_, X, y, client=self.client, n_knots=n_knots)
        return self


class DaskEmpiricalBayesianForestRegressor(_DaskRegressor, _DaskEBF):
    __doc__ = """Empirical Bayesian forest regressor fit on a Dask cluster (Sec. 4-5).

    Parameters
    ----------
    n_estimators, branch, trunk_max_leaves, trunk_min_leaf_rows, min_samples_leaf, \
max_features, max_depth, trunk_max_bins, branch_params, calibrate, random_state, n_jobs
        As in :class:`ebf.EmpiricalBayesianForestRegressor` (same defaults and meaning).
    """ + _DASK_PARAMS_DOC + _FITTED_DOC + """
    Examples
    --------
    >>> from ebf.dask import DaskEmpiricalBayesianForestRegressor
    >>> model = DaskEmpiricalBayesianForestRegressor(branch="mondrian", trunk_max_leaves=32,
    ...                                              random_state=0)
    >>> model.fit(ddf[features], ddf[target])  # doctest: +SKIP
    >>> pred = model.predict_frame(ddf[features], quantiles=(0.05, 0.5, 0.95))  # doctest: +SKIP
    >>> local = model.to_local()  # doctest: +SKIP
    """

    _local_class = EmpiricalBayesianForestRegressor

    def __init__(
        self,
        *,
        n_estimators: int | None = None,
        branch: str = DEFAULT_BRANCH,
        trunk_max_leaves: int | None = None,
        trunk_min_leaf_rows: int | None = None,
        min_samples_leaf: int = MIN_SAMPLES_LEAF,
        max_features: Any = 1.0,
        max_depth: int | None = None,
        trunk_max_bins: int = MAX_BINS,
        branch_params: dict | None = None,
        calibrate: str = "auto",
        random_state: Any = None,
        n_jobs: int | None = None,
        predict_only: bool = False,
        branch_memory: int | str | None = None,
        client: Any = None,
    ) -> None:
        self.n_estimators = n_estimators
        self.branch = branch
        self.trunk_max_leaves = trunk_max_leaves
        self.trunk_min_leaf_rows = trunk_min_leaf_rows
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.max_depth = max_depth
        self.trunk_max_bins = trunk_max_bins
        self.branch_params = branch_params
        self.calibrate = calibrate
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.predict_only = predict_only
        self.branch_memory = branch_memory
        self.client = client


class _DaskProba:
    """``predict_proba`` of the Dask classifiers."""

    def predict_proba(self, X: Any) -> Any:
        """Lazy class probabilities, a dask array in ``classes_`` order
        (:func:`ebf.dask.distribution.predict_proba`).

        Parameters
        ----------
        X : dask.dataframe.DataFrame

        Returns
        -------
        dask.array.Array of shape (n_rows, n_classes)
        """
        return predict_proba(self.model_, X, client=self.client)


class DaskEmpiricalBayesianForestClassifier(_DaskProba, _DaskEBF):
    __doc__ = """Empirical Bayesian forest classifier fit on a Dask cluster (Sec. 4-5).

    Parameters
    ----------
    n_estimators, branch, trunk_max_leaves, trunk_min_leaf_rows, min_samples_leaf, \
max_features, max_depth, trunk_max_bins, branch_params, calibrate, random_state, n_jobs
        As in :class:`ebf.EmpiricalBayesianForestClassifier` (``max_features="sqrt"``).
    """ + _DASK_PARAMS_DOC + _FITTED_DOC + """
    Examples
    --------
    >>> from ebf.dask import DaskEmpiricalBayesianForestClassifier
    >>> clf = DaskEmpiricalBayesianForestClassifier(n_estimators=20, random_state=0)
    >>> clf.fit(ddf[features], ddf["label"]).predict_frame(ddf[features])  # doctest: +SKIP
    """

    _local_class = EmpiricalBayesianForestClassifier

    def __init__(
        self,
        *,
        n_estimators: int | None = None,
        branch: str = DEFAULT_BRANCH,
        trunk_max_leaves: int | None = None,
        trunk_min_leaf_rows: int | None = None,
        min_samples_leaf: int = MIN_SAMPLES_LEAF,
        max_features: Any = "sqrt",
        max_depth: int | None = None,
        trunk_max_bins: int = MAX_BINS,
        branch_params: dict | None = None,
        calibrate: str = "auto",
        random_state: Any = None,
        n_jobs: int | None = None,
        predict_only: bool = False,
        branch_memory: int | str | None = None,
        client: Any = None,
    ) -> None:
        self.n_estimators = n_estimators
        self.branch = branch
        self.trunk_max_leaves = trunk_max_leaves
        self.trunk_min_leaf_rows = trunk_min_leaf_rows
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.max_depth = max_depth
        self.trunk_max_bins = trunk_max_bins
        self.branch_params = branch_params
        self.calibrate = calibrate
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.predict_only = predict_only
        self.branch_memory = branch_memory
        self.client = client


class DaskSubsampleForestRegressor(_DaskRegressor, _DaskSSF):
    __doc__ = """Sub-sample forest regressor fit on a Dask cluster (Sec. 4's baseline).

    Rows go to sub-samples exactly as in :class:`ebf.SubsampleForestRegressor` (the same
    seeded permutation, by global row id); the sub-sample forests are fit in parallel tasks.

    Parameters
    ----------
    n_estimators, n_subsamples, branch, min_samples_leaf, max_features, max_depth, \
branch_params, calibrate, random_state, n_jobs
        As in :class:`ebf.SubsampleForestRegressor`.
    """ + _DASK_PARAMS_DOC + _FITTED_DOC + """
    Examples
    --------
    >>> from ebf.dask import DaskSubsampleForestRegressor
    >>> ssf = DaskSubsampleForestRegressor(n_estimators=20, n_subsamples=8, random_state=0)
    >>> ssf.fit(ddf[features], ddf[target]).predict(ddf[features])  # doctest: +SKIP
    """

    _local_class = SubsampleForestRegressor

    def __init__(
        self,
        *,
        n_estimators: int | None = None,
        n_subsamples: int = 5,
        branch: str = DEFAULT_BRANCH,
        min_samples_leaf: int = MIN_SAMPLES_LEAF,
        max_features: Any = 1.0,
        max_depth: int | None = None,
        branch_params: dict | None = None,
        calibrate: str = "auto",
        random_state: Any = None,
        n_jobs: int | None = None,
        predict_only: bool = False,
        branch_memory: int | str | None = None,
        client: Any = None,
    ) -> None:
        self.n_estimators = n_estimators
        self.n_subsamples = n_subsamples
        self.branch = branch
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.max_depth = max_depth
        self.branch_params = branch_params
        self.calibrate = calibrate
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.predict_only = predict_only
        self.branch_memory = branch_memory
        self.client = client


class DaskSubsampleForestClassifier(_DaskProba, _DaskSSF):
    __doc__ = """Sub-sample forest classifier fit on a Dask cluster (Sec. 4's baseline).

    Parameters
    ----------
    n_estimators, n_subsamples, branch, min_samples_leaf, max_features, max_depth, \
branch_params, calibrate, random_state, n_jobs
        As in :class:`ebf.SubsampleForestClassifier` (``max_features="sqrt"``).
    """ + _DASK_PARAMS_DOC + _FITTED_DOC + """
    Examples
    --------
    >>> from ebf.dask import DaskSubsampleForestClassifier
    >>> ssf = DaskSubsampleForestClassifier(n_estimators=20, random_state=0)
    >>> ssf.fit(ddf[features], ddf["label"]).predict(ddf[features])  # doctest: +SKIP
    """

    _local_class = SubsampleForestClassifier

    def __init__(
        self,
        *,
        n_estimators: int | None = None,
        n_subsamples: int = 5,
        branch: str = DEFAULT_BRANCH,
        min_samples_leaf: int = MIN_SAMPLES_LEAF,
        max_features: Any = "sqrt",
        max_depth: int | None = None,
        branch_params: dict | None = None,
        calibrate: str = "auto",
        random_state: Any = None,
        n_jobs: int | None = None,
        predict_only: bool = False,
        branch_memory: int | str | None = None,
        client: Any = None,
    ) -> None:
        self.n_estimators = n_estimators
        self.n_subsamples = n_subsamples
        self.branch = branch
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.max_depth = max_depth
        self.branch_params = branch_params
        self.calibrate = calibrate
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.predict_only = predict_only
        self.branch_memory = branch_memory
        self.client = client
