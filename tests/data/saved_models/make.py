"""Write the saved models of tests/test_saved_models.py: one small fitted model of every class
of the model-file allowlist, saved by the library as it was when the file was made (before
issue 41 renamed the implementation modules), beside the predictions they gave then.

Run once from the repository root: ``python tests/data/saved_models/make.py``. The files are
kept as they are: rerunning it with a later library would no longer test old files.
"""

import pathlib

import numpy as np

from ebf import (
    BARTRegressor,
    BayesianForestClassifier,
    BayesianForestRegressor,
    EmpiricalBayesianForestClassifier,
    EmpiricalBayesianForestRegressor,
    SMCTreeClassifier,
    SMCTreeRegressor,
    SubsampleForestClassifier,
    SubsampleForestRegressor,
    save,
)
from mondrian import (
    MondrianForestClassifier,
    MondrianForestRegressor,
    MondrianKernelClassifier,
    MondrianKernelRegressor,
)

HERE = pathlib.Path(__file__).parent
rng = np.random.default_rng(0)
X = rng.random((200, 3))
y = X[:, 0] + 0.1 * rng.standard_normal(200)
c = (X[:, 1] > 0.5).astype(np.int64)
models = {
    "bf_regressor": BayesianForestRegressor(n_estimators=2, random_state=0).fit(X, y),
    "bf_classifier": BayesianForestClassifier(n_estimators=2, random_state=0).fit(X, c),
    "ebf_regressor": EmpiricalBayesianForestRegressor(
        n_estimators=2, trunk_max_leaves=2, random_state=0).fit(X, y),
    "ebf_mondrian": EmpiricalBayesianForestRegressor(
        n_estimators=2, branch="mondrian", trunk_max_leaves=2, random_state=0).fit(X, y),
    "ebf_classifier": EmpiricalBayesianForestClassifier(
        n_estimators=2, trunk_max_leaves=2, random_state=0).fit(X, c),
    "ssf_regressor": SubsampleForestRegressor(
        n_estimators=2, n_subsamples=2, random_state=0).fit(X, y),
    "ssf_classifier": SubsampleForestClassifier(
        n_estimators=2, n_subsamples=2, random_state=0).fit(X, c),
    "mf_regressor": MondrianForestRegressor(n_estimators=2, random_state=0).fit(X, y),
    "mf_classifier": MondrianForestClassifier(n_estimators=2, random_state=0).fit(X, c),
    "kernel_regressor": MondrianKernelRegressor(n_mondrians=3, random_state=0).fit(X, y),
    "kernel_classifier": MondrianKernelClassifier(n_mondrians=3, random_state=0).fit(X, c),
    "smc_regressor": SMCTreeRegressor(n_particles=4, n_islands=1, random_state=0).fit(X, y),
    "smc_classifier": SMCTreeClassifier(n_particles=4, n_islands=1, random_state=0).fit(X, c),
    "bart_regressor": BARTRegressor(n_trees=2, n_iter=4, burn_in=1, random_state=0).fit(X, y),
}
expected = {}
for name, model in models.items():
    save(model, HERE / name)
    out = model.predict_proba(X[:10]) if hasattr(model, "predict_proba") else model.predict(X[:10])
    expected[name] = out
np.savez(HERE / "expected.npz", X=X[:10], **expected)
