"""Tests of the `mondrian` package."""
