"""Thesis Ch. 3, the model side of the SMC experiments: the evidence and the hyperparameters.

- ``smc.fig3_7``: the SMC estimate of the training data's log marginal likelihood
  log p(Y|X) against the particle count, prior and optimal proposals (Fig. 3.7, Sec. 3.4.2).
- ``smc.fig3_8_11``: SMC (prior and optimal proposals) against MCMC under four other
  hyperparameter settings (Figs. 3.8-3.11, Sec. 3.4.3).

The runs are those of :mod:`benchmarks.papers.thesis_smc` (its data, model, fits and
chains); a configuration already fitted in the same process by another item is reused.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .core import Item, Verdict
from .thesis_data import figure
from .thesis_smc import (
    _DATA,
    _FULL,
    _SUBST,
    MODEL,
    PAPER,
    STYLES,
    curve,
    matched_speedup,
    mean_curves,
    per_dataset,
    smc_mcmc_runs,
    smc_point,
    spread,
)

# ---------------------------------------------------------------- Fig. 3.7

#: Particle grids (one island) and seeds; the full budget's grids contain those of
#: ``smc.fig3_2``'s full budget, whose fits it reuses when both run in one process.
EVIDENCE_SIZES = {
    "smoke": dict(prior=(5, 20), optimal=(3,), seeds=1),
    "quick": dict(prior=(10, 25, 50, 100, 200, 400, 1000), optimal=(5, 10), seeds=1),
    "full": dict(prior=(10, 25, 50, 100, 200, 500, 1000, 2000), optimal=(5, 10, 25),
                 seeds=5),
}


def run_fig3_7(budget: str, seed: int, out_dir: Path) -> dict:
    size = EVIDENCE_SIZES[budget]
    curves = per_dataset(budget, seed, lambda parts, _: {
        f"{prop}/node": curve(parts, size[prop], 1, prop, "node", size["seeds"], seed)
        for prop in ("prior", "optimal")})
    panels = [(ds, "particles C", "training log p(Y|X), mean over seeds",
               {cfg: ([r["particles"] for r in rows], [r["log_evidence"] for r in rows],
                      STYLES[cfg]) for cfg, rows in by_cfg.items()})
              for ds, by_cfg in curves.items()]
    name = figure(out_dir / "smc.fig3_7.png", panels,
                  f"Fig. 3.7: SMC estimate of log p(Y|X), one island, {size['seeds']} seeds")
    return {"curves": curves, "seeds": size["seeds"], "figures": [name]}


def check_fig3_7(ours: dict) -> Verdict:
    """Thesis Fig. 3.7 on the means over seeds: each proposal's log evidence rises with C
    (a step may fall by 0.5% of |log Z|), and the prior's meets the optimal's: the gap at
    the largest C is at most 1% of |log Z| and smaller than at the prior's C = 100."""
    parts, ok = [], True
    for ds, c in ours["curves"].items():
        rises = {}
        for cfg, rows in c.items():
            z = [r["log_evidence"] for r in rows]
            rises[cfg] = z[-1] > z[0] and all(b >= a - 0.005 * abs(a)
                                              for a, b in zip(z, z[1:], strict=False))
        prior, top = c["prior/node"], c["optimal/node"][-1]["log_evidence"]
        gap_end = abs(top - prior[-1]["log_evidence"])
        at_100 = next((r for r in prior if r["particles"] >= 100), prior[0])
        gap_100 = abs(top - at_100["log_evidence"])
        meets = gap_end <= 0.01 * abs(top) and gap_end < gap_100
        ok &= all(rises.values()) and meets
        parts.append(
            f"{ds}: log Z rises with C: prior {rises['prior/node']} "
            f"({prior[0]['log_evidence']:.0f} at C={prior[0]['particles']} to "
            f"{prior[-1]['log_evidence']:.0f} at C={prior[-1]['particles']}), optimal "
            f"{rises['optimal/node']} ({c['optimal/node'][0]['log_evidence']:.0f} to {top:.0f}"
            f" at C={c['optimal/node'][-1]['particles']}); gap prior - optimal at the largest "
            f"C {gap_end:.0f} nats ({100 * gap_end / abs(top):.2f}% of |log Z|, allowed 1%), "
            f"at prior C={at_100['particles']} {gap_100:.0f}")
    return Verdict(ok, "; ".join(parts))


