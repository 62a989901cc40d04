"""Installed versions: the library's, for manifests and metadata, and any packages' (the
pins of an MLflow Model, of the cluster image, of benchmark reports)."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterable

__all__ = ["installed_versions", "library_version"]

#: The version of this source tree, used when the distribution is not installed.
SOURCE_VERSION = "0.1.0"


def library_version() -> str:
    """The installed ``ebf`` distribution's version (the source tree's when not installed).

    Examples
    --------
    >>> library_version()  # doctest: +SKIP
    '0.1.0'
    """
    try:
        return importlib.metadata.version("ebf")
    except importlib.metadata.PackageNotFoundError:
        return SOURCE_VERSION


def installed_versions(names: Iterable[str]) -> dict[str, str]:
    """The installed version of each distribution of ``names`` (absent ones left out), in
    their order.

    Examples
    --------
    >>> installed_versions(["numpy", "no-such-package-here"]) == {
    ...     "numpy": __import__("numpy").__version__}
    True
    """
    out = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out
