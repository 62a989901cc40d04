"""Fixtures shared by the pipeline tests."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

TINY_FEATURES = ["x0", "x1", "x2"]


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> str:
    """A saved EBF regressor (Mondrian branches, 2 trees) fit on 300 rows of x0..x2 -> y.

    Its metadata records the target (``{"target": "y"}``), as ``ebf train`` does, so
    ``ebf evaluate`` finds it.
    """
    from ebf import EmpiricalBayesianForestRegressor
    from ebf.artifact import save

    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.random((300, 3)), columns=TINY_FEATURES)
    y = pd.Series(3 * X["x0"] + rng.normal(0, 0.1, 300), name="y")
    model = EmpiricalBayesianForestRegressor(branch="mondrian", n_estimators=2,
                                             trunk_max_leaves=2, random_state=0).fit(X, y)
    path = tmp_path_factory.mktemp("tiny") / "model"
    return str(save(model, path, metadata={"target": "y"}))
