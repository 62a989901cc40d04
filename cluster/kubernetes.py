"""Kubernetes manifests for ``ebf`` on the Dask operator (dask-kubernetes).

The Dask Kubernetes operator runs Dask clusters described by custom resources: a
``DaskCluster`` (a scheduler pod and service, a group of worker pods) and a ``DaskJob`` (a
``DaskCluster`` plus one pod that runs a command against it, the cluster removed when the
command ends). The operator gives every worker and job pod the scheduler's address in
``DASK_SCHEDULER_ADDRESS``, which ``ebf``'s CLI and :func:`cluster.connect` read: so
``ebf train ...`` run as a ``DaskJob`` needs no ``--scheduler``.

These functions build the resources as plain dicts, with no Kubernetes client and no
cluster; write them as YAML with :func:`manifest_yaml` (or ``ebf cluster k8s --out``) and
apply them with ``kubectl apply -f``. The layout is the one of the operator's own
``make_cluster_spec`` (``dask_kubernetes.operator``), with what ``ebf`` needs on top:

- **Sized workers**: each worker pod requests and is limited to ``worker_cores`` CPUs and
  ``worker_memory`` (requests equal to limits: the pod is in the ``Guaranteed`` QoS class, the
  last to be evicted), and its ``dask worker`` gets the same ``--nthreads`` and
  ``--memory-limit``, so Dask spills, pauses and restarts before the kernel kills the pod.
- **Credentials from Secrets**: ``secrets`` names Kubernetes Secrets whose keys become
  environment variables of the workers and the job (``AWS_ACCESS_KEY_ID``, ... for S3);
  the scheduler reads no data and gets none.
- **A job that fails once**: the job pod's ``restartPolicy`` is ``Never``: a training job
  that fails on bad data would fail again.

Examples
--------
>>> manifest = daskcluster_manifest("ebf", image="registry.example.com/ebf:0.1.0",
...                                 n_workers=4, worker_cores=2, worker_memory="8GiB")
>>> manifest["kind"], manifest["spec"]["worker"]["replicas"]
('DaskCluster', 4)
>>> manifest["spec"]["worker"]["spec"]["containers"][0]["resources"]["limits"]
{'cpu': '2', 'memory': '8Gi'}
"""

from __future__ import annotations

import copy
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from basics.locations import SPEC_TAG
from cluster.shape import WorkerShape, memory_bytes, memory_text

__all__ = ["API_VERSION", "daskcluster_manifest", "daskjob_manifest", "manifest_yaml"]

#: The operator's API group and version.
API_VERSION = "kubernetes.dask.org/v1"
#: The first line of every manifest file ``ebf`` writes (its output policy reads it).
FILE_TAG = SPEC_TAG.decode()

# A cluster's name is a DNS-1123 label, and so is "<name>-scheduler", the operator's name of
# its service (at most 63 characters): a name has at most 53. A namespace is a label, a
# Secret's name a DNS-1123 subdomain (dots allowed, at most 253).
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_MAX_NAME = 63 - len("-scheduler")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_SCHEDULER_PORT, _DASHBOARD_PORT, _WORKER_DASHBOARD_PORT = 8786, 8787, 8788


def _check_name(value: str, what: str, longest: int = _MAX_NAME, dots: bool = False) -> str:
    pattern = _SUBDOMAIN if dots else _NAME
    if not isinstance(value, str) or not pattern.match(value) or len(value) > longest:
        raise ValueError(
            f"{what} must be lower-case letters, digits{', dots' if dots else ''} and '-', "
            f"starting and ending with a letter or digit, at most {longest} characters (a "
            f"Kubernetes name), got {value!r}")
    return value


