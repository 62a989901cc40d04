"""Ridge regression and classification on Mondrian kernel features, the width learned by
one sweep (Balog et al. 2016, Sec. 4-5): :class:`MondrianKernelRegressor` and
:class:`MondrianKernelClassifier`.
"""

from __future__ import annotations

import copy
import math
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from basics.bounds import check_locations, check_range, check_variances
from basics.flat_tree import INDEX
from basics.levels import DEFAULT_QUANTILES, check_levels
from basics.mixture import GaussianMixture
from basics.predictive import predicted_quantiles
from basics.seeds import resolve_entropy
from basics.threads import N_JOBS
from basics.validation import (
    check_regression_target,
    state_array,
    state_names,
    unchanged_on_error,
)

from ._base import classes_entry, classes_from_entry
from ._kernel_features import HASH_KEY, MondrianKernelFeatures, checked_rows
from .kernel_sweep import check_ridge, probe_lifetime, ridge_solve, width_sweep

__all__ = ["MondrianKernelClassifier", "MondrianKernelRegressor"]


class _MondrianKernelRidge(BaseEstimator):
    """What the regressor and the classifier share: the width sweep, the ridge on the
    features at the chosen width, and online updates."""

    _parameter_constraints: dict = {
        "n_mondrians": [Interval(Integral, 1, None, closed="left")],
        "lifetime": [StrOptions({"auto"}), Interval(Real, 0, math.inf, closed="neither")],
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "max_features": [Interval(Integral, 2, None, closed="left")],
        "n_widths": [Interval(Integral, 1, None, closed="left")],
        "select": [StrOptions({"validation", "evidence"})],
        "solver": [StrOptions({"exact", "cg"})],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "random_state": ["random_state"],
        "n_jobs": N_JOBS,
    }

    def __init__(self, *, n_mondrians: int = 50, lifetime: Any = "auto", alpha: float = 0.1,
                 max_features: int = 2000, n_widths: int = 40, select: str = "validation",
                 solver: str = "exact", validation_fraction: float = 0.2,
                 random_state: Any = None, n_jobs: int | None = None) -> None:
        self.n_mondrians = n_mondrians
        self.lifetime = lifetime
        self.alpha = alpha
        self.max_features = max_features
        self.n_widths = n_widths
        self.select = select
        self.solver = solver
        self.validation_fraction = validation_fraction
        self.random_state = random_state
        self.n_jobs = n_jobs

    def _check_input(self, X: Any, y: Any, reset: bool,
                     with_y: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """``X`` validated against this estimator (its names), as the float64 array the
        partitions (fitted on arrays) take, and ``y`` (``with_y``: required)."""
        return checked_rows(self, X, y, reset, with_y)

    def fit(self, X: Any, y: Any):
        """Fit the partitions, learn the width (``lifetime="auto"``) and solve the ridge.

        Returns
        -------
        self
        """
        self._validate_params()
        if self.select == "evidence" and self.solver != "exact":
            raise ValueError("select='evidence' needs solver='exact' (conjugate gradients "
                             "give no log determinant); use select='validation' with 'cg'")
        with unchanged_on_error(self):  # validation sets n_features_in_ before any check
            return self._fit(X, y)

    def _fit(self, X: Any, y: Any):
        X, y = self._check_input(X, y, reset=True)
        Y, task = self._encode(y)
        entropy = resolve_entropy(self.random_state)
        features = MondrianKernelFeatures(n_mondrians=self.n_mondrians, lifetime=1.0,
                                          random_state=entropy, n_jobs=self.n_jobs)
        sweep = None
        if self.lifetime == "auto":
            if X.shape[0] < 4:
                raise ValueError(f"lifetime='auto' holds out rows to choose the width and "
                                 f"needs at least 4 rows, got n_samples={X.shape[0]}; pass a "
                                 "lifetime")
            fit_rows, val_rows = self._split(X.shape[0], entropy)
            lam_max = probe_lifetime(X[fit_rows], self.max_features / self.n_mondrians,
                                     entropy)
            features.set_params(lifetime=lam_max).fit(X[fit_rows])
            sweep = width_sweep(features, Y[fit_rows], X[val_rows], Y[val_rows],
                                float(self.alpha), int(self.max_features),
                                int(self.n_widths), self.solver)
            best = (np.argmin(sweep["validation_mse"]) if self.select == "validation"
                    else np.argmax(sweep["log_evidence"]))
            lam = float(sweep["lifetime"][best])
            features.partial_fit(X[val_rows])
            order = np.concatenate([fit_rows, val_rows])  # the partitions' row order
            X, Y = X[order], Y[order]
        else:
            lam = float(self.lifetime)
            features.set_params(lifetime=lam).fit(X)
        self.__dict__.update(task, **self._solve(features, lam, X, Y), sweep_=sweep)
        return self

    def partial_fit(self, X: Any, y: Any):
        """Add rows (paper Sec. 5): the partitions are extended by the conditional Mondrian
        (a new row joins a cell or is cut off into a new one; at ``lifetime_`` the earlier
        rows keep their cells), and the ridge is solved again, exactly, on every row seen.
        The width stays ``lifetime_``. The first call fits.

        Returns
        -------
        self
        """
        if not hasattr(self, "coef_"):
            return self.fit(X, y)
        X, y = self._check_input(X, y, reset=False)
        Y = self._encode_more(y)
        with unchanged_on_error(self):
            self.features_ = copy.deepcopy(self.features_)
            self.features_.partial_fit(X)
            X_all = self.features_.rows_seen_
            Y_all = np.vstack([self._Y, Y])
            self.__dict__.update(self._solve(self.features_, self.lifetime_, X_all, Y_all))
        return self

    def _split(self, n: int, entropy: int) -> tuple[np.ndarray, np.ndarray]:
        """A seeded random hold-out of ``validation_fraction`` of the rows (at least one)."""
        perm = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(HASH_KEY - 1,)))
        perm = perm.permutation(n)
        n_val = min(max(1, int(round(self.validation_fraction * n))), n - 2)
        return np.sort(perm[n_val:]), np.sort(perm[:n_val])

    def _solve(self, features: MondrianKernelFeatures, lam: float, X: np.ndarray,
               Y: np.ndarray) -> dict[str, Any]:
        """The ridge on the features of ``X`` (the partitions' rows, in their order) at
        width ``lam``: every fitted attribute but the task's."""
        layout = features.cell_layout(lam)
        n_out = int(layout[1][-1])
        if n_out > 2 * self.max_features + self.n_mondrians:
            raise ValueError(
                f"lifetime={lam:.4g} splits the {X.shape[0]} rows into {n_out} cells over the "
                f"{self.n_mondrians} partitions, more than 2 x max_features="
                f"{self.max_features} (the ridge holds a dense matrix of side the cell count:"
                f" {8 * n_out**2 / 2**30:.1f} GiB); pass a smaller lifetime (the kernel is "
                "exp(-lifetime * L1 distance); standardised inputs want about 1 / typical "
                "L1 distance), lifetime='auto', or a larger max_features")
        Z = features.cells_matrix(X, lam, layout)
        W, G_inv, _ = ridge_solve(Z, Y, float(self.alpha))
        resid = Y - Z @ W
        noise = (np.einsum("ij,ij->j", resid, resid) + self.alpha * np.einsum("ij,ij->j", W, W))
        floor = 1e-12 * max(float(np.max(np.var(Y, axis=0))), 1.0)
        return {"features_": features, "lifetime_": lam,
                "lifetime_max_": float(features.lifetime), "_layout": layout,
                "_G_inv": G_inv, "coef_": W, "_Y": Y,
                "noise_variance_": np.maximum(noise / X.shape[0], floor)}

    def _cells(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "coef_")
        X, _ = self._check_input(X, None, reset=False, with_y=False)
        return self.features_.cells(X, self.lifetime_, *self._layout)

    def _scores(self, cols: np.ndarray) -> np.ndarray:
        """Posterior mean of every output, shape (n_rows, n_outputs)."""
        return self.intercept_ + self.coef_[cols].sum(axis=1) / math.sqrt(self.n_mondrians)

    def _quad(self, cols: np.ndarray) -> np.ndarray:
        """``phi(x)' G^-1 phi(x)`` of every row (blocks of rows: M^2 reads each)."""
        quad = np.empty(cols.shape[0])
        for a in range(0, cols.shape[0], 1024):
            c = cols[a:a + 1024]
            quad[a:a + 1024] = self._G_inv[c[:, :, None], c[:, None, :]].sum(axis=(1, 2))
        return quad / self.n_mondrians


    # ------------------------------------------------------------------ persistence

    def _get_state(self) -> dict:
        """Fitted state: the partitions (nested), the width, the ridge (weights, the inverse
        of G for the predictive variance, the targets seen for online updates), the noise,
        the centre and the sweep's curves."""
        check_is_fitted(self, "coef_")
        state = {"features": self.features_._get_state(), "lifetime_": float(self.lifetime_),
                 "lifetime_max_": float(self.lifetime_max_), "coef_": self.coef_,
                 "G_inv": self._G_inv, "Y": self._Y, "noise_variance_": self.noise_variance_,
                 "intercept_": self.intercept_,
                 "sweep_": None if self.sweep_ is None else dict(self.sweep_),
                 **self._task_state()}
        if hasattr(self, "feature_names_in_"):
            state["feature_names_in_"] = [str(c) for c in self.feature_names_in_]
        return state

    def _set_state(self, state: dict) -> None:
        """Restore :meth:`_get_state`, checking every shape against the partitions' cells at
        ``lifetime_`` (the kernels index ``coef_`` and ``G_inv`` by cell) before anything is
        set; a bad state raises ``ValueError`` naming the entry."""
        lam_max, lam = state["lifetime_max_"], state["lifetime_"]
        for key, v in (("lifetime_max_", lam_max), ("lifetime_", lam)):
            if not isinstance(v, float) or not 0.0 < v < math.inf:
                raise ValueError(f"{key} must be a finite positive float, got {v!r:.60}")
        if lam > lam_max:
            raise ValueError(f"lifetime_={lam} is past lifetime_max_={lam_max}")
        if not isinstance(state["features"], dict):
            raise ValueError("features must be the partitions' state")
        features = MondrianKernelFeatures(n_mondrians=self.n_mondrians, lifetime=lam_max,
                                          n_jobs=self.n_jobs)
        features._set_state(state["features"])
        task = self._task_from_state(state)
        k = len(task["intercept_"])
        layout = features.cell_layout(lam)
        f, n = int(layout[1][-1]), features.n_samples_seen_
        try:
            ridge = {"coef_": state_array(state, "coef_", np.float64, (f, k)),
                     "_G_inv": state_array(state, "G_inv", np.float64, (f, f))}
        except ValueError as exc:  # the cells are those of the split times (tau) before lam
            raise ValueError(f"{exc}: one column per cell of the partitions (trees_ with their "
                             f"split times tau) at lifetime_={lam!r}") from None
        attrs = {"features_": features, "lifetime_": lam, "lifetime_max_": lam_max,
                 "_layout": layout, **ridge,
                 "_Y": state_array(state, "Y", np.float64, (n, k)),
                 "noise_variance_": state_array(state, "noise_variance_", np.float64, (k,)),
                 **task}
        for key in ("coef_", "_G_inv", "_Y", "noise_variance_"):
            if not np.isfinite(attrs[key]).all():
                raise ValueError(f"{key.strip('_')} holds NaN or inf")
        if not (attrs["noise_variance_"] > 0).all():
            raise ValueError("noise_variance_ must be positive")
        check_ridge(attrs["coef_"], attrs["_G_inv"], attrs["_Y"], attrs["noise_variance_"],
                    float(self.alpha))
        attrs["sweep_"] = _sweep_from_state(state.get("sweep_"))
        names = state_names(state, "feature_names_in_", features.n_features_in_)
        self.__dict__.pop("feature_names_in_", None)
        if names is not None:
            attrs["feature_names_in_"] = names
        attrs["n_features_in_"] = features.n_features_in_
        self.__dict__.update(attrs)


