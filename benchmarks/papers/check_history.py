"""When each paper item's check changed after its first committed run, read from git.

An item's *check* is what decides its verdict: the ``claim`` and ``tolerance`` written in
its :class:`~benchmarks.papers.core.Item` and the source of its ``check`` function with
every module-level function and constant that function uses (helpers such as
``taddy._ebf_ssf``). Its *first run* is the first commit that added
``benchmarks/results/papers/<item>.json``. Every commit whose check of the item differs
from its parents' is a change; it is ``after_first_run`` when the commit descends from the
first run (the others changed the check before any run was committed). Rebuild
``check_history.json`` beside this file with::

    python -m benchmarks.papers.check_history

The file maps each item key to ``{"first_run": {commit, date}, "changes": [{commit, date,
subject, after_first_run, what, before, after}]}``; ``what`` names the parts that changed
and ``before`` / ``after`` hold those parts (the check's source text, the claim, the
tolerance). The text is compared, so a helper edited without changing what it decides for
the item still counts as a change.
"""

from __future__ import annotations

import ast
import functools
import json
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PAPERS = "benchmarks/papers"
RESULTS = "benchmarks/results/papers"
OUT = HERE / "check_history.json"


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout


@functools.cache
def _trees(commit: str) -> tuple[tuple[str, ast.Module], ...]:
    """(source, syntax tree) of every Python file of the papers package at ``commit``."""
    listed = subprocess.run(["git", "ls-tree", "--name-only", f"{commit}:{PAPERS}"], cwd=ROOT,
                            capture_output=True, text=True)
    names = listed.stdout.split() if listed.returncode == 0 else []  # no papers there yet
    sources = [_git("show", f"{commit}:{PAPERS}/{n}") for n in names if n.endswith(".py")]
    return tuple((src, ast.parse(src)) for src in sources)


def _top_names(tree: ast.Module) -> dict[str, ast.stmt]:
    """Module-level functions and simple assignments by name (the check's vocabulary)."""
    found: dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            found[node.name] = node
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    found[t.id] = node
    return found


def _item_call(tree: ast.Module, key: str) -> ast.Call | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Item":
            for kw in node.keywords:
                if kw.arg == "key" and isinstance(kw.value, ast.Constant) and kw.value.value == key:
                    return node
    return None


def _text(node: ast.expr, source: str) -> str:
    try:
        return str(ast.literal_eval(node))
    except ValueError:
        return ast.get_source_segment(source, node) or ""


def _check_source(expr: ast.expr, source: str, names: dict[str, ast.stmt]) -> str:
    """The check expression, then every module-level definition it reaches, by name."""
    parts = [ast.get_source_segment(source, expr) or ""]
    seen: set[str] = set()
    todo = [expr]
    while todo:
        node = todo.pop()
        for sub in ast.walk(node):
            name = sub.id if isinstance(sub, ast.Name) else None
            if name and name not in seen and name in names and name not in ("ITEMS",):
                stmt = names[name]
                if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call) \
                        and getattr(stmt.value.func, "id", None) == "Item":
                    continue  # another item, not part of this check
                seen.add(name)
                parts.append(ast.get_source_segment(source, stmt) or "")
                todo.append(stmt)
    return "\n\n".join(parts)


@functools.cache
def check_at(commit: str, key: str) -> dict[str, str] | None:
    """``{"check", "claim", "tolerance"}`` of ``key`` at ``commit`` (None: no such item)."""
    for source, tree in _trees(commit):
        call = _item_call(tree, key)
        if call is None:
            continue
        kw = {k.arg: k.value for k in call.keywords}
        names = _top_names(tree)
        return {"check": _check_source(kw["check"], source, names),
                "claim": _text(kw["claim"], source),
                "tolerance": _text(kw["tolerance"], source)}
    return None


def _first_run(key: str) -> tuple[str, str] | None:
    log = _git("log", "--diff-filter=A", "--format=%H %cI", "--", f"{RESULTS}/{key}.json")
    lines = log.strip().splitlines()
    return tuple(lines[-1].split()) if lines else None


def _descends(commit: str, ancestor: str) -> bool:
    return subprocess.run(["git", "merge-base", "--is-ancestor", ancestor, commit],
                          cwd=ROOT).returncode == 0


def history(key: str, commits: list[list[str]]) -> dict:
    """The first run of ``key`` and every change of its check since the item was written.

    ``commits`` are ``[commit, parent, ...]`` lines of the papers package's history, oldest
    first; a change is flagged ``after_first_run`` when its commit descends from the run.
    """
    first, first_date = _first_run(key)
    changes = []
    for commit, *parents in commits:
        now = check_at(commit, key)
        before = [check_at(p, key) for p in parents]
        if now is None or any(b == now for b in before):
            continue
        prev = next((b for b in before if b is not None), None)
        if prev is None:
            continue  # the item is written here
        what = [k for k in ("check", "claim", "tolerance") if prev[k] != now[k]]
        date, subject = _git("show", "-s", "--format=%cI%n%s", commit).split("\n", 1)
        changes.append({"commit": commit, "date": date, "subject": subject.strip(),
                        "after_first_run": _descends(commit, first) and commit != first,
                        "what": what, "before": {k: prev[k] for k in what},
                        "after": {k: now[k] for k in what}})
    return {"first_run": {"commit": first, "date": first_date}, "changes": changes}


def build() -> dict[str, dict]:
    """Every item with a committed result, by key."""
    keys = sorted(p.stem for p in (ROOT / RESULTS).glob("*.json"))
    commits = [line.split() for line in _git("rev-list", "--reverse", "--topo-order",
                                              "--parents", "HEAD", "--", PAPERS).splitlines()]
    return {k: history(k, commits) for k in keys if _first_run(k)}


def load(path: Path = OUT) -> dict[str, dict]:
    """The stored history (empty when it has not been built)."""
    return json.loads(path.read_text()) if path.exists() else {}


def main() -> None:
    OUT.write_text(json.dumps(build(), indent=1, sort_keys=True) + "\n")
    print(OUT.relative_to(ROOT))


if __name__ == "__main__":
    main()
