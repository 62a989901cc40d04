"""Fixtures of the hostile-model tests (``test_hostile_models``, ``test_load_bounds``): the
corpus of ``hostile_corpus.py`` saved, and its worker subprocess, once per module."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ebf.hostile_corpus import Worker, save_corpus, warm_worker


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
