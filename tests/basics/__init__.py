"""Tests of the `basics` package."""
