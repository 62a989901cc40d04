"""Oracles of the noise variances: Mondrian per-node noise (``mondrian._posterior``),
the Gamma test (``mondrian`` noise estimate) and the CART leaf-noise prior (``ebf``)."""

from __future__ import annotations

import numpy as np

# ------------------------------------------------------------ per-node noise (mondrian._posterior)


def node_noise_variance_naive(node_y, noise_var, shape):
    """Per-node noise variances (``mondrian._posterior.node_noise_variance``) from the labels.

    ``node_y[j]`` holds every label below node ``j``; the within-node sum of squares is
    taken about their mean directly (not from the sums), and the inverse-gamma posterior
    mode ``(b0 + SS / 2) / (a0 + n / 2 + 1)`` with ``a0 = shape`` and
    ``b0 = noise_var * (a0 + 1)`` (prior mode ``noise_var``) is written as it reads.
    """
    a0 = float(shape)
    b0 = noise_var * (a0 + 1.0)
    out = np.empty(len(node_y))
    for j, y in enumerate(node_y):
        y = np.asarray(y, dtype=float)
        ss = float(np.sum((y - y.mean()) ** 2)) if len(y) else 0.0
        out[j] = (b0 + ss / 2.0) / (a0 + len(y) / 2.0 + 1.0)
    return out


# ---------------------------------------------------------------- leaf-noise prior (oracles)


def naive_leaf_predictive_variance(y, w, s0_sq, prior_rows, n_grid=200_001):
    """Predictive variance of a new target from one CART leaf of rows ``y`` with weights
    ``w``, by quadrature over the noise variance (no conjugate algebra).

    The rows count as ``n = (sum w)^2 / sum w^2`` effective rows with sum of squares
    ``n * v`` about their weighted mean (``v`` the weighted variance). The prior is
    ``sigma^2 ~ IG(nu0 / 2, nu0 s0^2 / 2)`` and ``p(mu | sigma^2) ~ 1 / sigma`` (the flat
    limit of the normal-inverse-gamma); integrating ``mu`` out of the likelihood leaves
    ``sigma^-n exp(-SS / (2 sigma^2))``, the posterior of ``sigma^2`` is tabulated on a log
    grid, and ``Var[y_new] = E[sigma^2] (1 + 1 / n)`` (noise plus the leaf mean's variance,
    ``sigma^2 / n`` given ``sigma^2``).
    """
    y = np.asarray(y, float)
    w = np.asarray(w, float)
    W = w.sum()
    n = W * W / np.sum(w * w)
    ybar = np.sum(w * y) / W
    ss = n * np.sum(w * (y - ybar) ** 2) / W
    scale = (prior_rows * s0_sq + ss) / (prior_rows + n)
    log_s2 = np.log(scale) + np.linspace(-25.0, 25.0, n_grid)
    s2 = np.exp(log_s2)
    log_prior = -(prior_rows / 2 + 1) * log_s2 - prior_rows * s0_sq / (2 * s2)
    log_lik = -(n / 2) * log_s2 - ss / (2 * s2)
    log_post = log_prior + log_lik + log_s2  # d sigma^2 = sigma^2 d log sigma^2
    p = np.exp(log_post - log_post.max())
    e_s2 = np.sum(p * s2) / np.sum(p)
    return e_s2 * (1.0 + 1.0 / n)


def naive_pooled_leaf_variance(leaf_rows):
    """``sum_leaves n v / sum_leaves (n - 1)`` from the (y, w) rows of every leaf."""
    num = 0.0
    dof = 0.0
    for y, w in leaf_rows:
        y = np.asarray(y, float)
        w = np.asarray(w, float)
        W = w.sum()
        n = W * W / np.sum(w * w)
        ybar = np.sum(w * y) / W
        num += n * np.sum(w * (y - ybar) ** 2) / W
        dof += n - 1.0
    return num / dof


def naive_prior_centres(left, right, root, leaf_rows, min_dof, forest_centre, floor):
    """Per leaf of one tree: the pooled within-leaf variance of the smallest subtree holding
    it whose leaves have ``min_dof`` degrees of freedom (``forest_centre`` if none).

    ``leaf_rows`` maps a leaf (global node id) to its rows ``(y, w)``; subtrees are found
    by walking up a parent map, pooling with :func:`naive_pooled_leaf_variance`.
    """
    parent = {root: None}
    stack = [root]
    order = []
    while stack:
        j = stack.pop()
        order.append(j)
        if left[j] != -1:
            for c in (left[j], right[j]):
                parent[int(c)] = j
                stack.append(int(c))

    def leaves_under(j):
        if left[j] == -1:
            return [j]
        return leaves_under(int(left[j])) + leaves_under(int(right[j]))

    def dof(leaves):
        total = 0.0
        for leaf in leaves:
            w = np.asarray(leaf_rows[leaf][1], float)
            total += w.sum() ** 2 / np.sum(w * w) - 1.0
        return total

    out = {}
    for leaf in (j for j in order if left[j] == -1):
        j, centre = leaf, forest_centre
        while j is not None:
            under = leaves_under(j)
            if dof(under) >= min_dof:
                centre = max(naive_pooled_leaf_variance([leaf_rows[k] for k in under]), floor)
                break
            j = parent[j]
        out[leaf] = centre
    return out


# ---------------------------------------------------------------- Gamma test (oracle)


def naive_gamma_test(X, y, p):
    """The Gamma test's intercept from every pair distance (no neighbour index): for each
    row, the ``p`` other rows nearest in squared Euclidean distance (ties by row index), the
    means ``delta(k)`` / ``gamma(k)`` over rows, and the least-squares line's intercept."""
    X = np.asarray(X, float)
    y = np.asarray(y, float)
    n = len(y)
    delta = np.zeros(p)
    gamma = np.zeros(p)
    for i in range(n):
        d2 = [(float(np.sum((X[j] - X[i]) ** 2)), j) for j in range(n) if j != i]
        d2.sort()
        for k in range(p):
            delta[k] += d2[k][0] / n
            gamma[k] += 0.5 * (y[d2[k][1]] - y[i]) ** 2 / n
    slope, intercept = np.polyfit(delta, gamma, 1)
    return intercept


def naive_held_out_log_scores(weights, means, variances, y, discrete, low=-30.0):
    """Sum over rows of each row's log score under its Gaussian mixture, and the count of
    rows below ``low``: the log density, or (``discrete``) the log probability of
    ``[y - 1/2, y + 1/2]``, one row at a time with scipy's normal."""
    from scipy import stats

    total, n_low = 0.0, 0
    for w, m, v, t in zip(weights, means, variances, y, strict=True):
        sd = np.sqrt(v)
        if discrete:
            p = sum(wk * (stats.norm.sf(t - 0.5, mk, sk) - stats.norm.sf(t + 0.5, mk, sk)
                          if t - 0.5 > mk else
                          stats.norm.cdf(t + 0.5, mk, sk) - stats.norm.cdf(t - 0.5, mk, sk))
                    for wk, mk, sk in zip(w, m, sd, strict=True)) / np.sum(w)
            score = np.log(p)
        else:  # log-sum-exp: a far row's density underflows
            logs = [np.log(wk) + stats.norm.logpdf(t, mk, sk)
                    for wk, mk, sk in zip(w, m, sd, strict=True)]
            score = np.logaddexp.reduce(logs) - np.log(np.sum(w))
        total += score
        n_low += int(score < low)
    return total, n_low
