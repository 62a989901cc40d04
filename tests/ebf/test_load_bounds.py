"""Semantic bounds on load (issue 26, item 3): the range of every float a model stores.

``basics/bounds.py`` derives a range for every stored float from what a fit on targets
within ``±MAX_ABS_TARGET`` produces; a loaded value outside it is a ``ModelFormatError``
naming the file and the array, raised by the checks that validate the structure, and every
model that loads predicts finite values. The corpus is the hostile-model tests'
(``hostile_corpus.py``: every class of the allowlist, fit small); each forged model has its
checksums and model hash recomputed and runs in their worker subprocess
(``hostile_worker.py``, which checks the means, standard deviations, quantiles,
probabilities and log-densities of every model that loads). The float arrays and scalars to
forge are read off each saved manifest, so an array added later is forged too.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from basics.bounds import (
    MAX_ABS_LOCATION,
    MAX_ABS_TARGET,
    MAX_VARIANCE,
    check_counts,
    check_range,
    check_sums,
    state_float,
)
from basics.pit import MAX_ACI_STEP, PITMap
from ebf import (
    BARTRegressor,
    BayesianForestRegressor,
    EmpiricalBayesianForestRegressor,
    SMCTreeRegressor,
    SubsampleForestRegressor,
)
from ebf.artifact import ModelFormatError, estimator_from_state, estimator_state, load, open_model
from ebf.artifact import save as save_v2
from ebf.artifact._codec import content_hash
from ebf.artifact._manifest import HASHED
from mondrian import MondrianForestRegressor, MondrianKernelRegressor
from tests.ebf.hostile_corpus import MODEL_NAMES, data
from tests.ebf.test_shards import _pack_bytes, _rewrite, _table

#: The values forged into every float array and scalar: the finite extremes (issue 26:
#: leaf values of 1e160 to 1e308 loaded and predicted inf) and subnormals.
FORGED = (1e300, -1e300, 1e160, -1e160, 5e-324, -5e-324)




# ------------------------------------------------------------------------------ the forger


def _floats(obj: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """``(path, container, key)`` of every float array entry and JSON float of a manifest's
    state, in order (list indices in the path as ``[i]``)."""
    out = []
    items = obj.items() if isinstance(obj, dict) else enumerate(obj)
    for key, value in items:
        where = f"{path}[{key}]" if isinstance(obj, list) else f"{path}.{key}".lstrip(".")
        if isinstance(value, dict) and "__ndarray__" in value:
            if value["dtype"].startswith("float"):
                out.append((where, obj, key))
        elif isinstance(value, float) or (isinstance(value, dict) and "__float__" in value):
            out.append((where, obj, key))
        elif isinstance(value, (dict, list)):
            out.extend(_floats(value, where))
    return out


def _role(path: str) -> str:
    """The path with list indices generic: one tree (branch, island) stands for its kind."""
    return re.sub(r"\[\d+\]", "[*]", path)


def _name(path: str) -> str:
    """The array's own key: what a refusal must name (``branches[2].state.forest.value`` ->
    ``value``)."""
    return re.sub(r"\[\d+\]$", "", path.rsplit(".", 1)[-1])


class Forger:
    """A copy of a saved model (format 1) whose floats are forged one case at a time: the
    array file or the JSON scalar changed, its checksum and the model hash recomputed, then
    everything restored for the next case."""

    def __init__(self, src: Path, dst: Path) -> None:
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst)
        self.path = dst
        self.text = (dst / "manifest.json").read_text()
        roles: dict[str, str] = {}
        for path, _, _ in _floats(json.loads(self.text)["state"]):
            roles.setdefault(_role(path), path)
        self.paths = list(roles.values())

    def is_array(self, path: str) -> bool:
        _, container, key = next(f for f in _floats(json.loads(self.text)["state"])
                                 if f[0] == path)
        return isinstance(container[key], dict) and "__ndarray__" in container[key]

    def forge(self, path: str, value: float, mode: str) -> bool:
        """Put ``value`` into every element of the float at ``path`` (``mode="all"``), or
        ``value, -value, value, ...`` (``"alternate"``: a spread as wide as the value, where
        one extreme leaf among equal ones is what a mixture's variance overflows with); False
        if there is nothing to forge (an empty array)."""
        manifest = json.loads(self.text)
        _, container, key = next(f for f in _floats(manifest["state"]) if f[0] == path)
        entry = container[key]
        if isinstance(entry, dict) and "__ndarray__" in entry:
            file = self.path / entry["__ndarray__"]
            self._saved = (file, file.read_bytes())
            a = np.load(file, allow_pickle=False)
            if a.size == 0:
                return False
            flat = a.reshape(-1)
            with np.errstate(over="ignore"):  # 1e300 in a float32 array: inf, forged too
                flat[:] = value
                if mode == "alternate":
                    flat[1::2] = -value
            np.save(file, a, allow_pickle=False)
            digest = hashlib.sha256(file.read_bytes()).hexdigest()
            manifest["files"][entry["__ndarray__"]] = entry["sha256"] = digest
        else:
            self._saved = None
            container[key] = value
        manifest["model_hash"] = content_hash(manifest, HASHED)
        (self.path / "manifest.json").write_text(json.dumps(manifest))
        return True

    def restore(self) -> None:
        if self._saved is not None:
            self._saved[0].write_bytes(self._saved[1])
        (self.path / "manifest.json").write_text(self.text)


def _check_outcome(result: dict, model_dir: Path, path: str) -> str | None:
    """What is wrong with a case's outcome, or None: refused naming the file and the array,
    or loaded and every prediction finite."""
    if result["outcome"] == "ok":
        return None
    detail = result["detail"]
    name = _name(path)
    if (result["outcome"] == "refused" and "ModelFormatError" in detail
            and str(model_dir) in detail and (name in detail or name.strip("_") in detail)):
        return None
    return f"{result['outcome']}: {detail[:300]}"


# ------------------------------------------------------------------------------ the corpus


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_forged_floats_are_refused_naming_the_array_or_predict_finite_values(
        models, worker, tmp_path, name):
    """Every float of every stored role (an array, or a scalar in the manifest) set to each
    of :data:`FORGED`, everywhere or with alternating signs: the model is refused, the
    message naming the file and the array, or it loads and predicts finite values."""
    src, rows = models[name]
    forger = Forger(src, tmp_path / name)
    assert forger.paths, "every model stores floats"
    wrong = []
    for path in forger.paths:
        for value in FORGED:
            for mode in ("all", "alternate") if forger.is_array(path) else ("all",):
                if not forger.forge(path, value, mode):
                    continue
                result = worker.run(f"{name} {path} = {value} ({mode})", forger.path, rows)
                forger.restore()
                problem = _check_outcome(result, forger.path, path)
                if problem:
                    wrong.append(f"{path} = {value} ({mode}): {problem}")
    assert not wrong, f"{name}: {len(wrong)} case(s):\n" + "\n".join(wrong[:20])


def _alternate(a: np.ndarray, top: Any) -> np.ndarray:
    """``+top, -top, +top, ...`` in the shape of ``a``."""
    signs = np.where(np.arange(a.size) % 2 == 0, 1.0, -1.0).reshape(a.shape)
    return signs * top


def _sums_at_bounds(stats: np.ndarray, counts: np.ndarray) -> np.ndarray:
    out = stats.copy()
    out[:, -2] = _alternate(counts, counts * MAX_ABS_LOCATION)
    out[:, -1] = counts * MAX_VARIANCE
    return out


def _compact_rows(tree: dict, n_points: int) -> np.ndarray:
    rows = np.full(tree["feature"].shape[0], float(n_points))
    rows[tree["feature"] < 0] = tree["counts"]
    return rows


#: For a model of every regressor kind, how to put its stored floats at their bounds (the
#: locations at ±MAX_ABS_LOCATION, alternating; the variances at MAX_VARIANCE; per-node sums
#: at their count times those): such a model loads, and predicts finite values.
AT_BOUNDS: dict[str, Callable[[dict], None]] = {
    "bf_reg": lambda s: s.update(
        var_floor=MAX_VARIANCE, leaf_noise_var=MAX_VARIANCE,
        forest={**s["forest"], "value": _alternate(s["forest"]["value"], MAX_ABS_LOCATION),
                "variance": np.full_like(s["forest"]["variance"], MAX_VARIANCE)}),
    "constant": lambda s: s.update(value=np.array([MAX_ABS_LOCATION, MAX_VARIANCE])),
    "mf_reg": lambda s: s.update(
        _y=_alternate(s["_y"], MAX_ABS_LOCATION),
        trees_=[{**t, "stats": _sums_at_bounds(t["stats"], t["stats"][:, 0])}
                for t in s["trees_"]]),
    "mf_reg_compact": lambda s: s.update(trees_=[
        {**t, "sums": _sums_at_bounds(t["sums"], _compact_rows(t, s["n_samples_seen_"]))}
        for t in s["trees_"]]),
    "smc_reg": lambda s: s.update(
        noise_variance=MAX_VARIANCE, leaf_prior_var=MAX_VARIANCE,
        leaf_prior_mean=-MAX_ABS_LOCATION,
        trees={**s["trees"], "stats": _sums_at_bounds(s["trees"]["stats"],
                                                      s["trees"]["stats"][:, 0])}),
    "bart_reg": lambda s: s.update(
        y_center=MAX_ABS_LOCATION, y_scale=MAX_ABS_LOCATION, var_floor=MAX_VARIANCE,
        sigma2_trace=np.full_like(s["sigma2_trace"], MAX_VARIANCE),
        draws={**s["draws"], "value": _alternate(s["draws"]["value"], 1.0),
               "sigma2": np.ones_like(s["draws"]["sigma2"])}),
    "mk_reg": lambda s: s.update(
        coef_=_alternate(s["coef_"], MAX_ABS_LOCATION), Y=_alternate(s["Y"], MAX_ABS_LOCATION),
        intercept_=np.array([MAX_ABS_LOCATION]),
        noise_variance_=np.array([0.05 * MAX_VARIANCE])),  # noise / alpha (0.1) below it
}


@pytest.mark.parametrize("name", sorted(AT_BOUNDS))
def test_models_at_the_bounds_load_and_predict_finite_values(models, worker, tmp_path, name):
    """The bounds are not too wide: every float at its bound at once still predicts finite
    means, standard deviations, quantiles and log-densities (squares, mixtures' second
    moments and sums of squares over every row stay below float64's overflow)."""
    d = estimator_state(load(models[name][0]))
    AT_BOUNDS[name](d["state"])
    path = save_v2(estimator_from_state(d), tmp_path / name, format_version=1)
    result = worker.run(f"{name} at the bounds", path, models[name][1])
    assert result["outcome"] == "ok", result


# ------------------------------------------------------------------------------ fits at the bound


FITS = {
    "bf": lambda: BayesianForestRegressor(n_estimators=4, random_state=0),
    "bf_leaf_prior": lambda: BayesianForestRegressor(n_estimators=4, leaf_prior_rows=10,
                                                     random_state=0),
    "ebf_mondrian": lambda: EmpiricalBayesianForestRegressor(
        n_estimators=2, trunk_max_leaves=3, branch="mondrian", random_state=0),
    "ssf": lambda: SubsampleForestRegressor(n_estimators=2, n_subsamples=2, random_state=0),
    "mf_estimated": lambda: MondrianForestRegressor(n_estimators=3, noise="estimated",
                                                    random_state=0),
    "smc": lambda: SMCTreeRegressor(n_particles=5, n_islands=2, random_state=0),
    "smc_shared": lambda: SMCTreeRegressor(n_particles=5, n_islands=2, noise="shared",
                                           random_state=0),
    "bart": lambda: BARTRegressor(n_trees=4, n_iter=12, burn_in=4, random_state=0),
    "mk": lambda: MondrianKernelRegressor(n_mondrians=3, n_widths=4, max_features=40,
                                          random_state=0),
}


@pytest.mark.parametrize("sign", [1.0, -1.0])
@pytest.mark.parametrize("name", sorted(FITS))
def test_fits_on_targets_at_the_target_bound_load(tmp_path, name, sign):
    """The bounds are not too narrow: a model fit on targets reaching ``±MAX_ABS_TARGET``
    (the largest a fit accepts), recalibrated and adaptively updated with the largest step
    (levels outside [0, 1]), then compacted where it can be, saves and loads, and
    predicts finite values."""
    X, y, _ = data(200, seed=3)
    y = sign * MAX_ABS_TARGET * (y - y.min()) / np.ptp(y)  # spans [0, ±1e100]
    model = FITS[name]().fit(X[:150], y[:150])
    if hasattr(model, "recalibrate") and name != "mk":
        model.recalibrate(X[100:], y[100:]).update_recalibration(X[150:], y[150:],
                                                                 step=MAX_ACI_STEP)
    if hasattr(model, "compact"):
        model = model.compact()
    back = load(save_v2(model, tmp_path / name))
    mean, std = back.predict(X[150:], return_std=True)
    assert np.isfinite(mean).all() and np.isfinite(std).all() and (std > 0).all()
    assert np.isfinite(back.predict_distribution(X[150:]).quantile([0.05, 0.95])).all()
    assert np.abs(mean).max() <= 2 * MAX_ABS_TARGET


# ------------------------------------------------------------------------------ targeted checks


def test_check_range_names_the_array_the_count_the_first_value_and_the_bound():
    with pytest.raises(ValueError, match=r"^forest.value holds 2 value\(s\) outside "
                                         r"MAX_ABS_LOCATION: 1e\+160 at index 1 is not in "
                                         r"\[-1e\+110, 1e\+110\]$"):
        check_range("forest.value", np.array([0.0, 1e160, np.nan]), -MAX_ABS_LOCATION,
                    MAX_ABS_LOCATION, "MAX_ABS_LOCATION")
    with pytest.raises(ValueError, match=r"stats \(sums\) holds 1 value\(s\) outside count \* "
                                         r"MAX_ABS_LOCATION: 3e\+110 at index 1 is not in "
                                         r"\[-2e\+110, 2e\+110\]"):
        check_sums("stats", np.array([[1.0, 1.0], [3e110, 1.0]]), np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match=r"stats \(sums of squares\) .* -1.0 at index 0"):
        check_sums("stats", np.array([[1.0, -1.0]]), np.array([1.0]))
    with pytest.raises(ValueError, match=r"counts holds 1 count\(s\) that are not whole "
                                         r"numbers: 5e-324 at index \(0, 1\)"):
        check_counts("counts", np.array([[1.0, 5e-324]]))
    with pytest.raises(ValueError, match=r"v must be a float in \(0, 1e\+220\] \(MAX_VARIANCE\), "
                                         r"got 0.0"):
        state_float({"v": 0.0}, "v", float(np.nextafter(0, 1)), MAX_VARIANCE, "MAX_VARIANCE")


def test_recalibration_levels_beyond_the_reach_of_updates_are_refused():
    """Fits put the levels in [0, 1], adaptive updates within ``[-step, 1 + step]``
    (Gibbs & Candes 2021, Prop. 4.1) with ``step <= MAX_ACI_STEP``: beyond, a forgery."""
    nominal = np.linspace(0.0, 1.0, 5)
    PITMap(nominal, [0.0, -MAX_ACI_STEP, 0.5, 1.0 + MAX_ACI_STEP, 1.0])
    for bad in (-MAX_ACI_STEP - 0.01, 1.0 + MAX_ACI_STEP + 0.01):
        with pytest.raises(ValueError, match=r"levels holds 1 value\(s\) outside the reach of "
                                             r"fits and adaptive updates"):
            PITMap(nominal, [0.0, 0.25, bad, 0.75, 1.0])
    with pytest.raises(ValueError, match=r"step must be in \(0, 1\]"):
        PITMap.identity().updated([0.5], step=MAX_ACI_STEP * 1.5)


@pytest.fixture(scope="module")
def kernel_state(models) -> dict:
    return estimator_state(load(models["mk_reg"][0]))


@pytest.mark.parametrize("edit, match", [
    (lambda G: G.__setitem__((0, 1), G[0, 1] + 1.0), r"G_inv is not symmetric"),
    (lambda G: G.__setitem__((0, 0), 20.0), r"G_inv \(diagonal\) holds 1 value\(s\) outside "
                                            r"\(0, 1 / alpha\]: 20.0 at index 0"),
    (lambda G: G.__imul__(-1.0), r"G_inv \(diagonal\) holds \d+ value\(s\) outside"),
    (lambda G: (G.__setitem__((0, 1), 50.0), G.__setitem__((1, 0), 50.0)),
     r"G_inv is not positive definite"),
])
def test_kernel_ridge_inverse_must_be_one_a_ridge_produces(kernel_state, edit, match):
    """``G_inv = (Z'Z + alpha I)^-1``: symmetric positive definite, diagonal in
    ``(0, 1 / alpha]``; else a predictive variance could be negative or inf."""
    d = copy.deepcopy(kernel_state)
    edit(d["state"]["G_inv"])
    with pytest.raises(ModelFormatError, match=match):
        estimator_from_state(d)


def test_noise_over_alpha_is_a_variance(kernel_state):
    d = copy.deepcopy(kernel_state)
    d["params"]["alpha"] = 1e-300  # a valid parameter; the stored noise then is not
    with pytest.raises(ModelFormatError, match=r"noise_variance_ / alpha holds 1 value"):
        estimator_from_state(d)


def test_forged_sums_in_one_shard_are_refused_by_load_part(tmp_path):
    """Format 2: a branch loaded alone from its shard meets the same bounds, the message
    naming the model file, the branch and the array."""
    X, y, _ = data(300, seed=1)
    model = EmpiricalBayesianForestRegressor(n_estimators=2, trunk_max_leaves=2,
                                             branch="mondrian", random_state=0).fit(X, y)
    path = save_v2(model, tmp_path / "m")
    info, arrays = _table(path, "shards/00001.pack")
    stats = info["state"]["state"]["trees_"][0]["stats"]["__ndarray__"]
    arrays[stats] = arrays[stats].copy()
    arrays[stats][0, 1] = 1e160
    _rewrite(path, "shards/00001.pack", _pack_bytes(info["state"], arrays))
    reader = open_model(path)
    reader.load_part(0)
    pattern = (rf"{re.escape(str(path))}.*branches\[1\] \(mondrian.MondrianForestRegressor\)"
               r".*trees_\[0\]: stats \(sums\) holds 1 value\(s\) outside count \* "
               r"MAX_ABS_LOCATION: 1e\+160 at index 0")
    with pytest.raises(ModelFormatError, match=pattern):
        reader.load_part(1)
    with pytest.raises(ModelFormatError, match=pattern):
        load(path)
