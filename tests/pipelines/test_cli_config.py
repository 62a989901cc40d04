"""Defaults from a TOML config file (``--config`` / ``EBF_CONFIG``): the same parser checks
them, the command line wins, and a key that is not an option fails naming it."""

from __future__ import annotations

import pytest

from pipelines.cli import build_parser, main
from pipelines.cli.config import with_config

TRAIN = ["train", "data", "--target", "y", "--out", "model"]


def _write(tmp_path, text: str) -> str:
    path = tmp_path / "ebf.toml"
    path.write_text(text)
    return str(path)


def _parse(argv):
    parser = build_parser()
    return parser.parse_args(with_config(parser, argv))


def test_a_table_per_command_all_for_every_command_and_the_command_line_wins(tmp_path):
    path = _write(tmp_path, """
[all]
quiet = true
timeout = 30
[train]
branch = "mondrian"
n_estimators = 7
compact = false
[predict]
quantiles = [0.1, 0.9]
[registry.list]
json = true
""")
    args = _parse([*TRAIN, "--config", path])
    assert (args.branch, args.n_estimators, args.quiet, args.timeout) == ("mondrian", 7, True, 30)
    assert _parse([*TRAIN, "--config", path, "--n-estimators", "3"]).n_estimators == 3
    assert _parse(["predict", "m", "d", "--out", "o", f"--config={path}"]).quantiles == [0.1,
                                                                                           0.9]
    listing = _parse(["registry", "list", "reg", "--config", path])
    assert listing.json and not hasattr(listing, "quiet")  # [all] keys a command lacks: skipped
    assert _parse(TRAIN).branch == "bayesian"  # no file, no change


def test_the_environment_names_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("EBF_CONFIG", _write(tmp_path, "[train]\nbranch = 'random'\n"))
    assert _parse(TRAIN).branch == "random"


@pytest.mark.parametrize(("text", "message"), [
    ("[train]\nbranchh = 'mondrian'\n", "'branchh' is not an option of this command"),
    ("[train]\ndata = 'other'\n", "'data' is not an option"),  # positionals never come from it
    ("[train]\noverwrite = 'yes'\n", "'overwrite' is a flag: use true or false"),
    ("[train\n", "is not readable TOML"),
    # a misspelt or misplaced table, at any level (whatever command runs): named, with the
    # nearest valid one
    ("[trian]\nbranch = 'mondrian'\n", "[trian] is not a command; did you mean [train]?"),
    ("[registry.lsit]\njson = true\n", "did you mean [registry.list]?"),
    ("branch = 'mondrian'\n", "'branch' must be an option inside a command's table"),
    ("[registry]\njson = true\n", "'registry.json' must be an option inside"),
    ("[train.branch]\nvalue = 'mondrian'\n", "[train.branch] is a table where an option of "
                                              "[train] belongs"),
    ("[all.timeout]\nseconds = 3\n", "[all.timeout] is a table where an option of [all]"),
])
def test_a_bad_file_is_a_usage_error_naming_the_key(tmp_path, capsys, text, message):
    assert main([*TRAIN, "--config", _write(tmp_path, text)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.splitlines()) == 1


def test_a_bad_value_is_the_parsers_error_and_says_it_came_from_the_file(tmp_path, capsys):
    path = _write(tmp_path, "[train]\nbranch = 'mondrain'\n")
    with pytest.raises(SystemExit) as stop:
        main([*TRAIN, "--config", path])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "invalid choice: 'mondrain'" in err
    assert f"(from the config file {path}: --branch mondrain)" in err


def test_a_missing_file(tmp_path, capsys):
    assert main([*TRAIN, "--config", str(tmp_path / "nope.toml")]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["directory", "fifo", "device", "big", "binary"])
def test_a_config_path_that_is_not_a_small_text_file_fails_at_once(tmp_path, capsys, kind):
    """Checked before it is read: a named pipe would block ``open``, a device never end."""
    import os

    from pipelines.cli.config import MAX_CONFIG_BYTES

    path = tmp_path / "ebf.toml"
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path = "/dev/zero"
    elif kind == "big":
        path.write_text("# " + "x" * MAX_CONFIG_BYTES + "\n")
    else:
        path.write_bytes(b"[train]\n\xff\xfe\x00binary")
    message = {"directory": "is a directory", "fifo": "is a named pipe",
               "device": "is a device", "big": "more than 1,048,576 bytes",
               "binary": "is not text"}[kind]
    assert main([*TRAIN, "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.splitlines()) == 1, err
