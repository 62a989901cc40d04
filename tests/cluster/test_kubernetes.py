"""cluster.kubernetes: the Dask operator's DaskCluster and DaskJob manifests and the checked-in
examples of cluster/k8s/ (made again by the command in their header; their image is a
placeholder the user replaces). The image: tests/cluster/test_image.py."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml
from dask.utils import parse_bytes

from cluster.kubernetes import (
    API_VERSION,
    FILE_TAG,
    daskcluster_manifest,
    daskjob_manifest,
    manifest_yaml,
)

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "cluster" / "k8s"
EXAMPLES = sorted(K8S.glob("*.yaml"))

_QUANTITY = re.compile(r"^(?P<n>\d+)(?P<unit>Ki|Mi|Gi|Ti|k|M|G|T)?$")
_UNIT = {None: 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6,
         "G": 10**9, "T": 10**12}


def quantity_bytes(text: str) -> int:
    """A Kubernetes memory quantity in bytes (the forms the recipe writes)."""
    match = _QUANTITY.match(text)
    assert match, f"not a Kubernetes memory quantity: {text!r}"
    return int(match["n"]) * _UNIT[match["unit"]]


def _worker(manifest: dict) -> dict:
    (container,) = manifest["spec"]["worker"]["spec"]["containers"]
    return container


def _scheduler(manifest: dict) -> dict:
    (container,) = manifest["spec"]["scheduler"]["spec"]["containers"]
    return container


def check_daskcluster(manifest: dict) -> None:
    """What the operator's DaskCluster schema requires, and what ebf adds."""
    assert manifest["apiVersion"] == API_VERSION == "kubernetes.dask.org/v1"
    assert manifest["kind"] == "DaskCluster"
    name = manifest["metadata"]["name"]
    spec = manifest["spec"]
    assert set(spec) == {"idleTimeout", "worker", "scheduler"}
    assert isinstance(spec["idleTimeout"], int) and spec["idleTimeout"] >= 0
    assert isinstance(spec["worker"]["replicas"], int)
    assert {"spec", "service"} <= set(spec["scheduler"])
    service = spec["scheduler"]["service"]
    assert service["selector"] == {"dask.org/cluster-name": name,
                                   "dask.org/component": "scheduler"}
    assert {p["port"] for p in service["ports"]} == {8786, 8787}
    worker, scheduler = _worker(manifest), _scheduler(manifest)
    for container in (worker, scheduler):
        assert container["image"] and container["name"]
        assert all(set(v) == {"name", "value"} for v in container["env"])
        resources = container["resources"]
        assert resources["requests"] == resources["limits"]  # Guaranteed QoS
        quantity_bytes(resources["limits"]["memory"])
        assert re.match(r"^\d+(m)?$", resources["limits"]["cpu"])
    assert scheduler["args"][:2] == ["dask", "scheduler"] and "envFrom" not in scheduler
    # the worker's Dask limits are its pod's: threads = CPUs (unless asked), memory = memory
    args = worker["args"]
    assert args[:2] == ["dask", "worker"]
    assert args[args.index("--name") + 1] == "$(DASK_WORKER_NAME)"  # set by the operator
    limit = parse_bytes(args[args.index("--memory-limit") + 1])
    assert limit == quantity_bytes(worker["resources"]["limits"]["memory"])


def test_daskcluster_manifest_holds_what_was_asked():
    manifest = daskcluster_manifest(
        "ebf-big", image="registry.local/ebf:0.1.0", n_workers=6, worker_cores=4,
        worker_memory="16GiB", threads_per_worker=2, scheduler_cores=0.5,
        scheduler_memory="1536MiB", env={"EBF_CONFIG": "/etc/ebf.toml"},
        secrets=["s3-credentials", "gcs.key"], namespace="science", idle_timeout=600,
        image_pull_policy="Always", branch_memory="6GiB")
    check_daskcluster(manifest)
    assert manifest["metadata"] == {"name": "ebf-big", "namespace": "science"}
    assert manifest["spec"]["idleTimeout"] == 600
    assert manifest["spec"]["worker"]["replicas"] == 6
    worker, scheduler = _worker(manifest), _scheduler(manifest)
    assert worker["args"][:6] == ["dask", "worker", "--nthreads", "2", "--memory-limit", "16GiB"]
    assert worker["resources"]["limits"] == {"cpu": "4", "memory": "16Gi"}
    assert scheduler["resources"]["limits"] == {"cpu": "500m", "memory": "1536Mi"}
    assert worker["env"] == scheduler["env"] == [{"name": "EBF_CONFIG",
                                                  "value": "/etc/ebf.toml"}]
    assert worker["envFrom"] == [{"secretRef": {"name": "s3-credentials"}},
                                 {"secretRef": {"name": "gcs.key"}}]
    assert worker["imagePullPolicy"] == scheduler["imagePullPolicy"] == "Always"
    assert worker["env"] is not scheduler["env"]  # no shared objects (YAML anchors)


