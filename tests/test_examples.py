"""The example notebooks run end to end (nbclient), small and on threads, so they cannot rot.

The kernel is this interpreter (``sys.executable``): a kernel spec written to a temporary
directory, so no user-installed ``python3`` spec pointing at another Python is picked up.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nbformat
import pytest
from ipykernel.kernelspec import write_kernel_spec
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient

pytest.importorskip("matplotlib")  # the examples extra

REPO = Path(__file__).resolve().parents[1]
QUICKSTART = REPO / "examples" / "quickstart.ipynb"
RETRAINING = REPO / "examples" / "retraining.ipynb"
KERNEL = "ebf-test-python3"


def _kernel_env(work_dir: Path) -> dict[str, str]:
    """This process's environment, made small and thread-based, the repo importable."""
    env = dict(os.environ)
    # a configured scheduler would make cluster.connect() leave this machine
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    # examples/ too: Jupyter starts a notebook's kernel in its directory, so the notebooks
    # import the example modules beside them (retrain_job) by file name
    paths = [str(REPO), str(REPO / "examples")] + [
        str(Path(p).resolve()) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p
    ]
    env.update(
        PYTHONPATH=os.pathsep.join(paths),
        EBF_QUICKSTART_ROWS="20000",
        EBF_QUICKSTART_EVAL_ROWS="1000",
        EBF_QUICKSTART_DIR=str(work_dir),
        EBF_RETRAINING_ROWS="1500",
        EBF_RETRAINING_TREES="3",
        EBF_RETRAINING_DIR=str(work_dir),
        EBF_LOCAL_PROCESSES="0",
        MPLBACKEND="Agg",
    )
    return env


def _run(notebook: Path, tmp_path: Path, env: dict[str, str]) -> nbformat.NotebookNode:
    kernels = tmp_path / "kernels"
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    write_kernel_spec(kernels / KERNEL, overrides={"argv": argv, "display_name": "ebf tests"})
    km = AsyncKernelManager(
        kernel_name=KERNEL, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels)])
    )
    nb = nbformat.read(notebook, as_version=4)
    run_dir = tmp_path / "cwd"
    run_dir.mkdir()
    client = NotebookClient(
        nb, km=km, timeout=60, startup_timeout=60, resources={"metadata": {"path": str(run_dir)}}
    )
    # raises CellExecutionError (with the cell and its traceback) if a cell fails;
    # cleanup_kc: shut the kernel down although we own its manager
    return client.execute(env=env, cleanup_kc=True)


@pytest.mark.parametrize("notebook", [QUICKSTART, RETRAINING], ids=lambda p: p.stem)
def test_notebook_is_stored_clean(notebook):
    nb = nbformat.read(notebook, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code, "the notebook has no code cells"
    dirty = [i for i, c in enumerate(code) if c.outputs or c.execution_count is not None]
    assert not dirty, f"code cells {dirty} have stored outputs; clear them before committing"


def _check_progress(outputs: list, text: str, phases: tuple[str, ...]) -> None:
    """The kernels' line, a progress widget per phase of the fits (tqdm's notebook bar:
    ipywidgets is in the examples extra, so no "IProgress not found"), and no Dask shuffle
    notices."""
    assert "kernels ready in" in text
    assert ("compiling kernels (first run only) ..." in text
            or "loading the kernels on the workers ..." in text)
    widgets = [o.data["text/plain"] for o in outputs if o.output_type == "display_data"
               and "application/vnd.jupyter.widget-view+json" in o.data]
    for phase in phases:
        assert any(w.startswith(f"{phase}:") for w in widgets), (phase, widgets)
    assert "IProgress" not in text
    assert "distributed.shuffle" not in text


def test_quickstart_runs(tmp_path):
    work_dir = tmp_path / "work"
    nb = _run(QUICKSTART, tmp_path, _kernel_env(work_dir))

    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), "no figure was drawn"
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "Dashboard: http" in text
    _check_progress(outputs, text, ("growing the trunk", "fitting branches"))
    assert "|--- x" in text, "the trunk rules were not printed"
    assert "Sending large graph" not in text  # the models stay on the workers

    import pandas as pd

    pred_dir = work_dir / "predictions"
    parts = sorted(pred_dir.glob("part.*.parquet"))
    assert parts, f"no predictions written to {pred_dir}"
    pred = pd.read_parquet(pred_dir)
    assert len(pred) == 20000 // 4
    for model in ("ebf", "ssf"):
        for col in ("mean", "std", "q05", "q50", "q95"):
            assert pred[f"{model}_{col}"].notna().all()
    assert "ebf_branch" in pred.columns


def _outputs(nb: nbformat.NotebookNode) -> tuple[list, str]:
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    return outputs, "".join(o.get("text", "") for o in outputs if o.output_type == "stream")


def test_retraining_runs(tmp_path):
    work_dir = tmp_path / "work"
    nb = _run(RETRAINING, tmp_path, _kernel_env(work_dir))

    outputs, text = _outputs(nb)
    assert any("image/png" in o.get("data", {}) for o in outputs), "no figure was drawn"
    assert "Dashboard: http" in text
    _check_progress(outputs, text, ("growing the trunk", "fitting branches"))
    assert "Sending large graph" not in text
    days = {"2013-07-01": 1, "2013-08-01": 2, "2013-09-01": 3}
    assert sorted(p.name for p in (work_dir / "flights").iterdir()) == [
        f"date={d}" for d in days]

    from pipelines.registry.store import Registry

    registry = Registry(work_dir / "registry")
    assert registry.versions() == [1, 2, 3]
    for day, version in days.items():
        record = registry.record(version)
        # the day's decision was printed, as the record has it
        assert (f"{day}: version {version}, action {record['action']}, "
                f"decision {record['decision']}") in text
        assert record["lineage"]["new_data"]["path"].endswith(f"date={day}")
        assert record["lineage"]["new_data"]["rows"] == 1500 * (6 if version == 1 else 1)
        if version > 1:
            assert record["action"] in ("update", "refit")
            assert f"trunk drift: {record['drift']['decision'].upper()}" in text
    assert registry.record(1)["decision"] == "trained"
    # the comparison table: both models scored on the next month for every day
    for column in ("retrained_rmse", "scratch_rmse", "retrained_nlpd", "scratch_gap"):
        assert column in text
