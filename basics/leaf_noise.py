"""The one leaf-noise model of the package: a normal-inverse-gamma prior on every leaf.

A leaf of a tree holds the targets of its rows; a prediction from that leaf is the posterior
predictive of a new target given them. With the conjugate prior (Murphy 2007, "Conjugate
Bayesian analysis of the Gaussian distribution", Sec. 3; the mean-variance shift model of
Chipman, George & McCulloch 1998, Sec. 4, which the SMC trees use)

    sigma^2 ~ IG(nu0 / 2, nu0 s0^2 / 2),     mu | sigma^2 ~ N(mu0, sigma^2 / kappa0),

and ``n`` rows of mean ``ybar`` and sum of squares about it ``SS``, the posterior is

    kappa_n = kappa0 + n,   mu_n = (kappa0 mu0 + n ybar) / kappa_n,   nu_n = nu0 + n,
    nu_n s_n^2 = nu0 s0^2 + SS + kappa0 n (ybar - mu0)^2 / kappa_n,

and a new target is Student-t with ``nu_n`` degrees of freedom, location ``mu_n`` and
squared scale ``s_n^2 (1 + 1 / kappa_n)``: its variance

    s_n^2 (1 + 1 / kappa_n) nu_n / (nu_n - 2)                                    (*)

counts both the noise (``s_n^2``, the inverse gamma integrated out) and the uncertainty of
the leaf mean (``s_n^2 / kappa_n``). A forest's trees already spread their leaf means, so
the CART leaves were also measured without the mean's term: intervals before
recalibration were narrower, but every recalibrated NLPD was higher (flights by 0.01-0.12,
Friedman by 0.004-0.02) and more flights fell below a log density of -50, so the leaves
keep (*) (``benchmarks/bench_leaf_prior.py``).

**How the forests use it.** A CART leaf (Bayesian and random forests, and so the branches
of EBF and SSF) takes ``kappa0 = 0`` (a flat prior on its mean, so the leaf predicts its
weighted mean exactly as CART does, and RMSE does not move), ``nu0 = prior_rows``
pseudo-rows (learnt from held-out rows among :data:`LEAF_PRIOR_CANDIDATES` by default,
:mod:`basics.prior_choice`; :data:`LEAF_PRIOR_ROWS` where nothing is held out) and
``s0^2`` a pooled within-leaf
variance (:func:`pooled_variance`, estimated at fit from the training rows): that of the
smallest subtree around the leaf whose leaves hold ``nu0`` residual degrees of freedom
(``ebf._cart_fit.prior_centres``), the residual variance of the leaf's neighbourhood. A
centre pooled over the whole forest widened every quiet flight to the noise of the
delayed ones (NLPD 4.23 -> 4.75 on shuffled flights, 100 trees;
``benchmarks/bench_leaf_prior.py``). Weighted rows (Bayesian-bootstrap weights) count by
their effective sample size ``n = (sum w)^2 / sum w^2``, with ``SS = n * v`` for the
weighted variance ``v``.

Each leaf enters the predictive mixture as a Gaussian with the Student-t's mean and variance
(*), not as a Student-t: the mixture's CDF, quantiles and CRPS keep their exact closed forms
(:mod:`basics.mixture`) and a row keeps one component per tree, while ``nu_n >= nu0 = 10``
degrees of freedom make the t's tails close to the Gaussian's (a scale mixture would need
several components per leaf and multiply the cost of every prediction).

**The floor data cannot give.** A leaf of one distinct target value (``SS = 0``) has
variance ``nu0 s0^2 (n + 1) / (n (nu0 + n - 2))``, never less: about ``1.2 s0^2`` for a leaf
of 3 effective rows (5 Bayesian-bootstrap rows) and a prior of 10 rows. It falls like
``nu0 s0^2 / n`` only as the leaf's rows grow, so a leaf of hundreds of equal targets is
(rightly) confident; below that the prior, not the leaf, sets the width.

**The other learners.** The SMC trees' ``noise="leaf"`` is this posterior with the prior
of Chipman et al. (``nu``, ``lam`` from the data, ``kappa0 > 0``; :func:`nig_posterior`
and :func:`nig_predictive_variance` compute it for them). The Mondrian forests'
``noise="per_leaf"`` uses the same prior weight (:data:`LEAF_PRIOR_ROWS` pseudo-rows at the
forest's variance; the posterior mode, as the hierarchical model of its belief propagation
needs a variance, not a distribution). BART and the Mondrian kernel have one noise variance
for the whole model (sampled from its posterior by BART; the ridge residual variance of the
kernel), so no single leaf can shrink it.
"""

