"""Model artifacts as the jobs use them: a model directory opened and pinned by its hash.

:func:`open_artifact` reads the manifest only (:func:`ebf.artifact.open_model`): the jobs of
:mod:`pipelines.predict` and :mod:`pipelines.report.evaluate` hand the reader to the workers,
which load the model whole or one branch per task, every file checked against the pinned
manifest (a model overwritten meanwhile fails its checksums instead of mixing two models).
:func:`load_model` loads the whole model in this process, for callers that want the
estimator.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["LoadedModel", "ModelArtifact", "load_model", "open_artifact"]


@dataclass(frozen=True)
class ModelArtifact:
    """A model directory, opened (manifest read and checked) and pinned by its hash.

    Attributes
    ----------
    reader : ebf.artifact.ModelReader
        Loads the head, a part or the whole model; picklable, it travels in Dask graphs.
    path : str
    digest : str
        :func:`ebf.artifact.model_hash` (sha256 of the model's content, which holds the
        sha256 of every file).
    manifest : dict
        :func:`ebf.artifact.read_manifest`.
    features : list of str
        The feature columns the model was trained on.
    """

    reader: Any
    path: str
    digest: str
    manifest: dict
    features: list[str]

    @property
    def model_class(self) -> str:
        """The class key of the manifest (``"ebf.EmpiricalBayesianForestRegressor"``)."""
        return str(self.manifest["class"])

    @property
    def version(self) -> str:
        """``"ebf-model/<format version> ebf/<version that saved it>"``."""
        lib = self.manifest.get("metadata", {}).get("library_version") or "unknown"
        return f"{self.manifest['format']}/{self.manifest['format_version']} ebf/{lib}"

    @property
    def training(self) -> dict:
        """The training metadata (``metadata=`` of :func:`ebf.artifact.save`), or ``{}``."""
        user = self.manifest.get("metadata", {}).get("user")
        return user if isinstance(user, dict) else {}

    @property
    def missing_values(self) -> bool:
        """Whether the model takes missing values in its numeric features (its estimator's
        ``_missing_values``: the CART forests do), from the manifest alone."""
        from ebf.artifact.classes import resolve_class

        branch = (self.manifest.get("params") or {}).get("branch")
        try:
            est = resolve_class(self.manifest["class"])(
                **({"branch": branch} if isinstance(branch, str) else {}))
            return bool(getattr(est, "_missing_values", False))
        except (TypeError, ValueError):  # an unknown learner: the model's load says why
            return False

    @property
    def is_classifier(self) -> bool:
        """Whether the model predicts classes (its manifest records a number of classes)."""
        return "n_classes" in (self.manifest.get("training") or {})


@dataclass(frozen=True)
class LoadedModel(ModelArtifact):
    """A :class:`ModelArtifact` with the whole model loaded (``model``)."""

    model: Any = None


def open_artifact(model_dir: str | os.PathLike[str],
                  storage_options: Mapping[str, Any] | None = None) -> ModelArtifact:
    """Open a model directory: read and check its manifest, load no array.

    Parameters
    ----------
    model_dir : str or path-like
        Written by :func:`ebf.artifact.save` (e.g. by ``ebf train``); a path or fsspec URL.
    storage_options : mapping, optional
        fsspec options for a URL.

    Returns
    -------
    ModelArtifact

    Raises
    ------
    FileNotFoundError, ebf.artifact.ModelFormatError
        From :func:`ebf.artifact.read_manifest`.
    ValueError
        If the model has no feature names (trained on a plain array).

    Examples
    --------
    >>> art = open_artifact("models/friedman")  # doctest: +SKIP
    >>> art.features[:2], art.digest[:12], art.reader.n_parts  # doctest: +SKIP
    (['x0', 'x1'], '3f1c0a9b2e7d', 5)
    """
    from ebf.artifact import open_model

    path = os.fspath(model_dir)
    reader = open_model(path, storage_options)
    names = (reader.manifest.get("features") or {}).get("names")
    if not names:
        raise ValueError(
            f"the model at {path!r} has no feature names (it was fit on an array); refit it "
            "on a DataFrame (ebf train does) so its columns can be found in the data"
        )
    if reader.n_parts:  # its state read (small): the manifest's features checked against it
        reader.head()
    return ModelArtifact(reader, path, reader.model_hash, reader.manifest,
                         [str(c) for c in names])


def load_model(model_dir: str | os.PathLike[str]) -> LoadedModel:
    """Open a model directory (:func:`open_artifact`) and load the whole model.

    Parameters
    ----------
    model_dir : str or path-like

    Returns
    -------
    LoadedModel

    Raises
    ------
    FileNotFoundError, ebf.artifact.ModelFormatError
        From :func:`ebf.artifact.load` (a file that changed since the manifest was read fails
        its checksum).
    ValueError
        If the model has no feature names.

    Examples
    --------
    >>> loaded = load_model("models/friedman")  # doctest: +SKIP
    >>> loaded.model.predict(X[:2])  # doctest: +SKIP
    """
    art = open_artifact(model_dir)
    return LoadedModel(art.reader, art.path, art.digest, art.manifest, art.features,
                       model=art.reader.load())
