"""``ebf migrate-model``: a format 1 model rewritten in format 2 predicts the same."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ebf import EmpiricalBayesianForestRegressor
from ebf.artifact import load, read_manifest, save
from pipelines.cli import main


def test_migrate_a_format_1_model(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.random((300, 3)), columns=["a", "b", "c"])
    y = (X["a"] * 3 + rng.normal(0, 0.1, 300)).rename("y")
    model = EmpiricalBayesianForestRegressor(n_estimators=2, trunk_max_leaves=3,
                                             random_state=0).fit(X, y)
    old = save(model, tmp_path / "old", format_version=1, metadata={"target": "y"})
    assert main(["migrate-model", str(old), str(tmp_path / "new")]) == 0
    assert "(format 1) to" in capsys.readouterr().out
    new = read_manifest(tmp_path / "new")
    assert new["format_version"] == 2 and len(new["shards"]) == 3
    assert new["metadata"]["user"] == {"target": "y"}
    np.testing.assert_array_equal(load(tmp_path / "new").predict(X), model.predict(X))
    assert main(["migrate-model", str(old), str(tmp_path / "new")]) == 2  # exists
    assert main(["migrate-model", str(old), str(tmp_path / "new"), "--overwrite"]) == 0