def _headline_fig3_7(ours: dict) -> str:
    out = []
    for ds, c in ours["curves"].items():
        p, o = c["prior/node"][-1], c["optimal/node"][-1]
        out.append(f"{ds}: log Z prior C={p['particles']} "
                   f"{spread(p['per_seed']['log_evidence'])}, optimal C={o['particles']} "
                   f"{spread(o['per_seed']['log_evidence'])}")
    return "; ".join(out)


# ---------------------------------------------------------------- Figs. 3.8-3.11

#: The thesis' four variants of alpha = 5, alpha_s = 0.95, beta_s = 0.5 (Sec. 3.4.3).
SETTINGS = {
    "fig3_8": dict(alpha=5.0, alpha_s=0.8, beta_s=0.5, n_jobs=1),
    "fig3_9": dict(alpha=5.0, alpha_s=0.95, beta_s=0.2, n_jobs=1),
    "fig3_10": dict(alpha=5.0, alpha_s=0.8, beta_s=0.2, n_jobs=1),
    "fig3_11": dict(alpha=1.0, alpha_s=0.95, beta_s=0.5, n_jobs=1),
}

#: SMC (prior, I = 5) totals, the CGM chain, the optimal proposal's particles (one island)
#: and seeds; the SMC totals are among ``smc.fig3_6``'s, whose alpha = 5 fits the
#: alpha = 1 comparison reuses when both run in one process.
HYPER_SIZES = {
    "smoke": dict(smc=(10,), moves=200, chunk=100, optimal=3, seeds=1),
    "quick": dict(smc=(100, 250, 500), moves=20_000, chunk=1_000, optimal=5, seeds=2),
    "full": dict(smc=(100, 250, 500), moves=20_000, chunk=1_000, optimal=5, seeds=5),
}


def _hyper_runs(parts, size: dict, seed: int) -> dict:
    seeds = range(seed, seed + size["seeds"])
    out = {name: {"runs": smc_mcmc_runs(parts, size["smc"], size["moves"], size["chunk"],
                                        size["seeds"], seed, model),
                  "optimal": [smc_point(parts, size["optimal"], 1, "optimal", "node", s,
                                        model) for s in seeds]}
           for name, model in SETTINGS.items()}
    out["alpha5"] = [[{"particles": c, **smc_point(parts, c // 5, 5, "prior", "node", s,
                                                   MODEL)} for c in size["smc"]]
                     for s in seeds]
    return out


def run_fig3_8_11(budget: str, seed: int, out_dir: Path) -> dict:
    size = HYPER_SIZES[budget]
    runs = per_dataset(budget, seed, lambda parts, _: _hyper_runs(parts, size, seed))
    figures = []
    for name, model in SETTINGS.items():
        panels = []
        for ds, by_name in runs.items():
            means = mean_curves(by_name[name]["runs"])
            opt = by_name[name]["optimal"]
            for metric in ("loglik", "accuracy"):
                series = {cfg: ([r["seconds"] for r in rows], [r[metric] for r in rows],
                                STYLES[cfg]) for cfg, rows in means.items()}
                series[f"optimal/node C={size['optimal']}"] = (
                    [np.mean([r["seconds"] for r in opt])], [np.mean([r[metric] for r in opt])],
                    "bo")
                panels.append((ds, "fit seconds", f"test {metric}", series))
        title = (f"Fig. {name[3:].replace('_', '.')}: alpha {model['alpha']}, alpha_s "
                 f"{model['alpha_s']}, beta_s {model['beta_s']}; mean of {size['seeds']} seeds")
        figures.append(figure(out_dir / f"smc.fig3_8_11_{name}.png", panels, title))
    return {"runs": runs, "settings": SETTINGS, "seeds": size["seeds"], "figures": figures}


