"""Every shell example of the docs runs as a new user pastes it (issue 47).

The Python blocks of the pages run in ``tests/test_docs.py`` and the README's examples in
``tests/test_readme.py``; here the commands of every ```` ```bash ```` block of ``docs/``
run, a page's commands in order in one empty directory, on small data
(``tests/doc_examples.py`` says how: the commands that cannot run here are skipped, each with
its reason, and the sizes capped). Every command must exit with status 0, or with another
status its page documents as a success (``ebf retrain``'s 10, the champion kept), and say no
warning twice; the getting-started commands, on held-out data, say none.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.doc_examples import GIVEN, ROOT, SKIP, Command, run, shell_commands, warnings_of
from tests.test_docs import PAGES

COMMANDS = {str(p.relative_to(ROOT)): shell_commands(p) for p in PAGES}
RUNNABLE = sorted(page for page, commands in COMMANDS.items()
                  if any(not c.skip for c in commands))


def test_every_skip_is_used_and_explained():
    """A skip that matches no command (the docs changed) is stale: remove it."""
    readme = shell_commands(ROOT / "README.md")
    every = [c for commands in COMMANDS.values() for c in commands] + readme
    for pattern, why in SKIP:
        assert len(why) > 20, f"skip {pattern!r} needs its reason"
        assert any(re.search(pattern, c.text) for c in every), f"skip {pattern!r} is stale"
    assert set(GIVEN) <= set(RUNNABLE)


def test_most_commands_run():
    """A ratchet: 46 of the pages' 100 commands run here (most of the others need a
    Kubernetes or batch cluster); skipping more means lowering it on purpose."""
    every = [c for commands in COMMANDS.values() for c in commands]
    ran = [c for c in every if not c.skip]
    assert len(ran) >= 46, (
        f"{len(ran)} of {len(every)} commands run; skipped: "
        f"{[(c.where, c.skip) for c in every if c.skip]}")


@pytest.mark.timeout(600)
@pytest.mark.parametrize("page", RUNNABLE)
def test_page_commands_run(page, tmp_path):
    ran = run(COMMANDS[page], tmp_path, given=GIVEN.get(page, ()))
    for r in ran:
        lines = warnings_of(r)
        assert len(lines) == len(set(lines)), f"{r.where}: a warning twice: {lines}"
    if page == "docs/getting-started.md":
        _check_getting_started(ran, tmp_path)


def _check_getting_started(ran, tmp_path):
    """Held-out data: a new user pasting the page sees no warning; evaluating the model on
    its training rows instead says so once."""
    assert not [line for r in ran for line in warnings_of(r)]
    (evaluation,) = [r for r in ran if r.run.startswith("ebf evaluate")]
    assert "RMSE" in evaluation.stdout and (tmp_path / "eval.html").is_file()
    # -v: the library's INFO logs on stderr too, which said it a second time
    (in_sample,) = run([Command("in-sample", "ebf evaluate models/friedman data/friedman "
                                "--json -v")], tmp_path)
    said = [line for line in in_sample.stderr.splitlines() if "in-sample and optimistic" in line]
    assert len(said) == 1 and said[0].startswith("ebf evaluate: warning: "), said
    assert len(json.loads(in_sample.stdout)["warnings"]) == 1
