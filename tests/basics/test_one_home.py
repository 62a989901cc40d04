"""Each shared fact has one home (issue 27): the constants and helpers that several packages
need are defined once, in ``basics``, and imported from there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("basics", "mondrian", "ebf", "cluster", "pipelines", "benchmarks")


def _sources() -> dict[str, str]:
    return {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8")
            for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


SOURCES = _sources()


def _homes(pattern: str) -> list[str]:
    rx = re.compile(pattern, re.M)
    return [path for path, text in SOURCES.items() if rx.search(text)]


@pytest.mark.parametrize(("pattern", "home"), [
    (r"^NO_NODE\s*=", "basics/flat_tree.py"),
    (r"^INDEX\s*=", "basics/flat_tree.py"),
    (r"^JIT\s*=", "basics/jit.py"),
    (r"^def preorder\(", "basics/flat_tree.py"),
    (r"^def check_trees\(", "basics/flat_tree.py"),
    (r"^PREDICT_BLOCK\s*=", "basics/predictive.py"),
    (r"^def check_levels\(", "basics/levels.py"),
    (r"^def replace_file\(", "basics/atomic.py"),
    (r"^\s+def predict_summary\(self, X: Any, quantiles", "basics/predictive.py"),
])
def test_defined_once(pattern, home):
    assert _homes(pattern) == [home]


def test_quantiles_have_one_home_per_kind_of_model():
    """The local regressors' ``predict_quantiles`` is the mixin's; the Dask regressors' lazy
    one (dask arrays: the estimators' method and the function behind it) and the Mondrian
    kernel ridge's (one Gaussian per row, no mixin) are the only others."""
    assert sorted(_homes(r"^[ ]*def predict_quantiles\(")) == [
        "basics/predictive.py", "ebf/dask/_estimators.py", "ebf/dask/distribution.py",
        "mondrian/_kernel_ridge.py"]


def test_files_are_replaced_in_one_place():
    """Every atomic file write goes through ``basics.atomic`` (the one ``os.replace``)."""
    assert _homes(r"os\.replace\(") == ["basics/atomic.py"]


def test_no_private_module_of_another_package():
    """``ebf`` imports ``mondrian`` through its public modules only (``mondrian._order`` was
    imported by ``ebf._tree_validation``)."""
    rx = re.compile(r"^\s*(from|import) mondrian\._", re.M)
    assert [p for p, text in SOURCES.items() if p.startswith("ebf/") and rx.search(text)] == []


def test_level_checks_have_one_rule():
    """No hand-written level range check is left outside ``basics.levels``."""
    rx = r"\(\w+ >= 0\) & \(\w+ <= 1\)|\(\w+ > 0\) & \(\w+ < 1\)"
    assert _homes(rx) == ["basics/levels.py"]
