"""Binary RR and k-ary GRR: output law, exact ratio, estimator, events, bad input."""

from __future__ import annotations

import math

import pytest
import torch
from _mechanism_stats import ALPHA, chi_square_pvalue, gen, max_ratio
from dp_accounting import privacy_accountant as pa
from dp_accounting.pld import pld_privacy_accountant as pld

from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.mechanisms import (GRR, RandomizedResponse, generalized_randomized_response,
                                   grr_frequencies, grr_probabilities, pure_epsilon_event)

LABEL = PrivacyUnit.LABEL


def grr_law_pvalue(mech, *, claimed_epsilon: float, k: int, true_value: int, n: int, seed: int) -> float:
    """Chi-square of ``mech``'s reports of ``true_value`` against GRR(claimed_epsilon, k)."""
    y = mech(torch.full((n,), true_value, dtype=torch.int64), generator=gen(seed))
    counts = torch.bincount(y, minlength=k)
    p, q = grr_probabilities(claimed_epsilon, k)
    expected = [p if j == true_value else q for j in range(k)]
    return chi_square_pvalue(counts, expected)


@pytest.mark.statistical
@pytest.mark.parametrize("k,eps", [(2, 0.1), (3, 1.0), (7, 3.0)])
def test_grr_output_law_matches_formula(k, eps):
    n = 200_000
    good = GRR(epsilon=eps, num_categories=k, unit=LABEL)
    assert grr_law_pvalue(good, claimed_epsilon=eps, k=k, true_value=k - 1, n=n, seed=k) > ALPHA
    # positive control: keep probability computed from eps / 2
    broken = GRR(epsilon=eps / 2, num_categories=k, unit=LABEL)
    assert grr_law_pvalue(broken, claimed_epsilon=eps, k=k, true_value=k - 1, n=n, seed=k) < ALPHA


@pytest.mark.statistical
def test_grr_keep_rate_within_4_sigma_and_others_uniform():
    k, eps, n = 5, 1.0, 400_000
    p, q = grr_probabilities(eps, k)
    y = GRR(epsilon=eps, num_categories=k, unit=LABEL)(torch.full((n,), 2), generator=gen(7))
    keep = float((y == 2).double().mean())
    assert abs(keep - p) < 4 * math.sqrt(p * (1 - p) / n)
    others = torch.bincount(y[y != 2], minlength=k)[[0, 1, 3, 4]]
    assert chi_square_pvalue(others, [0.25] * 4) > ALPHA


@pytest.mark.statistical
def test_binary_rr_output_law_with_positive_control():
    eps, n = 1.0, 100_000
    x = torch.cat([torch.zeros(n), torch.ones(n)])

    def pvalue(mech) -> float:
        y = mech(x, generator=gen(3))
        assert y.dtype == x.dtype
        flips = int((y != x).sum())
        keep = math.exp(eps) / (1 + math.exp(eps))
        return chi_square_pvalue([2 * n - flips, flips], [keep, 1 - keep])

    assert pvalue(RandomizedResponse(epsilon=eps, unit=PrivacyUnit.EDGE)) > ALPHA
    assert pvalue(RandomizedResponse(epsilon=eps / 2, unit=PrivacyUnit.EDGE)) < ALPHA


def test_binary_rr_keeps_dtype_and_accepts_bool():
    y = RandomizedResponse(epsilon=1.0, unit="edge")(torch.tensor([True, False] * 10), generator=gen(0))
    assert y.dtype == torch.bool


def test_exact_worst_case_ratio_equals_e_eps():
    eps = 1.3
    for k in (2, 3, 6):
        mech = GRR(epsilon=eps, num_categories=k, unit=LABEL)
        x = torch.arange(k)[:, None].expand(k, k)
        y = torch.arange(k)[None, :].expand(k, k)
        prob = mech.probability(x, y)
        assert torch.allclose(prob.sum(dim=1), torch.ones(k, dtype=torch.float64))
        assert max_ratio(prob) == pytest.approx(math.exp(eps), rel=1e-12)
    rr = RandomizedResponse(epsilon=eps, unit="edge")
    prob = rr.probability(torch.tensor([[0, 0], [1, 1]]), torch.tensor([[0, 1], [0, 1]]))
    assert max_ratio(prob) == pytest.approx(math.exp(eps), rel=1e-12)


def test_events_match_dp_accounting_semantics():
    eps = 0.8
    for event in (GRR(epsilon=eps, num_categories=5, unit=LABEL).event,
                  RandomizedResponse(epsilon=eps, unit="edge").event, pure_epsilon_event(eps)):
        acc = pld.PLDAccountant(pa.NeighboringRelation.REPLACE_ONE)
        acc.compose(event)
        assert acc.get_epsilon(0.0) == pytest.approx(eps, abs=2e-4)
    mech = GRR(epsilon=eps, num_categories=5, unit=LABEL)
    p_noise = mech.event.noise_parameter
    assert 1 - p_noise + p_noise / 5 == pytest.approx(mech.keep_probability, rel=1e-12)
    assert mech.relation is NeighboringRelation.REPLACE and mech.unit is LABEL


