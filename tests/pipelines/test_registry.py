"""The model registry (``pipelines.registry.store``): versions, pointer, lock, failures,
crafted files.

Every version holds a real model: a tiny EBF with Mondrian branches (2 trees, 300 rows,
the ``tiny_model_dir`` fixture), saved once and copied (local registries) or saved again
(``memory://``) by ``write``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import fsspec
import pytest

import basics.atomic
from ebf.artifact import load, model_hash, save
from pipelines.registry import files as registry_files
from pipelines.registry import store as registry_module
from pipelines.registry.resolve import is_registry, resolve_model
from pipelines.registry.store import (
    MAX_RECORD_BYTES,
    MissingVersionError,
    Registry,
    RegistryBusyError,
    RegistryError,
)


@pytest.fixture
def model_dir(tiny_model_dir):
    """A saved EBF regressor (``tests/pipelines/conftest.py``)."""
    return tiny_model_dir


def copier(model_dir):
    """A ``write`` callable of :meth:`Registry.publish` copying the saved model."""
    return lambda url: shutil.copytree(model_dir, url)


def publish(reg, model_dir, promote=True, **record):
    with reg.lock():
        return reg.publish(copier(model_dir), record, promote=promote)


def snapshot(root) -> dict:
    """Every file under ``root`` with its bytes, and every directory."""
    out = {}
    for folder, _, files in os.walk(root):
        rel = os.path.relpath(folder, root)
        out[rel] = None
        for name in files:
            with open(os.path.join(folder, name), "rb") as f:
                out[os.path.join(rel, name)] = f.read()
    return out


# --------------------------------------------------------------------------- versions


def test_publish_current_record_find_and_layout(tmp_path, model_dir):
    reg = Registry(tmp_path)
    assert reg.versions() == [] and reg.current() is None and reg.find("a") is None
    assert publish(reg, model_dir, promote=False, key="a", metrics={"rmse": 1.5}) == 1
    assert reg.versions() == [1] and reg.current() is None
    assert publish(reg, model_dir, key="b", decision="promoted") == 2
    assert reg.versions() == [1, 2] and reg.current() == 2 and reg.history() == []
    rec = reg.record(1)
    assert rec["key"] == "a" and rec["metrics"] == {"rmse": 1.5}
    assert rec["version"] == 1 and rec["name"] == "ebf" and rec["created_utc"].endswith("Z")
    assert reg.find("a") == 1 and reg.find("b") == 2 and reg.find("c") is None
    folder = tmp_path / "models" / "ebf"
    # the lock released, the marker that keeps other writers out
    assert sorted(os.listdir(folder)) == ["_ebf_output.json", "current.json", "v0001", "v0002"]
    assert sorted(os.listdir(folder / "v0002")) == ["model", "version.json"]
    assert reg.model_path(2) == str(folder / "v0002" / "model")
    assert model_hash(reg.model_path(2)) == model_hash(model_dir)
    assert json.loads((folder / "current.json").read_text())["version"] == 2
    no_pickle = [f for _, _, fs in os.walk(tmp_path) for f in fs if f.endswith((".pkl",
                                                                                ".pickle"))]
    assert no_pickle == []


def test_promote_rollback_and_history(tmp_path, model_dir):
    reg = Registry(tmp_path, name="flights")
    for _ in range(3):
        publish(reg, model_dir, promote=False)
    with pytest.raises(RegistryError, match="nothing to roll back.*promote"):
        reg.rollback()
    assert reg.promote(1) == 1 and reg.promote(3) == 3 and reg.promote(3) == 3
    assert reg.current() == 3 and reg.history() == [1]  # promoting the current one: no change
    assert reg.promote(2) == 2 and reg.history() == [1, 3]
    assert reg.rollback() == 3 and reg.history() == [1]
    assert reg.rollback() == 1 and reg.history() == []
    with pytest.raises(RegistryError, match="version 1 is current and no earlier one"):
        reg.rollback()
    with pytest.raises(MissingVersionError, match=r"version 7 is not in .* 3 versions \(1, 2, 3\)"):
        reg.promote(7)
    assert publish(reg, model_dir) == 4 and reg.history() == [1]  # a promoted publish
    shutil.rmtree(tmp_path / "models" / "flights" / "v0001")  # removed by hand
    with pytest.raises(MissingVersionError, match="version 1 is not in"):
        reg.rollback()
    assert reg.current() == 4
    assert publish(reg, model_dir, promote=False) == 5


def test_numbers_are_never_reused(tmp_path, model_dir):
    reg = Registry(tmp_path)
    publish(reg, model_dir)
    publish(reg, model_dir)
    folder = tmp_path / "models" / "ebf"
    os.makedirs(folder / ".v0007.tmp-otherhost-12-1700000000-ab12")  # a killed writer's
    assert reg.versions() == [1, 2]
    assert publish(reg, model_dir) == 8
    shutil.rmtree(folder / "v0008")
    shutil.rmtree(folder / ".v0007.tmp-otherhost-12-1700000000-ab12")
    # v0008 is gone but the pointer still names it: its number stays taken
    assert publish(reg, model_dir, promote=False) == 9


def test_publish_needs_the_lock_and_a_json_record(tmp_path, model_dir):
    reg = Registry(tmp_path)
    with pytest.raises(RegistryError, match="needs the registry's lock"):
        reg.publish(copier(model_dir), {})
    with reg.lock():
        with pytest.raises(RegistryError, match="cannot be written as JSON"):
            reg.publish(copier(model_dir), {"when": object()})
        with pytest.raises(RegistryError, match="must be a dict"):
            reg.publish(copier(model_dir), [1, 2])
        with pytest.raises(RegistryError, match="saved no model"):
            reg.publish(lambda url: os.makedirs(url), {})
        # re-entrant in the holding thread: promote inside the block takes no second lock
        version = reg.publish(copier(model_dir), {}, promote=False)
        assert reg.promote(version) == version
    assert reg.versions() == [1] and sorted(os.listdir(tmp_path / "models" / "ebf")) == [
        "_ebf_output.json", "current.json", "v0001"]
    with pytest.raises(RegistryError, match="invalid model name"):
        Registry(tmp_path, name="../x")


# --------------------------------------------------------------------------- failures


def _failing_write(model_dir, error):
    def write(url):
        shutil.copytree(model_dir, url)
        raise error
    return write


def _break(monkeypatch, module, name, after):
    """Make ``module.name`` raise, before doing its work or (``after``) once it is done."""
    real = getattr(module, name)

    def fail(*args):
        if after:
            real(*args)
        raise OSError(f"{name} failed")
    monkeypatch.setattr(module, name, fail)


@pytest.mark.parametrize("step", [
    OSError("disk full"),  # in write, after it wrote part of the model
    KeyboardInterrupt(),  # Ctrl-C in write
    (registry_module, "_write_record", False),  # after the model, before version.json
    (basics.atomic, "_move", False),  # the move into place
    (basics.atomic, "_move", True),  # after the rename (flushing the parent)
    (registry_files, "replace_file", False),  # the pointer's replace
    (registry_files, "replace_file", True),  # after the pointer's replace
], ids=["write", "interrupt", "record", "move", "after-move", "pointer", "after-pointer"])
def test_a_failure_at_any_step_leaves_the_registry_as_it_was(tmp_path, model_dir, monkeypatch,
                                                             step):
    reg = Registry(tmp_path)
    publish(reg, model_dir)
    publish(reg, model_dir, promote=False)
    reg.promote(2)
    before = snapshot(tmp_path)
    if isinstance(step, BaseException):
        write = _failing_write(model_dir, step)
    else:
        write = copier(model_dir)
        _break(monkeypatch, *step)
    with pytest.raises((OSError, KeyboardInterrupt)):
        with reg.lock():
            reg.publish(write, {"key": "new"}, promote=True)
    assert snapshot(tmp_path) == before  # versions, pointer, no temporary or lock file
    assert reg.versions() == [1, 2] and reg.current() == 2 and reg.history() == [1]
    monkeypatch.undo()
    assert publish(reg, model_dir) == 3 and reg.history() == [1, 2]


@pytest.mark.parametrize("partial", [False, True])
def test_a_failed_move_on_an_object_store_leaves_nothing(model_dir, monkeypatch, partial):
    model = load(model_dir)
    root = f"/ebf-test-registry-move-{partial}"
    fs = fsspec.filesystem("memory")
    reg = Registry(f"memory://{root}")
    with reg.lock():
        reg.publish(lambda url: save(model, url), {}, promote=True)
    before = sorted(fs.find(root))

    real = basics.atomic._move

    def fail(tmp, target):
        if target.name != "v0002":  # the model's own save, inside the version's directory
            return real(tmp, target)
        if partial:  # the copy got half way: the record and one model file are there
            fs.copy(f"{tmp.path}/version.json", f"{target.path}/version.json")
            fs.copy(f"{tmp.path}/model/manifest.json", f"{target.path}/model/manifest.json")
        raise OSError("connection reset")
    monkeypatch.setattr(basics.atomic, "_move", fail)
    with pytest.raises(OSError, match="connection reset"), reg.lock():
        reg.publish(lambda url: save(model, url), {}, promote=True)
    assert sorted(fs.find(root)) == before and reg.versions() == [1] and reg.current() == 1
    fs.rm(root, recursive=True)


# --------------------------------------------------------------------------- concurrency


def test_a_second_writer_thread_is_refused_clearly(tmp_path, model_dir):
    first, second = Registry(tmp_path), Registry(tmp_path)
    inside, go = threading.Event(), threading.Event()
    result = {}

    def write(url):
        inside.set()
        assert go.wait(60)
        shutil.copytree(model_dir, url)

    def run():
        with first.lock():
            result["version"] = first.publish(write, {"key": "first"}, promote=True)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        assert inside.wait(60)
        lock = os.path.join(second.url, ".lock")
        for reg in (second, first):  # another object, and the same object in another thread
            with pytest.raises(RegistryBusyError) as info:
                with reg.lock():
                    reg.publish(copier(model_dir), {"key": "second"}, promote=True)
            text = str(info.value)
            assert lock in text and f"process {os.getpid()}" in text and "wait for" in text
        with pytest.raises(RegistryBusyError):
            second.promote(1)
    finally:
        go.set()
        thread.join(60)
    assert result["version"] == 1
    assert second.versions() == [1] and second.current() == 1
    assert second.record(1)["key"] == "first" and not os.path.exists(lock)


_WRITER = """
import os, shutil, sys, time
from pipelines.registry.store import Registry
root, model_dir, ready, go = sys.argv[1:5]
reg = Registry(root)

