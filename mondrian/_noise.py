"""A label-noise variance estimated from the data: the Gamma test (our extension).

The hyperparameter heuristic of Lakshminarayanan, Roy & Teh (2016), App. B, sets the noise
variance of the hierarchical Gaussian model to ``gamma1 / K``, about ``var(y) / 1000``:
far below the noise of most data, so at an input the forest has seen, every tree's
component is narrower than the noise and a fresh label there is improbable
(``benchmarks/results/issue25/exploration.md``: NLPD 8.5 at seen inputs against 2.8 at new
ones on Friedman #1; with the true noise variance, 2.3 and 2.8).

The Gamma test (Stefansson, Koncar & Jones 1997, "A note on the Gamma test", Neural
Computing & Applications 5; Evans & Jones 2002, Proc. R. Soc. A 458, for its consistency)
estimates the noise variance of ``y = f(x) + e`` for any smooth ``f`` from near neighbours:
with ``delta(k)`` the mean squared distance of every point to its ``k``-th nearest
neighbour and ``gamma(k)`` half the mean squared difference of their labels,

    gamma(k) = Var(e) + A delta(k) + o(delta(k)),

so the intercept of the least-squares line through ``(delta(k), gamma(k))``, ``k = 1 ..
p``, estimates ``Var(e)``. Repeated inputs (categories, rounded times) are neighbours at
distance zero whose label differences are pure noise, which is exactly the case where the
heuristic fails most.
"""

from __future__ import annotations

import numpy as np
from sklearn.neighbors import NearestNeighbors

__all__ = ["GAMMA_NEIGHBOURS", "GAMMA_MAX_ROWS", "gamma_test"]

#: Neighbours ``p`` of the Gamma test's regression (the authors use 10 to 20).
GAMMA_NEIGHBOURS = 10
#: Rows of the (seeded) sample the test runs on: about 3 s for 20,000 rows of 10 features
#: on one core (brute-force neighbours), and on Friedman #1 (10 features, noise variance 1)
#: 1.40 from 20,000 rows against 1.48 from 10,000.
GAMMA_MAX_ROWS = 20_000


def gamma_test(X: np.ndarray, y: np.ndarray, *, floor: float,
               n_neighbors: int = GAMMA_NEIGHBOURS, max_rows: int = GAMMA_MAX_ROWS,
               seed: int = 0) -> float:
    """Noise variance of ``y`` given ``X`` by the Gamma test (module docstring).

    Parameters
    ----------
    X : ndarray of shape (n_rows, n_features)
        Inputs on a common scale (the forests' ``[0, 1]`` scaling).
    y : ndarray of shape (n_rows,)
        Finite labels.
    floor : float
        ``> 0``: the smallest value returned (a noise-free target has intercept ``<= 0``).
    n_neighbors : int, default :data:`GAMMA_NEIGHBOURS`
        ``p``; fewer when there are fewer other rows.
    max_rows : int, default :data:`GAMMA_MAX_ROWS`
        Larger inputs are subsampled, seeded by ``seed``.
    seed : int, default 0

    Returns
    -------
    float
        The intercept, at least ``floor``; ``floor`` for fewer than 3 rows.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((5000, 2)); y = np.sin(6 * X[:, 0]) + 0.5 * rng.normal(size=5000)
    >>> round(gamma_test(X, y, floor=1e-12), 2)
    0.25
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n = y.shape[0]
    if n > max_rows:
        rows = np.sort(np.random.default_rng(seed).choice(n, size=max_rows, replace=False))
        X, y = X[rows], y[rows]
        n = max_rows
    p = min(int(n_neighbors), n - 1)
    if p < 2:
        return float(floor)
    # brute force: the tree indexes are slower than BLAS distances beyond a few features
    nn = NearestNeighbors(n_neighbors=p, algorithm="brute").fit(X)
    dist, ind = nn.kneighbors()  # every row's neighbours but itself
    delta = np.mean(dist * dist, axis=0)
    gamma = 0.5 * np.mean((y[ind] - y[:, None]) ** 2, axis=0)
    slope_den = np.sum((delta - delta.mean()) ** 2)
    if not slope_den > 0:  # every neighbour at the same distance (e.g. all inputs equal)
        return float(max(gamma.mean(), floor))
    slope = np.sum((delta - delta.mean()) * (gamma - gamma.mean())) / slope_den
    intercept = gamma.mean() - slope * delta.mean()
    return float(max(intercept, floor)) if np.isfinite(intercept) else float(floor)
