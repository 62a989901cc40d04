"""Thesis Ch. 5: Mondrian forests for classification (Sec. 5.7), online against batch.

The thesis' setup (Sec. 5.7): features rescaled to [0, 1], the training data cut into 100
mini-batches, M = 100 trees, lifetime infinite, HNSP discount gamma = 10 D; batch forests
(Breiman-RF, ERT-k, ERT-1, scikit-learn defaults, 100 trees) re-trained on the same fraction
of the data. Items:

- ``mfc.fig5_3_accuracy``: test accuracy against the fraction of the training data for MF
  (:class:`mondrian.MondrianForestClassifier`, ``partial_fit`` per mini-batch), RF, ERT-k,
  ERT-1 and an online baseline, River's AMF (Mourtada et al. 2021, the thesis' ORF-Saffari
  has no maintained implementation) with as many trees as MF; on dna also MF and ERT-1 on
  the 60 most relevant attributes (61-120, the data's documentation), the thesis' MF† and
  ERT-1†.
- ``mfc.fig5_3_speed``: the same runs' training seconds: MF over the stream against the
  batch forests re-trained after each mini-batch and against AMF.
- ``mfc.table5_1``: the average depth of the leaves, weighted by the training points they
  hold, against log2 N (Table 5.1).

The training rows arrive in a seeded random order; the full budget repeats the runs for five
seeds (the thesis' five initialisations) and both Fig. 5.3 items read the same runs.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path

import numpy as np

from .core import Item, Verdict
from .thesis_data import SOURCES, figure, load, subsample

PAPER = "Lakshminarayanan (2016), PhD thesis, Ch. 5"
DATASETS = ("usps", "satimage", "letter", "dna")
RELEVANT_DNA = slice(60, 120)  # attributes A61 .. A120 of the StatLog DNA documentation

#: Trees, mini-batches after which the forests are scored, caps on the rows (but at full),
#: AMF's trees (as many as MF: the thesis compares at M = 100 each) and the seeds (the
#: thesis averages five random initialisations).
SIZES = {
    "smoke": dict(trees=5, checkpoints=(10, 50, 100), n_train=300, n_test=200, amf=5,
                  seeds=1),
    "quick": dict(trees=100, checkpoints=(1, 5, 10, 20, 50, 100), n_train=1000,
                  n_test=1000, amf=100, seeds=5),
    "full": dict(trees=100, checkpoints=(1, 2, 5, 10, 20, 30, 50, 70, 100), n_train=None,
                 n_test=None, amf=100, seeds=5),
}
STYLES = {"MF": "ro-", "RF": "k^-", "ERT-k": "gs-", "ERT-1": "bd-", "AMF": "m*-",
          "MF-rel": "ro--", "ERT-1-rel": "bd--", "dynaTree": "c+-"}


def _data(name: str, budget: str, seed: int) -> tuple[np.ndarray, ...]:
    size = SIZES[budget]
    X, X_te, y, y_te = load(name, seed)
    cap = budget != "full"
    rows = subsample((X, X_te, y, y_te), size["n_train"] if cap else None,
                     size["n_test"] if cap else None, seed)
    lo, span = rows[0].min(axis=0), np.ptp(rows[0], axis=0)
    span[span <= 0] = 1.0
    return ((rows[0] - lo) / span, (rows[1] - lo) / span, rows[2], rows[3])


def stream(name: str, budget: str, seed: int) -> tuple[np.ndarray, ...]:
    """``(X, y, X_test, y_test)`` with the training rows in the seeded order they arrive
    in (the 100 mini-batches are ``numpy.array_split`` of it)."""
    X, X_te, y, y_te = _data(name, budget, seed)
    order = np.random.default_rng(seed).permutation(len(y))
    return X[order], y[order], X_te, y_te


def _batch_models(trees: int, seed: int) -> dict:
    from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier

    return {"RF": RandomForestClassifier(trees, random_state=seed, n_jobs=1),
            "ERT-k": ExtraTreesClassifier(trees, random_state=seed, n_jobs=1),
            "ERT-1": ExtraTreesClassifier(trees, max_features=1, random_state=seed, n_jobs=1)}


class _AMF:
    """River's AMF fed one row at a time; scored by its most probable class."""

    def __init__(self, trees: int, seed: int) -> None:
        from river.forest import AMFClassifier

        self.model = AMFClassifier(n_estimators=trees, seed=seed)

    def learn(self, X: np.ndarray, y: np.ndarray) -> None:
        for row, label in zip(X, y, strict=True):
            self.model.learn_one(dict(enumerate(row)), int(label))

    def accuracy(self, X: np.ndarray, y: np.ndarray) -> float:
        pred = [self.model.predict_one(dict(enumerate(row))) for row in X]
        return float(np.mean(np.array(pred, dtype=float) == y))