def write(url):
    open(ready, "w").close()
    while not os.path.exists(go):
        time.sleep(0.02)
    shutil.copytree(model_dir, url)

with reg.lock():
    print(reg.publish(write, {"key": "child"}, promote=True))
"""


def _start_writer(tmp_path, model_dir, reg_root):
    ready, go = tmp_path / "ready", tmp_path / "go"
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(reg_root), model_dir,
                             str(ready), str(go)], stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not ready.exists():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    return proc, go


def test_two_processes_one_wins_the_other_fails_clearly(tmp_path, model_dir):
    root = tmp_path / "reg"
    proc, go = _start_writer(tmp_path, model_dir, root)
    try:
        reg = Registry(root)
        with pytest.raises(RegistryBusyError) as info:
            publish(reg, model_dir, key="parent")
        text = str(info.value)
        assert f"held by process {proc.pid} on host" in text and "wait for that run" in text
        assert "the lock is stale" not in text
        assert reg.versions() == [] and reg.current() is None
    finally:
        go.touch()
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0 and out.strip() == "1"
    assert reg.versions() == [1] and reg.current() == 1 and reg.record(1)["key"] == "child"
    assert publish(reg, model_dir, key="parent") == 2  # released: the next run goes through


def test_the_lock_of_a_killed_writer_is_named_stale_and_can_be_broken(tmp_path, model_dir):
    root = tmp_path / "reg"
    proc, _ = _start_writer(tmp_path, model_dir, root)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    reg = Registry(root)
    folder = root / "models" / "ebf"
    assert any(name.startswith(".v0001.tmp-") for name in os.listdir(folder))  # its leftover
    assert reg.versions() == [] and reg.current() is None
    with pytest.raises(RegistryBusyError, match=f"process {proc.pid} .*no longer running.*"
                       "stale.*ebf registry unlock"):
        publish(reg, model_dir)
    with reg.lock(break_stale=True):
        assert reg.publish(copier(model_dir), {}, promote=True) == 2  # the leftover's 1 skipped
    assert not (folder / ".lock").exists() and reg.versions() == [2]


def test_the_lock_is_released_on_interrupt_and_unreadable_locks_are_explained(tmp_path):
    reg = Registry(tmp_path)
    with pytest.raises(KeyboardInterrupt), reg.lock():
        raise KeyboardInterrupt
    lock = tmp_path / "models" / "ebf" / ".lock"
    assert not lock.exists()
    lock.write_bytes(b"\x00garbage")
    with pytest.raises(RegistryBusyError, match="unreadable; wait and run again; .*remove"):
        with reg.lock(break_stale=True):
            pass
    assert lock.exists()  # not a provably dead holder: kept


# --------------------------------------------------------------------------- crafted files


@pytest.fixture
def two_versions(tmp_path, model_dir):
    reg = Registry(tmp_path)
    publish(reg, model_dir)
    publish(reg, model_dir)
    return reg, tmp_path / "models" / "ebf"


@pytest.mark.parametrize("content, match", [
    (b"{not json", "cannot be read"),
    (b"[1, 2]", "JSON list, not an object"),
    (b'{"version": 1}', "says it is version 1, not 2"),
    (b'{"version": true}', "says it is version True"),
    (b" " * (MAX_RECORD_BYTES + 1), f"more than {MAX_RECORD_BYTES:,} bytes, the most accepted"),
])
def test_a_crafted_record_is_a_registry_error(two_versions, content, match):
    reg, folder = two_versions
    (folder / "v0002" / "version.json").write_bytes(content)
    with pytest.raises(RegistryError, match=match) as info:
        reg.record(2)
    assert "v0002" in str(info.value)
    with pytest.raises(RegistryError, match=match):
        reg.find("nothing")
    assert reg.record(1)["version"] == 1


def test_odd_entries_are_not_versions(two_versions):
    reg, folder = two_versions
    for name in ("v3", "v00003", "v1234567890", "vabcd", "v0003x", "_v0004", "latest"):
        shutil.copytree(folder / "v0001", folder / name)
    (folder / "v0005").write_text("a file")
    os.symlink(folder / "v0001", folder / "v0006")
    os.makedirs(folder / "v0007" / "version.json")  # a directory, not the record
    os.makedirs(folder / "v0008" / "model")  # no record: an unfinished write
    if hasattr(os, "mkfifo"):
        os.makedirs(folder / "v0009")
        os.mkfifo(folder / "v0009" / "version.json")  # reading it would block
    assert reg.versions() == [1, 2]
    with pytest.raises(MissingVersionError, match="version 6 is not in"):
        reg.record(6)
    assert resolve_model(f"{reg.root}@2") == reg.model_path(2)


@pytest.mark.parametrize("pointer, match", [
    (b'{"version": 9, "history": [1]}', "current version .* 9 is not in .* promote"),
    (b'{"version": "2"}', "names version '2', not an integer"),
    (b'{"version": 2, "history": "1"}', "history that is not a list"),
    (b"[2]", "JSON list, not an object"),
    (b"\xff\xfe", "cannot be read"),
])
def test_a_crafted_pointer_is_a_registry_error_and_promote_repairs_it(two_versions, pointer,
                                                                      match):
    reg, folder = two_versions
    (folder / "current.json").write_bytes(pointer)
    with pytest.raises(RegistryError, match=match):
        reg.current()
    with pytest.raises(RegistryError, match=match):
        resolve_model(reg.root)
    assert reg.versions() == [1, 2]
    assert reg.promote(1) == 1 and reg.current() == 1


def test_a_fifo_pointer_does_not_hang(two_versions):
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    reg, folder = two_versions
    os.remove(folder / "current.json")
    os.mkfifo(folder / "current.json")
    with pytest.raises(RegistryError, match="not a regular file"):
        reg.current()


# --------------------------------------------------------------------------- model hashes


@pytest.fixture(scope="module")
def other_model_dir(tmp_path_factory):
    """A second model, unlike ``model_dir`` (another seed)."""
    import numpy as np
    import pandas as pd

    from ebf import EmpiricalBayesianForestRegressor

    rng = np.random.default_rng(1)
    X = pd.DataFrame(rng.random((200, 3)), columns=["x0", "x1", "x2"])
    model = EmpiricalBayesianForestRegressor(branch="mondrian", n_estimators=2,
                                             trunk_max_leaves=2, random_state=1)
    model.fit(X, pd.Series(2 * X["x0"].to_numpy(), name="y"))
    return str(save(model, tmp_path_factory.mktemp("other") / "model"))


def test_each_version_records_its_models_hash(two_versions, model_dir):
    reg, _ = two_versions
    assert reg.record(1)["model_hash"] == model_hash(model_dir) == model_hash(reg.model_path(1))
    assert reg.verified_model(2) == reg.model_path(2) == resolve_model(reg.root)


def test_a_model_replaced_behind_the_registry_is_never_served(two_versions, other_model_dir):
    reg, folder = two_versions
    swapped = reg.model_path(1)
    shutil.rmtree(swapped)  # what the probe did with `ebf train --out ... --overwrite`
    shutil.copytree(other_model_dir, swapped)
    want, found = reg.record(1)["model_hash"][:16], model_hash(other_model_dir)[:16]
    for call in (lambda: resolve_model(f"{reg.root}@1"), lambda: reg.promote(1),
                 lambda: reg.verified_model(1)):
        with pytest.raises(RegistryError, match=f"hash is {found}, the record says {want}"):
            call()
    assert reg.current() == 2  # the refused promote changed nothing
    reg.promote(2)  # re-promoting the current version changes nothing
    with open(folder / "current.json", "w") as f:
        json.dump({"version": 2, "history": [1]}, f)  # as if 1 was current before
    with pytest.raises(RegistryError, match="replaced outside the registry"):
        reg.rollback()
    assert reg.current() == 2
    shutil.rmtree(swapped)
    with pytest.raises(RegistryError, match="cannot be read"):
        reg.verified_model(1)


def test_a_version_without_a_recorded_hash_is_served_with_a_warning(two_versions, caplog):
    reg, folder = two_versions
    record = json.loads((folder / "v0001" / "version.json").read_text())
    del record["model_hash"]  # written by an ebf before the registry recorded hashes
    (folder / "v0001" / "version.json").write_text(json.dumps(record))
    with caplog.at_level("WARNING", logger="pipelines.registry.store"):
        assert resolve_model(f"{reg.root}@1") == reg.model_path(1)
    assert "records no model hash" in caplog.text


def test_only_the_registry_writes_under_itself(two_versions, model_dir):
    reg, folder = two_versions
    assert basics.locations.output_kind(folder) == "registry"
    for where in (folder / "v0001" / "model", folder / "v0003", folder / "loose"):
        with pytest.raises(basics.locations.UnsafeOutputError, match="inside the ebf registry"):
            save(load(model_dir), where, overwrite=True)
    with pytest.raises(basics.locations.UnsafeOutputError, match="inside the ebf model"):
        basics.locations.check_location(Registry(model_dir).url, "the model registry")
    assert publish(reg, model_dir) == 3  # the registry itself still can


# --------------------------------------------------------------------------- specs


def test_specs_resolve_to_model_directories(tmp_path, model_dir):
    reg = Registry(tmp_path / "reg")
    publish(reg, model_dir, promote=False)
    with pytest.raises(MissingVersionError, match="1 versions but no current one; promote"):
        resolve_model(tmp_path / "reg")
    publish(reg, model_dir)
    root = str(tmp_path / "reg")
    for spec, version in ((root, 2), (f"{root}@1", 1), (f"{root}@v1", 1), (f"{root}@v0001", 1),
                          (f"{root}/models/ebf", 2), (f"{root}/models/ebf@2", 2)):
        assert resolve_model(spec) == reg.model_path(version), spec
    parsed, version = Registry.parse(f"{root}@v0002")
    assert (parsed.root, parsed.name, version) == (reg.root, "ebf", 2)
    assert is_registry(root) and is_registry(f"{root}/models/ebf")
    assert not is_registry(model_dir) and resolve_model(model_dir) == model_dir
    with pytest.raises(MissingVersionError, match=r"version 5 is not in .* \(1, 2\)"):
        resolve_model(f"{root}@5")
    with pytest.raises(RegistryError, match="versions start at 1"):
        resolve_model(f"{root}@0")
    with pytest.raises(RegistryError, match="is not a model registry"):
        resolve_model(f"{model_dir}@2")
    with pytest.raises(RegistryError, match="is not a model registry"):
        Registry.parse(model_dir)
    # a model saved under a folder named models/ is a model, not a registry
    plain = tmp_path / "models" / "friedman"
    shutil.copytree(model_dir, plain)
    assert not is_registry(plain) and resolve_model(str(plain)) == str(plain)

    publish(Registry(root, name="other"), model_dir)
    with pytest.raises(RegistryError, match=r"holds 2 models \(ebf, other\); name one: "
                       r".*models/NAME"):
        resolve_model(root)
    assert is_registry(root)
    assert Registry.parse(root, name="other")[0].name == "other"
    assert resolve_model(f"{root}/models/other@1") == Registry(root, "other").model_path(1)
    empty = tmp_path / "empty"
    os.makedirs(empty / "models")
    with pytest.raises(MissingVersionError, match="holds no model yet"):
        resolve_model(empty)
    os.makedirs(empty / "models" / "m")
    with pytest.raises(MissingVersionError, match="has no versions yet"):
        resolve_model(empty)


def test_a_memory_registry(model_dir):
    model = load(model_dir)
    url = "memory://ebf-test-registry"
    fs = fsspec.filesystem("memory")
    first, second = Registry(url), Registry(url)
    with first.lock():
        with pytest.raises(RegistryBusyError, match=r"\.lock is held by process"):
            with second.lock():
                pass
        assert first.publish(lambda u: save(model, u), {"key": "k"}, promote=True) == 1
        assert first.publish(lambda u: save(model, u), {}, promote=False) == 2
    assert second.versions() == [1, 2] and second.current() == 1 and second.find("k") == 1
    assert second.promote(2) == 2 and second.rollback() == 1
    path = resolve_model(f"{url}@2")
    assert path.startswith("memory://") and path.endswith("/models/ebf/v0002/model")
    assert model_hash(path) == model_hash(model_dir)
    assert resolve_model(url).endswith("v0001/model")
    assert not fs.exists("/ebf-test-registry/models/ebf/.lock")
    fs.rm("/ebf-test-registry", recursive=True)


@pytest.mark.parametrize("corrupt", ["flip", "truncate"])
def test_promote_and_rollback_refuse_a_version_with_a_corrupt_shard(two_versions, corrupt):
    """The manifest (and so the recorded hash) is intact; one shard's bytes are not: the
    version must not become current, and the message names the shard."""
    reg, folder = two_versions
    reg.promote(1)
    reg.promote(2)  # version 1 is what a rollback goes back to
    shard = sorted((folder / "v0001" / "model" / "shards").iterdir())[0]
    data = bytearray(shard.read_bytes())
    if corrupt == "flip":
        data[len(data) // 2] ^= 0xFF
    else:
        data = data[:-8]
    shard.write_bytes(bytes(data))
    before = (folder / "current.json").read_bytes()
    bad = r"version 1 .*shard 0 .*(sha256 mismatch|bytes but the manifest says)"
    with pytest.raises(RegistryError, match=bad + ".*promote another version"):
        reg.promote(1)
    with pytest.raises(RegistryError, match=bad):
        reg.rollback()
    assert (folder / "current.json").read_bytes() == before and reg.current() == 2
