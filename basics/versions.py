"""The installed version of the library, for manifests and metadata."""

from __future__ import annotations

import importlib.metadata

__all__ = ["library_version"]

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
