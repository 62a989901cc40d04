"""The MLflow model flavor of ebf: a saved ebf model as an MLflow Model, a pyfunc that predicts
the frame ``ebf predict`` writes, and registration into MLflow's Model Registry with an alias.

An ebf MLflow Model is a directory (logged as a run's or a logged model's artifacts)::

    MLmodel              flavors ``ebf`` and ``python_function`` (loader ``ebf.mlflow``),
                         the signature (features in, prediction columns out, the
                         ``quantiles`` parameter), the input example's file
    model/               the ebf model directory itself (``manifest.json``, ``head.pack``,
                         ``shards/<n>.pack``: :func:`ebf.artifact.save`, never pickled);
                         ``model/manifest.json`` is readable as it is
    calibration.json     the model's recalibration map (regressors) or class calibration map
                         (classifiers), readable: its knots or weights as JSON
    requirements.txt     ebf and its core dependencies pinned to the versions that saved it
    python_env.yaml, conda.yaml
    input_example.json   (when an input example is given)

``mlflow.pyfunc.load_model(uri).predict(df)`` returns a pandas DataFrame with the columns and
numbers of ``ebf predict`` for the same model and rows (:func:`ebf.frames.predict_block`):
regressors ``mean``, ``std`` and one column per quantile level (``q05``, ``q50``, ``q95`` by
default; the levels saved with the model, or ``params={"quantiles": [...]}`` per call),
classifiers ``proba_<class>`` and ``predicted``; EBF models also ``branch``.

MLflow is imported inside the functions only: ``import ebf`` never needs it, and the flavor
needs MLflow's client (``pip install "ebf[mlflow]"``, ``mlflow-skinny``). Every model file is
checked when it is read (:func:`ebf.artifact.load`), whatever store it came from.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import is_classifier
from sklearn.utils.validation import check_is_fitted

from basics.levels import DEFAULT_QUANTILES
from basics.versions import installed_versions, library_version

from .artifact import ModelReader, load, open_model, save
from .frames import checked_levels, predict_block, prediction_meta, quantile_columns

__all__ = ["CALIBRATION_FILE", "FLAVOR_NAME", "INSTALL", "MODEL_DIR",
           "get_default_pip_requirements", "load_model", "log_model", "save_model"]

#: The flavor's name in ``MLmodel``.
FLAVOR_NAME = "ebf"
#: The ebf model directory inside an MLflow Model.
MODEL_DIR = "model"
#: The readable calibration map inside an MLflow Model.
CALIBRATION_FILE = "calibration.json"
#: How to get MLflow's client.
INSTALL = 'pip install "ebf[mlflow]"'

_REQUIREMENTS = "requirements.txt"
_PYTHON_ENV = "python_env.yaml"
_CONDA_ENV = "conda.yaml"
#: MLflow's types of the numpy kinds of the feature and prediction columns.
_TYPES = {"f8": "double", "f4": "float", "i8": "long", "i4": "integer", "b1": "boolean"}


def _mlflow() -> Any:
    try:
        import mlflow
    except ImportError as exc:
        raise ImportError(f"the ebf MLflow flavor needs MLflow, which is not installed: "
                          f"{INSTALL}") from exc
    return mlflow


def _source(model: Any, storage_options: Mapping[str, Any] | None) -> Any:
    """``model`` as what :func:`ebf.artifact.save` copies: a saved model opened and its files
    checked, or a fitted estimator (checked fitted)."""
    if isinstance(model, (str, os.PathLike)):
        model = open_model(model, storage_options)
    if isinstance(model, ModelReader):
        model.verify()  # a copy of damaged files would be caught only when loaded
        return model
    if not hasattr(model, "predict_summary"):
        raise TypeError(f"ebf.mlflow logs ebf and mondrian estimators and saved model "
                        f"directories; got {type(model).__name__}")
    check_is_fitted(model)
    return model


def _frame_meta(reader: ModelReader, levels: np.ndarray) -> tuple[pd.DataFrame, Any]:
    """The prediction frame's empty meta and the calibration map of a saved model (an
    ensemble's head only: no branch is read)."""
    if reader.format_version == 2 and reader.n_parts:
        head = reader.head()
        calibration = head.class_calibration if head.classes is not None else head.recalibration
        return prediction_meta(head.classes, head.trunk is not None, levels), calibration
    model = reader.load()
    classifier = is_classifier(model)
    calibration = getattr(model, "class_calibration_" if classifier else "recalibration_", None)
    return prediction_meta(model.classes_ if classifier else None, hasattr(model, "trunk_"),
                           levels), calibration


