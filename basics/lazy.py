"""Package attributes imported on first use (PEP 562).

A package whose ``__init__`` imports every submodule makes each process that needs one corner
of it pay for all of it: the command line's driver, which only reads a model's manifest and
head, would import every estimator, scikit-learn's model selection and SciPy's statistics.
:func:`lazy_exports` gives a package a module ``__getattr__`` and ``__dir__`` that import a
public name's home module when the name is first read (``from ebf import X`` included).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, namespace: dict[str, Any], homes: Mapping[str, str]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``, whose public names live in ``homes``.

    Parameters
    ----------
    package : str
        The package's ``__name__``.
    namespace : dict
        The package's ``globals()``: a name, once imported, is stored there (later reads
        do not call ``__getattr__``).
    homes : mapping of str to str
        Public name -> the (relative) module that defines it.

    Returns
    -------
    tuple of callables

    Examples
    --------
    >>> ns = {}
    >>> getattr_, dir_ = lazy_exports("basics", ns, {"lazy_exports": ".lazy"})
    >>> getattr_("lazy_exports") is lazy_exports, "lazy_exports" in ns
    (True, True)
    """
    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home, package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes})

    return __getattr__, __dir__
