"""``REGISTRY[@version]``: a model named by its registry wherever a model directory is taken.

:func:`resolve_model` turns ``REGISTRY[@version]`` (a root, or ``ROOT/models/NAME``, and
``@3`` / ``@v3`` / ``@v0003``; without a version the current one) into the verified model
directory of that version (:meth:`pipelines.registry.store.Registry.verified_model`), and
returns a plain model directory unchanged; :func:`is_registry` tells the two apart.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from basics.places import Place

from .files import RegistryError, split_spec
from .store import Registry

__all__ = ["is_registry", "resolve_model"]


def is_registry(url: str | os.PathLike,
                storage_options: Mapping[str, Any] | None = None) -> bool:
    """Whether ``url`` is a registry root or ``ROOT/models/NAME`` (not a model directory).

    Examples
    --------
    >>> import tempfile
    >>> is_registry(tempfile.mkdtemp())
    False
    """
    try:
        return Registry.at(os.fspath(url), storage_options) is not None
    except RegistryError:  # a root with no model or several: a registry all the same
        return True


def resolve_model(spec: str | os.PathLike,
                  storage_options: Mapping[str, Any] | None = None) -> str:
    """The model directory ``spec`` names: a version in a registry, or ``spec`` itself.

    Parameters
    ----------
    spec : str or path-like
        ``REGISTRY[@version]`` (see :meth:`Registry.parse`; without a version, the current
        one), or a model directory, returned unchanged.
    storage_options : dict, optional

    Returns
    -------
    str
        A model directory (local path or URL), for :func:`pipelines.artifacts.open_artifact`.

    Raises
    ------
    RegistryError
        ``@version`` after something that is no registry, a root holding several models.
    MissingVersionError
        A version that is not there, an empty registry, or no current version.

    Examples
    --------
    >>> resolve_model("models/friedman")  # a plain model directory  # doctest: +SKIP
    'models/friedman'
    >>> resolve_model("registry@2")  # doctest: +SKIP
    '/home/me/registry/models/ebf/v0002/model'
    """
    text = os.fspath(spec)
    where, version = split_spec(text)
    registry = Registry.at(where, storage_options)
    if registry is None:
        if version is None or Place.of(text, storage_options).lexists():
            return text
        raise RegistryError(
            f"{text}: {where} is not a model registry (no models/ directory, not "
            "ROOT/models/NAME), so @version means nothing; pass a registry or a model directory")
    return registry.verified_model(registry.resolve(version))
