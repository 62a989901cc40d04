"""Family-wise tests (``basics.familywise``): Holm against a plain oracle, and the error rate
it promises, on simulated p-values."""

from __future__ import annotations

import numpy as np
import pytest

from basics.familywise import rejected
from tests.naive import naive_holm


@pytest.mark.parametrize("seed", range(20))
def test_holm_equals_the_adjusted_p_value_oracle(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 12))
    p = rng.random(m) ** rng.uniform(0.5, 4.0)  # some small, some large
    if seed % 3 == 0:
        p[: m // 2] = p[0]  # ties
    for alpha in (0.01, 0.05, 0.2):
        assert rejected(p, alpha).tolist() == naive_holm(p.tolist(), alpha)
    assert not rejected([np.nan, 0.0], 0.05)[0]


def test_the_corrections_order_and_bounds():
    p = np.array([0.001, 0.012, 0.013, 0.04, 0.5])
    holm, bonf, none = (rejected(p, 0.05, c) for c in ("holm", "bonferroni", "none"))
    assert bonf.tolist() == [True, False, False, False, False]
    assert holm.tolist() == [True, True, True, False, False]
    assert none.tolist() == [True, True, True, True, False]
    assert (bonf <= holm).all() and (holm <= none).all()  # each rejects a subset of the next
    with pytest.raises(ValueError, match="correction must be one of"):
        rejected(p, 0.05, "sidak")


def test_family_wise_error_is_held_where_testing_each_is_not():
    """3,000 families of 8 true null hypotheses (independent uniform p-values): Holm rejects
    any in at most alpha of them (binomial standard error 0.004), each-at-alpha in about
    1 - 0.95 ** 8 = 34%."""
    rng = np.random.default_rng(0)
    p = rng.random((3000, 8))
    any_holm = np.mean([rejected(row, 0.05).any() for row in p])
    any_none = np.mean([rejected(row, 0.05, "none").any() for row in p])
    assert any_holm <= 0.05 + 3 * 0.004
    assert 0.30 < any_none < 0.38
