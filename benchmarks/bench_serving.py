"""In-memory Dask serving: predict and score with a model fit on the cluster, vs xgboost.dask.

Issue 44's benchmark of the Dask estimators as a user holds them after ``fit``. On a
``LocalCluster`` of ``--workers`` single-threaded worker processes, Friedman #1 rows
(10 features, :func:`pipelines.make_data.friedman_partition`) as a dask DataFrame of
``--partitions`` partitions:

``fit``
    :class:`~ebf.dask.DaskEmpiricalBayesianForestRegressor` (``branch="mondrian",
    n_estimators=10, trunk_max_leaves=8``) on ``--rows`` rows, and ``xgboost.dask``'s
    ``DaskXGBRegressor`` (100 rounds, ``tree_method="hist"``) on the same rows;
``predict``
    ``predict_frame(X).compute()`` (mean, std, 5/50/95% quantiles and branch) of
    ``--predict-rows`` other rows, and xgboost's ``predict`` (means only) of the same rows,
    alternating in every repeat; min/median/max of ``--repeats``;
``score``
    ``score(X, y)`` (R², one pass) of the same rows;
``quantiles``, ``crps``
    ``predict(X, quantiles=[0.05, 0.5, 0.95]).compute()`` and ``neg_crps_scorer(est, X,
    y)`` (issue 47's distribution API), and quantile-forest's ``predict(X, quantiles=...)``
    of the same rows computed into this process, its forest (100 trees) fit here on
    ``--qrf-rows`` training rows;
``graph``
    the size of the largest graph sent to the scheduler by each call (Dask's large-graph
    warning, captured with its threshold at one byte).

Writes ``benchmarks/results/<--issue>/serving.md`` and ``serving.json``.

Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_serving.py --quick
    PYTHONPATH=. python benchmarks/bench_serving.py
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks.common import machine_info, versions, write_json

RESULTS = Path(__file__).resolve().parent / "results" / "issue44"
#: Quantile levels of the distribution calls.
LEVELS = [0.05, 0.5, 0.95]
_SIZE = re.compile(r"Sending large graph of size ([0-9.]+ [A-Za-z]+)")
_UNITS = {"B": 1, "kiB": 2**10, "MiB": 2**20, "GiB": 2**30, "kB": 1e3, "MB": 1e6, "GB": 1e9}


def _bytes(text: str) -> float:
    value, unit = text.split()
    return float(value) * _UNITS[unit]


def graph_bytes(fn: Callable[[], object]) -> tuple[object, float]:
    """``fn()`` and the largest graph (bytes) it sent to the scheduler."""
    import dask

    with dask.config.set({"distributed.admin.large-graph-warning-threshold": "1B"}), \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    sizes = [_bytes(m.group(1)) for w in caught if (m := _SIZE.search(str(w.message)))]
    return out, max(sizes, default=0.0)


def _frame(rows: int, seed: int, partitions: int):
    """Friedman rows drawn on the workers, ``partitions`` partitions (nothing in the graph)."""
    import dask.dataframe as dd

    from pipelines.make_data import friedman_partition

    sizes = [rows // partitions + (i < rows % partitions) for i in range(partitions)]
    ddf = dd.from_map(friedman_partition, range(partitions), sizes, random_state=seed)
    return ddf, [c for c in ddf.columns if c != "y"]


def _quantile_forest(train, features: list[str], rows: int, client) -> object | None:
    """quantile-forest's ``RandomForestQuantileRegressor`` (100 trees, leaves of at least 5
    rows) fit in this process on the first ``rows`` training rows, or None if it is not
    installed (the bench extra)."""
    try:
        from quantile_forest import RandomForestQuantileRegressor
    except ImportError:
        print("quantile-forest is not installed (the bench extra): peer skipped", flush=True)
        return None
    head = client.compute(train.head(rows, npartitions=-1, compute=False)).result()
    return RandomForestQuantileRegressor(n_estimators=100, min_samples_leaf=5, n_jobs=-1,
                                         random_state=0).fit(head[features].to_numpy(),
                                                             head["y"].to_numpy())


def run(args: argparse.Namespace) -> dict:
    from distributed import Client, LocalCluster

    from basics.scorers import neg_crps_scorer
    from ebf.dask import DaskEmpiricalBayesianForestRegressor

    out: dict = {"config": vars(args), "machine": machine_info(),
                 "versions": versions(["dask", "distributed", "numba", "xgboost"])}
    with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        train, features = _frame(args.rows, 0, args.partitions)
        test, _ = _frame(args.predict_rows, 1, max(1, args.partitions * args.predict_rows
                                                 // args.rows))
        train = client.persist(train)
        test = client.persist(test)
        X, y, Xt, yt = train[features], train["y"], test[features], test["y"]
        est = DaskEmpiricalBayesianForestRegressor(branch="mondrian", n_estimators=10,
                                                   trunk_max_leaves=8, random_state=0)
        t0 = time.perf_counter()
        _, fit_graph = graph_bytes(lambda: est.fit(X, y))
        out["ebf_fit_s"] = time.perf_counter() - t0
        out["ebf_fit_graph_bytes"] = fit_graph
        print(f"ebf fit {out['ebf_fit_s']:.1f}s", flush=True)
        peer = None
        try:
            from xgboost import dask as dxgb

            peer = dxgb.DaskXGBRegressor(n_estimators=100, tree_method="hist",
                                         random_state=0)
            peer.client = client
            t0 = time.perf_counter()
            peer.fit(X, y)
            out["xgb_fit_s"] = time.perf_counter() - t0
        except ImportError:
            print("xgboost is not installed (the bench extra): peer skipped", flush=True)
        fns: dict[str, Callable[[], object]] = {
            "ebf_predict": lambda: est.predict_frame(Xt).compute(),
            "ebf_score": lambda: est.score(Xt, yt),
            # issue 47: the distribution API (quantiles as a dask array; the mean CRPS)
            "ebf_quantiles": lambda: est.predict(Xt, quantiles=LEVELS).compute(),
            "ebf_crps": lambda: neg_crps_scorer(est, Xt, yt),
        }
        if peer is not None:
            fns["xgb_predict"] = lambda: peer.predict(Xt).compute()
        qrf = _quantile_forest(train, features, args.qrf_rows, client)
        if qrf is not None:  # in this process, on the computed rows (it has no Dask API)
            fns["qrf_quantiles"] = lambda: qrf.predict(Xt.compute().to_numpy(),
                                                       quantiles=LEVELS)
        times: dict[str, list[float]] = {k: [] for k in fns}
        graphs: dict[str, float] = {k: 0.0 for k in fns}
        for _ in range(args.repeats):
            for name, fn in fns.items():
                t0 = time.perf_counter()
                _, size = graph_bytes(fn)
                times[name].append(time.perf_counter() - t0)
                graphs[name] = max(graphs[name], size)
        out["times"], out["graph_bytes"] = times, graphs
    return out


def report(out: dict) -> str:
    t = out["times"]
    lines = [f"# In-memory Dask serving ({out['config']['rows']:,} training rows, "
             f"{out['config']['predict_rows']:,} predicted, {out['config']['workers']} workers)",
             "", f"EBF fit {out['ebf_fit_s']:.1f} s (largest graph "
             f"{out['ebf_fit_graph_bytes'] / 2**20:.2f} MiB)"
             + (f"; xgboost.dask fit {out['xgb_fit_s']:.1f} s" if "xgb_fit_s" in out else ""),
             "", "| call | min s | median s | max s | largest graph MiB |", "|---|---|---|---|---|"]
    for name, ts in t.items():
        lines.append(f"| {name} | {min(ts):.3f} | {statistics.median(ts):.3f} | {max(ts):.3f} "
                     f"| {out['graph_bytes'][name] / 2**20:.3f} |")
    for ours, peer, what in (("ebf_predict", "xgb_predict", "xgboost.dask predict"),
                             ("ebf_quantiles", "xgb_predict", "xgboost.dask predict"),
                             ("ebf_quantiles", "qrf_quantiles", "quantile-forest quantiles")):
        if ours in t and peer in t:
            ratio = statistics.median(t[ours]) / statistics.median(t[peer])
            lines += ["", f"{ours} / {what} (medians): {ratio:.2f}x"]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--predict-rows", type=int, default=200_000)
    p.add_argument("--partitions", type=int, default=20)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="100k rows, 20k predicted")
    p.add_argument("--qrf-rows", type=int, default=200_000,
                   help="training rows of the quantile-forest peer (fit in this process)")
    p.add_argument("--issue", default="issue44", help="results folder under benchmarks/results")
    p.add_argument("--out", default="serving")
    args = p.parse_args(argv)
    if args.quick:
        args.rows, args.predict_rows = 100_000, 20_000
    out = run(args)
    text = report(out)
    print(text)
    results = RESULTS.parent / args.issue
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{args.out}.md").write_text(text)
    write_json(out, results / f"{args.out}.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
