"""scikit-learn's estimator checks for the Mondrian forest estimators."""

from __future__ import annotations

from sklearn.utils.estimator_checks import parametrize_with_checks

from mondrian import MondrianForestClassifier, MondrianForestRegressor


def _expected_failed_checks(estimator) -> dict[str, str]:
    """Checks that are known to fail, with the reason (check name -> reason).

    None are needed: both estimators pass every check. (``check_array_api_input`` is
    skipped by scikit-learn itself unless ``SCIPY_ARRAY_API=1`` is set; the estimators do
    not claim array-API support, so that skip is expected.)
    """
    return {}


@parametrize_with_checks(
    [
        MondrianForestRegressor(n_estimators=3, random_state=0),
        MondrianForestRegressor(n_estimators=3, posterior="empirical", random_state=0),
        MondrianForestClassifier(n_estimators=3, random_state=0),
    ],
    expected_failed_checks=_expected_failed_checks,
)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
