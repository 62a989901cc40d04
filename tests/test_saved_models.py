"""Models saved by an earlier version of the library still load and predict the same.

``tests/data/saved_models`` holds one small model of every class of the model-file allowlist
(:data:`ebf.artifact.MODEL_CLASSES`), written before the implementation modules were renamed
(``make.py`` beside them), with the predictions they gave then. A model file names its class
by an allowlist key, never by a module, so renaming modules must leave them loadable.
"""

import json
import pathlib

import numpy as np
import pytest

from ebf import load
from ebf.artifact import MODEL_CLASSES

SAVED = pathlib.Path(__file__).parent / "data" / "saved_models"
EXPECTED = np.load(SAVED / "expected.npz")
NAMES = sorted(k for k in EXPECTED.files if k != "X")


@pytest.mark.parametrize("name", NAMES)
def test_a_model_saved_before_the_module_renames_loads_and_predicts_the_same(name):
    model = load(SAVED / name)
    X = EXPECTED["X"]
    out = model.predict_proba(X) if hasattr(model, "predict_proba") else model.predict(X)
    np.testing.assert_array_equal(out, EXPECTED[name])


def test_the_saved_models_cover_every_top_level_class_of_the_allowlist():
    classes = {json.loads((SAVED / name / "manifest.json").read_text())["class"]
               for name in NAMES}
    nested_only = {"ebf.Trunk", "ebf.ConstantBranch", "mondrian.MondrianKernelFeatures"}
    assert classes == set(MODEL_CLASSES) - nested_only
