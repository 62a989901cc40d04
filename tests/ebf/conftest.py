"""Fixtures of the model-persistence tests: a saved format-1 model (``test_model``,
``test_model_refusals``; ``test_shards`` and ``dask/test_sharded`` define their own
``saved``), and for the hostile-model tests (``test_hostile_models``, ``test_load_bounds``)
the corpus of ``hostile_corpus.py`` saved, and its worker subprocess, once per module."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mondrian import MondrianForestRegressor
from tests.ebf.hostile_corpus import Worker, save_corpus, warm_worker
from tests.ebf.model_helpers import online_regressor, save


@pytest.fixture
def saved(tmp_path: Path) -> tuple[Path, MondrianForestRegressor, np.ndarray]:
    """``(model directory, regressor, rows)``: an online-updated regressor saved in format 1."""
    reg, X, _ = online_regressor()
    return save(reg, tmp_path / "model"), reg, X


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """``name -> (pristine model directory, rows to predict)``, saved once per module."""
    return save_corpus(tmp_path_factory.mktemp("hostile"))


@pytest.fixture(scope="module")
def worker(tmp_path_factory, request):
    """A warm ``hostile_worker.py`` subprocess (every pristine model of ``models`` loaded)."""
    w = Worker(tmp_path_factory.mktemp("worker"))  # it imports while the models are fit
    yield warm_worker(w, request.getfixturevalue("models"))
    w.close()
