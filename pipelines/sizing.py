"""Sizing a job to its data: the model's leaves and trees from a memory budget and the rows,
and the partitions a dataset needs to keep a cluster busy.

A saved model grows with (training rows) x (trees per branch) x (bytes per row per tree).
The bytes per row per tree of each branch learner are its record's ``model_bytes``
(:data:`ebf.learners.LEARNERS`; None for the learners whose model grows with its particles
or kept draws instead of its rows): Mondrian forests hold about ``4 / min_samples_split``
nodes per training row, CART forests about 21 bytes per row per tree at leaves of 5 rows,
in inverse proportion to ``min_samples_leaf``.

:func:`plan_model_size` picks the trees per branch, or the leaf size (the record's
``sized_leaf``: ``min_samples_split`` of Mondrian branches, ``min_samples_leaf`` of CART
branches), so that the estimate fits a budget (``ebf train --model-memory``); the defaults
it starts from are the record's too.

The default budget, ``--model-memory auto`` (:data:`AUTO_MODEL_MEMORY`), sizes the model
from the data and the budget together. With a budget alone, the leaves stay at 5 rows until
the model reaches it: 1M rows and 10M rows both made a model of about 2 GB (100 trees a
branch), and every predicted row walked trees as large whatever the data, so small data
predicted no faster than large data and loaded as large a model. ``auto`` lets the leaves
of the CART learners grow with the rows, :func:`rows_leaf`: 5 rows (the learner's default)
up to :data:`AUTO_BASE_ROWS` = 100,000 training rows, then ``5 * sqrt(rows / 100,000)`` (16
at 1M, 50 at 10M), and larger still if the model would not fit :data:`DEFAULT_MODEL_MEMORY`.
The model then grows as the square root of the rows (about 210 MB at 100k rows, 660 MB at
1M, 2 GB from about 9M), its bytes per training row fall, and the trees a row walks grow
slowly. Why the square root (``benchmarks/bench_default_size.py --leaves``: one 100-tree
forest on the rows of one branch, Friedman #1 with 10 features, CRPS on held-out rows
against leaves of 5, predict rows per CPU second of ``predict_summary``):

===========  =====  ========  =====================  ==================
branch rows  leaf   CRPS      predict rows / CPU s   model (100 trees)
===========  =====  ========  =====================  ==================
20,000       5      --        29.8k                  46 MB
20,000       10     +1.5%     34.6k                  22 MB
200,000      5      --        15.3k                  462 MB
200,000      10     +0.1%     19.2k                  224 MB
200,000      20     +1.1%     26.4k                  111 MB
200,000      40     +4.0%     31.0k                  55 MB
===========  =====  ========  =====================  ==================

Large trees predict slowly (a row's walk leaves the CPU caches), and the leaf size a forest
can afford grows with its rows: doubling the leaves cost 1.5% of CRPS on 20k rows, 0.1% on
200k. The cost-free leaf doubles about every tenfold rows (a power of 0.3); the square root
grows a little faster, trading about half a percent of CRPS at 1M rows (five branches of
200k rows, leaves of 16 instead of the budget's 6) for a model a third as large (0.66 GB
instead of 1.8 GB: a third of the time to load it) and 40% more rows predicted per CPU
second by the whole model. Mondrian branches keep their default leaves and trees (fewer
trees if the budget says so). An explicit ``--model-memory SIZE`` plans as before: the
smallest leaf that fits.

A dataset's partitions (files or row groups) are the tasks of every pass over its rows, so
it needs several per worker thread: ``ebf make-data`` writes :data:`DEFAULT_PARTITION_ROWS`
rows per file by default, and ``ebf train`` / ``ebf predict`` log :func:`partition_note`
when the data has fewer partitions than the cluster has threads
(:func:`check_partitions`).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

from ebf.learners import LEARNERS, get_learner, mondrian_model_terms

logger = logging.getLogger(__name__)

__all__ = ["AUTO_MODEL_MEMORY", "DEFAULT_MODEL_MEMORY", "DEFAULT_PARTITION_ROWS", "SizePlan",
           "bytes_per_row_per_tree", "check_partitions", "check_sized_by_rows",
           "default_model_memory", "model_budget", "partition_note", "plan_model_size",
           "rows_leaf", "sized_by_rows"]

#: ``model_memory`` of ``ebf train`` / ``ebf retrain`` when none is given, for the learners
#: sized by rows: the leaf size from the rows (:func:`rows_leaf`), then from the budget
#: :data:`DEFAULT_MODEL_MEMORY` if the model would not fit it.
AUTO_MODEL_MEMORY = "auto"
#: The budget of :data:`AUTO_MODEL_MEMORY`: the default 100 Bayesian trees with leaves of 5
#: rows would take about 2 GB per million rows, so without a cap 10M rows would make a 20 GB
#: model; with it they get larger leaves.
DEFAULT_MODEL_MEMORY = "2GB"
#: Rows up to which :func:`rows_leaf` keeps the learner's default leaf size ...
AUTO_BASE_ROWS = 100_000
#: ... and how fast it grows past them: ``default * (rows / AUTO_BASE_ROWS) ** AUTO_LEAF_POWER``.
AUTO_LEAF_POWER = 0.5
#: Rows per file of :func:`pipelines.make_data.make_friedman` (``ebf make-data
#: --partition-rows``) by default. A partition is one task of every pass of ``ebf train`` and
#: ``ebf predict``, so a dataset should have several per worker thread: 100,000 rows (about
#: 9 MB in memory with 10 features) give 10 tasks per million rows, 5 per core of a 2-core
#: machine, and a task still takes far longer than Dask's milliseconds of overhead per task.
DEFAULT_PARTITION_ROWS = 100_000


def sized_by_rows() -> list[str]:
    """The learners whose saved model grows with the training rows (``--model-memory``)."""
    return [name for name, learner in LEARNERS.items() if learner.model_bytes is not None]


def check_sized_by_rows(branch: str) -> None:
    """Raise ``ValueError`` if a ``model_memory`` budget cannot size ``branch`` models."""
    if branch not in sized_by_rows():
        raise ValueError(
            f"--model-memory (model_memory) sizes models that grow with the rows "
            f"({', '.join(sized_by_rows())}); a {branch} model grows with its particles or "
            "kept draws instead: drop --model-memory and set --n-estimators")


def default_model_memory(branch: str, given: int | str | None) -> int | str | None:
    """The model budget of a CLI job: ``given``, else :data:`AUTO_MODEL_MEMORY` for the
    learners sized by rows (an SMC or BART model grows with its particles or draws).

    Examples
    --------
    >>> default_model_memory("bayesian", None), default_model_memory("smc", None)
    ('auto', None)
    """
    if given is not None or branch not in sized_by_rows():
        return given
    return AUTO_MODEL_MEMORY


def model_budget(model_memory: int | str) -> tuple[int, bool]:
    """The bytes of a ``model_memory`` budget, and whether the leaves follow the rows too
    (:data:`AUTO_MODEL_MEMORY`, whose budget is :data:`DEFAULT_MODEL_MEMORY`).

    Examples
    --------
    >>> model_budget("auto"), model_budget("500MB")
    ((2000000000, True), (500000000, False))
    """
    from dask.utils import parse_bytes

    if model_memory == AUTO_MODEL_MEMORY:
        return parse_bytes(DEFAULT_MODEL_MEMORY), True
    return (parse_bytes(model_memory) if isinstance(model_memory, str)
            else int(model_memory)), False


def rows_leaf(branch: str, n_rows: int) -> int:
    """The leaf size :data:`AUTO_MODEL_MEMORY` starts from for ``n_rows`` training rows: the
    learner's default up to :data:`AUTO_BASE_ROWS` rows, then growing as their square root
    for the CART learners (Mondrian branches keep theirs: the budget trims their trees).

    Examples
    --------
    >>> [rows_leaf("bayesian", n) for n in (10**4, 10**5, 10**6, 10**7)]
    [5, 5, 16, 50]
    >>> rows_leaf("mondrian", 10**7)
    10
    """
    learner = get_learner(branch)
    if learner.sized_leaf != "min_samples_leaf":
        return learner.default_min_samples_split
    base = learner.default_min_samples_leaf
    # less a hair: a power that lands on a whole number (50 at 10M rows) may round above it
    return max(base, math.ceil(base * (n_rows / AUTO_BASE_ROWS) ** AUTO_LEAF_POWER - 1e-9))


def bytes_per_row_per_tree(branch: str, n_features: int, *, compact: bool = False,
                           min_samples_split: int | None = None, n_trees: int | None = None,
                           min_samples_leaf: int | None = None) -> float:
    """Estimated model bytes per training row per tree (the learner's ``model_bytes``).

    Parameters
    ----------
    branch : str
        A learner of :func:`sized_by_rows`.
    n_features : int
    compact : bool, default=False
        Mondrian: the compact, predict-only form.
    min_samples_split : int, optional
        Mondrian leaf size; by default the learner's ``default_min_samples_split``.
    n_trees : int, optional
        Trees per branch (a full Mondrian forest shares its data buffer among them); by
        default the learner's ``default_trees``.
    min_samples_leaf : int, optional
        CART leaf size; by default the learner's ``default_min_samples_leaf``.

    Returns
    -------
    float

    Examples
    --------
    >>> round(bytes_per_row_per_tree("mondrian", 10, compact=True))
    26
    """
    learner = get_learner(branch)
    return learner.model_bytes(
        n_features, compact=compact,
        min_samples_split=(learner.default_min_samples_split if min_samples_split is None
                           else min_samples_split),
        n_trees=learner.default_trees if n_trees is None else n_trees,
        min_samples_leaf=(learner.default_min_samples_leaf if min_samples_leaf is None
                          else min_samples_leaf))


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
                    n_estimators: int | None = None, compact: bool = False,
                    from_rows: bool = False) -> SizePlan:
    """Trees per branch (or leaf size) for a model of at most ``budget`` bytes.

    The learner's record (:data:`ebf.learners.LEARNERS`) says how: a learner whose record
    has ``budget_trims_trees`` (Mondrian) with ``n_estimators`` None gets its default trees,
    fewer if they do not fit, then larger leaves if one tree does not fit. Otherwise (trees
    given, or CART branches, whose default 100 bootstrap draws make the posterior): the
    smallest leaf size that fits them, in the record's ``sized_leaf`` parameter
    (``min_samples_split`` of Mondrian branches, ``min_samples_leaf`` of CART branches),
    from the record's default; with ``from_rows`` (``model_memory="auto"``), from
    :func:`rows_leaf` of the rows if that is larger.

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
    check_sized_by_rows(branch)
    learner = get_learner(branch)
    by_split = learner.sized_leaf == "min_samples_split"
    mss = learner.default_min_samples_split if by_split else None
    leaf = None if by_split else learner.default_min_samples_leaf
    trees = n_estimators
    if trees is None and not learner.budget_trims_trees:
        trees = learner.default_trees
    if trees is None:
        per_row = bytes_per_row_per_tree(branch, n_features, compact=compact, n_trees=1)
        fit = int(budget // (n_rows * per_row))
        trees = max(1, min(learner.default_trees, fit))
        for t in range(trees, 0, -1):  # the shared buffer of full Mondrian trees counts too
            if n_rows * t * bytes_per_row_per_tree(branch, n_features, compact=compact,
                                                   n_trees=t) <= budget:
                trees = t
                break
    per = bytes_per_row_per_tree(branch, n_features, compact=compact, n_trees=trees)
    at_leaf = per
    if from_rows and not by_split and rows_leaf(branch, n_rows) > leaf:
        leaf = rows_leaf(branch, n_rows)  # the budget below may raise it further
        at_leaf = bytes_per_row_per_tree(branch, n_features, min_samples_leaf=leaf)
    if n_rows * trees * at_leaf <= budget:
        per = at_leaf
    else:
        if not by_split:  # bytes per row fall as 1 / leaf: the smallest leaf that fits
            base = learner.default_min_samples_leaf
            leaf = math.ceil(base * n_rows * trees * per / budget)
            if 2 * leaf > n_rows:
                raise ValueError(
                    f"a model of {trees} {branch} tree(s) per branch on {n_rows:,} rows needs "
                    f"about {n_rows * trees * per / 1e6:,.0f} MB with leaves of {base} rows "
                    f"and cannot fit the --model-memory budget of {budget / 1e6:,.0f} MB even "
                    "with one leaf per tree; raise the budget or use fewer trees")
            per = bytes_per_row_per_tree(branch, n_features, min_samples_leaf=leaf)
        else:
            per_node, per_row = mondrian_model_terms(n_features, compact, trees)
            room = budget / (n_rows * trees) - per_row
            if room <= 0:
                raise ValueError(
                    f"{trees} full Mondrian tree(s) per branch on {n_rows:,} rows cannot fit "
                    f"{budget / 1e6:,.0f} MB: their data buffer alone needs more; save "
                    "compact models (--compact) or raise the budget")
            mss = max(learner.default_min_samples_split, math.ceil(4.0 * per_node / room))
            per = bytes_per_row_per_tree(branch, n_features, compact=compact,
                                         min_samples_split=mss, n_trees=trees)
    total = n_rows * trees * per
    form = " compact" if compact and learner.online else ""
    leaves = f" with {learner.sized_leaf}={mss if by_split else leaf}"
    what = f"auto (at most {budget / 1e6:,.0f} MB)" if from_rows else f"{budget / 1e6:,.0f} MB"
    message = (f"model memory {what} for {n_rows:,} rows x {n_features} "
               f"features: {trees}{form} {branch} tree(s) per branch{leaves}, about "
               f"{per:.0f} bytes per row per tree, an estimated {total / 1e6:,.0f} MB model")
    return SizePlan(trees, mss, leaf, per, total, message)


#: Data of fewer rows gets no :func:`partition_note`: ``ebf make-data`` writes it as one
#: file too, and more tasks would gain nothing.
NOTE_ROWS = DEFAULT_PARTITION_ROWS


def check_partitions(n_partitions: int, client: Any, n_rows: int | None = None) -> str | None:
    """Log :func:`partition_note` of a dataset on ``client``'s cluster as a warning (one
    line, not an error) and return it: ``ebf train`` and ``ebf predict`` call this once
    they have read and checked the data. Data of fewer than :data:`NOTE_ROWS` rows
    (``n_rows``, if known) gets none."""
    if n_rows is not None and n_rows < NOTE_ROWS:
        return None
    note = partition_note(n_partitions, sum(client.nthreads().values()))
    if note is not None:
        logger.warning("%s", note)
    return note


def partition_note(n_partitions: int, n_threads: int) -> str | None:
    """What to say when a dataset has fewer partitions than the cluster's worker threads
    (None when it has enough): each partition is one task of every pass over the rows, so
    the other threads would idle.

    Parameters
    ----------
    n_partitions : int
        Partitions of the dataset (one per file or row group as read).
    n_threads : int
        Worker threads of the cluster.

    Returns
    -------
    str or None
        One line naming both counts and the fix.

    Examples
    --------
    >>> partition_note(1, 2)  # doctest: +ELLIPSIS
    'the data has 1 partition(s) for 2 worker threads, so at most 1 thread(s) work...'
    >>> partition_note(8, 2) is None
    True
    """
    if n_partitions >= n_threads:
        return None
    return (f"the data has {n_partitions} partition(s) for {n_threads} worker threads, so at "
            f"most {n_partitions} thread(s) work at a time; write it as more (smaller) Parquet "
            "files or row groups, several per thread (ebf make-data --partition-rows, default "
            f"{DEFAULT_PARTITION_ROWS:,} rows per file)")
