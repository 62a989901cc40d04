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
"""

from __future__ import annotations

from typing import Any

from .forest import MondrianForestRegressor

__all__ = ["skopt_optimizer"]


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
    forest = MondrianForestRegressor(n_estimators=n_estimators,
                                     min_samples_split=min_samples_split,
                                     random_state=random_state)
    return Optimizer(dimensions, base_estimator=forest, acq_func=acq_func,
                     random_state=random_state, **optimizer_kwargs)
