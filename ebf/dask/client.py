"""The Dask client of a call: the one passed, else the current default; never a new cluster.

Every function of :mod:`ebf.dask` takes ``client=None`` and resolves it here at call time,
as dask-ml and xgboost.dask do; ``cluster.connect`` (a layer above) is how users start one.
"""

from __future__ import annotations

import distributed

__all__ = ["NoClientError", "current_client"]


class NoClientError(RuntimeError):
    """No usable Dask client: none is running, or the one given is closed."""


def current_client(client: distributed.Client | None = None) -> distributed.Client:
    """The client to use: ``client`` if given, else the current default Dask client.

    Parameters
    ----------
    client : distributed.Client, optional

    Returns
    -------
    distributed.Client

    Raises
    ------
    NoClientError
        If ``client`` is None and no client is running (or ``client`` is closed); the message
        says to call ``cluster.connect()`` first.

    Examples
    --------
    >>> current_client()  # doctest: +SKIP
    <Client: ...>
    """
    if client is None:
        try:
            client = distributed.get_client()
        except ValueError as exc:
            raise NoClientError(
                "no Dask client is running; start one first with "
                "`from cluster import connect; client = connect()` (a local cluster, or "
                "connect('tcp://host:8786') for an existing scheduler), or pass client="
            ) from exc
    if client.status in ("closing", "closed"):
        raise NoClientError(
            "the Dask client is closed; call cluster.connect() for a new one and pass it as client="
        )
    return client
