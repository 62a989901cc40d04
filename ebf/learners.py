"""The branch learners: one record per learner, in one table (:data:`LEARNERS`).

Taddy et al. (2015), Sec. 4: "sample a BF ensemble of branches at each terminal node of this
trunk"; each branch is fit without communication with the others, so it only needs its own
rows and a seed derived from ``(random_state, branch id)``. Every fact about a learner lives
in its :class:`BranchLearner` record: how one branch is fit, its estimator class per task,
its default trees and leaf sizes, whether it is extended online, its memory estimates and
how a model budget sizes it, the ``branch_params`` it accepts and its one-line help. The
estimators (``ebf``, ``ebf.dask``), model sizing and the ``ebf`` command line all read this
table; adding a learner is adding one record.

Fitting one returns an estimator that offers ``predict_distribution(X)`` (regression) or
``predict_proba(X)`` with one column per class of the *whole* training set
(classification), and the persistence methods ``_get_state`` / ``_set_state``:

``"bayesian"``
    :class:`~ebf._forests.BayesianForestRegressor` / ``...Classifier`` with Exp(1) weights
    (the paper's BF, Algorithm 1): histogram CART trees over the branch's own bins;
    ``branch_params`` may set ``splitter="exact"`` (scikit-learn's CART), ``max_bins`` or
    ``leaf_prior_rows`` (regression: the leaf-noise prior, centred on pooled within-leaf
    variances of the branch's own trees, its strength learnt per branch by default, so
    every trunk leaf has its own).
``"random"``
    the same with Poisson(1) weights (Breiman's random forest).
``"mondrian"``
    :class:`mondrian.MondrianForestRegressor` / ``...Classifier`` (Lakshminarayanan, Roy &
    Teh, 2016). ``min_samples_split`` is ``2 * min_samples_leaf``
    (:func:`mondrian_min_samples_split`: the default leaf size gives the Mondrian paper's
    10); ``branch_params`` may set ``min_samples_split``, ``lifetime``, ``posterior``, ...
``"smc"``
    :class:`~ebf.bayestrees.SMCTreeRegressor` / ``...Classifier``: a posterior over single
    Bayesian decision trees by sequential Monte Carlo (Lakshminarayanan, thesis Ch. 3),
    ``n_estimators`` particles per island; ``branch_params`` may set ``n_islands``,
    ``proposal``, ``alpha_s``, ...
``"bart"``
    :class:`~ebf.bayestrees.BARTRegressor` (regression only): BART sampled by particle Gibbs
    (thesis Ch. 4) with ``n_estimators`` trees; ``branch_params`` may set ``n_iter``,
    ``burn_in``, ``sampler``, ...

The accepted ``branch_params`` of a learner are the parameters of its estimator class
(``inspect.signature``) minus those the ensemble sets itself (trees, seeds, threads, and for
CART branches the leaf and feature options it passes); anything else is refused before any
work. The Bayesian-tree learners (``"mondrian"``, ``"smc"``, ``"bart"``) have no weighted
likelihood: they refuse unequal sample weights.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from basics.tasks import CLASSIFICATION, REGRESSION
from basics.threads import n_threads
from mondrian import MondrianForestClassifier, MondrianForestRegressor

from ._forests import BayesianForestClassifier, BayesianForestRegressor
from .bayestrees import BARTRegressor, SMCTreeClassifier, SMCTreeRegressor
from .bootstrap import branch_seed
from .config import MIN_SAMPLES_LEAF

if TYPE_CHECKING:
    from .branches import BranchSpec

__all__ = [
    "DEFAULT_BRANCH",
    "LEARNERS",
    "BranchLearner",
    "check_branch_task",
    "get_learner",
    "learner_names",
    "mondrian_min_samples_split",
    "mondrian_model_terms",
    "online_learners",
]

#: Bytes per tree node while a forest is built and kept (scikit-learn's node struct and
#: value, and the flat arrays it is copied into); Mondrian nodes add a bounding box of
#: ``2 * n_features`` float64 values.
NODE_BYTES = 160
#: Working bytes per row and tree of the Bayesian-tree learners (peak RSS of fits on 20k and
#: 80k rows, rounded up): an SMC particle holds a row permutation and its node arrays
#: (~10-12 bytes per row), a BART tree its row partition (~5) and every row's leaf (4, int32:
#: the chain forms a tree's residual from it); their trees are not bounded by
#: ``min_samples_leaf``, so the per-node estimate does not apply.
SMC_ROW_BYTES, BART_ROW_BYTES = 12.0, 12.0
#: Saved bytes per training row per tree of a CART forest with leaves of
#: :data:`CART_MEASURED_LEAF` rows (measured with the histogram trees at 1M rows: 0.32 nodes
#: per row of 64 bytes, whatever the number of features), in inverse proportion to
#: ``min_samples_leaf``.
CART_BYTES_PER_ROW_PER_TREE = 21.0
#: The leaf size of that measurement (the default leaf size then; a measured fact, so it
#: stays if the default changes).
CART_MEASURED_LEAF = 5


@dataclass(frozen=True)
class BranchLearner:
    """Everything ebf knows about one branch learner.

    Attributes
    ----------
    name : str
        The ``branch=`` value (``ebf train --branch``).
    help : str
        One line for the command line's ``--branch`` help.
    fit : callable
        ``fit(spec, X, y, sample_weight, entropy, branch)``: one fitted branch.
    classes : mapping of str to type
        The estimator class of a fitted branch, by task (``"bart"`` has no classifier).
    default_trees : int
        Trees (SMC: particles per island) per branch when ``n_estimators`` is not given,
        in the library and on the command line alike.
    online : bool
        Whether ``partial_fit`` extends a branch online (else it is refit from its rows).
    set_by_ensemble : frozenset of str
        Parameters of the estimator classes that the ensemble sets itself: not accepted in
        ``branch_params``.
    working_bytes : callable
        ``working_bytes(spec, n_features)``: memory per row and tree while a branch is fit
        (``ebf.dask`` turns ``branch_memory`` into rows per branch with it).
    model_bytes : callable or None
        ``model_bytes(n_features, compact=, min_samples_split=, n_trees=,
        min_samples_leaf=)``: saved bytes per training row per tree; None when the model
        grows with its particles or kept draws rather than its rows.
    missing_values : bool
        Whether its branches learn where missing values (NaN) go; an ensemble of the
        others refuses them in ``X``.
    default_min_samples_leaf : int
        The ensemble's ``min_samples_leaf`` by default (:data:`ebf.config.MIN_SAMPLES_LEAF`,
        the estimators' signature default): rows per leaf of CART branch trees; a branch
        with fewer than twice as many rows is a constant.
    default_min_samples_split : int or None
        The ``min_samples_split`` its branches get by default (Mondrian:
        :func:`mondrian_min_samples_split` of the default leaf size); None when its trees
        take no such parameter.
    sized_leaf : {"min_samples_leaf", "min_samples_split"} or None
        The leaf-size parameter a model budget raises (``ebf train --model-memory``): the
        saved bytes per row (``model_bytes``) fall as it grows. ``"min_samples_leaf"`` is
        the ensemble's own parameter, ``"min_samples_split"`` a ``branch_params`` entry.
        None for the learners not sized by rows.
    budget_trims_trees : bool
        Whether a model budget may give it fewer than ``default_trees`` trees before it
        raises the leaf size (Mondrian: yes; a Bayesian forest's posterior needs its
        draws, so only the leaf size gives).
    exchangeable_trees : bool
        Whether a branch's predictive is an equal mixture of independently grown trees, so
        that ``calibrate="auto"`` may cross-fit smaller groups of them
        (:func:`basics.calibration.group_trees`); BART's sum of trees and SMC's particles
        are cross-fitted whole.
    sequential_fit : bool
        Whether a branch's fit runs in one thread whatever ``n_jobs`` (BART's chain is
        sequential): an ensemble in one process then fits up to ``n_jobs`` branches at once
        (each has its own seed, so the model is the same). The others spend ``n_jobs`` on
        the trees (or islands) of one branch at a time.
    """

    name: str
    help: str
    fit: Callable
    classes: Mapping[str, type]
    default_trees: int
    online: bool
    set_by_ensemble: frozenset
    working_bytes: Callable
    model_bytes: Callable | None = None
    missing_values: bool = False
    default_min_samples_leaf: int = MIN_SAMPLES_LEAF
    default_min_samples_split: int | None = None
    sized_leaf: str | None = None
    budget_trims_trees: bool = False
    exchangeable_trees: bool = True
    sequential_fit: bool = False

    def accepted_params(self, task: str | None = None) -> list[str]:
        """The ``branch_params`` names this learner takes for ``task`` (None: any task)."""
        tasks = self.classes.values() if task is None else [self.classes[task]]
        names = {p for cls in tasks for p in inspect.signature(cls).parameters}
        return sorted(names - self.set_by_ensemble)

    def check_params(self, params: Mapping[str, Any] | None, task: str | None = None) -> None:
        """Raise ``ValueError`` before any work if ``params`` holds a name this learner does
        not take (for ``task``; None: for any task), naming the learner and what it takes."""
        accepted = self.accepted_params(task if task in self.classes else None)
        unknown = sorted(set(params or {}) - set(accepted))
        if unknown:
            what = f"branch={self.name!r}" + (f" ({task})" if task in self.classes else "")
            raise ValueError(
                f"branch_params {unknown} are not options of {what}; it accepts {accepted}. "
                "Drop them, or choose a branch learner that takes them.")


def _cart(weights: str) -> Callable:
    def fit(spec: BranchSpec, X, y, sample_weight, entropy: int, branch: int):
        cls = BayesianForestRegressor if spec.task == REGRESSION else BayesianForestClassifier
        est = cls(n_estimators=spec.n_estimators, weights=weights,
                  min_samples_leaf=spec.min_samples_leaf, max_features=spec.max_features,
                  max_depth=spec.max_depth, random_state=entropy, n_jobs=spec.n_jobs,
                  **spec.params)
        if spec.task == CLASSIFICATION:
            return est._fit_branch(X, y, sample_weight, entropy=entropy, branch=branch,
                                   n_classes=spec.n_classes)
        return est._fit_branch(X, y, sample_weight, entropy=entropy, branch=branch,
                               keep_leaf_stats=spec.calibration_group)

    return fit


def _check_unweighted(learner: str, sample_weight: np.ndarray | None) -> None:
    if sample_weight is not None and not np.all(sample_weight == sample_weight[0]):
        raise ValueError(
            f"branch={learner!r} does not support unequal sample weights (its trees have no "
            "weighted likelihood); use branch='bayesian' or drop sample_weight."
        )


def mondrian_min_samples_split(min_samples_leaf: int) -> int:
    """``min_samples_split`` of Mondrian branches for the ensemble's ``min_samples_leaf``:
    twice it (at least 2), so that a split may leave about that many rows on each side.

    Examples
    --------
    >>> mondrian_min_samples_split(5)
    10
    """
    return max(2, 2 * int(min_samples_leaf))


def _mondrian(spec: BranchSpec, X, y, sample_weight, entropy: int, branch: int):
    _check_unweighted(spec.learner, sample_weight)
    params = dict(n_estimators=spec.n_estimators,
                  min_samples_split=mondrian_min_samples_split(spec.min_samples_leaf),
                  random_state=branch_seed(entropy, branch), n_jobs=spec.n_jobs)
    params.update(spec.params)
    if spec.task == REGRESSION:  # the ensemble calibrates itself, not its branches
        return MondrianForestRegressor(**params, calibrate="none").fit(X, y)
    # partial_fit on an empty forest is the batch fit; ``classes`` fixes full-width output
    return MondrianForestClassifier(**params, calibrate="none").partial_fit(
        X, y, classes=np.arange(spec.n_classes))


def _smc(spec: BranchSpec, X, y, sample_weight, entropy: int, branch: int):
    cls = SMCTreeRegressor if spec.task == REGRESSION else SMCTreeClassifier
    est = cls(n_particles=spec.n_estimators, n_jobs=spec.n_jobs, **spec.params)
    n_classes = spec.n_classes if spec.task == CLASSIFICATION else None
    # islands are seeded by (entropy, branch, island); rows of weight 0 are dropped there
    # and unequal positive weights refused
    return est._fit_branch(X, y, sample_weight, entropy=entropy, branch=branch,
                           n_classes=n_classes)


def _bart(spec: BranchSpec, X, y, sample_weight, entropy: int, branch: int):
    return BARTRegressor(n_trees=spec.n_estimators, random_state=branch_seed(entropy, branch),
                         n_jobs=spec.n_jobs, **spec.params).fit(X, y, sample_weight=sample_weight)


def _node_working_bytes(spec: BranchSpec, n_features: int) -> float:
    """A tree whose leaves hold ``min_samples_leaf`` rows has at most ``2 / min_samples_leaf``
    nodes per row, of :data:`NODE_BYTES` (plus the bounding box of a Mondrian node)."""
    node = NODE_BYTES + (16.0 * n_features if spec.learner == "mondrian" else 0.0)
    return 2.0 / max(1, int(spec.min_samples_leaf)) * node


def _smc_working_bytes(spec: BranchSpec, n_features: int) -> float:
    """Islands of ``n_estimators`` particles, on ``n_jobs`` threads at once."""
    islands = int(spec.params.get("n_islands", SMCTreeRegressor().n_islands))
    return SMC_ROW_BYTES * min(islands, n_threads(spec.n_jobs))


def _bart_working_bytes(spec: BranchSpec, n_features: int) -> float:
    return BART_ROW_BYTES


def _cart_model_bytes(n_features: int, *, compact: bool, min_samples_split: int | None,
                      n_trees: int, min_samples_leaf: int) -> float:
    """:data:`CART_BYTES_PER_ROW_PER_TREE`, scaled by ``CART_MEASURED_LEAF / leaf``."""
    return CART_BYTES_PER_ROW_PER_TREE * CART_MEASURED_LEAF / max(min_samples_leaf, 1)


def mondrian_model_terms(n_features: int, compact: bool, n_trees: int) -> tuple[float, float]:
    """``(bytes per node, bytes per row outside the nodes)`` of a saved Mondrian tree.

    A full tree stores ``80 + 16 D`` bytes per node plus 8 per row (its point lists), and
    the forest keeps its data buffer, ``8 (D + 2)`` bytes per row, shared by its trees; a
    compact tree (:meth:`mondrian.MondrianForestRegressor.compact`) stores about
    ``26 + 4 D`` per node.
    """
    if compact:
        return 26.0 + 4.0 * n_features, 0.0
    return 80.0 + 16.0 * n_features, 8.0 + 8.0 * (n_features + 2) / max(n_trees, 1)


def _mondrian_model_bytes(n_features: int, *, compact: bool, min_samples_split: int,
                          n_trees: int, min_samples_leaf: int) -> float:
    """About ``4 / min_samples_split`` nodes per training row (measured: 0.40 at the default
    10, 0.20 at 20, 0.10 at 40, for 5 to 20 features), of :func:`mondrian_model_terms`."""
    per_node, per_row = mondrian_model_terms(n_features, compact, n_trees)
    return min(2.0, 4.0 / max(min_samples_split, 2)) * per_node + per_row


_BOTH = (REGRESSION, CLASSIFICATION)
_FORESTS = dict(zip(_BOTH, (BayesianForestRegressor, BayesianForestClassifier), strict=True))
_CART_SET = frozenset({"n_estimators", "weights", "min_samples_leaf", "max_features",
                       "max_depth", "random_state", "n_jobs", "calibrate"})

#: Name -> :class:`BranchLearner`, in the order of the command line's choices. Default trees:
#: the Mondrian papers use 10 trees (Lakshminarayanan, Roy & Teh 2016, Sec. 7); a Bayesian
#: forest needs many more bootstrap draws for its posterior (Taddy et al. 2015 use 100);
#: SMC: particles per island (thesis Sec. 3.4); BART: Chipman et al. (2010) find 50 trees
#: close to 200 at a quarter the cost.
LEARNERS: dict[str, BranchLearner] = {learner.name: learner for learner in (
    BranchLearner("bayesian", "CART forests with Exp(1) bootstrap weights (the paper's "
                  "Bayesian forest)", _cart("exponential"), _FORESTS, 100, False, _CART_SET,
                  _node_working_bytes, _cart_model_bytes, missing_values=True,
                  sized_leaf="min_samples_leaf"),
    BranchLearner("random", "CART forests with Poisson(1) weights (Breiman's random forest)",
                  _cart("poisson"), _FORESTS, 100, False, _CART_SET, _node_working_bytes,
                  _cart_model_bytes, missing_values=True, sized_leaf="min_samples_leaf"),
    BranchLearner("mondrian", "Mondrian forests, extended online by partial_fit",
                  _mondrian, dict(zip(_BOTH, (MondrianForestRegressor,
                                              MondrianForestClassifier), strict=True)),
                  10, True, frozenset({"n_estimators", "random_state", "n_jobs", "calibrate"}),
                  _node_working_bytes, _mondrian_model_bytes,
                  default_min_samples_split=mondrian_min_samples_split(MIN_SAMPLES_LEAF),
                  sized_leaf="min_samples_split", budget_trims_trees=True),
    BranchLearner("smc", "Bayesian decision trees by sequential Monte Carlo (n_estimators "
                  "particles per island)", _smc,
                  dict(zip(_BOTH, (SMCTreeRegressor, SMCTreeClassifier), strict=True)),
                  100, False, frozenset({"n_particles", "random_state", "n_jobs"}),
                  _smc_working_bytes, exchangeable_trees=False),
    BranchLearner("bart", "BART by particle Gibbs (regression only)", _bart,
                  {REGRESSION: BARTRegressor}, 50, False,
                  frozenset({"n_trees", "random_state", "n_jobs"}), _bart_working_bytes,
                  exchangeable_trees=False, sequential_fit=True),
)}


#: The branch learner of every ensemble when ``branch`` is not given: the default of the
#: local and Dask estimators, :class:`pipelines.options.TrainOptions`, ``ebf train``,
#: ``ebf retrain`` and ``ebf demo``. Chosen by ``benchmarks/bench_default_learner.py``
#: (issue 42, each learner with its default trees, recalibrated on a 10% holdout): Mondrian
#: branches had 2.4x the RMSE on 100k and 1M Friedman rows (2.83 / 2.40 against 1.20 /
#: 1.08) and +20% on the shuffled flights; Poisson weights (``"random"``) tie at 1M rows and
#: trail by 1-3% in RMSE and calibrated CRPS on the smaller tasks, for ~0.65x the fit time.
DEFAULT_BRANCH = "bayesian"


def learner_names() -> list[str]:
    """The names of :data:`LEARNERS`, in table order."""
    return list(LEARNERS)


def get_learner(name: str) -> BranchLearner:
    """The record of branch learner ``name``; ``ValueError`` naming the choices otherwise.

    Examples
    --------
    >>> get_learner("mondrian").default_trees
    10
    """
    learner = LEARNERS.get(name) if isinstance(name, str) else None
    if learner is None:
        raise ValueError(f"Unknown branch learner {name!r}; choose one of {learner_names()}.")
    return learner


def online_learners() -> list[str]:
    """The learners whose branches ``partial_fit`` extends online."""
    return [name for name, learner in LEARNERS.items() if learner.online]


def check_branch_task(learner: str, task: str) -> None:
    """Raise ``ValueError`` before any work if branch learner ``learner`` cannot do ``task``
    (``"bart"`` is regression only: the BART of thesis Ch. 4 has Gaussian noise)."""
    if task not in get_learner(learner).classes:
        can = sorted(name for name, rec in LEARNERS.items() if task in rec.classes)
        raise ValueError(f"branch={learner!r} does not do {task}; choose one of {can}.")
