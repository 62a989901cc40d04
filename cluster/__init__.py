"""Getting a :class:`distributed.Client` for ``ebf``'s distributed layer.

``connect()`` starts a local cluster sized to this machine (the embedded default) or connects
to an existing scheduler (an address, ``scheduler_file=``, ``DASK_SCHEDULER_ADDRESS`` or the
Dask config); ``current_client()`` resolves the ``client=None`` argument of library functions.
Logs go to the ``ebf.cluster`` logger.

Recipes for clusters beyond one machine, sized for ``ebf`` (their packages are the optional
``cluster`` extra, imported only when a recipe runs): :mod:`cluster.jobqueue` (SLURM and PBS
through dask-jobqueue), :mod:`cluster.kubernetes` (manifests for the Dask Kubernetes
operator; no package needed), :mod:`cluster.gateway` (dask-gateway); :mod:`cluster.shape`
holds what they share.

Examples
--------
>>> from cluster import connect
>>> client = connect()                          # doctest: +SKIP
>>> client = connect("tcp://10.0.0.5:8786")     # doctest: +SKIP
"""

from cluster.connect import (
    NoClientError,
    SchedulerConnectionError,
    connect,
    current_client,
    dashboard_link,
)

__all__ = [
    "NoClientError",
    "SchedulerConnectionError",
    "connect",
    "current_client",
    "dashboard_link",
]