def _cpu(value: int | float, name: str) -> str:
    """A CPU quantity: whole cores as ``"2"``, fractions in millicores (``"500m"``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{name} must be a positive number of cores, got {value!r}")
    millis = round(value * 1000)
    if millis < 1:
        raise ValueError(f"{name} must be at least 0.001 cores, got {value!r}")
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def _resources(cpu: str, memory: int) -> dict[str, dict[str, str]]:
    quantity = {"cpu": cpu, "memory": memory_text(memory, "kubernetes")}
    return {"requests": dict(quantity), "limits": dict(quantity)}


def _env(env: Mapping[str, str] | None) -> list[dict[str, str]]:
    if env is None:
        return []
    if not isinstance(env, Mapping):
        raise TypeError(f"env must be a mapping of names to values, got {env!r}")
    out = []
    for key, value in env.items():
        if not isinstance(key, str) or not _ENV_NAME.match(key):
            raise ValueError(f"env: {key!r} is not a valid environment variable name")
        if not isinstance(value, str):
            raise TypeError(f"env: the value of {key} must be a string, got {value!r}")
        out.append({"name": key, "value": value})
    return out


def _env_from(secrets: Sequence[str]) -> list[dict[str, Any]]:
    if isinstance(secrets, str):
        raise TypeError(f"secrets must be a sequence of Secret names, got the string {secrets!r}")
    return [{"secretRef": {"name": _check_name(s, "a secret's name", 253, dots=True)}}
            for s in secrets]


def _ports(*ports: tuple[str, int]) -> list[dict[str, Any]]:
    return [{"name": name, "containerPort": port, "protocol": "TCP"} for name, port in ports]


def daskcluster_manifest(
    name: str = "ebf",
    *,
    image: str,
    n_workers: int = 2,
    worker_cores: int = 1,
    worker_memory: int | str = "4GiB",
    threads_per_worker: int | None = None,
    scheduler_cores: float = 1,
    scheduler_memory: int | str = "2GiB",
    env: Mapping[str, str] | None = None,
    secrets: Sequence[str] = (),
    namespace: str | None = None,
    idle_timeout: int = 0,
    image_pull_policy: str = "IfNotPresent",
    branch_memory: int | str | None = None,
) -> dict[str, Any]:
    """A ``DaskCluster`` resource for ``ebf`` (see the module docstring).

    Parameters
    ----------
    name : str, default="ebf"
        The cluster's name; the scheduler's service is ``<name>-scheduler``.
    image : str
        A container image with ``ebf`` installed, the same versions as the client's, pushed
        where the cluster pulls from (:mod:`cluster.image`, ``ebf cluster dockerfile``,
        writes its Dockerfile).
    n_workers : int, default=2
        Worker pods.
    worker_cores : int, default=1
        CPUs of a worker pod.
    worker_memory : int or str, default="4GiB"
        Memory of a worker pod, and its Dask memory limit.
    threads_per_worker : int, optional
        Threads of a worker (default: ``worker_cores``).
    scheduler_cores : float, default=1
    scheduler_memory : int or str, default="2GiB"
    env : mapping of str to str, optional
        Environment variables of every container.
    secrets : sequence of str
        Kubernetes Secrets whose keys become environment variables of the workers.
    namespace : str, optional
        ``metadata.namespace`` (default: ``kubectl``'s current namespace).
    idle_timeout : int, default=0
        Seconds of an idle scheduler before the operator deletes the cluster (0: never).
    image_pull_policy : {"IfNotPresent", "Always", "Never"}
    branch_memory : int or str, optional
        The ``--branch-memory`` of the jobs to run: fail now if a worker cannot fit its
        threads' branches.

    Returns
    -------
    dict
        ``apiVersion``, ``kind``, ``metadata``, ``spec`` (``idleTimeout``, ``worker``,
        ``scheduler``), as ``kubectl apply`` takes it.

    Examples
    --------
    >>> spec = daskcluster_manifest(image="registry.example.com/ebf:0.1.0")["spec"]
    >>> spec["worker"]["spec"]["containers"][0]["args"][:6]
    ['dask', 'worker', '--nthreads', '1', '--memory-limit', '4GiB']
    """
    _check_name(name, "name")
    if not isinstance(image, str) or not image or any(c.isspace() for c in image):
        raise ValueError(f"image must be a container image reference, got {image!r}")
    if isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 0:
        raise ValueError(f"n_workers must be a non-negative integer, got {n_workers!r}")
    if isinstance(idle_timeout, bool) or not isinstance(idle_timeout, int) or idle_timeout < 0:
        raise ValueError(f"idle_timeout must be a non-negative integer of seconds, got "
                         f"{idle_timeout!r}")
    if image_pull_policy not in ("IfNotPresent", "Always", "Never"):
        raise ValueError("image_pull_policy must be 'IfNotPresent', 'Always' or 'Never', got "
                         f"{image_pull_policy!r}")
    worker_cpu = _cpu(worker_cores, "worker_cores")
    if threads_per_worker is None:
        if not float(worker_cores).is_integer():
            raise ValueError(f"worker_cores={worker_cores!r} is not whole: give "
                             "threads_per_worker too")
        threads_per_worker = int(worker_cores)
    shape = WorkerShape.of(threads_per_worker, worker_memory, threads_name="threads_per_worker",
                           memory_name="worker_memory")
    shape.check_branch_memory(branch_memory)
    variables, env_from = _env(env), _env_from(secrets)
    worker = {
        "name": "worker",
        "image": image,
        "imagePullPolicy": image_pull_policy,
        "args": ["dask", "worker", "--nthreads", str(shape.threads), "--memory-limit",
                 shape.memory_limit, "--name", "$(DASK_WORKER_NAME)", "--dashboard",
                 "--dashboard-address", str(_WORKER_DASHBOARD_PORT)],
        "env": variables,
        "resources": _resources(worker_cpu, shape.memory),
        "ports": _ports(("http-dashboard", _WORKER_DASHBOARD_PORT)),
    }
    if env_from:
        worker["envFrom"] = env_from
    health = {"httpGet": {"port": "http-dashboard", "path": "/health"}}
    scheduler = {
        "name": "scheduler",
        "image": image,
        "imagePullPolicy": image_pull_policy,
        "args": ["dask", "scheduler", "--host", "0.0.0.0"],
        "env": [dict(v) for v in variables],
        "resources": _resources(_cpu(scheduler_cores, "scheduler_cores"),
                                memory_bytes(scheduler_memory, "scheduler_memory")),
        "ports": _ports(("tcp-comm", _SCHEDULER_PORT), ("http-dashboard", _DASHBOARD_PORT)),
        # the operator's own probes (make_cluster_spec)
        "readinessProbe": {**copy.deepcopy(health), "initialDelaySeconds": 0,
                           "periodSeconds": 1, "timeoutSeconds": 300},
        "livenessProbe": {**copy.deepcopy(health), "initialDelaySeconds": 15,
                          "periodSeconds": 20},
    }
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = _check_name(namespace, "namespace", 63)
    return {
        "apiVersion": API_VERSION,
        "kind": "DaskCluster",
        "metadata": metadata,
        "spec": {
            "idleTimeout": idle_timeout,
            "worker": {"replicas": n_workers, "spec": {"containers": [worker]}},
            "scheduler": {
                "spec": {"containers": [scheduler]},
                "service": {
                    "type": "ClusterIP",
                    "selector": {"dask.org/cluster-name": name,
                                 "dask.org/component": "scheduler"},
                    "ports": [
                        {"name": "tcp-comm", "protocol": "TCP", "port": _SCHEDULER_PORT,
                         "targetPort": "tcp-comm"},
                        {"name": "http-dashboard", "protocol": "TCP", "port": _DASHBOARD_PORT,
                         "targetPort": "http-dashboard"},
                    ],
                },
            },
        },
    }


def daskjob_manifest(
    name: str,
    command: str | Sequence[str],
    *,
    cluster: Mapping[str, Any],
    cores: float = 1,
    memory: int | str = "2GiB",
    env: Mapping[str, str] | None = None,
    secrets: Sequence[str] = (),
) -> dict[str, Any]:
    """A ``DaskJob`` resource: ``command`` run once against a cluster made for it.

    The operator starts the cluster of ``cluster`` (a :func:`daskcluster_manifest`), then a
    pod ``<name>-runner`` running ``command`` with ``DASK_SCHEDULER_ADDRESS`` set, and
    deletes the cluster when the command ends. ``kubectl logs <name>-runner`` shows its
    output; ``kubectl get daskjob <name>`` its status.

    Parameters
    ----------
    name : str
        The job's name (the cluster takes the same name).
    command : str or sequence of str
        The command, e.g. ``"ebf train s3://bucket/data --target y --out s3://bucket/m
        --quiet"`` (a string is split as a shell would).
    cluster : mapping
        A ``DaskCluster`` from :func:`daskcluster_manifest`; its spec, image and namespace
        are used.
    cores : float, default=1
        CPUs of the job pod (the client: the driver of the fit, the trunk's splits).
    memory : int or str, default="2GiB"
        Memory of the job pod.
    env : mapping of str to str, optional
        Environment variables of the job pod, on top of the cluster's.
    secrets : sequence of str
        Kubernetes Secrets whose keys become environment variables of the job pod.

    Returns
    -------
    dict

    Examples
    --------
    >>> job = daskjob_manifest("train", "ebf train s3://b/data --target y --out s3://b/m",
    ...                        cluster=daskcluster_manifest(image="reg.example.com/ebf:1"))
    >>> job["spec"]["job"]["spec"]["containers"][0]["args"][:3]
    ['ebf', 'train', 's3://b/data']
    """
    _check_name(name, "name")
    if cluster.get("apiVersion") != API_VERSION or cluster.get("kind") != "DaskCluster":
        raise ValueError("cluster must be a DaskCluster manifest (daskcluster_manifest)")
    args = shlex.split(command) if isinstance(command, str) else list(command)
    if not args or not all(isinstance(a, str) for a in args):
        raise ValueError(f"command must be a non-empty command line, got {command!r}")
    scheduler = cluster["spec"]["scheduler"]["spec"]["containers"][0]
    merged = {v["name"]: v["value"] for v in scheduler.get("env", [])}
    merged.update({v["name"]: v["value"] for v in _env(env)})
    variables = _env(merged)
    runner: dict[str, Any] = {
        "name": "job",
        "image": scheduler["image"],
        "imagePullPolicy": scheduler.get("imagePullPolicy", "IfNotPresent"),
        "args": args,
        "env": variables,
        "resources": _resources(_cpu(cores, "cores"), memory_bytes(memory, "memory")),
    }
    env_from = _env_from(secrets)
    if env_from:
        runner["envFrom"] = env_from
    metadata: dict[str, Any] = {"name": name}
    if "namespace" in cluster.get("metadata", {}):
        metadata["namespace"] = cluster["metadata"]["namespace"]
    return {
        "apiVersion": API_VERSION,
        "kind": "DaskJob",
        "metadata": metadata,
        "spec": {
            "job": {"spec": {"restartPolicy": "Never", "containers": [runner]}},
            "cluster": {"spec": copy.deepcopy(cluster["spec"])},
        },
    }


def manifest_yaml(manifest: Mapping[str, Any], comment: str = "") -> str:
    """``manifest`` as YAML for ``kubectl apply -f``, headed by :data:`FILE_TAG`.

    Parameters
    ----------
    manifest : mapping
    comment : str, optional
        Lines to put after the tag as YAML comments (e.g. the command that made it).

    Returns
    -------
    str

    Examples
    --------
    >>> print(manifest_yaml({"kind": "DaskCluster"}, comment="an example"))
    # ebf-output: cluster-spec
    # an example
    kind: DaskCluster
    <BLANKLINE>
    """
    import yaml

    lines = [FILE_TAG] + [f"# {line}".rstrip() for line in comment.splitlines()]
    class Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:  # kubectl reads anchors, people less so
            return True

    body = yaml.dump(dict(manifest), Dumper=Dumper, sort_keys=False, default_flow_style=False,
                     width=100)
    return "\n".join(lines) + "\n" + body
