"""The documentation: the site builds, its snippets run, its commands parse, nothing points out.

- The Sphinx site (``docs/``, MyST Markdown pages and the API reference from the docstrings)
  builds with warnings as errors (``-W``): a broken link between pages, a page outside the
  table of contents, a docstring that is not valid reStructuredText or an unknown module in
  the API reference fails the build.
- Every ```` ```python ```` block of a page runs, the page's blocks in order in one fresh
  process (so a page may build on its earlier blocks), in a temporary directory. A block that
  must not run is marked ``<!-- no-run: reason -->`` on the line before it; such blocks are
  few and each says why.
- Every ``ebf ...`` line of a ```` ```bash ```` block parses with the CLI's own argparse
  parser, so a renamed or removed option fails here; ``tests/test_doc_examples.py`` runs
  them.
- No file of the repository points into the engineers' shared directory next to it.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts)

#: ``<!-- no-run: reason -->`` right before a block keeps it from running.
NO_RUN = re.compile(r"^<!--\s*no-run:\s*(?P<reason>.*?)\s*-->$")
#: At most this share of the Python blocks may be marked no-run.
MAX_NO_RUN_SHARE = 0.10


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    no_run: str | None  # the reason, if marked no-run

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def fenced_blocks(page: Path) -> list[Block]:
    """The fenced code blocks of a Markdown page (fences of three backticks at column 0)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        if not lines[i].startswith("```"):
            i += 1
            continue
        lang = lines[i][3:].strip()
        start, body = i, []
        i += 1
        while i < len(lines) and lines[i].rstrip() != "```":
            body.append(lines[i])
            i += 1
        assert i < len(lines), f"{page.relative_to(ROOT)}:{start + 1}: unclosed code fence"
        before = next((lines[j].strip() for j in range(start - 1, -1, -1) if lines[j].strip()),
                      "")
        match = NO_RUN.match(before)
        blocks.append(Block(page, start + 1, lang, "\n".join(body) + "\n",
                            match["reason"] if match else None))
        i += 1
    return blocks


BLOCKS = [b for page in PAGES for b in fenced_blocks(page)]
PYTHON = [b for b in BLOCKS if b.lang == "python"]


def test_pages_exist():
    assert DOCS.joinpath("conf.py").is_file() and DOCS.joinpath("index.md").is_file()
    assert len(PYTHON) >= 10, f"only {len(PYTHON)} python blocks in docs/"


@pytest.mark.timeout(600)
def test_site_builds_without_warnings(tmp_path):
    """``sphinx-build -W``: every warning (broken link, bad docstring, ...) is an error."""
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
           "-d", str(tmp_path / "doctrees"), str(DOCS), str(tmp_path / "html")]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=580,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}"
    assert (tmp_path / "html" / "index.html").is_file()
    assert (tmp_path / "html" / "api" / "ebf.html").is_file()


def test_no_run_blocks_are_few_and_explained():
    marked = [b for b in PYTHON if b.no_run is not None]
    assert all(b.no_run for b in marked), [b.where for b in marked if not b.no_run]
    assert len(marked) <= MAX_NO_RUN_SHARE * len(PYTHON), (
        f"{len(marked)} of {len(PYTHON)} python blocks are no-run: "
        f"{[b.where for b in marked]}")


_DRIVER = textwrap.dedent('''
    import sys
    import traceback

    BLOCKS = {blocks!r}

    def main():
        namespace = {{"__name__": "__main__"}}
        for where, code in BLOCKS:
            try:
                exec(compile(code, where, "exec"), namespace)
            except BaseException:
                traceback.print_exc()
                print(f"docs snippet failed: {{where}}", file=sys.stderr)
                sys.exit(1)

    if __name__ == "__main__":
        main()
''')


# A page's snippets take seconds once numba's cache is warm; compiling the kernels they use
# from a cold cache (a fresh checkout) takes minutes on two cores.
@pytest.mark.timeout(900)
@pytest.mark.parametrize("page", sorted({b.page for b in PYTHON}),
                         ids=lambda p: str(p.relative_to(DOCS)))
def test_python_snippets_run(page, tmp_path):
    """A page's python blocks run in order in one fresh process, in an empty directory."""
    blocks = [(b.where, b.code) for b in PYTHON if b.page == page and b.no_run is None]
    if not blocks:
        pytest.skip("every block of the page is marked no-run")
    driver = tmp_path / "run_snippets.py"
    driver.write_text(_DRIVER.format(blocks=blocks))
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, str(driver)], cwd=work, capture_output=True,
                          text=True, timeout=880, env=env)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"


def _command_lines(block: Block) -> list[tuple[int, str]]:
    """``(line, command)`` of every ``ebf ...`` command of a bash block, continuations joined."""
    out, pending, first = [], "", 0
    for offset, line in enumerate(block.code.splitlines(), start=block.line + 1):
        if not pending:
            first = offset
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        text, pending = (pending + line).strip(), ""
        if text.startswith("ebf "):
            out.append((first, text))
    return out


COMMANDS = [(f"{b.page.relative_to(ROOT)}:{line}", text)
            for b in BLOCKS if b.lang in ("bash", "sh", "console") for line, text in
            _command_lines(b)]


def test_docs_show_commands():
    assert len(COMMANDS) >= 20, f"only {len(COMMANDS)} ebf commands in docs/"


def _ebf_words(command: str) -> list[str]:
    """The words of the ``ebf`` command of a shell line: up to a control operator (``|``,
    ``&``, ``;``, ``>``...), so ``ebf ... | kubectl apply -f -`` and ``ebf ... &`` parse.

    >>> _ebf_words("ebf cluster k8s --job 'a | b' | kubectl apply -f -  # note")
    ['ebf', 'cluster', 'k8s', '--job', 'a | b']
    """
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    words = []
    for word in lexer:
        if word and set(word) <= set("();<>|&"):
            break
        words.append(word)
    return words


@pytest.mark.parametrize("where, command", COMMANDS, ids=[w for w, _ in COMMANDS])
def test_cli_commands_parse(where, command, capsys):
    """The command parses with the CLI's own parser (it is not run)."""
    from pipelines.cli import build_parser

    argv = _ebf_words(command)[1:]
    try:
        build_parser().parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"{where}: `{command}` does not parse (exit {exc.code}):\n"
                    f"{capsys.readouterr().err}")


#: Directories that are not the repository's content.
_SKIP_DIRS = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", "_build",
              "build", "dist", "site", ".ipynb_checkpoints"}


def test_nothing_points_outside_the_repository():
    needle = b"../" + b"shared"  # spelled in two parts so that this file does not match
    found = []
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames
                       if d not in _SKIP_DIRS and not d.endswith(".egg-info")]
        for name in filenames:
            path = Path(dirpath, name)
            rel = path.relative_to(ROOT).as_posix()
            if not path.is_file():
                continue
            if needle in path.read_bytes():
                found.append(rel)
    assert not found, f"files pointing outside the repository ({needle.decode()}): {found}"
