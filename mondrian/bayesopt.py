"""Mondrian forests as the surrogate of Bayesian optimisation with scikit-optimize.

The Mondrian regression paper (Lakshminarayanan, Roy & Teh 2016, Sec. 5.3, Table 3) runs
Bayesian optimisation with a Mondrian forest (10 trees, ``min_samples_split = 2``) and the
UCB acquisition: its predictive standard deviation grows away from the data, which is what
the acquisition needs. ``MondrianForestRegressor`` has the interface scikit-optimize's
``Optimizer(base_estimator=...)`` calls, ``fit(X, y)`` and ``predict(X, return_std=True)``.

One thing is missing on scikit-optimize's side: it takes every estimator that is not one of
its own tree ensembles for one whose ``predict`` also returns gradients, so with the default
``acq_optimizer="auto"`` it picks L-BFGS and fails on ``return_mean_grad``. A forest's
prediction is piecewise constant, so the acquisition is maximised by sampling candidate
points instead: :func:`skopt_optimizer` builds the ``Optimizer`` that way.
scikit-optimize is an optional dependency (the ``bench`` extra).

:func:`maximize_on_grid` is the paper's own protocol: the objective known on a finite grid
(Table 3 samples Branin and Hartmann at 250,000 points), UCB ``mean + kappa std`` maximised
over the unevaluated grid points, the forest refit after every evaluation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ._forest import MondrianForestRegressor

__all__ = ["default_initial_points", "maximize_on_grid", "skopt_optimizer"]


def skopt_optimizer(dimensions: Any, *, n_estimators: int = 10, min_samples_split: int = 2,
                    acq_func: str = "LCB", random_state: Any = None,
                    **optimizer_kwargs: Any) -> Any:
    """A scikit-optimize ``Optimizer`` with a Mondrian forest surrogate (paper Sec. 5.3).

    Parameters
    ----------
    dimensions : list
        The search space, as scikit-optimize takes it (e.g. ``[(-5.0, 10.0), (0.0, 15.0)]``).
    n_estimators, min_samples_split : int, default=(10, 2)
        The forest of the paper's Table 3.
    acq_func : str, default="LCB"
        scikit-optimize minimises: its lower confidence bound ``mu - kappa sigma`` is the
        paper's UCB for the negated objective.
    random_state : int or None
        Seeds the forest and the optimiser.
    **optimizer_kwargs
        Passed to ``skopt.Optimizer`` (``n_initial_points``, ``acq_func_kwargs``,
        ``acq_optimizer_kwargs={"n_points": ...}``, ...); ``acq_optimizer`` is "sampling".

    Returns
    -------
    skopt.Optimizer
        Drive it with ``ask`` / ``tell``.

    Examples
    --------
    >>> opt = skopt_optimizer([(-5.0, 10.0), (0.0, 15.0)], random_state=0)  # doctest: +SKIP
    >>> x = opt.ask(); opt.tell(x, objective(x))                            # doctest: +SKIP
    """
    try:
        from skopt import Optimizer
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("skopt_optimizer needs scikit-optimize: pip install "
                          "'ebf[bench]' (or scikit-optimize)") from exc
    if optimizer_kwargs.get("acq_optimizer", "sampling") != "sampling":
        raise ValueError("a Mondrian forest gives no gradients: acq_optimizer must be "
                         f"'sampling', got {optimizer_kwargs['acq_optimizer']!r}")
    optimizer_kwargs["acq_optimizer"] = "sampling"
    # the acquisition reads the mean and std, which a recalibration map leaves unchanged
    forest = MondrianForestRegressor(n_estimators=n_estimators,
                                     min_samples_split=min_samples_split,
                                     random_state=random_state, calibrate="none")
    return Optimizer(dimensions, base_estimator=forest, acq_func=acq_func,
                     random_state=random_state, **optimizer_kwargs)


def default_initial_points(n_evals: int, n_dims: int) -> int:
    """Random grid points evaluated before the surrogate takes over: a tenth of the budget,
    at least ``n_dims + 1`` (and at most ``n_evals``).

    With five (the count the benchmark used first) a Mondrian surrogate on a fine grid can
    spend the whole budget climbing from the best of them: on a 250,000-point Branin grid its
    UCB maximiser sits next to the incumbent (an infinite-lifetime Mondrian forest gives any
    unseen point beside a leaf that leaf's mean and nearly the largest std), so each step
    moves by about one grid spacing, and one seed of 6 ended at -3.70 after 200 evaluations
    (optimum -0.398). A tenth of the budget starts the climbs in more basins.
    """
    return int(min(n_evals, max(n_dims + 1, n_evals // 10)))


def maximize_on_grid(objective: Callable[[np.ndarray], Any], grid: Any, n_evals: int, *,
                     n_initial: int | None = None, kappa: float = 1.0,
                     n_estimators: int = 10, min_samples_split: int = 2,
                     random_state: int | None = None) -> dict[str, Any]:
    """Maximise ``objective`` over the rows of ``grid`` with a Mondrian forest surrogate.

    The protocol of the regression paper's Table 3 (Sec. 5.3): ``n_initial`` random grid
    points first, then each step refits the forest (``n_estimators`` trees,
    ``min_samples_split``, the paper's one noise variance ``noise="forest"``) on every
    evaluation so far and evaluates the unevaluated point of largest UCB
    ``mean + kappa std`` (the paper's footnote 9: ``kappa = 1``).

    Parameters
    ----------
    objective : callable
        Takes rows of ``grid`` (shape ``(k, n_dims)``) and returns their ``k`` values.
    grid : array-like of shape (n_points, n_dims)
        The candidate points (scale every dimension to [0, 1], as the paper does).
    n_evals : int
        Evaluations in all, initial ones included.
    n_initial : int, optional
        Random first evaluations; default :func:`default_initial_points`.
    kappa : float, default=1.0
    n_estimators, min_samples_split : int, default=(10, 2)
    random_state : int or None
        Seeds the initial points and the forests.

    Returns
    -------
    dict
        ``order`` (grid rows evaluated, in order), ``values`` (theirs), ``best`` (the
        largest value), ``best_index`` (its grid row).

    Examples
    --------
    >>> grid = np.random.default_rng(0).random((500, 2))
    >>> res = maximize_on_grid(lambda X: -((X - 0.3) ** 2).sum(1), grid, 15, random_state=0)
    >>> len(res["order"]), bool(res["best"] > -0.05)
    (15, True)
    """
    grid = np.asarray(grid, dtype=np.float64)
    if grid.ndim != 2 or grid.shape[0] == 0:
        raise ValueError(f"grid must be a 2-D array of candidate points, got shape {grid.shape}")
    n_initial = default_initial_points(n_evals, grid.shape[1]) if n_initial is None else n_initial
    if not 1 <= n_initial <= n_evals <= grid.shape[0]:
        raise ValueError(f"need 1 <= n_initial ({n_initial}) <= n_evals ({n_evals}) <= grid "
                         f"points ({grid.shape[0]}); lower n_evals or use a larger grid")
    rng = np.random.default_rng(random_state)
    order = [int(i) for i in rng.choice(grid.shape[0], size=n_initial, replace=False)]
    values = [float(v) for v in np.asarray(objective(grid[order]), dtype=np.float64)]
    open_ = np.ones(grid.shape[0], bool)
    open_[order] = False
    seeds = rng.integers(0, 2**31 - 1, size=n_evals)
    while len(order) < n_evals:
        forest = MondrianForestRegressor(n_estimators=n_estimators, noise="forest",
                                         min_samples_split=min_samples_split,
                                         random_state=int(seeds[len(order)]),
                                         calibrate="none")
        mean, std = forest.fit(grid[order], values).predict(grid, return_std=True)
        best = int(np.argmax(np.where(open_, mean + kappa * std, -np.inf)))
        order.append(best)
        values.append(float(np.asarray(objective(grid[best:best + 1]), dtype=np.float64)[0]))
        open_[best] = False
    k = int(np.argmax(values))
    return {"order": order, "values": values, "best": values[k], "best_index": order[k]}
