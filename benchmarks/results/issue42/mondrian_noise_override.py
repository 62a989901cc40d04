"""Run a bench with MondrianForestRegressor's noise overridden (issue 42, mondrian_noise.md): python mondrian_noise_override.py NOISE|default MODULE ARGS..."""
import functools, importlib, sys
import mondrian
from mondrian import MondrianForestRegressor as M
noise, modname, *args = sys.argv[1:]
class Patched(M):
    def __init__(self, **kw):
        kw["noise"] = noise if noise != "default" else M().noise
        super().__init__(**kw)
    def get_params(self, deep=True):
        return M.get_params(self, deep)
Patched.__name__ = "MondrianForestRegressor"
mondrian.MondrianForestRegressor = Patched
mod = importlib.import_module(modname)
if hasattr(mod, "MondrianForestRegressor"):
    mod.MondrianForestRegressor = Patched
sys.exit(mod.main(args))
