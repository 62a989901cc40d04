"""What a command prints on stdout: its text, or with ``--json`` one JSON object.

Progress, the dashboard link, warnings and logs go to stderr either way, so ``ebf predict
... --json | jq .rows`` reads the result alone. The object starts with ``"ebf_output"``:
the kind of result (``"training"``, ``"predictions"``, ``"evaluation"``, ``"retraining"``,
``"registry"``, ``"version"``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
from collections.abc import Mapping
from typing import Any

__all__ = ["add_json_flag", "print_result", "to_json"]


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
