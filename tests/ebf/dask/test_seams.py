"""The distributed layer talks to the local classes only through their documented seams.

``ebf/dask`` builds local objects (encoder, trunk, EBF / SSF) through ``from_summaries``,
``Trunk._from_arrays``, ``_fit_plan`` and ``_from_parts``, and updates an EBF through
``_update_encoded`` (``docs/architecture.md``); it never
writes their state. These tests read the source of ``ebf/dask`` (its AST) so that a change
that reaches into a local class fails here, not later in a parity test.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

DASK = Path(__file__).resolve().parents[3] / "ebf" / "dask"

#: Protected methods of local classes that ``ebf.dask`` may call: the documented seams
#: (``docs/architecture.md``) and scikit-learn's parameter validation (``_validate_params``).
SEAMS = frozenset({"_fit_plan", "_from_parts", "_from_arrays", "_validate_params",
                   "_update_encoded", "_set_auto_map", "_with_parts",
                   "_take_updates"})


def _sources() -> list[tuple[str, ast.Module]]:
    files = sorted(DASK.glob("*.py"))
    assert files, f"no sources under {DASK}"
    return [(f.name, ast.parse(f.read_text(), str(f))) for f in files]


def _owner(node: ast.expr) -> str:
    """``self`` for ``self.a``, the name for ``x.a``, ``?`` for anything else."""
    return node.id if isinstance(node, ast.Name) else "?"


def _written(tree: ast.Module) -> list[tuple[int, str, str]]:
    """``(line, owner, attribute)`` of every attribute assignment target."""
    out = []
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = list(node.targets)
        for target in targets:
            for sub in ast.walk(target):
                if isinstance(sub, ast.Attribute):
                    out.append((sub.lineno, _owner(sub.value), sub.attr))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("setattr", "delattr"):
            out.append((node.lineno, "?", f"{node.func.id}(...)"))
    return out


@pytest.mark.parametrize("name, tree", _sources(), ids=lambda v: v if isinstance(v, str) else "")
def test_no_writes_to_other_objects_private_state(name, tree):
    bad = [f"{name}:{line} {owner}.{attr}" for line, owner, attr in _written(tree)
           if owner not in ("self", "cls") and (attr.startswith("_") or owner == "?")]
    assert not bad, f"ebf/dask writes private state of other objects: {bad}"


@pytest.mark.parametrize("name, tree", _sources(), ids=lambda v: v if isinstance(v, str) else "")
def test_no_writes_to_local_estimators(name, tree):
    """No attribute of an object called like a local model is assigned (``trunk.x = ...``)."""
    local_names = {"trunk", "local", "encoder", "model", "estimator", "plan"}
    bad = [f"{name}:{line} {owner}.{attr}" for line, owner, attr in _written(tree)
           if owner in local_names]
    assert not bad, f"ebf/dask assigns attributes of local objects: {bad}"


@pytest.mark.parametrize("name, tree", _sources(), ids=lambda v: v if isinstance(v, str) else "")
def test_protected_calls_only_through_seams(name, tree):
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            attr, owner = node.func.attr, _owner(node.func.value)
            is_protected = attr.startswith("_") and not attr.startswith("__")
            if is_protected and owner not in ("self", "cls") and attr not in SEAMS:
                bad.append(f"{name}:{node.lineno} {owner}.{attr}()")
    assert not bad, f"ebf/dask calls protected methods that are not documented seams: {bad}"


@pytest.mark.parametrize("name, tree", _sources(), ids=lambda v: v if isinstance(v, str) else "")
def test_no_private_imports_from_the_local_layer(name, tree):
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level >= 2:  # from ..x import (ebf core)
            bad += [f"{name}:{node.lineno} {a.name}" for a in node.names
                    if a.name.startswith("_")]
    assert not bad, f"ebf/dask imports private names of ebf: {bad}"


def test_the_checks_catch_a_private_write():
    """The checks themselves can fail."""
    tree = ast.parse("trunk._set_fitted(a)\nencoder._state = 1\nlocal.trunk_max_leaves = 3\n"
                     "from ..features import _local_codes\n")
    assert _written(tree) == [(2, "encoder", "_state"), (3, "local", "trunk_max_leaves")]
    with pytest.raises(AssertionError):
        test_protected_calls_only_through_seams("x.py", tree)
    with pytest.raises(AssertionError):
        test_no_writes_to_other_objects_private_state("x.py", tree)
    with pytest.raises(AssertionError):
        test_no_writes_to_local_estimators("x.py", tree)
    with pytest.raises(AssertionError):
        test_no_private_imports_from_the_local_layer("x.py", tree)
