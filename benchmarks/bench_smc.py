"""Benchmark issue 13: Bayesian decision trees by SMC against MCMC against CART (thesis Fig. 3.6).

A real classification task shipped with scikit-learn, a seeded stratified 70% / 30% split:
``digits`` (1,797 8x8 hand-written digits, 64 features, 10 classes; the thesis used the
16-feature pen-digits) or ``breast_cancer`` (569 tumours, 30 features, 2 classes).

Methods, the same Bayesian decision-tree model (the Chipman prior with the thesis' alpha_s
= 0.95, beta_s = 0.5, Dirichlet-multinomial leaves with alpha = 5, Sec. 3.4.1):

``SMC``
    :class:`ebf.bayestrees.SMCTreeClassifier` (prior proposal, node-wise expansion,
    multinomial resampling at ESS < C / 10), ``--islands`` islands of ``C`` particles for
    every ``C`` of ``--particles``: one point of the time / accuracy curve each.
``MCMC``
    our CGM sampler (grow / prune / change / swap, Chipman et al. 1998;
    :func:`ebf.bayestrees.mcmc.mh_update`) on the same model, one chain from the root, a
    checkpoint every ``--chunk`` moves up to ``--moves``; the prediction at a checkpoint
    averages the Dirichlet predictives of the trees at the checkpoints of the chain's
    second half (the first half is burn-in), as in the thesis.
``CART``
    scikit-learn's ``DecisionTreeClassifier`` (``min_samples_leaf`` 1 and 5), whose
    leaf frequencies are its probabilities (clipped at 1e-12 for the log-likelihood).

Scores on the test rows: accuracy and mean log predictive probability, against fit seconds
(numba compiled by a warm-up first; each island of the SMC runs on one thread,
``n_jobs=1``). The target: SMC at least 10x faster than MCMC at equal test
log-likelihood; the ratio is MCMC's time to first reach the SMC point's log-likelihood over
the SMC point's time.

Writes ``benchmarks/results/issue13/smc_<dataset>.json`` and ``.md``. Run from the
repository root::

    PYTHONPATH=. python benchmarks/bench_smc.py
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import (
    machine_info,
    markdown_table,
    parse_with_sizes,
    print_table,
    versions,
    write_json,
)

RESULTS_DIR = Path(__file__).resolve().parent / "results" / "issue13"
ALPHA_S, BETA_S, ALPHA = 0.95, 0.5, 5.0

log = logging.getLogger("bench_smc")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small settings, for a smoke run")
    p.add_argument("--dataset", choices=("digits", "breast_cancer"), default="digits")
    p.add_argument("--particles", type=int, nargs="+")
    p.add_argument("--islands", type=int, default=5)
    p.add_argument("--moves", type=int)
    p.add_argument("--chunk", type=int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=RESULTS_DIR)
    return parse_with_sizes(p, argv,
                            quick=dict(particles=[5, 20], moves=2000, chunk=200),
                            full=dict(particles=[5, 10, 25, 50, 100, 200, 400],
                                      moves=200_000, chunk=2_000))


def load(name: str, seed: int) -> tuple[np.ndarray, ...]:
    from sklearn import datasets
    from sklearn.model_selection import train_test_split

    X, y = getattr(datasets, f"load_{name}")(return_X_y=True)
    return tuple(train_test_split(X.astype(np.float64), y, test_size=0.3, stratify=y,
                                  random_state=seed))


def scores(proba: np.ndarray, y: np.ndarray) -> dict[str, float]:
    p = np.clip(proba[np.arange(y.size), y], 1e-12, None)
    return {"accuracy": float(np.mean(proba.argmax(axis=1) == y)),
            "loglik": float(np.mean(np.log(p)))}


def run_smc(X, y, X_te, y_te, cfg) -> list[dict[str, Any]]:
    from ebf.bayestrees import SMCTreeClassifier

    params = dict(n_islands=cfg.islands, alpha_s=ALPHA_S, beta_s=BETA_S, alpha=ALPHA, n_jobs=1)
    SMCTreeClassifier(n_particles=2, **params).fit(X[:100], y[:100])  # compile
    rows = []
    for c in cfg.particles:
        t0 = time.perf_counter()
        model = SMCTreeClassifier(n_particles=c, random_state=cfg.seed, **params).fit(X, y)
        seconds = time.perf_counter() - t0
        rows.append({"method": "SMC", "setting": f"C={c} x {cfg.islands} islands",
                     "seconds": seconds, **scores(model.predict_proba(X_te), y_te),
                     "leaves": model.expected_n_leaves_})
        log.info("%s", rows[-1])
    return rows


def _dirichlet_predictive(tree, X, y, X_te, n_classes) -> np.ndarray:
    from ebf.bayestrees import apply

    counts = np.zeros((tree.n_nodes, n_classes))
    np.add.at(counts, (apply(tree, X), y), 1.0)
    value = (counts + ALPHA / n_classes) / (counts.sum(axis=1, keepdims=True) + ALPHA)
    return value[apply(tree, X_te)]


def run_mcmc(X, y, X_te, y_te, cfg) -> list[dict[str, Any]]:
    from ebf.bayestrees import BayesTree, LeafLikelihood
    from ebf.bayestrees.mcmc import mh_update

    k = int(y.max()) + 1
    lik = LeafLikelihood.dirichlet_multinomial(ALPHA, k)
    mh_update(BayesTree.root_only(50), X[:50], y[:50], lik, "cgm", ALPHA_S, BETA_S, 5, 0)
    rng = np.random.default_rng(cfg.seed)
    tree = BayesTree.root_only(X.shape[0])
    predictives, rows, seconds, accepted = [], [], 0.0, 0
    for i in range(cfg.moves // cfg.chunk):
        t0 = time.perf_counter()
        tree, moves = mh_update(tree, X, y, lik, "cgm", ALPHA_S, BETA_S, cfg.chunk, rng)
        seconds += time.perf_counter() - t0  # prediction bookkeeping is not the sampler's
        accepted += int(moves[:, 1].sum())
        predictives.append(_dirichlet_predictive(tree, X, y, X_te, k))
        kept = predictives[len(predictives) // 2:]
        rows.append({"method": "MCMC", "setting": f"{(i + 1) * cfg.chunk} moves",
                     "seconds": seconds, **scores(np.mean(kept, axis=0), y_te),
                     "leaves": tree.n_leaves, "accept": accepted / ((i + 1) * cfg.chunk)})
    log.info("MCMC: %s", rows[-1])
    return rows


def run_cart(X, y, X_te, y_te, cfg) -> list[dict[str, Any]]:
    from sklearn.tree import DecisionTreeClassifier

    rows = []
    for leaf in (1, 5):
        t0 = time.perf_counter()
        model = DecisionTreeClassifier(min_samples_leaf=leaf, random_state=cfg.seed).fit(X, y)
        seconds = time.perf_counter() - t0
        rows.append({"method": "CART", "setting": f"min_samples_leaf={leaf}",
                     "seconds": seconds, **scores(model.predict_proba(X_te), y_te),
                     "leaves": model.get_n_leaves()})
    return rows


def speedups(smc: list[dict], mcmc: list[dict]) -> None:
    """MCMC's seconds to first reach each SMC point's test log-likelihood, over SMC's."""
    for row in smc:
        reached = [m["seconds"] for m in mcmc if m["loglik"] >= row["loglik"]]
        row["mcmc_seconds_to_match"] = reached[0] if reached else None
        row["speedup"] = reached[0] / row["seconds"] if reached else None
        row["speedup_at_least"] = (mcmc[-1]["seconds"] / row["seconds"]) if not reached else None