def check_fig3_8_11(ours: dict) -> Verdict:
    """Thesis Sec. 3.4.3 in each setting and data set: (i) SMC beats MCMC: the median over
    seeds of the speed-up of the cheapest SMC run matching the chain's final prediction
    (as in ``smc.fig3_6``) is above 1; (ii) the prior beats the optimal proposal: within
    the optimal run's mean seconds the prior's mean curve reaches its mean log p within
    0.02 nats; (iii) with alpha = 1 the prior's mean accuracy is within 0.01 of alpha = 5's
    at every particle count."""
    parts, ok = [], True
    for ds, by_name in ours["runs"].items():
        for name in SETTINGS:
            runs, opt = by_name[name]["runs"], by_name[name]["optimal"]
            factors = [matched_speedup(r["prior/node"], r["MCMC"])[0] for r in runs]
            faster = float(np.median(factors)) > 1
            prior = mean_curves(runs)["prior/node"]
            o_sec = float(np.mean([r["seconds"] for r in opt]))
            o_lp = float(np.mean([r["loglik"] for r in opt]))
            best = max((r["loglik"] for r in prior if r["seconds"] <= o_sec), default=-np.inf)
            prior_wins = best >= o_lp - 0.02
            ok &= faster and prior_wins
            text = (f"{ds} {name}: SMC/MCMC speed-up median {np.median(factors):.1f}x "
                    f"[{min(factors):.1f}, {max(factors):.1f}] (> 1: {faster}); optimal "
                    f"{o_lp:.3f} in {o_sec:.1f}s, best prior in that time {best:.3f} "
                    f"(prior better: {prior_wins})")
            if SETTINGS[name]["alpha"] != MODEL["alpha"]:
                five = mean_curves([{"prior/node": r} for r in by_name["alpha5"]])["prior/node"]
                gaps = [abs(a["accuracy"] - b["accuracy"]) for a, b in zip(prior, five,
                                                                           strict=True)]
                similar = max(gaps) <= 0.01
                ok &= similar
                pairs = ", ".join(f"{a['accuracy']:.3f}/{b['accuracy']:.3f}"
                                  for a, b in zip(prior, five, strict=True))
                text += (f"; accuracy alpha {SETTINGS[name]['alpha']} / 5 at C "
                         f"{[r['particles'] for r in prior]}: {pairs} (max gap "
                         f"{max(gaps):.3f}, allowed 0.01)")
            parts.append(text)
    return Verdict(ok, "; ".join(parts))


def _headline_fig3_8_11(ours: dict) -> str:
    out = []
    for name in SETTINGS:
        cells = []
        for ds, by_name in ours["runs"].items():
            factors = [matched_speedup(r["prior/node"], r["MCMC"])[0]
                       for r in by_name[name]["runs"]]
            cells.append(f"{ds} {np.median(factors):.1f}x")
        out.append(f"{name}: SMC/MCMC {', '.join(cells)}")
    return "; ".join(out)


# ---------------------------------------------------------------- items

ITEMS = [
    Item(key="smc.fig3_7", paper=PAPER, where="Sec. 3.4.2, Fig. 3.7",
         title="The SMC estimate of the training evidence log p(Y|X) against the particles",
         paper_numbers={"runs_averaged": 10, "proposals": "prior, optimal",
                        "trend": "rises with C; prior and optimal converge to the same value"},
         paper_headline="log p(Y|X) rises with C; prior and optimal converge to the same "
                        "value (figure)",
         data=_DATA + _FULL + " (prior C = 10 to 2,000, optimal C = 5 to 25, one island: the "
                              "fits of smc.fig3_2, two larger prior runs added)",
         substitutes=_SUBST, metric="mean over seeds of the SMC estimate of log p(Y|X) "
                                    "(training rows, nats) against C",
         claim=("On pen-digits and magic-04 the mean log marginal likelihood of the training "
                "data rises with the number of particles for the prior and the optimal "
                "proposals, and the prior's converges to the optimal's: at the largest C "
                "they are within 1% of |log p(Y|X)|, closer than at the prior's C = 100."),
         tolerance="a step in C may lower the mean by at most 0.5% of |log Z| (seed noise), "
                   "the largest C strictly above the smallest; gap at the largest C <= 1% "
                   "of |log Z| and below the gap at C = 100",
         run=run_fig3_7, check=check_fig3_7, headline=_headline_fig3_7),
    Item(key="smc.fig3_8_11", paper=PAPER, where="Sec. 3.4.3, Figs. 3.8-3.11",
         title="Sensitivity to the hyperparameters (alpha_s, beta_s of the tree prior; "
               "Dirichlet alpha)",
         paper_numbers={"settings": "(alpha, alpha_s, beta_s) = (5, 0.8, 0.5), "
                                    "(5, 0.95, 0.2), (5, 0.8, 0.2), (1, 0.95, 0.5)",
                        "baseline": "(5, 0.95, 0.5), Fig. 3.6"},
         paper_headline="trends as in Fig. 3.6: SMC better than MCMC, prior better than "
                        "optimal; alpha = 1 similar accuracy to alpha = 5 (figures)",
         data=_DATA + _FULL + " (SMC prior C = 100, 250, 500 with I = 5; the optimal "
                              "proposal at C = 5, one island; CGM chains of 20,000 moves)",
         substitutes=_SUBST + (
             "MCMC: our CGM sampler (ebf.bayestrees.mcmc), the thesis' own Python MCMC not "
             "available",
             "the optimal proposal run at its cheapest (C = 5, one island), not the thesis' "
             "grid with I = 5: the prior is compared with it at its own seconds"),
         metric="test log p(y|x) and accuracy vs fit seconds",
         claim=("Under each of the four hyperparameter settings, on pen-digits and "
                "magic-04: (i) SMC offers a better runtime vs predictive performance "
                "trade-off than MCMC: the cheapest SMC run matching the chain's final test "
                "log p (accuracy within 0.01) gets there faster than the chain, in the "
                "median over seeds; (ii) the prior proposal offers a better trade-off than "
                "the optimal: within the optimal run's seconds the prior reaches its test "
                "log p; (iii) alpha = 1 gives test accuracies similar to alpha = 5 at the "
                "same particle counts."),
         tolerance="(i) median speed-up > 1; (ii) the prior within 0.02 nats of the optimal "
                   "run in no more time; (iii) |accuracy difference| <= 0.01 at every C",
         run=run_fig3_8_11, check=check_fig3_8_11, headline=_headline_fig3_8_11),
]

