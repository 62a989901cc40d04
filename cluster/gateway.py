"""Dask clusters for ``ebf`` from a dask-gateway server.

A dask-gateway server (often beside a JupyterHub, as in daskhub) starts clusters for its
users on Kubernetes, Hadoop/YARN or a batch system, through its HTTP API; what a user may
choose (cores, memory, image, ...) are the server's *cluster options*. The recipe:

- :func:`gateway_options` (a pure function) says what ``ebf`` asks for, in the option names
  the dask-gateway documentation and daskhub use: ``worker_cores`` (also the worker's
  threads), ``worker_memory`` in GiB, and optionally ``image`` and ``environment``;
- :func:`set_gateway_options` writes them into the server's options and names what the
  server does not offer;
- :func:`gateway_cluster` does both against a server and returns the started cluster.

Gateway clusters are reached through the gateway's proxy with TLS credentials that the
gateway hands out, so they are used from Python (``client = cluster.get_client()``, then the
jobs of :mod:`pipelines` or ``ebf.dask`` estimators), not through ``ebf ... --scheduler``.

Examples
--------
>>> gateway_options(worker_cores=2, worker_memory="8GiB", image="ebf:0.1.0")
{'worker_cores': 2, 'worker_memory': 8.0, 'image': 'ebf:0.1.0'}
>>> cluster = gateway_cluster("https://hub.example.org/services/dask-gateway",
...                           auth="jupyterhub", n_workers=4)   # doctest: +SKIP
>>> client = cluster.get_client()                               # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from cluster.connect import SchedulerConnectionError
from cluster.shape import WorkerShape, optional_module

__all__ = ["gateway_cluster", "gateway_options", "probe_gateway", "set_gateway_options"]


def gateway_options(
    worker_cores: int = 1,
    worker_memory: int | str = "4GiB",
    *,
    image: str | None = None,
    environment: Mapping[str, str] | None = None,
    branch_memory: int | str | None = None,
) -> dict[str, Any]:
    """The cluster options ``ebf`` asks a dask-gateway server for.

    Parameters
    ----------
    worker_cores : int, default=1
        Cores of a worker, which dask-gateway also gives it as threads.
    worker_memory : int or str, default="4GiB"
        Memory of a worker (``"8GiB"``, bytes); the option is in GiB, as dask-gateway's
        documented ``worker_memory`` option is.
    image : str, optional
        A container image with ``ebf`` installed (Kubernetes backends).
    environment : mapping of str to str, optional
        Environment variables of the scheduler and workers.
    branch_memory : int or str, optional
        The ``branch_memory`` of the fits to run: fail now if a worker cannot fit its
        threads' branches.

    Returns
    -------
    dict
        Option name -> value, only those given (``image`` and ``environment`` if set).

    Examples
    --------
    >>> gateway_options(1, "1536MiB", environment={"NUMBA_CACHE_DIR": "/tmp/numba"})
    {'worker_cores': 1, 'worker_memory': 1.5, 'environment': {'NUMBA_CACHE_DIR': '/tmp/numba'}}
    """
    shape = WorkerShape.of(worker_cores, worker_memory, threads_name="worker_cores",
                           memory_name="worker_memory")
    shape.check_branch_memory(branch_memory)
    options: dict[str, Any] = {"worker_cores": shape.threads,
                               "worker_memory": shape.memory / 2**30}
    if image is not None:
        if not isinstance(image, str) or not image.strip():
            raise ValueError(f"image must be a container image reference, got {image!r}")
        options["image"] = image
    if environment is not None:
        if not isinstance(environment, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in environment.items()):
            raise TypeError(f"environment must map names to strings, got {environment!r}")
        options["environment"] = dict(environment)
    return options


def set_gateway_options(options: Any, wanted: Mapping[str, Any], address: str = "") -> Any:
    """Write ``wanted`` (from :func:`gateway_options`) into a server's ``options``.

    A whole ``worker_memory`` goes into a server's integer option too (GiB rounded up), and
    ``environment`` is merged with the server's defaults.

    Parameters
    ----------
    options : dask_gateway.options.Options
        From ``Gateway.cluster_options()``.
    wanted : mapping
    address : str, optional
        The gateway's address, for the messages.

    Returns
    -------
    dask_gateway.options.Options
        ``options``, changed in place.

    Raises
    ------
    ValueError
        If the server offers no such option, or refuses the value (out of its bounds); the
        message lists the options the server offers.
    """
    where = f"the dask-gateway server at {address}" if address else "the dask-gateway server"
    offered = list(options)
    for name, value in wanted.items():
        if name not in offered:
            raise ValueError(
                f"{where} offers no cluster option {name!r}; it offers "
                f"{', '.join(offered) or 'none'}. Leave {name} unset, or ask its "
                "administrators for the option")
        if name == "environment" and isinstance(options[name], dict):
            value = {**options[name], **value}
        try:
            options[name] = value
        except TypeError:
            if name != "worker_memory":
                raise
            options[name] = math.ceil(value)  # an Integer option of whole GiB
        except ValueError as exc:
            raise ValueError(f"{where} refuses {name}={value!r}: {exc}") from exc
    return options


def probe_gateway(address: str, timeout: float = 30) -> str:
    """The version of the dask-gateway server at ``address``, asked within ``timeout`` s.

    ``GET <address>/api/version``, which a dask-gateway server answers without credentials;
    dask-gateway's own client would wait minutes for a server that does not answer.

    Parameters
    ----------
    address : str
        The gateway's URL.
    timeout : float, default=30

    Returns
    -------
    str

    Raises
    ------
    cluster.SchedulerConnectionError
        If nothing answers, or what answers is not a dask-gateway server; the message names
        the address and what to check.
    """
    import json
    import urllib.error
    import urllib.request

    fix = ("check the address (the gateway's http(s) URL, e.g. "
           "https://hub.example.org/services/dask-gateway) and that this machine reaches it")
    url = address.rstrip("/") + "/api/version"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            answer = json.loads(response.read(65536))
    except TimeoutError:
        raise SchedulerConnectionError(
            f"no answer from a dask-gateway server at {address!r} within {timeout:g} s: {fix}"
        ) from None
    except urllib.error.HTTPError as exc:
        raise SchedulerConnectionError(
            f"the server at {address!r} is not a dask-gateway server (HTTP {exc.code} for "
            f"{url}): {fix}") from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError):
            raise SchedulerConnectionError(
                f"no answer from a dask-gateway server at {address!r} within {timeout:g} s: "
                f"{fix}") from None
        raise SchedulerConnectionError(
            f"could not reach a dask-gateway server at {address!r} ({reason}): {fix}"
        ) from exc
    except ValueError as exc:  # not JSON
        raise SchedulerConnectionError(
            f"the server at {address!r} is not a dask-gateway server ({url} is not JSON): "
            f"{fix}") from exc
    if not isinstance(answer, dict) or not isinstance(answer.get("version"), str):
        raise SchedulerConnectionError(
            f"the server at {address!r} is not a dask-gateway server ({url} has no version): "
            f"{fix}")
    return answer["version"]


def gateway_cluster(
    address: str | None = None,
    *,
    auth: Any = None,
    n_workers: int | None = 2,
    adapt: tuple[int, int] | None = None,
    timeout: float = 30,
    worker_cores: int = 1,
    worker_memory: int | str = "4GiB",
    image: str | None = None,
    environment: Mapping[str, str] | None = None,
    branch_memory: int | str | None = None,
    **gateway_kwargs: Any,
) -> Any:
    """A new dask-gateway cluster sized for ``ebf``, with its workers asked for.

    Parameters
    ----------
    address : str, optional
        The gateway's URL (default: the Dask config key ``gateway.address``, which
        JupyterHub deployments set).
    auth : str or dask_gateway.auth.GatewayAuth, optional
        ``"jupyterhub"``, ``"kerberos"``, ``"basic"`` or an auth object (default: the Dask
        config's ``gateway.auth``).
    n_workers : int or None, default=2
        Workers to ask for (``cluster.scale``); ignored with ``adapt``.
    adapt : (int, int), optional
        ``(minimum, maximum)`` workers: the gateway scales the cluster with the work.
    timeout : float, default=30
        Seconds to wait for the gateway's first answer.
    worker_cores, worker_memory, image, environment, branch_memory
        As :func:`gateway_options`.
    **gateway_kwargs
        More arguments of ``dask_gateway.Gateway`` (``proxy_address=``, ...).

    Returns
    -------
    dask_gateway.GatewayCluster
        Close it (or ``with gateway_cluster(...) as cluster:``) to shut it down.

    Raises
    ------
    ImportError
        If dask-gateway is not installed (``pip install 'ebf[cluster]'``).
    cluster.SchedulerConnectionError
        If no dask-gateway server answers at ``address`` within ``timeout``.
    ValueError
        If the server does not offer, or refuses, an option.
    """
    wanted = gateway_options(worker_cores, worker_memory, image=image,
                             environment=environment, branch_memory=branch_memory)
    if adapt is not None:
        minimum, maximum = adapt
        if not (isinstance(minimum, int) and isinstance(maximum, int)
                and 0 <= minimum <= maximum):
            raise ValueError(f"adapt must be (minimum, maximum) workers, got {adapt!r}")
    dask_gateway = optional_module("dask_gateway", "dask-gateway", "gateway_cluster")
    gateway = dask_gateway.Gateway(address, auth=auth, **gateway_kwargs)
    address = gateway.address
    probe_gateway(address, timeout)
    options = set_gateway_options(gateway.cluster_options(), wanted, address)
    # the cluster opens its own connection; this one is closed when dropped (Gateway.__del__:
    # closing it here too would make that second close fail)
    del gateway
    cluster = dask_gateway.GatewayCluster(address=address, auth=auth, cluster_options=options,
                                          **gateway_kwargs)
    if adapt is not None:
        cluster.adapt(minimum=adapt[0], maximum=adapt[1])
    elif n_workers:
        cluster.scale(n_workers)
    return cluster
