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

#: Per budget: seeds, the data sizes (a key of :data:`CPU_SIZES`) and, per M, (search
#: iterations, Mondrian sweep cells). M = 350 is the paper's (checked); M = 50 the earlier
#: quick runs' (reported). The full budget runs on 2,000 training rows, not the CPU's 6,554:
#: there one M = 350 sweep took 352 s and a random-binning search of 13 widths did not end
#: in 5 minutes (wall seconds, the shared 2-core machine at load 8): 5 seeds do not fit.
#: The authors ran 100 search iterations for Fourier features and 50 for random binning;
#: the searches here settle (bisection steps below 1/100 of an octave) within 20.
FIG8 = {"smoke": (1, "smoke", {10: (4, 300)}), "quick": (2, "quick", {50: (20, 4_000)}),
        "full": (5, "quick", {350: (20, 40_000), 50: (20, 4_000)})}
FIG8_M = 350
BASELINES = {"Fourier features + SGD": ("Fourier features", kr.sgd_ridge),
             "random binning + SGD": ("random binning", kr.sgd_ridge),
             "Fourier features + exact ridge": ("Fourier features", kr.ridge)}
PAPER_BASELINES = ("Fourier features + SGD", "random binning + SGD")
#: A suitable width: validation error within this factor of the sweep's best.
SUITABLE = 1.05


def _first_within(seconds: list[float], errors: list[float], target: float) -> float | None:
    """Seconds until a search first evaluates a width with error <= ``target`` (None: never)."""
    hit = np.flatnonzero(np.asarray(errors) <= target)
    return float(seconds[hit[0]]) if hit.size else None


def _fig8_seed(m: int, iters: int, cells: int, sizes: str, seed: int) -> dict:
    train, valid, _ = _cpu(sizes, seed)
    sweep = kr.timed_sweep(m, train, valid, cells, seed)
    target = SUITABLE * min(sweep["error"])
    searches = {}
    for name, (scheme, solver) in BASELINES.items():
        s = kr.timed_search(scheme, m, train, valid, iters, solver, seed)
        t = _first_within(s["seconds"], s["error"], target)
        # its own suitable width (within 1.05 x its own best): the search's speed, apart
        # from the error level its solver reaches
        own = _first_within(s["seconds"], s["error"], SUITABLE * min(s["error"]))
        searches[name] = {**s, "best_error": min(s["error"]), "seconds_to_target": t,
                          "speedup": None if t is None else t / sweep["seconds"],
                          "seconds_to_own_suitable": own}
    return {"seed": seed, "sweep": sweep, "target_error": target, "searches": searches}


def _fig8_run(budget: str, seed: int, out_dir: Path) -> dict:
    n_seeds, sizes, per_m = FIG8[budget]
    runs = {str(m): [_fig8_seed(m, iters, cells, sizes, s)
                     for s in range(seed, seed + n_seeds)]
            for m, (iters, cells) in per_m.items()}
    m_show = str(FIG8_M) if str(FIG8_M) in runs else next(iter(runs))
    first = runs[m_show][0]

    def draw(ax):
        sweep = first["sweep"]
        ax.scatter([sweep["seconds"]] * len(sweep["error"]), sweep["error"], marker=".",
                   label="Mondrian kernel (one sweep)")
        for name, s in first["searches"].items():
            ax.scatter(s["seconds"], s["error"], marker="^" if "Fourier" in name else "o",
                       label=name, s=14)
        ax.axhline(first["target_error"], ls=":", color="k", label="1.05 x sweep's best")
        ax.set(xscale="log", xlabel="computational time [CPU s]",
               ylabel="validation relative error [%]", ylim=(0, 3 * first["target_error"]),
               title=f"California housing (CPU stand-in), M = {m_show}, seed {first['seed']}")

    return {"checked_m": m_show, "seeds": n_seeds, "clock": kr.CLOCK,
            "rows": dict(zip(("train", "validation"), CPU_SIZES[sizes][:2], strict=False)),
            "iterations": {m: it for m, (it, _) in per_m.items()}, "runs": runs,
            "figures": [_plot(out_dir, "kernel.fig8.png", draw)]}


def _fig8_scores(runs: list[dict], name: str) -> dict:
    """One baseline over the seeds: how many reach the target, and the median and range of
    the speed-up over the seeds that do (a seed that never reaches it gets no speed-up)."""
    ups = [r["searches"][name]["speedup"] for r in runs]
    got = sorted(u for u in ups if u is not None)
    return {"reached": len(got), "seeds": len(ups),
            "median": float(np.median(got)) if got else None,
            "range": (got[0], got[-1]) if got else None,
            "best_error": float(np.median([r["searches"][name]["best_error"] for r in runs]))}


