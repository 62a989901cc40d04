"""Defaults for the command line from a TOML file (``--config PATH`` or ``EBF_CONFIG``).

One table per command (``[train]``, ``[predict]``, ``[registry.list]``...) and ``[all]``
for every command; keys are the commands' long options, with dashes or underscores::

    [all]
    scheduler = "tcp://scheduler:8786"

    [train]
    branch = "mondrian"
    n-estimators = 20
    quantiles = [0.1, 0.5, 0.9]     # a list for an option that takes several values
    overwrite = true                # a flag: true gives it, false leaves it out

The values become options added after the command line's own, so they are checked by the
same parser (types, choices, ranges); an option the command line gives (or a rival of its
group, such as ``--min-leaf-rows`` for ``--trunk-leaves``) is not taken from the file. A key that
is not an option of its command is an error naming the key and the command's options;
positional arguments (data, model, registry) are never read from the file. The tables are
checked at every level whatever command runs (:func:`check_tables`): a table that is not
``all`` or a command, an option outside a command's table, or a table where an option
belongs is an error naming it and the nearest valid table.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import Any

from .failures import UsageError

__all__ = ["CONFIG_VARIABLE", "MAX_CONFIG_BYTES", "check_tables", "config_path", "subcommands",
           "with_config"]

#: The environment variable naming a config file when ``--config`` is not given.
CONFIG_VARIABLE = "EBF_CONFIG"


#: The largest config file read (a TOML file of defaults is a few hundred bytes).
MAX_CONFIG_BYTES = 2**20


def _read_config(path: str) -> str:
    """The text of a config file: a regular file of at most :data:`MAX_CONFIG_BYTES` bytes
    of UTF-8, checked before it is opened (a named pipe would block, a device never end;
    :func:`basics.places.read_text`)."""
    from basics.places import Place, read_text

    try:
        return read_text(Place(None, "file", path), MAX_CONFIG_BYTES, follow_links=True)
    except ValueError as exc:  # the message names the file and what it is, or the limit
        raise UsageError(f"config file {exc}; --config (or {CONFIG_VARIABLE}) must name a "
                         "TOML file of option defaults") from exc


def config_path(argv: list[str]) -> tuple[str | None, list[str]]:
    """The config file (``--config PATH`` / ``--config=PATH`` anywhere, else the
    environment) and ``argv`` without the option."""
    rest, path, i = [], None, 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--config":
            if i + 1 >= len(argv):
                raise UsageError("--config needs a PATH to a TOML file")
            path, i = argv[i + 1], i + 2
            continue
        if arg.startswith("--config="):
            path = arg.split("=", 1)[1]
        else:
            rest.append(arg)
        i += 1
    return path or os.environ.get(CONFIG_VARIABLE) or None, rest


def _command(parser: argparse.ArgumentParser, argv: list[str]
             ) -> tuple[list[str], argparse.ArgumentParser]:
    """The command's names in ``argv`` (``["registry", "list"]``) and its parser."""
    names, position, current = [], 0, parser
    while True:
        sub = next((a for a in current._actions if isinstance(a, argparse._SubParsersAction)),
                   None)
        found = None if sub is None else next(
            ((i, a) for i, a in enumerate(argv[position:], position) if a in sub.choices), None)
        if found is None:
            return names, current
        position = found[0] + 1
        names.append(found[1])
        current = sub.choices[found[1]]


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands of ``parser`` by name (none for a command that has no subcommands)."""
    sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    return {} if sub is None else dict(sub.choices)


def _nearest(name: str, choices: Sequence[str], form: str = "[{}]") -> str:
    import difflib

    close = difflib.get_close_matches(name, choices, n=1)
    return f"did you mean {form.format(close[0])}? " if close else ""


def check_tables(config: dict[str, Any], parser: argparse.ArgumentParser, path: str) -> None:
    """Every table of a config file names ``all`` or a command (``[registry.list]``), at
    every level, and a table is never where an option belongs: an error names the table,
    the nearest valid name and the valid ones.

    Examples
    --------
    >>> from pipelines.cli.parser import build_parser
    >>> check_tables({"train": {"branch": "mondrian"}}, build_parser(), "ebf.toml")
    >>> check_tables({"trian": {}}, build_parser(), "ebf.toml")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pipelines.cli.failures.UsageError: config ebf.toml: [trian] is not a command...
    """
    def walk(table: dict[str, Any], command: argparse.ArgumentParser, names: list[str]) -> None:
        subs = subcommands(command)
        valid = sorted([*subs, *([] if names else ["all"])])
        for key, value in table.items():
            here = ".".join([*names, str(key)])
            if not isinstance(value, dict):
                if subs:  # the top, or a group such as [registry]: tables only
                    raise UsageError(
                        f"config {path}: {here!r} must be an option inside a command's table "
                        f"({', '.join(f'[{v}]' for v in valid[:4])}...), not in "
                        f"{'the top level' if not names else '[' + '.'.join(names) + ']'}")
                continue  # an option of the command: _tokens checks its name
            if not subs:
                raise UsageError(
                    f"config {path}: [{here}] is a table where an option of "
                    f"[{'.'.join(names)}] belongs; write key = value in [{'.'.join(names)}]")
            if not names and key == "all":
                walk(value, argparse.ArgumentParser(add_help=False), ["all"])
                _check_all(value, _every_option(parser), path)
                continue
            if key not in subs:
                where = "a command" if not names else f"a subcommand of [{'.'.join(names)}]"
                full = [".".join([*names, v]) for v in valid]
                raise UsageError(
                    f"config {path}: [{here}] is not {where}; {_nearest(here, full)}"
                    f"the tables here are {', '.join(f'[{v}]' for v in full)}")
            walk(value, subs[key], [*names, str(key)])

    walk(config, parser, [])


def _every_option(command: argparse.ArgumentParser) -> set[str]:
    """The long options of ``command`` and all its subcommands, as config keys."""
    found = {o[2:] for a in command._actions for o in a.option_strings
             if o.startswith("--") and o not in ("--help", "--config")}
    for sub in subcommands(command).values():
        found |= _every_option(sub)
    return found


def _check_all(table: dict[str, Any], options: set[str], path: str) -> None:
    """Every key of ``[all]`` is an option of some command (each command takes those of its
    own, so a key no command takes is a typo)."""
    for key in table:
        if str(key).replace("_", "-") not in options:
            raise UsageError(f"config {path}: [all] {key!r} is not an option of any command; "
                             f"{_nearest(str(key).replace('_', '-'), sorted(options), '{!r}')}"
                             "fix or remove it")


def _given(command: argparse.ArgumentParser, argv: list[str]) -> set[str]:
    """Destinations the command line sets itself, with every destination of a mutually
    exclusive group one of whose options it gives (the file must not add a rival)."""
    by_option = {o: a.dest for a in command._actions for o in a.option_strings}
    given = {by_option[a.split("=", 1)[0]] for a in argv if a.split("=", 1)[0] in by_option}
    for group in command._mutually_exclusive_groups:
        dests = {a.dest for a in group._group_actions}
        if dests & given:
            given |= dests
    return given


def _tokens(where: str, command: argparse.ArgumentParser, table: dict[str, Any],
            strict: bool, given: set[str]) -> list[str]:
    """The options of one table as command-line tokens for ``command``, but those the
    command line sets (``given``)."""
    options = {o: a for a in command._actions for o in a.option_strings if o.startswith("--")}
    out: list[str] = []
    for key, value in table.items():
        option = "--" + str(key).replace("_", "-")
        action = options.get(option)
        if action is None or option in ("--help", "--config"):
            if not strict:
                continue
            known = sorted(o for o in options if o not in ("--help", "--config"))
            raise UsageError(f"config {where}: {key!r} is not an option of this command; "
                             f"it takes {', '.join(known)}")
        if isinstance(value, dict):
            raise UsageError(f"config {where}: {key!r} must be a value, not a table")
        if isinstance(value, bool) or action.nargs == 0:
            if not isinstance(value, bool):
                raise UsageError(f"config {where}: {key!r} is a flag: use true or false")
            if value and action.dest not in given:
                out.append(option)
            continue
        if action.dest not in given:
            out += [option, *(str(v) for v in (value if isinstance(value, list) else [value]))]
    return out


def with_config(parser: argparse.ArgumentParser, argv: Sequence[str]) -> list[str]:
    """``argv`` with the config file's defaults for its command added (but those it sets).

    Parameters
    ----------
    parser : argparse.ArgumentParser
        ``build_parser()``.
    argv : sequence of str
        The command line without the program name.

    Returns
    -------
    list of str
        The arguments to parse (unchanged without a config file).

    Raises
    ------
    UsageError
        If the file cannot be read or parsed, or names an option its command does not take.

    Examples
    --------
    >>> import tempfile, os
    >>> from pipelines.cli.parser import build_parser
    >>> path = os.path.join(tempfile.mkdtemp(), "ebf.toml")
    >>> _ = open(path, "w").write('[train]\\nbranch = "mondrian"\\nn-estimators = 20\\n')
    >>> with_config(build_parser(), ["train", "data", "--target", "y", "--config", path])
    ['train', 'data', '--target', 'y', '--branch', 'mondrian', '--n-estimators', '20']
    """
    import tomllib

    path, argv = config_path(list(argv))
    if path is None:
        return argv
    try:
        config = tomllib.loads(_read_config(path))
    except FileNotFoundError as exc:
        raise UsageError(f"config file {path} does not exist; fix --config or "
                         f"{CONFIG_VARIABLE}") from exc
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"config file {path} is not readable TOML: {exc}") from exc
    check_tables(config, parser, path)
    names, command = _command(parser, argv)
    if not names:
        return argv
    given = _given(command, argv)
    tokens = _tokens(f"{path} [all]", command, config.get("all", {}), False, given)
    table: Any = config
    for name in names:
        table = table.get(name, {}) if isinstance(table, dict) else {}
    if isinstance(table, dict):
        scalars = {k: v for k, v in table.items() if not isinstance(v, dict)}
        tokens += _tokens(f"{path} [{'.'.join(names)}]", command, scalars, True, given)
    return [*argv, *tokens]
