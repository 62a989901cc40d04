"""Thesis Ch. 5: Mondrian forests for classification (Sec. 5.7), online against batch.

The thesis' setup (Sec. 5.7): features rescaled to [0, 1], the training data cut into 100
mini-batches, M = 100 trees, lifetime infinite, HNSP discount gamma = 10 D; batch forests
(Breiman-RF, ERT-k, ERT-1, scikit-learn defaults, 100 trees) re-trained on the same fraction
of the data. Items:

- ``mfc.fig5_3``: test accuracy against the fraction of the training data (and against
  training time) for MF (:class:`mondrian.MondrianForestClassifier`, ``partial_fit`` per
  mini-batch), RF, ERT-k, ERT-1 and an online baseline, River's AMF (Mourtada et al. 2021,
  the thesis' ORF-Saffari has no maintained implementation); on dna also MF and ERT-1 on the
  60 most relevant attributes (61-120, the data's documentation), the thesis' MF† and ERT-1†.
- ``mfc.table5_1``: the average depth of the leaves, weighted by the training points they
  hold, against log2 N (Table 5.1).

The training rows arrive in a seeded random order (the thesis repeats five initialisations).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from .core import Item, Verdict
from .thesis_data import SOURCES, figure, load, subsample

PAPER = "Lakshminarayanan (2016), PhD thesis, Ch. 5"
DATASETS = ("usps", "satimage", "letter", "dna")
RELEVANT_DNA = slice(60, 120)  # attributes A61 .. A120 of the StatLog DNA documentation

#: Trees, mini-batches after which the forests are scored, caps on the rows (letter only)
#: and AMF's trees, per budget (AMF as many as MF: the thesis compares at M = 100 each).
SIZES = {
    "smoke": dict(trees=5, checkpoints=(10, 50, 100), n_train=300, n_test=200, amf=5),
    "quick": dict(trees=100, checkpoints=(1, 5, 10, 25, 50, 100), n_train=5000,
                  n_test=2000, amf=100),
    "full": dict(trees=100, checkpoints=(1, 2, 3, 5, 7, 10, 15, 20, 30, 40, 50, 60, 70, 80,
                                         90, 100), n_train=None, n_test=None, amf=100),
}
STYLES = {"MF": "ro-", "RF": "k^-", "ERT-k": "gs-", "ERT-1": "bd-", "AMF": "m*-",
          "MF-rel": "ro--", "ERT-1-rel": "bd--"}


def _data(name: str, budget: str, seed: int) -> tuple[np.ndarray, ...]:
    size = SIZES[budget]
    X, X_te, y, y_te = load(name, seed)
    cap = budget == "smoke" or name == "letter"
    rows = subsample((X, X_te, y, y_te), size["n_train"] if cap else None,
                     size["n_test"] if cap else None, seed)
    lo, span = rows[0].min(axis=0), np.ptp(rows[0], axis=0)
    span[span <= 0] = 1.0
    return ((rows[0] - lo) / span, (rows[1] - lo) / span, rows[2], rows[3])


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
    seconds so far."""
    rows, seconds = [], 0.0
    for b, (Xb, yb) in enumerate(batches, start=1):
        start = time.perf_counter()
        learn(Xb, yb)
        seconds += time.perf_counter() - start
        if b in checkpoints:
            rows.append({"batches": b, "seconds": seconds, "accuracy": score()})
    return rows


def _retrained(model, X, y, X_te, y_te, n_batch: np.ndarray, checkpoints) -> list[dict]:
    """Re-fit on the first ``b`` mini-batches at each checkpoint ``b``; ``seconds`` is the
    cumulative cost of re-fitting after every one of the 100 mini-batches, interpolated
    linearly in the rows between the measured fits."""
    rows = []
    for b in checkpoints:
        m = int(n_batch[b - 1])
        start = time.perf_counter()
        model.fit(X[:m], y[:m])
        fit = time.perf_counter() - start
        rows.append({"batches": b, "fit_seconds": fit,
                     "accuracy": float(np.mean(model.predict(X_te) == y_te))})
    measured_n = [int(n_batch[r["batches"] - 1]) for r in rows]
    per_batch = np.interp(n_batch, measured_n, [r["fit_seconds"] for r in rows])
    for r in rows:
        r["seconds"] = float(per_batch[: r["batches"]].sum())
    return rows


def run_dataset(name: str, parts, size: dict, seed: int) -> dict:
    from mondrian import MondrianForestClassifier

    X, X_te, y, y_te = parts
    order = np.random.default_rng(seed).permutation(len(y))
    X, y = X[order], y[order]
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


def run_fig5_3(budget: str, seed: int, out_dir: Path) -> dict:
    size = SIZES[budget]
    results = {ds: run_dataset(ds, _data(ds, budget, seed), size, seed) for ds in DATASETS}
    names = []
    for xk, xl, logx in (("fraction", "fraction of training data", False),
                         ("seconds", "training seconds (re-trained: cumulative)", True)):
        panels = [(f"{ds} (N={r['n_train']})", xl, "test accuracy",
                   {k: ([p[xk] for p in rows], [p["accuracy"] for p in rows], STYLES[k])
                    for k, rows in r["curves"].items()})
                  for ds, r in results.items()]
        names.append(figure(out_dir / f"mfc.fig5_3_{xk}.png", panels,
                            f"Fig. 5.3: MF ({size['trees']} trees) online vs batch forests, "
                            f"AMF ({size['amf']} trees)", logx=logx))
    return {"datasets": results, "trees": size["trees"], "amf_trees": size["amf"],
            "figures": names}