from __future__ import annotations

import numpy as np

__all__ = ["LEAF_PRIOR_CANDIDATES", "LEAF_PRIOR_ROWS", "nig_posterior", "nig_predictive_variance",
           "leaf_predictive_variance", "pooled_variance"]

#: Weight of the prior on a leaf's noise variance, in pseudo-rows at the pooled variance:
#: the default of every learner that predicts from leaf statistics. Ten rows outweigh a
#: leaf of ``min_samples_leaf = 5`` Bayesian-bootstrap rows (effective size about 3), so
#: such a leaf stays near the pooled variance however equal its targets; a leaf of hundreds
#: of rows is its own spread. Mondrian forests' ``min_samples_split`` defaults to 10 too.
LEAF_PRIOR_ROWS = 10.0

#: The prior strengths ``leaf_prior_rows="auto"`` chooses among, by the held-out log score
#: of the calibration groups (:mod:`basics.prior_choice`); None: no prior (every leaf its
#: own weighted variance). One fixed strength cannot suit both a target whose noise is
#: about the same everywhere (a strong prior tames small leaves) and one whose noise grows
#: with its level (quiet leaves must not borrow the noise of loud neighbours).
LEAF_PRIOR_CANDIDATES = (None, 2.0, 5.0, 10.0, 25.0, 60.0)


