"""A model directory is untrusted input: crafted files give ``ModelFormatError``, never a
crash, a hang, an out-of-bounds read or garbage output.

Checksums (and the model hash) can be recomputed by whoever edits a file, so every crafted
model here has them recomputed: only the codec's limits (``ebf/artifact/_codec.py``) and the
structural validation of each ``_set_state`` can catch it. Cases that could crash or hang
the interpreter run in a worker subprocess (``tests/ebf/hostile_worker.py``); a case that kills
it or gets no answer fails naming the case. The structure kernel is compared with its
plain-NumPy oracle ``tests/naive/cart.py::naive_check_trees``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from basics import flat_tree
from basics.flat_tree import check_trees
from ebf import (
    EmpiricalBayesianForestClassifier,
    EmpiricalBayesianForestRegressor,
)
from ebf._cart_fit import fit_cart_forest
from ebf.artifact import ModelFormatError, load
from ebf.artifact import _codec as codec
from ebf.artifact._codec import content_hash
from ebf.artifact._manifest import HASHED
from ebf.trunk import Trunk
from tests.ebf.hostile_corpus import MODEL_NAMES, Worker
from tests.ebf.hostile_corpus import data as _data
from tests.ebf.model_helpers import array_entries, load_manifest, save
from tests.naive import naive_check_trees

# ------------------------------------------------------------------------------ forging


def _leaves(obj: Any) -> list[tuple[Any, Any]]:
    """``(container, key)`` of every JSON scalar (or non-finite float / numpy scalar marker)
    of a state, outside array entries."""
    out = []
    items = obj.items() if isinstance(obj, dict) else enumerate(obj)
    for key, value in items:
        if isinstance(value, dict) and "__ndarray__" in value:
            continue
        if isinstance(value, dict) and ("__float__" in value or "__scalar__" in value):
            out.append((obj, key))
        elif isinstance(value, (dict, list)):
            out.extend(_leaves(value))
        else:
            out.append((obj, key))
    return out


def _sha(file: Path) -> str:
    return hashlib.sha256(file.read_bytes()).hexdigest()


def _put(path: Path, manifest: dict, entry: dict, array: np.ndarray) -> None:
    """Write ``array`` into ``entry``'s file and describe it there, as a forger would."""
    np.save(path / entry["__ndarray__"], array, allow_pickle=False)
    header = np.lib.format.header_data_from_array_1_0(array)
    entry.update(dtype=str(array.dtype), shape=list(array.shape),
                 fortran_order=header["fortran_order"])


def _forge(path: Path, manifest: dict) -> None:
    """Recompute every file checksum and the model hash, then write the manifest."""
    for name in manifest["files"]:
        manifest["files"][name] = _sha(path / name)
    for entry in array_entries(manifest["state"]) + array_entries(manifest["params"]):
        entry["sha256"] = manifest["files"][entry["__ndarray__"]]
    manifest["model_hash"] = content_hash(manifest, HASHED)
    (path / "manifest.json").write_text(json.dumps(manifest))


def _copy(models: dict, name: str, tmp_path: Path) -> tuple[Path, dict, Path]:
    src, rows = models[name]
    dst = tmp_path / name
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    return dst, load_manifest(dst), rows


def _array(path: Path, entry: dict) -> np.ndarray:
    return np.load(path / entry["__ndarray__"], allow_pickle=False)


def _find(manifest: dict, *keys: Any) -> Any:
    obj = manifest["state"]
    for key in keys:
        obj = obj[key]
    return obj


def _assert_refused(worker: Worker, case: str, path: Path, rows: Path, match: str) -> str:
    result = worker.run(case, path, rows)
    assert result["outcome"] == "refused", (case, result)
    assert "ModelFormatError" in result["detail"], result["detail"]
    assert str(path) in result["detail"], result
    assert re.search(match, result["detail"]), (match, result["detail"])
    return result["detail"]


def _first_branch(manifest: dict, cls: str) -> int:
    return next(i for i, b in enumerate(manifest["state"]["branches"]) if b["class"] == cls)


def _set(path: Path, manifest: dict, keys: tuple, index: int, value: Any) -> None:
    entry = _find(manifest, *keys)
    a = _array(path, entry).copy()
    a[index] = value
    _put(path, manifest, entry, a)
    _forge(path, manifest)


