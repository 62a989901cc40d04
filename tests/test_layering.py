"""The house plan holds: imports point down, nobody reaches into another package's (or
another subpackage's) private names, no module imports itself round a circle and no two
folders import each other.

The layers, bottom first (``docs/architecture.md``)::

    basics < mondrian < ebf < ebf.dask < cluster < pipelines < benchmarks

Every ``import`` statement of every module is read from its AST, at module level and inside
functions alike (an import moved into a function to dodge a circle is still a circle);
imports under ``if TYPE_CHECKING:`` never run and are left out.
``test_the_checks_can_fail`` shows that each rule fires on a module that breaks it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Layer names, bottom first; a module may import its own layer and the layers below.
LAYERS = ("basics", "mondrian", "ebf", "ebf.dask", "cluster", "pipelines", "benchmarks")

#: Third-party packages only the distributed layers may import.
DISTRIBUTED = frozenset({"dask", "distributed"})
NO_DASK_BELOW = LAYERS.index("ebf.dask")


@dataclass(frozen=True)
class Import:
    """One imported target: ``module`` (absolute, dotted) and ``name`` (or ``None``)."""

    source: str  # the importing module, dotted
    line: int
    module: str
    name: str | None


def module_name(path: Path, root: Path = ROOT) -> str:
    """Dotted name of the module in ``path`` (``ebf/dask/__init__.py`` -> ``ebf.dask``)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> int | None:
    """Index in :data:`LAYERS` of the layer holding ``module``; ``None`` for other code."""
    best = None
    for i, layer in enumerate(LAYERS):
        if module == layer or module.startswith(layer + "."):
            best = i  # the longest match wins: ebf.dask over ebf
    return best


def package_of(module: str) -> str | None:
    layer = layer_of(module)
    return None if layer is None else LAYERS[layer]


