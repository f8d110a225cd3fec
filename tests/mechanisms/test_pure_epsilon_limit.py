"""Pure-DP events at very large epsilon: exact up to the float64 limit, refused beyond it."""

import math

import pytest

from gnnprivacy.accounting import make_accountant
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.mechanisms.base import pure_epsilon_event
from gnnprivacy.mechanisms.randomized_response import grr_probabilities


@pytest.mark.parametrize("eps", [0.5, 40.0, 500.0, 700.0])
def test_accountant_sees_the_epsilon_of_a_large_pure_event(eps):
    acc = make_accountant("pld", unit="feature", relation="replace")
    acc.compose(pure_epsilon_event(eps))
    assert acc.get_epsilon(0.0) == pytest.approx(eps, rel=1e-6)
    p = pure_epsilon_event(eps).noise_parameter
    assert p > 0 and p == pytest.approx(2.0 / (math.exp(eps) + 1.0), rel=1e-12)


@pytest.mark.parametrize("eps", [700.5, 1000.0])
def test_beyond_the_float64_limit_is_refused_not_reported_as_infinite(eps):
    # positive control: the old formula 2 / (e^eps + 1) overflows (or gives p = 0, i.e. no noise)
    with pytest.raises((OverflowError, ZeroDivisionError)):
        assert 2.0 / (math.exp(1000.0) + 1.0) > 0
    with pytest.raises(InvalidParameterError, match="700"):
        pure_epsilon_event(eps)
    with pytest.raises(InvalidParameterError, match="700"):
        grr_probabilities(eps, 3)