def test_decimal_memory_stays_decimal():
    manifest = daskcluster_manifest(image="ebf:0.1.0", worker_memory="3GB")
    worker = _worker(manifest)
    assert worker["resources"]["limits"]["memory"] == "3G"
    assert worker["args"][worker["args"].index("--memory-limit") + 1] == "3GB"
    check_daskcluster(manifest)


@pytest.mark.parametrize("kwargs, match", [
    ({"name": "EBF"}, "name must be lower-case letters"),
    ({"name": "x" * 54}, "at most 53 characters"),
    ({"image": "ebf: 0.1"}, "image must be a container image reference"),
    ({"n_workers": -1}, "n_workers must be a non-negative integer"),
    ({"worker_cores": 1.5}, r"worker_cores=1.5 is not whole: give threads_per_worker"),
    ({"worker_cores": 0}, "worker_cores must be a positive number of cores"),
    ({"worker_memory": "lots"}, "worker_memory must be a positive number of bytes"),
    ({"env": {"1X": "a"}}, "'1X' is not a valid environment variable name"),
    ({"image_pull_policy": "always"}, "image_pull_policy must be"),
    ({"namespace": "Prod"}, "namespace must be lower-case"),
    ({"namespace": "n" * 64}, "at most 63 characters"),
    ({"secrets": ["s3_keys"]}, "a secret's name must be lower-case letters, digits, dots"),
    ({"branch_memory": "4GiB"}, "give each worker at least 5GiB"),
])
def test_bad_cluster_options_say_what_to_do(kwargs, match):
    with pytest.raises(ValueError, match=match):
        daskcluster_manifest(**{"image": "ebf:0.1.0", **kwargs})


def test_bad_types_say_what_to_do():
    with pytest.raises(TypeError, match="the value of N must be a string"):
        daskcluster_manifest(image="ebf:0.1.0", env={"N": 1})
    with pytest.raises(TypeError, match="secrets must be a sequence of Secret names"):
        daskcluster_manifest(image="ebf:0.1.0", secrets="s3-credentials")


def test_daskjob_runs_the_command_once_against_its_cluster():
    cluster = daskcluster_manifest("ignored", image="ebf:0.1.0", n_workers=3,
                                   env={"A": "cluster", "B": "cluster"}, namespace="science")
    job = daskjob_manifest(
        "train", "ebf train 's3://bucket/my data' --target y --out s3://bucket/m --quiet",
        cluster=cluster, cores=2, memory="6GiB", env={"B": "job"}, secrets=["s3-credentials"])
    assert job["apiVersion"] == API_VERSION and job["kind"] == "DaskJob"
    assert job["metadata"] == {"name": "train", "namespace": "science"}
    assert job["spec"]["cluster"] == {"spec": cluster["spec"]}
    assert job["spec"]["cluster"]["spec"] is not cluster["spec"]  # a copy: no YAML aliases
    pod = job["spec"]["job"]["spec"]
    assert pod["restartPolicy"] == "Never"  # a failed training job is not run again
    (runner,) = pod["containers"]
    assert runner["args"] == ["ebf", "train", "s3://bucket/my data", "--target", "y", "--out",
                              "s3://bucket/m", "--quiet"]
    assert runner["image"] == "ebf:0.1.0"
    assert runner["env"] == [{"name": "A", "value": "cluster"}, {"name": "B", "value": "job"}]
    assert runner["resources"]["limits"] == {"cpu": "2", "memory": "6Gi"}
    assert runner["envFrom"] == [{"secretRef": {"name": "s3-credentials"}}]
    # DASK_SCHEDULER_ADDRESS is the operator's to set: the recipe must not shadow it
    assert "DASK_SCHEDULER_ADDRESS" not in {v["name"] for v in runner["env"]}
    listed = daskjob_manifest("train", ["python", "-c", "print(1)"], cluster=cluster)
    assert listed["spec"]["job"]["spec"]["containers"][0]["args"] == ["python", "-c",
                                                                      "print(1)"]
    with pytest.raises(ValueError, match="command must be a non-empty command line"):
        daskjob_manifest("train", "", cluster=cluster)
    with pytest.raises(ValueError, match="cluster must be a DaskCluster manifest"):
        daskjob_manifest("train", "ebf", cluster=job)