# ------------------------------------------------------------------------------ probe cases


def test_bf_left_child_of_1e12_is_refused(models, worker, tmp_path):
    path, m, rows = _copy(models, "bf_reg", tmp_path)
    _set(path, m, ("forest", "left"), 0, 10**12)
    _assert_refused(worker, "bf left[0] = 10**12", path, rows,
                    r"ebf\.BayesianForestRegressor: invalid state: tree 0 node 0: left child "
                    r"1000000000000 is outside the tree's nodes \[0, \d+\)")


_BF_BRANCH = "ebf.BayesianForestRegressor"


@pytest.mark.parametrize("name, keys, value, match", [
    ("bf_clf", ("forest", "right"), -5, r"tree 0 node 0: right child -5 is outside"),
    ("bf_clf", ("forest", "feature"), 3, r"tree 0 node 0: split feature 3 is outside the "
                                         r"model's features \[0, 3\)"),
    ("ebf_reg", ("branch", "forest", "left"), 10**12, r"branches\[\d\] \(ebf\.BayesianForest"
                                                      r"Regressor\): invalid state: tree 0 node "
                                                      r"0: left child 1000000000000"),
    ("ebf_reg", ("branch", "forest", "feature"), 10**6, r"branches\[\d\].*split feature 1000000"),
    ("trunk", ("trunk_", "left"), 10**12, r"trunk node 0: left child 1000000000000"),
    ("trunk", ("trunk_", "feature"), 99, r"trunk node 0: split feature 99 is outside"),
    ("ebf_clf", ("trunk", "state", "trunk_", "right"), 2**62, r"trunk \(ebf\.Trunk\): invalid "
                                                              r"state: trunk node 0: right child"),
])
def test_child_or_feature_out_of_range_is_refused(models, worker, tmp_path, name, keys, value,
                                                  match):
    path, m, rows = _copy(models, name, tmp_path)
    if keys[0] == "branch":
        keys = ("branches", _first_branch(m, _BF_BRANCH), "state") + keys[1:]
    _set(path, m, keys, 0, value)
    _assert_refused(worker, f"{name} {keys} = {value}", path, rows, match)


@pytest.mark.parametrize("name, keys, value, match", [
    ("mf_reg_compact", ("trees_", 1, "feature"), 100,
     r"mondrian\.MondrianForestRegressor: invalid state: trees_\[1\]: node 0 has a feature "
     r"index out of range"),
    ("mf_clf_compact", ("trees_", 0, "counts"), 50,
     r"trees_\[0\]: the leaves hold \d+ points, not the 240 seen"),
    ("ebf_reg_mondrian_compact", ("branch", "trees_", 0, "tau"), np.inf,
     r"branches\[\d\] \(mondrian\.MondrianForestRegressor\): invalid state: trees_\[0\]: "
     r"node 0 has a non-finite threshold or split time"),
])
def test_crafted_compact_mondrian_trees_are_refused(models, worker, tmp_path, name, keys,
                                                    value, match):
    path, m, rows = _copy(models, name, tmp_path)
    if keys[0] == "branch":
        keys = ("branches", _first_branch(m, "mondrian.MondrianForestRegressor"),
                "state") + keys[1:]
    _set(path, m, keys, 0, value)
    _assert_refused(worker, f"{name} {keys} = {value}", path, rows, match)


def test_trunk_max_leaves_of_infinity_is_refused(models, worker, tmp_path):
    """A JSON ``inf`` budget once reached ``int()`` (an OverflowError; a fuzz finding)."""
    path, m, rows = _copy(models, "trunk", tmp_path)
    m["state"]["max_leaves_"] = {"__float__": "inf"}
    _forge(path, m)
    _assert_refused(worker, "trunk max_leaves_ = inf", path, rows,
                    r"max_leaves_ must be an integer >= 1")