def nig_posterior(n: np.ndarray, ybar: np.ndarray, ss: np.ndarray, *, nu0: float,
                  s0_sq: float | np.ndarray, mu0: float = 0.0,
                  kappa0: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Normal-inverse-gamma posterior of leaves with ``n`` rows (module docstring).

    Parameters
    ----------
    n : ndarray
        Rows (effective rows for weighted data), ``> 0`` where ``kappa0 == 0``.
    ybar, ss : ndarray
        Mean of the rows and their sum of squares about it (``>= 0``).
    nu0, s0_sq : float
        Prior degrees of freedom (pseudo-rows) and prior noise variance.
    mu0, kappa0 : float
        Prior mean of a leaf and its precision relative to the noise (``0``: flat).

    Returns
    -------
    mu_n, kappa_n, nu_n, s_n_sq : ndarray
        ``mu | sigma^2 ~ N(mu_n, sigma^2 / kappa_n)``, ``sigma^2 ~ IG(nu_n / 2,
        nu_n s_n_sq / 2)``.

    Examples
    --------
    >>> mu, kappa, nu, s2 = nig_posterior(np.array([4.0]), np.array([1.0]),
    ...                                   np.array([0.0]), nu0=6.0, s0_sq=2.0)
    >>> float(mu[0]), float(kappa[0]), float(nu[0]), float(s2[0])
    (1.0, 4.0, 10.0, 1.2)
    """
    n = np.asarray(n, dtype=np.float64)
    ybar = np.asarray(ybar, dtype=np.float64)
    kappa_n = kappa0 + n
    nu_n = nu0 + n
    if kappa0 > 0:
        mu_n = (kappa0 * mu0 + n * ybar) / kappa_n
        shift = kappa0 * n * (ybar - mu0) ** 2 / kappa_n
    else:
        mu_n, shift = ybar, 0.0
    s_n_sq = (nu0 * s0_sq + np.maximum(ss, 0.0) + shift) / nu_n
    return mu_n, kappa_n, nu_n, s_n_sq


def nig_predictive_variance(kappa_n: np.ndarray, nu_n: np.ndarray,
                            s_n_sq: np.ndarray) -> np.ndarray:
    """Variance (*) of the Student-t predictive of a posterior of :func:`nig_posterior`.

    Needs ``nu_n > 2`` and ``kappa_n > 0``.

    Examples
    --------
    >>> float(nig_predictive_variance(np.array([4.0]), np.array([10.0]), np.array([1.2]))[0])
    1.875
    """
    return s_n_sq * (1.0 + 1.0 / kappa_n) * nu_n / (nu_n - 2.0)


def leaf_predictive_variance(variance: np.ndarray, n_eff: np.ndarray, *,
                             s0_sq: float | np.ndarray,
                             prior_rows: float = LEAF_PRIOR_ROWS) -> np.ndarray:
    """Predictive variance of CART leaves: (*) with ``kappa0 = 0``, ``SS = n_eff * variance``.

    Parameters
    ----------
    variance : ndarray
        Weighted within-leaf variance ``sum w (y - ybar)^2 / sum w`` of every leaf.
    n_eff : ndarray
        Effective rows ``(sum w)^2 / sum w^2`` of every leaf (``>= 1`` for positive weights;
        smaller values are taken as 1).
    s0_sq : float or ndarray
        Prior noise variance of every leaf (or one for all), ``> 0``.
    prior_rows : float, default :data:`LEAF_PRIOR_ROWS`
        ``nu0 > 1``.

    Returns
    -------
    ndarray
        ``(prior_rows s0^2 + n v) (n + 1) / (n (prior_rows + n - 2))``.

    Examples
    --------
    >>> v = leaf_predictive_variance(np.array([0.0, 1.0]), np.array([3.0, 1e6]), s0_sq=1.0)
    >>> np.round(v, 4).tolist()   # equal targets: the prior's width; many rows: their own
    [1.2121, 1.0]
    """
    if not prior_rows > 1.0:
        raise ValueError(f"prior_rows must be > 1 (a finite predictive variance); "
                         f"got {prior_rows!r}.")
    s0_sq = np.asarray(s0_sq, dtype=np.float64)
    if not np.all(np.isfinite(s0_sq) & (s0_sq > 0)):
        raise ValueError("s0_sq must be finite positive variances.")
    n = np.maximum(np.asarray(n_eff, dtype=np.float64), 1.0)
    _, kappa_n, nu_n, s_n_sq = nig_posterior(n, 0.0, n * np.asarray(variance, np.float64),
                                             nu0=float(prior_rows), s0_sq=s0_sq)
    return nig_predictive_variance(kappa_n, nu_n, s_n_sq)


def pooled_variance(variance: np.ndarray, n_eff: np.ndarray) -> float:
    """Pooled within-leaf variance ``sum n v / sum (n - 1)`` over leaves (``n`` effective).

    ``n v`` has expectation ``sigma^2 (n - 1)`` for weighted rows of noise variance
    ``sigma^2`` about their weighted mean, so this is the pooled unbiased estimate: over a
    forest, its residual variance; over a subtree, the prior centre of its leaves. Leaves of
    one effective row add nothing. Returns 0.0 when no leaf has more than one effective row
    or all targets within leaves are equal (the caller supplies a floor).

    Examples
    --------
    >>> pooled_variance(np.array([2.0, 0.5]), np.array([2.0, 4.0]))
    1.5
    """
    n = np.asarray(n_eff, dtype=np.float64)
    dof = float(np.sum(np.maximum(n - 1.0, 0.0)))
    if not dof > 0:
        return 0.0
    return float(np.sum(n * np.asarray(variance, dtype=np.float64)) / dof)