BATCH = ("RF", "ERT-k", "ERT-1")


def _final(curves: dict, key: str) -> float:
    return curves[key][-1]["accuracy"]


def _mean(curves: dict, key: str) -> float:
    return float(np.mean([r["accuracy"] for r in curves[key]]))


def check_fig5_3(ours: dict) -> Verdict:
    """Thesis Sec. 5.7: MF close to the batch forests, above the online baseline, and at
    least 10x faster than both the re-trained batch forests and the online baseline grown
    with as many trees; on dna MF and ERT-1 below RF and ERT-k (still above the online
    baseline), attributes 61-120 raising both."""
    amf_trees = ours.get("amf_trees")
    same = amf_trees == ours["trees"]
    grew = f"{amf_trees} trees" if amf_trees else "a tenth of MF's trees"
    parts = [] if same else [
        f"AMF grew {grew}, not MF's {ours['trees']}: not the thesis' comparison (a run "
        "before AMF's trees were set to MF's)"]
    ok = same
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
        mf_s = c["MF"][-1]["seconds"]
        faster = min(c[k][-1]["seconds"] for k in BATCH) / mf_s
        than_amf = c["AMF"][-1]["seconds"] / mf_s
        ok &= gap <= 0.03 and online > 0 and faster >= 10 and than_amf >= 10
        parts.append(f"{ds}: MF {_final(c, 'MF'):.3f} vs best batch {best:.3f} (gap "
                     f"{gap:+.3f}); mean over checkpoints MF - AMF {online:+.3f}; MF trains "
                     f"in {mf_s:.1f}s, {faster:.0f}x below re-training, {than_amf:.1f}x below "
                     f"AMF's {c['AMF'][-1]['seconds']:.1f}s")
    return Verdict(ok, "; ".join(parts), None)


def _headline_fig5_3(ours: dict) -> str:
    return "; ".join(
        f"{ds}: MF {_final(r['curves'], 'MF'):.3f}, RF {_final(r['curves'], 'RF'):.3f}, "
        f"AMF {_final(r['curves'], 'AMF'):.3f}" for ds, r in ours["datasets"].items())


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

ITEMS = [
    Item(key="mfc.fig5_3", paper=PAPER, where="Sec. 5.7, Fig. 5.3",
         title="MF online vs batch RF, ERT-k, ERT-1 and an online forest over 100 mini-batches",
         paper_numbers={"trees": 100, "mini_batches": 100, "gamma": "10 D",
                        "usps": {"D": 256, "K": 10, "n_train": 7291, "n_test": 2007},
                        "satimage": {"D": 36, "K": 6, "n_train": 3104, "n_test": 2000},
                        "letter": {"D": 16, "K": 26, "n_train": 15000, "n_test": 5000},
                        "dna": {"D": 180, "K": 3, "n_train": 1400, "n_test": 1186},
                        "runs_averaged": 5},
         paper_headline="MF very close to batch RF/ERT at every fraction; MF >> ORF-Saffari; "
                        ">= 10x faster than re-trained batch forests; dna: MF, ERT-1 < RF, "
                        "ERT-k, MF† much better",
         data=_DATA, substitutes=_SUBST + (
             "quick budget: letter capped at 5,000 train / 2,000 test rows; one seed",),
         metric="test accuracy vs fraction of training data (and vs training seconds)",
         claim=("On usps (substitute), satimage and letter MF after the last mini-batch is "
                "within 0.03 accuracy of the best batch forest and above AMF on average "
                "over the checkpoints, and its training seconds over the stream are at "
                "least 10x below every batch forest's re-trained after each mini-batch and "
                "AMF's (with as many trees as MF); on dna MF and ERT-1 end below RF and "
                "ERT-k, MF above AMF, and attributes 61-120 raise both MF and ERT-1 by at "
                "least 0.05."),
         tolerance="0.03 accuracy (close); > 0 (outperforms); 0.05 (significantly improves); "
                   "10x (an order of magnitude)",
         run=run_fig5_3, check=check_fig5_3, headline=_headline_fig5_3),
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
    "mfc.fig5_3": (
        "The committed run (quick budget, one seed) grew AMF with 10 trees against MF's "
        "100, so the thesis' comparison with the online baseline is not in it: it needs a "
        "rerun with AMF at 100 trees. In that run MF is 15-20x faster than re-training the "
        "batch forests, as the thesis says, but only 2.7x (usps), 5.8x (satimage) and 5.6x "
        "(letter) faster than the 10-tree AMF, and on dna MF ends below it (0.684 against "
        "0.697; the thesis: MF still better than ORF-Saffari)."),
}