def test_manifest_yaml_is_plain_yaml_with_the_tag():
    manifest = daskcluster_manifest(image="ebf:0.1.0")
    text = manifest_yaml(manifest, comment="line one\nline two")
    assert text.splitlines()[:3] == [FILE_TAG, "# line one", "# line two"]
    assert "&id" not in text and "*id" not in text  # no anchors or aliases
    assert yaml.safe_load(text) == manifest


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_checked_in_manifests_are_what_their_command_makes(path, tmp_path, capsys):
    """Each example's header holds the ``ebf cluster k8s`` command that made it; the command
    makes the same file again, and the file is a valid manifest."""
    from pipelines.cli import main

    lines = path.read_text().splitlines()
    assert lines[0] == FILE_TAG
    command = next(line[2:] for line in lines if line.startswith("# ebf cluster k8s "))
    out = tmp_path / path.name
    assert main(shlex.split(command)[1:] + ["--out", str(out)]) == 0
    assert out.read_text() == path.read_text(), (
        f"{path.relative_to(ROOT)} is stale: run `{command} --out "
        f"{path.relative_to(ROOT)} --overwrite`")
    manifest = yaml.safe_load(path.read_text())
    if manifest["kind"] == "DaskJob":
        runner = manifest["spec"]["job"]["spec"]["containers"][0]
        assert runner["args"][:2] == ["ebf", "train"]
        manifest = {"apiVersion": API_VERSION, "kind": "DaskCluster",
                    "metadata": manifest["metadata"], **manifest["spec"]["cluster"]}
    check_daskcluster(manifest)


def test_examples_are_there():
    assert {p.name for p in EXAMPLES} == {"daskcluster.yaml", "daskjob.yaml"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_name_no_image_that_could_be_pulled(path):
    """The examples' image is a placeholder (kubelet refuses it as an invalid name) for the
    user's own, pushed image: never a name such as ebf:0.1.0 that no registry serves."""
    images = set(re.findall(r"^\s*image: (.+)$", path.read_text(), re.MULTILINE))
    assert images == {"<registry>/ebf:<tag>"}


def test_same_layout_as_the_operators_make_cluster_spec():
    """Where ebf does not deliberately differ, the manifest is the operator's own."""
    operator = pytest.importorskip("dask_kubernetes.operator",
                                   reason="needs dask-kubernetes (pip install 'ebf[cluster]')")
    ours = daskcluster_manifest("ebf", image="ebf:0.1.0", n_workers=3, worker_cores=2,
                                worker_memory="8GiB", scheduler_cores=2,
                                scheduler_memory="8GiB", env={"A": "1"})
    theirs = operator.make_cluster_spec(
        "ebf", image="ebf:0.1.0", n_workers=3, resources=_worker(ours)["resources"],
        env={"A": "1"}, worker_command="dask worker --nthreads 2 --memory-limit 8GiB")
    for manifest in (ours, theirs):  # ebf's deliberate differences
        for container in (_worker(manifest), _scheduler(manifest)):
            container.pop("imagePullPolicy", None)
        _scheduler(manifest)["args"] = ["<scheduler command>"]  # `dask scheduler`, not the
    assert ours == theirs                                       # deprecated dask-scheduler


@pytest.mark.parametrize("kind", ["DaskCluster", "DaskJob"])
def test_manifests_validate_against_the_operators_crds(kind):
    """The examples against the OpenAPI schema of the operator's CustomResourceDefinitions
    (which dask-kubernetes ships), with jsonschema."""
    jsonschema = pytest.importorskip("jsonschema")
    dask_kubernetes = pytest.importorskip("dask_kubernetes",
                                          reason="needs dask-kubernetes (ebf[cluster])")
    crds = (Path(dask_kubernetes.__file__).parent / "operator" / "deployment" / "helm"
            / "dask-kubernetes-operator" / "crds")
    crd = yaml.safe_load((crds / f"{kind.lower()}.yaml").read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    (path,) = [p for p in EXAMPLES if yaml.safe_load(p.read_text())["kind"] == kind]
    manifest = yaml.safe_load(path.read_text())
    errors = [f"{list(e.path)}: {e.message}" for e in
              jsonschema.Draft7Validator(schema).iter_errors(manifest)]
    assert not errors, errors
