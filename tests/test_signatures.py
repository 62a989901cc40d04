"""The public estimators' signatures: keyword-only parameters, as in scikit-learn, and
every default read from its one definition (the learner records, ``ebf.config``,
``basics.levels``)."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest
from sklearn.base import BaseEstimator

import ebf
import mondrian
from basics.levels import DEFAULT_QUANTILES
from basics.mixture import summarize
from basics.predictive import PredictiveRegressorMixin
from ebf.config import MAX_BINS, MIN_SAMPLES_LEAF
from ebf.learners import DEFAULT_BRANCH, LEARNERS, get_learner, mondrian_min_samples_split
from pipelines.cli import build_parser
from pipelines.sizing import plan_model_size, sized_by_rows

_SUFFIXES = ("Regressor", "Classifier", "Features")


def _public_estimators() -> list[type]:
    """Every public class of ``ebf`` and ``mondrian`` (any module, ``ebf.dask`` included)
    that subclasses scikit-learn's ``BaseEstimator`` or is named like an estimator."""
    found: dict[str, type] = {}
    for package in (ebf, mondrian):
        names = [package.__name__] + [m.name for m in pkgutil.walk_packages(
            package.__path__, package.__name__ + ".")]
        for name in names:
            module = importlib.import_module(name)
            for attr, obj in vars(module).items():
                if (inspect.isclass(obj) and not attr.startswith("_")
                        and obj.__module__.split(".")[0] in ("ebf", "mondrian")
                        and (issubclass(obj, BaseEstimator) or attr.endswith(_SUFFIXES))):
                    found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return [found[k] for k in sorted(found)]


ESTIMATORS = _public_estimators()
_IDS = [cls.__name__ for cls in ESTIMATORS]


def test_the_discovery_finds_every_family():
    names = set(_IDS)
    assert {"EmpiricalBayesianForestRegressor", "DaskSubsampleForestClassifier",
            "BayesianForestClassifier", "BARTRegressor", "SMCTreeClassifier", "Trunk",
            "MondrianForestRegressor", "MondrianKernelFeatures", "MondrianKernelClassifier",
            "LaplaceRandomFeatures"} <= names
    assert len(ESTIMATORS) >= 20


@pytest.mark.parametrize("cls", ESTIMATORS, ids=_IDS)
def test_init_parameters_are_keyword_only(cls):
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    positional = [p.name for p in params if p.kind is not p.KEYWORD_ONLY]
    assert positional == [], f"{cls.__name__}.__init__ takes {positional} positionally"
    if params:
        with pytest.raises(TypeError, match="positional argument"):
            cls(1)


