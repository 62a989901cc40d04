"""Sphinx configuration of the ebf documentation.

Build it with ``python -m sphinx -W --keep-going -b html docs docs/_build/html`` from the
repository root (``tests/test_docs.py`` does, with warnings as errors). Pages are Markdown
(MyST); the API reference comes from the numpydoc docstrings through autodoc; the CLI
reference is printed by the CLI's own argparse parser (the ``ebf-cli-help`` directive
below), so it cannot drift from the code.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

project = "ebf"
author = "the ebf authors"
copyright = "the ebf authors"

extensions = ["myst_parser", "sphinx.ext.autodoc", "numpydoc"]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build"]

html_theme = "furo"
html_title = "ebf"

# MyST: anchors for headings down to ###, so that [text](page.md#a-heading) links resolve
# (and a broken one is a warning, an error under -W).
myst_heading_anchors = 3

# autodoc + numpydoc: signatures without type hints (the numpydoc sections give the types),
# members in source order, no autosummary tables of class members. Members our estimators
# inherit from our own bases (the predictive API, partial_fit, recalibrate) are shown;
# scikit-learn's (get_params, score, ...) are not (_skip_member).
autodoc_typehints = "none"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "inherited-members": True}
numpydoc_show_class_members = False
numpydoc_validation_checks: set[str] = set()


def _skip_member(app, what, name, obj, skip, options):
    """What our classes inherit from scikit-learn (``get_params``, ``score``, the generated
    ``set_*_request`` methods, ...) documents scikit-learn, not us."""
    if name.startswith("set_") and name.endswith("_request"):
        return True
    module = getattr(obj, "__module__", None) or ""
    if what == "class" and module.split(".")[0] == "sklearn":
        return True
    return None


def _module_sections(app, what, name, obj, options, lines):
    """numpydoc leaves module docstrings alone: their section titles ("Examples" over a line
    of dashes) would become sections of the page, so make them rubrics as in a class."""
    if what != "module":
        return
    out, i = [], 0
    while i < len(lines):
        title = lines[i]
        under = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if (title.strip() and not title.startswith(" ") and under and set(under) == {"-"}
                and len(under) >= len(title.strip())):
            out += [f".. rubric:: {title.strip()}", ""]
            i += 2
            continue
        out.append(title)
        i += 1
    lines[:] = out


def _subcommands(parser: argparse.ArgumentParser, prog: str):
    """``(command line, parser)`` of the parser and every subcommand, depth first."""
    yield prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _subcommands(sub, f"{prog} {name}")


class CliHelp(SphinxDirective):
    """The ``--help`` of ``ebf`` and of every subcommand, from ``pipelines.cli.build_parser``."""

    def run(self) -> list[nodes.Node]:
        from pipelines.cli import build_parser

        columns = os.environ.get("COLUMNS")
        os.environ["COLUMNS"] = "92"  # argparse wraps to the terminal's width
        try:
            out: list[nodes.Node] = []
            for prog, parser in _subcommands(build_parser(), "ebf"):
                out.append(nodes.rubric(text=prog))
                text = parser.format_help()
                out.append(nodes.literal_block(text, text, language="text"))
            return out
        finally:
            if columns is None:
                del os.environ["COLUMNS"]
            else:
                os.environ["COLUMNS"] = columns


def setup(app):
    app.connect("autodoc-skip-member", _skip_member)
    app.connect("autodoc-process-docstring", _module_sections)
    app.add_directive("ebf-cli-help", CliHelp)
    return {"parallel_read_safe": True}
