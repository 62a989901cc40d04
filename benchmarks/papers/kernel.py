"""Balog, Lakshminarayanan, Ghahramani, Roy & Teh (2016), "The Mondrian kernel" (UAI):
Figs. 5-9, run on our Mondrian kernel and the paper's two baselines for the Laplace kernel
(random binning and Cauchy random Fourier features, :mod:`mondrian.laplace_features`).

The extracted text lost its numbers (and carries no page numbers); the settings below are
the authors' experiment scripts (``matejbalog/mondrian-kernel`` on GitHub:
``experiment_1_laplace_kernel_approximation.py``, ``experiment_2_fast_kernel_width_learning.py``,
``experiment_3_mondrian_kernel_vs_forest.py``). The CPU data set (6,554 / 819 rows, 21
attributes) is not obtainable: California housing (8 attributes, standardised) stands in,
at the CPU's sizes in the ``full`` budget.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import kernel_runs as kr
from .core import Item, Verdict, relative

PAPER = ("Balog, Lakshminarayanan, Ghahramani, Roy & Teh (2016), The Mondrian kernel")
CODE = "the authors' code (matejbalog/mondrian-kernel)"
CPU_SUBSTITUTE = ("California housing (20,640 block groups, 8 standardised attributes; "
                  "benchmarks/data) for the CPU data set of Rahimi & Recht (not obtainable)")
#: (train, validation, test) rows of the CPU stand-in per budget; the CPU set has 6,554 / 819.
CPU_SIZES = {"smoke": (300, 100, 100), "quick": (2_000, 500, 500), "full": (6_554, 819, 819)}
LIFETIMES = np.geomspace(0.0125, 1.6, 8)


def _plot(out_dir: Path, name: str, draw) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    draw(ax)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_dir / name, dpi=90)
    plt.close(fig)
    return name


def _cpu(budget: str, seed: int) -> tuple[tuple, tuple, tuple]:
    Xtr, ytr, Xv, yv, Xt, yt = kr.housing(*CPU_SIZES[budget], seed)
    return (Xtr, ytr), (Xv, yv), (Xt, yt)


# ---------------------------------------------------------------- Fig. 5

FIG5 = {"smoke": (10, 1), "quick": (50, 5), "full": (50, 5)}  # (M max, repetitions)


def _fig5_run(budget: str, seed: int, out_dir: Path) -> dict:
    m_max, reps = FIG5[budget]
    X = np.random.default_rng(seed).random((100, 2))
    errs = {s: np.mean([kr.approximation_errors(s, X, 10.0, m_max, seed + r)
                           for r in range(reps)], axis=0) for s in kr.SCHEMES}
    ms = np.arange(1, m_max + 1)

    def draw(ax):
        for s in kr.SCHEMES:
            ok = ~np.isnan(errs[s])
            ax.plot(ms[ok], errs[s][ok], marker=".", label=s)
        ax.set(xlabel="M (non-zero features per point)", ylabel="max |error|",
               title="Laplace kernel, lifetime 10, 100 points of [0, 1]^2")

    return {"m": ms.tolist(), "repetitions": reps,
            "max_error": {s: [None if np.isnan(e) else round(float(e), 4) for e in errs[s]]
                          for s in kr.SCHEMES},
            "figures": [_plot(out_dir, "kernel.fig5.png", draw)]}


def _at(ours: dict, scheme: str, m: int) -> float:
    return float(ours["max_error"][scheme][m - 1])


def _fig5_check(ours: dict) -> Verdict:
    m = ours["m"][-1] if ours["m"][-1] % 2 == 0 else ours["m"][-2]
    mk, rb, ff = (_at(ours, s, m) for s in kr.SCHEMES)
    return Verdict(mk < ff and rb < ff,
                   f"max error at M = {m}: Mondrian {mk:.3f}, binning {rb:.3f}, Fourier {ff:.3f}",
                   None)


FIG5_ITEM = Item(
    key="kernel.fig5", paper=PAPER, where="Sec. 8.1, Fig. 5",
    title="Laplace kernel approximation error vs non-zero features per point",
    paper_numbers={"setting": "100 points uniform in [0, 1]^2, lifetime 10, M = 1..50, 5 "
                              "repetitions (" + CODE + ")",
                   "result": "Mondrian kernel and random binning converge to the Laplace "
                             "kernel faster than random Fourier features per non-zero feature"},
    paper_headline="Mondrian and binning errors below Fourier's at every M (figure)",
    data="100 points uniform in the unit square (the paper's set-up)",
    metric="max absolute error of the kernel estimate over all pairs, mean over repetitions",
    claim=("At M = 50 non-zero features per point the Mondrian kernel's and random binning's "
           "max errors are below the Cauchy Fourier features'."),
    tolerance="strict inequalities at the largest even M",
    run=_fig5_run, check=_fig5_check,
    headline=lambda o: "max error at M={}: MK {:.2f}, RB {:.2f}, FF {:.2f}".format(
        o["m"][-1], *(_at(o, s, o["m"][-1]) for s in kr.SCHEMES)),
)

# ---------------------------------------------------------------- Fig. 6

FIG6_M = {"smoke": [2, 10], "quick": [2, 4, 10, 20, 50], "full": [2, 4, 6, 10, 20, 30, 50]}
FIG6_REPS = {"smoke": 1, "quick": 3, "full": 5}


def _fig6_run(budget: str, seed: int, out_dir: Path) -> dict:
    train, valid, test = _cpu(budget, seed)
    lam, curve = kr.laplace_width(train, valid, LIFETIMES)
    exact = kr.exact_laplace(train, test, lam)
    ms = FIG6_M[budget]
    errs = {s: [float(np.mean([kr.fit_error(s, m, lam, seed + r, train, test)
                               for r in range(FIG6_REPS[budget])])) for m in ms]
            for s in kr.SCHEMES}

    def draw(ax):
        for s in kr.SCHEMES:
            ax.plot(ms, errs[s], marker="o", label=s)
        ax.axhline(exact, color="k", lw=1.5, label="exact Laplace kernel ridge")
        ax.set(xlabel="M (non-zero features per point)", ylabel="relative test error [%]",
               title=f"California housing (CPU stand-in), lifetime {lam:.3g}")

    return {"lifetime": lam, "lifetime_grid": LIFETIMES.tolist(), "exact_validation": curve,
            "exact_test_error": exact, "m": ms, "test_error": errs,
            "n": [len(train[1]), len(test[1])],
            "figures": [_plot(out_dir, "kernel.fig6.png", draw)]}


def _fig6_check(ours: dict) -> Verdict:
    e = ours["test_error"]
    few = ours["m"].index(10) if 10 in ours["m"] else len(ours["m"]) - 1
    mk, rb, ff = (e[s][few] for s in kr.SCHEMES)
    last = e["Mondrian kernel"][-1]
    holds = mk < ff and rb < ff and last <= 1.25 * ours["exact_test_error"]
    return Verdict(holds, f"M = {ours['m'][few]}: Mondrian {mk:.2f}%, binning {rb:.2f}%, "
                          f"Fourier {ff:.2f}%; Mondrian at M = {ours['m'][-1]} {last:.2f}% vs "
                          f"exact {ours['exact_test_error']:.2f}%",
                   None)  # other data than the paper's: no ratio


FIG6_ITEM = Item(
    key="kernel.fig6", paper=PAPER, where="Sec. 8.1, Fig. 6",
    title="Test error vs non-zero features per point (CPU data set)",
    paper_numbers={"exact Laplace kernel ridge, relative test error %": 3.12,
                   "setting": "M = 1..50, 5 repetitions, ridge 1e-4, lifetime 1e-6 on the "
                              "raw CPU inputs (" + CODE + ")",
                   "result": "with few non-zero features per point random binning and the "
                             "Mondrian kernel beat Fourier features, which are better suited "
                             "to the CPU data set at larger M"},
    paper_headline="exact Laplace 3.12%; MK and RB below FF at small M (figure)",
    data="California housing: " + ", ".join(f"{k} {v[0]} train / {v[2]} test"
                                            for k, v in CPU_SIZES.items()),
    substitutes=(CPU_SUBSTITUTE,),
    metric="relative test error 100 ||y_hat - y|| / ||y|| of ridge (penalty 0.01) on each "
           "scheme's features, lifetime chosen by exact Laplace ridge on validation rows",
    claim=("At M = 10 non-zero features per point the Mondrian kernel and random binning have "
           "lower test error than Cauchy Fourier features, and the Mondrian kernel at M = 50 is "
           "within 1.25 x the exact Laplace kernel ridge's error."),
    tolerance="strict inequalities at M = 10; 1.25 x exact at the largest M",
    run=_fig6_run, check=_fig6_check,
    headline=lambda o: (f"M=10: MK {o['test_error']['Mondrian kernel'][o['m'].index(10)]:.1f}%,"
                        f" FF {o['test_error']['Fourier features'][o['m'].index(10)]:.1f}%; "
                        f"exact {o['exact_test_error']:.1f}%" if 10 in o["m"] else "n/a"),
)

# ---------------------------------------------------------------- Fig. 7

FIG7_N = {"smoke": 200, "quick": 1_000, "full": 1_000}  # train = validation = test rows
LAMBDA0, NOISE_VAR = 10.0, 0.01**2


def _laplace_gp(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A draw of a GP with the Laplace kernel (lifetime 10) at 3 n uniform points of the unit
    square plus N(0, 0.01^2) noise (the authors' ``construct_data_synthetic_Laplacian``)."""
    rng = np.random.default_rng(seed)
    X = rng.random((3 * n, 2))
    K = kr.laplace_kernel(X, X, LAMBDA0)
    y = np.linalg.cholesky(K + 1e-10 * np.eye(3 * n)) @ rng.normal(size=3 * n)
    return X, y + np.sqrt(NOISE_VAR) * rng.normal(size=3 * n)


