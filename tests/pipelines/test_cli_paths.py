"""Every path the ``ebf`` command writes goes through the one output policy (issue 26, item 1).

The options are read off the argparse tree, so a new string-valued option fails
:func:`test_every_string_option_is_classified` until it is entered in :data:`ROLES`; every
option that writes is then aimed at the input data (a Parquet folder the user wrote, not
ebf), the model, a registry version's model folder and record, and the current directory,
each with ``--overwrite`` where the command has it. Each must be refused before any work,
with nothing changed anywhere.
"""

from __future__ import annotations

import argparse
import os
import shutil

import numpy as np
import pandas as pd
import pytest

from pipelines.cli import build_parser, main
from tests.pipelines.test_registry import snapshot

#: (subcommand path, dest) -> what the value names. "output": a directory or file the command
#: writes; "registry": a registry the command writes into (created if absent); "input": read
#: only; "word": a column, a name, an address, not a path.
ROLES = {
    ("make-data", "friedman", "out"): "output",
    ("train", "data"): "input",
    ("train", "target"): "word",
    ("train", "features"): "word",
    ("train", "baseline_out"): "output",
    ("train", "out"): "output",
    ("train", "mlflow_uri"): "output",  # a file store is written (tests/pipelines/test_tracking.py)
    ("train", "mlflow_experiment"): "word",
    ("predict", "model"): "input",
    ("predict", "data"): "input",
    ("predict", "out"): "output",
    ("predict", "keep"): "word",
    ("evaluate", "model"): "input",
    ("evaluate", "data"): "input",
    ("evaluate", "target"): "word",
    ("evaluate", "json"): "output",
    ("evaluate", "report"): "output",
    ("evaluate", "predictions"): "output",
    ("evaluate", "keep"): "word",
    ("evaluate", "target_unit"): "word",
    ("migrate-model", "old"): "input",
    ("migrate-model", "new"): "output",
    ("registry", "list", "registry"): "input",
    ("registry", "list", "name"): "word",
    ("registry", "show", "registry"): "input",
    ("registry", "show", "name"): "word",
    ("registry", "promote", "registry"): "registry",
    ("registry", "promote", "name"): "word",
    ("registry", "rollback", "registry"): "registry",
    ("registry", "rollback", "name"): "word",
    ("registry", "unlock", "registry"): "registry",
    ("registry", "unlock", "name"): "word",
    ("registry", "compare", "registry"): "input",
    ("registry", "compare", "data"): "input",
    ("registry", "compare", "target"): "word",
    ("registry", "compare", "name"): "word",
    ("demo", "out"): "output",
    ("retrain", "registry"): "registry",
    ("retrain", "data"): "input",
    ("retrain", "name"): "word",
    ("retrain", "holdout_data"): "input",
    ("retrain", "target"): "word",
    ("retrain", "features"): "word",
    ("retrain", "mlflow_uri"): "output",
    ("retrain", "mlflow_experiment"): "word",
    ("retrain", "mlflow_register"): "word",  # a Model Registry name (test_mlflow_flavor.py)
    ("importance", "model"): "input",
    ("importance", "data"): "input",
    ("importance", "target"): "word",
    ("cluster", "k8s", "out"): "output",
    ("cluster", "dockerfile", "out"): "output",
    **{("cluster", "k8s", dest): "word"
       for dest in ("env", "image", "job", "name", "namespace", "secret")},
    # paths on the cluster's machines, written into the job script, never opened here
    **{("cluster", system, dest): "word" for system in ("slurm", "pbs")
       for dest in ("account", "dashboard_address", "interface", "job_extra",
                    "local_directory", "log_directory", "prologue", "queue", "walltime",
                    "worker_extra")},
}
_CLUSTER = ("scheduler", "scheduler_file")  # every job's: an address, a file read
_GLOBAL = ("config",)  # every command's: a TOML file read (tests/pipelines/test_cli_config.py)