def _online(learn, score, batches, checkpoints) -> list[dict]:
    """Feed the mini-batches in turn; at each checkpoint the accuracy and the training
    CPU seconds so far (CPU time: the machine is shared, and every learner here runs on
    one thread)."""
    rows, seconds = [], 0.0
    for b, (Xb, yb) in enumerate(batches, start=1):
        start = time.process_time()
        learn(Xb, yb)
        seconds += time.process_time() - start
        if b in checkpoints:
            rows.append({"batches": b, "seconds": seconds, "accuracy": score()})
    return rows


def _retrained(model, X, y, X_te, y_te, n_batch: np.ndarray, checkpoints) -> list[dict]:
    """Re-fit on the first ``b`` mini-batches at each checkpoint ``b``; ``seconds`` is the
    cumulative CPU cost of re-fitting after every one of the 100 mini-batches, interpolated
    linearly in the rows between the measured fits."""
    rows = []
    for b in checkpoints:
        m = int(n_batch[b - 1])
        start = time.process_time()
        model.fit(X[:m], y[:m])
        fit = time.process_time() - start
        rows.append({"batches": b, "fit_seconds": fit,
                     "accuracy": float(np.mean(model.predict(X_te) == y_te))})
    measured_n = [int(n_batch[r["batches"] - 1]) for r in rows]
    per_batch = np.interp(n_batch, measured_n, [r["fit_seconds"] for r in rows])
    for r in rows:
        r["seconds"] = float(per_batch[: r["batches"]].sum())
    return rows


def run_dataset(name: str, parts, size: dict, seed: int) -> dict:
    from mondrian import MondrianForestClassifier

    X, y, X_te, y_te = parts
    chunks = np.array_split(np.arange(len(y)), 100)
    n_batch = np.cumsum([len(c) for c in chunks])
    checkpoints = set(size["checkpoints"])
    classes = np.unique(np.concatenate([y, y_te]))
    curves = {}
    views = {"": slice(None)} if name != "dna" else {"": slice(None), "-rel": RELEVANT_DNA}
    for suffix, cols in views.items():
        mf = MondrianForestClassifier(n_estimators=size["trees"], random_state=seed, n_jobs=1)
        curves["MF" + suffix] = _online(
            lambda Xb, yb, mf=mf: mf.partial_fit(Xb, yb, classes=classes),
            lambda mf=mf, cols=cols: float(np.mean(mf.predict(X_te[:, cols]) == y_te)),
            [(X[c][:, cols], y[c]) for c in chunks], checkpoints)
        for key, model in _batch_models(size["trees"], seed).items():
            if suffix and key != "ERT-1":
                continue
            curves[key + suffix] = _retrained(model, X[:, cols], y, X_te[:, cols], y_te,
                                              n_batch, size["checkpoints"])
    amf = _AMF(size["amf"], seed)
    curves["AMF"] = _online(amf.learn, lambda: amf.accuracy(X_te, y_te),
                            [(X[c], y[c]) for c in chunks], checkpoints)
    for rows in curves.values():
        for r in rows:
            r["fraction"] = r["batches"] / 100
    return {"n_train": int(len(y)), "n_test": int(len(y_te)), "features": int(X.shape[1]),
            "curves": curves}