def _fig7_run(budget: str, seed: int, out_dir: Path) -> dict:
    from mondrian import MondrianKernelFeatures
    from mondrian.kernel_sweep import width_sweep

    n = FIG7_N[budget]
    X, y = _laplace_gp(n, seed)
    tr, va, te = slice(0, n), slice(n, 2 * n), slice(2 * n, 3 * n)
    f = MondrianKernelFeatures(n_mondrians=50, lifetime=2 * LAMBDA0, random_state=seed).fit(X[tr])
    cap = int(f.n_features_out_)
    sweep = width_sweep(f, y[tr, None], X[va], y[va, None], NOISE_VAR, cap, 40, "cg")
    lams = sweep["lifetime"]
    val = 100 * np.sqrt(sweep["validation_mse"]) / np.sqrt(np.mean(y[va] ** 2))
    best = float(lams[int(np.argmin(val))])
    picks = np.unique(np.r_[np.arange(0, len(lams), 4), np.argmin(val)])

    def test_error(lam: float) -> float:
        w, c = kr.ridge(f.transform(X[tr], lifetime=lam), y[tr], NOISE_VAR)
        return kr.relative_error(c + f.transform(X[te], lifetime=lam) @ w, y[te])

    test = {float(lams[i]): test_error(float(lams[i])) for i in picks if lams[i] > 0}

    def draw(ax):
        ax.plot(lams, val, drawstyle="steps-post", lw=2, label="validation")
        ax.plot(list(test), list(test.values()), "o-", label="test (refit)")
        ax.axvline(LAMBDA0, ls=":", color="k", label="ground truth lifetime")
        ax.axvline(best, ls="--", color="C0", label="argmin validation")
        ax.set(xscale="log", xlabel="lifetime", ylabel="relative error [%]",
               title=f"M = 50, synthetic Laplace GP (D = 2, N = {n})")

    return {"lifetime": lams.tolist(), "validation_error": val.tolist(), "test_error": test,
            "lifetime_hat": best, "test_error_at_hat": test_error(best),
            "figures": [_plot(out_dir, "kernel.fig7.png", draw)]}


