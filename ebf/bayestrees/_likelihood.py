"""Leaf marginal likelihoods l(Y_Nj | X_Nj) from sufficient statistics (thesis eq. 3.1, 3.2, 4.9).

A likelihood is a code and a float parameter vector (:class:`LeafLikelihood`), so numba
kernels (an SMC weight update) call the same :func:`leaf_loglik` on one leaf's statistics
that the vectorised Python entry points call on many. Per-row statistics follow the
project's contract (``docs/architecture.md``): a node's statistics are the sum of its rows'.

Codes, per-row statistics and ``params``:

- ``UNINFORMATIVE``: the constant 1 (log 0), so the posterior is the prior; rows ``[1]``;
  no params.
- ``DIRICHLET_MULTINOMIAL``: eq. (3.2), a symmetric Dirichlet of total concentration
  alpha; rows one-hot of the class (K columns); ``[alpha, K]``.
- ``NORMAL``: eq. (4.9), N(y | mu, sigma^2) with mu ~ N(mu0, sigma_mu^2) integrated out;
  rows ``[1, y, y^2]``; ``[sigma^2, mu0, sigma_mu^2]``.
- ``NORMAL_INVERSE_GAMMA``: every leaf has its own mean and variance, the mean-variance
  shift model of Chipman, George and McCulloch (1998, Sec. 4): sigma^2 ~ IG(nu / 2,
  nu lambda / 2) and mu | sigma^2 ~ N(mu0, sigma^2 / kappa), both integrated out (the
  conjugate normal-inverse-gamma marginal, a product of Student-t predictives); rows
  ``[1, y, y^2]``; ``[nu, lambda, mu0, kappa]``. :func:`nig_posterior` gives a leaf's
  posterior parameters and predictive moments.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from basics import leaf_noise
from basics.flat_tree import INDEX, NO_NODE
from basics.jit import JIT

from ._trees import BayesTree, check_X, partition_rows

__all__ = ["DIRICHLET_MULTINOMIAL", "NORMAL", "NORMAL_INVERSE_GAMMA", "UNINFORMATIVE",
           "LeafLikelihood", "leaf_loglik", "log_likelihood", "nig_posterior", "segment_stats"]

UNINFORMATIVE, DIRICHLET_MULTINOMIAL, NORMAL, NORMAL_INVERSE_GAMMA = 0, 1, 2, 3


def _positive(name: str, value: float, fix: str) -> float:
    v = float(value)
    if not 0.0 < v < math.inf:
        raise ValueError(f"{name}={value!r} must be finite and > 0; {fix}")
    return v


@dataclass(frozen=True)
class LeafLikelihood:
    """One of the leaf likelihoods of the module table; build it with the class methods.

    Attributes
    ----------
    code : int
        ``UNINFORMATIVE``, ``DIRICHLET_MULTINOMIAL`` or ``NORMAL``.
    params : ndarray of float64
        The parameters, in the order of the module table.
    n_stats : int
        Columns of the per-row statistics.
    """

    code: int
    params: np.ndarray
    n_stats: int

    @classmethod
    def uninformative(cls) -> LeafLikelihood:
        """The constant likelihood: the posterior over trees is the prior."""
        return cls(UNINFORMATIVE, np.zeros(0), 1)

    @classmethod
    def dirichlet_multinomial(cls, alpha: float, n_classes: int) -> LeafLikelihood:
        """eq. (3.2) with a symmetric Dirichlet of total concentration ``alpha`` (alpha/K each).

        Labels are class codes ``0 .. n_classes - 1``.
        """
        alpha = _positive("alpha", alpha, "the thesis uses alpha = 5 (Sec. 3.4)")
        if isinstance(n_classes, bool) or int(n_classes) != n_classes or n_classes < 1:
            raise ValueError(f"n_classes={n_classes!r} must be an integer >= 1 (the number "
                             "of class codes)")
        k = int(n_classes)
        return cls(DIRICHLET_MULTINOMIAL, np.array([alpha, float(k)]), k)

    @classmethod
    def normal(cls, sigma2: float, mu0: float = 0.0, sigma_mu2: float = 1.0) -> LeafLikelihood:
        """eq. (4.9): Normal noise of variance ``sigma2``, leaf mean ~ N(mu0, sigma_mu2)."""
        sigma2 = _positive("sigma2", sigma2, "pass the noise variance")
        sigma_mu2 = _positive("sigma_mu2", sigma_mu2, "pass the prior variance of a leaf "
                              "mean, e.g. (0.5 / (k sqrt(M)))**2 for BART (Sec. 4.2.4)")
        if not math.isfinite(float(mu0)):
            raise ValueError(f"mu0={mu0!r} must be finite (the prior mean of a leaf)")
        return cls(NORMAL, np.array([sigma2, float(mu0), sigma_mu2]), 3)

    @classmethod
    def normal_inverse_gamma(cls, nu: float, lam: float, mu0: float = 0.0,
                             kappa: float = 1.0) -> LeafLikelihood:
        """A mean and a variance per leaf (module table): sigma^2 ~ IG(nu / 2, nu lam / 2),
        mu | sigma^2 ~ N(mu0, sigma^2 / kappa)."""
        nu = _positive("nu", nu, "pass the prior degrees of freedom of a leaf's variance, "
                       "e.g. 3 as BART's")
        lam = _positive("lam", lam, "pass the prior scale of a leaf's variance")
        kappa = _positive("kappa", kappa, "pass the prior precision of a leaf mean relative "
                          "to the noise, sigma^2 / Var(mu)")
        if not math.isfinite(float(mu0)):
            raise ValueError(f"mu0={mu0!r} must be finite (the prior mean of a leaf)")
        return cls(NORMAL_INVERSE_GAMMA, np.array([nu, lam, float(mu0), kappa]), 3)

    def row_stats(self, y: np.ndarray) -> np.ndarray:
        """Per-row statistics of the labels ``y`` (module table), float64 (n_rows, n_stats).

        Raises ``ValueError`` on non-finite labels or class codes outside ``0 .. K - 1``.
        """
        y = np.asarray(y)
        if y.ndim != 1:
            raise ValueError(f"y must be 1-D, got shape {y.shape}")
        yf = y.astype(np.float64)
        bad = ~np.isfinite(yf)
        if bad.any():
            raise ValueError(f"y holds {int(bad.sum())} NaN or inf value(s) out of {y.size}; "
                             "drop or impute them")
        if self.code == UNINFORMATIVE:
            return np.ones((y.size, 1))
        if self.code in (NORMAL, NORMAL_INVERSE_GAMMA):
            return np.column_stack([np.ones(y.size), yf, yf * yf])
        k = self.n_stats
        codes = yf.astype(INDEX)
        bad = (codes != yf) | (codes < 0) | (codes >= k)
        if bad.any():
            raise ValueError(f"y holds {int(bad.sum())} value(s) that are not class codes "
                             f"0 .. {k - 1} (first: {y[np.argmax(bad)].item()!r}); encode the "
                             "classes as integers first")
        out = np.zeros((y.size, k))
        out[np.arange(y.size), codes] = 1.0
        return out

    def __call__(self, stats: np.ndarray) -> np.ndarray:
        """log l of every leaf from its summed statistics, shape (n_leaves, n_stats)."""
        stats = np.ascontiguousarray(stats, dtype=np.float64)
        if stats.ndim != 2 or stats.shape[1] != self.n_stats:
            raise ValueError(f"stats must have shape (n_leaves, {self.n_stats}), got "
                             f"{stats.shape}")
        return _loglik_rows(self.code, self.params, stats)


def log_likelihood(tree: BayesTree, X: np.ndarray, y: np.ndarray,
                   likelihood: LeafLikelihood) -> float:
    """log p(Y | T, X) = sum over the leaves of log l(Y_Nj | X_Nj) (eq. 3.1).

    Parameters
    ----------
    tree : BayesTree
    X : ndarray of shape (n_rows, n_features)
    y : ndarray of shape (n_rows,)
    likelihood : LeafLikelihood

    Returns
    -------
    float
    """
    X = check_X(X)
    tree.check(X.shape[1])
    S = likelihood.row_stats(y)
    if S.shape[0] != X.shape[0]:
        raise ValueError(f"y has {S.shape[0]} rows but X has {X.shape[0]}; pass one label per row")
    order, start, count = partition_rows(tree, X)
    return float(_tree_loglik(tree.record(X.shape[0], order, start, count), tree.n_nodes, S,
                              likelihood.code, likelihood.params))


def nig_posterior(params: np.ndarray, stats: np.ndarray) -> tuple[np.ndarray, ...]:
    """Posterior of the ``NORMAL_INVERSE_GAMMA`` leaves with statistics ``stats``.

    Parameters
    ----------
    params : ndarray ``[nu, lambda, mu0, kappa]``
    stats : ndarray of shape (n_leaves, 3)
        ``[n, sum y, sum y^2]`` per leaf.

    Returns
    -------
    mean, kappa_n, a_n, b_n : ndarray of shape (n_leaves,)
        mu | sigma^2 ~ N(mean, sigma^2 / kappa_n) and sigma^2 ~ IG(a_n, b_n): the predictive
        of a new label is Student-t with ``2 a_n`` degrees of freedom, location ``mean`` and
        squared scale ``b_n (kappa_n + 1) / (a_n kappa_n)``.
    """
    nu, lam, mu0, kappa = (float(v) for v in params)
    n, s1, s2 = stats[:, 0], stats[:, 1], stats[:, 2]
    with np.errstate(invalid="ignore", divide="ignore"):
        ybar = np.where(n > 0, s1 / n, mu0)
    mean, kappa_n, nu_n, s_n_sq = leaf_noise.nig_posterior(
        n, ybar, s2 - s1 * ybar, nu0=nu, s0_sq=lam, mu0=mu0, kappa0=kappa)
    return mean, kappa_n, 0.5 * nu_n, 0.5 * nu_n * s_n_sq


# ---------------------------------------------------------------------------------- kernels


@njit(inline="always", **JIT)
def segment_stats(S, t, j, out):  # pragma: no cover - numba
    """Sum of the per-row statistics ``S`` over node ``j``'s row segment into ``out``
    (``t`` any record with the row partition ``order, start, count`` of a
    :class:`~.records.Tree`).

    The Normal's three statistics ``[1, y, y^2]`` are summed in one pass into scalars (about
    3x faster than accumulating in ``out``, which the compiler must reload every row).
    """
    order = t.order
    start = t.start
    count = t.count
    if S.shape[1] == 3:
        a0 = 0.0
        a1 = 0.0
        a2 = 0.0
        for i in range(start[j], start[j] + count[j]):
            row = order[i]
            a0 += S[row, 0]
            a1 += S[row, 1]
            a2 += S[row, 2]
        out[0] = a0
        out[1] = a1
        out[2] = a2
        return
    for k in range(S.shape[1]):
        acc = 0.0
        for i in range(start[j], start[j] + count[j]):
            acc += S[order[i], k]
        out[k] = acc


@njit(**JIT)
def leaf_loglik(code, params, s):  # pragma: no cover - numba
    """log l of one leaf from its statistics ``s`` (module table)."""
    if code == DIRICHLET_MULTINOMIAL:
        alpha = params[0]
        a = alpha / params[1]
        n = 0.0
        out = math.lgamma(alpha)
        for k in range(s.shape[0]):
            out += math.lgamma(s[k] + a) - math.lgamma(a)
            n += s[k]
        return out - math.lgamma(n + alpha)
    if code == NORMAL:
        n = s[0]
        if n <= 0.0:
            return 0.0
        sigma2, mu0, tau2 = params[0], params[1], params[2]
        ybar = s[1] / n
        # within-leaf sum of squares; rounding can take it a hair below 0
        ss = max(s[2] - s[1] * ybar, 0.0)
        return (-0.5 * n * math.log(2.0 * math.pi * sigma2) - 0.5 * math.log1p(n * tau2 / sigma2)
                - 0.5 * ss / sigma2 - 0.5 * n * (ybar - mu0) ** 2 / (sigma2 + n * tau2))
    if code == NORMAL_INVERSE_GAMMA:
        n = s[0]
        if n <= 0.0:
            return 0.0
        a0 = 0.5 * params[0]
        b0 = a0 * params[1]
        mu0, kappa = params[2], params[3]
        ybar = s[1] / n
        ss = max(s[2] - s[1] * ybar, 0.0)
        kappa_n = kappa + n
        a_n = a0 + 0.5 * n
        b_n = b0 + 0.5 * ss + 0.5 * kappa * n * (ybar - mu0) ** 2 / kappa_n
        return (math.lgamma(a_n) - math.lgamma(a0) + a0 * math.log(b0) - a_n * math.log(b_n)
                + 0.5 * math.log(kappa / kappa_n) - 0.5 * n * math.log(2.0 * math.pi))
    return 0.0


@njit(**JIT)
def _loglik_rows(code, params, stats):  # pragma: no cover - numba
    out = np.empty(stats.shape[0])
    for i in range(stats.shape[0]):
        out[i] = leaf_loglik(code, params, stats[i])
    return out


@njit(**JIT)
def _tree_loglik(t, n_nodes, S, code, params):  # pragma: no cover - numba
    s = np.empty(S.shape[1])
    total = 0.0
    for j in range(n_nodes):
        if t.feature[j] == NO_NODE:
            segment_stats(S, t, j, s)
            total += leaf_loglik(code, params, s)
    return total
