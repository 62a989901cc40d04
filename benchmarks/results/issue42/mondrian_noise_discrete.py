import numpy as np, sys
from basics.metrics import coverage, nlpd
from mondrian import MondrianForestRegressor
levels = np.arange(1, 10) / 10
rng = np.random.default_rng(0)
n = 20000
X = rng.integers(0, 6, size=(2 * n, 5)) / 5.0
f = np.sin(3 * X[:, 0]) * 3 + 2 * X[:, 1] ** 2 + X[:, 2]
for noise_kind in ("gauss", "t3"):
    e = rng.normal(size=2 * n) if noise_kind == "gauss" else rng.standard_t(3, size=2 * n) / np.sqrt(3)
    y = f + e
    for nz in ("forest", "per_leaf"):
        m = MondrianForestRegressor(n_estimators=10, random_state=0, noise=nz).fit(X[:n], y[:n])
        d = m.predict_distribution(X[n:])
        g = coverage(y[n:], d, levels) - levels
        print(noise_kind, nz, "nlpd", round(float(nlpd(y[n:], d)), 3), np.round(g, 3).tolist(), "max", round(float(np.abs(g).max()), 3))