def _warm_up() -> None:
    """Load MF's compiled kernels (fit, update, predict) before anything is timed."""
    from mondrian import MondrianForestClassifier

    rng = np.random.default_rng(0)
    X, y = rng.random((40, 3)), rng.integers(0, 2, 40)
    mf = MondrianForestClassifier(n_estimators=2, random_state=0, n_jobs=1)
    for part in (slice(0, 20), slice(20, 40)):
        mf.partial_fit(X[part], y[part], classes=[0, 1])
    mf.predict(X)


@functools.cache
def fig5_3_runs(budget: str, seed: int) -> dict:
    """Every forest on every data set for the seeds ``seed .. seed + k - 1`` (k per
    budget), computed once per process for the items that read them (Figs. 5.3 and 5.4):
    ``{"seeds": [...], "runs": [{data set: run_dataset(...)} per seed]}``. Read only."""
    size = SIZES[budget]
    _warm_up()
    seeds = list(range(seed, seed + size["seeds"]))
    runs = [{ds: run_dataset(ds, stream(ds, budget, s), size, s) for ds in DATASETS}
            for s in seeds]
    return {"seeds": seeds, "runs": runs}


def mean_curves(runs: list[dict], ds: str) -> dict:
    """Per learner, the accuracy and seconds at each checkpoint averaged over the seeds
    (the thesis reports the mean of five runs)."""
    first = runs[0][ds]["curves"]
    return {k: [{"batches": p["batches"], "fraction": p["fraction"],
                 **{m: float(np.mean([r[ds]["curves"][k][i][m] for r in runs]))
                    for m in ("accuracy", "seconds")}}
                for i, p in enumerate(rows)] for k, rows in first.items()}


def _summary(runs: list[dict], size: dict, seeds: list[int]) -> dict:
    datasets = {ds: {"n_train": runs[0][ds]["n_train"], "n_test": runs[0][ds]["n_test"],
                     "features": runs[0][ds]["features"], "curves": mean_curves(runs, ds)}
                for ds in DATASETS}
    return {"datasets": datasets, "trees": size["trees"], "amf_trees": size["amf"],
            "seeds": seeds}


def run_fig5_3_accuracy(budget: str, seed: int, out_dir: Path) -> dict:
    size, got = SIZES[budget], fig5_3_runs(budget, seed)
    ours = _summary(got["runs"], size, got["seeds"])
    panels = [(f"{ds} (N={r['n_train']})", "fraction of training data", "test accuracy",
               {k: ([p["fraction"] for p in rows], [p["accuracy"] for p in rows], STYLES[k])
                for k, rows in r["curves"].items()})
              for ds, r in ours["datasets"].items()]
    ours["figures"] = [figure(
        out_dir / "mfc.fig5_3_accuracy.png", panels,
        f"Fig. 5.3 (top): MF ({size['trees']} trees) online vs batch forests, AMF "
        f"({size['amf']} trees); mean of {len(got['seeds'])} seeds", logx=False)]
    return ours


def speed_ratios(run: dict) -> dict:
    """One seed's training seconds over the whole stream: MF's, and how many times more
    the cheapest re-trained batch forest and AMF take."""
    c = run["curves"]
    mf = c["MF"][-1]["seconds"]
    return {"mf_seconds": mf, "amf_seconds": c["AMF"][-1]["seconds"],
            "batch_seconds": {k: c[k][-1]["seconds"] for k in BATCH},
            "vs_batch": min(c[k][-1]["seconds"] for k in BATCH) / mf,
            "vs_amf": c["AMF"][-1]["seconds"] / mf}


