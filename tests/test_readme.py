"""The README's Python and command-line examples run verbatim (issue 27, item 2).

The Python block runs in a fresh interpreter; the bash block runs line by line through
``bash -e`` in an empty folder, with the ``ebf`` of this environment. Both must finish with
exit status 0; their output is checked for the numbers they promise to print.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", README, flags=re.M | re.S)


def _env() -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT),
                                                       os.environ.get("PYTHONPATH", "")]))
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    return env


def test_the_readme_opens_with_the_two_commands_ci_runs():
    first = _blocks("bash")[0]
    assert "ebf demo" in first
    ci = (ROOT / ".ci" / "run").read_text()
    test_command = next(line for line in first.splitlines() if "pytest" in line)
    assert test_command.split("&& ", 2)[-1] in ci  # the install and test command, verbatim


@pytest.mark.timeout(900)
def test_the_python_example_runs(tmp_path):
    (python,) = _blocks("python")
    done = subprocess.run([sys.executable, "-c", python], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=850)
    assert done.returncode == 0, done.stderr[-3000:]
    nlpd, coverage = map(float, re.fullmatch(r"NLPD (\S+), 90% coverage (\S+)\n",
                                             done.stdout).groups())
    assert nlpd < 2.5 and 0.8 <= coverage <= 1.0


@pytest.mark.timeout(900)
def test_the_command_line_example_runs(tmp_path):
    cli = _blocks("bash")[1]
    assert len(cli.strip().splitlines()) == 5
    env = dict(_env(), EBF_LOCAL_PROCESSES="0")  # threads: the same commands, a faster start
    done = subprocess.run(["bash", "-e", "-c", cli], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=850)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "RMSE" in done.stdout and "NLPD" in done.stdout
    assert (tmp_path / "model" / "manifest.json").is_file()
    assert (tmp_path / "predictions" / "_ebf_output.json").is_file()
