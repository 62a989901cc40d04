"""The kernels' records (``mondrian._records``): they pickle, and kernels take a handful of
arguments."""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

import numpy as np

import mondrian
from mondrian import MondrianForestRegressor
from mondrian._records import MondrianTree

#: Most arguments a numba kernel of ``mondrian/`` takes: records, not loose arrays.
MAX_KERNEL_ARGUMENTS = 8


def test_tree_record_pickles_with_its_arrays():
    rng = np.random.default_rng(0)
    X = rng.random((60, 2))
    model = MondrianForestRegressor(n_estimators=1, random_state=0).fit(X, X[:, 0])
    record = model.trees_[0].record()
    back = pickle.loads(pickle.dumps(record))
    assert type(back) is MondrianTree
    for a, b in zip(record, back, strict=True):
        np.testing.assert_array_equal(a, b)


def test_kernels_take_a_handful_of_arguments():
    root = Path(mondrian.__file__).parent
    wide = []
    for path in sorted(root.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and any(
                    "jit" in ast.unparse(d) for d in node.decorator_list):
                a = node.args
                n = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs)
                if n > MAX_KERNEL_ARGUMENTS:
                    wide.append(f"{path.name}:{node.name} ({n})")
    assert not wide, f"kernels with more than {MAX_KERNEL_ARGUMENTS} arguments: {wide}"