def _sweep_from_state(sweep: Any) -> dict | None:
    """The sweep's curves of a state (diagnostics; None if the width was given): widths
    (finite, >= 0), feature counts, validation MSEs (mean squared errors of centred
    targets: within ``[0, MAX_VARIANCE]``) and log evidences (finite, NaN where the
    conjugate-gradient sweep computes none)."""
    if sweep is None:
        return None
    if not isinstance(sweep, dict) or set(sweep) != {
            "lifetime", "n_features", "validation_mse", "log_evidence"}:
        raise ValueError("sweep_ must be None or the four curves of the sweep")
    m = np.asarray(sweep["lifetime"]).shape
    out = {key: state_array(sweep, key, np.float64 if key != "n_features" else INDEX, m)
           for key in sweep}
    check_range("sweep_.lifetime", out["lifetime"], 0.0, np.finfo(np.float64).max,
                "finite widths")
    check_variances("sweep_.validation_mse", out["validation_mse"])
    if np.isinf(out["log_evidence"]).any():
        raise ValueError("sweep_.log_evidence holds inf (finite values, or NaN where not "
                         "computed, are expected)")
    return out


_RIDGE_DOC = """With ``lifetime="auto"`` the fit holds out ``validation_fraction`` of the rows,
    samples the partitions on the rest up to the lifetime at which they hold about ``max_features``
    cells, and sweeps the cuts in time order (paper Sec. 4.2): each cut replaces one feature
    by two and the ridge is updated (``solver``). At ``n_widths`` points of the sweep it
    records the validation MSE and (exact solver) the log marginal likelihood; the width
    that minimises the first (``select="validation"``) or maximises the second
    (``"evidence"``) is kept. The held-out rows are then added to the partitions (the
    conditional Mondrian, Sec. 5) and the ridge is solved on all rows at that width.
    ``partial_fit`` adds rows the same way.

    Parameters
    ----------
    n_mondrians : int, default=50
    lifetime : "auto" or float, default="auto"
        lambda of the kernel exp(-lambda ||x - x'||_1), in the units of the inputs.
    alpha : float, default=0.1
        Ridge penalty (noise-to-prior variance ratio; the kernel's diagonal is 1).
    max_features : int, default=2000
        Largest number of cells the sweep reaches (the exact solver's memory is 8
        max_features^2 bytes; the final solve is dense too).
    n_widths : int, default=40
        Widths evaluated along the sweep, at geometrically spaced feature counts.
    select : {"validation", "evidence"}, default="validation"
        The evidence needs ``solver="exact"``.
    solver : {"exact", "cg"}, default="exact"
        How the sweep solves the ridge: per-cut updates of the inverse of ``G = Phi'Phi +
        alpha I`` (Sec. 4.2.1; O(features^2) per cut, the fastest up to a few thousand
        features) or conjugate gradients warm-started by copying a cut cell's weights to
        both children (Sec. 4.2.2; O(rows x n_mondrians) per iteration).
    validation_fraction : float, default=0.2
    random_state, n_jobs
        As :class:`MondrianKernelFeatures`.

    Attributes
    ----------
    lifetime_ : float
        The width used.
    features_ : MondrianKernelFeatures
        The partitions (sampled up to ``lifetime_max_``, read at ``lifetime_``).
    coef_ : ndarray of shape (n_features_out, n_outputs)
        Ridge weights of the features at ``lifetime_`` (of centred targets; the centre is
        ``intercept_``).
    noise_variance_ : ndarray of shape (n_outputs,)
        sigma^2 per output: the penalised residual sum of squares over the rows.
    sweep_ : dict of ndarray or None
        With ``lifetime="auto"``: ``lifetime``, ``n_features``, ``validation_mse`` and
        ``log_evidence`` at every evaluated width."""


