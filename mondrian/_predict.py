"""Prediction kernels: the branch-off mixture along the root-to-leaf path.

A test point x may "branch off" the tree just above any node j of its path, with
probability p_j(x) = 1 - exp(-Delta_j * eta_j(x)) given that it has not branched off
earlier, where Delta_j = tau_j - tau_parent(j) and eta_j(x) is the distance from x to the
data extent of j (paper Alg. 5; thesis eq. 5.6-5.7, Alg. 5.8). One descent
(:func:`_path`) serves both tasks: regression writes a Gaussian component per node of the
path, classification mixes IKN posterior rows.

The kernels read a *predictor*: the growing arrays of a tree packed into rows per node
(``R``, nodes renumbered in depth-first preorder, root first): a compact routing record
(threshold, right child, feature: 16 bytes) that the descent reads, and a box record
(split-time gap, float32 extent) for the branch-off, instead of eight arrays (compare
scikit-learn's ``make_predictor`` in hist gradient boosting). Keeping the routing apart
makes a descent about 20% faster than one record of 96 bytes per node. Predictors are
rebuilt lazily after a tree changes, together with the posterior.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from basics.flat_tree import INDEX, NO_NODE
from basics.jit import JIT
from basics.mixture_kernels import FIRST_ZERO_ROW, normalise_raw_row, row_scratch, summarise_row

from ._config import PREDICT_JIT
from ._ikn import branch_off_G, expected_discount
from ._posterior import edge_variance, noise_at
from ._records import MondrianTree, Predictor, child

#: A predictor ``R`` is a :class:`._records.Predictor` ``(T, C, B64, B32)`` (fields
#: ``threshold``, ``links``, ``gap``, ``box``) with one row per node, nodes in
#: depth-first preorder (root first, a left child right after its parent). The routing part
#: is compact, so a descent touches few cache lines: ``T`` float64 thresholds (exact
#: routing) and ``C`` int32 columns RIGHT (-1 at a leaf; the left child of node k is
#: k + 1) and FEATURE. The box part is two views of one float32 buffer of ``EXTENT + 2D``
#: slots per node: the float64 split-time gap DELTA in ``B64`` and the data extent in
#: float32, lower bounds from ``EXTENT``, upper bounds from ``EXTENT + D``. Extents are
#: rounded outward, so a point inside a data box stays inside (points within float32
#: resolution outside a box face count as inside).
RIGHT, FEATURE = 0, 1
DELTA = 0
EXTENT = 2
#: Columns of the per-node parameter matrix ``P`` of regression trees (predictor order).
#: ``NODE_NOISE`` is the noise variance a branch-off above the node adds: the forest's
#: with the exact posterior (a node's own noise is in its ``NODE_VAR``), or with the
#: empirical one the node's own (``posterior.node_noise_variance``).
(NODE_MEAN, NODE_VAR, OFF_MEAN, OFF_VAR, DOWN_MEAN, CAVITY_VAR, UP_LAM, UP_ETA,
 SIG_TAU, SIG_PARENT, TAU_PARENT, EXP_TAU_PARENT, NODE_NOISE) = range(13)
N_NODE_PARAMS = 13
#: Entries of the hyperparameter vector ``h``: exact posterior flag, gamma1, gamma2,
#: the forest's noise variance (the kernels read ``P[:, NODE_NOISE]``),
#: sigmoid(gamma2 * lifetime).
EXACT, GAMMA1, GAMMA2, NOISE, SIG_LIFETIME = range(5)


def pack_predictor(tree: MondrianTree, order: np.ndarray) -> Predictor:
    """The predictor ``(T, C, B64, B32)`` of a tree (:class:`._records.MondrianTree`) whose
    slots are listed in ``order`` (depth-first preorder, left subtrees first)."""
    n = order.shape[0]
    box = np.empty((n, EXTENT + 2 * tree.lower.shape[1]), np.float32)
    R = Predictor(np.empty(n), np.empty((n, 2), np.int32), box.view(np.float64), box)
    _fill_predictor(tree, order, R)
    return R


def predictor_nbytes(R) -> int:
    """Bytes held by a predictor (its two box views share one buffer)."""
    return R[0].nbytes + R[1].nbytes + R[3].nbytes


@numba.njit(**JIT)
def _fill_predictor(tree, order, R):
    left, right, parent, tau, lower, upper = (tree.left, tree.right, tree.parent, tree.tau,
                                              tree.lower, tree.upper)
    T, C, B64, B32 = R
    n = order.shape[0]
    D = lower.shape[1]
    B32i = B32.view(np.int32)
    new = np.empty(left.shape[0], INDEX)
    for k in range(n):
        new[order[k]] = k
    for k in range(n):
        j = order[k]
        if left[j] == NO_NODE:
            C[k, RIGHT] = -1
            C[k, FEATURE] = 0
            T[k] = 0.0
        else:
            if new[left[j]] != k + 1:
                raise ValueError("predictor order must be a preorder with left subtrees first")
            C[k, RIGHT] = new[right[j]]
            C[k, FEATURE] = tree.feature[j]
            T[k] = tree.threshold[j]
        tau_parent = 0.0 if parent[j] == NO_NODE else tau[parent[j]]
        B64[k, DELTA] = tau[j] - tau_parent
        for d in range(D):
            # round to nearest, then one float32 ulp outward where that crossed the
            # float64 bound: on the int32 view of the same slot, +1 moves away from zero
            # and -1 toward it, for either sign (signed zeros and infinities included).
            # Arithmetic instead of a branch: the crossings are coin flips.
            v = lower[j, d]
            f = np.float32(v)
            B32[k, EXTENT + d] = f
            B32i[k, EXTENT + d] += np.int32(f > v) * (1 - 2 * np.int32(f > 0.0))
            v = upper[j, d]
            f = np.float32(v)
            B32[k, EXTENT + D + d] = f
            B32i[k, EXTENT + D + d] += np.int32(f < v) * (1 - 2 * np.int32(f < 0.0))


@numba.njit(**JIT)
def exact_parameters(order, tree, prior, noise_var, messages):
    """Per-node parameter matrix ``P`` of the exact posterior, rows in predictor ``order``.

    Inputs are in slot order: the belief-propagation ``messages``
    (:class:`._records.Messages`; ``var`` without the noise, ``down_var`` the variance of
    the message from outside each subtree plus the edge), the split times and parents of
    ``tree``, the edge scales of ``prior`` and ``noise_var``, the forest's noise variance or
    one per node (``posterior.noise_at``). One pass, no temporaries: ``P[k]`` is node
    ``order[k]``.
    """
    parent, tau = tree.parent, tree.tau
    gamma1, gamma2 = prior.gamma1, prior.gamma2
    post_mean, post_var, down_mean, belief_var, up_lam, up_eta = messages
    n = order.shape[0]
    P = np.zeros((n, N_NODE_PARAMS))
    for k in range(n):
        j = order[k]
        tau_parent = 0.0 if parent[j] == NO_NODE else tau[parent[j]]
        noise = noise_at(noise_var, j)
        P[k, NODE_MEAN] = post_mean[j]
        P[k, NODE_VAR] = post_var[j] + noise
        P[k, NODE_NOISE] = noise
        P[k, DOWN_MEAN] = down_mean[j]
        P[k, CAVITY_VAR] = max(belief_var[j] - edge_variance(tau[j], tau_parent, gamma1,
                                                              gamma2), 0.0)
        P[k, UP_LAM] = up_lam[j]
        P[k, UP_ETA] = up_eta[j]
        P[k, SIG_TAU] = 1.0 / (1.0 + np.exp(-gamma2 * tau[j]))
        P[k, SIG_PARENT] = 1.0 / (1.0 + np.exp(-gamma2 * tau_parent))
        P[k, TAU_PARENT] = tau_parent
        P[k, EXP_TAU_PARENT] = np.exp(-gamma2 * tau_parent)
    return P


@numba.njit(inline="always", **JIT)
def _branch_off(R, j, x):
    """Return ``(p_j(x), eta_j(x), Delta_j)`` for node ``j`` (paper Alg. 5 lines 5-6)."""
    B64 = R[2]
    B32 = R[3]
    # unsigned indices: numba then emits no negative-index wraparound per access
    u = np.uint64(j)
    lo = np.uint64(EXTENT)
    hi = np.uint64(EXTENT + x.shape[0])
    eta = 0.0
    for d in range(np.uint64(x.shape[0])):
        eta += max(x[d] - np.float64(B32[u, hi + d]), 0.0)
        eta += max(np.float64(B32[u, lo + d]) - x[d], 0.0)
    delta = B64[u, DELTA]
    if eta == 0.0 or delta == 0.0:
        return 0.0, eta, delta
    if delta == np.inf:  # a leaf of an infinite lifetime: any distance separates
        return 1.0, eta, delta
    return -np.expm1(-delta * eta), eta, delta


@numba.njit(inline="always", **JIT)
def _child(R, j, x):
    """The child of node ``j`` that ``x`` goes to (preorder: the left child is ``j + 1``)."""
    u = np.uint64(j)
    C = R[1]
    if x[np.uint64(C[u, FEATURE])] <= R[0][u]:
        return j + 1
    return np.int64(C[u, RIGHT])


@numba.njit(inline="always", **JIT)
def _is_leaf(R, j):
    return R[1][np.uint64(j), RIGHT] < 0


@numba.njit(inline="always", **JIT)
def _off_component(j, eta, delta, p, P, h):
    """Predictive Gaussian of a new leaf that branches off on the edge above node ``j``.

    With the empirical posterior (App. C) it is the moments of the parent. With the exact
    posterior (Sec. 3.3) the new node j~ sits at time tau~ = tau_parent + s, s drawn from
    the exponential of rate eta(x) truncated to [0, Delta_j] (thesis Sec. 5.5.3): its
    posterior combines the message from outside the subtree of j (mean ``DOWN_MEAN``,
    variance ``CAVITY_VAR`` + phi(tau~)) with the data below j (``UP_LAM``, ``UP_ETA``)
    passed through phi(tau_j | tau~); the new leaf adds phi(lifetime | tau~) and the noise
    ``NODE_NOISE`` of j (the forest's: the new leaf holds no rows).
    The average over tau~ is moment-matched over quadrature nodes of s. Untruncated (a leaf
    of an infinite lifetime; s = t / eta, t ~ Exp(1)): nodes t = 1/2 and 3 with weights 0.8
    and 0.2, exact for quadratics in t, and since 3 = 6 * (1/2) both sigmoids come from one
    exp. Truncated to [0, Delta_j] (an internal node, where s varies less): its mean, the
    expected cut time of the authors' implementation. One exp per branch-off either way.
    """
    if h[EXACT] == 0.0:
        return P[j, OFF_MEAN], P[j, OFF_VAR]
    u_j = np.uint64(j)
    g1 = h[GAMMA1]
    g2 = h[GAMMA2]
    lam = P[u_j, UP_LAM]
    # p = P(split before tau_j) is the truncation mass of the split time
    if p == 1.0:  # untruncated: exp(-g2 (tau_p + t / eta)) for t = 1/2 and t = 3
        c = np.exp(-0.5 * g2 / eta)
        c2 = c * c
        e_first = P[u_j, EXP_TAU_PARENT] * c
        e_second = e_first * c2 * c2 * c
        n_nodes = 2
    else:  # truncated to [0, Delta_j]: its mean, 1/eta - Delta (1 - p) / p
        s = (p - delta * eta * (1.0 - p)) / (eta * p)
        e_first = np.exp(-g2 * (P[u_j, TAU_PARENT] + s))
        e_second = 0.0
        n_nodes = 1
    m1 = 0.0
    m2 = 0.0
    for q in range(n_nodes):
        e = e_first if q == 0 else e_second
        w = 1.0 if n_nodes == 1 else (0.8 if q == 0 else 0.2)
        # With u = 1 / sigmoid(gamma2 * tau~) every phi is gamma1 * (difference of sigmoids)
        # over u: the prior of j~ is b / u, the data below j seen from j~ through
        # phi(tau_j | tau~) is (lam, eta_j) * u / a in information form, and the new
        # leaf adds gamma1 (sigmoid(gamma2 lifetime) u - 1) / u. Combining them needs one
        # division.
        u = 1.0 + e
        b = P[u_j, CAVITY_VAR] * u + g1 * max(1.0 - P[u_j, SIG_PARENT] * u, 0.0)
        a = u + lam * g1 * max(P[u_j, SIG_TAU] * u - 1.0, 0.0)
        den = a + b * lam
        d = 1.0 / (u * den)
        mean = (P[u_j, DOWN_MEAN] * a + b * P[u_j, UP_ETA]) * u * d
        var = (b * a + g1 * max(h[SIG_LIFETIME] * u - 1.0, 0.0) * den) * d + P[u_j, NODE_NOISE]
        m1 += w * mean
        m2 += w * (var + mean * mean)
    return m1, m2 - m1 * m1


@numba.njit(inline="always", **JIT)
def _path(R, x, nodes):
    """The one descent of the predictor: the positions of the nodes ``x`` passes from the
    root to its leaf into ``nodes`` (at least :func:`path_bound` long); returns how many
    (the leaf last). The walks that mix the branch-off events (paper Alg. 5) read them in
    order, each computing the event probabilities of a node (:func:`_branch_off`) where it
    uses them."""
    j = 0
    k = 0
    while True:
        nodes[k] = j
        k += 1
        if _is_leaf(R, j):
            return k
        j = _child(R, j, x)


@numba.njit(**PREDICT_JIT)
def regression_moments(X, posterior, out_m1, out_m2):
    """Add one tree's predictive first and second moments, eq. (3)-(4), to the outputs
    (``posterior`` its ``(R, P, h)``)."""
    R, P, h = posterior
    nodes = np.empty(path_bound(R), INDEX)
    for i in range(X.shape[0]):
        x = X[i]
        n = _path(R, x, nodes)
        not_separated = 1.0
        m1 = 0.0
        m2 = 0.0
        for k in range(n):
            j = nodes[k]
            p, eta, delta = _branch_off(R, j, x)
            if p > 0.0:
                w = not_separated * p
                om, ov = _off_component(j, eta, delta, p, P, h)
                m1 += w * om
                m2 += w * (ov + om * om)
            if k == n - 1:
                w = not_separated * (1.0 - p)
                m1 += w * P[j, NODE_MEAN]
                m2 += w * (P[j, NODE_VAR] + P[j, NODE_MEAN] ** 2)
            not_separated *= 1.0 - p
        out_m1[i] += m1
        out_m2[i] += m2


class Components(NamedTuple):
    """Mixture components in flat arrays: ``weight``, ``mean``, ``var``."""

    weight: np.ndarray
    mean: np.ndarray
    var: np.ndarray


@numba.njit(inline="always", **JIT)
def _tree_components(x, R, P, h, tree_weight, nodes, out, c):
    """Write one tree's mixture components (eq. 3) for the row ``x`` into ``out``
    (:class:`Components`) from column ``c`` on (``nodes``: scratch of :func:`_path`);
    return the next free column. Components get weight ``tree_weight * w_j`` (eq. 5 with
    equal tree weights)."""
    n = _path(R, x, nodes)
    not_separated = 1.0
    for k in range(n):
        j = nodes[k]
        p, eta, delta = _branch_off(R, j, x)
        if p > 0.0:
            out.weight[c] = tree_weight * not_separated * p
            out.mean[c], out.var[c] = _off_component(j, eta, delta, p, P, h)
            c += 1
        if k == n - 1 and p < 1.0:
            out.weight[c] = tree_weight * not_separated * (1.0 - p)
            out.mean[c] = P[j, NODE_MEAN]
            out.var[c] = P[j, NODE_VAR]
            c += 1
        not_separated *= 1.0 - p
    return c


@numba.njit(**PREDICT_JIT)
def _tree_rows(X, posterior, tree_weight, nodes, out, span, first, pos):
    """One tree's components (``posterior`` its ``(R, P, h)``) for rows ``first, first + 1,
    ...`` appended to ``out`` (:class:`Components`) from ``pos`` on (row i's at
    ``span[0, i]:span[1, i]``) while the components of a longest path (``nodes``' size:
    :func:`path_bound`) fit; return ``(next row, next free slot)``."""
    R, P, h = posterior
    bound = nodes.shape[0]
    i = first
    while i < X.shape[0] and pos + bound <= out.weight.shape[0]:
        span[0, i] = pos
        pos = _tree_components(X[i], R, P, h, tree_weight, nodes, out, pos)
        span[1, i] = pos
        i += 1
    return i, pos


@numba.njit(**JIT)
def _grown(a, size):
    """``a``'s values in a new array of ``size`` slots."""
    out = np.empty(size)
    out[:a.shape[0]] = a
    return out


@numba.njit(**JIT)
def path_bound(R):
    """Most mixture components one tree gives a row: the nodes of its longest root-to-leaf
    path, plus one (a leaf gives its branch-off and its own component)."""
    n = R[0].shape[0]
    depth = np.empty(n, INDEX)
    depth[0] = 1
    deepest = 1
    for k in range(n):
        right = R[1][k, RIGHT]
        if right < 0:
            deepest = max(deepest, depth[k])
        else:
            depth[k + 1] = depth[k] + 1
            depth[right] = depth[k] + 1
    return deepest + 1


@numba.njit(**JIT)
def _flat_components(X, trees, bounds):
    """Every row's components of every tree, tree by tree (a tree's nodes stay in cache over
    the rows), appended to flat arrays: ``(Components, spans)``, row i's components of tree
    t at ``spans[0, t, i]:spans[1, t, i]`` (at most ``bounds[t]``, :func:`path_bound`). One
    walk per tree and row, no count pass."""
    n = X.shape[0]
    n_trees = len(trees)
    tree_weight = 1.0 / n_trees
    cap = max(16, 2 * n * n_trees)
    out = Components(np.empty(cap), np.empty(cap), np.empty(cap))
    spans = np.empty((2, n_trees, n), INDEX)
    pos = 0
    for t in range(n_trees):
        nodes = np.empty(bounds[t], INDEX)
        i = 0
        while i < n:
            i, pos = _tree_rows(X, trees[t], tree_weight, nodes, out, spans[:, t], i, pos)
            if i < n:  # full: double the scratch
                size = 2 * out.weight.shape[0]
                out = Components(_grown(out.weight, size), _grown(out.mean, size),
                                 _grown(out.var, size))
    return out, spans


@numba.njit(inline="always", **JIT)
def _row_components(flat, spans, i, row):
    """Row ``i``'s components of :func:`_flat_components` in tree order into ``row``;
    return their number."""
    c = 0
    for t in range(spans.shape[1]):
        for k in range(spans[0, t, i], spans[1, t, i]):
            row.weight[c] = flat.weight[k]
            row.mean[c] = flat.mean[k]
            row.var[c] = flat.var[k]
            c += 1
    return c


@numba.njit(**JIT)
def regression_mixture(X, trees, bounds):
    """The forest mixture's arrays ``(W, M, V)``, padded to the row with most components
    (weight 0, mean 0, variance 1), at one walk per tree and row (:func:`_flat_components`):
    row by row, tree by tree, the components of eq. (3) along the path (eq. 5: equal tree
    weights)."""
    flat, spans = _flat_components(X, trees, bounds)
    n_trees, n = spans.shape[1], spans.shape[2]
    width = 1
    for i in range(n):
        c = 0
        for t in range(n_trees):
            c += spans[1, t, i] - spans[0, t, i]
        width = max(width, c)
    Wo = np.zeros((n, width))
    Mo = np.zeros((n, width))
    Vo = np.ones((n, width))
    for i in range(n):
        _row_components(flat, spans, i, Components(Wo[i], Mo[i], Vo[i]))
    return Wo, Mo, Vo


@numba.njit(**JIT)
def regression_summary(X, trees, bounds, levels, out, errors):
    """Mean, variance and quantiles of every row's forest mixture, without building it.

    ``levels`` is the :class:`basics.mixture_kernels.Levels` of ``solver_levels``,
    ``out`` the outputs ``(mean, var, quantiles)``. Each row's components
    (:func:`_flat_components`) are gathered in tree order and summarised
    (:func:`basics.mixture_kernels.normalise_raw_row`, ``summarise_row``). The numbers are
    those of :func:`regression_mixture` and :func:`basics.mixture.summarize` of it, bit for
    bit, without the padded arrays.
    """
    mean_out, var_out, q_out = out
    flat, spans = _flat_components(X, trees, bounds)
    n_trees, n = spans.shape[1], spans.shape[2]
    width = 0
    for t in range(n_trees):
        width += bounds[t]
    row = Components(np.empty(width), np.empty(width), np.empty(width))
    scratch = row_scratch(width)
    errors[FIRST_ZERO_ROW] = -1
    one_row = levels.levels.shape[0] == 1
    for i in range(n):
        c = _row_components(flat, spans, i, row)
        n_live, mean, var = normalise_raw_row(row.weight, row.mean, row.var, c, i, scratch,
                                              errors)
        mean_out[i] = mean
        var_out[i] = var
        summarise_row(n_live, mean, var, scratch, levels, 0 if one_row else i, q_out[i])


@numba.njit(**PREDICT_JIT)
def classification_proba(X, posterior, gamma, out):
    """Add one tree's class probabilities (thesis Alg. 5.8) to ``out``.

    ``posterior`` is ``(R, counts, G, G_parent)``: the predictor, and in its order the
    counts, the posterior ``G`` of every node and ``G_parent``, its parent's (the uniform
    base measure for the root).
    """
    R, counts, G, G_parent = posterior
    n_classes = counts.shape[1]
    g_new = np.empty(n_classes)
    nodes = np.empty(path_bound(R), INDEX)
    for i in range(X.shape[0]):
        x = X[i]
        n = _path(R, x, nodes)
        not_separated = 1.0
        for k in range(n):
            j = nodes[k]
            p, eta, delta = _branch_off(R, j, x)
            if p > 0.0:
                dbar = expected_discount(eta, delta, gamma)
                branch_off_G(G_parent[j], counts[j], dbar, g_new)
                w = not_separated * p
                for c in range(n_classes):
                    out[i, c] += w * g_new[c]
            if k == n - 1:
                w = not_separated * (1.0 - p)
                for c in range(n_classes):
                    out[i, c] += w * G[j, c]
            not_separated *= 1.0 - p


@numba.njit(**JIT)
def leaf_positions(X, R, out):
    """Predictor (depth-first preorder) position of every row's leaf, by plain descent."""
    nodes = np.empty(path_bound(R), INDEX)
    for i in range(X.shape[0]):
        out[i] = nodes[_path(R, X[i], nodes) - 1]


@numba.njit(**JIT)
def apply_tree(X, tree, root, out):
    """Leaf slot of every row in ``tree`` (:class:`._records.MondrianTree`; plain descent,
    ignoring branch-off)."""
    for i in range(X.shape[0]):
        x = X[i]
        j = root
        while tree.left[j] != NO_NODE:
            j = child(tree, j, x)
        out[i] = j
