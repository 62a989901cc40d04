"""``BARTRegressor``: Bayesian additive regression trees by particle Gibbs or MCMC (thesis Ch. 4).

A scikit-learn estimator over the Bayesian backfitting of :mod:`.backfitting`
(Algorithm 4.1) with the tree update of ``sampler``: PG (the conditional SMC of
Algorithm 4.2), CGM or GrowPrune (Sec. 4.3.2). Every kept iteration is a posterior draw
(trees, leaf means, sigma^2); the predictive distribution of a row is the equal-weight
Gaussian mixture over draws ``s`` of ``N(sum_m g(x; T_m^s, mu_m^s), sigma^2_s)``
(:class:`basics.mixture.GaussianMixture`), in the units of the training target.
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from basics.bounds import check_variances, state_location, state_variance
from basics.mixture import GaussianMixture
from basics.recalibration import NO_MAP, recalibration_from_state, recalibration_state
from basics.seeds import resolve_entropy
from basics.threads import N_JOBS
from basics.validation import check_target_not_in_features, state_array, state_int

from .._base import (
    ProbabilisticRegressorMixin,
    input_attributes,
    regression_target,
    unweighted_rows,
    variance_floor,
)
from ..features import FeatureEncoder
from ._draws import ForestDraws
from ._pgbart import DEFAULT_ESS_THRESHOLD, DEFAULT_PARTICLES
from ._prior import DEFAULT_ALPHA_S, DEFAULT_BETA_S
from ._trees import check_X
from .backfitting import SAMPLER_NAMES, backfit, noise_prior, scale_target, sigma_hat2
from .diagnostics import chain_ess

__all__ = ["BARTRegressor"]


class BARTRegressor(ProbabilisticRegressorMixin, RegressorMixin, BaseEstimator):
    """Bayesian additive regression trees (Chipman et al. 2010) sampled by particle Gibbs.

    ``y = sum_{m=1}^M g(x; T_m, mu_m) + e``, ``e ~ N(0, sigma^2)`` (eq. 4.2), with the
    Chipman prior on every tree (eq. 3.3-3.4, 4.3-4.4), ``mu ~ N(0, sigma_mu^2)`` on the
    labels scaled to ``[-0.5, 0.5]`` with ``sigma_mu = 0.5 / (k sqrt(M))`` (eq. 4.5), and
    ``sigma^2 ~ IG(nu / 2, nu lambda / 2)`` with ``P(sigma < sigma_hat) = q`` (Sec. 4.2.4;
    ``sigma_hat`` the residual standard deviation of a least-squares fit). Fitting runs the
    Bayesian backfitting MCMC (Algorithm 4.1), each tree updated given the residual of the
    others by ``sampler``.

    Parameters
    ----------
    sampler : {"pg", "cgm", "growprune"}, default="pg"
        ``"pg"``: the conditional SMC of Algorithm 4.2 with ``n_particles`` particles,
        complete trees proposed from the prior; ``"cgm"``: one grow / prune / change / swap
        Metropolis-Hastings move per tree (Chipman et al. 1998); ``"growprune"``: grow /
        prune only (Pratola et al.).
    n_trees : int, default=200
        M.
    n_particles : int, default=10
        C of the conditional SMC (PG only; thesis Sec. 4.4).
    ess_threshold : float in (0, 1], default=1.0
        PG only: resample the particles at a stage only when the effective sample size of
        their weights is at most ``ess_threshold * n_particles``. 1.0 resamples at every
        stage, as the thesis' Algorithm 4.2; 0.5 loses fewer particles to copies of the old
        tree and mixes faster on deep trees (on the thesis' hypercube-5 and -7 benchmarks,
        one tree, 20 seeds: median ESS of the log-likelihood 2.6x and 6.6x higher).
    n_iter : int, default=300
        MCMC iterations in all (every iteration updates every tree once).
    burn_in : int, default=100
        Iterations discarded first; must be smaller than ``n_iter``.
    thin : int, default=1
        Every ``thin``-th iteration after the burn-in is kept as a posterior draw.
    alpha_s, beta_s : float, default=0.95, 2.0
        Tree prior, eq. (3.3).
    k : float, default=2.0
        Shrinkage of the leaf means: ``sigma_mu = 0.5 / (k sqrt(M))``.
    nu : float, default=3.0
        Degrees of freedom of the inverse-gamma prior on sigma^2.
    q : float, default=0.9
        Prior probability that sigma is below ``sigma_hat``.
    random_state : int, RandomState instance or None, default=None
        Seed; None draws one at fit and keeps it in ``entropy_``.
    n_jobs : int or None, default=None
        Threads over row blocks at prediction; the chain itself is sequential.

    Attributes
    ----------
    draws_ : ebf.bayestrees._draws.ForestDraws
        The kept draws (trees, leaf means and sigma^2, scaled labels).
    y_center_, y_scale_ : float
        ``y = y_center_ + y_scale_ * y_scaled``.
    loglik_trace_ : ndarray of shape (n_iter,)
        log p(Y | trees, means, sigma^2) after every iteration (units of ``y``).
    sigma2_trace_ : ndarray of shape (n_iter,)
        sigma^2 of every iteration (units of ``y`` squared).
    ess_ : float
        Effective sample size of ``loglik_trace_`` after the burn-in
        (:func:`ebf.bayestrees.diagnostics.chain_ess`; the thesis' mixing measure, Sec. 4.4).
    encoder_, n_features_in_, feature_names_in_, entropy_, var_floor_
        As for the other estimators of ``ebf``.

    Notes
    -----
    The schedule's defaults (100 burn-in iterations, 200 kept draws) are chosen for 10k-100k
    rows. On Friedman #1 with 10k rows (D = 5, the default 200 trees, CPU time of the first
    150 iterations) PG runs ~15 iterations per second, CGM ~39, GrowPrune ~52; with 50
    trees on 20k rows (D = 10) 300 PG iterations take ~11 s
    (``benchmarks/bench_bart_speed.py``). The work of an iteration grows about linearly
    with the rows. On 10k rows, from the trivial trees, sigma is within 2% of its value at
    iteration 400 by iteration 100, while the log-likelihood keeps creeping up slowly
    (BART's trace mixes slowly; ``ess_`` says how slowly): 100 iterations of burn-in buy a
    usable model (held-out RMSE of the mean 0.33 against noise sd 1 after 400), and 200
    draws give a 200-component predictive mixture per row, cheap to predict and store.
    Raise ``n_iter`` / ``burn_in`` for posterior summaries that need a long chain.

    Examples
    --------
    >>> import numpy as np
    >>> from ebf.bayestrees import BARTRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((200, 3)); y = np.sin(6 * X[:, 0]) + 0.1 * rng.normal(size=200)
    >>> bart = BARTRegressor(n_trees=20, n_iter=60, burn_in=20, random_state=0).fit(X, y)
    >>> mean, std = bart.predict(X[:3], return_std=True)
    >>> bart.predict_distribution(X[:3]).n_components, bart.loglik_trace_.shape
    (40, (60,))
    """

    _parameter_constraints: dict = {
        "sampler": [StrOptions(set(SAMPLER_NAMES))],
        "n_trees": [Interval(Integral, 1, None, closed="left")],
        "n_particles": [Interval(Integral, 1, None, closed="left")],
        "ess_threshold": [Interval(Real, 0, 1, closed="right")],
        "n_iter": [Interval(Integral, 1, None, closed="left")],
        "burn_in": [Interval(Integral, 0, None, closed="left")],
        "thin": [Interval(Integral, 1, None, closed="left")],
        "alpha_s": [Interval(Real, 0, 1, closed="neither")],
        "beta_s": [Interval(Real, 0, None, closed="left")],
        "k": [Interval(Real, 0, None, closed="neither")],
        "nu": [Interval(Real, 0, None, closed="neither")],
        "q": [Interval(Real, 0, 1, closed="neither")],
        "random_state": ["random_state"],
        "n_jobs": N_JOBS,
    }

    def __init__(
        self,
        *,
        sampler: str = "pg",
        n_trees: int = 200,
        n_particles: int = DEFAULT_PARTICLES,
        ess_threshold: float = DEFAULT_ESS_THRESHOLD,
        n_iter: int = 300,
        burn_in: int = 100,
        thin: int = 1,
        alpha_s: float = DEFAULT_ALPHA_S,
        beta_s: float = DEFAULT_BETA_S,
        k: float = 2.0,
        nu: float = 3.0,
        q: float = 0.9,
        random_state: Any = None,
        n_jobs: int | None = None,
    ) -> None:
        self.sampler = sampler
        self.n_trees = n_trees
        self.n_particles = n_particles
        self.ess_threshold = ess_threshold
        self.n_iter = n_iter
        self.burn_in = burn_in
        self.thin = thin
        self.alpha_s = alpha_s
        self.beta_s = beta_s
        self.k = k
        self.nu = nu
        self.q = q
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _check_schedule(self) -> int:
        """The number of kept draws, or ``ValueError`` if the burn-in leaves none."""
        self._validate_params()
        if self.burn_in >= self.n_iter:
            raise ValueError(f"burn_in={self.burn_in} leaves no draw of n_iter={self.n_iter} "
                             "iterations; make burn_in smaller than n_iter")
        return len(range(self.burn_in, self.n_iter, self.thin))

    def fit(self, X: Any, y: Any, *, sample_weight: Any = None) -> BARTRegressor:
        """Run the Bayesian backfitting MCMC (Algorithm 4.1) and keep the posterior draws.

        Parameters
        ----------
        X : pandas.DataFrame or array-like of shape (n_samples, n_features)
            Categorical and string columns of a DataFrame are coded by ``FeatureEncoder``.
        y : array-like of shape (n_samples,)
            Finite target.
        sample_weight : array-like of shape (n_samples,), optional
            Only equal positive weights are accepted (the likelihood of eq. 4.2 is
            unweighted); rows of weight 0 are dropped.

        Returns
        -------
        self
        """
        self._check_schedule()
        check_target_not_in_features(X, y)
        encoder = FeatureEncoder()
        A = check_X(encoder.fit_transform(X))
        y = regression_target(self, y, A.shape[0])
        rows = unweighted_rows(sample_weight, A, type(self).__name__)
        if rows is not None:
            A, y = A[rows], y[rows]
        entropy = resolve_entropy(self.random_state)
        ys, center, scale = scale_target(y)
        lam = noise_prior(sigma_hat2(A, ys), float(self.nu), float(self.q))
        sigma_mu2 = (0.5 / (float(self.k) * math.sqrt(self.n_trees))) ** 2
        result = backfit(A, ys, n_trees=self.n_trees, sampler=self.sampler,
                         n_particles=self.n_particles, alpha_s=float(self.alpha_s),
                         beta_s=float(self.beta_s), sigma_mu2=sigma_mu2, nu=float(self.nu),
                         lam=lam, n_iter=self.n_iter, burn_in=self.burn_in, thin=self.thin,
                         rng=np.random.default_rng(np.random.SeedSequence(entropy)),
                         ess_threshold=float(self.ess_threshold))
        draws = ForestDraws.from_packed(result.draws, result.sigma2, self.n_trees)
        loglik = result.loglik - A.shape[0] * math.log(scale)
        self.__dict__.pop("feature_names_in_", None)
        self.__dict__.update(self._fitted(
            encoder, draws, center, scale, loglik, result.sigma2_trace * scale**2, entropy,
            variance_floor(y)))
        self.__dict__.update(NO_MAP)  # a new chain: an earlier map no longer applies
        return self

    def _fitted(self, encoder: FeatureEncoder, draws: ForestDraws, center: float,
                scale: float, loglik: np.ndarray, sigma2_trace: np.ndarray, entropy: int,
                var_floor: float) -> dict[str, Any]:
        return {**input_attributes(encoder), "draws_": draws, "y_center_": float(center),
                "y_scale_": float(scale), "loglik_trace_": loglik, "sigma2_trace_": sigma2_trace,
                "ess_": chain_ess(loglik[self.burn_in:]), "entropy_": int(entropy),
                "var_floor_": float(var_floor)}

    @property
    def n_nodes_(self) -> np.ndarray:
        """Nodes of every tree of every kept draw, shape (n_draws, n_trees) (model size)."""
        check_is_fitted(self, "draws_")
        return self.draws_.n_nodes.reshape(self.draws_.n_draws, self.n_trees)

    def _mixture(self, A: np.ndarray) -> GaussianMixture:
        f = self.draws_.predict(A)
        means = self.y_center_ + self.y_scale_ * f
        var = np.maximum(self.y_scale_**2 * self.draws_.sigma2, self.var_floor_)
        # finite means, variances >= the positive floor: nothing left to check
        return GaussianMixture._trusted(np.full(f.shape, 1.0 / f.shape[1]), means,
                                        np.broadcast_to(var, f.shape).copy())

    # ------------------------------------------------------------------ persistence

    def _get_state(self) -> dict[str, Any]:
        """Fitted state (``docs/model-format.md`` persistence contract): encoder, draws, scaling,
        traces, seed, variance floor and the recalibration map, if any."""
        check_is_fitted(self, "draws_")
        return {"encoder": self.encoder_._get_state(), "draws": self.draws_.get_state(),
                "y_center": self.y_center_, "y_scale": self.y_scale_,
                "loglik_trace": self.loglik_trace_, "sigma2_trace": self.sigma2_trace_,
                "entropy": int(self.entropy_), "var_floor": self.var_floor_,
                **recalibration_state(self)}

    def _set_state(self, state: dict[str, Any]) -> None:
        """Restore a state of :meth:`_get_state`, validating it first (files are untrusted).

        The draws against the encoder's features and the schedule's number of kept draws
        (:meth:`ForestDraws.from_state`), the scaling (a location and a positive scale), finite
        traces of ``n_iter`` values, a positive variance floor, the variances and locations
        within :mod:`basics.bounds`. A bad state raises ``ValueError`` naming the entry and
        leaves the model unchanged.
        """
        n_draws = self._check_schedule()
        encoder = FeatureEncoder()
        encoder._set_state(state["encoder"])
        scalars = {"y_center": state_location(state, "y_center"),
                   "y_scale": state_location(state, "y_scale", positive=True),
                   "var_floor": state_variance(state, "var_floor")}
        draws = state["draws"]
        if not isinstance(draws, dict):
            raise ValueError(f"draws must be a dict of arrays, got {type(draws).__name__}")
        draws = ForestDraws.from_state(draws, n_features=encoder.n_features_in_,
                                       n_trees=self.n_trees, n_draws=n_draws,
                                       scale=scalars["y_scale"])
        traces = {}
        for key in ("loglik_trace", "sigma2_trace"):
            a = state_array(state, key, np.float64, (self.n_iter,))
            if not np.all(np.isfinite(a)):
                raise ValueError(f"{key} holds {int(np.sum(~np.isfinite(a)))} non-finite "
                                 "value(s)")
            traces[key] = a
        check_variances("sigma2_trace", traces["sigma2_trace"], positive=True)
        entropy = state_int(state, "entropy", 0)
        recal = recalibration_from_state(state)
        self.__dict__.pop("feature_names_in_", None)
        self.__dict__.update(self._fitted(
            encoder, draws, scalars["y_center"], scalars["y_scale"], traces["loglik_trace"],
            traces["sigma2_trace"], entropy, scalars["var_floor"]), **recal)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        return tags
