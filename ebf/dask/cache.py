"""The workers' cache of loaded model parts: each branch (or a whole broadcast model) loaded
once per process and kept while it fits a share of the worker's memory.

Prediction tasks get a saved model's parts here (:func:`cached_part`, :func:`whole_model`):
a part is loaded from its shard on first use and kept in least recently used order within
:data:`CACHE_FRACTION` of the worker's memory limit (at least the part in use). Room is made
before a load, for the part's file size times the largest growth a settled part has shown
(:func:`settle_part`: a Mondrian forest adds its posterior), so a worker never holds the
parts it evicts and the one it loads at once. After every task the cache is emptied if the
process is above the share of its limit at which Dask spills or pauses
(:func:`relieve_memory`): Dask cannot spill this memory, and a worker paused for it would
never run the task that frees it. A later job on the same workers finds the parts loaded.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from ..artifact import ModelReader

logger = logging.getLogger(__name__)

__all__ = ["CACHE_FRACTION", "cache_peak_bytes", "cached_part", "clear_cache", "object_nbytes",
           "relieve_memory", "settle_part", "settle_whole", "whole_model"]

#: Share of a worker's memory limit its cache of loaded parts may fill (at least one part).
CACHE_FRACTION = 0.25
_cache_lock = threading.Lock()
_cache: OrderedDict[tuple, tuple[Any, int]] = OrderedDict()
_peak = [0]  # the most bytes of parts this process has held in its cache at once
_growth = [1.0]  # the largest ratio of a settled part's bytes to its file's seen here


def _memory_limit() -> int | None:
    try:
        from distributed import get_worker

        limit = get_worker().memory_manager.memory_limit
    except (ImportError, ValueError, AttributeError):
        return None
    return int(limit) if limit else None


def cached_part(reader: ModelReader, i: int) -> Any:
    """Part ``i`` of the model, loaded once per process and kept while it fits the cache.

    The cache is keyed by the model's URL, its hash and the part and holds parts in least
    recently used order, within :data:`CACHE_FRACTION` of the worker's memory limit. A part
    counts its file size when loaded and what it really holds once it has predicted
    (:func:`settle_part`: a Mondrian forest adds its posterior, two to three times the file);
    the part being returned always stays. Room is made before a part is loaded, for its
    file size times the largest growth seen so far, so a worker never holds the parts it
    evicts and the one it loads at once.

    Parameters
    ----------
    reader : ebf.artifact.ModelReader
    i : int

    Returns
    -------
    estimator
        The branch learner (or sub-sample forest); treat it as read-only.
    """
    return _cached((reader.url, reader.model_hash, int(i)), reader.part_bytes[int(i)],
                   lambda: reader.load_part(int(i)))


def settle_part(reader: ModelReader, i: int, part: Any) -> None:
    """Count part ``i`` in the cache at the bytes of the arrays it holds now."""
    _settle((reader.url, reader.model_hash, int(i)), part, reader.part_bytes[int(i)])


def _cached(key: tuple, file_bytes: int, load: Any) -> Any:
    """The cached value of ``key``, else ``load()`` (outside the lock: other threads may load
    other parts) after making room for ``file_bytes`` times the largest growth seen."""
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key][0]
        evicted = _evict(_budget() - file_bytes * _growth[0])
    if evicted:
        _release_memory()
    value = load()
    _store(key, value, file_bytes)
    return value


def _settle(key: tuple, value: Any, file_bytes: int) -> None:
    """Count ``value`` at the bytes it holds now (and learn how much loaded parts grow)."""
    size = object_nbytes(value)
    if file_bytes:
        _growth[0] = max(_growth[0], size / file_bytes)
    _store(key, value, size)


def _budget() -> float:
    limit = _memory_limit()
    return CACHE_FRACTION * limit if limit else float("inf")


def _evict(room: float) -> bool:
    """Drop least recently used parts until the cache holds at most ``room`` bytes (the
    lock held); whether any was dropped."""
    evicted = False
    while _cache and sum(s for _, s in _cache.values()) > room:
        _cache.popitem(last=False)
        evicted = True
    return evicted


def _store(key: tuple, part: Any, size: int) -> None:
    with _cache_lock:
        _cache.pop(key, None)
        evicted = _evict(_budget() - size)
        _cache[key] = (part, size)
        _peak[0] = max(_peak[0], sum(s for _, s in _cache.values()))
    if evicted:
        _release_memory()


def _relief_fraction() -> float | None:
    """The smallest share of its memory limit at which the worker acts (Dask's ``target``,
    ``spill`` or ``pause`` fractions), None if it never does."""
    import dask

    fractions = [dask.config.get(f"distributed.worker.memory.{k}", None)
                 for k in ("target", "spill", "pause")]
    fractions = [float(f) for f in fractions if f]
    return min(fractions) if fractions else None


def relieve_memory() -> bool:
    """Empty the cache if this worker's process uses more than the share of its memory
    limit at which Dask starts to act (:func:`_relief_fraction`); whether it did.

    Called at the end of every part task. The cache is memory Dask cannot spill: a worker
    paused for it would never run the task that frees it. Emptied, the next task loads its
    part again: slower, never stuck.
    """
    limit, fraction = _memory_limit(), _relief_fraction()
    if not limit or fraction is None:
        return False
    import psutil

    if psutil.Process().memory_info().rss <= fraction * limit:
        return False
    with _cache_lock:
        _cache.clear()
    _release_memory()
    logger.info("part cache emptied: the process is above %.0f%% of its memory limit",
                100 * fraction)
    return True


def _release_memory() -> None:
    """Give freed heap back to the system (glibc keeps it otherwise, and the worker's memory
    monitor, which cannot see that, would pause the worker)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to do
        pass


