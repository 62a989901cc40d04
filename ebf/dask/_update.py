"""``partial_fit`` of an Empirical Bayesian Forest on the cluster.

The new rows are checked against the model (columns and kinds on the metadata, labels and
targets in the summary pass), encoded with the model's own encoder and routed by its trunk
on the workers, partition by partition (the rows are read once and kept on the workers
for the two passes). The branches are then updated in this process (a Dask fit's branches
that receive rows are gathered first; the others stay on the workers).
The model is not sharded on the workers (every worker would need all of it, or its
branches would travel out and back, tens of MB per branch for Mondrian forests), and a
window of new rows is small next to the model that has seen every earlier window, so the
encoded rows come to the model: a few float64 columns per row. The model's seam
``_update_encoded`` then runs the local ``partial_fit`` on them (``ebf._update``), so the
result equals the local ``partial_fit`` on ``X.compute()``, bit for bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from distributed import Client
from sklearn.base import is_classifier

from ..learners import get_learner, online_learners
from ._shuffle import BRANCH, TARGET, feature_columns, route_by_trunk, routed_meta
from .client import gather
from .inputs import InputSummary, check_columns, check_inputs, check_known_labels, encode, summarize
from .live import gather_model

__all__ = ["update_model"]


def update_model(client: Client, model: Any, X: Any, y: Any, phases: Any) -> Any:
    """Update fitted local EBF ``model`` with the rows of ``(X, y)``.

    Parameters
    ----------
    client : distributed.Client
    model : EmpiricalBayesianForestRegressor or EmpiricalBayesianForestClassifier
        Fitted, with online (Mondrian) branches.
    X : dask.dataframe.DataFrame
    y : dask.dataframe.Series
    phases : callable
        ``phases(name)`` -> context manager timing a phase; ``phases.report(name)`` its
        progress callback (``ebf.dask.client.Phases``).

    Returns
    -------
    estimator
        ``model``, updated in place; or, if branches that receive rows were on the workers
        (a Dask fit's :class:`ebf.dask.live.LivePart`), a new model with those branches
        gathered and updated here (the others stay on the workers; ``model`` unchanged).

    Raises
    ------
    ValueError, TypeError
        CART branches, other columns, labels never seen, a predict-only or constant branch
        that receives rows. The model is then unchanged.
    """
    if not get_learner(model.branch).online:
        raise ValueError(
            f"partial_fit on Dask extends only {online_learners()} branches online; "
            f"this model's branch={model.branch!r} (CART) forests keep no rows. Refit "
            "with fit(X, y), or update the local model with its earlier rows: "
            "to_local().partial_fit(X, y, previous=(X_old, y_old)).")
    task = "classification" if is_classifier(model) else "regression"
    classes = getattr(model, "classes_", None)
    with phases("schema"):
        frame, layout = check_inputs(X, y, None, task)
        check_columns(model, X, layout)
        # a window is small next to the model: read it once for the two passes below
        frame = client.persist(frame)
    with phases("summary"):
        summary = summarize(client, frame, layout, phases.report("summary"),
                            allow_nan=model._missing_values)
        check_known_labels(layout, summary, classes)
    with phases("encode"):
        data = encode(client, frame, layout,
                      InputSummary(summary.lengths, model.encoder_, classes,
                                   model._missing_values),
                      phases.report("encode"))
    with phases("route"):
        routed = route_by_trunk(client, data, model.trunk_)
        frames = gather(client, routed, phases.report("route"))
        data.release()
        del routed
    with phases("branches"):
        rows = pd.concat(frames, ignore_index=True) if frames else routed_meta(data)
        A = np.ascontiguousarray(rows[feature_columns(data.n_features)].to_numpy(np.float64))
        leaf = rows[BRANCH].to_numpy()
        model = gather_model(model, np.unique(leaf))  # the branches that take rows, here
        # the cluster waits meanwhile: the branches use this machine's cores
        model._update_encoded(A, rows[TARGET].to_numpy(), leaf, n_jobs=-1)
    return model
