"""Run NGBoost (a peer of ``bench_peers.py``) on one task, in its own environment.

NGBoost 0.6 pins scikit-learn below 1.7, older than ours, so it lives in a separate virtual
environment (the ``ngboost-peer`` extra) and ``bench_peers.py`` runs this script there as a
subprocess, exchanging ``.npz`` files. Only numpy and ngboost are imported here.

For every family of ``--dists`` (``normal``, ``t``, ``laplace``: ``ngboost.distns.Normal``,
``T`` and ``Laplace``), NGBoost (Duan et al. 2020: natural gradient boosting of the family's
parameters, depth-3 regression trees, ``--n-estimators`` iterations) is fit twice: on all
the training rows ``raw_rows`` (``raw``), and on the fit rows ``fit_rows`` (``fit``), the
latter predicting the calibration rows as well.

Input (``--data``): ``X_train``, ``y_train``, ``raw_rows``, ``fit_rows``, ``cal_rows``,
``X_test``. Output
(``--out``): for family ``d``, ``{d}_raw_test_{p}``, ``{d}_fit_test_{p}`` and
``{d}_fit_cal_{p}`` for each parameter ``p`` (``loc``, ``scale``, and ``df`` for the t), and
the seconds ``{d}_{v}_fit_seconds`` of the fits and ``{d}_{v}_{s}_seconds`` of the
predictions (``v`` the variant, ``s`` the row set).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

PARAMS = {"normal": ("loc", "scale"), "t": ("loc", "scale", "df"), "laplace": ("loc", "scale")}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--dists", nargs="+", choices=sorted(PARAMS), default=["normal", "t"])
    p.add_argument("--n-estimators", type=int, default=500)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def _params(model, X, family: str) -> dict[str, np.ndarray]:
    dist = model.pred_dist(X)
    if family == "t":
        return {"loc": np.asarray(dist.loc), "scale": np.asarray(dist.scale),
                "df": np.asarray(dist.df)}
    return {"loc": np.asarray(dist.loc), "scale": np.asarray(dist.scale)}


def main(argv=None) -> None:
    cfg = parse_args(argv)
    from ngboost import NGBRegressor
    from ngboost.distns import Laplace, Normal, T

    families = {"normal": Normal, "t": T, "laplace": Laplace}
    d = np.load(cfg.data)
    X, y, X_test = d["X_train"], d["y_train"], d["X_test"]
    raw_rows, fit_rows, cal_rows = d["raw_rows"], d["fit_rows"], d["cal_rows"]
    out: dict[str, np.ndarray | float] = {}
    for family in cfg.dists:
        for variant, rows in (("raw", raw_rows), ("fit", fit_rows)):
            model = NGBRegressor(Dist=families[family], n_estimators=cfg.n_estimators,
                                 random_state=cfg.seed, verbose=False)
            t0 = time.perf_counter()
            model.fit(X[rows], y[rows])
            out[f"{family}_{variant}_fit_seconds"] = time.perf_counter() - t0
            sets = {"test": X_test} if variant == "raw" else {"test": X_test,
                                                               "cal": X[cal_rows]}
            for name, X_set in sets.items():
                t0 = time.perf_counter()
                for p, values in _params(model, X_set, family).items():
                    out[f"{family}_{variant}_{name}_{p}"] = values
                out[f"{family}_{variant}_{name}_seconds"] = time.perf_counter() - t0
    np.savez(cfg.out, **out)


if __name__ == "__main__":
    main()
