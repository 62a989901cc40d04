"""Taddy et al. (2015), Sec. 3.1, eq. (11): the CLT bound on the probability of the sample split.

Eq. (11) bounds, for the rows at one node, the probability that a Bayesian-bootstrap draw
(weights ``theta ~ iid Exp(1)``) splits them where the unweighted sample does. Every candidate
split ``j`` (a binary ``x_j``; a continuous input is discretised, so one candidate per
feature and cut) gives per-row squared-error differences ``d_ji = (y_i - ybar_1(x_i1))^2 -
(y_i - ybar_j(x_ij))^2`` against the sample split 1 (eq. 9), and

    p(split 1 stays best) >= 1 - sum_{j >= 2} Phi(-sqrt(n) |dbar_j| / sqrt(d_j'd_j / n))
                          >= 1 - (2 pi)^(-1/2) sum_{j >= 2} exp(-n z_j^2 / 2) / (z_j sqrt(n)),

``z_j = |dbar_j| / sqrt(d_j'd_j / n)``: a union (Bonferroni) bound over the competitors with
the central-limit law of eq. (10), then Mills' ratio. It is computed here in plain NumPy over
every candidate split the trunk grower can make at the node (every feature and bin edge
leaving at least the trunk's minimum rows on each side), and compared with the frequency
with which the library's weighted CART (:func:`ebf.trunk_posterior`, one split on the node's
rows) makes the sample split, feature and cut, over many draws.

Two settings: the four internal nodes of the paper's Fig. 4 trunk on California housing
(each node's rows held fixed: eq. (11) is conditional on the data at the node), and the
paper's own set-up of binary inputs with a small gap between the two best splits
(``y = x0 + 0.9 x1 + N(0, 1)``, eight more binary inputs of no effect), where the bound lies
strictly between 0 and 1.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import ndtr

from ebf import trunk_posterior
from ebf.binning import bin_data

from . import taddy_data as data
from .core import Item, Verdict

#: Synthetic effects: split 1 on x0 beats x1 by (1 - 0.9^2) / 4 of the variance, so the
#: bound is informative at a few hundred rows and near 1 at a few thousand.
EFFECTS = (1.0, 0.9)
SYNTH_FEATURES = 10
#: Monte Carlo allowance of the comparison: the draws' frequency may fall this many binomial
#: standard errors below the bound (a one-sided test at about the 0.1% level).
MC_SE = 3.0


def _sizes(budget: str) -> dict:
    return {"smoke": dict(rows=3000, draws=50, n=(250,), data_seeds=1),
            "quick": dict(rows=None, draws=300, n=(250, 1000, 4000), data_seeds=3),
            "full": dict(rows=None, draws=1000, n=(250, 1000, 4000), data_seeds=5)}[budget]


def eq11(codes: np.ndarray, y: np.ndarray, n_edges: list[int], min_leaf_rows: int,
         split: tuple[int, int]) -> dict:
    """Both lines of eq. (11) at a node, split 1 = ``split`` (feature, bin: ``code <= bin``
    goes left), over every other valid candidate split of the node's rows.

    Candidates that partition the rows as split 1 does, or as an earlier candidate of the
    same feature does (bins with no rows between them), are one split and counted once.
    """
    n = y.size
    side1 = codes[:, split[0]] <= split[1]
    g1 = np.where(side1, (y - y[side1].mean()) ** 2, (y - y[~side1].mean()) ** 2)
    t_all = []
    for f, m in enumerate(n_edges):
        c = codes[:, f].astype(np.int64)
        counts = np.bincount(c, minlength=m + 1)[:m]
        sums = np.bincount(c, weights=y, minlength=m + 1)[:m]
        left_n, left_s = np.cumsum(counts), np.cumsum(sums)
        ok = (left_n >= min_leaf_rows) & (n - left_n >= min_leaf_rows)
        ok &= np.r_[True, np.diff(left_n) > 0]  # an empty bin repeats the previous partition
        bins = np.flatnonzero(ok)
        if bins.size == 0:
            continue
        mu_l = left_s[bins] / left_n[bins]
        mu_r = (y.sum() - left_s[bins]) / (n - left_n[bins])
        left = c[:, None] <= bins[None, :]
        g = np.where(left, (y[:, None] - mu_l) ** 2, (y[:, None] - mu_r) ** 2)
        d = g1[:, None] - g
        same = np.all(left == side1[:, None], axis=0) | np.all(left == ~side1[:, None], axis=0)
        d = d[:, ~same]
        sd = np.sqrt(np.mean(d * d, axis=0))
        d, sd = d[:, sd > 0], sd[sd > 0]  # a zero difference on every row: the same split
        t_all.append(np.sqrt(n) * d.mean(axis=0) / sd)
    t = np.concatenate(t_all) if t_all else np.empty(0)
    # signed: Phi(t_j) = p(Delta_j > 0) under eq. (10); t_j = -sqrt(n) z_j for the sample optimum
    phi = 1.0 - float(ndtr(t).sum())
    mills = (1.0 - float(np.sum(np.exp(-t ** 2 / 2) / (-t * np.sqrt(2 * np.pi))))
             if np.all(t < 0) else float("nan"))
    return {"candidates": int(t.size + 1), "bound_phi": phi, "bound_mills": mills,
            "closest_z_sqrt_n": float(-t.max()) if t.size else float("nan")}


def node_case(X: pd.DataFrame, y: np.ndarray, draws: int, min_leaf_rows: int, seed: int,
              label: str) -> dict:
    """Eq. (11) at the rows ``X, y`` of one node against ``draws`` weighted one-split fits."""
    post = trunk_posterior(X, y, draws, max_leaves=2, min_leaf_rows=min_leaf_rows,
                           random_state=seed, n_jobs=data.N_JOBS)
    root = post.sample_trunk.trunk_
    f, b, thr = int(root.feature[0]), int(root.threshold_bin[0]), float(root.threshold[0])
    edges = post.sample_trunk.bin_edges_
    codes = bin_data(np.asarray(X, dtype=np.float64), edges)
    bound = eq11(codes, np.asarray(y, float), [len(e) for e in edges], min_leaf_rows, (f, b))
    hits = [int(t.trunk_.feature[0]) == f and float(t.trunk_.threshold[0]) == thr
            for t in post.draws]
    freq = float(np.mean(hits))
    p = min(max(bound["bound_phi"], 0.0), 1.0)
    return {"case": label, "rows": int(y.size), "split": f"{post.feature_names[f]} <= {thr:.4g}",
            **bound, "draws": draws, "split_frequency": freq,
            "allowance": MC_SE * float(np.sqrt(p * (1 - p) / draws)),
            "variable_frequency": float(post.nodes["agreement"].iloc[0]),
            "variable_clt_library": float(post.nodes["clt_match"].iloc[0])}


def _housing_nodes(rows, seed: int) -> list[tuple[str, np.ndarray]]:
    """Rows at every internal node of the Fig. 4 sample trunk (>= 3,500 blocks per leaf)."""
    X, y, _ = data.dataset("housing", rows, seed)
    mls = data.scaled(rows, "housing", 3500)
    t = trunk_posterior(X, y, 1, min_leaf_rows=mls, random_state=seed).sample_trunk.trunk_
    masks, out = {0: np.ones(len(y), bool)}, []
    path = {0: ""}
    for j in range(t.n_nodes):
        if t.feature[j] < 0:
            continue
        go_left = X.iloc[:, int(t.feature[j])].to_numpy() <= t.threshold[j]
        masks[int(t.left[j])], masks[int(t.right[j])] = masks[j] & go_left, masks[j] & ~go_left
        path[int(t.left[j])], path[int(t.right[j])] = path[j] + "L", path[j] + "R"
        if int(masks[j].sum()) != int(t.n_rows[j]):
            raise RuntimeError(f"node {j}: {masks[j].sum()} rows, the trunk says {t.n_rows[j]}")
        out.append((path[j] or "root", masks[j]))
    return out


def synthetic(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """The paper's binary set-up: ``y = x0 + 0.9 x1 + N(0, 1)``, ten Bernoulli(1/2) inputs."""
    rng = np.random.default_rng([seed, n])
    X = rng.integers(0, 2, size=(n, SYNTH_FEATURES)).astype(float)
    y = EFFECTS[0] * X[:, 0] + EFFECTS[1] * X[:, 1] + rng.normal(size=n)
    return pd.DataFrame(X, columns=[f"x{i}" for i in range(SYNTH_FEATURES)]), y