def run_fig5_3_speed(budget: str, seed: int, out_dir: Path) -> dict:
    size, got = SIZES[budget], fig5_3_runs(budget, seed)
    speed = {}
    for ds in DATASETS:
        per_seed = [speed_ratios(r[ds]) for r in got["runs"]]
        speed[ds] = {"per_seed": per_seed, **{
            key: {"median": float(np.median([p[key] for p in per_seed])),
                  "min": float(min(p[key] for p in per_seed)),
                  "max": float(max(p[key] for p in per_seed))}
            for key in ("mf_seconds", "amf_seconds", "vs_batch", "vs_amf")}}
    ours = _summary(got["runs"], size, got["seeds"])
    panels = [(f"{ds} (N={r['n_train']})", "training CPU seconds (re-trained: cumulative)",
               "test accuracy",
               {k: ([p["seconds"] for p in rows], [p["accuracy"] for p in rows], STYLES[k])
                for k, rows in r["curves"].items()})
              for ds, r in ours["datasets"].items()]
    name = figure(out_dir / "mfc.fig5_3_speed.png", panels,
                  f"Fig. 5.3 (bottom): MF ({size['trees']} trees) vs re-trained batch "
                  f"forests and AMF ({size['amf']} trees); mean of {len(got['seeds'])} seeds",
                  logx=True)
    return {"speed": speed, "trees": size["trees"], "amf_trees": size["amf"],
            "seeds": got["seeds"], "figures": [name]}


BATCH = ("RF", "ERT-k", "ERT-1")


def _final(curves: dict, key: str) -> float:
    return curves[key][-1]["accuracy"]


def _mean(curves: dict, key: str) -> float:
    return float(np.mean([r["accuracy"] for r in curves[key]]))


def check_fig5_3_accuracy(ours: dict) -> Verdict:
    """Thesis Sec. 5.7 on the mean of the seeds' curves: MF very close to the batch
    forests and above the online baseline (grown with as many trees) on usps, satimage and
    letter; on dna MF and ERT-1 below RF and ERT-k, MF still above the online baseline, and
    attributes 61-120 raising both MF and ERT-1."""
    ok = ours["amf_trees"] == ours["trees"]
    parts = [] if ok else [f"AMF grew {ours['amf_trees']} trees, not MF's {ours['trees']}"]
    for ds, r in ours["datasets"].items():
        c = r["curves"]
        if ds == "dna":
            mf, ert1, amf = _final(c, "MF"), _final(c, "ERT-1"), _final(c, "AMF")
            k_best = min(_final(c, "RF"), _final(c, "ERT-k"))
            worse = max(mf, ert1) < k_best
            helps = (_final(c, "MF-rel") - mf >= 0.05
                     and _final(c, "ERT-1-rel") - ert1 >= 0.05)
            ok &= worse and helps and mf > amf
            parts.append(f"dna: MF {mf:.3f}, ERT-1 {ert1:.3f} vs RF/ERT-k >= {k_best:.3f}; "
                         f"MF-rel {_final(c, 'MF-rel'):.3f}, ERT-1-rel "
                         f"{_final(c, 'ERT-1-rel'):.3f}; MF - AMF {mf - amf:+.3f}")
            continue
        best = max(_final(c, k) for k in BATCH)
        gap = best - _final(c, "MF")
        online = _mean(c, "MF") - _mean(c, "AMF")
        ok &= gap <= 0.03 and online > 0
        parts.append(f"{ds}: MF {_final(c, 'MF'):.3f} vs best batch {best:.3f} (gap "
                     f"{gap:+.3f}); mean over checkpoints MF - AMF {online:+.3f}")
    seeds = ours["seeds"]
    return Verdict(ok, f"mean of {len(seeds)} seeds; " + "; ".join(parts), None)


def _headline_fig5_3_accuracy(ours: dict) -> str:
    return "; ".join(
        f"{ds}: MF {_final(r['curves'], 'MF'):.3f}, RF {_final(r['curves'], 'RF'):.3f}, "
        f"AMF {_final(r['curves'], 'AMF'):.3f}" for ds, r in ours["datasets"].items())