class MondrianKernelRegressor(RegressorMixin, _MondrianKernelRidge):
    __doc__ = f"""Ridge regression on Mondrian kernel features, the width learned by one sweep.

    {_RIDGE_DOC}

    The model is Bayesian linear regression in feature space (weights N(0, sigma^2 /
    alpha), sigma^2 estimated), so a prediction is Gaussian with variance ``sigma^2 (1 +
    phi(x)' G^-1 phi(x))``: larger away from the data, where rows are cut off into cells
    no training row shares.
    """

    def _encode(self, y: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        y = np.asarray(y, dtype=np.float64)
        check_regression_target(y)
        center = float(np.mean(y))
        return (y - center)[:, None], {"intercept_": np.array([center])}

    def _encode_more(self, y: np.ndarray) -> np.ndarray:
        y = np.asarray(y, dtype=np.float64)
        check_regression_target(y)
        return (y - self.intercept_[0])[:, None]

    def _task_state(self) -> dict:
        return {"intercept_": self.intercept_}

    def _task_from_state(self, state: dict) -> dict:
        """``intercept_``: the targets' mean, a location (:mod:`basics.bounds`)."""
        centre = state_array(state, "intercept_", np.float64, (1,))
        check_locations("intercept_", centre)
        return {"intercept_": centre}

    def predict(self, X: Any, *, return_std: bool = False, quantiles: Any = None):
        """Posterior mean (and standard deviation of the Gaussian predictive), or its
        quantiles (``quantiles=``: :meth:`predict_quantiles`, one column less for a scalar
        level)."""
        if quantiles is not None:
            return predicted_quantiles(self, X, quantiles, return_std)
        cols = self._cells(X)
        mean = self._scores(cols)[:, 0]
        if not return_std:
            return mean
        return mean, np.sqrt(self.noise_variance_[0] * (1.0 + self._quad(cols)))

    def predict_distribution(self, X: Any) -> GaussianMixture:
        """The Gaussian predictive of every row (one component)."""
        mean, std = self.predict(X, return_std=True)
        return GaussianMixture.from_moments(mean, std**2)

    def predict_quantiles(self, X: Any, q: Any = DEFAULT_QUANTILES) -> np.ndarray:
        """Quantiles of the Gaussian predictive of every row.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        q : float or array-like of shape (n_levels,), default=DEFAULT_QUANTILES
            Levels in [0, 1] (:func:`basics.levels.check_levels`).

        Returns
        -------
        ndarray of shape (n_samples, n_levels)
        """
        levels = np.atleast_1d(check_levels(q, "q"))
        return self.predict_distribution(X).quantile(levels)


class MondrianKernelClassifier(ClassifierMixin, _MondrianKernelRidge):
    __doc__ = f"""Least-squares classification on Mondrian kernel features, the width learned by
    one sweep (the classifier counterpart of :class:`MondrianKernelRegressor`).

    {_RIDGE_DOC}

    The targets are the one-hot codes of the classes (centred); the width is chosen by the
    validation MSE of those codes (the Brier score) or the evidence; a row's class is the
    largest score, and ``predict_proba`` clips the scores at 0 and normalises them.

    classes_ : ndarray of shape (n_classes,)
    """

    def partial_fit(self, X: Any, y: Any, *, classes: Any = None) -> MondrianKernelClassifier:
        """As :meth:`_MondrianKernelRidge.partial_fit`; ``classes`` (all the labels there
        will be) may be given on the first call, as scikit-learn's online classifiers take
        it."""
        if not hasattr(self, "coef_") and classes is not None:
            self._classes = np.unique(np.asarray(classes))
            try:
                return self.fit(X, y)
            finally:
                del self._classes
        return super().partial_fit(X, y)

    def _encode(self, y: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        check_classification_targets(y)
        classes = getattr(self, "_classes", None)
        if classes is None:
            classes, codes = np.unique(y, return_inverse=True)
        else:
            codes = np.searchsorted(classes, y)
            bad = (codes >= classes.size) | (classes[np.minimum(codes, classes.size - 1)] != y)
            if bad.any():
                raise ValueError(f"y holds {int(bad.sum())} label(s) not in classes")
        if classes.size < 2:
            raise ValueError(f"y holds one class ({classes[0]!r}); a classifier needs at "
                             "least 2")
        onehot = np.eye(classes.size)[codes]
        center = onehot.mean(axis=0)
        return onehot - center, {"classes_": classes, "intercept_": center}

    def _encode_more(self, y: np.ndarray) -> np.ndarray:
        y = np.asarray(y)
        codes = np.searchsorted(self.classes_, y)
        codes = np.minimum(codes, self.classes_.size - 1)
        unknown = self.classes_[codes] != y
        if unknown.any():
            raise ValueError(f"y holds {int(unknown.sum())} label(s) not seen at fit (first: "
                             f"{y[np.argmax(unknown)].item()!r}); refit with every class")
        return np.eye(self.classes_.size)[codes] - self.intercept_

    def _task_state(self) -> dict:
        return {"intercept_": self.intercept_, "classes_": classes_entry(self.classes_)}

    def _task_from_state(self, state: dict) -> dict:
        classes = classes_from_entry(state["classes_"])
        centre = state_array(state, "intercept_", np.float64, (classes.size,))
        check_range("intercept_", centre, 0.0, 1.0, "class frequencies")
        return {"classes_": classes, "intercept_": centre}

    def decision_function(self, X: Any) -> np.ndarray:
        """The one-hot scores (posterior means), shape (n_samples, n_classes); with two
        classes the second's score minus the first's, shape (n_samples,)."""
        scores = self._scores(self._cells(X))
        return scores[:, 1] - scores[:, 0] if scores.shape[1] == 2 else scores

    def predict_proba(self, X: Any) -> np.ndarray:
        p = np.clip(self._scores(self._cells(X)), 0.0, None)
        total = p.sum(axis=1, keepdims=True)
        return np.where(total > 0, p / np.where(total > 0, total, 1.0), 1.0 / p.shape[1])

    def predict(self, X: Any) -> np.ndarray:
        scores = self._scores(self._cells(X))
        return self.classes_[np.argmax(scores, axis=1)]
