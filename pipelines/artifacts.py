"""Model artifacts as the jobs use them: a model directory loaded and pinned by its hash.

:func:`load_model` wraps :func:`ebf.model.load` (checksums verified, nothing unpickled) and
records the sha256 of the manifest, which the prediction and evaluation jobs
(:mod:`pipelines.score`) write into their outputs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

__all__ = ["LoadedModel", "load_model"]


@dataclass(frozen=True)
class LoadedModel:
    """A model directory, loaded and pinned by its hash.

    Attributes
    ----------
    model : estimator
        The fitted single-process model.
    path : str
    digest : str
        :func:`ebf.model.model_hash` (sha256 of the model's content, which holds the
        sha256 of every array file).
    manifest : dict
        :func:`ebf.model.read_manifest`.
    features : list of str
        The feature columns the model was trained on.
    """

    model: Any
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
        """The training metadata (``metadata=`` of :func:`ebf.model.save`), or ``{}``."""
        user = self.manifest.get("metadata", {}).get("user")
        return user if isinstance(user, dict) else {}

    @property
    def is_classifier(self) -> bool:
        """Whether the model predicts classes."""
        return hasattr(self.model, "classes_")


def load_model(model_dir: str | os.PathLike[str]) -> LoadedModel:
    """Load a model directory and pin it by its manifest hash.

    The hash is taken before and after loading; if the directory was replaced in between
    (an ``overwrite`` by another job), this raises instead of mixing two models.

    Parameters
    ----------
    model_dir : str or path-like
        Written by :func:`ebf.model.save` (e.g. by ``ebf train``).

    Returns
    -------
    LoadedModel

    Raises
    ------
    FileNotFoundError, ebf.model.ModelFormatError
        From :func:`ebf.model.load`.
    ValueError
        If the model has no feature names (trained on a plain array).

    Examples
    --------
    >>> loaded = load_model("models/friedman")  # doctest: +SKIP
    >>> loaded.features[:2], loaded.digest[:12]  # doctest: +SKIP
    (['x0', 'x1'], '3f1c0a9b2e7d')
    """
    from ebf.model import load, model_hash, read_manifest

    path = os.fspath(model_dir)
    manifest = read_manifest(path)
    digest = manifest["model_hash"]
    model = load(path)
    if model_hash(path) != digest:
        raise RuntimeError(f"the model at {path!r} changed while it was loaded; try again")
    names = getattr(model, "feature_names_in_", None)
    if names is None:
        names = (manifest.get("features") or {}).get("names")
    if names is None or len(names) == 0:
        raise ValueError(
            f"the model at {path!r} has no feature names (it was fit on an array); refit it "
            "on a DataFrame (ebf train does) so its columns can be found in the data"
        )
    return LoadedModel(model, path, digest, manifest, [str(c) for c in names])
