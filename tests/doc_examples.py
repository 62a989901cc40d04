"""The shell examples of the README and the docs, as commands a new user pastes.

Used by ``tests/test_doc_examples.py`` (the docs' pages) and ``tests/test_readme.py`` (the
README's command-line block). A shell block (```` ```bash ````, ``sh``, ``console``,
``shell``) is cut into its commands (a line, with its ``\\`` continuations); every command
runs in a temporary directory shared by the page, in the page's order, with the ``ebf`` and
``python`` of this environment, and must exit with 0 (or another status its page documents
as success: :data:`_STATUSES`). A page's plain ``ebf`` commands (words only, no shell syntax)
run in one fresh Python process, each as the ``ebf`` script runs it
(:func:`pipelines.cli.main` on its words), which saves every command the seconds of starting
Python and importing Dask; the others run through ``bash -e``. Except:

- the commands :data:`SKIP` names, each with why it cannot run here (a fresh install, the
  suite itself, a cluster to submit to, a container engine, S3 on AWS, ...);
- sizes, which :func:`shrink` caps so that the whole page takes seconds: ``--rows``,
  ``--n-train``, ``--n-test`` and ``--min-leaf-rows`` above :data:`CAPS` are lowered to it,
  and ``ebf demo`` without ``--rows`` gets ``--rows`` (a command that the caps make the
  same as one already run on the page runs once). The pages state the real sizes (the
  defaults a user gets); the commands are otherwise run as written.

What a page uses but does not make (the flights of a month as ``data/2013-01``, a dataset
with an ``id`` column, a format-1 model, a registry with a version) is made first by the
page's :data:`GIVEN` lines: they are the test's, not examples.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHELLS = ("bash", "sh", "console", "shell")

#: Commands that cannot run here: (pattern searched in the command, why).
SKIP: tuple[tuple[str, str], ...] = (
    (r"python3? -m venv|pip install",
     "installs into a new virtual environment: CI's first step (.ci/run) is that install"),
    (r"python -m pytest", "runs the test suite, of which this test is a part"),
    (r"python -m tests\.durations", "reads the log of a whole run of the suite"),
    (r"-m sphinx", "builds the site: tests/test_docs.py does (-W, warnings as errors)"),
    (r"benchmarks[./]bench_",
     "a benchmark: minutes on two cores; tests/test_benchmarks.py runs their smoke modes"),
    (r"^(helm|docker|kind|k3d) |\bkubectl\b",
     "needs a Kubernetes cluster or a container engine; tests/cluster/test_kubernetes.py "
     "checks the manifests"),
    (r"localhost:(8786|9000)|S3FileSystem\(\)\.mkdir|^kill %",
     "talks to the kind cluster of the walkthrough (its scheduler, MinIO and port-forwards); "
     "tests/pipelines/test_s3.py runs make-data, train and evaluate on a local S3 server"),
    (r"^dask (scheduler|worker) ",
     "starts a long-lived Dask scheduler or worker (on other machines, or in the background)"),
    (r"--scheduler-file ~/dask/",
     "joins the scheduler the lines above start on a cluster; tests/cluster/test_cluster.py "
     "connects through a scheduler file"),
    (r"^ebf (train|predict) s3://bucket/",
     "S3 on AWS (a bucket and credentials); tests/pipelines/test_s3.py runs train, predict and "
     "a registry against a local S3 server"),
    (r"http://mlflow:5000", "needs an MLflow tracking server at that address"),
    (r"--mlflow-uri http://127\.0\.0\.1:5000",
     "logs to the tracking server the page starts; tests/pipelines/test_mlflow_flavor.py runs "
     "ebf retrain --mlflow-register against a real one"),
    (r"^mlflow models predict -m models:/",
     "reads the model the tracking server above registered; tests/pipelines/"
     "test_mlflow_flavor.py runs mlflow models predict on a logged model (-m soak)"),
    (r"mlflow server ",
     "starts a long-lived MLflow tracking server (from an environment of its own); "
     "tests/pipelines/test_mlflow_flavor.py starts one and logs to it"),
    (r"registry/models/flights@",
     "a registry root holding several model names, not the registry the page builds"),
)

#: Exit statuses that are success, by ``ebf`` subcommand (docs/retraining.md): 10 is
#: ``ebf retrain``'s "the champion was kept", a healthy night.
_STATUSES = {"retrain": (0, 10)}

#: The largest sizes the test runs (see :func:`shrink`).
CAPS = {"--rows": 3000, "--n-train": 2000, "--n-test": 500, "--min-leaf-rows": 500}

_FLIGHTS = """
import os, sys
import numpy as np
from pipelines.datasets import load_flight_delays
X, y = load_flight_delays()
flights = X.assign(arr_delay=y)
for name, month in (("data/2013-01", 1), ("data/2013-02", 2), ("data/new", 3),
                    ("data/test", 4)):
    part = flights[flights["month"] == month]
    part = part.iloc[np.linspace(0, len(part) - 1, 1500).astype(int)]
    os.makedirs(name)
    part.to_parquet(f"{name}/part.0.parquet", index=False)
