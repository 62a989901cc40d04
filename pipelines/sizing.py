"""Model size: default trees per branch learner, and a memory budget turned into parameters.

A saved model grows with (training rows) x (trees per branch) x (bytes per row per tree).
The bytes per row per tree of each branch learner are estimated here from its layout:

* Mondrian forests hold about ``4 / min_samples_split`` nodes per training row (measured:
  0.40 at the default 10, 0.20 at 20, 0.10 at 40, for 5 to 20 features). A full tree stores
  ``80 + 16 D`` bytes per node plus 8 per row (its point lists), and the forest keeps its
  data buffer, ``8 (D + 2)`` bytes per row, shared by its trees; a compact tree
  (:meth:`mondrian.MondrianForestRegressor.compact`) stores about ``26 + 4 D`` per node.
* Bayesian / random CART forests with the default leaves of 5 rows: about 21 bytes per row
  per tree, whatever the number of features (0.32 nodes per row of 64 bytes), and in
  inverse proportion to ``min_samples_leaf`` (measured with the histogram trees at 1M rows:
  0.32, 0.077 and 0.015 nodes per row at leaves of 5, 20 and 100 rows).

:func:`plan_model_size` picks the trees per branch, or the leaf size (``min_samples_split``
of Mondrian branches, ``min_samples_leaf`` of CART branches), so that the estimate fits a
budget (``ebf train --model-memory``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["DEFAULT_MODEL_MEMORY", "DEFAULT_TREES", "SizePlan", "bytes_per_row_per_tree",
           "default_model_memory", "default_trees", "plan_model_size"]

#: Trees per branch when none are asked for. The Mondrian papers use 10 trees
#: (Lakshminarayanan, Roy & Teh 2016, Sec. 7); a Bayesian forest needs many more bootstrap
#: draws for its posterior (Taddy et al. 2015 use 100). SMC: particles per island (thesis
#: Sec. 3.4); BART: trees, Chipman et al. (2010) find 50 close to 200 at a quarter the cost.
DEFAULT_TREES = {"mondrian": 10, "bayesian": 100, "random": 100, "smc": 100, "bart": 50}
#: Learners whose saved model grows with the training rows, which ``--model-memory`` sizes
#: (an SMC or BART model grows with its particles or kept draws instead).
SIZED_BY_ROWS = ("mondrian", "bayesian", "random")
#: The model budget of ``ebf train`` / ``ebf retrain`` when none is given, for the learners
#: sized by rows: the default 100 Bayesian trees with leaves of 5 rows take about 2 GB per
#: million rows, which the driver gathers, so without a budget 10M rows would not fit in
#: memory; with it they get larger leaves.
DEFAULT_MODEL_MEMORY = "2GB"
#: ``min_samples_split`` of Mondrian branches by default (the EBF's ``min_samples_leaf`` 5,
#: doubled) and per paper (Sec. 5: 10).
DEFAULT_MIN_SAMPLES_SPLIT = 10
CART_BYTES_PER_ROW_PER_TREE = 21.0
#: ``min_samples_leaf`` of CART branches by default (the estimators' default).
DEFAULT_MIN_SAMPLES_LEAF = 5


def default_trees(branch: str) -> int:
    """Trees per branch for ``branch`` when none are given."""
    return DEFAULT_TREES[branch]


def default_model_memory(branch: str, given: int | str | None) -> int | str | None:
    """The model budget of a CLI job: ``given``, else :data:`DEFAULT_MODEL_MEMORY` for the
    learners sized by rows (an SMC or BART model grows with its particles or draws).

    Examples
    --------
    >>> default_model_memory("bayesian", None), default_model_memory("smc", None)
    ('2GB', None)
    """
    if given is not None or branch not in SIZED_BY_ROWS:
        return given
    return DEFAULT_MODEL_MEMORY


def _mondrian_terms(n_features: int, compact: bool, n_trees: int) -> tuple[float, float]:
    """``(bytes per node, bytes per row outside the nodes)`` of a Mondrian tree."""
    if compact:
        return 26.0 + 4.0 * n_features, 0.0
    return 80.0 + 16.0 * n_features, 8.0 + 8.0 * (n_features + 2) / max(n_trees, 1)


def bytes_per_row_per_tree(branch: str, n_features: int, *, compact: bool = False,
                           min_samples_split: int = DEFAULT_MIN_SAMPLES_SPLIT,
                           n_trees: int = 10,
                           min_samples_leaf: int = DEFAULT_MIN_SAMPLES_LEAF) -> float:
    """Estimated model bytes per training row per tree.

    Parameters
    ----------
    branch : {"mondrian", "bayesian", "random"}
    n_features : int
    compact : bool, default=False
        Mondrian: the compact, predict-only form.
    min_samples_split : int, default=10
        Mondrian leaf size.
    n_trees : int, default=10
        Trees per branch (a full Mondrian forest shares its data buffer among them).
    min_samples_leaf : int, default=5
        CART leaf size.

    Returns
    -------
    float

    Examples
    --------
    >>> round(bytes_per_row_per_tree("mondrian", 10, compact=True))
    26
    """
    if branch != "mondrian":
        return CART_BYTES_PER_ROW_PER_TREE * DEFAULT_MIN_SAMPLES_LEAF / max(min_samples_leaf, 1)
    per_node, per_row = _mondrian_terms(n_features, compact, n_trees)
    nodes_per_row = min(2.0, 4.0 / max(min_samples_split, 2))
    return nodes_per_row * per_node + per_row


@dataclass(frozen=True)
class SizePlan:
    """What :func:`plan_model_size` chose, and why (``message``)."""

    n_estimators: int
    min_samples_split: int | None
    min_samples_leaf: int | None
    bytes_per_row_per_tree: float
    model_bytes: float
    message: str


def plan_model_size(budget: int, n_rows: int, n_features: int, branch: str, *,
                    n_estimators: int | None = None, compact: bool = False) -> SizePlan:
    """Trees per branch (or leaf size) for a model of at most ``budget`` bytes.

    Mondrian branches with ``n_estimators`` None: the default 10 trees, fewer if they do
    not fit, then larger leaves if one tree does not fit. Otherwise (trees given, or CART
    branches, whose default 100 bootstrap draws make the posterior): the leaf size that
    fits them (``min_samples_split`` of Mondrian branches, ``min_samples_leaf`` of CART
    branches).

    Raises
    ------
    ValueError
        If no setting fits, naming the budget, the rows and what one tree needs.

    Examples
    --------
    >>> plan = plan_model_size(2 * 10**9, 10**7, 10, "mondrian", compact=True)
    >>> plan.n_estimators, plan.min_samples_split
    (7, 10)
    >>> plan_model_size(2 * 10**9, 10**7, 10, "bayesian").min_samples_leaf
    53
    """
    if branch not in SIZED_BY_ROWS:
        raise ValueError(
            f"--model-memory sizes models that grow with the rows ({', '.join(SIZED_BY_ROWS)}); "
            f"a {branch} model grows with its {'particles' if branch == 'smc' else 'kept draws'} "
            "instead: drop --model-memory and set --n-estimators")
    mondrian = branch == "mondrian"
    mss = DEFAULT_MIN_SAMPLES_SPLIT if mondrian else None
    trees = n_estimators
    if trees is None and not mondrian:  # a Bayesian forest's posterior needs its draws
        trees = default_trees(branch)
    if trees is None:
        per_row = bytes_per_row_per_tree(branch, n_features, compact=compact, n_trees=1)
        fit = int(budget // (n_rows * per_row))
        trees = max(1, min(default_trees(branch), fit))
        for t in range(trees, 0, -1):  # the shared buffer of full Mondrian trees counts too
            if n_rows * t * bytes_per_row_per_tree(branch, n_features, compact=compact,
                                                   n_trees=t) <= budget:
                trees = t
                break
    per = bytes_per_row_per_tree(branch, n_features, compact=compact, n_trees=trees)
    leaf = None if mondrian else DEFAULT_MIN_SAMPLES_LEAF
    if n_rows * trees * per > budget:
        if not mondrian:  # bytes per row fall as 1 / leaf: the smallest leaf that fits
            leaf = math.ceil(DEFAULT_MIN_SAMPLES_LEAF * n_rows * trees * per / budget)
            if 2 * leaf > n_rows:
                raise ValueError(
                    f"a model of {trees} {branch} tree(s) per branch on {n_rows:,} rows needs "
                    f"about {n_rows * trees * per / 1e6:,.0f} MB with leaves of "
                    f"{DEFAULT_MIN_SAMPLES_LEAF} rows and cannot fit the --model-memory "
                    f"budget of {budget / 1e6:,.0f} MB even with one leaf per tree; raise the "
                    "budget or use fewer trees")
            per = bytes_per_row_per_tree(branch, n_features, min_samples_leaf=leaf)
        else:
            per_node, per_row = _mondrian_terms(n_features, compact, trees)
            room = budget / (n_rows * trees) - per_row
            if room <= 0:
                raise ValueError(
                    f"{trees} full Mondrian tree(s) per branch on {n_rows:,} rows cannot fit "
                    f"{budget / 1e6:,.0f} MB: their data buffer alone needs more; save "
                    "compact models (--compact) or raise the budget")
            mss = max(DEFAULT_MIN_SAMPLES_SPLIT, math.ceil(4.0 * per_node / room))
            per = bytes_per_row_per_tree(branch, n_features, compact=compact,
                                         min_samples_split=mss, n_trees=trees)
    total = n_rows * trees * per
    form = " compact" if compact and mondrian else ""
    leaves = (f" with min_samples_split={mss}" if mondrian
              else f" with min_samples_leaf={leaf}")
    message = (f"model memory {budget / 1e6:,.0f} MB for {n_rows:,} rows x {n_features} "
               f"features: {trees}{form} {branch} tree(s) per branch{leaves}, about "
               f"{per:.0f} bytes per row per tree, an estimated {total / 1e6:,.0f} MB model")
    return SizePlan(trees, mss, leaf, per, total, message)
