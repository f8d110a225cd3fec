"""Papernot & Steinke (ICLR 2022) tuning bounds: distributions and RDP formulas."""

import math

import numpy as np
import pytest

from gnnprivacy.accounting.hparam_tuning import (PoissonTrials, TruncatedNegativeBinomial,
                                                 trials_distribution, tuned_epsilon, tuned_rdp)
from gnnprivacy.accounting.rdp_builders import rdp_to_delta, rdp_to_epsilon
from gnnprivacy.errors import InvalidParameterError

ORDERS = np.concatenate([np.linspace(1.1, 10.9, 50), np.arange(11, 257, dtype=float)])


def gaussian_rdp(sigma, orders=ORDERS):
    return orders / (2 * sigma ** 2)


@pytest.mark.parametrize("eta,gamma", [(1.0, 0.1), (0.0, 0.05), (-0.5, 0.2), (2.5, 0.3)])
def test_pmf_sums_to_one_and_mean_matches_formula(eta, gamma):
    d = TruncatedNegativeBinomial(eta, gamma)
    k = np.arange(0, 5000)
    p = d.pmf(k)
    assert p[0] == 0
    assert p.sum() == pytest.approx(1.0, abs=1e-9)
    assert (k * p).sum() == pytest.approx(d.mean(), rel=1e-8)


def test_special_cases_geometric_and_logarithmic():
    g = 0.2
    k = np.arange(1, 30)
    assert np.allclose(TruncatedNegativeBinomial(1.0, g).pmf(k), g * (1 - g) ** (k - 1))
    assert TruncatedNegativeBinomial(1.0, g).mean() == pytest.approx(1 / g)
    assert np.allclose(TruncatedNegativeBinomial(0.0, g).pmf(k),
                       (1 - g) ** k / (k * math.log(1 / g)))
    # eta -> 0 is continuous with the logarithmic case
    assert TruncatedNegativeBinomial(1e-7, g).mean() == pytest.approx(
        TruncatedNegativeBinomial(0.0, g).mean(), rel=1e-5)


def test_with_mean_and_sampling():
    d = TruncatedNegativeBinomial.with_mean(10.0, eta=1.0)
    assert d.mean() == pytest.approx(10.0, rel=1e-9) and d.gamma == pytest.approx(0.1)
    rng = np.random.default_rng(0)
    draws = [d.sample(rng) for _ in range(4000)]
    assert min(draws) >= 1 and np.mean(draws) == pytest.approx(10.0, rel=0.06)
    assert trials_distribution("poisson", mean=5).mean() == 5
    with pytest.raises(InvalidParameterError):
        TruncatedNegativeBinomial(-1.0, 0.5)
    with pytest.raises(InvalidParameterError):
        trials_distribution("uniform", mean=3)


def test_tnb_matches_theorem_2_by_hand():
    eta, gamma, sigma = 1.0, 0.1, 3.0
    base = gaussian_rdp(sigma)
    d = TruncatedNegativeBinomial(eta, gamma)
    got = tuned_rdp(ORDERS, base, d)
    # by hand: min over lam_hat of (1+eta)(1-1/lh) eps(lh) + (1+eta) log(1/gamma)/lh
    lh = ORDERS
    extra = np.min((1 + eta) * (1 - 1 / lh) * lh / (2 * sigma ** 2) + (1 + eta) * math.log(10) / lh)
    # the continuous minimiser of (1+eta)[(lh-1)/(2 s^2) + log(1/g)/lh] is sqrt(2 s^2 log(1/g))
    lh_star = math.sqrt(2 * sigma ** 2 * math.log(10))
    cont = 2 * ((lh_star - 1) / (2 * sigma ** 2) + math.log(10) / lh_star)
    assert extra == pytest.approx(cont, rel=1e-3)
    want = base + extra + math.log(10.0) / (ORDERS - 1)
    assert np.allclose(got, want)


def test_poisson_matches_theorem_6_by_hand():
    mu, sigma = 5.0, 4.0
    base = gaussian_rdp(sigma)
    got = tuned_rdp(ORDERS, base, PoissonTrials(mu))
    i = 30
    lam = ORDERS[i]
    dh, _ = rdp_to_delta(ORDERS, base, math.log(1 + 1 / (lam - 1)))
    assert got[i] == pytest.approx(base[i] + mu * dh + math.log(mu) / (lam - 1))


def test_tuning_costs_less_than_composing_expected_trials_and_more_than_one_run():
    delta = 1e-5
    base = gaussian_rdp(4.0)
    one = rdp_to_epsilon(ORDERS, base, delta)[0]
    for d in (TruncatedNegativeBinomial.with_mean(10, eta=1.0), TruncatedNegativeBinomial.with_mean(10, eta=0.0),
              PoissonTrials(10.0)):
        tuned = tuned_epsilon(ORDERS, base, d, delta)
        composed = rdp_to_epsilon(ORDERS, 10 * base, delta)[0]
        assert one < tuned < composed, (d, one, tuned, composed)
    # more trials cost more
    assert (tuned_epsilon(ORDERS, base, TruncatedNegativeBinomial.with_mean(5), delta)
            < tuned_epsilon(ORDERS, base, TruncatedNegativeBinomial.with_mean(50), delta))


def test_positive_control_dropping_the_lam_hat_term_undercounts():
    """A broken variant (Theorem 2 without its lam_hat term) gives a smaller bound: the check
    above would catch it, since the by-hand formula includes the term."""
    base = gaussian_rdp(3.0)
    d = TruncatedNegativeBinomial(1.0, 0.1)
    broken = base + math.log(d.mean()) / (ORDERS - 1)
    assert np.all(tuned_rdp(ORDERS, base, d) > broken + 1e-3)


def test_rejects_bad_orders():
    with pytest.raises(InvalidParameterError):
        tuned_rdp(np.array([1.0, 2.0]), np.array([0.1, 0.2]), PoissonTrials(2.0))
