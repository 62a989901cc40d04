"""Routing rows to their branch and moving each branch's rows together (paper Sec. 5).

Sec. 5: "this trunk acts as a sorting function to map observations to separate locations
corresponding to each branch. Forests are then fit at each location (machine) for each
branch." Every encoded row gets

* its branch: the trunk leaf (``Trunk.apply``, the function the local EBF routes with) or,
  for a sub-sample forest, its sub-sample (``ebf.subsample.subsample_groups``, the local
  SSF's own split, looked up by global row id);
* its global row id: the partition offset plus its position, i.e. its row in
  ``X.compute()``.

Rows then move with ``set_index(branch, divisions=[0, 1, ..., L])``, which gives exactly
one output partition per branch (a hash ``shuffle`` could put two branches together and
leave partitions empty), and each branch's rows are sorted by row id, so a branch sees
its rows in the order of the single-process fit and fits the identical forest.

The shuffle is Dask's (``p2p`` by default with a distributed client: it spills to disk
and restarts if a worker leaves). A worker lost afterwards loses its branch partitions;
the scheduler recomputes them from the graph (nothing is scattered).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd
from distributed import Client, Future

from ..subsample import subsample_groups
from ..trunk import Trunk
from .client import Report, wait_for
from .graph import map_shared
from .inputs import EncodedData

logger = logging.getLogger(__name__)

#: Column names of routed rows (``x`` columns are the encoded features).
FEATURE_PREFIX = "_x"
TARGET = "_y"
WEIGHT = "_w"
ROW = "_row"
BRANCH = "_branch"


def feature_columns(n_features: int) -> list[str]:
    """Names of the encoded feature columns of routed rows.

    Examples
    --------
    >>> feature_columns(2)
    ['_x0', '_x1']
    """
    return [f"{FEATURE_PREFIX}{j}" for j in range(n_features)]


def routed_meta(data: EncodedData) -> pd.DataFrame:
    """Empty frame with the columns and dtypes of routed rows."""
    cols: dict[str, Any] = {c: np.empty(0) for c in feature_columns(data.n_features)}
    cols[TARGET] = np.empty(0, np.int64 if data.task == "classification" else np.float64)
    if data.has_weight:
        cols[WEIGHT] = np.empty(0)
    cols[ROW] = np.empty(0, np.int64)
    cols[BRANCH] = np.empty(0, np.int64)
    return pd.DataFrame(cols)


def _routed_frame(enc: tuple, offset: int, branch: np.ndarray) -> pd.DataFrame:
    A, y, w = enc
    cols: dict[str, Any] = dict(zip(feature_columns(A.shape[1]), A.T, strict=True))
    cols[TARGET] = y
    if w is not None:
        cols[WEIGHT] = w
    cols[ROW] = np.arange(offset, offset + A.shape[0], dtype=np.int64)
    cols[BRANCH] = np.asarray(branch, dtype=np.int64)
    return pd.DataFrame(cols)


def _route_by_trunk(enc: tuple, offset: int, trunk: Trunk) -> pd.DataFrame:
    A = enc[0]
    leaf = trunk.apply(A) if A.shape[0] else np.empty(0, np.int64)
    return _routed_frame(enc, offset, leaf)


def route_by_trunk(client: Client, data: EncodedData, trunk: Trunk) -> list[Future]:
    """Routed rows of every partition, the branch being the trunk leaf (``Trunk.apply``).

    Parameters
    ----------
    client : distributed.Client
    data : EncodedData
    trunk : ebf.trunk.Trunk
        The fitted trunk.

    Returns
    -------
    list of Future
        One pandas DataFrame per partition, columns as in :func:`routed_meta`.
    """
    return map_shared(client, _route_by_trunk, data.futures, data.offsets.tolist(),
                      trunk=trunk)


def subsample_labels(entropy: int, n: int, n_subsamples: int) -> np.ndarray:
    """Sub-sample of every global row id, from the local SSF's ``subsample_groups``.

    Examples
    --------
    >>> subsample_labels(0, 7, 3).tolist() == [
    ...     next(k for k, g in enumerate(subsample_groups(0, 7, 3)) if i in g) for i in range(7)]
    True
    """
    labels = np.empty(int(n), dtype=np.int32)
    for k, rows in enumerate(subsample_groups(entropy, n, n_subsamples)):
        labels[rows] = k
    return labels


def _slice(labels: np.ndarray, start: int, stop: int) -> np.ndarray:
    return labels[start:stop].copy()


def route_by_subsample(client: Client, data: EncodedData, entropy: int,
                       n_subsamples: int) -> list[Future]:
    """Routed rows of every partition, the branch being the row's SSF sub-sample.

    The permutation is drawn once, in one task; every partition receives only its own
    slice of labels.

    Parameters
    ----------
    client : distributed.Client
    data : EncodedData
    entropy : int
        The model's resolved seed.
    n_subsamples : int

    Returns
    -------
    list of Future
    """
    labels = client.submit(subsample_labels, entropy, data.n, n_subsamples, pure=False)
    stops = (data.offsets + data.lengths).tolist()
    slices = client.map(_slice, [labels] * len(data.futures), data.offsets.tolist(), stops,
                        pure=False)
    return client.map(_routed_frame, data.futures, data.offsets.tolist(), slices, pure=False)


def _sort_rows(part: pd.DataFrame) -> pd.DataFrame:
    return part.sort_values(ROW, kind="stable")


def move_rows(client: Client, routed: list[Future], meta: pd.DataFrame, n_branches: int,
              shuffle_method: str | None = None, report: Report | None = None) -> list[Future]:
    """Move rows so that every branch's rows form one partition, in global row order.

    Parameters
    ----------
    client : distributed.Client
    routed : list of Future
        Routed partitions (:func:`route_by_trunk`, :func:`route_by_subsample`).
    meta : pandas.DataFrame
        :func:`routed_meta`.
    n_branches : int
        Number of branches ``L``; branch ids are ``0 .. L-1``.
    shuffle_method : {"p2p", "tasks"} or None
        Dask's shuffle; None lets Dask choose (p2p with a distributed client).
    report : callable ``report(done, total)``, optional

    Returns
    -------
    list of Future
        Future ``b`` holds branch ``b``'s rows (index: the branch id) sorted by ``ROW``.
    """
    import dask.dataframe as dd

    frame = dd.from_delayed(routed, meta=meta, verify_meta=False)
    moved = frame.set_index(BRANCH, divisions=list(range(n_branches + 1)),
                            shuffle_method=shuffle_method)
    moved = moved.map_partitions(_sort_rows, meta=moved._meta)
    parts = client.compute(moved.to_delayed())
    if len(parts) != n_branches:  # pragma: no cover - guarded by the divisions above
        raise RuntimeError(f"set_index gave {len(parts)} partitions for {n_branches} branches.")
    wait_for(client, parts, report)
    return parts
