"""Tests of the `pipelines` package."""
