"""Taddy et al. (2015), Sec. 5: the eBay comparison, EBF against SSF at scale, an analogue.

The paper trains on 12 million eBay transactions to predict 'Bad Buyer Experiences' (a
binary label) and reports that the EBF with 32 branch chunks gives a 1.3% drop in
misclassification over the SSF alternatives. The data are eBay's own. The analogue: the
library's synthetic Friedman #1 classification data (:func:`pipelines.make_data.friedman_partition`,
what ``ebf make-data friedman --task classification --n-classes 2`` writes: ten U(0, 1)
inputs, the label ``f(x) + (0.5 + 2 x0) eps`` above its median), as many training rows as
three forests fit in about 25 minutes on this machine's two shared cores, five seeds (data
and models), and the paper's models: the full BF, an EBF whose trunk has 32 leaves (the
32 branch chunks) and an SSF on 32 equal sub-samples, all with the Sec. 2.5 CART settings.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.forest_models import paper_model
from pipelines.make_data import friedman_partition

from . import taddy_data as data
from .core import Item, Verdict

#: The paper's 32 branch chunks: EBF trunk leaves and SSF sub-samples.
CHUNKS = 32
MODELS = ("BF", "EBF", "SSF")
PAPER_DROP = 1.3


def _sizes(budget: str) -> dict:
    return {"smoke": dict(train=6_400, test=2_000, trees=2, seeds=1),
            "quick": dict(train=200_000, test=50_000, trees=10, seeds=3),
            "full": dict(train=500_000, test=100_000, trees=10, seeds=5)}[budget]


def _xy(partition: int, rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    df = friedman_partition(partition, rows, n_features=10, task="classification",
                            n_classes=2, random_state=seed)
    return df.drop(columns="y").to_numpy(), df["y"].to_numpy()


def _model(name: str, trees: int, seed: int):
    extra = {"EBF": dict(trunk_max_leaves=CHUNKS), "SSF": dict(n_subsamples=CHUNKS)}
    return paper_model(name, trees, seed, data.N_JOBS, task="classification",
                       **extra.get(name, {}))


def run_ebay(budget: str, seed: int, out_dir: Path) -> dict:
    sz = _sizes(budget)
    runs = []
    for s in range(seed, seed + sz["seeds"]):
        X, y = _xy(0, sz["train"], s)
        X_te, y_te = _xy(1, sz["test"], s)
        run = {"seed": s, "positive_rate": float(np.mean(y))}
        for name in MODELS:
            model = _model(name, sz["trees"], s)
            t0 = time.perf_counter()
            model.fit(X, y)
            fit = time.perf_counter() - t0
            run[name] = {"misclassification": float(np.mean(model.predict(X_te) != y_te)),
                         "fit_seconds": fit}
            if name == "EBF":
                run[name]["trunk_leaves"] = int(model.trunk_.n_leaves_)
            del model
        runs.append(run)
        print(f"taddy.ebay seed {s}: " + ", ".join(
            f"{m} {run[m]['misclassification']:.4f} ({run[m]['fit_seconds']:.0f} s)"
            for m in MODELS), file=sys.stderr, flush=True)
    return {"sizes": sz, "chunks": CHUNKS, "runs": runs, **_summary(runs)}


def _summary(runs: list[dict]) -> dict:
    def stats(v: list[float]) -> dict:
        return {"median": float(np.median(v)), "min": float(np.min(v)), "max": float(np.max(v))}

    mcr = {m: [r[m]["misclassification"] for r in runs] for m in MODELS}
    drop = [100.0 * (s - e) / s for s, e in zip(mcr["SSF"], mcr["EBF"], strict=True)]
    ebf_bf = [100.0 * (e / b - 1.0) for e, b in zip(mcr["EBF"], mcr["BF"], strict=True)]
    return {"misclassification": {m: stats(v) for m, v in mcr.items()},
            "fit_seconds": {m: stats([r[m]["fit_seconds"] for r in runs]) for m in MODELS},
            "ebf_drop_vs_ssf_pct": stats(drop), "ebf_vs_bf_pct": stats(ebf_bf)}


def check_ebay(ours: dict) -> Verdict:
    drop, gap = ours["ebf_drop_vs_ssf_pct"], ours["ebf_vs_bf_pct"]
    ok1 = drop["median"] >= PAPER_DROP / 2
    ok2 = -1.0 <= gap["median"] <= 5.0
    detail = (f"EBF's misclassification {drop['median']:.1f}% below SSF's (median over "
              f"{len(ours['runs'])} seeds, range {drop['min']:.1f} to {drop['max']:.1f}; needs "
              f">= {PAPER_DROP / 2:g}%, half the paper's {PAPER_DROP:g}%); EBF vs BF "
              f"{gap['median']:+.1f}% (range {gap['min']:+.1f} to {gap['max']:+.1f}; allowed "
              f"[-1%, +5%])")
    return Verdict(ok1 and ok2, detail, drop["median"] / PAPER_DROP)


def _headline(o: dict) -> str:
    m = o["misclassification"]
    return ("misclassification " + ", ".join(f"{k} {m[k]['median']:.4f}" for k in MODELS)
            + f" (EBF {o['ebf_drop_vs_ssf_pct']['median']:.1f}% below SSF, "
            f"{o['ebf_vs_bf_pct']['median']:+.1f}% vs BF; {o['sizes']['train']:,} rows)")


EBAY = Item(
    key="taddy.ebay", paper="Taddy et al. (2015)", where="Sec. 5",
    title="EBF vs SSF at scale (the eBay 'Bad Buyer Experience' analogue), 32 chunks",
    paper_numbers={"training rows": 12_000_000, "branch chunks": CHUNKS,
                   "EBF drop in misclassification over SSF": "1.3%",
                   "extra detected BBE occurrences": "more than 20,000"},
    paper_headline="12M transactions, 32 branch chunks: EBF 1.3% lower misclassification "
                   "than SSF",
    data="synthetic Friedman #1 binary classification (pipelines.make_data, as `ebf "
         "make-data friedman --task classification --n-classes 2`), 10 features; full: "
         "500,000 training rows (the most for which BF, EBF and SSF fit 5 seeds within about "
         "25 minutes on this machine's 2 shared cores: about 80 s per forest of 10 trees under "
         "load; the paper's 12M do not fit), 100,000 test rows, 10 trees per forest (per "
         "branch, per sub-sample), 5 seeds; quick: 200,000 rows, 3 seeds",
    substitutes=("eBay's 12M transactions (proprietary) replaced by synthetic Friedman #1 "
                 "classification at 500,000 rows",
                 "trees per forest not given by the paper: 10 per forest, branch and "
                 "sub-sample",
                 "the full BF is run beside them (the paper reports no BF at eBay)"),
    metric="misclassification rate on the test rows, median over seeds",
    claim="With 32 branch chunks the EBF's misclassification is at least 0.65% (half the "
          "paper's 1.3%, read as relative, as the paper's other gaps) below that of the SSF "
          "on 32 sub-samples (Sec. 5), and the EBF is within [-1%, +5%] of the full BF "
          "(Sec. 4: EBF predictions similar to the full BF's; the band of the Sec. 4.1 items).",
    tolerance="median relative drop >= 0.65%; median EBF vs BF gap in [-1%, +5%]",
    run=run_ebay, check=check_ebay, headline=_headline,
)
