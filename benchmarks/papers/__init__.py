"""The source papers' headline tables and figures, run on our code, side by side.

One :class:`~benchmarks.papers.core.Item` per table, figure or claim; each family module
(``taddy``, ``mf_regression``, ``kernel``, ``thesis_smc``, ``thesis_smc_model``,
``thesis_bart``, ``thesis_mf``, ``thesis_mf_online``) lists its items in ``ITEMS`` and, for
every claim that does not hold, its cause in ``CAUSES``. Run them with::

    python -m benchmarks.papers --items 'taddy.*' --budget quick

which writes ``benchmarks/results/papers/<item>.json`` and regenerates
``benchmarks/results/papers/REPRODUCTION.md``.
"""

from __future__ import annotations

import importlib

from .core import Item

#: The family modules, in the order of the table.
FAMILIES = ("taddy", "mf_regression", "kernel", "thesis_smc", "thesis_smc_model",
            "thesis_bart", "thesis_mf", "thesis_mf_online")


def _family(name: str):
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name == f"{__name__}.{name}":
            return None  # a family not written yet
        raise


def all_items() -> list[Item]:
    """Every item of every family, in table order; keys are unique."""
    items = [it for name in FAMILIES if (mod := _family(name)) for it in mod.ITEMS]
    keys = [it.key for it in items]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise RuntimeError(f"duplicate item keys: {dup}")
    return items


def all_causes() -> dict[str, str]:
    """Item key -> the cause written for a claim that does not hold."""
    return {k: v for name in FAMILIES if (mod := _family(name))
            for k, v in getattr(mod, "CAUSES", {}).items()}