def _string_options(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(subcommand path, dest) of every option whose value is a free string."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _string_options(sub, (*path, name))
        elif (action.nargs != 0 and action.type is None and action.choices is None
              and action.dest not in ("help", "version", *_CLUSTER, *_GLOBAL)):
            yield (*path, action.dest)


def test_every_string_option_is_classified():
    found = set(_string_options(build_parser()))
    assert found - set(ROLES) == set(), "classify the new options in ROLES (and test them)"
    assert set(ROLES) - found == set(), "ROLES names options that are gone"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The user's data (written by pandas), a model trained on it, a registry holding it."""
    from pipelines.registry.store import Registry

    root = tmp_path_factory.mktemp("world")
    data = root / "data"
    data.mkdir()
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.random((600, 3)), columns=["a", "b", "c"])
    frame["y"] = frame["a"] * 3 + rng.normal(0, 0.1, len(frame))
    frame.to_parquet(data / "part-0.parquet")
    model = root / "model"
    old = os.environ.get("EBF_LOCAL_PROCESSES")
    os.environ["EBF_LOCAL_PROCESSES"] = "0"
    try:
        assert main(["train", str(data), "--target", "y", "--n-estimators", "2",
                     "--trunk-leaves", "2", "--out", str(model), "--quiet"]) == 0
        reg = Registry(root / "reg")
        with reg.lock():
            reg.publish(lambda url: shutil.copytree(model, url), {"decision": "trained"},
                        promote=True)
        yield root, data, model, reg
    finally:
        if old is None:
            os.environ.pop("EBF_LOCAL_PROCESSES", None)
        else:
            os.environ["EBF_LOCAL_PROCESSES"] = old


def _argv(command: tuple[str, ...], dest: str, target: str, world, fresh: str) -> list[str]:
    """A command line that would run, with option ``dest`` set to ``target`` (and any other
    output to ``fresh``)."""
    root, data, model, reg = world
    if command == ("make-data", "friedman"):
        return [*command, "--rows", "500", "--out", target, "--overwrite", "--quiet"]
    if command == ("train",):
        if dest == "mlflow_uri":
            return ["train", str(data), "--target", "y", "--out", fresh, "--mlflow-uri", target,
                    "--overwrite", "--quiet"]
        out, base = (target, fresh) if dest == "out" else (fresh, target)
        return ["train", str(data), "--target", "y", "--n-estimators", "2", "--trunk-leaves",
                "2", "--out", out, "--baseline-out", base, "--overwrite", "--quiet"]
    if command == ("predict",):
        return ["predict", str(model), str(data), "--out", target, "--overwrite", "--quiet"]
    if command == ("evaluate",):
        return ["evaluate", str(model), str(data), f"--{dest}", target, "--overwrite", "--quiet"]
    if command == ("migrate-model",):
        return ["migrate-model", str(model), target, "--overwrite"]
    if command == ("demo",):
        return ["demo", "--rows", "2000", "--out", target, "--quiet"]
    if command == ("retrain",):
        if dest == "mlflow_uri":
            return ["retrain", fresh, str(data), "--target", "y", "--mlflow-uri", target,
                    "--quiet"]
        return ["retrain", target, str(data), "--target", "y", "--n-estimators", "2", "--quiet"]
    if command == ("cluster", "k8s"):
        return ["cluster", "k8s", "--image", "ebf:latest", "--out", target, "--overwrite"]
    if command == ("cluster", "dockerfile"):
        return ["cluster", "dockerfile", "--out", target, "--overwrite"]
    if command[0] == "registry":
        return [*command, f"{target}@1" if command[1] == "promote" else target]
    raise AssertionError(f"no command line for {command}")


_WRITERS = sorted(key for key, role in ROLES.items() if role in ("output", "registry"))
_TARGETS = ("data", "model", "member-dir", "member-file", ".")


@pytest.mark.parametrize("target", _TARGETS)
@pytest.mark.parametrize("option", _WRITERS, ids="-".join)
def test_writers_aimed_at_what_must_stay_are_refused(world, option, target, tmp_path,
                                                     monkeypatch, capsys):
    root, data, model, reg = world
    if option == ("retrain", "registry") and target == ".":
        pytest.skip("a registry root only gains models/NAME: the current folder is one")
    if option[0] == "train" and option[-1] != "mlflow_uri" and target == "model":
        pytest.skip("train --overwrite replaces an ebf model that is not its input: wanted")
    member = os.path.dirname(reg.model_path(1))
    path = {"data": str(data), "model": str(model), "member-dir": reg.model_path(1),
            "member-file": os.path.join(member, "version.json"), ".": "."}[target]
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    (cwd / "notes.txt").write_text("mine")
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("EBF_LOCAL_PROCESSES", "0")
    before, here = snapshot(root), snapshot(cwd)
    fresh = tmp_path / "fresh-output"
    assert main(_argv(option[:-1], option[-1], path, world, str(fresh))) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert snapshot(root) == before and snapshot(cwd) == here
    assert not fresh.exists()
