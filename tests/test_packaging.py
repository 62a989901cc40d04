"""What the wheel holds, and the top-level names it shares with users' folders.

The distribution ``ebf`` installs five top-level packages: ``basics``, ``ebf``, ``mondrian``,
``pipelines``, ``cluster`` (docs/architecture.md, "Import paths"); never ``tests``,
``benchmarks`` or ``examples``. A user's project with a folder of the same name first on
``sys.path`` (a script or ``python -m`` run from that project) imports the folder instead;
the ``ebf`` command, a console script, does not put the current directory on ``sys.path``,
so it runs the installed packages wherever it is run from.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"basics", "ebf", "mondrian", "pipelines", "cluster"}


def test_the_wheel_holds_exactly_the_intended_top_level_packages():
    """The packages setuptools finds with the project's own [tool.setuptools.packages.find]
    (a namespace-aware search, setuptools' default in pyproject.toml), as the wheel build
    does: the five packages and their subpackages, no tests, benchmarks or examples."""
    from setuptools import find_namespace_packages

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    find = config["packages"]["find"]
    assert find.get("namespaces", True) and set(find) <= {"include", "exclude", "namespaces"}
    found = find_namespace_packages(where=str(ROOT), include=find["include"],
                                    exclude=find.get("exclude", ()))
    assert {name.split(".")[0] for name in found} == PACKAGES
    assert {"ebf.dask", "pipelines.cli", "pipelines.registry"} <= set(found)
    for name in PACKAGES:  # each a regular package: its __init__ is what imports
        assert (ROOT / name / "__init__.py").is_file()


@pytest.fixture
def project(tmp_path):
    """A user's project with its own ``pipelines``, ``cluster`` and ``basics`` packages."""
    for name in ("pipelines", "cluster", "basics"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
    return tmp_path


def _where(project: Path, *flags: str) -> list[str]:
    """Where ``pipelines``, ``cluster`` and ``basics`` come from in a Python started in
    ``project`` (the test's own search path, made absolute, kept)."""
    env = dict(os.environ)
    path = [os.path.abspath(p) for p in sys.path if p and os.path.isdir(p)]
    env["PYTHONPATH"] = os.pathsep.join(path)
    code = ("import os, importlib.util as u; print(*(u.find_spec(m).origin.startswith("
            "os.getcwd()) for m in ('pipelines', 'cluster', 'basics')))")  # found, not run
    out = subprocess.run([sys.executable, *flags, "-c", code], cwd=project, env=env,
                         capture_output=True, text=True, check=True, timeout=60)
    return out.stdout.split()


def test_a_users_folder_shadows_the_package_when_its_project_is_first_on_the_path(project):
    """The conflict the docs describe: ``python -c`` / ``python -m`` / a script put their
    folder first, so the user's ``pipelines/`` wins (fix: rename it, or run from elsewhere)."""
    assert _where(project) == ["True", "True", "True"]


def test_a_folder_without_init_does_not_shadow(project):
    """A plain folder (no ``__init__.py``) is only a namespace portion: the regular package
    found later on the path wins, as the docs say."""
    for name in ("pipelines", "cluster", "basics"):
        (project / name / "__init__.py").unlink()
    assert _where(project) == ["False", "False", "False"]


def test_the_ebf_command_is_not_shadowed(project):
    """A console script (``ebf``) runs with its own folder first, not the current one: as
    ``python -P`` does, which the test uses to start one cheaply."""
    assert _where(project, "-P") == ["False", "False", "False"]
    script = Path(sys.executable).with_name("ebf")
    if script.is_file():  # the installed command: no path juggling of its own
        text = script.read_text(errors="replace")
        assert "from pipelines.entry import main" in text and "sys.path" not in text
