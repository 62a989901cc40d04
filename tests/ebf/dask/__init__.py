"""Tests of the `ebf.dask` package."""