@pytest.mark.parametrize("name", ["mf_reg_compact", "bf_clf", "ssf_reg"])
def test_n_jobs_zero_is_refused_at_load_not_at_predict(models, worker, tmp_path, name):
    """joblib refuses ``n_jobs=0`` only when threads start; the parameter checks of
    ``load`` must refuse it first (a finding of the fuzz test)."""
    path, m, rows = _copy(models, name, tmp_path)
    m["params"]["n_jobs"] = 0
    _forge(path, m)
    _assert_refused(worker, f"{name} n_jobs=0", path, rows, r"parameters .* do not fit")


@pytest.mark.parametrize("name, keys", [("bf_reg", ("forest",)), ("trunk", ("trunk_",))])
def test_root_whose_children_point_back_to_it_is_refused(models, worker, tmp_path, name, keys):
    path, m, rows = _copy(models, name, tmp_path)
    for side in ("left", "right"):
        _set(path, m, keys + (side,), 0, 0)
    _assert_refused(worker, f"{name} root -> root", path, rows,
                    r"node 0: child 0 is not numbered after it \(a link back forms a cycle\)")


def test_float_child_array_that_would_cast_to_a_cycle_is_refused(models, worker, tmp_path):
    path, m, rows = _copy(models, "bf_reg", tmp_path)
    entry = _find(m, "forest", "left")
    left = _array(path, entry).astype(np.float64)
    left[1] = 0.5  # int64(0.5) == 0: node 1 would point back to the root
    _put(path, m, entry, left)
    _forge(path, m)
    _assert_refused(worker, "bf float left", path, rows,
                    r"left must be an array of int64, got a float64 array")


def test_negative_trunk_leaf_id_is_refused(models, worker, tmp_path):
    path, m, rows = _copy(models, "ebf_reg", tmp_path)
    leaf = int(np.flatnonzero(_array(path, _find(m, "trunk", "state", "trunk_", "left")) < 0)[0])
    _set(path, m, ("trunk", "state", "trunk_", "leaf_id"), leaf, -1)
    _assert_refused(worker, "trunk leaf_id -1", path, rows,
                    rf"trunk node {leaf}: leaf_id -1 is not the preorder leaf number \d")


def test_fewer_branches_than_trunk_leaves_is_refused(models, worker, tmp_path):
    path, m, rows = _copy(models, "ebf_reg", tmp_path)
    m["state"]["branches"].pop()
    _forge(path, m)
    _assert_refused(worker, "2 branches for 3 leaves", path, rows,
                    r"2 branches for a trunk of 3 leaves")


@pytest.mark.parametrize("victim", ["arrays/00003.npy", "manifest.json"])
def test_fifo_in_place_of_a_file_is_refused_without_blocking(models, worker, tmp_path, victim):
    path, _, rows = _copy(models, "bf_reg", tmp_path)
    (path / victim).unlink()
    os.mkfifo(path / victim)
    _assert_refused(worker, f"FIFO {victim}", path, rows,
                    rf"{victim}.* is a FIFO \(named pipe\), not a regular file")


def test_dev_zero_in_place_of_an_array_file_is_refused(models, worker, tmp_path):
    path, _, rows = _copy(models, "bf_reg", tmp_path)
    victim = path / "arrays" / "00003.npy"
    victim.unlink()
    victim.symlink_to("/dev/zero")
    _assert_refused(worker, "symlink to /dev/zero", path, rows, r"00003\.npy is a link")


def test_arrays_directory_linked_out_of_the_model_is_refused(models, tmp_path):
    path, _, _ = _copy(models, "trunk", tmp_path)
    outside = tmp_path / "outside"
    shutil.move(path / "arrays", outside)
    (path / "arrays").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ModelFormatError, match=r"arrays/00000\.npy is a link or leaves the "
                                               r"model directory"):
        load(path)


def test_character_device_in_place_of_an_array_file_is_refused(models, worker, tmp_path):
    path, _, rows = _copy(models, "bf_reg", tmp_path)
    victim = path / "arrays" / "00003.npy"
    victim.unlink()
    try:
        os.mknod(victim, stat.S_IFCHR | 0o600, os.makedev(1, 5))  # what /dev/zero is
    except PermissionError as exc:
        pytest.skip(f"creating a character device is not permitted here: {exc}")
    _assert_refused(worker, "character device 1:5", path, rows,
                    r"00003\.npy is a character device, not a regular file")