FIG7_ITEM = Item(
    key="kernel.fig7", paper=PAPER, where="Sec. 8.2, Fig. 7",
    title="Recovering a ground-truth lifetime by validation error along one sweep",
    paper_numbers={"ground truth lifetime": LAMBDA0, "terminal lifetime": 2 * LAMBDA0,
                   "setting": "D = 2, N = N_val = N_test = 1000, noise variance 1e-4, M = 50 ("
                              + CODE + ")",
                   "result": "the lifetime minimising validation error is within an order of "
                             "magnitude of the ground truth"},
    paper_headline="lifetime recovered within an order of magnitude of 10",
    data="a draw of a Laplace-kernel GP (lifetime 10) at uniform points of [0, 1]^2 plus noise "
         "(the paper's set-up)",
    metric="lifetime minimising the validation error of the sweep (warm-started CG ridge)",
    claim="The selected lifetime lies within [1, 100], an order of magnitude of the true 10.",
    tolerance="a factor of 10 either way (the paper's wording)",
    run=_fig7_run,
    check=lambda o: Verdict(LAMBDA0 / 10 <= o["lifetime_hat"] <= LAMBDA0 * 10,
                            f"lifetime_hat {o['lifetime_hat']:.2f} (truth 10); test error there "
                            f"{o['test_error_at_hat']:.1f}%", relative(o["lifetime_hat"], LAMBDA0)),
    headline=lambda o: f"lifetime_hat {o['lifetime_hat']:.2f} (truth 10)",
)

