"""The Chipman et al. (1998) decision-tree prior p(T | X) (thesis Sec. 3.2.3, eq. 3.3-3.4; 4.2.4).

A node j whose rows vary along some dimension (|V_j| > 0) splits with probability
``alpha_s * (1 + depth(j)) ** -beta_s`` (eq. 3.3; eq. 4.3's indicator of a valid split is
|V_j| > 0); a node whose rows are all identical stops. A split dimension is uniform over
V_j and its location uniform on the rows' extent along it, so both children hold rows.

Randomness enters the kernels as uniforms drawn beforehand, three per node slot
(``u[j] = (stop or split, dimension, location)``): the same uniforms give the same tree
whatever the caller (``sample_prior``, an SMC proposal, the plain-NumPy oracle).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from basics.flat_tree import NO_NODE
from basics.jit import JIT

from ._records import model_record, small_scratch
from ._trees import (
    BayesTree,
    check_X,
    dim_extent,
    node_extent,
    partition_rows,
    split_node,
    varying_dims,
)

__all__ = ["DEFAULT_ALPHA_S", "DEFAULT_BETA_S", "check_prior_params", "draw_split",
           "leaf_log_prior", "log_prior", "node_log_prior", "prior_cut", "sample_prior",
           "split_log_prior", "split_probability"]

#: BART's defaults (Chipman et al. 2010; thesis Sec. 4.2.4). Chapter 3 uses other values.
DEFAULT_ALPHA_S = 0.95
DEFAULT_BETA_S = 2.0

#: Uniforms a node consumes in ``expand_prior``: split-or-stop, dimension, location.
UNIFORMS_PER_NODE = 3


def check_prior_params(alpha_s: float, beta_s: float) -> tuple[float, float]:
    """``(alpha_s, beta_s)`` as floats, or ``ValueError`` naming the bad one and the fix.

    eq. (3.3) needs ``0 < alpha_s < 1`` and ``0 <= beta_s < inf``.
    """
    a, b = float(alpha_s), float(beta_s)
    if not 0.0 < a < 1.0:
        raise ValueError(f"alpha_s={alpha_s!r} must lie in the open interval (0, 1) "
                         f"(eq. 3.3); use e.g. alpha_s={DEFAULT_ALPHA_S}")
    if not 0.0 <= b < math.inf:
        raise ValueError(f"beta_s={beta_s!r} must be finite and >= 0 (eq. 3.3); use e.g. "
                         f"beta_s={DEFAULT_BETA_S}")
    return a, b


def log_prior(tree: BayesTree, X: np.ndarray, alpha_s: float = DEFAULT_ALPHA_S,
              beta_s: float = DEFAULT_BETA_S) -> float:
    """log p(T | X) of eq. (3.4), a density in the split locations.

    Parameters
    ----------
    tree : BayesTree
    X : ndarray of shape (n_rows, n_features)
    alpha_s, beta_s : float
        Parameters of eq. (3.3).

    Returns
    -------
    float
        ``sum_leaves 1(|V_j| > 0) log(1 - p_j) + sum_internal (log p_j - log|V_j|
        - log|e_{j, delta_j}|)``; ``-inf`` if some split is impossible under the prior
        (a dimension outside V_j, or a location outside ``[min, max)`` of the node's rows,
        which would leave a child empty).

    Examples
    --------
    >>> X = np.array([[0.0], [1.0]])
    >>> round(log_prior(BayesTree.root_only(2), X, 0.5, 0.0), 6)  # stop: log(1 - 0.5)
    -0.693147
    """
    alpha_s, beta_s = check_prior_params(alpha_s, beta_s)
    X = check_X(X)
    tree.check(X.shape[1])
    order, start, count = partition_rows(tree, X)
    return float(_log_prior(tree.record(X.shape[0], order, start, count), tree.n_nodes, X,
                            model_record(alpha_s, beta_s)))


def sample_prior(X: np.ndarray, alpha_s: float = DEFAULT_ALPHA_S,
                 beta_s: float = DEFAULT_BETA_S,
                 rng: np.random.Generator | int | None = None) -> BayesTree:
    """Draw T ~ p(T | X) by the sequential generative process (Sec. 3.2.3, Fig. 3.1).

    Nodes are expanded one at a time, breadth first (the node-wise order of Sec. 4.2.4);
    the prior does not depend on the order.

    Parameters
    ----------
    X : ndarray of shape (n_rows, n_features)
    alpha_s, beta_s : float
        Parameters of eq. (3.3).
    rng : numpy Generator, int seed or None

    Returns
    -------
    BayesTree

    Examples
    --------
    >>> X = np.arange(6.0).reshape(-1, 1)
    >>> tree = sample_prior(X, 0.95, 0.5, rng=0)
    >>> bool(tree.n_leaves <= 6)
    True
    """
    alpha_s, beta_s = check_prior_params(alpha_s, beta_s)
    X = check_X(X)
    rng = np.random.default_rng(rng)
    tree = BayesTree.root_only(X.shape[0])
    u = rng.random((tree.feature.shape[0], UNIFORMS_PER_NODE))
    tree.n_nodes = int(_grow_prior(tree.record(X.shape[0]), X, model_record(alpha_s, beta_s),
                                   u))
    return tree


# ---------------------------------------------------------------------------------- kernels


@njit(**JIT)
def split_probability(depth, alpha_s, beta_s):  # pragma: no cover - numba
    """eq. (3.3): ``alpha_s * (1 + depth) ** -beta_s`` (for a node with |V_j| > 0)."""
    return alpha_s * (1.0 + depth) ** (-beta_s)


@njit(**JIT)
def _log_prior(t, n_nodes, X, model):  # pragma: no cover - numba
    w = small_scratch(X.shape[1], 0)
    total = 0.0
    for j in range(n_nodes):
        total += node_log_prior(t, X, j, model, w)
        if total == -np.inf:
            return total
    return total


@njit(inline="always", **JIT)
def node_log_prior(t, X, j, model, w):  # pragma: no cover - numba
    """Node ``j``'s factor of eq. (3.4) on the log scale, from its rows' extent.

    A leaf gives ``log(1 - p_j)`` if its rows vary (|V_j| > 0) and 0 otherwise; an internal
    node ``log p_j - log|V_j| - log|e_{j, delta_j}|``, or ``-inf`` if the prior cannot make
    its split (a dimension outside V_j, or a location outside ``[min, max)`` of its rows,
    which leaves a child empty). ``t`` is a :class:`~.records.Tree`, ``model`` a
    :class:`~.records.Model`, ``w`` an :class:`~.records.Extent` (or a
    :class:`~.records.Scratch`: its ``lower``, ``upper`` are used). The
    Metropolis-Hastings moves of BART (thesis Sec. 4.3.2) sum it over the nodes a move
    touches.
    """
    lower = w.lower
    upper = w.upper
    n_valid = node_extent(X, t, j, lower, upper)
    f = t.feature[j]
    if f == NO_NODE:
        return leaf_log_prior(t.depth[j], n_valid > 0, model.alpha_s, model.beta_s)
    thr = t.threshold[j]
    if not lower[f] <= thr < upper[f]:  # also covers |V_j| = 0 and f outside V_j
        return -np.inf
    return split_log_prior(t.depth[j], n_valid, upper[f] - lower[f], model.alpha_s,
                           model.beta_s)


@njit(**JIT)
def leaf_log_prior(depth, varies, alpha_s, beta_s):  # pragma: no cover - numba
    """eq. (3.4) of a leaf at ``depth``: ``log(1 - p)`` if its rows vary (|V| > 0), else 0."""
    return math.log1p(-split_probability(depth, alpha_s, beta_s)) if varies else 0.0


@njit(**JIT)
def split_log_prior(depth, n_valid, width, alpha_s, beta_s):  # pragma: no cover - numba
    """eq. (3.4) of a valid split at ``depth``: ``log p - log|V| - log|e_delta|``."""
    return math.log(split_probability(depth, alpha_s, beta_s)) - math.log(n_valid) - math.log(
        width)


@njit(**JIT)
def expand_prior(t, n_nodes, X, j, model, u, w):  # pragma: no cover - numba
    """Stop or split the eligible leaf ``j`` of ``t`` as the prior does; return the new
    ``n_nodes``.

    ``u`` holds the node's three uniforms (split if ``u[0] < p_j`` and its rows vary; the
    dimension is the ``floor(u[1] |V_j|)``-th of V_j; the location ``lower + u[2] (upper -
    lower)`` on the rows' extent along it): :func:`prior_cut`, with ``w.lower``,
    ``w.upper`` as its scratch. This is the prior proposal of the SMC (Sec. 3.3.1) as well.
    """
    if u[0] >= split_probability(t.depth[j], model.alpha_s, model.beta_s):
        return n_nodes
    f, thr = prior_cut(X, t, j, u, -1, w)
    if f == NO_NODE:
        return n_nodes
    return split_node(t, n_nodes, X, j, f, thr)


@njit(inline="always", **JIT)
def prior_cut(X, t, j, u, n_valid, w):  # pragma: no cover - numba
    """The prior's cut ``(delta, xi)`` of node ``j`` once ``u[0]`` has chosen to split it,
    from ``u[1]``, ``u[2]`` (:func:`draw_split`); ``(NO_NODE, nan)`` if its rows do not vary.

    With ``n_valid >= 0`` the caller knows the node's extent (``w.lower``, ``w.upper``: the
    root's is the data's, the same for every particle and tree of PG-BART); with ``-1`` it
    is found here as the prior needs it: which dimensions vary
    (:func:`~._trees.varying_dims`, O(D) for most nodes), then the extent along the chosen
    one only (:func:`~._trees.dim_extent`), one pass over the rows instead of D. The cut is
    the same either way.
    """
    lower = w.lower
    upper = w.upper
    known = n_valid >= 0
    if not known:
        n_valid = varying_dims(X, t, j, lower, upper)
    if n_valid == 0:
        return NO_NODE, np.nan
    f = valid_dimension(lower, upper, n_valid, u[1])
    if not known:
        dim_extent(X, t, j, f, lower, upper)
    return f, uniform_cut(lower[f], upper[f], u[2])


@njit(**JIT)
def draw_split(n_valid, lower, upper, u1, u2):  # pragma: no cover - numba
    """The prior's cut ``(delta, xi)`` of a node of extent ``lower``, ``upper``, |V| > 0.

    The dimension is uniform over V (:func:`valid_dimension`), the location uniform along it
    (:func:`uniform_cut`) (Sec. 3.2.3): what :func:`expand_prior` does once it splits, and
    the proposal of the CGM change move.
    """
    f = valid_dimension(lower, upper, n_valid, u1)
    return f, uniform_cut(lower[f], upper[f], u2)


@njit(**JIT)
def valid_dimension(lower, upper, n_valid, u):  # pragma: no cover - numba
    """The ``floor(u |V_j|)``-th dimension of V_j (those with ``lower < upper``): a uniform
    draw of the split dimension (eq. 3.4) from one uniform ``u`` in [0, 1)."""
    k = min(int(u * n_valid), n_valid - 1)
    for d in range(lower.shape[0]):
        if lower[d] < upper[d]:
            if k == 0:
                return d
            k -= 1
    return -1


@njit(**JIT)
def uniform_cut(lo, hi, u):  # pragma: no cover - numba
    """``lo + u (hi - lo)``, a uniform location in ``[lo, hi)`` for ``lo < hi``.

    ``x <= t`` goes left, so a location must stay below ``hi`` to leave a row right; rounding
    of ``u`` close to 1 can reach ``hi``, and then ``lo`` is taken instead.
    """
    t = lo + u * (hi - lo)
    return lo if t >= hi else t


@njit(**JIT)
def _grow_prior(t, X, model, u):  # pragma: no cover - numba
    """The whole generative process from the root; returns ``n_nodes``.

    Children are appended in the order nodes are expanded, so with breadth-first node-wise
    expansion the eligible list E(t) is exactly the slots ``head .. n_nodes - 1``.
    """
    w = small_scratch(X.shape[1], 0)
    n_nodes = 1
    head = 0
    while head < n_nodes:
        n_nodes = expand_prior(t, n_nodes, X, head, model, u[head], w)
        head += 1
    return n_nodes
