"""cluster.image and ``ebf cluster dockerfile``: the image's Dockerfile, its Python and packages
the running environment's (what Dask compares between a client and its cluster), bokeh for
the dashboard, and a parse check of what it copies and runs (no docker here)."""

from __future__ import annotations

import importlib.metadata
import platform
import re
from pathlib import Path

import pytest

from basics.locations import file_kind
from cluster.image import (
    DASHBOARD_PACKAGES,
    PINNED_PACKAGES,
    PROJECT_PACKAGES,
    client_versions,
    dockerfile_text,
)
from pipelines.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _instructions(text: str) -> list[tuple[str, str]]:
    logical = re.sub(r"\\\n", " ", text)  # continuation lines joined
    return [tuple(line.split(None, 1)) for line in logical.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def _pins(text: str) -> dict[str, str]:
    """``{name: "==version" or ">=floor"}`` of the image's pip install."""
    (install,) = [rest for word, rest in _instructions(text)
                  if word == "RUN" and "pip install" in rest]
    return {m["name"]: m["spec"] for m in
            re.finditer(r'"(?P<name>[A-Za-z0-9_.-]+)(?P<spec>[=<>!~]=?[^"]+)"', install)}


def _installed(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def test_generated_pins_are_the_running_environments_versions(tmp_path, capsys):
    out = tmp_path / "Dockerfile"
    assert main(["cluster", "dockerfile", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"docker build -f {out} -t REGISTRY/ebf:TAG ." in err
    text = out.read_text()
    pins = _pins(text)
    for name in PINNED_PACKAGES:  # what Dask compares and ebf computes with
        version = _installed(name)
        assert pins.get(name) == (None if version is None else f"=={version}"), name
    assert {"numpy", "numba", "pyarrow", "pandas", "dask", "distributed", "scikit-learn",
            "scipy", "cloudpickle", "msgpack", "toolz"} <= set(pins)
    # the dashboard: bokeh always, at the client's version when it has one
    bokeh = _installed("bokeh")
    assert pins["bokeh"] == (f"=={bokeh}" if bokeh else DASHBOARD_PACKAGES["bokeh"])
    assert f"FROM python:{platform.python_version()}-slim" in text  # Dask compares Python too
    assert client_versions() == {k: v[2:] for k, v in pins.items() if v.startswith("==")}
    # both files are ebf's outputs: replaced only with --overwrite
    assert file_kind(out) == file_kind(f"{out}.dockerignore") == "cluster-spec"
    assert main(["cluster", "dockerfile", "--out", str(out)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert main(["cluster", "dockerfile", "--out", str(out), "--overwrite"]) == 0


def test_missing_packages_are_not_installed_and_bokeh_has_a_floor():
    text = dockerfile_text({"numpy": "2.1.3", "dask": "2024.12.1"}, python="3.12.8")
    assert _pins(text) == {"numpy": "==2.1.3", "dask": "==2024.12.1", "bokeh": ">=3.1.0"}
    assert "FROM python:3.12.8-slim" in text


def test_dockerfile_builds_the_package_the_manifests_run(tmp_path, capsys):
    """A parse check of the generated Dockerfile: known instructions, every package of the
    project copied (and let through its .dockerignore), an extra that exists, the commands
    the manifests run present."""
    import tomllib

    out = tmp_path / "Dockerfile"
    assert main(["cluster", "dockerfile", "--out", str(out)]) == 0
    capsys.readouterr()
    text = out.read_text()
    instructions = _instructions(text)
    known = {"FROM", "RUN", "WORKDIR", "COPY", "ENV", "USER", "ENTRYPOINT"}
    assert {word for word, _ in instructions} <= known
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = {p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]
                ["include"]}
    assert packages == set(PROJECT_PACKAGES)
    copied = {rest.split()[0] for word, rest in instructions if word == "COPY"}
    copied |= {f for word, rest in instructions if word == "COPY" for f in rest.split()[:-1]}
    assert packages <= copied
    for source in copied:
        assert (ROOT / source).exists(), f"COPY {source}: no such file in the repository"
    (install,) = [rest for word, rest in instructions if word == "RUN" and "pip install" in rest]
    extra = re.search(r'"\.\[(\w+)\]"', install)[1]
    assert extra in project["project"]["optional-dependencies"]
    python = re.search(r"FROM python:(\d+)\.(\d+)", text)
    floor = project["project"]["requires-python"].removeprefix(">=").split(".")
    assert (int(python[1]), int(python[2])) >= tuple(map(int, floor))
    assert 'ENTRYPOINT ["tini", "-g", "--"]' in text and "install -y --no-install-recommends " \
        "tini" in re.sub(r"\\\n", " ", text)
    ignore = Path(f"{out}.dockerignore").read_text().split()
    assert {f"!{p}" for p in copied} <= set(ignore) and "**" in ignore


@pytest.mark.parametrize("name", ["Dockerfile", "Dockerfile.dockerignore"])
def test_no_stale_dockerfile_is_shipped(name):
    """The image is generated from the client's environment: a Dockerfile in the repository
    would pin nobody's versions."""
    assert not (ROOT / "cluster" / "k8s" / name).exists()