# ---------------------------------------------------------------- Fig. 8

#: (M, search iterations, Mondrian sweep cells) per budget; the authors: M = 350, 100
#: iterations for Fourier features and 50 for random binning.
FIG8 = {"smoke": (10, 4, 300), "quick": (50, 20, 4_000), "full": (350, 40, 40_000)}
BASELINES = {"Fourier features + SGD": ("Fourier features", kr.sgd_ridge),
             "random binning + SGD": ("random binning", kr.sgd_ridge),
             "Fourier features + exact ridge": ("Fourier features", kr.ridge)}
PAPER_BASELINES = ("Fourier features + SGD", "random binning + SGD")


def _fig8_run(budget: str, seed: int, out_dir: Path) -> dict:
    m, iters, cells = FIG8[budget]
    train, valid, _ = _cpu(budget, seed)
    sweep = kr.timed_sweep(m, train, valid, cells, seed)
    searches = {name: kr.timed_search(scheme, m, train, valid, iters, solver, seed)
                for name, (scheme, solver) in BASELINES.items()}
    target = 1.05 * min(sweep["error"])
    speedup = {}
    for name, s in searches.items():
        best = np.minimum.accumulate(s["error"])
        hit = np.flatnonzero(best <= target)
        t = s["seconds"][hit[0]] if hit.size else s["seconds"][-1]
        speedup[name] = {"seconds_to_target": t, "reached": bool(hit.size),
                         "speedup": t / sweep["seconds"]}

    def draw(ax):
        ax.scatter([sweep["seconds"]] * len(sweep["error"]), sweep["error"], marker=".",
                   label="Mondrian kernel (one sweep)")
        for name, s in searches.items():
            ax.scatter(s["seconds"], s["error"], marker="^" if "Fourier" in name else "o",
                       label=name, s=14)
        ax.axhline(target, ls=":", color="k", label="1.05 x sweep's best")
        ax.set(xscale="log", xlabel="computational time [s]",
               ylabel="validation relative error [%]", ylim=(0, 3 * target),
               title=f"California housing (CPU stand-in), M = {m}")

    return {"m": m, "iterations": iters, "sweep": sweep, "searches": searches,
            "target_error": target, "speedup": speedup,
            "figures": [_plot(out_dir, "kernel.fig8.png", draw)]}