def _type_checking_only(tree: ast.Module) -> set[int]:
    """Ids of the import nodes under ``if TYPE_CHECKING:``: they never run (annotations)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out |= {id(sub) for stmt in node.body for sub in ast.walk(stmt)}
    return out


def imports(source: str, tree: ast.Module, is_package: bool) -> Iterator[Import]:
    """Every import in ``tree`` that can run, relative ones made absolute."""
    skip = _type_checking_only(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(source, node.lineno, alias.name, None)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = source.split(".")
                drop = node.level - 1 if is_package else node.level
                base = base[: len(base) - drop] if drop else base
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                yield Import(source, node.lineno, module, alias.name)


def read_modules(root: Path = ROOT) -> dict[str, tuple[ast.Module, bool]]:
    """Dotted name -> (AST, is a package ``__init__``) for every module of the layers."""
    out = {}
    for top in {layer.split(".")[0] for layer in LAYERS}:
        for path in sorted((root / top).rglob("*.py")):
            out[module_name(path, root)] = (ast.parse(path.read_text(), str(path)),
                                            path.name == "__init__.py")
    return out


def all_imports(modules: dict[str, tuple[ast.Module, bool]]) -> list[Import]:
    return [imp for name, (tree, is_pkg) in modules.items() for imp in imports(name, tree, is_pkg)]


def upward(found: Iterable[Import]) -> list[str]:
    """Imports of a higher layer, and of Dask below ``ebf.dask``."""
    bad = []
    for imp in found:
        mine = layer_of(imp.source)
        theirs = layer_of(imp.module)
        if theirs is None and imp.name is not None and imp.module in ("", "ebf"):
            theirs = layer_of(f"{imp.module}.{imp.name}".lstrip("."))
        if mine is not None and theirs is not None and theirs > mine:
            bad.append(f"{imp.source}:{imp.line} imports {imp.module} ({LAYERS[theirs]} is "
                       f"above {LAYERS[mine]})")
        top = imp.module.split(".")[0]
        if mine is not None and mine < NO_DASK_BELOW and top in DISTRIBUTED:
            bad.append(f"{imp.source}:{imp.line} imports {imp.module} below the Dask layer")
    return bad


def _private(dotted: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in dotted.split("."))


def private(found: Iterable[Import], modules: Iterable[str]) -> list[str]:
    """Imports of a private module or name of another package (layer)."""
    known = set(modules)
    bad = []
    for imp in found:
        mine, theirs = package_of(imp.source), package_of(imp.module)
        if theirs is None or mine == theirs:
            continue
        target = imp.module if imp.name is None else f"{imp.module}.{imp.name}"
        # ``from pkg import _mod`` and ``from pkg._mod import x`` are private; so is
        # ``from pkg.mod import _name`` (a name of the module, not a submodule of it)
        if _private(imp.module) or (imp.name is not None and imp.name.startswith("_")
                                    and target not in known or _private(target)):
            bad.append(f"{imp.source}:{imp.line} imports {target} (private to {theirs})")
    return bad


def circles(found: Iterable[Import], modules: Iterable[str]) -> list[list[str]]:
    """Strongly connected groups (size > 1, or a self-import) of the module import graph.

    An edge goes to the deepest repository module an import names (``from ebf.model import
    load`` -> ``ebf.model``; ``from ebf import model`` -> ``ebf.model``). Edges from a
    package ``__init__`` to its own submodules, and from a submodule to an ancestor
    package, are left out: a package re-exporting its members is not a circle.
    """
    known = set(modules)
    graph: dict[str, set[str]] = {m: set() for m in known}
    for imp in found:
        target = f"{imp.module}.{imp.name}" if imp.name else imp.module
        while target and target not in known:
            target = target.rpartition(".")[0]
        if not target or target not in graph:
            continue
        src = imp.source
        if target.startswith(src + ".") or src.startswith(target + "."):
            continue
        graph[src].add(target)
    return _strongly_connected(graph)


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; groups of two or more modules (or a self-loop)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = counter
                    counter += 1
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1 or node in graph[node]:
                    groups.append(sorted(group))
    return groups


def folder_of(module: str, modules: dict[str, tuple[ast.Module, bool]]) -> str:
    """The package (folder) holding ``module``: itself for a package ``__init__``."""
    if module in modules and modules[module][1]:
        return module
    return module.rpartition(".")[0]


def _inside(folder: str, owner: str) -> bool:
    return folder == owner or folder.startswith(owner + ".")


def private_across(found: Iterable[Import], modules: dict[str, tuple[ast.Module, bool]]
                   ) -> list[str]:
    """Imports of a private module or name from outside the subpackage that owns it.

    A private part (``_mod`` or ``_name``) belongs to the package (folder) that holds it: a
    private module to its package, a private name to its module's package. Modules of that
    package and of its subpackages may import it; a sibling or a parent package may not
    (``pipelines.importance`` importing ``pipelines.report.evaluate._run``), so every
    subpackage offers the others a public seam.
    """
    bad = []
    for imp in found:
        if layer_of(imp.module) is None:
            continue
        target = imp.module if imp.name is None else f"{imp.module}.{imp.name}"
        parts = target.split(".")
        first = next((i for i, p in enumerate(parts)
                      if p.startswith("_") and not p.startswith("__")), None)
        if first is None:
            continue
        owner = folder_of(".".join(parts[:first]), modules)
        if not _inside(folder_of(imp.source, modules), owner):
            bad.append(f"{imp.source}:{imp.line} imports {target} (private to {owner})")
    return bad


def folder_circles(found: Iterable[Import], modules: dict[str, tuple[ast.Module, bool]]
                   ) -> list[list[str]]:
    """Strongly connected groups of the folder (subpackage) import graph: an edge goes from
    the importing module's folder to the imported module's (the deepest repository module
    an import names, as in :func:`circles`). Edges between a package and its own
    subpackages are left out (a package uses its parts, a part its package's helpers); two
    sibling folders that import each other (``pipelines.report`` <-> ``pipelines.registry``)
    are a circle."""
    known = set(modules)
    graph: dict[str, set[str]] = {}
    for imp in found:
        target = f"{imp.module}.{imp.name}" if imp.name else imp.module
        while target and target not in known:
            target = target.rpartition(".")[0]
        if not target or imp.source not in known:
            continue
        a, b = folder_of(imp.source, modules), folder_of(target, modules)
        graph.setdefault(a, set())
        graph.setdefault(b, set())
        if not (_inside(a, b) or _inside(b, a)):
            graph[a].add(b)
    return _strongly_connected(graph)


MODULES = read_modules()
IMPORTS = all_imports(MODULES)


def test_every_layer_has_modules():
    for layer in LAYERS:
        assert any(package_of(m) == layer for m in MODULES), f"no modules found for {layer}"


def test_imports_point_down():
    bad = upward(IMPORTS)
    assert not bad, "imports of a higher layer:\n" + "\n".join(bad)


def test_no_private_names_of_other_packages():
    bad = private(IMPORTS, MODULES)
    assert not bad, "imports of another package's private names:\n" + "\n".join(bad)


def test_no_import_circles():
    found = circles(IMPORTS, MODULES)
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(g) for g in found)


def test_no_private_names_of_other_subpackages():
    bad = private_across(IMPORTS, MODULES)
    assert not bad, "imports of another subpackage's private names:\n" + "\n".join(bad)


def test_no_folder_circles():
    found = folder_circles(IMPORTS, MODULES)
    assert not found, "folders importing each other:\n" + "\n".join(" <-> ".join(g)
                                                                     for g in found)


def _fake(tmp_path: Path, files: dict[str, str]) -> dict[str, tuple[ast.Module, bool]]:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return read_modules(tmp_path)


def test_the_checks_can_fail(tmp_path):
    """Each rule reports a module built to break it, and passes the clean ones."""
    modules = _fake(tmp_path, {
        "basics/__init__.py": "",
        "basics/ok.py": "import numpy\n",
        "basics/up.py": "def f():\n    from ebf.model import load\n",
        "basics/dasky.py": "import dask.dataframe as dd\n",
        "mondrian/__init__.py": "from .forest import Forest\n",
        "mondrian/forest.py": "from basics.ok import numpy\n",
        "mondrian/_order.py": "",
        "ebf/__init__.py": "",
        "ebf/model.py": "from .reader import read\n",
        "ebf/reader.py": "def read():\n    from . import model\n",
        "ebf/peek.py": "from mondrian._order import preorder\nfrom mondrian.forest import _grow\n"
                       "from .typed import T\n",
        "ebf/typed.py": "from typing import TYPE_CHECKING\n"
                        "if TYPE_CHECKING:\n    from .peek import X\n",
        "ebf/dask/__init__.py": "from ..model import load\nimport distributed\n",
        "cluster/__init__.py": "", "pipelines/__init__.py": "", "benchmarks/__init__.py": "",
    })
    found = all_imports(modules)
    assert sorted(upward(found)) == [
        "basics.dasky:1 imports dask.dataframe below the Dask layer",
        "basics.up:2 imports ebf.model (ebf is above basics)",
    ]
    assert private(found, modules) == [
        "ebf.peek:1 imports mondrian._order.preorder (private to mondrian)",
        "ebf.peek:2 imports mondrian.forest._grow (private to mondrian)",
    ]
    assert circles(found, modules) == [["ebf.model", "ebf.reader"]]  # not peek <-> typed
    for check in (test_imports_point_down, test_no_private_names_of_other_packages,
                  test_no_import_circles):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(__name__ + ".IMPORTS", found)
            mp.setattr(__name__ + ".MODULES", modules)
            with pytest.raises(AssertionError):
                check()


def test_the_subpackage_checks_can_fail(tmp_path):
    """A private name reached into from a sibling or parent folder, and two sibling folders
    importing each other, are reported; a subpackage using its parent's private parts, and a
    package using its subpackages, are not."""
    modules = _fake(tmp_path, {
        **{f"{top}/__init__.py": "" for top in ("basics", "mondrian", "ebf", "cluster",
                                                "benchmarks")},
        "ebf/_base.py": "def _helper():\n    pass\n",
        "ebf/dask/__init__.py": "",
        "ebf/dask/fit.py": "from ebf._base import _helper\nfrom .._base import x\n",
        "pipelines/__init__.py": "",
        "pipelines/job.py": "from pipelines.report.evaluate import _run, evaluate\n",
        "pipelines/report/__init__.py": "",
        "pipelines/report/evaluate.py": "def f():\n    from pipelines.registry.lineage import y\n",
        "pipelines/report/compare.py": "from pipelines.report.evaluate import _run\n"
                                       "from pipelines.io import read\n",
        "pipelines/registry/__init__.py": "",
        "pipelines/registry/lineage.py": "",
        "pipelines/registry/retrain.py": "from pipelines.report import evaluate\n"
                                         "from pipelines.report._cache import z\n",
        "pipelines/io.py": "",
    })
    found = all_imports(modules)
    assert private_across(found, modules) == [
        "pipelines.job:1 imports pipelines.report.evaluate._run (private to pipelines.report)",
        "pipelines.registry.retrain:2 imports pipelines.report._cache.z (private to "
        "pipelines.report)",
    ]
    assert folder_circles(found, modules) == [["pipelines.registry", "pipelines.report"]]
    for check in (test_no_private_names_of_other_subpackages, test_no_folder_circles):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(__name__ + ".IMPORTS", found)
            mp.setattr(__name__ + ".MODULES", modules)
            with pytest.raises(AssertionError):
                check()