@pytest.mark.parametrize("cls", ESTIMATORS, ids=_IDS)
def test_fit_and_predict_take_only_x_and_y_positionally(cls):
    for method in ("fit", "partial_fit", "predict", "predict_proba"):
        fn = getattr(cls, method, None)
        if fn is None:
            continue
        params = list(inspect.signature(fn).parameters.values())[1:]
        positional = [p.name for p in params
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        assert positional in (["X"], ["X", "y"]), (cls.__name__, method, positional)
        weight = [p for p in params if p.name == "sample_weight"]
        assert all(p.kind is p.KEYWORD_ONLY for p in weight), (cls.__name__, method)


def _default(cls: type, name: str):
    return inspect.signature(cls).parameters[name].default


def test_the_leaf_size_defaults_are_the_learner_records():
    takers = [cls for cls in ESTIMATORS if "min_samples_leaf" in
              inspect.signature(cls).parameters and cls.__module__.startswith("ebf")]
    assert len(takers) >= 10  # EBF, SSF (local and Dask), the Bayesian forests
    for cls in takers:
        assert _default(cls, "min_samples_leaf") == MIN_SAMPLES_LEAF, cls.__name__
    for learner in LEARNERS.values():
        assert learner.default_min_samples_leaf == MIN_SAMPLES_LEAF, learner.name
        # a budget sizes exactly the learners whose model grows with the rows, through a
        # parameter the learner takes
        assert (learner.sized_leaf is None) == (learner.model_bytes is None), learner.name
        if learner.sized_leaf == "min_samples_split":
            assert "min_samples_split" in learner.accepted_params()
            assert learner.default_min_samples_split is not None
    mondrian_rec = get_learner("mondrian")
    assert mondrian_rec.default_min_samples_split == mondrian_min_samples_split(
        MIN_SAMPLES_LEAF) == _default(mondrian.MondrianForestRegressor, "min_samples_split")


def test_bins_and_quantiles_come_from_their_constants():
    for cls in ESTIMATORS:
        params = inspect.signature(cls).parameters
        for name in ("trunk_max_bins", "max_bins"):
            if name in params and isinstance(params[name].default, int):
                assert params[name].default == MAX_BINS, (cls.__name__, name)
    from ebf.dask import DaskEmpiricalBayesianForestRegressor
    from ebf.dask._predict import predict_frame

    for fn, name in ((PredictiveRegressorMixin.predict_quantiles, "q"),
                     (PredictiveRegressorMixin.predict_summary, "quantiles"),
                     (PredictiveRegressorMixin.summarize_mixture, "quantiles"),
                     (summarize, "levels"), (predict_frame, "quantiles"),
                     (DaskEmpiricalBayesianForestRegressor.predict_frame, "quantiles")):
        assert inspect.signature(fn).parameters[name].default is DEFAULT_QUANTILES
    args = build_parser().parse_args(["predict", "m", "d", "--out", "p"])
    assert tuple(args.quantiles) == DEFAULT_QUANTILES


def _literal_branch_defaults(path: Path) -> list[str]:
    """Where ``path`` writes a branch learner's name as a default: a parameter or a field
    named ``branch`` with a string literal, or ``add_argument("--branch", default="...")``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        pairs = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            positional = a.posonlyargs + a.args
            pairs += list(zip(positional[len(positional) - len(a.defaults):], a.defaults,
                              strict=True))
            pairs += [(arg, d) for arg, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)
                      if d is not None]
            pairs = [(arg.arg, d) for arg, d in pairs]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            pairs = [(node.target.id, node.value)]
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and node.args[0].value == "--branch"):
            pairs = [("branch", kw.value) for kw in node.keywords if kw.arg == "default"]
        found += [f"{path}:{d.lineno}" for name, d in pairs
                  if name == "branch" and isinstance(d, ast.Constant) and isinstance(d.value, str)]
    return found


def test_the_default_branch_learner_is_written_once():
    """The local and Dask estimators, the training options, ``ebf train``, ``ebf retrain``
    and ``ebf demo`` all default to :data:`ebf.learners.DEFAULT_BRANCH`, and no module of
    ``ebf`` or ``pipelines`` writes a learner's name as a ``branch`` default itself."""
    from pipelines.demo import DemoResult, run_demo
    from pipelines.options import TrainOptions

    assert DEFAULT_BRANCH in LEARNERS
    takers = [cls for cls in ESTIMATORS if "branch" in inspect.signature(cls).parameters]
    names = {cls.__name__ for cls in takers}
    assert {f"{dask}{kind}Forest{task}" for dask in ("", "Dask")
            for kind in ("EmpiricalBayesian", "Subsample")
            for task in ("Regressor", "Classifier")} <= names
    for cls in takers:
        assert _default(cls, "branch") is DEFAULT_BRANCH, cls.__name__
    assert TrainOptions().branch is DEFAULT_BRANCH
    parser = build_parser()
    assert parser.parse_args(["train", "d", "--target", "y", "--out", "m"]).branch \
        is DEFAULT_BRANCH
    assert parser.parse_args(["retrain", "reg", "d"]).branch is DEFAULT_BRANCH
    assert inspect.signature(run_demo).parameters["branch"].default is DEFAULT_BRANCH
    assert inspect.signature(DemoResult).parameters["branch"].default is DEFAULT_BRANCH
    root = Path(__file__).resolve().parents[1]
    written = [hit for package in ("ebf", "pipelines")
               for path in sorted((root / package).rglob("*.py"))
               for hit in _literal_branch_defaults(path)]
    assert written == [], f"branch defaults written outside ebf.learners: {written}"


#: Plans of ``plan_model_size`` before the learner records held the leaf-size defaults
#: (``(n_estimators, min_samples_split, min_samples_leaf, model bytes)``, or None when no
#: setting fits): the records give the same plans.
_PLANS = {
    (10**10, 10**5, None, False): {"cart": (100, None, 5, 210000000),
                                   "mondrian": (10, 10, None, 113600000)},
    (10**8, 10**6, None, True): {"cart": (100, None, 105, 100000000),
                                 "mondrian": (3, 10, None, 79200000)},
    (10**8, 10**6, None, False): {"cart": (100, None, 105, 100000000), "mondrian": None},
    (10**7, 10**6, None, True): {"cart": (100, None, 1050, 10000000),
                                 "mondrian": (1, 27, None, 9777778)},
    (10**8, 10**6, 10, True): {"cart": (10, None, 11, 95454545),
                               "mondrian": (10, 27, None, 97777778)},
    (2 * 10**9, 10**7, None, False): {"cart": (100, None, 53, 1981132075),
                                      "mondrian": (1, 10, None, 2000000000)},
}


@pytest.mark.parametrize("case", list(_PLANS), ids=str)
def test_sizing_plans_follow_the_records_unchanged(case):
    budget, n_rows, n_estimators, compact = case
    assert sized_by_rows() == ["bayesian", "random", "mondrian"]
    for branch in sized_by_rows():
        want = _PLANS[case]["mondrian" if branch == "mondrian" else "cart"]
        if want is None:
            with pytest.raises(ValueError, match="data buffer alone"):
                plan_model_size(budget, n_rows, 10, branch, n_estimators=n_estimators,
                                compact=compact)
            continue
        plan = plan_model_size(budget, n_rows, 10, branch, n_estimators=n_estimators,
                               compact=compact)
        got = (plan.n_estimators, plan.min_samples_split, plan.min_samples_leaf,
               round(plan.model_bytes))
        assert got == want, (branch, got)
        assert plan.model_bytes <= budget