def _fig8_check(ours: dict) -> Verdict:
    sp = ours["speedup"]
    low = min(sp[n]["speedup"] for n in PAPER_BASELINES)
    detail = "; ".join(f"{n}: {v['speedup']:.1f}x"
                       + ("" if v["reached"] else " (never reached: lower bound)")
                       for n, v in sp.items())
    return Verdict(low >= 10.0, f"time to 1.05 x the sweep's best validation error, over the "
                                f"sweep's {ours['sweep']['seconds']:.1f} s: {detail}",
                   relative(low, 10.0))


FIG8_ITEM = Item(
    key="kernel.fig8", paper=PAPER, where="Sec. 8.2, Fig. 8",
    title="Validation error vs computation time: one Mondrian sweep vs width searches",
    paper_numbers={"claim": "suitable lifetimes found at least an order of magnitude faster "
                            "than random Fourier features or random binning",
                   "setting": "M = 350 non-zero features; baselines refit per lifetime by SGD "
                              "(10 epochs), lifetime search from 1 by doubling / halving then "
                              "bisection, 100 (Fourier) and 50 (binning) steps; the CPU data "
                              "raw, its lifetimes near 1e-6 (" + CODE + ")"},
    paper_headline=">= 10x faster to a suitable width (figure)",
    data="California housing (validation rows)", substitutes=(CPU_SUBSTITUTE,),
    metric="speed-up: a baseline's time to first reach 1.05 x the sweep's best validation "
           "error over the sweep's total time (a lower bound when it never does)",
    claim=("The sweep reaches a suitable lifetime at least 10 x faster than both paper "
           "baselines (Cauchy Fourier features and random binning, each refit by SGD)."),
    tolerance="speed-up >= 10 against each SGD baseline; the exact-ridge Fourier search is "
              "reported, not checked",
    run=_fig8_run, check=_fig8_check,
    headline=lambda o: "speed-up " + ", ".join(f"{n.split(' +')[0].split()[0]}"
                                               f"{'-SGD' if 'SGD' in n else '-exact'} "
                                               f"{v['speedup']:.1f}x"
                                               for n, v in o["speedup"].items()),
)

# ---------------------------------------------------------------- Fig. 9


def _fig9_run(budget: str, seed: int, out_dir: Path) -> dict:
    from mondrian import MondrianKernelFeatures

    train, valid, test = _cpu(budget, seed)
    lam_star, _ = kr.laplace_width(train, valid, LIFETIMES)
    lams = lam_star * np.geomspace(1 / 16, 4, 9)
    m = 50
    f = MondrianKernelFeatures(n_mondrians=m, lifetime=float(lams[-1]),
                               random_state=seed).fit(train[0])
    rows = []
    for lam in lams:
        Z, Zt = f.transform(train[0], lifetime=lam), f.transform(test[0], lifetime=lam)
        w, c = kr.ridge(Z, train[1])
        kernel = kr.relative_error(c + Zt @ w, test[1])
        # the forest: every tree's cells fitted alone (shrunk means, the same penalty per
        # tree), the trees' predictions averaged; features are 1 / sqrt(M) each
        count = np.asarray(Z.T @ np.ones(Z.shape[0])).ravel() * np.sqrt(m)
        sums = np.asarray(Z.T @ (train[1] - c)).ravel() * np.sqrt(m)
        leaf = sums / (count + kr.DELTA)
        forest = kr.relative_error(c + (Zt @ leaf) / np.sqrt(m), test[1])
        rows.append({"lifetime": float(lam), "kernel": kernel, "forest": forest,
                     "features": int(Z.shape[1])})

    def draw(ax):
        ax.plot(lams, [r["forest"] for r in rows], "o-", label='"Mondrian forest" (test)')
        ax.plot(lams, [r["kernel"] for r in rows], "v-", label="Mondrian kernel (test)")
        ax.set(xscale="log", xlabel="lifetime", ylabel="relative test error [%]",
               title="Same 50 Mondrian samples, California housing")

    return {"rows": rows, "figures": [_plot(out_dir, "kernel.fig9.png", draw)]}