CAUSES: dict[str, str] = {
    "smc.fig3_7": (
        "Converging, not yet within the tolerance at our largest C, and the optimal's "
        "estimate flat within seed noise (full budget, 5 seeds, one island). The prior's "
        "mean log p(Y|X) rises at every step (pen-digits -11,564 at C = 10, -2,933 at 100, "
        "-2,642 at 500, -2,604 at 1,000, -2,544 at 2,000) towards the optimal proposal's "
        "(-2,525, -2,505, -2,511 at C = 5, 10, 25): the gap shrinks from 421 nats at C = 100 "
        "to 32 at C = 2,000, 1.29% of |log Z| against the 1% allowed. On magic-04 the gap "
        "closes to 9 nats (0.19%), but the optimal's mean is -5,048, -5,046, -5,056 at C = 5, "
        "10, 25, so its largest C is not above its smallest, as the check asks of both "
        "proposals: it has saturated at C = 5 (the thesis says so of its predictions) and "
        "the 8-nat dip lies inside the seeds' spread (-5,105 to -5,030 at C = 25). The "
        "thesis' grid and the C where its curves meet are not given in the text; ours stops "
        "at C = 2,000 (one island) for the machine's time."),
    "smc.fig3_8_11": (
        "Only part (iii), by 0.002, on pen-digits at the smallest C; (i) and (ii) hold in all "
        "four settings on both data sets (full budget, 5 seeds). SMC reaches the final "
        "prediction of a 20,000-move chain 4.9-10.9x faster in the median (every seed above "
        "1x; all lower bounds: no chain reached the matching SMC run, which in 27 of the "
        "40 chains is the grid's smallest, C = 100), and within the "
        "optimal proposal's seconds the prior beats it by 0.017-0.050 nats in seven of the "
        "eight cases and trails it by 0.004 (inside the 0.02 allowed) in the eighth "
        "(pen-digits, alpha_s = 0.8, beta_s = 0.2). With alpha = 1 the mean test accuracy "
        "on pen-digits is 0.967, 0.976, 0.981 at C = 100, 250, 500 against alpha = 5's "
        "0.955, 0.970, 0.974: 0.012 apart at C = 100 (per seed alpha = 1 0.961-0.973, "
        "alpha = 5 0.949-0.963), above the 0.01 allowed, and 0.006-0.007 at the larger C; "
        "on magic-04 at most 0.003 apart. Alpha = 1 is the more accurate in 4 of 5 seeds at "
        "C = 100 on pen-digits, so this is a small systematic difference at 20 particles per "
        "island, not seed noise alone."),
}
