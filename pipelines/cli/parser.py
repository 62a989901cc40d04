"""The ``ebf`` command: its parser, built from the command families, and :func:`main`."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from pipelines.stops import words

from .cluster import add_cluster_parser
from .config import config_path, subcommands, with_config
from .examples import add_demo_parser, add_flights_parser, add_make_data_parser
from .failures import report_failure, signals_raise
from .importance import add_importance_parser
from .models import (
    DATA_HELP,
    add_evaluate_parser,
    add_migrate_parser,
    add_predict_parser,
    add_train_parser,
)
from .registry import add_registry_parser
from .retrain import add_retrain_parser

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser of the ``ebf`` command.

    Returns
    -------
    argparse.ArgumentParser

    Examples
    --------
    >>> args = build_parser().parse_args(["flights", "--n-train", "1000"])
    >>> args.command, args.n_train, args.verbose
    ('flights', 1000, 0)
    >>> build_parser().parse_args(["flights", "-vv"]).verbose
    2
    """
    parser = argparse.ArgumentParser(
        prog="ebf",
        description="Probabilistic tree ensembles: Empirical Bayesian and Mondrian forests.",
    )
    from basics.versions import library_version

    parser.add_argument("--version", action="version", version=f"ebf {library_version()}")
    _add_global_options(parser, 0)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add_flights_parser(sub)
    add_make_data_parser(sub)
    add_train_parser(sub)
    add_predict_parser(sub)
    add_evaluate_parser(sub)
    add_importance_parser(sub)
    add_migrate_parser(sub)
    add_registry_parser(sub)
    add_demo_parser(sub)
    add_retrain_parser(sub, DATA_HELP)
    add_cluster_parser(sub)
    _global_options_everywhere(sub)
    return parser


def _add_global_options(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument("-v", "--verbose", action="count", default=default,
                        help="log more (-v info, -vv debug); before or after the command")
    parser.add_argument("--config", metavar="TOML",
                        default=None if default == 0 else default,
                        help="defaults for the command's options from a TOML file (a table "
                        "per command, [all] for every command; the command line wins); also "
                        "the EBF_CONFIG environment variable")


def _global_options_everywhere(sub: argparse._SubParsersAction) -> None:
    """Accept the global options after the command too (``ebf predict ... -v``): every
    command's parser gets them, with no default, so they only count where given."""
    for command in set(sub.choices.values()):
        _add_global_options(command, argparse.SUPPRESS)
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction):
                _global_options_everywhere(action)


def _program(argv: Sequence[str], parser: argparse.ArgumentParser | None = None) -> str:
    """``ebf <command> [<subcommand>]``, the label of the one-line errors, from the words of
    ``argv`` that are commands of ``parser`` (before the parser exists: the first word that
    is neither an option nor the value of ``--config``).

    Examples
    --------
    >>> _program(["--config", "c.toml", "predict", "m", "d"])
    'ebf predict'
    >>> _program(["registry", "list", "REG", "--json"], build_parser())
    'ebf registry list'
    >>> _program(["-v", "nope"], build_parser())
    'ebf'
    """
    given = words(list(argv))
    if parser is None:
        return " ".join(["ebf", *given[:1]])
    label = ["ebf"]
    for word in given:
        parser = subcommands(parser).get(word)
        if parser is None:
            break
        label.append(word)
    return " ".join(label)


def _parse(parser: argparse.ArgumentParser, argv: list[str], added: list[str],
           config: str | None) -> argparse.Namespace:
    """``parser.parse_args(argv)``; a usage error is argparse's one error line, without the
    usage block, pointing to ``--help``, and naming the config file (and its options) if
    it (``config``) added any (``added``)."""
    import contextlib
    import io

    text = io.StringIO()
    try:
        with contextlib.redirect_stderr(text):
            return parser.parse_args(argv)
    except SystemExit as stop:
        lines = text.getvalue().strip().splitlines()
        if stop.code != 2 or not lines:
            sys.stderr.write(text.getvalue())
            raise
        line = lines[-1].rstrip(".")
        if added:
            line += f" (from the config file {config}: {' '.join(added)})"
        program = line.split(": error:", 1)[0]
        print(f"{line}; `{program} --help` lists the options", file=sys.stderr)
        raise


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ebf`` command line.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments without the program name; ``None`` reads ``sys.argv[1:]``.

    Returns
    -------
    int
        Exit status (:mod:`pipelines.cli.failures`): 0 on success; 1 if the job failed (a
        missing package, no answer from the Dask scheduler, invalid data / model /
        parameters, a worker that kept dying, a lost connection, out of memory, an I/O
        error or an unexpected error); 2 on a usage error (a bad option, an output that
        exists or may not be replaced, an output overlapping an input or the current
        directory, a missing input, a schema that does not fit); 3 if ``train`` or
        ``retrain`` wrote its model but could not log its MLflow run; 130 if interrupted
        (Ctrl-C) and 143 on SIGTERM before the output was committed (nothing was written);
        141, silently, when the reader of standard output has gone (``| head``);
        a signal after the commit changes nothing (:mod:`pipelines.stops`). Every failure is one
        line on stderr naming the cause and the fix; ``-v`` adds the traceback.

    Examples
    --------
    >>> main(["flights", "--n-train", "3000", "--n-test", "1000", "--quiet"])  # doctest: +SKIP
    0
    """
    # the command's name before the parser exists: building it imports for seconds, during
    # which Ctrl-C and SIGTERM get their one line too
    given = list(sys.argv[1:] if argv is None else argv)
    program, verbose = _program(given), 0
    from basics import commit

    commit.reset()
    try:
        with signals_raise():
            try:
                parser = build_parser()
                program = _program(given, parser)
                full = with_config(parser, given)
                args = _parse(parser, full, [a for a in full if a not in given],
                          config_path(given)[0])
                verbose = args.verbose
                level = {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)
                logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
                status = args.handler(args)
                stop = commit.stop_exception()  # a stop a library swallowed: not committed
                if stop is None or commit.state() == commit.COMMITTED:
                    return status
                raise stop
            except (SystemExit, GeneratorExit):
                raise
            except BaseException as exc:  # noqa: B036 - SIGTERM and Ctrl-C get their line too
                if commit.state() != commit.COMMITTED:  # signalled before: say so, not exc
                    exc = commit.stop_exception() or exc
                return report_failure(exc, program, verbose)
            finally:
                atomic = sys.modules.get("basics.atomic")  # not imported: nothing written
                if atomic is not None:
                    atomic.remove_abandoned()  # what tasks still running wrote after clean-up
    except BaseException as exc:  # noqa: B036 - a signal while the handlers are (re)set
        if isinstance(exc, (SystemExit, GeneratorExit)) or commit.stop_exception() is None:
            raise
        return report_failure(commit.stop_exception(), program, verbose)