def _fig9_best(ours: dict, key: str) -> tuple[float, float]:
    r = min(ours["rows"], key=lambda r: r[key])
    return r[key], r["lifetime"]


def _fig9_check(ours: dict) -> Verdict:
    (k, lk), (f, lf) = _fig9_best(ours, "kernel"), _fig9_best(ours, "forest")
    return Verdict(k < f and lk <= lf, f"best test error: kernel {k:.2f}% at lifetime {lk:.3g}, "
                                       f"forest {f:.2f}% at {lf:.3g}", None)


FIG9_ITEM = Item(
    key="kernel.fig9", paper=PAPER, where="Sec. 8.3, Fig. 9",
    title="Mondrian kernel vs Mondrian forest on the same Mondrian samples",
    paper_numbers={"setting": "M = 50, lifetimes up to 1e-5 on the raw CPU inputs, ridge 1e-4 "
                              "(" + CODE + ")",
                   "result": "the kernel reaches a lower test error, at lower lifetimes (a "
                             "more compact solution)"},
    paper_headline="kernel's test error lower, at lower lifetimes (figure)",
    data="California housing", substitutes=(CPU_SUBSTITUTE,),
    metric="relative test error at 9 lifetimes (1/16 to 4 x the exact-kernel choice) of the "
           "joint ridge fit (kernel) and the per-tree shrunk cell means averaged (forest "
           "without hierarchical smoothing)",
    claim=("The kernel's lowest test error is below the forest's, at a lifetime no larger "
           "than the forest's best."),
    tolerance="strict on the error; <= on the lifetime",
    run=_fig9_run, check=_fig9_check,
    headline=lambda o: "best kernel {:.1f}% @ {:.3g}, forest {:.1f}% @ {:.3g}".format(
        *_fig9_best(o, "kernel"), *_fig9_best(o, "forest")),
)

ITEMS = [FIG5_ITEM, FIG6_ITEM, FIG7_ITEM, FIG8_ITEM, FIG9_ITEM]

#: Causes of the claims that do not hold (measured at ``--budget quick``).
CAUSES: dict[str, str] = {
    "kernel.fig6": (
        "Data, not a fault found in the Mondrian features. At the full budget (California "
        "housing, 6,554 training rows) Cauchy Fourier features edge out both at M = 10 "
        "(Fourier 37.4%, Mondrian 38.6%, binning 38.5%) and every scheme stays well above "
        "the exact Laplace ridge at M = 50 (Mondrian 31.0%, binning 29.5%, exact 21.4%: "
        "1.45x); at the quick budget (2,000 rows) the first half held (Mondrian 45.0%, "
        "binning 43.3%, Fourier 45.9%). At the smooth width the exact ridge picks here "
        "(lifetime 0.05; the paper's CPU targets are not obtainable) most kernel values are "
        "near 1, and 10-50 random features leave a visible gap for every scheme."),
    "kernel.fig8": (
        "Protocol and data, not a fault found in the sweep. On standardised California "
        "housing (2,000 rows, M = 50) one sweep takes 3.1 s to a best validation error of "
        "27.8%; Cauchy Fourier features refit by exact ridge pass 1.05 x that after 0.04 s "
        "(they reach 26.0%: Fourier features suit this data, as the paper says of CPU), and "
        "refit by 10 SGD epochs (the authors' baseline) they plateau at 35.4% (random "
        "binning 36.7%, 5.8 s for 21 widths), so they never get there. The paper's order "
        "of magnitude rests on SGD refits at M = 350 on the raw CPU inputs, whose lifetime "
        "(about 1e-6) lies 20 halvings from the search's start at 1; on standardised inputs "
        "the best width is 3-4 halvings away."),
}
