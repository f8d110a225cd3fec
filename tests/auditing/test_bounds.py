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
    out = empirical_epsilon(member, nonmember, delta=delta, selection="same")
    true_eps = gdp_epsilon(2.0, delta)
    assert 0.5 < out["epsilon_lower_bound"] <= true_eps
    assert 1.6 < out["mu_lower_bound"] <= 2.0
    assert out["epsilon_estimate_gdp"] <= true_eps and "epsilon_lower_bound_gdp" not in out
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


# ---------------------------------------------------------------- issue 22 item 3
REPS, RUNS, TRUE_EPS = 1000, 1000, 1.0


def _laplace_bounds(selection: str) -> np.ndarray:
    """95 % lower bounds of REPS audits of the Laplace mechanism (sensitivity 1, scale
    1 / TRUE_EPS, so exactly TRUE_EPS-DP at delta 0) with RUNS runs per world, every score
    a candidate threshold; the held-out selection chooses its threshold on another RUNS
    runs per world."""
    rng = np.random.default_rng(20260)
    out = np.empty(REPS)
    for r in range(REPS):
        member, nonmember = rng.laplace(1.0, 1 / TRUE_EPS, RUNS), rng.laplace(0.0, 1 / TRUE_EPS, RUNS)
        holdout = (rng.laplace(1.0, 1 / TRUE_EPS, RUNS), rng.laplace(0.0, 1 / TRUE_EPS, RUNS))
        out[r] = empirical_epsilon(member, nonmember, delta=0.0, selection=selection,
                                   holdout=holdout if selection == "heldout" else None,
                                   num_thresholds=None, generator=rng)["epsilon_lower_bound"]
    return out


def _allowed_exceedances() -> int:
    # at most 5 % of 95 % lower bounds may exceed the truth; binomial slack at level 1e-3
    return int(stats.binom.ppf(1 - 1e-3, REPS, 0.05))


@pytest.mark.parametrize("selection", ["heldout", pytest.param("split", marks=pytest.mark.slow)])
def test_at_most_five_percent_of_lower_bounds_exceed_a_known_epsilon(selection):
    bounds = _laplace_bounds(selection)
    assert (bounds > TRUE_EPS).sum() <= _allowed_exceedances()       # 71 of 1,000
    assert np.median(bounds) > 0.4 * TRUE_EPS                          # and not vacuous


def test_the_same_sample_threshold_over_claims():
    """The broken control: the threshold maximised on the runs the bound counts (the
    default before issue 22) exceeds the truth in 80 of its 1,000 '95 %' bounds (worst
    1.75; held-out: 1, worst 1.018)."""
    bounds = _laplace_bounds("same")
    assert (bounds > TRUE_EPS).sum() > _allowed_exceedances()


def test_heldout_without_holdout_runs_splits():
    rng = np.random.default_rng(3)
    out = empirical_epsilon(rng.normal(1, 1, 400), rng.normal(0, 1, 400), delta=1e-5)
    assert out["selection"] == "split" and out["runs"] == 200
