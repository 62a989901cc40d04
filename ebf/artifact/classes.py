"""The class allowlist of model artifacts, and estimators to and from their states.

:func:`estimator_state` turns a fitted estimator into ``{"class", "params", "state"}``
(``_get_state()``, ``docs/model-format.md``); :func:`estimator_from_state` builds one, looking
the class up by key in :data:`MODEL_CLASSES`, a fixed allowlist: a model file never names a
module to import. :mod:`ebf.artifact._writer` and :mod:`ebf.artifact._reader` write and read
these states as files.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from ._codec import ModelFormatError, UnknownClassError
from ._packs import StoredPart

__all__ = ["MODEL_CLASSES", "estimator_from_state", "estimator_state", "new_estimator",
           "resolve_class"]

_RANDOM_OBJECTS = (
    np.random.RandomState, np.random.Generator, np.random.BitGenerator, np.random.SeedSequence,
)

#: The allowlist: the only classes ``load`` will build, key -> ``"module:ClassName"``.
#: Modules are imported lazily, so a missing optional module only affects its own models.
MODEL_CLASSES: Mapping[str, str] = {
    "mondrian.MondrianForestRegressor": "mondrian._forest:MondrianForestRegressor",
    "mondrian.MondrianForestClassifier": "mondrian._forest:MondrianForestClassifier",
    "mondrian.MondrianKernelFeatures": "mondrian._kernel_features:MondrianKernelFeatures",
    "mondrian.MondrianKernelRegressor": "mondrian._kernel_ridge:MondrianKernelRegressor",
    "mondrian.MondrianKernelClassifier": "mondrian._kernel_ridge:MondrianKernelClassifier",
    "ebf.Trunk": "ebf.trunk:Trunk",
    "ebf.BayesianForestRegressor": "ebf._forests:BayesianForestRegressor",
    "ebf.BayesianForestClassifier": "ebf._forests:BayesianForestClassifier",
    "ebf.EmpiricalBayesianForestRegressor": "ebf.estimators:EmpiricalBayesianForestRegressor",
    "ebf.EmpiricalBayesianForestClassifier": "ebf.estimators:EmpiricalBayesianForestClassifier",
    "ebf.SubsampleForestRegressor": "ebf.estimators:SubsampleForestRegressor",
    "ebf.SubsampleForestClassifier": "ebf.estimators:SubsampleForestClassifier",
    "ebf.ConstantBranch": "ebf.branches:ConstantBranch",
    "ebf.SMCTreeRegressor": "ebf.bayestrees._estimators:SMCTreeRegressor",
    "ebf.SMCTreeClassifier": "ebf.bayestrees._estimators:SMCTreeClassifier",
    "ebf.BARTRegressor": "ebf.bayestrees._bart:BARTRegressor",
}


def estimator_state(estimator: Any) -> dict:
    """``{"class", "params", "state"}`` of a fitted estimator, for nesting in a state.

    A composite estimator stores each sub-estimator as ``estimator_state(sub)`` inside its
    own ``_get_state()``; :func:`save` encodes the whole tree. A ``random_state`` given as a
    ``RandomState`` / ``Generator`` cannot be stored: it becomes None and ``"notes"`` says so.

    Parameters
    ----------
    estimator : estimator
        A fitted estimator whose class is in :data:`MODEL_CLASSES`.

    Returns
    -------
    dict
        ``class`` (allowlist key), ``params`` (``get_params(deep=False)``), ``state``
        (``_get_state()``) and, if any parameter was replaced, ``notes`` (list of str).

    Examples
    --------
    >>> import numpy as np
    >>> from mondrian import MondrianForestRegressor
    >>> X = np.random.default_rng(4).random((30, 2)); y = X[:, 0]
    >>> reg = MondrianForestRegressor(n_estimators=2, random_state=4).fit(X, y)
    >>> d = estimator_state(reg)
    >>> d["class"], d["params"]["n_estimators"]
    ('mondrian.MondrianForestRegressor', 2)
    >>> estimator_from_state(d).predict(X[:2]).shape
    (2,)
    """
    if isinstance(estimator, StoredPart):  # written already: the writer takes its entry
        return estimator
    key = _class_key(estimator)
    get_state = getattr(estimator, "_get_state", None)
    if not callable(get_state):
        raise TypeError(f"{key} does not implement _get_state(); it cannot be saved")
    params: dict = {}
    notes: list[str] = []
    for name, value in estimator.get_params(deep=False).items():
        if isinstance(value, _RANDOM_OBJECTS):
            notes.append(
                f"params.{name}: a {type(value).__name__} instance cannot be stored and was "
                "saved as None (the fitted state keeps its seeds; a refit will differ)"
            )
            value = None
        params[name] = value
    out = {"class": key, "params": params, "state": get_state()}
    if notes:
        out["notes"] = notes
    return out


def estimator_from_state(d: Mapping[str, Any], where: str | None = None) -> Any:
    """Rebuild an estimator from :func:`estimator_state` (after decoding), via the allowlist.

    Parameters
    ----------
    d : mapping
        ``{"class": key, "params": dict, "state": ...}``; ``class`` must be a key of
        :data:`MODEL_CLASSES`.
    where : str, optional
        Where ``d`` sits in its parent's state (``"branches[3]"``), for error messages.

    Returns
    -------
    estimator
        ``cls(**params)`` with ``_set_state(state)`` applied.

    Raises
    ------
    UnknownClassError
        If the class key is not in the allowlist (nothing is imported then).
    ModelFormatError
        If the parameters or the state do not fit the class (any ``ValueError``,
        ``TypeError``, ``KeyError``, ``IndexError`` or ``AttributeError`` of ``_set_state``),
        naming the class and ``where``.

    Examples
    --------
    >>> import numpy as np
    >>> from mondrian import MondrianForestClassifier
    >>> X = np.random.default_rng(5).random((30, 2)); y = (X[:, 0] > 0.5).astype(int)
    >>> clf = MondrianForestClassifier(n_estimators=2, random_state=5).fit(X, y)
    >>> estimator_from_state(estimator_state(clf)).classes_
    array([0, 1])
    """
    if not isinstance(d, Mapping) or not isinstance(d.get("params"), dict) or "state" not in d:
        raise ModelFormatError(f"{where or 'an estimator'}: an estimator entry needs 'class', "
                               "'params' (a dict) and 'state'")
    estimator = new_estimator(d.get("class"), d["params"], where)
    label = d["class"] if where is None else f"{where} ({d['class']})"
    try:
        estimator._set_state(d["state"])
    except ModelFormatError as exc:  # a nested estimator's, already named
        raise type(exc)(f"{label}: {exc}") from exc
    except KeyError as exc:
        raise ModelFormatError(f"{label}: invalid state: missing entry {exc}") from exc
    except (TypeError, ValueError, IndexError, AttributeError) as exc:
        raise ModelFormatError(f"{label}: invalid state: {exc}") from exc
    return estimator


def new_estimator(key: Any, params: dict, where: str | None = None) -> Any:
    """The unfitted ``cls(**params)`` of allowlist ``key``, its parameters validated.

    Raises
    ------
    UnknownClassError
        If ``key`` is not in :data:`MODEL_CLASSES` (nothing is imported then).
    ModelFormatError
        If the parameters do not fit the class.
    """
    cls = resolve_class(key)
    label = key if where is None else f"{where} ({key})"
    try:
        estimator = cls(**params)
        if hasattr(estimator, "_validate_params"):
            estimator._validate_params()  # scikit-learn's checks of types and ranges
    except (TypeError, ValueError) as exc:
        msg = f"{label}: parameters {sorted(params)} do not fit {key}: {exc}"
        raise ModelFormatError(msg) from exc
    return estimator


# ----------------------------------------------------------------------------- the allowlist


def _class_key(estimator: Any) -> str:
    """Allowlist key of ``type(estimator)``; exact class only (a subclass is refused)."""
    cls = type(estimator)
    spec = f"{cls.__module__}:{cls.__qualname__}"
    for key, target in MODEL_CLASSES.items():
        if target == spec:
            return key
        module, _, name = target.partition(":")
        if module in sys.modules and getattr(sys.modules[module], name, None) is cls:
            return key  # defined elsewhere and re-exported under the allowlisted name
    raise TypeError(
        f"{cls.__module__}.{cls.__qualname__} cannot be saved: it is not one of the model "
        f"classes {sorted(MODEL_CLASSES)}"
    )


def resolve_class(key: Any) -> type:
    """The class allowlisted under ``key``; only allowlisted module names are imported.

    Raises
    ------
    UnknownClassError
        If ``key`` is not a key of :data:`MODEL_CLASSES`, or its module cannot be imported.
    """
    target = MODEL_CLASSES.get(key) if isinstance(key, str) else None
    if target is None:
        raise UnknownClassError(
            f"class {key!r} is not a loadable model class; known classes: {sorted(MODEL_CLASSES)}"
        )
    module, _, name = target.partition(":")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise UnknownClassError(
            f"class {key!r} is allowlisted as {target} but cannot be imported: {exc}"
        ) from exc
    return cls