COLUMNS = [("method", "method", "s"), ("setting", "setting", "s"),
           ("seconds", "fit s", ".3f"), ("accuracy", "accuracy", ".3f"),
           ("loglik", "test log p", ".3f"), ("leaves", "leaves", ".1f"),
           ("mcmc_seconds_to_match", "MCMC s to match", ".2f"),
           ("speedup", "SMC speed-up", ".1f"), ("speedup_at_least", "speed-up >", ".1f")]


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    cfg = parse_args(argv)
    X, X_te, y, y_te = load(cfg.dataset, cfg.seed)
    smc = run_smc(X, y, X_te, y_te, cfg)
    mcmc = run_mcmc(X, y, X_te, y_te, cfg)
    speedups(smc, mcmc)
    cart = run_cart(X, y, X_te, y_te, cfg)
    step = max(1, len(mcmc) // 12)
    shown = mcmc[step - 1::step]
    rows = smc + shown + cart
    title = (f"{cfg.dataset}: {X.shape[0]} train / {X_te.shape[0]} test rows, "
             f"{X.shape[1]} features")
    report = {"machine": machine_info(), "versions": versions(), "config": vars(cfg),
              "smc": smc, "mcmc": mcmc, "cart": cart}
    write_json(report, cfg.out / f"smc_{cfg.dataset}.json")
    print_table(title, COLUMNS, rows)
    text = f"# {title}\n\n{markdown_table(COLUMNS, rows)}\n"
    (cfg.out / f"smc_{cfg.dataset}.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