"""

_FRIEDMAN_WITH_IDS = """
import os
import numpy as np
from ebf import EmpiricalBayesianForestRegressor, save
from pipelines.make_data import friedman_partition
for name, seed in (("data/new", 2), ("data/test", 3)):
    frame = friedman_partition(0, 1000, random_state=seed)
    frame.insert(0, "id", np.arange(len(frame)))
    os.makedirs(name)
    frame.to_parquet(f"{name}/part.0.parquet", index=False)
X = np.random.default_rng(0).random((300, 3))
model = EmpiricalBayesianForestRegressor(n_estimators=2, random_state=0).fit(X, X[:, 0])
save(model, "models/old", format_version=1)
"""

#: What a page uses but does not make, made before its first command.
GIVEN: dict[str, tuple[str, ...]] = {
    "docs/cli.md": (
        f"python -c '{_FRIEDMAN_WITH_IDS}'",
        "ebf make-data friedman --rows 1000 --seed 4 --out data/2013-01 --quiet",
        "ebf make-data friedman --rows 1000 --seed 5 --out data/2013-02 --quiet",
        "ebf retrain registry/ data/2013-01 --target y --quiet",
    ),
    "docs/retraining.md": (f"python -c '{_FLIGHTS}'",),
}


@dataclass(frozen=True)
class Command:
    """One command of a shell block: where it starts, its text (continuations joined)."""

    where: str
    text: str

    @property
    def skip(self) -> str | None:
        """Why it does not run here, or None."""
        return next((why for pattern, why in SKIP if re.search(pattern, self.text)), None)


def _fenced_blocks(page: Path):
    from tests.test_docs import fenced_blocks

    return fenced_blocks(page)


def shell_commands(page: Path) -> list[Command]:
    """The commands of the page's shell blocks, in order."""
    out = []
    for block in _fenced_blocks(page):
        if block.lang not in SHELLS:
            continue
        pending, first = "", 0
        for offset, line in enumerate(block.code.splitlines(), start=block.line + 1):
            if not pending:
                first = offset
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1].rstrip() + " "
                continue
            text, pending = (pending + line).strip(), ""
            if text and not text.startswith("#"):
                out.append(Command(f"{page.relative_to(ROOT)}:{first}", text))
    return out


def _number(text: str) -> float:
    return float(text.replace("_", ""))


def shrink(command: str) -> str:
    """``command`` with the sizes of :data:`CAPS` capped.

    >>> shrink("ebf make-data friedman --rows 10_000_000 --out d  # ten million")
    'ebf make-data friedman --rows 3000 --out d  # ten million'
    >>> shrink("ebf demo                 # all flights")
    'ebf demo --rows 3000                 # all flights'
    >>> shrink("ebf flights --n-train 1e6 --n-test 100")
    'ebf flights --n-train 2000 --n-test 100'
    """
    for option, cap in CAPS.items():
        command = re.sub(
            rf"(?<=\s){re.escape(option)}([ =])([0-9_.eE+]+)",
            lambda m, o=option, c=cap: (f"{o}{m[1]}{c}" if _number(m[2]) > c else m[0]),
            command)
    if re.match(r"ebf demo\b", command) and "--rows" not in command.split("#")[0]:
        command = command.replace("ebf demo", f"ebf demo --rows {CAPS['--rows']}", 1)
    return command


def environment() -> dict[str, str]:
    """This interpreter's ``ebf`` and ``python`` first on the PATH, the repository
    importable, local clusters of threads (the same commands, a faster start), no
    configured scheduler, figures without a display."""
    env = dict(os.environ)
    env.pop("DASK_SCHEDULER_ADDRESS", None)
    env.update(
        PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
        PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
        EBF_LOCAL_PROCESSES="0",
        MPLBACKEND="Agg",
    )
    return env


@dataclass(frozen=True)
class Ran:
    """What one command did."""

    where: str
    run: str  # the text run (shrunk)
    status: int
    stdout: str
    stderr: str
    seconds: float


def _successes(text: str) -> tuple[int, ...]:
    subcommand = re.search(r"\bebf (\S+)", text)
    return _STATUSES.get(subcommand[1] if subcommand else "", (0,))