def run_eq11(budget: str, seed: int, out_dir: Path) -> dict:
    sz = _sizes(budget)
    X, y, _ = data.dataset("housing", sz["rows"], seed)
    mls = data.scaled(sz["rows"], "housing", 3500)
    cases = [node_case(X[m].reset_index(drop=True), y[m], sz["draws"], mls, seed,
                       f"housing {p}") for p, m in _housing_nodes(sz["rows"], seed)]
    for n in sz["n"]:
        for s in range(seed, seed + sz["data_seeds"]):
            Xs, ys = synthetic(n, s)
            cases.append(node_case(Xs, ys, sz["draws"], 1, s, f"binary n={n} seed={s}"))
    return {"sizes": {k: list(v) if isinstance(v, tuple) else v for k, v in sz.items()},
            "trunk_min_leaf_rows": mls, "effects": list(EFFECTS), "cases": cases}


def check_eq11(ours: dict) -> Verdict:
    bad = [c for c in ours["cases"]
           if c["split_frequency"] < c["bound_phi"] - c["allowance"]]
    informative = [c for c in ours["cases"] if 0.0 < c["bound_phi"] < 0.99]
    parts = [f"{c['case']}: {c['split_frequency']:.3f} vs {c['bound_phi']:.3f}"
             for c in ours["cases"] if c in informative or c in bad]
    vacuous = sum(c["bound_phi"] <= 0 for c in ours["cases"])
    detail = (f"draws' frequency of the sample split >= eq. (11) - {MC_SE:g} SE in "
              f"{len(ours['cases']) - len(bad)} of {len(ours['cases'])} cases; bound in (0, "
              f"0.99): " + ("; ".join(parts) or "none") + f"; vacuous (<= 0) in {vacuous}")
    return Verdict(not bad, detail, None)