def test_functional_core_matches_class_stream():
    x = torch.randint(0, 4, (1000,), generator=gen(1))
    a = generalized_randomized_response(x, epsilon=1.0, num_categories=4, generator=gen(5))
    b = GRR(epsilon=1.0, num_categories=4, unit=LABEL)(x, generator=gen(5))
    assert torch.equal(a, b)
    assert torch.equal(x, torch.randint(0, 4, (1000,), generator=gen(1)))  # input untouched


@pytest.mark.statistical
def test_grr_frequency_estimator_unbiased_with_positive_control():
    k, eps, n = 6, 0.5, 400_000
    pi = torch.tensor([0.35, 0.25, 0.15, 0.12, 0.08, 0.05], dtype=torch.float64)
    x = torch.multinomial(pi, n, replacement=True, generator=gen(11))
    truth = torch.bincount(x, minlength=k).double() / n  # the population being estimated
    counts = torch.bincount(GRR(epsilon=eps, num_categories=k, unit=LABEL)(x, generator=gen(12)),
                            minlength=k)
    p, q = grr_probabilities(eps, k)
    lam_u = truth * p + (1 - truth) * q  # P[report j] averaged over users
    se = torch.sqrt(lam_u * (1 - lam_u) / n) / (p - q)  # conservative (binomial) SE
    estimate = grr_frequencies(counts, epsilon=eps, num_categories=k)
    assert float(estimate.sum()) == pytest.approx(1.0)
    assert (torch.abs(estimate - truth) < 4 * se).all()
    # positive controls: the raw report shares, and P^-1 with a misstated epsilon, are biased
    assert (torch.abs(counts / n - truth) > 4 * se).any()
    wrong = grr_frequencies(counts, epsilon=0.6, num_categories=k)
    assert (torch.abs(wrong - truth) > 4 * se).any()


def test_grr_estimator_is_the_inverse_matrix_and_keeps_argmax():
    k, eps = 4, 0.7
    p, q = grr_probabilities(eps, k)
    matrix = (p - q) * torch.eye(k, dtype=torch.float64) + q
    lam = torch.rand(50, k, generator=gen(2), dtype=torch.float64)
    closed = grr_frequencies(lam, epsilon=eps, num_categories=k, normalize=False)
    assert torch.allclose(closed, lam @ torch.linalg.inv(matrix))
    assert torch.equal(closed.argmax(dim=1), lam.argmax(dim=1))


def test_reference_probabilities_from_spec():
    # spec 004 §3.3: (eps, c) -> (p, q)
    assert grr_probabilities(3.0, 6) == pytest.approx((0.8007, 0.0399), abs=1e-4)
    assert grr_probabilities(0.5, 7) == pytest.approx((0.2156, 0.1307), abs=1e-4)


def test_bad_input_raises_clear_errors():
    with pytest.raises(InvalidParameterError, match="epsilon"):
        GRR(epsilon=0.0, num_categories=3, unit=LABEL)
    with pytest.raises(InvalidParameterError, match="epsilon"):
        RandomizedResponse(epsilon=-1.0, unit="edge")
    with pytest.raises(InvalidParameterError, match="num_categories"):
        GRR(epsilon=1.0, num_categories=1, unit=LABEL)
    mech = GRR(epsilon=1.0, num_categories=3, unit=LABEL)
    with pytest.raises(InvalidParameterError, match=r"labels\) in \[0, 3\).*outside \[0, 3\): 3"):
        mech(torch.tensor([0, 1, 3]))
    with pytest.raises(InvalidParameterError, match="outside"):
        mech(torch.tensor([-1, 0]))
    with pytest.raises(InvalidParameterError, match="integer tensor"):
        mech(torch.tensor([0.0, 1.0]))
    with pytest.raises(InvalidParameterError, match="keep_probability"):
        GRR.from_keep_probability(0.2, num_categories=4, unit=LABEL)  # <= 1/k
    with pytest.raises(InvalidParameterError, match="keep_probability"):
        GRR.from_keep_probability(1.5, num_categories=4, unit=LABEL)
    with pytest.raises(InvalidParameterError, match="flip_probability"):
        RandomizedResponse.from_flip_probability(0.5, unit="edge")
    with pytest.raises(InvalidParameterError, match="flip_probability"):
        RandomizedResponse.from_flip_probability(-0.1, unit="edge")
    with pytest.raises(InvalidParameterError, match="bits"):
        RandomizedResponse(epsilon=1.0, unit="edge")(torch.tensor([0.0, 0.5]))
    with pytest.raises(InvalidParameterError, match="unit"):
        GRR(epsilon=1.0, num_categories=3, unit="person")
    with pytest.raises(InvalidParameterError, match="generator"):
        mech(torch.tensor([0]), generator=123)


def test_probability_constructors_round_trip_and_repr():
    mech = GRR.from_keep_probability(0.6, num_categories=4, unit=LABEL)
    assert mech.keep_probability == pytest.approx(0.6)
    rr = RandomizedResponse.from_flip_probability(0.1, unit="edge")
    assert rr.epsilon == pytest.approx(math.log(9.0))
    assert repr(mech).startswith("GRR(epsilon=") and "unit='label'" in repr(mech)