def object_nbytes(obj: Any, _seen: set | None = None, _depth: int = 0) -> int:
    """Bytes of the numpy arrays an object holds (attributes, lists, tuples, dicts; each
    array counted once, views by their base).

    Examples
    --------
    >>> a = np.zeros(10)
    >>> object_nbytes({"a": a, "b": [a, a[:5]], "c": (np.ones(2, np.int32),)})
    88
    """
    seen = set() if _seen is None else _seen
    if _depth > 8:
        return 0
    if isinstance(obj, np.ndarray):
        base = obj
        while isinstance(base.base, np.ndarray):
            base = base.base
        if id(base) in seen:
            return 0
        seen.add(id(base))
        return int(base.nbytes)
    if isinstance(obj, dict):
        items = obj.values()
    elif isinstance(obj, (list, tuple)):
        items = obj
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        if id(obj) in seen:
            return 0
        seen.add(id(obj))
        items = vars(obj).values()
    else:
        return 0
    return sum(object_nbytes(v, seen, _depth + 1) for v in items)


def clear_cache() -> None:
    """Drop every cached part of this process (and reset :func:`cache_peak_bytes`)."""
    with _cache_lock:
        _cache.clear()
        _peak[0] = 0


def cache_peak_bytes() -> int:
    """The most bytes of parts this process's cache has held at once."""
    return _peak[0]


def whole_model(model: Any) -> Any:
    """The model a task predicts with: a saved model (its :class:`ModelReader`, which is
    what travels in the graph) loaded whole once per worker process and kept in the cache of
    parts (so a later job on the same workers finds it loaded); a model object as it is.

    Each worker loads it from the model's URL itself (the driver reads nothing but the
    manifest), so no worker waits for another to send it, and a task rerun elsewhere after
    a worker died loads it there.

    Parameters
    ----------
    model : ebf.artifact.ModelReader or estimator

    Returns
    -------
    estimator
    """
    if not isinstance(model, ModelReader):
        return model
    return _cached((model.url, model.model_hash, "whole"), model.nbytes, model.load)


def settle_whole(model: Any, loaded: Any) -> None:
    """Count a saved model loaded by :func:`whole_model` at the bytes it holds now (after
    predicting: a Mondrian forest keeps its posterior), then relieve the memory if needed."""
    if isinstance(model, ModelReader):
        _settle((model.url, model.model_hash, "whole"), loaded, model.nbytes)
        relieve_memory()
