"""Compute ``benchmarks/data/svm_digits_grid.csv``, the SVM grid that stands in for HPOlib's
SVM-grid of the Mondrian regression paper's Table 3 (not obtainable): validation error of
scikit-learn's ``SVC`` (RBF kernel) on the digits data set shipped with scikit-learn, after a
PCA, over 14 values of C x 10 of gamma x 10 PCA sizes = 1,400 points (the size of HPOlib's
grid). Run once: ``PYTHONPATH=. python -m benchmarks.papers.make_svm_grid``.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "data" / "svm_digits_grid.csv"
C_VALUES = np.logspace(-2, 4.5, 14)
GAMMAS = np.logspace(-5, 0, 10)
COMPONENTS = (4, 6, 8, 12, 16, 20, 24, 32, 48, 64)


def main() -> int:
    from sklearn.datasets import load_digits
    from sklearn.decomposition import PCA
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    X, y = load_digits(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    X, y = X[order], y[order]
    tr, va = slice(0, 1000), slice(1000, None)
    rows = ["log10_C,log10_gamma,pca_components,validation_error_percent"]
    for k in COMPONENTS:
        pca = PCA(n_components=k, random_state=0).fit(X[tr])
        scaler = StandardScaler().fit(pca.transform(X[tr]))
        Ztr, Zva = (scaler.transform(pca.transform(X[s])) for s in (tr, va))
        for c, g in itertools.product(C_VALUES, GAMMAS):
            err = 100.0 * np.mean(SVC(C=c, gamma=g).fit(Ztr, y[tr]).predict(Zva) != y[va])
            rows.append(f"{np.log10(c):.4f},{np.log10(g):.4f},{k},{err:.4f}")
        print(k, flush=True)
    OUT.write_text("\n".join(rows) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
