"""The README's Python and command-line examples run verbatim (issue 27, item 2).

The Python block runs in a fresh interpreter; the command-line block runs command by command
in an empty folder, with the ``ebf`` of this environment, on small data
(``tests/doc_examples.py``, which runs the docs' shell examples too). Both must finish with
exit status 0; their output is checked for the numbers they promise to print. The first
block (install, demo, test suite) is what CI itself runs.
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


@pytest.mark.timeout(600)
def test_the_command_line_example_runs(tmp_path):
    """The README's second shell block, as tests/doc_examples.py runs the docs' commands
    (on 3,000 rows: the sizes capped)."""
    from tests.doc_examples import run, shell_commands

    # the first block's lines start with the install (which ends in ebf demo)
    commands = [c for c in shell_commands(ROOT / "README.md") if c.text.startswith("ebf ")]
    assert len(commands) == 5 and not [c for c in commands if c.skip]
    ran = run(commands, tmp_path)
    assert "RMSE" in ran[-1].stdout and "NLPD" in ran[-1].stdout
    assert (tmp_path / "model" / "manifest.json").is_file()
    assert (tmp_path / "predictions" / "_ebf_output.json").is_file()
