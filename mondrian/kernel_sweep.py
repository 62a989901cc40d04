"""The Mondrian kernel's width sweep and ridge solves (Balog et al. 2016, Sec. 4).

:func:`width_sweep` runs the cuts of fitted partitions in time order from one cell per
partition, the ridge kept solved (exactly, by updates of the inverse per cut, Sec. 4.2.1, or
by warm-started conjugate gradients, Sec. 4.2.2) and scored at geometrically spaced widths;
:func:`ridge_solve` solves from scratch, :func:`log_evidence` is the Bayesian linear
regression marginal likelihood, :func:`probe_lifetime` picks how far to sample. The numba
kernels are in ``_kernel.py``.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from basics.bounds import check_locations, check_range, check_variances
from basics.flat_tree import INDEX, NO_NODE

from . import _kernel
from ._config import NODE_REG_STATS
from ._kernel_features import HASH_KEY, MondrianKernelFeatures
from ._tree import TreeArrays, grow

__all__ = ["check_ridge", "log_evidence", "probe_lifetime", "ridge_solve", "width_sweep"]


#: Above this many features, :func:`ridge_solve` factors on one BLAS thread (see there).
SINGLE_THREAD_CHOLESKY = 8192

#: Rounding allowed above ``1 / alpha`` on the diagonal of a loaded ``G_inv`` (the bound is
#: met exactly by a cell without rows; LAPACK's inverse rounds to within a few ulps).
_INVERSE_RTOL = 1e-9

#: Relative residual at which the sweep's conjugate gradients stop (``_kernel.ridge_pcg``):
#: the solution then predicts as the direct solve does to about 1e-8 relative.
CG_RTOL = 1e-10


def ridge_solve(Z: sp.csr_matrix, Y: np.ndarray, alpha: float) -> tuple[np.ndarray, ...]:
    """Ridge regression on features ``Z`` from scratch: ``W = (Z'Z + alpha I)^-1 Z'Y``.

    Returns ``(W, G_inv, log_det_G)`` with ``G = Z'Z + alpha I``, through LAPACK's Cholesky
    factor and the inverse from it (``potrf``, ``potri``: a third of the flops of a general
    inverse).
    """
    from scipy.linalg import lapack
    from threadpoolctl import threadpool_limits

    G = (Z.T @ Z).toarray()
    G[np.diag_indices_from(G)] += alpha
    # OpenBLAS' threaded Cholesky crashes (SIGSEGV in dsyrk_thread) on large matrices, seen
    # here from 16,000 rows with 2 threads (OpenBLAS issue #2821): large ones run on one.
    threads = 1 if G.shape[0] > SINGLE_THREAD_CHOLESKY else None
    with threadpool_limits(limits=threads, user_api="blas"):
        L, info = lapack.dpotrf(G, lower=True, overwrite_a=True)
        if info != 0:
            raise np.linalg.LinAlgError(f"Z'Z + alpha I is not positive definite (LAPACK "
                                        f"info {info}); raise alpha")
        log_det = 2.0 * float(np.sum(np.log(np.diag(L))))
        inv, info = lapack.dpotri(L, lower=True, overwrite_c=True)
    if info != 0:
        raise np.linalg.LinAlgError(f"inverting Z'Z + alpha I failed (LAPACK info {info})")
    G_inv = np.tril(inv)
    G_inv += np.tril(inv, -1).T
    return G_inv @ (Z.T @ Y), G_inv, log_det


def check_ridge(W: np.ndarray, G_inv: np.ndarray, Y: np.ndarray, noise: np.ndarray,
                alpha: float) -> None:
    """Raise ``ValueError`` naming the array unless a loaded ridge is one a fit with penalty
    ``alpha`` produces (:mod:`basics.bounds`; all arrays already finite).

    ``G = Z'Z + alpha I`` with ``Z``'s rows of norm one, so ``G_inv`` is symmetric positive
    definite with eigenvalues in ``(0, 1 / alpha]`` (diagonal entries too); the predictive
    variance ``noise * (1 + phi' G_inv phi)`` of :meth:`MondrianKernelRegressor.predict` is
    then positive. The targets ``Y`` are centred targets and the weights ``W`` minimise
    ``|Y - Z W|^2 + alpha |W|^2``, locations in the target's units; the noise ``(|Y - Z W|^2
    + alpha |W|^2) / n`` is at most the targets' mean square, and ``noise / alpha`` (the
    largest posterior variance of the ridge's mean, Bayesian linear regression with weights
    ``N(0, noise / alpha I)``, paper Sec. 4.2.1) is a variance too.
    """
    from scipy.linalg import lapack

    for name, a in (("Y", Y), ("coef_", W)):
        check_locations(name, a)
    check_variances("noise_variance_", noise, positive=True)
    with np.errstate(over="ignore"):
        check_variances("noise_variance_ / alpha", noise / alpha)
    if not np.array_equal(G_inv, G_inv.T):
        raise ValueError("G_inv is not symmetric")
    check_range("G_inv (diagonal)", np.diag(G_inv), float(np.nextafter(0.0, 1.0)),
                (1.0 + _INVERSE_RTOL) / alpha, "(0, 1 / alpha]")
    if G_inv.size and lapack.dpotrf(G_inv, lower=True)[1] != 0:
        raise ValueError("G_inv is not positive definite (it is the inverse of Z'Z + alpha I)")


def log_evidence(yy: np.ndarray, BW: np.ndarray, log_det_G: float, n: int, n_features: int,
                 alpha: float) -> float:
    """log p(Y) of Bayesian linear regression on the features (paper Sec. 4.2.1), weights
    ~ N(0, sigma^2 / alpha I), noise sigma^2 set per output to its maximum-likelihood value
    ``(y'y - b'A b) / n``; summed over the outputs.

    ``yy`` and ``BW`` are per output ``y'y`` and ``b'A b``; ``log det(I + Phi Phi'/alpha) =
    log det G - n_features log alpha``.
    """
    s2 = np.maximum(yy - BW, 1e-300) / n
    k = yy.shape[0]
    return float(np.sum(-0.5 * n * (np.log(2 * np.pi * s2) + 1.0))
                 - 0.5 * k * (log_det_G - n_features * math.log(alpha)))


def probe_lifetime(X: np.ndarray, cells_per_partition: float, entropy: int) -> float:
    """A lifetime at which a Mondrian partition of ``X`` holds about twice
    ``cells_per_partition`` cells: read off one partition sampled to the end (its internal
    nodes' split times, in order, are the times its cell count grows by one)."""
    tree = TreeArrays.empty(X.shape[1], NODE_REG_STATS, X.shape[0])
    seed = int(np.random.SeedSequence(entropy, spawn_key=(HASH_KEY - 2,)).generate_state(1)[0])
    grow(tree, np.ascontiguousarray(X), np.zeros(X.shape[0]), np.zeros(X.shape[0], INDEX),
         np.arange(X.shape[0], dtype=INDEX), "regression", 1, math.inf, seed)
    n = tree.n_nodes
    times = np.sort(tree.tau[:n][tree.left[:n] != NO_NODE])
    if times.size == 0:
        return 1.0
    k = min(int(math.ceil(2 * cells_per_partition)) - 1, times.size) - 1
    return float(times[max(k, 0)]) * (1.0 + 1e-9) if k < times.size - 1 else \
        float(times[-1]) * 2.0


def width_sweep(features: MondrianKernelFeatures, Y: np.ndarray, X_val: np.ndarray,
                Y_val: np.ndarray, alpha: float, max_features: int, n_widths: int,
                solver: str = "exact") -> dict[str, np.ndarray]:
    """Sweep the cuts of the fitted partitions in time order (paper Sec. 4.2).

    Starts from one cell per partition and applies every cut until ``max_features`` cells;
    at ``n_widths`` geometrically spaced feature counts solves the ridge and records the
    validation MSE (rows of ``X_val`` placed by the conditional Mondrian). ``solver``:

    - ``"exact"`` (Sec. 4.2.1): every cut updates the inverse of ``G = Phi'Phi + alpha I``
      (``_kernel.sweep_cuts``, O(features^2) per cut); the log evidence is recorded too.
    - ``"cg"`` (Sec. 4.2.2): a cut copies the cell's weights to both children (predictions
      unchanged) and at each width Jacobi-preconditioned conjugate gradients continue from
      there (``_kernel.ridge_pcg``); O(rows x partitions) per iteration, no evidence (NaN).

    Returns
    -------
    dict with ``lifetime``, ``n_features``, ``validation_mse``, ``log_evidence`` (arrays).
    """
    trees, m, n = features.trees_, features.n_mondrians, Y.shape[0]
    if n != features.n_samples_seen_:
        raise ValueError(f"Y has {n} rows but the partitions were grown on "
                         f"{features.n_samples_seen_}; pass the labels of the rows they saw")
    sizes = np.array([t.n_nodes for t in trees])
    off = np.concatenate([[0], np.cumsum(sizes)])
    left = np.concatenate([np.where(t.left[:k] >= 0, t.left[:k] + o, NO_NODE)
                           for t, k, o in zip(trees, sizes, off, strict=False)])
    right = np.concatenate([np.where(t.right[:k] >= 0, t.right[:k] + o, NO_NODE)
                            for t, k, o in zip(trees, sizes, off, strict=False)])
    tau = np.concatenate([t.tau[:k] for t, k in zip(trees, sizes, strict=True)])
    rows = np.empty((m, n), INDEX)
    start, stop = np.empty(off[-1], INDEX), np.empty(off[-1], INDEX)
    for t, tree in enumerate(trees):
        k = sizes[t]
        _kernel.node_row_ranges(tree.record(), tree.root, k, rows[t],
                                start[off[t]:off[t] + k], stop[off[t]:off[t] + k])
    internal = np.flatnonzero(left != NO_NODE)
    order = internal[np.argsort(tau[internal], kind="stable")]
    ev_node = order[: max(0, max_features - m)]
    ev_tree = np.searchsorted(off, ev_node, side="right") - 1
    # the start: every row in the root cell of every partition
    roots = np.array([o + t.root for t, o in zip(trees, off, strict=False)])
    node_slot = np.full(off[-1], NO_NODE, INDEX)
    node_slot[roots] = np.arange(m)
    cell_of = np.tile(np.arange(m, dtype=INDEX), (n, 1))
    cuts = _kernel.Cuts(ev_tree, ev_node, left, right, rows, start, stop)
    cells = _kernel.Cells(cell_of, node_slot)
    cap = m + ev_node.size
    yy = np.einsum("ij,ij->j", Y, Y)
    if solver == "exact":
        A = np.zeros((cap + 1, cap + 1))
        G0 = np.full((m, m), n / m) + alpha * np.eye(m)
        A[:m, :m] = np.linalg.inv(G0)
        log_det = float(np.linalg.slogdet(G0)[1])
        B = np.zeros((cap + 1, Y.shape[1]))
        B[:m] = Y.sum(axis=0) / math.sqrt(m)
        ridge = _kernel.Ridge(A, B, Y, alpha, np.zeros((8, cap + 1)))
    W = np.zeros((cap + 1, Y.shape[1]))  # the last row: the unseen cells weigh nothing
    checkpoints = np.unique(np.geomspace(1, max(ev_node.size, 1), n_widths).astype(int))
    checkpoints = checkpoints[checkpoints <= ev_node.size] if ev_node.size else np.zeros(1, int)
    bits = (X_val + 0.0).view(np.uint64)
    seeds = np.random.SeedSequence(features.entropy_, spawn_key=(HASH_KEY,))
    seeds = seeds.generate_state(m, dtype=np.uint64)
    out = {k: [] for k in ("lifetime", "n_features", "validation_mse", "log_evidence")}
    done, n_active = 0, m
    for stop_at in checkpoints:
        if solver == "exact":
            n_active, d = _kernel.sweep_cuts(cuts, done, stop_at, cells, ridge, n_active)
            log_det += d
            W[:n_active] = A[:n_active, :n_active] @ B[:n_active]
            bw = np.einsum("ij,ij->j", B[:n_active], W[:n_active])
            evidence = log_evidence(yy, bw, log_det, n, n_active, alpha)
        else:
            n_active = _kernel.relabel_cuts(cuts, done, stop_at, cells, W, n_active)
            _kernel.ridge_pcg(cell_of, n_active, Y, alpha, W, CG_RTOL, 10 * n_active)
            evidence = np.nan
        done = stop_at
        lam = float(tau[ev_node[stop_at - 1]]) if stop_at else float(np.min(tau[roots]))
        W[n_active] = 0.0
        pred = np.zeros(Y_val.shape)
        col = np.empty(X_val.shape[0], INDEX)
        for t, tree in enumerate(trees):
            _kernel.cells(X_val, bits, tree.record(), tree.root,
                          _kernel.Partition(node_slot[off[t]:off[t + 1]], n_active, lam,
                                            seeds[t]), col)
            pred += W[col]
        pred /= math.sqrt(m)
        out["lifetime"].append(lam)
        out["n_features"].append(n_active)
        out["validation_mse"].append(float(np.mean((pred - Y_val) ** 2)))
        out["log_evidence"].append(evidence)
    return {k: np.asarray(v) for k, v in out.items()}
