"""Clopper-Pearson, threshold search and the GDP conversion of gnnprivacy.auditing.bounds."""

import math

import numpy as np
import pytest
from scipy import stats

from gnnprivacy.auditing.bounds import (clopper_pearson_upper, empirical_epsilon,
                                        epsilon_from_rates, gdp_delta, gdp_epsilon,
                                        gdp_mu_from_rates, threshold_rates)
from gnnprivacy.errors import InvalidParameterError


def test_clopper_pearson_reference_values():
    # k = 0 of n: closed form 1 - alpha^(1/n)
    assert clopper_pearson_upper(0, 100, 0.025) == pytest.approx(1 - 0.025 ** (1 / 100))
    assert clopper_pearson_upper(100, 100, 0.025) == 1.0
    # covers the true proportion in ~97.5% of repetitions (statistical, fixed seed)
    rng = np.random.default_rng(0)
    k = rng.binomial(200, 0.3, size=4000)
    cover = (clopper_pearson_upper(k, 200, 0.025) >= 0.3).mean()
    assert 0.97 <= cover <= 0.99


def test_epsilon_from_rates_matches_definition():
    eps = epsilon_from_rates(0.01, 0.5, 1e-5)
    assert eps == pytest.approx(math.log((1 - 1e-5 - 0.5) / 0.01))
    assert epsilon_from_rates(0.6, 0.6, 0.0) == 0.0


def test_gdp_conversion_round_trip_and_reference():
    for mu in (0.5, 1.0, 2.0):
        eps = gdp_epsilon(mu, 1e-5)
        assert gdp_delta(eps, mu) == pytest.approx(1e-5, rel=1e-6)
    # mu = 1 at delta = 1e-5: about 4.4 (Dong, Roth, Su 2022, Fig. / closed form)
    assert 4.0 < gdp_epsilon(1.0, 1e-5) < 4.8
    assert gdp_epsilon(0.0, 1e-5) == 0.0
    # mu from exact Gaussian rates at any threshold recovers mu
    mu, t = 1.3, 0.4
    fpr, fnr = 1 - stats.norm.cdf(t), stats.norm.cdf(t - mu)
    assert gdp_mu_from_rates(fpr, fnr) == pytest.approx(mu)


def test_threshold_rates_counts():
    fp, fn = threshold_rates([1, 2, 3], [0, 1, 2], [1.5, 2.5])
    assert fp.tolist() == [1, 0] and fn.tolist() == [1, 2]


def test_empirical_epsilon_gaussian_is_below_truth_and_close():
    """One Gaussian mechanism with mu = 2: the CP bound stays below the true eps(delta), the
    GDP mu bound below 2 but close to it."""
    rng = np.random.default_rng(1)
    delta = 1e-5
    member, nonmember = rng.normal(2.0, 1, 20000), rng.normal(0.0, 1, 20000)
    out = empirical_epsilon(member, nonmember, delta=delta)
    true_eps = gdp_epsilon(2.0, delta)
    assert 0.5 < out["epsilon_lower_bound"] <= true_eps
    assert 1.6 < out["mu_lower_bound"] <= 2.0
    assert out["epsilon_lower_bound_gdp"] <= true_eps
    split = empirical_epsilon(member, nonmember, delta=delta, selection="split",
                              generator=np.random.default_rng(0))
    assert 0 < split["epsilon_lower_bound"] <= out["epsilon_lower_bound"] + 0.2
    assert 0.8 < out["mia_auc"] < 0.95


def test_no_signal_gives_zero():
    rng = np.random.default_rng(2)
    out = empirical_epsilon(rng.normal(size=5000), rng.normal(size=5000), delta=1e-5)
    assert out["epsilon_lower_bound"] < 0.15
    assert abs(out["mia_accuracy"] - 0.5) < 0.03


def test_validation():
    with pytest.raises(InvalidParameterError):
        empirical_epsilon([1.0], [0.0, 1.0], delta=1e-5)
    with pytest.raises(InvalidParameterError):
        empirical_epsilon([1.0, 2.0], [0.0, 1.0], delta=1e-5, selection="bogus")