def test_npy_header_declaring_1e11_elements_is_refused_naming_the_file(models, worker,
                                                                       tmp_path):
    path, m, rows = _copy(models, "bf_reg", tmp_path)
    entry = _find(m, "forest", "threshold")
    file = path / entry["__ndarray__"]
    with open(file, "wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": "<f8", "fortran_order": False, "shape": (10**11,)})
        f.write(np.zeros(4).tobytes())
    entry["shape"] = [10**11]
    _forge(path, m)
    detail = _assert_refused(worker, "1e11-element header", path, rows,
                             r"declares a float64 array of shape \(100000000000,\).* but the "
                             r"file has \d+ bytes")
    assert entry["__ndarray__"] in detail and "MemoryError" not in detail


def test_truncated_array_file_is_refused_before_hashing(models, tmp_path):
    path, m, _ = _copy(models, "trunk", tmp_path)
    entry = _find(m, "trunk_", "stats")
    file = path / entry["__ndarray__"]
    file.write_bytes(file.read_bytes()[:-8])
    _forge(path, m)
    with pytest.raises(ModelFormatError, match=rf"{entry['__ndarray__']}.*truncated"):
        load(path)


def test_header_that_differs_from_the_manifest_entry_is_refused(models, tmp_path):
    path, m, _ = _copy(models, "trunk", tmp_path)
    entry = _find(m, "trunk_", "gain")
    entry["dtype"] = "int64"
    _forge(path, m)
    with pytest.raises(ModelFormatError, match=r"holds a float64 array of shape \(\d+,\), but "
                                               r"the manifest says int64"):
        load(path)


# ------------------------------------------------------------------------------ manifest limits


@pytest.mark.parametrize("limit, value, metadata, match", [
    ("MAX_MANIFEST_BYTES", 1000, {}, r"bytes is more than the 1000 bytes a manifest may have"),
    ("MAX_DEPTH", 64, {"deep": json.loads("[" * 80 + "]" * 80)}, r"nested more than 64 levels"),
    ("MAX_STRING", 1000, {"long": "x" * 1001}, r"a string of 1001 characters \(at most 1000\)"),
])
def test_manifest_limits(models, tmp_path, monkeypatch, limit, value, metadata, match):
    model = load(models["trunk"][0])
    path = save(model, tmp_path / "m", metadata=metadata)
    monkeypatch.setattr(codec, limit, value)
    with pytest.raises(ModelFormatError, match=match):
        load(path)


def test_too_many_files_and_a_linked_manifest_are_refused(models, tmp_path, monkeypatch):
    path, _, _ = _copy(models, "trunk", tmp_path)
    with monkeypatch.context() as mp:
        mp.setattr("ebf.artifact._manifest.MAX_FILES", 3)
        with pytest.raises(ModelFormatError, match=r"array files; at most 3"):
            load(path)
    real = tmp_path / "elsewhere.json"
    shutil.move(path / "manifest.json", real)
    (path / "manifest.json").symlink_to(real)
    with pytest.raises(ModelFormatError, match=r"manifest\.json is a symbolic link"):
        load(path)


def test_ebf_predictions_are_nan_not_uninitialised_for_an_unrouted_row(monkeypatch):
    X, y, c = _data(200)
    for model in (EmpiricalBayesianForestRegressor(n_estimators=2, random_state=0).fit(X, y),
                  EmpiricalBayesianForestClassifier(n_estimators=2, random_state=0).fit(X, c)):
        real = model.trunk_.apply
        monkeypatch.setattr(model.trunk_, "apply", lambda A, real=real: np.where(
            np.arange(A.shape[0]) == 0, -1, real(A)))
        out = model.predict_proba(X) if hasattr(model, "classes_") else model.predict(X)
        assert np.isnan(out[0]).all() and np.isfinite(out[1:]).all()


# ------------------------------------------------------------------------------ the fuzz test


_INT_VALUES = (-1, -2, 0, 1, -2**63, 2**62, "n")
#: Beyond +-1: the finite extremes a forger reaches for (issue 26: leaf values of 1e160 to
#: 1e308 loaded and predicted inf) and subnormals (a count or a variance of 5e-324).
_FLOAT_VALUES = (np.nan, np.inf, -np.inf, -1.0, 0.0, 1.0, 1e300, -1e300, 1e160, 5e-324,
                 -5e-324, 2.5)