def _fig8_text(runs: list[dict], name: str) -> str:
    sc = _fig8_scores(runs, name)
    if not sc["reached"]:
        return (f"{name}: never reached in {sc['seeds']} seed(s) (median best error "
                f"{sc['best_error']:.1f}%)")
    lo, hi = sc["range"]
    return (f"{name}: reached in {sc['reached']} of {sc['seeds']} seeds, speed-up median "
            f"{sc['median']:.1f}x ({lo:.1f}-{hi:.1f}x)")


def _fig8_check(ours: dict) -> Verdict:
    runs = ours["runs"][ours["checked_m"]]
    scores = [_fig8_scores(runs, n) for n in PAPER_BASELINES]
    # a speed-up is a time to the target over the sweep's; a baseline that reaches it in
    # fewer than half the seeds has no median time to it, so the claim is not shown
    holds = all(2 * s["reached"] > s["seeds"] and s["median"] >= 10.0 for s in scores)
    sweep = [r["sweep"]["seconds"] for r in runs]
    target = np.median([r["target_error"] for r in runs])
    detail = "; ".join(_fig8_text(runs, n) for n in BASELINES)
    medians = [s["median"] for s in scores if s["median"] is not None]
    return Verdict(holds, f"M = {ours['checked_m']}, sweep median {np.median(sweep):.1f} CPU s "
                          f"({min(sweep):.1f}-{max(sweep):.1f}), target median "
                          f"{target:.1f}% (1.05 x the sweep's best validation error): {detail}",
                   relative(min(medians), 10.0) if len(medians) == len(scores) else None)


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
    data="California housing (validation rows): " + ", ".join(
        f"{k} {CPU_SIZES[v[1]][0]} train / {CPU_SIZES[v[1]][1]} validation, {v[0]} seeds, M = "
        + " and ".join(str(m) for m in v[2]) for k, v in FIG8.items())
         + "; full: the paper's M = 350 over 5 seeds, but 2,000 of the CPU's 6,554 training "
           "rows and 20 search steps (the paper's 100 / 50) to fit the shared machine",
    substitutes=(CPU_SUBSTITUTE,),
    metric="speed-up: a baseline's CPU seconds to first evaluate a width with validation error "
           "<= 1.05 x the sweep's best, over the sweep's total CPU seconds (the authors' "
           "time.clock()); median and range over "
           "the seeds in which it gets there (a seed in which it never does is counted as "
           "never reached, with no speed-up)",
    claim=("The sweep reaches a suitable lifetime at least 10 x faster than both paper "
           "baselines (Cauchy Fourier features and random binning, each refit by SGD)."),
    tolerance="at M = 350, each SGD baseline reaches 1.05 x the sweep's best in more than "
              "half the seeds, with median speed-up >= 10 over them; the exact-ridge Fourier "
              "search and M = 50 are reported, not checked",
    run=_fig8_run, check=_fig8_check,
    headline=lambda o: f"M={o['checked_m']}: " + ", ".join(
        f"{n.split(' +')[0].split()[0]}{'-SGD' if 'SGD' in n else '-exact'} "
        + ("never" if (sc := _fig8_scores(o["runs"][o["checked_m"]], n))["median"] is None
           else f"{sc['median']:.1f}x ({sc['reached']}/{sc['seeds']})") for n in BASELINES),
)

# ---------------------------------------------------------------- Fig. 9


#: Fig. 9's lifetimes, multiples of the exact kernel's choice lambda*: out to 64 lambda*, past
#: where both curves turn (at 4 lambda* the forest's error was still falling).
FIG9_GRID = np.geomspace(1 / 16, 64, 21)


def _turned(errors: list[float]) -> bool:
    """Whether a curve's minimum is inside the grid (it rises again after it)."""
    return 0 < int(np.argmin(errors)) < len(errors) - 1


