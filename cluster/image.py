"""The container image of ``ebf``'s Dask scheduler, workers and jobs, pinned to the client.

A Dask client compares its versions with the scheduler's and the workers' when it connects
(``distributed.versions.get_versions``: Python, dask, distributed, msgpack, cloudpickle,
tornado, toolz, numpy, pandas, lz4) and warns on any mismatch; a model pickled or a kernel
compiled by one numba, numpy or scikit-learn and run by another can fail or differ. So the
image is not a fixed recipe: :func:`dockerfile_text` writes a Dockerfile whose Python and
packages are the versions of the environment that runs it (:func:`client_versions`, read
from ``importlib.metadata``), the client's. Run ``ebf cluster dockerfile --out FILE`` (or
this module) in the environment that will run ``ebf train ... --scheduler``, then build the
image from the repository's root and push it where the cluster pulls from.

The image holds ``ebf`` from the checkout (the ``s3`` extra: s3fs for data and models on
S3), the pinned packages, and bokeh, without which the scheduler's dashboard (port 8787)
shows only "please install bokeh". ``tini`` is its PID 1 (it forwards SIGTERM to ``dask
worker`` and reaps the nanny's children), and it runs as an unprivileged user.

Examples
--------
>>> pins = client_versions()
>>> pins["dask"] == __import__("dask").__version__
True
>>> "bokeh" in dockerfile_text(pins)
True
"""

from __future__ import annotations

import platform
from collections.abc import Mapping, Sequence

from basics.versions import installed_versions

__all__ = ["DASHBOARD_PACKAGES", "PINNED_PACKAGES", "PROJECT_PACKAGES", "client_versions",
           "dockerfile_text", "dockerignore_text", "python_version"]

#: What the client, the scheduler and the workers must share: what Dask compares when a
#: client connects (``distributed.versions``: its required and optional packages) and what
#: ebf computes with (numba's kernels, pyarrow's Parquet, scikit-learn's estimators, scipy).
PINNED_PACKAGES = ("numpy", "numba", "pyarrow", "pandas", "dask", "distributed",
                   "scikit-learn", "scipy", "cloudpickle", "msgpack", "toolz", "tornado", "lz4")
#: The dashboard's packages: installed in the image whether or not the client has them (at
#: the client's version when it does; else at distributed's own minimum).
DASHBOARD_PACKAGES = {"bokeh": ">=3.1.0"}
#: The project's files the image copies (the packages of the wheel and what pip needs).
PROJECT_PACKAGES = ("basics", "mondrian", "ebf", "cluster", "pipelines")
_PROJECT_FILES = ("pyproject.toml", "README.md", "LICENSE")


def python_version() -> str:
    """This interpreter's ``major.minor.micro``: the tag of the image's Python.

    Examples
    --------
    >>> import sys
    >>> python_version() == "%d.%d.%d" % sys.version_info[:3]
    True
    """
    return platform.python_version()


def client_versions(packages: Sequence[str] = (*PINNED_PACKAGES, *DASHBOARD_PACKAGES)
                    ) -> dict[str, str]:
    """The installed version of each of ``packages`` in this environment (absent ones left out).

    Parameters
    ----------
    packages : sequence of str
        Distribution names (default: :data:`PINNED_PACKAGES` and the dashboard's).

    Returns
    -------
    dict of str to str
        ``{name: version}`` as ``importlib.metadata`` reports them, in ``packages``' order.

    Examples
    --------
    >>> client_versions(["numpy", "no-such-package-here"]) == {
    ...     "numpy": __import__("numpy").__version__}
    True
    """
    return installed_versions(packages)  # one absent here need not be on the workers


def _requirements(versions: Mapping[str, str]) -> list[str]:
    pins = [f"{name}=={versions[name]}" for name in PINNED_PACKAGES if name in versions]
    pins += [f"{name}=={versions[name]}" if name in versions else f"{name}{floor}"
             for name, floor in DASHBOARD_PACKAGES.items()]
    return pins


def dockerfile_text(versions: Mapping[str, str] | None = None, *, python: str | None = None,
                    extras: Sequence[str] = ("s3",), comment: str = "") -> str:
    """A Dockerfile of ``ebf``'s image, its Python and packages pinned to ``versions``.

    Parameters
    ----------
    versions : mapping of str to str, optional
        ``{distribution: version}`` (default: :func:`client_versions`, this environment's).
        Each of :data:`PINNED_PACKAGES` present is installed at that version; bokeh at its
        version if present, else at distributed's minimum.
    python : str, optional
        The ``python:<python>-slim`` base image's tag (default: :func:`python_version`).
    extras : sequence of str, default=("s3",)
        ``ebf``'s extras to install (``s3``: s3fs).
    comment : str, optional
        Lines to put at the top as comments (e.g. the command that made it).

    Returns
    -------
    str
        Build it from the repository's root: ``docker build -f FILE -t IMAGE .``.

    Examples
    --------
    >>> text = dockerfile_text({"numpy": "2.1.3", "dask": "2024.12.1"}, python="3.12.8")
    >>> "FROM python:3.12.8-slim" in text, '"numpy==2.1.3"' in text, '"bokeh>=3.1.0"' in text
    (True, True, True)
    """
    versions = client_versions() if versions is None else dict(versions)
    python = python_version() if python is None else python
    target = f".[{','.join(extras)}]" if extras else "."
    install = " \\\n    ".join(f'"{r}"' for r in [target, *_requirements(versions)])
    copies = "\n".join(f"COPY {p} {p}" for p in PROJECT_PACKAGES)
    header = "".join(f"# {line}".rstrip() + "\n" for line in comment.splitlines())
    return header + f"""\
# ebf's image for the Dask scheduler, workers and jobs: Python and the packages Dask
# compares between a client and its cluster at the versions of the client that wrote it, so
# make it again (ebf cluster dockerfile) whenever the client's environment changes.
# Build it from the repository's root (the build context), tag it for a registry the cluster
# pulls from and push it:
#   docker build -f THIS_FILE -t REGISTRY/ebf:TAG .
#   docker push REGISTRY/ebf:TAG
FROM python:{python}-slim

# tini as PID 1: forwards SIGTERM to `dask worker` and reaps its nanny's children
RUN apt-get update && apt-get install -y --no-install-recommends tini \\
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/ebf
COPY {' '.join(_PROJECT_FILES)} ./
{copies}
# ebf from this checkout; the client's versions of what Dask compares and ebf computes with;
# bokeh for the dashboard (without it port 8787 shows only "please install bokeh")
RUN pip install --no-cache-dir \\
    {install}

# numba caches its compiled kernels here: writable by the image's user
ENV NUMBA_CACHE_DIR=/tmp/numba-cache
RUN useradd --create-home --uid 1000 dask
USER dask
WORKDIR /home/dask
ENTRYPOINT ["tini", "-g", "--"]
"""


def dockerignore_text(comment: str = "") -> str:
    """What the build leaves out of its context: everything but what the Dockerfile copies.

    Docker (BuildKit) reads it as ``<Dockerfile>.dockerignore`` beside the Dockerfile; without
    it the whole checkout (virtual environments, data) is sent to the builder.

    Examples
    --------
    >>> dockerignore_text().splitlines()[:2]
    ['**', '!pyproject.toml']
    """
    header = "".join(f"# {line}".rstrip() + "\n" for line in comment.splitlines())
    kept = "".join(f"!{name}\n" for name in (*_PROJECT_FILES, *PROJECT_PACKAGES))
    return f"{header}**\n{kept}**/__pycache__\n"