_JSON_VALUES = (-1, 0, 1, 2**62, -2**63, 10**30, {"__float__": "nan"}, {"__float__": "inf"},
                -1.0, 0.5, True, None, "x", [], {}, 1e300, -1e300, 1e160, 5e-324)
_DTYPES = ("int64", "float64", "int32", "float32", "bool", "uint8", "<U3")
_SHAPES = ("drop", "append", "ravel", "newaxis", "empty")
#: Shapes written into a ``.npy`` header (with the data they declare, if small): empty ones
#: numpy cannot allocate, too many dimensions, more elements than the file holds.
_EXTREME_SHAPES = ((0, 2**62), (0,) * 65, (1,) * 9, (0, 2**32, 2**32), (2**63,), (0, 0))

_INDEX = st.integers(0, 2**16)
MUTATION = st.one_of(
    st.tuples(st.just("value"), _INDEX, st.integers(0, 2**30),
              st.integers(0, len(_FLOAT_VALUES) - 1)),
    st.tuples(st.just("swap"), _INDEX, _INDEX),
    st.tuples(st.just("truncate"), _INDEX, st.integers(0, 2**30)),
    st.tuples(st.just("dtype"), _INDEX, st.sampled_from(_DTYPES)),
    st.tuples(st.just("shape"), _INDEX, st.sampled_from(_SHAPES)),
    st.tuples(st.just("json"), _INDEX, st.integers(0, len(_JSON_VALUES) - 1)),
    st.tuples(st.just("header"), _INDEX, st.integers(0, len(_EXTREME_SHAPES) - 1)),
)


def _value(a: np.ndarray, pos: int, which: int) -> np.ndarray:
    a = np.array(a)  # an owned C-contiguous copy: reshape(-1) is a view of it
    flat = a.reshape(-1)
    if a.dtype.kind in "iu":
        v = _INT_VALUES[which % len(_INT_VALUES)]
        flat[pos] = np.array([a.shape[0] if v == "n" else v], np.int64).astype(a.dtype)[0]
    elif a.dtype.kind == "f":
        flat[pos] = _FLOAT_VALUES[which % len(_FLOAT_VALUES)]
    elif a.dtype.kind == "b":
        flat[pos] = not flat[pos]
    else:
        flat[pos] = "zz"
    return a


def _reshape(a: np.ndarray, how: str) -> np.ndarray:
    if a.ndim == 0 or how == "newaxis":
        return a[None]
    return {"drop": a[:-1], "append": np.concatenate([a, a[-1:]]), "ravel": a.ravel(),
            "empty": a[:0]}[how]


def _mutate(path: Path, manifest: dict, mutation: tuple) -> None:
    """Apply one mutation (file checksums and the model hash are forged afterwards)."""
    kind, i, arg, *more = mutation
    if kind == "json":
        leaves = _leaves(manifest["state"]) + _leaves(manifest["params"])
        container, key = leaves[i % len(leaves)]
        container[key] = json.loads(json.dumps(_JSON_VALUES[arg]))
        return
    entries = array_entries(manifest["state"])
    entry = entries[i % len(entries)]
    file = path / entry["__ndarray__"]
    if kind == "swap":
        other = entries[arg % len(entries)]
        mine = dict(entry)
        entry.clear()
        entry.update(other)
        other.clear()
        other.update(mine)
        return
    if kind == "truncate":
        data = file.read_bytes()
        file.write_bytes(data[: arg % max(len(data), 1)])
        return
    if kind == "header":
        shape = _EXTREME_SHAPES[arg]
        with open(file, "wb") as f:
            np.lib.format.write_array_header_1_0(
                f, {"descr": "<f8", "fortran_order": False, "shape": shape})
            f.write(bytes(8 * math.prod(shape) if math.prod(shape) < 2**20 else 0))
        entry.update(dtype="float64", shape=list(shape), fortran_order=False)
        return
    try:
        a = _array(path, entry)
    except (ValueError, OSError, EOFError):  # truncated by an earlier mutation
        return
    if kind == "value":
        if a.size == 0:
            return
        a = _value(a, arg % a.size, more[0])
    elif kind == "dtype":
        try:
            with np.errstate(all="ignore"):
                a = a.astype(arg)
        except (ValueError, OverflowError):  # strings that are not numbers
            return
    else:
        a = _reshape(a, arg)
    _put(path, manifest, entry, a)


