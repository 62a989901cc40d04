import sys, numpy as np
import mondrian.bayesopt as bo
from mondrian import MondrianForestRegressor as M
noise = sys.argv[1]; calls = int(sys.argv[2]); seeds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
class P(M):
    def __init__(self, **kw):
        kw.setdefault("noise", noise); super().__init__(**kw)
    def get_params(self, deep=True): return M.get_params(self, deep)
P.__name__ = "MondrianForestRegressor"
if noise != "default": M.__init__.__kwdefaults__["noise"] = noise
def branin(x):
    x1, x2 = x
    return ((x2 - 5.1 / (4 * np.pi**2) * x1**2 + 5 / np.pi * x1 - 6) ** 2 + 10 * (1 - 1 / (8 * np.pi)) * np.cos(x1) + 10)
res = []
for seed in range(seeds):
    opt = bo.skopt_optimizer([(-5.0, 10.0), (0.0, 15.0)], n_initial_points=int(sys.argv[4]) if len(sys.argv) > 4 else 10, random_state=seed, **({"acq_optimizer_kwargs": {"n_points": int(sys.argv[5])}} if len(sys.argv) > 5 else {}))
    for _ in range(calls):
        x = opt.ask(); opt.tell(x, branin(x))
    res.append(min(opt.yi))
print(noise, calls, np.round(res, 3).tolist(), "mean", round(float(np.mean(res)), 3))