def _type(dtype: Any) -> str:
    dtype = np.dtype(dtype) if not isinstance(dtype, pd.api.extensions.ExtensionDtype) else dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "iu":
        return "integer" if dtype.itemsize <= 4 and dtype.kind == "i" else "long"
    if isinstance(dtype, np.dtype) and dtype.kind in "fb":
        return _TYPES.get(f"{dtype.kind}{dtype.itemsize}", "double")
    return "string"  # categories, text: matched by their string form


def _feature_type(name: str) -> str:
    try:
        return _type(np.dtype(name))
    except TypeError:  # category, string[python], ...
        return "string"


def _signature(reader: ModelReader, meta: pd.DataFrame, levels: np.ndarray,
               classifier: bool) -> Any:
    """Features in (names and types from the manifest), the prediction columns out, and the
    ``quantiles`` parameter of a regressor."""
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, ParamSchema, ParamSpec, Schema

    features = reader.manifest["features"]
    names, dtypes = features.get("names"), features.get("dtypes")
    n = features.get("n_features") or len(names or dtypes or ())
    if isinstance(dtypes, dict):
        dtypes = [dtypes.get(c, "float64") for c in names]
    dtypes = dtypes or ["float64"] * n
    inputs = Schema([ColSpec(_feature_type(t), None if names is None else names[i])
                     for i, t in enumerate(dtypes)])
    outputs = Schema([ColSpec(_type(meta[c].dtype), c) for c in meta.columns])
    params = None if classifier else ParamSchema(
        [ParamSpec("quantiles", "double", [float(q) for q in levels], (-1,))])
    return ModelSignature(inputs, outputs, params)