def check_fig5_3_speed(ours: dict) -> Verdict:
    """Thesis Sec. 5.7: on usps, satimage and letter MF is at least an order of magnitude
    faster than the batch forests re-trained after each mini-batch and than the online
    baseline grown with as many trees (medians over the seeds, each seed's ratio of
    training seconds over the whole stream)."""
    ok = ours["amf_trees"] == ours["trees"] and len(ours["seeds"]) >= 5
    parts = [f"{len(ours['seeds'])} seeds, median [min, max]"]
    for ds in ("usps", "satimage", "letter"):
        s = ours["speed"][ds]
        ok &= s["vs_batch"]["median"] >= 10 and s["vs_amf"]["median"] >= 10
        parts.append(f"{ds}: MF {_rng(s['mf_seconds'], '.2f')} s; re-training "
                     f"{_rng(s['vs_batch'], '.1f')}x, AMF {_rng(s['vs_amf'], '.1f')}x slower")
    worst = min(min(ours["speed"][ds]["vs_batch"]["median"],
                    ours["speed"][ds]["vs_amf"]["median"])
                for ds in ("usps", "satimage", "letter"))
    return Verdict(ok, "; ".join(parts), worst / 10)


def _rng(stat: dict, fmt: str) -> str:
    return (f"{format(stat['median'], fmt)} [{format(stat['min'], fmt)}, "
            f"{format(stat['max'], fmt)}]")


def _headline_fig5_3_speed(ours: dict) -> str:
    return "; ".join(f"{ds}: MF {s['vs_batch']['median']:.0f}x faster than re-training, "
                     f"{s['vs_amf']['median']:.1f}x than AMF"
                     for ds, s in ours["speed"].items() if ds != "dna")


# ---------------------------------------------------------------- Table 5.1

TABLE_5_1 = {"usps": {"n_train": 7291, "log2_n": 12.8, "depth": 19.1, "sd": 1.3},
             "satimage": {"n_train": 3104, "log2_n": 11.6, "depth": 17.4, "sd": 1.6},
             "letter": {"n_train": 15000, "log2_n": 13.9, "depth": 23.2, "sd": 1.8},
             "dna": {"n_train": 1400, "log2_n": 10.5, "depth": 12.0, "sd": 0.3}}


def leaf_depths(parent: np.ndarray, leaves: np.ndarray) -> np.ndarray:
    """Edges from the root to each of ``leaves``, walking the parent pointers (-1 at the
    root) up from them only (slots past the live nodes hold no tree)."""
    depth = np.zeros(leaves.size, np.int64)
    up = parent[leaves].astype(np.int64)
    while np.any(up >= 0):
        live = up >= 0
        depth += live
        up = np.where(live, parent[np.maximum(up, 0)], -1)
    return depth


def average_depths(model, X: np.ndarray) -> np.ndarray:
    """Per tree, the depth of the leaves weighted by the fraction of ``X`` in each."""
    leaves = model.apply(X)
    return np.array([leaf_depths(model.trees_[t].parent, leaves[:, t]).mean()
                     for t in range(leaves.shape[1])])


def run_table5_1(budget: str, seed: int, out_dir: Path) -> dict:
    from mondrian import MondrianForestClassifier

    trees = {"smoke": 5, "quick": 100, "full": 100}[budget]
    rows = {}
    for ds in DATASETS:
        X, _, y, _ = _data(ds, "full" if budget != "smoke" else "smoke", seed)
        model = MondrianForestClassifier(n_estimators=trees, random_state=seed, n_jobs=1)
        for chunk in np.array_split(np.random.default_rng(seed).permutation(len(y)), 100):
            model.partial_fit(X[chunk], y[chunk], classes=np.unique(y))
        d = average_depths(model, X)
        rows[ds] = {"n_train": int(len(y)), "log2_n": float(np.log2(len(y))),
                    "depth": float(d.mean()), "sd": float(d.std())}
    xs = [r["log2_n"] for r in rows.values()]
    name = figure(out_dir / "mfc.table5_1.png", [(
        "average leaf depth vs log2 N", "log2 N_train", "depth",
        {"ours": (xs, [r["depth"] for r in rows.values()], "ro"),
         "thesis": ([t["log2_n"] for t in TABLE_5_1.values()],
                    [t["depth"] for t in TABLE_5_1.values()], "ks")})],
        f"Table 5.1 ({trees} trees)", logx=False)
    return {"rows": rows, "trees": trees, "figures": [name]}


