"""``partial_fit`` of an Empirical Bayesian Forest on the cluster (the local one's phases).

The new rows are checked against the model (columns and kinds on the metadata, labels in
the summary pass), encoded with the model's own encoder, routed by its trunk and moved so
that each branch's new rows form one partition, in global row order. Every branch that
receives rows is updated in one task by :func:`ebf.update.update_branch`, the function the
local ``partial_fit`` calls, and the model takes the updated branches through its seam
``_with_updates``. The result equals the local ``partial_fit`` on ``X.compute()``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from distributed import Client
from sklearn.base import is_classifier

from ..update import ONLINE_LEARNERS, check_updatable
from .branches import update_branches
from .inputs import InputSummary, check_columns, check_inputs, check_known_labels, encode, summarize
from .shuffle import branch_counts, move_rows, route_by_trunk, routed_meta

__all__ = ["update_model"]


def update_model(client: Client, model: Any, X: Any, y: Any, phases: Any) -> None:
    """Update fitted local EBF ``model`` in place with the rows of ``(X, y)``.

    Parameters
    ----------
    client : distributed.Client
    model : EmpiricalBayesianForestRegressor or EmpiricalBayesianForestClassifier
        Fitted, with online (Mondrian) branches.
    X : dask.dataframe.DataFrame
    y : dask.dataframe.Series
    phases : callable
        ``phases(name)`` -> context manager timing a phase; ``phases.report(name)`` its
        progress callback (``ebf.dask.estimators._Phases``).

    Raises
    ------
    ValueError, TypeError
        Before the rows move: CART branches, other columns, labels never seen, a
        predict-only or constant branch that receives rows. The model is then unchanged.
    """
    if model.branch not in ONLINE_LEARNERS:
        raise ValueError(
            f"partial_fit on Dask extends only {list(ONLINE_LEARNERS)} branches online; "
            f"this model's branch={model.branch!r} (CART) forests keep no rows. Refit "
            "with fit(X, y), or update the local model with its earlier rows: "
            "to_local().partial_fit(X, y, previous=(X_old, y_old)).")
    task = "classification" if is_classifier(model) else "regression"
    classes = getattr(model, "classes_", None)
    with phases("schema"):
        frame, layout = check_inputs(X, y, None, task)
        check_columns(model, X, layout)
    with phases("summary"):
        summary = summarize(client, frame, layout, phases.report("summary"))
        check_known_labels(layout, summary, classes)
    with phases("encode"):
        data = encode(client, frame, layout,
                      InputSummary(summary.lengths, model.encoder_, classes),
                      phases.report("encode"))
    trunk = model.trunk_
    spec = model._update_spec()
    with phases("route"):
        routed = route_by_trunk(client, data, trunk)
        counts = branch_counts(client, routed, trunk.n_leaves_)
        old = {int(b): model.branches_[b] for b in np.flatnonzero(counts)}
        for b, branch in old.items():  # before any row moves
            check_updatable(spec, branch, b)
        moved = move_rows(client, routed, routed_meta(data), trunk.n_leaves_,
                          report=phases.report("route"))
        data.release()
        del routed
    rows = {b: int(counts[b]) for b in old}
    with phases("branches"):
        updates = update_branches(client, moved, old, spec, model.entropy_, data.n_features,
                                  rows, phases.report("branches"))
    model._with_updates(updates, rows)
