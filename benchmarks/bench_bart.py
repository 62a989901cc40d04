"""Benchmark issue 13: PG-BART against pymc-bart, and our CGM / GrowPrune samplers.

Two regression tasks, a seeded train / test split each:

``friedman``
    Friedman (1991) #1 with 10 features (5 spurious) and N(0, 1) noise
    (:func:`benchmarks.forest_models.friedman`), ``--train`` / ``--test`` rows.
``diabetes``
    scikit-learn's diabetes data (442 patients, 10 features, disease progression after a
    year; shipped with scikit-learn), a seeded 75% / 25% split.

Methods, the same model and the same number of iterations: ``--trees`` trees, the Chipman
prior (alpha 0.95, beta 2), ``sigma^2 ~ IG(nu / 2, nu lambda / 2)`` with ``nu = 3`` and
``lambda`` from ``q = 0.9`` (:func:`ebf.bayestrees.backfitting.noise_prior`), ``--iter``
iterations of which the first ``--burn-in`` are discarded:

``PG`` / ``CGM`` / ``GrowPrune``
    :class:`ebf.bayestrees.BARTRegressor` with ``sampler="pg"`` (``--particles``
    particles) / ``"cgm"`` / ``"growprune"``; numba is compiled by a warm-up fit first.
``pymc-bart``
    pymc-bart's particle Gibbs for the trees (the same particle count; every tree updated
    at every draw) and NUTS for sigma^2, one chain, ``tune = --burn-in`` and ``draws =
    --iter - --burn-in``; run by ``benchmarks/peer_pymc_bart.py`` in the environment of
    ``--peer-python`` (the ``bart-peer`` extra conflicts with our numba). Its compilation is
    timed apart and not counted.

Scores: ESS of the training log-likelihood trace after the burn-in
(:func:`ebf.bayestrees.diagnostics.chain_ess`, the thesis' mixing measure, Sec. 4.4, the same
estimator for every method), ESS per second of sampling (burn-in included), the same for
f(x) at the test rows (median over rows: the log-likelihood moves with sigma^2, so a chain
stuck at a poor fit with a large sigma^2 can have a high log-likelihood ESS), test RMSE of
the posterior mean, NLPD of the predictive mixture over draws (``N(f_s(x), sigma^2_s)``)
and the coverage of its central 90% interval, plus the largest coverage gap over the
levels 10%..90%. Targets: PG's ESS/s at least 5x pymc-bart's, coverage within 0.03 of 0.9.

Writes ``benchmarks/results/issue13/bart.json`` and ``bart.md``. Run from the repository
root::

    PYTHONPATH=. python benchmarks/bench_bart.py --peer-python /path/to/peer/bin/python
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import parse_with_sizes, write_rows

RESULTS_DIR = Path(__file__).resolve().parent / "results" / "issue13"
LEVELS = np.round(np.arange(1, 10) / 10, 1)
SAMPLERS = {"PG": "pg", "CGM": "cgm", "GrowPrune": "growprune"}

log = logging.getLogger("bench_bart")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small settings, for a smoke run")
    p.add_argument("--tasks", nargs="+", default=["friedman", "diabetes"])
    p.add_argument("--trees", type=int)
    p.add_argument("--iter", type=int)
    p.add_argument("--burn-in", type=int)
    p.add_argument("--particles", type=int, default=10)
    p.add_argument("--train", type=int)
    p.add_argument("--test", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--peer-python", default=None,
                   help="python of an environment with the bart-peer extra (pymc-bart); "
                        "without it the peer is skipped")
    p.add_argument("--out", type=Path, default=RESULTS_DIR)
    return parse_with_sizes(p, argv, quick=dict(trees=20, iter=120, burn_in=40, train=300),
                            full=dict(trees=50, iter=1000, burn_in=250, train=1000))


def load_task(name: str, cfg: argparse.Namespace) -> tuple[np.ndarray, ...]:
    """``X_train, y_train, X_test, y_test`` of a task (module docstring)."""
    rng = np.random.default_rng([cfg.seed, 13])
    if name == "friedman":
        from benchmarks.forest_models import friedman

        X, y, _ = friedman(cfg.train, 10, rng)
        X_te, y_te, _ = friedman(cfg.test, 10, rng)
        return X, y, X_te, y_te
    if name == "diabetes":
        from sklearn.datasets import load_diabetes

        X, y = load_diabetes(return_X_y=True)
        idx = rng.permutation(y.size)
        cut = int(0.75 * y.size)
        return X[idx[:cut]], y[idx[:cut]], X[idx[cut:]], y[idx[cut:]]
    raise ValueError(f"unknown task {name!r}; choose friedman or diabetes")


def scores(y: np.ndarray, dist: Any, seconds: float) -> dict[str, float]:
    """RMSE of the mean, NLPD, coverage at 90% and the largest gap over ``LEVELS``, and the
    median over test rows of the ESS of f(x) (the draws' means, in draw order), per second
    of sampling."""
    from basics.metrics import coverage, nlpd, rmse
    from ebf.bayestrees.diagnostics import chain_ess

    cov = coverage(y, dist, LEVELS)
    ess_f = float(np.median([chain_ess(row) for row in dist.means]))
    return {"ess_f": ess_f, "ess_f_per_s": ess_f / seconds, "rmse": rmse(y, dist.mean),
            "nlpd": nlpd(y, dist), "coverage90": float(cov[-1]),
            "max_gap": float(np.max(np.abs(cov - LEVELS)))}


def run_ours(sampler: str, data: tuple, cfg: argparse.Namespace) -> dict[str, Any]:
    from ebf.bayestrees import BARTRegressor

    X, y, X_te, y_te = data
    params = dict(sampler=sampler, n_trees=cfg.trees, n_particles=cfg.particles,
                  n_iter=cfg.iter, burn_in=cfg.burn_in, random_state=cfg.seed)
    BARTRegressor(**{**params, "n_iter": 3, "burn_in": 1}).fit(X[:50], y[:50])  # compile
    model = BARTRegressor(**params)
    t0 = time.perf_counter()
    model.fit(X, y)
    seconds = time.perf_counter() - t0
    out = {"seconds": seconds, "ess": float(model.ess_), "ess_per_s": model.ess_ / seconds}
    return {**out, **scores(y_te, model.predict_distribution(X_te), seconds)}


def run_peer(data: tuple, cfg: argparse.Namespace) -> dict[str, Any] | None:
    from basics.mixture import GaussianMixture
    from ebf.bayestrees.backfitting import noise_prior, sigma_hat2
    from ebf.bayestrees.diagnostics import chain_ess

    if not cfg.peer_python:
        log.warning("no --peer-python: pymc-bart skipped")
        return None
    X, y, X_te, y_te = data
    lam = noise_prior(sigma_hat2(X, y), 3.0, 0.9)  # the prior ours puts on sigma^2
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = Path(tmp) / "data.npz", Path(tmp) / "out.npz"
        np.savez(inp, X_train=X, y_train=y, X_test=X_te)
        cmd = [cfg.peer_python, str(Path(__file__).with_name("peer_pymc_bart.py")),
               "--data", str(inp), "--out", str(out), "--trees", str(cfg.trees),
               "--particles", str(cfg.particles), "--draws", str(cfg.iter - cfg.burn_in),
               "--tune", str(cfg.burn_in), "--lam", repr(float(lam)), "--seed", str(cfg.seed)]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        d = dict(np.load(out))
    seconds = float(d["sample_seconds"])
    ess = chain_ess(d["loglik"])
    draws = d["mu_test"].shape[0]
    dist = GaussianMixture(np.full((y_te.size, draws), 1.0 / draws), d["mu_test"].T,
                           np.broadcast_to(d["sigma2"], (y_te.size, draws)))
    return {"seconds": seconds, "compile_seconds": float(d["compile_seconds"]), "ess": ess,
            "ess_per_s": ess / seconds, **scores(y_te, dist, seconds)}


COLUMNS = [("task", "task", "s"), ("method", "method", "s"), ("seconds", "sampling s", ".1f"),
           ("ess", "ESS", ".0f"), ("ess_per_s", "ESS/s", ".2f"),
           ("vs_peer", "ESS/s vs pymc-bart", ".2f"), ("ess_f", "ESS f(x)", ".0f"),
           ("ess_f_per_s", "ESS f(x)/s", ".2f"), ("vs_peer_f", "vs pymc-bart", ".2f"),
           ("rmse", "RMSE", ".3f"),
           ("nlpd", "NLPD", ".3f"), ("coverage90", "coverage 90%", ".3f"),
           ("max_gap", "max gap", ".3f")]


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    cfg = parse_args(argv)
    rows = []
    for task in cfg.tasks:
        data = load_task(task, cfg)
        results = {name: run_ours(s, data, cfg) for name, s in SAMPLERS.items()}
        peer = run_peer(data, cfg)
        if peer is not None:
            results["pymc-bart"] = peer
        for name, r in results.items():
            vs = vs_f = None
            if peer is not None:
                vs = r["ess_per_s"] / peer["ess_per_s"]
                vs_f = r["ess_f_per_s"] / peer["ess_f_per_s"]
            rows.append({"task": task, "method": name, **r, "vs_peer": vs, "vs_peer_f": vs_f})
            log.info("%s %s: %s", task, name, r)
    title = (f"BART, {cfg.trees} trees, {cfg.iter} iterations ({cfg.burn_in} burn-in), "
             f"{cfg.particles} particles")
    write_rows(cfg.out, "bart", cfg, title, COLUMNS, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