def check_table5_1(ours: dict) -> Verdict:
    parts, ok, ratios = [], True, []
    for ds, r in ours["rows"].items():
        per_log = r["depth"] / r["log2_n"]
        ok &= 1.0 <= per_log <= 2.0
        text = f"{ds}: {r['depth']:.1f} +- {r['sd']:.1f} (N={r['n_train']}, /log2 N {per_log:.2f})"
        if ds != "usps":
            ratio = r["depth"] / TABLE_5_1[ds]["depth"]
            ratios.append(ratio)
            ok &= abs(ratio - 1) <= 0.15
            text += f" vs thesis {TABLE_5_1[ds]['depth']}"
        parts.append(text)
    worst = max(ratios, key=lambda v: abs(v - 1)) if ratios else None
    return Verdict(ok, "; ".join(parts), worst)


def _headline_table5_1(ours: dict) -> str:
    return ", ".join(f"{ds} {r['depth']:.1f}" for ds, r in ours["rows"].items())


# ---------------------------------------------------------------- items

_DATA = "; ".join(SOURCES[d] for d in DATASETS)
_SUBST = (SOURCES["usps"],
          "satimage and dna: the thesis' N_train drawn at random (seeded) from the StatLog "
          "training files (the thesis' exact subsets are not published)",
          "online baseline: River's AMF for ORF-Saffari, with MF's number of trees")

_FIG5_3 = {"trees": 100, "mini_batches": 100, "gamma": "10 D",
           "usps": {"D": 256, "K": 10, "n_train": 7291, "n_test": 2007},
           "satimage": {"D": 36, "K": 6, "n_train": 3104, "n_test": 2000},
           "letter": {"D": 16, "K": 26, "n_train": 15000, "n_test": 5000},
           "dna": {"D": 180, "K": 3, "n_train": 1400, "n_test": 1186},
           "runs_averaged": 5}
_FULL = ("full: the thesis' data sizes and its five random initialisations (seeds 0-4), "
         "scored after mini-batches 1, 2, 5, 10, 20, 30, 50, 70 and 100 of the 100; the "
         "committed run is quick: seeds 0-4, each data set cut to 1,000 training and 1,000 "
         "test rows (seeded), scored after mini-batches 1, 5, 10, 20, 50 and 100 (the full "
         "budget, AMF's 100 trees in pure Python on up to 15,000 rows for five seeds, did "
         "not fit the shared 2-core machine in the time there was)")

