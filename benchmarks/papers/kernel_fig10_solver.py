"""Evidence for ``kernel.fig10``: how the solver of the Mondrian kernel's weights shapes their
distribution. The item fits them by exact ridge (as Fig. 9); the authors fitted them by
stochastic gradient descent, one epoch per cut, each cut's weight copied to its two
children, from all-zero weights. Here, on the item's data, seed and lifetime (read from its
committed JSON), the kernel's weights are fitted by exact ridge and by scikit-learn's SGD
from zero weights (the Fig. 8 baselines' solver) after 1 and 10 epochs; the forest's cell
values are the item's. Run::

    python -m benchmarks.papers.kernel_fig10_solver

which writes ``benchmarks/results/papers/kernel.fig10_solver.json``.
"""

from __future__ import annotations

import json

import numpy as np

from benchmarks.common import write_json

from . import kernel_runs as kr
from .core import RESULTS
from .kernel import _cpu, _share_near_zero

OUT = RESULTS / "kernel.fig10_solver.json"


def main() -> dict:
    from mondrian import MondrianKernelFeatures

    item = json.loads((RESULTS / "kernel.fig10.json").read_text())
    ours, seed = item["ours"], int(item["seed"])
    lam, m, band = float(ours["lifetime"]), int(ours["m"]), float(ours["band"])
    train, _, test = _cpu(item["budget"], seed)
    f = MondrianKernelFeatures(n_mondrians=m, lifetime=lam, random_state=seed).fit(train[0])
    fit = kr.kernel_and_forest(f, lam, train, test)
    Z, Zt = f.transform(train[0], lifetime=lam), f.transform(test[0], lifetime=lam)
    rows = {"exact ridge (the item)": (fit["kernel_weights"], fit["kernel"]),
            "forest cell values (the item)": (fit["forest_cells"], fit["forest"])}
    for epochs in (1, 10):
        w, c = kr.sgd_ridge(Z, train[1], epochs=epochs, seed=seed)
        rows[f"SGD from zero, {epochs} epoch(s)"] = (w, kr.relative_error(c + Zt @ w, test[1]))
    out = {"lifetime": lam, "m": m, "band": band, "seed": seed, "budget": item["budget"],
           "weights": {name: {"median_abs": float(np.median(np.abs(w))),
                              "share_within_band": _share_near_zero(w, band),
                              "std": float(np.std(w)), "test_error": float(err)}
                       for name, (w, err) in rows.items()}}
    write_json(out, OUT)
    return out


if __name__ == "__main__":
    for name, row in main()["weights"].items():
        print(f"{name}: median |w| {row['median_abs']:.3f}, share within band "
              f"{row['share_within_band']:.2f}, std {row['std']:.3f}, test error "
              f"{row['test_error']:.1f}%")
    print(f"wrote {OUT}")