def _fig9_run(budget: str, seed: int, out_dir: Path) -> dict:
    from mondrian import MondrianKernelFeatures

    train, valid, test = _cpu(budget, seed)
    lam_star, _ = kr.laplace_width(train, valid, LIFETIMES)
    lams = lam_star * FIG9_GRID
    f = MondrianKernelFeatures(n_mondrians=50, lifetime=float(lams[-1]),
                               random_state=seed).fit(train[0])
    rows = []
    for lam in lams:
        fit = kr.kernel_and_forest(f, float(lam), train, test)
        rows.append({"lifetime": float(lam), "kernel": fit["kernel"], "forest": fit["forest"],
                     "features": int(fit["kernel_weights"].size)})

    def draw(ax):
        ax.plot(lams, [r["forest"] for r in rows], "o-", label='"Mondrian forest" (test)')
        ax.plot(lams, [r["kernel"] for r in rows], "v-", label="Mondrian kernel (test)")
        ax.axvline(lam_star, ls=":", color="k", label="exact kernel's lifetime")
        ax.set(xscale="log", xlabel="lifetime", ylabel="relative test error [%]",
               title="Same 50 Mondrian samples, California housing")

    return {"rows": rows, "lifetime_star": lam_star,
            "turned": {k: _turned([r[k] for r in rows]) for k in ("kernel", "forest")},
            "figures": [_plot(out_dir, "kernel.fig9.png", draw)]}


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
    metric="relative test error at 21 lifetimes (1/16 to 64 x the exact-kernel choice, "
           "factors of sqrt 2) of the joint ridge fit (kernel) and the per-tree shrunk cell "
           "means averaged (forest without hierarchical smoothing)",
    claim=("The kernel's lowest test error is below the forest's, at a lifetime no larger "
           "than the forest's best."),
    tolerance="strict on the error; <= on the lifetime",
    run=_fig9_run, check=_fig9_check,
    headline=lambda o: "best kernel {:.1f}% @ {:.3g}, forest {:.1f}% @ {:.3g}".format(
        *_fig9_best(o, "kernel"), *_fig9_best(o, "forest")),
)

# ---------------------------------------------------------------- Fig. 10


def _share_near_zero(w: np.ndarray, band: float) -> float:
    return float(np.mean(np.abs(w) <= band))


def _fig10_run(budget: str, seed: int, out_dir: Path) -> dict:
    from mondrian import MondrianKernelFeatures

    train, valid, test = _cpu(budget, seed)
    lam, _ = kr.laplace_width(train, valid, LIFETIMES)
    m = 50
    f = MondrianKernelFeatures(n_mondrians=m, lifetime=lam, random_state=seed).fit(train[0])
    fit = kr.kernel_and_forest(f, lam, train, test)
    kernel, cells = fit["kernel_weights"], fit["forest_cells"]
    targets = train[1] - fit["centre"]
    band = 0.1 * float(np.std(targets))
    # the forest as a linear model on the kernel's own features (each 1 / sqrt(M)) predicts
    # with weights cell value / sqrt(M): the same parametrisation as the kernel's weights
    same_map = cells / np.sqrt(m)
    summary = {name: {"median_abs": float(np.median(np.abs(w))),
                      "share_within_band": _share_near_zero(w, band),
                      "std": float(np.std(w)), "min": float(w.min()), "max": float(w.max())}
               for name, w in (("kernel", kernel), ("forest", cells),
                               ("forest_same_map", same_map), ("targets", targets))}

    def draw(ax):
        lo, hi = np.quantile(np.r_[cells, targets], [0.001, 0.999])
        bins = np.linspace(lo, hi, 50)
        ax.hist(cells, bins=bins, density=True, alpha=0.5, label='"M. forest" weights')
        ax.hist(kernel, bins=bins, density=True, alpha=0.5, label="M. kernel weights")
        ax.hist(targets, bins=bins, density=True, alpha=0.4, label="training targets (centred)")
        ax.set(xlabel="value", ylabel="frequency",
               title=f"Weights at lifetime {lam:.3g} (M = {m}), California housing")

    return {"lifetime": lam, "m": m, "features": int(kernel.size), "band": band,
            "test_error": {"kernel": fit["kernel"], "forest": fit["forest"]},
            "weights": summary, "figures": [_plot(out_dir, "kernel.fig10.png", draw)]}


def _fig10_check(ours: dict) -> Verdict:
    w = ours["weights"]
    k, f, same = w["kernel"], w["forest"], w["forest_same_map"]
    holds = k["median_abs"] < f["median_abs"] and k["share_within_band"] > f["share_within_band"]
    return Verdict(holds, f"at lifetime {ours['lifetime']:.3g}: median |w| kernel "
                          f"{k['median_abs']:.3f}, forest {f['median_abs']:.3f}; share within "
                          f"+-{ours['band']:.3f} of 0: kernel {k['share_within_band']:.2f}, "
                          f"forest {f['share_within_band']:.2f}; not checked: the forest's "
                          f"weights on the kernel's features (cell value / sqrt(M)) median |w| "
                          f"{same['median_abs']:.3f}, share {same['share_within_band']:.2f}",
                   None)