ITEMS = [
    Item(key="mfc.fig5_3_accuracy", paper=PAPER, where="Sec. 5.7, Fig. 5.3 (top row)",
         title="Accuracy of MF online vs batch RF, ERT-k, ERT-1 and an online forest over "
               "100 mini-batches",
         paper_numbers=_FIG5_3,
         paper_headline="MF very close to batch RF/ERT at every fraction; MF significantly "
                        "outperforms ORF-Saffari; dna: MF, ERT-1 < RF, ERT-k (still > "
                        "ORF-Saffari), MF† and ERT-1† much better",
         data=_DATA + "; " + _FULL, substitutes=_SUBST,
         metric="test accuracy vs fraction of training data, mean over the seeds",
         claim=("On usps (substitute), satimage and letter MF after the last mini-batch is "
                "within 0.03 accuracy of the best batch forest and above AMF (with as many "
                "trees as MF) on average over the checkpoints; on dna MF and ERT-1 end "
                "below RF and ERT-k, MF above AMF, and attributes 61-120 raise both MF and "
                "ERT-1 by at least 0.05 (all on the mean of the seeds' curves)."),
         tolerance="0.03 accuracy (very close); > 0 (outperforms); 0.05 (significantly "
                   "improves)",
         run=run_fig5_3_accuracy, check=check_fig5_3_accuracy,
         headline=_headline_fig5_3_accuracy),
    Item(key="mfc.fig5_3_speed", paper=PAPER, where="Sec. 5.7, Fig. 5.3 (bottom row)",
         title="Training time of MF online vs batch forests re-trained after each "
               "mini-batch and an online forest",
         paper_numbers={**_FIG5_3, "speed-up": ">= 10x (\"at least an order of "
                                               "magnitude faster\")"},
         paper_headline="MF at least an order of magnitude faster than re-trained batch "
                        "versions and ORF-Saffari (usps, satimage, letter)",
         data=_DATA + "; " + _FULL, substitutes=_SUBST + (
             "training CPU seconds of single-threaded runs (MF in numba, AMF in Python, the "
             "batch forests scikit-learn's C; the thesis timed its own Python ERT and "
             "ORF-Saffari with 20 passes)",),
         metric="training CPU seconds over the stream (batch forests: re-fitted after each "
                "of the 100 mini-batches), per seed; medians and ranges over the seeds",
         claim=("On usps (substitute), satimage and letter, with at least 5 seeds, the "
                "median over the seeds of the cheapest batch forest's seconds re-trained "
                "after each mini-batch over MF's seconds is at least 10, and so is the "
                "median of AMF's seconds (with as many trees as MF, one pass) over MF's."),
         tolerance="10x (an order of magnitude), on the median over >= 5 seeds",
         run=run_fig5_3_speed, check=check_fig5_3_speed, headline=_headline_fig5_3_speed),
    Item(key="mfc.table5_1", paper=PAPER, where="Sec. 5.7.2, Table 5.1",
         title="Average leaf depth of Mondrian forests vs log2 N",
         paper_numbers=TABLE_5_1,
         paper_headline="depth 19.1 / 17.4 / 23.2 / 12.0 at log2 N 12.8 / 11.6 / 13.9 / 10.5",
         data=_DATA, substitutes=(SOURCES["usps"] + ": compared by depth / log2 N only",
                                  _SUBST[1]),
         metric="leaf depth (edges from the root) weighted by training points, mean +- sd "
                "over trees",
         claim=("On satimage, letter and dna our average depth is within 15% of the "
                "thesis', and on all four data sets depth / log2 N_train lies in [1, 2] "
                "(depth grows as log N, not N)."),
         tolerance="15% of the thesis' depth; ratio to log2 N in [1, 2]",
         run=run_table5_1, check=check_table5_1, headline=_headline_table5_1),
]

CAUSES: dict[str, str] = {
    "mfc.fig5_3_accuracy": (
        "At the full budget (five seeds, every training row) one part fails: on dna MF ends "
        "0.029 below the online baseline (0.680 against AMF's 0.709). River's AMF (Mourtada "
        "et al. 2021) stands in for ORF-Saffari but is itself an online Mondrian forest (the "
        "same label-free splits, plus exponentially weighted aggregation over the subtrees "
        "on each path), not a forest whose label-driven splits wait for enough points at "
        "each leaf; grown with MF's 100 trees it tracks MF on usps, satimage and letter "
        "(mean over the checkpoints MF - AMF +0.001, +0.008, +0.008) and wins on dna. "
        "The rest holds: MF ends within 0.009 / 0.007 / 0.011 of the best batch "
        "forest on usps, satimage and letter, and the dna pattern of the thesis is there (MF "
        "0.680 and ERT-1 0.691 below RF and ERT-k, at least 0.932; attributes 61-120 raise "
        "them to 0.907 and 0.918). All numbers from mfc.fig5_3_accuracy.json."),
    "mfc.fig5_3_speed": (
        "At the full budget (five seeds, every training row, CPU seconds) MF is 22-51x "
        "faster than AMF (100 trees) but only 6.6-10.5x faster than the cheapest batch "
        "forest re-trained after each mini-batch (medians: usps 9.6x, satimage 7.4x, letter "
        "6.9x; mfc.fig5_3_speed.json): scikit-learn's compiled ERT-1 refits from scratch "
        "in 6-8 s over the stream of usps where our 100 online trees take 0.6-0.8 s. The "
        "quick run (1,000 rows per data set) gave 11.7-14.0x: on these data sets the ratio "
        "falls as the stream grows, so the thesis' order of magnitude holds on the small "
        "streams only."),
}