def _plain(value: Any) -> Any:
    """A calibration map's state as JSON values."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _calibration_entry(calibration: Any, classifier: bool) -> dict:
    kind = "class_calibration" if classifier else "recalibration"
    if calibration is None:
        return {"kind": kind, "map": None}
    out = {"kind": kind, "class": type(calibration).__name__,
           "map": _plain(calibration.to_state())}
    if hasattr(calibration, "max_deviation"):
        out["max_deviation"] = float(calibration.max_deviation())
    return out


def get_default_pip_requirements() -> list[str]:
    """``ebf`` and its core dependencies, pinned to the installed versions.

    Returns
    -------
    list of str
        E.g. ``["ebf==0.1.0", "numpy==2.4.6", ...]`` (``ebf`` alone when it runs from a
        source tree without being installed).
    """
    from packaging.requirements import Requirement

    pins = [f"ebf=={library_version()}"]
    try:
        requires = importlib.metadata.requires("ebf") or []
    except importlib.metadata.PackageNotFoundError:
        return pins
    core = [Requirement(line) for line in requires]
    core = [r for r in core if r.marker is None or "extra" not in str(r.marker)]
    found = installed_versions(r.name for r in core)
    for req in core:
        extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
        pins.append(f"{req.name}{extras}=={found[req.name]}" if req.name in found
                    else str(req))
    return pins


def _write_environment(path: Path, requirements: list[str]) -> None:
    import yaml

    python = platform.python_version()
    (path / _REQUIREMENTS).write_text("\n".join(requirements) + "\n")
    build = [f"{name}=={v}" for name, v in installed_versions(("pip", "setuptools",
                                                                  "wheel")).items()]
    (path / _PYTHON_ENV).write_text(yaml.safe_dump(
        {"python": python, "build_dependencies": build, "dependencies": [
            f"-r {_REQUIREMENTS}"]}, sort_keys=False))
    (path / _CONDA_ENV).write_text(yaml.safe_dump(
        {"name": "mlflow-env", "channels": ["conda-forge"],
         "dependencies": [f"python={python}", "pip", {"pip": requirements}]}, sort_keys=False))


def save_model(model: Any, path: str | os.PathLike, *,
               quantiles: Sequence[float] = DEFAULT_QUANTILES, signature: Any = None,
               input_example: Any = None, mlflow_model: Any = None,
               metadata: Mapping[str, Any] | None = None,
               pip_requirements: Sequence[str] | None = None,
               extra_pip_requirements: Sequence[str] | None = None,
               storage_options: Mapping[str, Any] | None = None) -> None:
    """Write an ebf model as an MLflow Model in the local directory ``path``.

    Parameters
    ----------
    model : fitted estimator, str, path-like or ebf.artifact.ModelReader
        A fitted ebf or mondrian estimator, or a saved model directory (a path or fsspec
        URL, as ``ebf train --out`` writes; its files are checked and copied byte for byte).
    path : str or path-like
        The MLflow Model's directory, created (it must not exist, or be empty).
    quantiles : sequence of float, default=DEFAULT_QUANTILES
        The pyfunc's quantile columns (regressors; ``ebf predict``'s default levels).
    signature : mlflow.models.ModelSignature, optional
        By default the model's features (names and types from its manifest) in, its
        prediction columns out, and the ``quantiles`` parameter (regressors). ``False``: none.
    input_example : pandas.DataFrame, optional
        A few rows of features, saved with the model (MLflow's ``input_example.json``).
    mlflow_model : mlflow.models.Model, optional
        The MLflow Model to add the flavors to (:func:`log_model` passes its own).
    metadata : mapping, optional
        MLflow model metadata (``MLmodel``'s ``metadata``).
    pip_requirements : sequence of str, optional
        In place of :func:`get_default_pip_requirements`.
    extra_pip_requirements : sequence of str, optional
        Added to them.
    storage_options : mapping, optional
        fsspec options of a saved model's URL.

    Raises
    ------
    ImportError
        If MLflow is not installed.
    FileExistsError
        If ``path`` exists and is not empty.
    ValueError
        If a quantile level is not a probability, or the estimator is not fitted.

    Examples
    --------
    >>> save_model("models/friedman", "mlflow-models/friedman")  # doctest: +SKIP
    >>> import mlflow
    >>> mlflow.pyfunc.load_model("mlflow-models/friedman").predict(X).columns  # doctest: +SKIP
    Index(['mean', 'std', 'q05', 'q50', 'q95', 'branch'], dtype='object')
    """
    _mlflow()
    from mlflow.models import Model
    from mlflow.pyfunc import add_to_model

    levels = checked_levels(quantiles)
    quantile_columns(levels)  # two levels with one name fail here, before any write
    source = _source(model, storage_options)
    path = Path(path)
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise FileExistsError(f"{str(path)!r} exists and is not empty; an MLflow Model is "
                              "written to a new directory")
    path.mkdir(parents=True, exist_ok=True)
    save(source, path / MODEL_DIR)
    reader = open_model(path / MODEL_DIR)
    meta, calibration = _frame_meta(reader, levels)
    classifier = "predicted" in meta.columns
    (path / CALIBRATION_FILE).write_text(json.dumps(
        _calibration_entry(calibration, classifier), indent=1, allow_nan=False) + "\n")

    mlflow_model = Model() if mlflow_model is None else mlflow_model
    if input_example is not None:
        # MLflow's own writer of input_example.json / serving_input_example.json: the files
        # its UI, `mlflow models predict` and serving read (no public function writes them)
        from mlflow.models.utils import _save_example

        _save_example(mlflow_model, input_example, str(path))
    if signature is None:
        signature = _signature(reader, meta, levels, classifier)
    if signature is not False:
        mlflow_model.signature = signature
    if metadata is not None:
        mlflow_model.metadata = dict(metadata)
    config = None if classifier else {"quantiles": [float(q) for q in levels]}
    add_to_model(mlflow_model, loader_module=__name__, data=MODEL_DIR, conda_env=_CONDA_ENV,
                 python_env=_PYTHON_ENV, model_config=config)
    mlflow_model.add_flavor(
        FLAVOR_NAME, ebf_version=library_version(), model_dir=MODEL_DIR,
        manifest=f"{MODEL_DIR}/manifest.json", calibration=CALIBRATION_FILE,
        model_class=reader.manifest["class"], model_hash=reader.model_hash,
        format_version=reader.format_version, columns=list(meta.columns),
        quantiles=None if classifier else [float(q) for q in levels])
    mlflow_model.model_size_bytes = sum(f.stat().st_size for f in path.rglob("*")
                                        if f.is_file())
    mlflow_model.save(str(path / "MLmodel"))
    requirements = (list(pip_requirements) if pip_requirements is not None
                    else get_default_pip_requirements())
    _write_environment(path, requirements + list(extra_pip_requirements or ()))


def log_model(model: Any, name: str | None = None, *, artifact_path: str | None = None,
              quantiles: Sequence[float] = DEFAULT_QUANTILES, signature: Any = None,
              input_example: Any = None, registered_model_name: str | None = None,
              alias: str | None = None, run_id: str | None = None,
              await_registration_for: int = 300, metadata: Mapping[str, Any] | None = None,
              pip_requirements: Sequence[str] | None = None,
              extra_pip_requirements: Sequence[str] | None = None,
              storage_options: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
    """Log an ebf model to the current MLflow run (or ``run_id``) as an MLflow Model, and
    optionally register it with an alias.

    Parameters
    ----------
    model : fitted estimator, str, path-like or ebf.artifact.ModelReader
        As in :func:`save_model`.
    name : str, optional
        The logged model's name (MLflow 3; ``artifact_path`` for older servers).
    artifact_path : str, optional
        MLflow's older name of ``name``.
    quantiles, signature, input_example, metadata : optional
        As in :func:`save_model`.
    pip_requirements, extra_pip_requirements, storage_options : optional
        As in :func:`save_model`.
    registered_model_name : str, optional
        Register the model as a new version of this Model Registry model (created if absent).
    alias : str, optional
        Point this alias of ``registered_model_name`` (e.g. ``"champion"``) at the new
        version (``MlflowClient.set_registered_model_alias``).
    run_id : str, optional
        The run to log to; the active run (or a new one) if None.
    await_registration_for : int, default=300
        Seconds to wait for the new version to be ready.
    **kwargs
        Passed on to :meth:`mlflow.models.Model.log` (``params``, ``tags``, ``step``...).

    Returns
    -------
    mlflow.models.model.ModelInfo
        ``model_uri`` (``models:/<model id>`` on MLflow 3), ``registered_model_version``...

    Raises
    ------
    ImportError
        If MLflow is not installed.
    ValueError
        If ``alias`` is given without ``registered_model_name``, or a quantile level is not a
        probability; both before anything is logged.

    Examples
    --------
    >>> import mlflow, ebf.mlflow
    >>> mlflow.set_tracking_uri("http://mlflow:5000")  # doctest: +SKIP
    >>> info = ebf.mlflow.log_model("models/friedman", name="friedman",  # doctest: +SKIP
    ...                             registered_model_name="friedman", alias="champion")
    >>> mlflow.pyfunc.load_model("models:/friedman@champion").predict(X)  # doctest: +SKIP
    """
    mlflow = _mlflow()
    from mlflow.models import Model

    if alias is not None and not registered_model_name:
        raise ValueError(f"alias={alias!r} names a version of a registered model; give "
                         "registered_model_name too")
    quantile_columns(checked_levels(quantiles))
    source = _source(model, storage_options)  # a bad model fails before MLflow hears of it
    info = Model.log(artifact_path=artifact_path, name=name, flavor=sys.modules[__name__],
                     flavor_name=FLAVOR_NAME, registered_model_name=registered_model_name,
                     await_registration_for=await_registration_for, metadata=metadata,
                     run_id=run_id, model=source, quantiles=quantiles, signature=signature,
                     input_example=input_example, pip_requirements=pip_requirements,
                     extra_pip_requirements=extra_pip_requirements, **kwargs)
    if alias is not None:
        mlflow.MlflowClient().set_registered_model_alias(
            registered_model_name, alias, str(info.registered_model_version))
    return info


def _local_model(model_uri: str, dst_path: str | None) -> tuple[Path, dict]:
    """The MLflow Model of ``model_uri`` downloaded, and its ``ebf`` flavor."""
    mlflow = _mlflow()
    from mlflow.models import Model

    local = Path(mlflow.artifacts.download_artifacts(artifact_uri=str(model_uri),
                                                     dst_path=dst_path))
    flavors = Model.load(str(local / "MLmodel")).flavors
    if FLAVOR_NAME not in flavors:
        raise ValueError(f"the MLflow Model at {model_uri!r} has no {FLAVOR_NAME!r} flavor "
                         f"(its flavors: {', '.join(sorted(flavors))}); log it with "
                         "ebf.mlflow.log_model")
    return local, flavors[FLAVOR_NAME]


def load_model(model_uri: str, dst_path: str | None = None) -> Any:
    """The ebf estimator of an MLflow Model logged by :func:`log_model`.

    Parameters
    ----------
    model_uri : str
        Any MLflow model URI: ``models:/<name>@<alias>``, ``models:/<name>/<version>``,
        ``models:/<model id>``, ``runs:/<run id>/<path>``, or a local directory.
    dst_path : str, optional
        Where to download it (a temporary directory by default).

    Returns
    -------
    estimator
        The fitted estimator, its files checked (:func:`ebf.artifact.load`).

    Examples
    --------
    >>> model = load_model("models:/friedman@champion")  # doctest: +SKIP
    >>> model.predict_quantiles(X, [0.1, 0.9])  # doctest: +SKIP
    """
    local, conf = _local_model(model_uri, dst_path)
    return load(local / conf["model_dir"])


class _EbfPyfunc:
    """What ``mlflow.pyfunc.load_model`` wraps: ``predict(data, params)`` gives the frame of
    ``ebf predict`` (:func:`ebf.frames.predict_block`)."""

    def __init__(self, model: Any, quantiles: Sequence[float]) -> None:
        self.model = model
        self.levels = checked_levels(quantiles)
        names = getattr(model, "feature_names_in_", None)
        self.features = None if names is None else [str(c) for c in names]

    def get_raw_model(self) -> Any:
        """The ebf estimator."""
        return self.model

    def predict(self, data: Any, params: Mapping[str, Any] | None = None) -> pd.DataFrame:
        quantiles = (params or {}).get("quantiles")
        levels = self.levels if quantiles is None else checked_levels(quantiles)
        if not isinstance(data, pd.DataFrame):
            data = pd.DataFrame(np.asarray(data), columns=self.features)
        X = data if self.features is None else data[self.features]
        classifier = is_classifier(self.model)
        meta = prediction_meta(self.model.classes_ if classifier else None,
                               hasattr(self.model, "trunk_"), levels)
        return predict_block(self.model, X, levels, meta)


def _load_pyfunc(path: str, model_config: Mapping[str, Any] | None = None) -> _EbfPyfunc:
    """MLflow's pyfunc loader: ``path`` is the ebf model directory of an MLflow Model."""
    quantiles = (model_config or {}).get("quantiles", DEFAULT_QUANTILES)
    return _EbfPyfunc(load(path), quantiles)
