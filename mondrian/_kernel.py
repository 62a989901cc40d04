"""Numba kernels of the Mondrian kernel (Balog, Lakshminarayanan, Ghahramani, Roy & Teh 2016).

The Mondrian samples are ordinary flat Mondrian trees (the layout in
``docs/families/mondrian-forests.md``) grown on the raw
inputs with ``min_samples_split = 1``: by the projectivity of the Mondrian process (paper
Sec. 2; regression paper Sec. 2), a tree cut only inside its nodes' data extents puts the
training points in cells with the law of the process on the whole box. A cell of the
partition at width ``lam`` is a node ``j`` with ``tau_parent(j) <= lam`` that is a leaf or
splits after ``lam`` (``tau_j > lam``): the partition of every width up to the trees'
lifetime is read off one sample (paper Sec. 4).

A point outside a node's box may be cut off from it before the node's own split by the
conditional Mondrian (regression paper Alg. 4 line 3): at rate ``E`` = the L1 distance from
the point to the box, after the parent's time. :func:`cells` samples that event from a
counter-based hash of the row's bits, the tree and the node, so a row always gets the same
features (``transform`` has no state to advance), and a cut-off point lands in a cell of its
own that no training point shares (the tree's "unseen" column).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from basics.flat_tree import NO_NODE, preorder
from basics.hashing import GOLDEN, mix64, uniform53
from basics.jit import JIT


@numba.njit(inline="always", **JIT)
def row_hash(seed, bits, i):
    """Hash of row ``i`` of ``bits`` (the rows' float64 values viewed as uint64) under
    ``seed``: equal rows hash equal."""
    h = mix64(seed)
    for d in range(bits.shape[1]):
        h = mix64(h ^ (bits[i, d] + GOLDEN))
    return h


@numba.njit(**JIT)
def cells(X, bits, left, right, feature, threshold, tau, lower, upper, root, column, unseen,
          lam, seed, out):  # pragma: no cover - numba
    """The cell of every row of ``X`` in one tree's partition at width ``lam``.

    Descends from the root; at node ``j`` (parent time ``tau_p``), a row at L1 distance
    ``E > 0`` from the box is cut off at time ``tau_p + Exp(E)`` if that comes before
    ``min(tau_j, lam)``, and then gets ``unseen``; otherwise a cell ``j`` gives
    ``column[j]`` and an earlier split sends the row on by its threshold. ``bits`` is ``X``
    viewed as uint64 (the hash input), ``seed`` the tree's hash seed.
    """
    n_features = X.shape[1]
    for i in range(X.shape[0]):
        h = row_hash(seed, bits, i)
        j = root
        tau_p = 0.0
        while True:
            rate = 0.0
            for d in range(n_features):
                v = X[i, d]
                rate += max(lower[j, d] - v, 0.0) + max(v - upper[j, d], 0.0)
            if rate > 0.0:
                s = tau_p - math.log(uniform53(h, j)) / rate
                if s < min(tau[j], lam):
                    out[i] = unseen
                    break
            if column[j] != NO_NODE:
                out[i] = column[j]
                break
            tau_p = tau[j]
            j = left[j] if X[i, feature[j]] <= threshold[j] else right[j]


# ------------------------------------------------------------------------- the width sweep


@numba.njit(**JIT)
def node_row_ranges(left, right, root, n_nodes, leaf_head, pt_next, rows, start, stop):
    """Training rows of every node as a range of one permutation (the tree layout).

    Writes into ``rows`` the rows of the leaves in preorder (each leaf's list as stored), so
    a node's rows are ``rows[start[j]:stop[j]]``; returns the number of rows written.
    """
    order = preorder(left, right, root, n_nodes)
    k = 0
    for j in order:
        if left[j] == NO_NODE:
            start[j] = k
            r = leaf_head[j]
            while r != NO_NODE:
                rows[k] = r
                k += 1
                r = pt_next[r]
            stop[j] = k
    for i in range(order.shape[0] - 1, -1, -1):
        j = order[i]
        if left[j] != NO_NODE:
            start[j] = start[left[j]]
            stop[j] = stop[right[j]]
    return k


@numba.njit(inline="always", **JIT)
def _child_covariances(tree, lo, hi, rows, cell_of, w, g, nz, Y, yb):
    """Covariances with the other partitions' cells of the child holding ``rows[lo:hi]``
    (each shared row adds ``w = 1 / M``) into ``g``, the slots they touch into ``nz``
    (returns how many), and the sum of the child's labels into ``yb``."""
    k = 0
    for c in range(yb.shape[0]):
        yb[c] = 0.0
    for i in range(lo, hi):
        r = rows[i]
        for t in range(cell_of.shape[1]):
            if t != tree:
                slot = cell_of[r, t]
                if g[slot] == 0.0:
                    nz[k] = slot
                    k += 1
                g[slot] += w
        for c in range(yb.shape[0]):
            yb[c] += Y[r, c]
    return k


@numba.njit(inline="always", **JIT)
def _times_a(A, n, acol, piv, g, nz, k, out):
    """``out = A' g`` with ``A' = A - a a' / piv`` (the inverse without slot ``s``, whose
    column is ``acol``), from the ``k`` non-zeros of ``g``; returns nothing."""
    for a in range(n):
        out[a] = 0.0
    ag = 0.0
    for i in range(k):
        c = nz[i]
        v = g[c]
        ag += acol[c] * v
        for a in range(n):
            out[a] += A[c, a] * v  # A is symmetric: row c, read contiguously
    f = ag / piv
    for a in range(n):
        out[a] -= acol[a] * f


@numba.njit(**JIT)
def sweep_cuts(ev_tree, ev_node, e0, e1, left, right, rows, start, stop, cell_of, node_slot,
               A, B, Y, n_active, delta, work):  # pragma: no cover - numba
    """Apply the cuts ``e0 .. e1 - 1`` (in time order) to the ridge state (paper Sec. 4.2.1).

    Node ids are global (``left`` / ``right`` hold global ids too); ``rows[t]``, ``start``,
    ``stop`` give the training rows of every node of partition ``t``; ``cell_of[r, t]`` is
    the slot of row ``r``'s cell in partition ``t``, ``node_slot`` the slot of every cell
    node (-1 otherwise). ``A`` is the inverse of ``G = Phi'Phi + delta I`` over the active
    slots ``0 .. n_active - 1``, ``B = Phi'Y``; ``work`` is scratch of shape (8, capacity).

    A cut of the cell in slot ``s`` removes ``s`` (the Schur complement ``A - a a' /
    A[s, s]``) and borders the left child into ``s`` and the right one into slot
    ``n_active`` (a 2 x 2 Schur complement ``S``; the children share no row, so their
    covariance is 0): one pass of a rank-3 update over ``A``. Returns ``(n_active, change of
    log det G)``, the change being ``log A[s, s] + log det S``.
    """
    m = cell_of.shape[1]
    w = 1.0 / m
    scale = 1.0 / math.sqrt(m)
    gl, gr, acol, ul, ur, vl, vr, fcol = (work[0], work[1], work[2], work[3], work[4],
                                          work[5], work[6], work[7])
    nzl = np.empty(work.shape[1], np.int64)
    nzr = np.empty(work.shape[1], np.int64)
    yb = np.empty(Y.shape[1])
    dlogdet = 0.0
    for e in range(e0, e1):
        t = ev_tree[e]
        j = ev_node[e]
        s = node_slot[j]
        n = n_active
        lj, rj = left[j], right[j]
        kl = _child_covariances(t, start[lj], stop[lj], rows[t], cell_of, w, gl, nzl, Y, yb)
        for c in range(Y.shape[1]):
            B[s, c] = yb[c] * scale
        kr = _child_covariances(t, start[rj], stop[rj], rows[t], cell_of, w, gr, nzr, Y, yb)
        for c in range(Y.shape[1]):
            B[n, c] = yb[c] * scale
        for a in range(n):
            acol[a] = A[a, s]
        piv = acol[s]
        _times_a(A, n, acol, piv, gl, nzl, kl, ul)
        _times_a(A, n, acol, piv, gr, nzr, kr, ur)
        ul[s] = 0.0
        ur[s] = 0.0
        qll = 0.0
        qlr = 0.0
        for i in range(kl):
            qll += gl[nzl[i]] * ul[nzl[i]]
            qlr += gl[nzl[i]] * ur[nzl[i]]
        qrr = 0.0
        for i in range(kr):
            qrr += gr[nzr[i]] * ur[nzr[i]]
        s00 = (stop[lj] - start[lj]) * w + delta - qll
        s11 = (stop[rj] - start[rj]) * w + delta - qrr
        s01 = -qlr
        det = s00 * s11 - s01 * s01
        i00, i11, i01 = s11 / det, s00 / det, -s01 / det
        for a in range(n):
            vl[a] = ul[a] * i00 + ur[a] * i01
            vr[a] = ul[a] * i01 + ur[a] * i11
            fcol[a] = acol[a] / piv
        for a in range(n):
            if a == s:
                continue
            fa, pa, qa = fcol[a], vl[a], vr[a]
            for c in range(n):
                A[a, c] += pa * ul[c] + qa * ur[c] - fa * acol[c]
            A[a, s] = -pa
            A[a, n] = -qa
        for c in range(n):
            A[s, c] = -vl[c]
            A[n, c] = -vr[c]
        A[s, s] = i00
        A[n, n] = i11
        A[s, n] = i01
        A[n, s] = i01
        dlogdet += math.log(piv) + math.log(det)
        for i in range(kl):
            gl[nzl[i]] = 0.0
        for i in range(kr):
            gr[nzr[i]] = 0.0
        _relabel(t, j, lj, rj, s, n, rows, start, stop, cell_of, node_slot)
        n_active = n + 1
    return n_active, dlogdet


@numba.njit(inline="always", **JIT)
def _relabel(t, j, lj, rj, s, n, rows, start, stop, cell_of, node_slot):
    """After the cut of node ``j`` (slot ``s``): its left child takes slot ``s``, its right
    child slot ``n``, and the rows of the right child move there."""
    for i in range(start[rj], stop[rj]):
        cell_of[rows[t][i], t] = n
    node_slot[j] = -1
    node_slot[lj] = s
    node_slot[rj] = n


@numba.njit(**JIT)
def relabel_cuts(ev_tree, ev_node, e0, e1, left, right, rows, start, stop, cell_of,
                 node_slot, W, n_active):  # pragma: no cover - numba
    """Apply the cuts ``e0 .. e1 - 1`` to the cells only, for a gradient solver (paper Sec.
    4.2.2): the right child's weights start as a copy of the cut cell's (the left child keeps
    its slot and weights), so every prediction is unchanged. Returns ``n_active``."""
    for e in range(e0, e1):
        j = ev_node[e]
        s = node_slot[j]
        _relabel(ev_tree[e], j, left[j], right[j], s, n_active, rows, start, stop, cell_of,
                 node_slot)
        for c in range(W.shape[1]):
            W[n_active, c] = W[s, c]
        n_active += 1
    return n_active


@numba.njit(inline="always", **JIT)
def _gram_times(cell_of, n_active, v, alpha, out):
    """``out = (Phi'Phi + alpha I) v`` for ``Phi[r, cell_of[r, t]] = 1 / sqrt(M)``: one pass
    over the rows (a row's features are its M cells)."""
    m = cell_of.shape[1]
    for a in range(n_active):
        out[a] = alpha * v[a]
    for r in range(cell_of.shape[0]):
        s = 0.0
        for t in range(m):
            s += v[cell_of[r, t]]
        s /= m
        for t in range(m):
            out[cell_of[r, t]] += s


@numba.njit(**JIT)
def ridge_pcg(cell_of, n_active, Y, alpha, W, rtol, max_iter):  # pragma: no cover - numba
    """Solve ``(Phi'Phi + alpha I) W = Phi'Y`` in place by conjugate gradients from ``W``
    (rows ``0 .. n_active - 1``), preconditioned by the diagonal (cell counts / M + alpha),
    until the residual is below ``rtol`` times ``|Phi'y|`` (per output column). Returns the
    largest number of iterations used."""
    m = cell_of.shape[1]
    scale = 1.0 / math.sqrt(m)
    diag = np.full(n_active, alpha)
    for r in range(cell_of.shape[0]):
        for t in range(m):
            diag[cell_of[r, t]] += 1.0 / m
    b = np.empty(n_active)
    res = np.empty(n_active)
    z = np.empty(n_active)
    p = np.empty(n_active)
    ap = np.empty(n_active)
    most = 0
    for c in range(Y.shape[1]):
        b[:] = 0.0
        for r in range(cell_of.shape[0]):
            for t in range(m):
                b[cell_of[r, t]] += Y[r, c] * scale
        x = W[:n_active, c]
        _gram_times(cell_of, n_active, x, alpha, ap)
        bb = 0.0
        rr = 0.0
        rz = 0.0
        for a in range(n_active):
            res[a] = b[a] - ap[a]
            z[a] = res[a] / diag[a]
            p[a] = z[a]
            bb += b[a] * b[a]
            rr += res[a] * res[a]
            rz += res[a] * z[a]
        stop = rtol * rtol * bb
        it = 0
        while rr > stop and it < max_iter:
            _gram_times(cell_of, n_active, p, alpha, ap)
            pap = 0.0
            for a in range(n_active):
                pap += p[a] * ap[a]
            step = rz / pap
            rr = 0.0
            rz_new = 0.0
            for a in range(n_active):
                x[a] += step * p[a]
                res[a] -= step * ap[a]
                z[a] = res[a] / diag[a]
                rr += res[a] * res[a]
                rz_new += res[a] * z[a]
            beta = rz_new / rz
            rz = rz_new
            for a in range(n_active):
                p[a] = z[a] + beta * p[a]
            it += 1
        for a in range(n_active):
            W[a, c] = x[a]
        most = max(most, it)
    return most