@pytest.mark.parametrize("name", MODEL_NAMES)
@settings(max_examples=20, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(mutations=st.lists(MUTATION, min_size=1, max_size=2))
def test_fuzzed_models_are_refused_or_predict_finite_values(models, worker, tmp_path, name,
                                                            mutations):
    """Mutated models of every class (values, swapped arrays, truncated files, dtypes,
    shapes, ``.npy`` headers of extreme shapes, JSON scalars; checksums and model hash
    forged) end in ``ModelFormatError`` or
    in predictions of the right shape with finite values, never a crash, a hang or another
    exception."""
    path, manifest, rows = _copy(models, name, tmp_path)
    for mutation in mutations:
        _mutate(path, manifest, mutation)
    _forge(path, manifest)
    result = worker.run(f"{name} {mutations}", path, rows)
    assert result["outcome"] in ("refused", "ok"), (
        f"{name} with mutations {mutations}: {result['outcome']}: {result['detail']}")


# ------------------------------------------------------------------------------ kernel vs oracle


def _trees() -> list[tuple[np.ndarray, ...]]:
    X, y, _ = _data(150)
    f = fit_cart_forest(X, y, None, task="regression", n_estimators=4, entropy=0)
    t = Trunk(max_leaves=6).fit(X, y).trunk_
    return [(f.left, f.right, f.feature, f.threshold, f.offsets),
            (t.left, t.right, t.feature, t.threshold, np.array([0, t.n_nodes]))]


def _corrupt(rng: np.random.Generator, arrays: list[np.ndarray], offsets: np.ndarray) -> None:
    """One random corruption, in place: a child, feature or threshold, or a rewiring that
    leaves every node one parent but cuts a cycle off the root (refused: a link back)."""
    left, right, feature, threshold = arrays
    n = left.shape[0]
    j = int(rng.integers(n))
    t = int(np.searchsorted(offsets, j, side="right")) - 1
    a, b = int(offsets[t]), int(offsets[t + 1])
    kind = rng.integers(6)
    if kind < 2:
        child = (left, right)[kind]
        child[j] = rng.choice([-1, -2, 10**12, n, a, b, int(rng.integers(a, b)),
                               int(rng.integers(n))])
    elif kind == 2:
        feature[j] = rng.choice([-1, -2, 0, 2, 3, 2**62])
    elif kind == 3:
        threshold[j] = rng.choice([np.nan, np.inf, -np.inf, 0.25])
    elif kind == 4:
        left[j] = right[j] = -1
    else:
        inner = np.flatnonzero((left[a:b] >= 0) & (left[a:b] < n)) + a
        grand = [p for p in inner if 0 <= left[left[p]] < n]
        if grand:
            p = int(rng.choice(grand))
            c = left[p]
            left[p], left[c] = left[c], c


@pytest.mark.parametrize("forward", [True, False])
def test_structure_kernel_matches_its_oracle(forward):
    """With ``forward`` (CART and trunk numbering) and without (Mondrian slot order, where a
    link back is caught by the parent counts or the walk from the root)."""
    rng = np.random.default_rng(0)
    codes = set()
    for tree in _trees():
        offsets = tree[4]
        roots = offsets[:-1]
        assert check_trees(*tree, roots, 3, forward) == (0, 0, 0, 0) == naive_check_trees(
            *tree, 3, roots, forward)
        for _ in range(300):
            arrays = [a.copy() for a in tree[:4]]
            for _ in range(int(rng.integers(1, 3))):
                _corrupt(rng, arrays, offsets)
            got = tuple(int(v) for v in check_trees(*arrays, offsets, roots, 3, forward))
            assert got == naive_check_trees(*arrays, offsets, 3, roots, forward)
            codes.add(got[0])
    # every kind of violation, and valid trees, were met
    links_back = {flat_tree.ROOT_CHILD, flat_tree.UNREACHED}
    assert codes == set(range(11)) - ({*links_back} if forward else {flat_tree.BACKWARD})
