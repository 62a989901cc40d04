"""Models whose parts stay on the workers: handles, the source of a sharded graph, gathering.

A fitted ensemble is a small head (encoder, trunk, calibration map) and large parts (one
forest per branch, or per sub-sample): hundreds of MB to GB for Mondrian branches. The
Dask estimators keep every part in the memory of the worker that grew it, as a
``distributed.Future``, and their fitted model (``model_``) holds a :class:`LivePart` in
its place: the client holds the head and the handles only. Prediction, scoring and
recalibration build their graphs on :class:`LiveModel`, the same source interface as a
saved model's :class:`ebf.artifact.ModelReader` (``head()``, ``n_parts``), so the graph of
:func:`ebf.dask.sharded.sharded_blocks` holds the keys of the parts, never their bytes:
each part task runs where its part is, and only the routed rows move. Numbers are those
of the local model's one-pass summary, bit for bit.

A local model given to a Dask function (``predict_frame(model, X)``, ``score``,
``recalibrate``, a Dask estimator made ``from_local``) has its parts scattered to the
workers once per client (:func:`live_model`; later calls with the same part objects reuse
them). :func:`gather_model` brings the parts back into a local model (``to_local()``).

A part on the workers lives as long as its handle; it cannot be recomputed if the worker
holding it dies (the rows it was fit on are gone): the job then fails with Dask's error
for a lost future, and the model must be gathered or saved before a worker is retired
(save to a path to serve from shards that any worker can read).
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.base import clone

from ..artifact import ModelHead
from ..importance import normalised, total_decrease, trunk_decrease

__all__ = ["LiveModel", "LivePart", "client_of", "feature_importances", "gather_model",
           "has_live_parts", "is_ensemble", "live_model", "model_parts"]

#: The fitted attributes of an ensemble but its parts (what a :class:`ModelHead` holds).
_HEAD_ATTRS = ("encoder_", "n_features_in_", "feature_names_in_", "entropy_", "classes_",
               "class_calibration_", "recalibration_", "trunk_", "subsample_sizes_")


@dataclass(frozen=True, eq=False)
class LivePart:
    """A fitted part (branch forest or sub-sample forest) held by a worker.

    Attributes
    ----------
    future : distributed.Future
        The part, in a worker's memory.
    index : int
        Its place among the model's parts.
    """

    future: Any
    index: int

    def __reduce__(self) -> Any:
        raise TypeError(
            f"part {self.index} of this model is on the Dask workers; gather the model "
            "first (to_local() of the Dask estimator) to pickle or save it.")


def is_ensemble(model: Any) -> bool:
    """Whether ``model`` is a fitted EBF or SSF (whose parts can live on the workers)."""
    return hasattr(model, "branches_") or hasattr(model, "subsamples_")


def model_parts(model: Any) -> list:
    """The parts of a fitted ensemble: ``branches_`` of an EBF, ``subsamples_`` of an SSF."""
    return list(model.branches_ if hasattr(model, "trunk_") else model.subsamples_)


def has_live_parts(model: Any) -> bool:
    """Whether any part of ``model`` (an ensemble) is on the workers."""
    parts = getattr(model, "branches_", None) or getattr(model, "subsamples_", None) or []
    return any(isinstance(p, LivePart) for p in parts)


def _head(model: Any, n_parts: int) -> ModelHead:
    attrs = {k: getattr(model, k) for k in _HEAD_ATTRS if hasattr(model, k)}
    return ModelHead(clone(model), attrs, n_parts)


class LiveModel:
    """A model's head and the futures of its parts: the source of a sharded graph.

    Parameters
    ----------
    head : ebf.artifact.ModelHead
    parts : list of distributed.Future
    """

    url = None

    def __init__(self, head: ModelHead, parts: list) -> None:
        self._head, self.parts = head, list(parts)
        self.n_parts = len(self.parts)

    def head(self) -> ModelHead:
        """The model without its parts (encoder, trunk, maps; an unfitted estimator)."""
        return self._head

    def __repr__(self) -> str:
        return f"LiveModel({type(self._head.estimator).__name__}, {self.n_parts} parts)"


# a local part scattered to a client's workers: part object -> {client id: future}
_scattered: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _future_of(part: Any, client: Any) -> Any:
    if isinstance(part, LivePart):
        return part.future
    with _lock:
        known = _scattered.get(part)
        future = None if known is None else known.get(client.id)
    if future is not None and future.status == "finished":
        return future
    future = client.scatter(part, hash=False)
    with _lock:
        _scattered.setdefault(part, {})[client.id] = future
    return future


def live_model(model: Any, client: Any) -> LiveModel:
    """``model`` as a :class:`LiveModel` of ``client``: its parts on the workers.

    Parts already there (:class:`LivePart`) are used as they are; local parts are scattered
    once per client and part object (a later call with the same parts reuses them).

    Parameters
    ----------
    model : fitted EBF or SSF (local classes of :mod:`ebf`)
    client : distributed.Client
        Where to scatter local parts (those already on workers decide: their client).

    Returns
    -------
    LiveModel
    """
    parts = model_parts(model)
    if any(isinstance(p, LivePart) for p in parts):
        client = client_of(parts)  # the parts on its workers: scatter the others there
    return LiveModel(_head(model, len(parts)), [_future_of(p, client) for p in parts])


def client_of(parts: list) -> Any:
    """The client the :class:`LivePart` among ``parts`` were made with, if it is running.

    Raises
    ------
    ebf.dask.client.NoClientError
        If it is closed: the parts were lost with their cluster.
    """
    from .client import NoClientError

    client = next(p.future.client for p in parts if isinstance(p, LivePart))
    if client.status in ("closing", "closed"):
        raise NoClientError(
            "this model's branches were kept on the workers of a Dask client that is now "
            "closed, and are lost with it: gather the model (to_local()) or save it "
            "(ebf.save(est.to_local(), path)) before closing the client, and fit again.")
    return client


def gather_model(model: Any, which: Any = None) -> Any:
    """A local model equal to ``model`` with its parts (or the parts ``which``) in this
    process.

    Parameters
    ----------
    model : fitted EBF or SSF, some parts :class:`LivePart`
    which : iterable of int, optional
        The parts to gather (the others stay where they are); all by default.

    Returns
    -------
    estimator
        ``model`` itself if none of them is on the workers, else a new model
        (``model._with_parts``), the parts gathered with the client they were made with.
    """
    parts = model_parts(model)
    which = range(len(parts)) if which is None else [int(i) for i in which]
    live = [i for i in which if isinstance(parts[i], LivePart)]
    if not live:
        return model
    values = client_of(parts).gather([parts[i].future for i in live])
    for i, value in zip(live, values, strict=True):
        parts[i] = value
    return model._with_parts(parts)


def feature_importances(model: Any) -> np.ndarray:
    """``model.feature_importances_``, each branch's impurity decrease computed where it
    lives (:func:`ebf.importance.total_decrease` of that branch) and summed here in branch
    order, as the local property sums them: the same bits.

    Raises
    ------
    AttributeError
        If the branches do not choose splits by an impurity decrease (the local message).
    """
    parts = model_parts(model)
    n_features, owner = int(model.encoder_.n_features_in_), type(model).__name__
    client = client_of(parts)
    remote = {i: client.submit(total_decrease, [p.future], n_features, owner, pure=False)
              for i, p in enumerate(parts) if isinstance(p, LivePart)}
    values = dict(zip(remote, client.gather(list(remote.values())), strict=True))
    total = np.zeros(n_features)
    for i, part in enumerate(parts):
        total += values[i] if i in values else total_decrease([part], n_features, owner)
    if getattr(model, "trunk_", None) is not None:
        total += trunk_decrease(model.trunk_)
    return normalised(total)