def _headline(o: dict) -> str:
    cases = o["cases"]
    root = next(c for c in cases if c["case"] == "housing root")
    syn = [c for c in cases if c["case"].startswith("binary n=250 ")]
    syn_txt = (f"; binary n=250: bound {np.median([c['bound_phi'] for c in syn]):.2f}, "
               f"draws {np.median([c['split_frequency'] for c in syn]):.2f} (medians)"
               if syn else "")
    return (f"housing root: bound {root['bound_phi']:.2f} over {root['candidates']} "
            f"candidates, draws {root['split_frequency']:.2f} (variable "
            f"{root['variable_frequency']:.2f})" + syn_txt)


EQ11 = Item(
    key="taddy.eq11", paper="Taddy et al. (2015)", where="Sec. 3.1, eq. (11)",
    title="CLT bound on the probability that a posterior draw makes the sample split",
    paper_numbers={"eq. (11)": "p(Delta_j < 0 : j = 2..p) >= 1 - sum_j Phi(-sqrt(n) "
                               "|dbar_j| / sqrt(d_j'd_j / n)) >= 1 - (2 pi)^(-1/2) sum_j "
                               "exp(-n z_j^2 / 2) / (z_j sqrt(n))",
                   "eq. (1)": "p(split matches sample CART) >~ 1 - (p / sqrt(n)) e^-n"},
    paper_headline="conditional on a node's rows, a posterior draw makes the sample split "
                   "with probability at least eq. (11) (a number, no table)",
    data="California housing, the rows at each of the 4 internal nodes of the Fig. 4 trunk "
         "(>= 3,500 blocks per leaf); binary inputs y = x0 + 0.9 x1 + N(0, 1) (8 more inputs "
         "of no effect) at n = 250, 1,000, 4,000, 5 data sets each; 1,000 draws per case "
         "(full: the paper gives no draw count; quick 300, 3 data sets)",
    substitutes=("continuous inputs discretised at the trunk grower's bin edges (255 "
                 "quantile bins), each edge one binary candidate as in Sec. 3.1",
                 "weighted splits by the library's CART (ebf.trunk_posterior with one "
                 "split, the node's rows fixed), bound in plain NumPy"),
    metric="frequency over Bayesian-bootstrap draws of the sample split (feature and cut) "
           "against the eq. (11) bound",
    claim="Conditional on the rows at a node, the probability that a Bayesian-bootstrap "
          "draw's impurity-minimising split is the sample's is at least eq. (11)'s "
          "1 - sum_j Phi(-sqrt(n) |dbar_j| / sqrt(d_j'd_j / n)) over the other candidate "
          "splits j (and so at least its Mills-ratio form): the draws' frequency is not "
          "below the bound at any node or data set.",
    tolerance=f"frequency >= bound - {MC_SE:g} binomial standard errors of the draws "
              "(sqrt(b (1 - b) / draws))",
    run=run_eq11, check=check_eq11, headline=_headline,
)
