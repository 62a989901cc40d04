"""Tests of the `ebf` package."""
