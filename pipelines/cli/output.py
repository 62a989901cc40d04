"""What a command writes: its outputs, checked together before any work, and what it prints.

:func:`check_outputs` checks every output of one command at once, before any work: each
against the command's inputs and against the outputs before it (the same path twice, one
inside another, a file where a folder will be), each by the one output policy
(:mod:`basics.locations`); a refusal names both options and the fix.

On stdout a command prints its text, or with ``--json`` one JSON object. Progress, the
dashboard link, warnings and logs go to stderr either way, so ``ebf predict ... --json | jq
.rows`` reads the result alone. The object starts with ``"ebf_output"``: the kind of result
(``"training"``, ``"predictions"``, ``"evaluation"``, ``"retraining"``, ``"registry"``,
``"version"``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

__all__ = ["Output", "add_json_flag", "check_outputs", "print_result", "to_json"]


class Output(NamedTuple):
    """One output of a command: its option (``"--out"``, ``"NEW_DIR"``), its path (None or
    ``"-"``: not written), its kind and, optionally, how messages call it."""

    option: str
    path: Any
    kind: str
    label: str | None = None


#: What each kind of output is called after its option (``the --out model``).
_NOUNS = {"model": "model", "predictions": "predictions", "dataset": "dataset",
          "figures": "figures folder", "evaluation": "file", "report": "file",
          "registry": "registry", "folder": "folder"}


def check_outputs(outputs: Sequence[Output], inputs: Mapping[str, Any], *,
                  overwrite: bool = False) -> dict[str, Any]:
    """Check every output of one command together, before any work.

    Each output, in turn, may not be, contain or lie inside an input or an output before it
    (so the same path twice, one output inside another and a file where another output's
    folder will be are refused whatever the order), nor lie inside an ebf output; a
    directory or file of ``kind`` must also be replaceable (``overwrite``) as
    :func:`basics.locations.check_destination` and
    :func:`basics.locations.check_file_destination` say. A ``"registry"`` or ``"folder"``
    output is checked for overlaps only (its writer checks the rest).

    Parameters
    ----------
    outputs : sequence of Output
    inputs : mapping of str to path
        What the command reads, by description (``{"the training data": "data/"}``).
    overwrite : bool, default=False

    Returns
    -------
    dict
        ``inputs`` and the outputs, by description: what a further output (an MLflow file
        store) may not overlap.

    Raises
    ------
    basics.locations.UnsafeOutputError, FileExistsError
        Naming the output's option, the input or output it overlaps (its option) and the fix.

    Examples
    --------
    >>> import os, tempfile
    >>> out = os.path.join(tempfile.mkdtemp(), "m")
    >>> check_outputs([Output("--out", out, "model"), Output("--baseline-out", out, "model")],
    ...               {})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    basics.locations.UnsafeOutputError: refusing to write the --baseline-out model to ...: it \
is the --out model (...); choose an output outside it
    """
    from basics.locations import (
        FILE_KINDS,
        check_destination,
        check_file_destination,
        check_location,
    )

    seen = {k: v for k, v in inputs.items() if v is not None}
    for option, path, kind, label in outputs:
        if path is None or path == "-":
            continue
        what = label or f"the {option} {_NOUNS[kind]}"
        if kind in FILE_KINDS:
            check_file_destination(path, kind, overwrite=overwrite, inputs=seen, what=what)
        elif kind in ("registry", "folder"):
            check_location(path, what, inputs=seen)
        else:
            check_destination(path, kind, overwrite=overwrite, inputs=seen, what=what)
        seen[what] = path
    return seen


def add_json_flag(parser: argparse.ArgumentParser, what: str) -> None:
    """``--json``: print ``what`` as one JSON object on stdout instead of the text."""
    parser.add_argument("--json", action="store_true",
                        help=f"print {what} as one JSON object on stdout instead of the text "
                        "(progress and logs stay on stderr)")


def to_json(value: Any) -> Any:
    """``value`` made JSON-ready: numpy scalars and arrays as Python values, paths as text,
    NaN and infinities as None (strict JSON), mappings and sequences recursively.

    Examples
    --------
    >>> import numpy as np
    >>> to_json({"a": np.float64(1.5), "b": [np.nan, 2], "c": np.arange(2)})
    {'a': 1.5, 'b': [None, 2], 'c': [0, 1]}
    """
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if hasattr(value, "tolist") and hasattr(value, "dtype"):  # numpy arrays and scalars
        return to_json(value.tolist())
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if value is None or isinstance(value, (bool, int, str)):
        return value
    return str(value)


def print_result(args: argparse.Namespace, kind: str, body: Mapping[str, Any],
                 text: str) -> None:
    """Print the command's ``text``, or with ``--json`` the object ``{"ebf_output": kind,
    **body}`` on one line.

    The printed result commits a command that writes nothing (:mod:`basics.commit`): a
    signal after it changes nothing, as after the move of a written output.
    """
    from basics.commit import committing

    with committing():
        if getattr(args, "json", None) in (True, "-"):
            print(json.dumps(to_json({"ebf_output": kind, **body}), allow_nan=False),
                  flush=True)
        elif text:
            print(text, flush=True)
