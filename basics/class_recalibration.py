"""What every classifier of the package offers to recalibrate its class probabilities.

:class:`ClassRecalibrationMixin` gives a classifier ``recalibrate`` (learn a
:class:`basics.class_calibration.ClassCalibrationMap` on held-out rows) and
``set_class_calibration`` (a map learnt elsewhere: from every row's held-out probabilities,
or on a cluster); the host applies the map in its predictions through
:meth:`ClassRecalibrationMixin._calibrated` and stores it with
:func:`class_calibration_state` / :func:`class_calibration_from_state`. It is the classifiers'
counterpart of :class:`basics.recalibration.RecalibrationMixin`, and lives here, below ``ebf``
and ``mondrian``, because both packages' classifiers use it.

The host provides ``classes_`` and ``predict_proba(X, recalibrated=True)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sklearn.utils.validation import check_is_fitted

from . import calibration as cal
from .class_calibration import ClassCalibrationMap, fit_candidate
from .pit import MIN_ROWS
from .recalibration import calibration_from_state, map_state
from .validation import is_missing

__all__ = ["NO_CLASS_MAP", "ClassRecalibrationMixin", "class_calibration_from_state",
           "class_calibration_state", "label_codes"]

_KEY = "class_calibration"
#: The fitted attributes of a classifier without a map: what a fit sets.
NO_CLASS_MAP: dict = {"class_calibration_": None, "calibration_": None}


_PROVENANCE = "calibration"


def class_calibration_state(estimator: Any) -> dict:
    """``{"class_calibration": map state, "calibration": provenance}`` of a recalibrated
    classifier, else ``{}``."""
    return map_state(estimator, "class_calibration_", _KEY)


def class_calibration_from_state(state: dict, n_classes: int) -> dict:
    """``{"class_calibration_": ClassCalibrationMap or None, "calibration_": provenance or
    None}`` from a state, checked against the model's ``n_classes`` (files are untrusted;
    models saved without a map have None)."""
    value = state.get(_KEY)
    cal_map = None if value is None else ClassCalibrationMap.from_state(value, _KEY,
                                                                        n_classes=n_classes)
    provenance = calibration_from_state(state.get(_PROVENANCE)) if cal_map is not None else None
    return {"class_calibration_": cal_map, "calibration_": provenance}


def label_codes(classes: np.ndarray, y: Any, n: int) -> np.ndarray:
    """Codes ``0 .. len(classes) - 1`` of labels ``y`` (one per row of ``n``); missing labels
    and labels not in ``classes`` raise, with their count.

    Examples
    --------
    >>> label_codes(np.array(["a", "b"]), ["b", "a", "b"], 3).tolist()
    [1, 0, 1]
    """
    labels = np.asarray(y)
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.ndim != 1 or labels.shape[0] != n:
        raise ValueError(f"y must be 1-D with one label per row of X ({n}); got shape "
                         f"{labels.shape}.")
    missing = is_missing(labels)
    if missing.any():
        raise ValueError(f"y has {int(missing.sum())} missing labels of {n}; drop those rows "
                         "before calibrating.")
    codes = pd.Index(classes).get_indexer(labels)
    unknown = codes < 0
    if unknown.any():
        examples = pd.unique(labels[unknown])[:5].tolist()
        raise ValueError(f"y has {int(unknown.sum())} labels the model never saw (e.g. "
                         f"{examples}); its classes are {list(classes)[:10]}.")
    return codes.astype(np.int64)


class ClassRecalibrationMixin(cal.CalibratedFitMixin):
    """Recalibration of a classifier's class probabilities
    (:class:`basics.class_calibration.ClassCalibrationMap`).

    With a map, ``predict_proba`` and everything derived from it (``predict``,
    ``predict_log_proba``, ``predict_summary``, ``score`` and the log loss and ECE a scorer
    computes) are the calibrated probabilities; ``predict_proba(X, recalibrated=False)`` gives
    the model's own. A new ``fit`` drops the map; ``partial_fit`` keeps it.
    """

    def recalibrate(self, X: Any, y: Any, *, positions: Any = None) -> Any:
        """Learn the class calibration map on rows the model never saw.

        The map (isotonic per class, Dirichlet, or the identity, chosen by held-out log
        loss: :meth:`basics.class_calibration.ClassCalibrationMap.fit`) replaces any earlier
        one.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Calibration rows, not used to fit the model.
        y : array-like of shape (n_samples,)
            Their labels, all among ``classes_``.
        positions : array-like of int, optional
            The rows' positions in the dataset (the map's two halves hash them).

        Returns
        -------
        self

        Raises
        ------
        ValueError
            On missing or unknown labels or fewer than 50 rows (the model is unchanged).
        """
        proba = self.predict_proba(X, recalibrated=False)
        codes = label_codes(self.classes_, y, proba.shape[0])
        return self.set_class_calibration(ClassCalibrationMap.fit(proba, codes, positions))

    def set_class_calibration(self, cal_map: ClassCalibrationMap | None) -> Any:
        """Use ``cal_map`` from now on (None: predict the model's own probabilities).

        The seam the fold-held-out calibration and the distributed layer use: fit
        :meth:`basics.class_calibration.ClassCalibrationMap.fit` on held-out probabilities
        and their class codes, and set it here.

        Returns
        -------
        self
        """
        check_is_fitted(self)
        if cal_map is not None:
            if not isinstance(cal_map, ClassCalibrationMap):
                raise TypeError(f"cal_map must be a basics.class_calibration."
                                f"ClassCalibrationMap or None; got {type(cal_map).__name__}.")
            if cal_map.n_classes != len(self.classes_):
                raise ValueError(f"the map is for {cal_map.n_classes} classes but the model "
                                 f"has {len(self.classes_)}.")
        self.class_calibration_ = cal_map
        self.calibration_ = None if cal_map is None else {"method": "rows",
                                                          "rows": int(cal_map.n_rows)}
        return self

    _halved_groups = True

    def _held_out(self, fitted: list, X: Any, y: Any) -> tuple:
        """A calibration group's class probabilities of rows it never saw, from each of its
        two halves, with their class codes (``calibrate="auto"``)."""
        probs = [self._all_classes(f, f.predict_proba(X, recalibrated=False)) for f in fitted]
        first, second = probs * 2 if len(probs) == 1 else probs  # a 1-tree group: no halves
        return first, second, label_codes(self.classes_, y, first.shape[0])

    def _all_classes(self, fitted: Any, proba: np.ndarray) -> np.ndarray:
        """A group's probabilities in the columns of the model's classes (a group fit on
        fewer rows may not have seen every class: those get probability 0)."""
        if len(fitted.classes_) == len(self.classes_):
            return proba
        out = np.zeros((proba.shape[0], len(self.classes_)))
        out[:, np.searchsorted(self.classes_, fitted.classes_)] = proba
        return out

    def _set_auto_map(self, held: tuple) -> None:
        """The class calibration map of the groups' held-out probabilities, extrapolated to
        the model's trees: ``held`` is ``(per fold (positions, (halves' probabilities,
        codes)), group_trees, model_trees)``."""
        parts, group, model = held[:3]
        if not parts or len(self.classes_) < 2:  # one class: nothing to calibrate
            return
        positions = np.concatenate([p for p, _ in parts])
        if positions.size < MIN_ROWS:
            return
        order = np.argsort(positions, kind="stable")  # the same map whatever the fold order
        first, second, codes = (np.concatenate([r[i] for _, r in parts])[order]
                                for i in range(3))
        n1, n2 = cal.group_halves(group) if group >= 2 else (1, 1)
        whole = (n1 * first + n2 * second) / (n1 + n2)  # the group's own probabilities
        cal_map = ClassCalibrationMap.fit(whole, codes, positions[order])
        weight = cal.tree_count_weight(float(group), float(model))
        if cal_map.method != "identity" and weight > 1.0:
            half = fit_candidate(cal_map.method, np.concatenate([first, second]),
                                 np.concatenate([codes, codes]))
            cal_map = cal_map.with_half(half, weight)
        self.set_class_calibration(cal_map)
        self.calibration_ = cal.auto_provenance(positions.size, group, model, *held[3:])

    def _set_provenance(self, provenance: dict | None) -> None:
        self.calibration_ = None if provenance is None else calibration_from_state(
            provenance, "provenance")

    def _calibrated(self, proba: np.ndarray) -> np.ndarray:
        """The probabilities as predicted: mapped if the model has a map."""
        cal_map = getattr(self, "class_calibration_", None)
        if cal_map is None:
            return proba
        ok = np.isfinite(proba).all(axis=1)  # a row no branch takes stays NaN
        if ok.all():
            return cal_map(proba)
        out = np.full(proba.shape, np.nan)
        out[ok] = cal_map(proba[ok])
        return out