def _ebf_words(text: str) -> tuple[dict[str, str], list[str]] | None:
    """The ``VAR=value`` prefix and the words of a plain ``ebf`` command, ``$PWD`` expanded
    as bash would; None for any other shell syntax (operators, other variables, ``~``).

    >>> _ebf_words("A=1 ebf train d --out $PWD/m  # note")[1][:3]
    ['train', 'd', '--out']
    >>> _ebf_words("ebf cluster k8s | kubectl apply -f -") is None
    True
    """
    if any(ch in text.replace("$PWD", "") for ch in "$`~"):
        return None
    lexer = shlex.shlex(text.replace("$PWD", os.getcwd()), posix=True,
                        punctuation_chars=True)
    lexer.whitespace_split = True
    words = list(lexer)
    env = {}
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if not words or words[0] != "ebf" or any(set(w) <= set("();<>|&") for w in words):
        return None
    return env, words[1:]


def _one(text: str, env: dict[str, str]) -> tuple[int, str, str]:
    """Run a command: a plain ``ebf`` command in this process (the ``ebf`` script's
    :func:`pipelines.cli.main` on its words, its ``VAR=value`` prefix in the environment
    while it runs), a line ``VAR=value`` alone into ``env`` for the commands after it (as
    the shell a user pastes the page into keeps it), anything else through ``bash -e``."""
    assignment = re.fullmatch(r"([A-Z_][A-Z0-9_]*)=(\S*)", text.split("#")[0].strip())
    if assignment:  # a shell variable the page's later commands use
        env[assignment[1]] = assignment[2]
        return 0, "", ""
    parsed = _ebf_words(text)
    if parsed is None:
        done = subprocess.run(["bash", "-e", "-c", text], env=env, capture_output=True,
                              text=True, timeout=600)
        return done.returncode, done.stdout, done.stderr
    from pipelines.cli import main

    variables, words = parsed
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main(words)
            except SystemExit as stop:  # argparse's usage errors
                status = stop.code if isinstance(stop.code, int) else 1
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return status, out.getvalue(), err.getvalue()


def _drive(commands: list[dict], given: list[str], results: Path) -> None:
    """The driver (a fresh process per page): ``given``, then ``commands`` in order, each
    result appended to ``results`` (JSON lines); stops at the first failure."""
    env = dict(os.environ)
    for line in given:
        code = re.fullmatch(r"python -c '(.*)'", line, flags=re.S)
        if code:  # the test's own set-up: here, not in an interpreter of its own
            exec(compile(code[1], "given", "exec"), {"__name__": "given"})
            continue
        status, out, err = _one(line, env)
        if status != 0:
            raise SystemExit(f"given: {line[:200]} exited with {status}:\n{err[-3000:]}")
    with results.open("w") as sink:
        for command in commands:
            start = time.perf_counter()
            status, out, err = _one(command["run"], env)
            ran = {**command, "status": status, "stdout": out, "stderr": err,
                   "seconds": time.perf_counter() - start}
            sink.write(json.dumps(ran) + "\n")
            sink.flush()
            if status not in _successes(command["run"]):
                return


def run(commands: list[Command], cwd: Path, *, given: tuple[str, ...] = (),
        timeout: float = 500) -> list[Ran]:
    """Run ``given``, then every command that is not skipped, in order in ``cwd``, in one
    fresh process (:func:`_drive`: the page's plain ``ebf`` commands in that process, which
    saves each the seconds of starting Python and importing Dask, the others through
    ``bash``); fail on the first command whose status is not a success, naming it."""
    todo, seen = [], set()
    for c in commands:
        text = shrink(c.text)
        words = text.split("#")[0].split()
        # two sizes of one command (ebf demo, ebf demo --rows 50000) capped to one: once
        if c.skip or (text != c.text and tuple(words) in seen):
            continue
        seen.add(tuple(words))
        todo.append({"where": c.where, "run": text})
    results = cwd / ".doc_examples.jsonl"
    request = cwd / ".doc_examples.json"
    request.write_text(json.dumps({"commands": todo, "given": list(given),
                                   "results": str(results)}))
    done = subprocess.run([sys.executable, "-m", "tests.doc_examples", str(request)], cwd=cwd,
                          env=environment(), capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-4000:]
    ran = [Ran(**json.loads(line)) for line in results.read_text().splitlines()]
    for r in ran:
        assert r.status in _successes(r.run), (
            f"{r.where}: `{r.run}` exited with {r.status}:\n{r.stdout[-2000:]}\n"
            f"{r.stderr[-4000:]}")
    assert len(ran) == len(todo), [t["where"] for t in todo[len(ran):]]
    return ran


def warnings_of(ran: Ran) -> list[str]:
    """The lines of a command's stderr that say ``warning``."""
    return [line for line in ran.stderr.splitlines() if re.search(r"warning", line, re.I)]


if __name__ == "__main__":
    _request = json.loads(Path(sys.argv[1]).read_text())
    _drive(_request["commands"], _request["given"], Path(_request["results"]))
