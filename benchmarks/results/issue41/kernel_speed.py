"""Kernel speed, one tree of the code: best-of-5 CPU seconds of fits and predictions."""
import json, sys, time
import numpy as np
from ebf import BayesianForestRegressor, BARTRegressor, SMCTreeRegressor
from mondrian import MondrianForestRegressor

def best(f, k=5):
    out = []
    for _ in range(k):
        t0 = time.process_time(); f(); out.append(time.process_time() - t0)
    return min(out)

rng = np.random.default_rng(0)
X = rng.random((200_000, 8)); y = 10 * np.sin(np.pi * X[:, 0] * X[:, 1]) + 5 * X[:, 2] + rng.standard_normal(200_000)
Xs, ys = X[:20_000], y[:20_000]
bf = BayesianForestRegressor(n_estimators=10, random_state=0, n_jobs=1).fit(Xs, ys)
mf = MondrianForestRegressor(n_estimators=10, random_state=0, n_jobs=1).fit(Xs, ys)
r = {}
r["BF fit 20k x 10 trees"] = best(lambda: BayesianForestRegressor(n_estimators=10, random_state=0, n_jobs=1).fit(Xs, ys), 3)
r["BF predict 200k (mean, std)"] = best(lambda: bf.predict(X, return_std=True))
r["BF predict_summary 200k"] = best(lambda: bf.predict_summary(X))
r["MF fit 20k x 10 trees"] = best(lambda: MondrianForestRegressor(n_estimators=10, random_state=0, n_jobs=1).fit(Xs, ys), 3)
r["MF predict 200k (mean, std)"] = best(lambda: mf.predict(X, return_std=True))
r["MF predict_summary 200k"] = best(lambda: mf.predict_summary(X))
Xb, yb = X[:500, :5], y[:500]
r["BART pg fit 500 rows, 50 trees, 100 iter"] = best(lambda: BARTRegressor(n_trees=50, n_iter=100, burn_in=20, random_state=0).fit(Xb, yb), 3)
r["BART cgm fit 500 rows, 50 trees, 300 iter"] = best(lambda: BARTRegressor(n_trees=50, n_iter=300, burn_in=50, sampler="cgm", random_state=0).fit(Xb, yb), 3)
Xc, yc = X[:2000, :5], y[:2000]
r["SMC prior fit 2000 rows, 100 particles"] = best(lambda: SMCTreeRegressor(n_particles=100, n_islands=2, random_state=0).fit(Xc, yc), 3)
json.dump(r, open(sys.argv[1], "w"), indent=1)