FIG10_ITEM = Item(
    key="kernel.fig10", paper=PAPER, where="Sec. 8.3, Fig. 10",
    title="Weights learnt by the Mondrian kernel and the Mondrian forest on the same samples",
    paper_numbers={"setting": "M = 50, the lifetime 2e-6 of Fig. 9 (terminal 1e-5) on the raw "
                              "CPU inputs, ridge 1e-4; the forest's weights are its trees' "
                              "cell values, the kernel's its ridge weights (" + CODE + ")",
                   "result": "the distribution of the kernel's weights is more peaked around "
                             "0: joint fitting reaches extreme predictions by adding several "
                             "smaller weights"},
    paper_headline="kernel's weights more peaked around 0 than the forest's (figure)",
    data="California housing: " + ", ".join(f"{k} {v[0]} train / {v[2]} test"
                                            for k, v in CPU_SIZES.items()),
    substitutes=(CPU_SUBSTITUTE,),
    metric="median |w| and the share of weights within 0.1 sd of the centred training targets "
           "around 0, at the exact kernel's validation choice of lifetime (Fig. 9's lambda*); "
           "weights as the paper's figure shows them: the kernel's ridge weights on its "
           "1 / sqrt(M) features, the forest's per-tree cell values",
    claim=("At Fig. 9's lifetime the Mondrian kernel's weights are more peaked around 0 than "
           "the forest's: a smaller median absolute weight and a larger share of weights "
           "near 0."),
    tolerance="strict inequalities (the figure gives no numbers)",
    run=_fig10_run, check=_fig10_check,
    headline=lambda o: "median |w|: kernel {:.3f}, forest {:.3f}".format(
        o["weights"]["kernel"]["median_abs"], o["weights"]["forest"]["median_abs"]),
)

ITEMS = [FIG5_ITEM, FIG6_ITEM, FIG7_ITEM, FIG8_ITEM, FIG9_ITEM, FIG10_ITEM]

#: Causes of the claims that do not hold, and notes on some that do (the committed runs).
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
        "Not shown: neither SGD baseline ever reaches a suitable width by the paper's "
        "measure, so no time to it exists. At M = 350 (5 seeds, 2,000 training rows of "
        "standardised California housing) the sweep takes 17.1-18.8 CPU s to a best "
        "validation error of 24.6-28.1% (targets 25.8-29.5%; seed 0's best is at the "
        "sweep's last width); Cauchy Fourier features and random binning refit by 10 SGD "
        "epochs (the authors' solver) plateau at 36.0-38.6% and 36.0-39.4% at every width "
        "tried. The plateau is the solver's, not the width's: Fourier features refit by "
        "exact ridge reach 23.6-29.5% and the target in 1.4-17.7 CPU s (0.1-1.0x the "
        "sweep's time). The SGD searches settle on their own best width within 0.16-0.24 s "
        "(Fourier) and 2.7-3.5 s (binning), before the sweep ends: on standardised inputs "
        "the best lifetime is 2-4.5 halvings from the search's start at 1, where on the "
        "paper's raw CPU inputs it is near 1e-6, about 20 halvings away (the authors' "
        "code), and the sweep solves the ridge exactly at 40 widths (conjugate gradients "
        "to 1e-10, mondrian.kernel_sweep) where the authors took one SGD epoch per cut. "
        "M = 50 (reported): sweep 1.5-1.7 CPU s, SGD baselines again never there "
        "(35.3-39.0%), exact-ridge Fourier features in 0.02 s."),
    "kernel.fig9": (
        "The grid runs from 1/16 to 64 x lambda* (lambda* = 0.05, the exact Laplace ridge's "
        "validation choice) in steps of sqrt 2, past where both curves turn (the run's "
        "'turned' flags): the kernel is lowest at 2.8 lambda* (25.7%), the forest at 22.6 "
        "lambda* (30.7%), and both rise again by 64 lambda* (37.8%, 40.1%). The earlier grid "
        "stopped at 4 lambda*, where the forest's error was still falling (39.5%); the check "
        "is unchanged."),
    "kernel.fig10": (
        "The solver, not a fault found in the features. The item fits the kernel's weights by "
        "exact ridge (penalty 0.01, as Figs. 6 and 9); at the exact kernel's lifetime 0.05 "
        "(514 weights, full budget) a larger share lies within 0.116 (0.1 sd of the "
        "targets) of 0 than of the forest's cell values (0.29 against 0.27: the histogram's "
        "peak at 0 is the taller), but the joint fit also spreads weights out to -13.5 and "
        "7.2 (sd 1.67 against the forest's 0.94), so their median |w| is 0.462 against the "
        "forest's 0.457. The authors fitted the kernel's weights by SGD from zero weights "
        "(one epoch per cut, a cut's weight copied to both children), which keeps most of "
        "them near 0: on the item's data, seed and lifetime SGD from zero gives median |w| "
        "0.000 after 1 epoch and 0.002 after 10 (share near 0 0.96 and 0.90), at test "
        "errors 43.9% and 35.6% against exact ridge's 30.0% (kernel.fig10_solver.json; "
        "python -m benchmarks.papers.kernel_fig10_solver). The paper's figure sets a "
        "forest weight (a tree's whole prediction in its cell) beside a kernel weight (one "
        "of M terms, each scaled by 1 / sqrt(M)); on the kernel's own features the forest's "
        "weights (cell value / sqrt(M)) have median |w| 0.065, far below the kernel's."),
}
