"""GRR-FS (spec 004 §3.2, §4.1, §9.3, §12 checks 2-4): law, exact privacy, estimator, bad input."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from _mechanism_stats import ALPHA, bit_vectors, chi_square_pvalue, gen, max_ratio
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.mechanisms import GRRFS, grr_fs_frequencies, grr_probabilities
from gnnprivacy.mechanisms._random import RandomSource
from gnnprivacy.mechanisms.grr_fs import _grr_fs_epsilon


def codes(y: torch.Tensor) -> torch.Tensor:
    """Binary rows -> integers (first column most significant)."""
    d = y.size(1)
    return (y * (2 ** torch.arange(d - 1, -1, -1))).sum(dim=1)


def brute_force_probability(x, y, *, eps_x: float, m: int, gammas) -> float:
    """P[y | x] by explicit enumeration of the C(d, m) subsets (independent of GRRFS.probability)."""
    d = len(gammas)
    total = 0.0
    for subset in itertools.combinations(range(d), m):
        term = 1.0
        for i in range(d):
            if i in subset:
                p, q = grr_probabilities(eps_x, gammas[i]) if gammas[i] > 1 else (1.0, 0.0)
                term *= p if int(x[i]) == int(y[i]) else q
            else:
                term /= gammas[i]
        total += term
    return total / math.comb(d, m)


def exact_matrix(mech: GRRFS, inputs: torch.Tensor, outputs: torch.Tensor) -> torch.Tensor:
    """``(len(inputs), len(outputs))`` exact probabilities via ``mech.probability``."""
    a, b = len(inputs), len(outputs)
    x = inputs[:, None, :].expand(a, b, -1).reshape(a * b, -1)
    y = outputs[None, :, :].expand(a, b, -1).reshape(a * b, -1)
    return mech.probability(x, y).reshape(a, b)


# ---------------------------------------------------------------- output law (statistical)

def joint_law_pvalue(mech: GRRFS, *, claimed: GRRFS, x_row, n: int, seed: int) -> float:
    x = torch.tensor([x_row] * n)
    counts = torch.bincount(codes(mech(x, generator=gen(seed))), minlength=2 ** len(x_row))
    expected = exact_matrix(claimed, torch.tensor([x_row]), bit_vectors(len(x_row)))[0]
    return chi_square_pvalue(counts, expected)


@pytest.mark.statistical
def test_joint_output_law_matches_exact_formula_with_positive_control():
    mech = GRRFS(epsilon=2.0, num_features=3, m=2)
    assert joint_law_pvalue(mech, claimed=mech, x_row=[1, 0, 1], n=100_000, seed=1) > ALPHA
    # positive control: per-feature budget eps/(2m) instead of eps/m
    broken = GRRFS(epsilon=1.0, num_features=3, m=2)
    assert joint_law_pvalue(broken, claimed=mech, x_row=[1, 0, 1], n=100_000, seed=1) < ALPHA


@pytest.mark.statistical
def test_feature_marginals_match_mixture_of_grr_and_uniform():
    d, m, eps_x, n = 6, 2, 0.8, 100_000
    gammas = [2, 3, 4, 2, 3, 5]
    mech = GRRFS.from_feature_epsilon(eps_x, num_features=d, m=m, domain_sizes=gammas)
    x_row = [1, 2, 0, 0, 1, 4]
    y = mech(torch.tensor([x_row] * n), generator=gen(4))
    for i, gamma in enumerate(gammas):
        p, q = grr_probabilities(eps_x, gamma)
        law = [(m / d) * (p if j == x_row[i] else q) + (1 - m / d) / gamma for j in range(gamma)]
        assert chi_square_pvalue(torch.bincount(y[:, i], minlength=gamma), law) > ALPHA / d


def subset_counts(mask: torch.Tensor, m: int) -> torch.Tensor:
    """Counts of each of the C(d, m) subsets (rows of a boolean mask), in a fixed order."""
    d = mask.size(1)
    codes = (mask.to(torch.int64) * 2 ** torch.arange(d)).sum(dim=1)
    valid = [sum(1 << i for i in s) for s in itertools.combinations(range(d), m)]
    return torch.bincount(codes, minlength=2**d)[valid]


@pytest.mark.statistical
def test_sampled_sets_are_exactly_m_and_uniform_over_subsets():
    n = 50_000
    for d, m in ((5, 2), (5, 4)):  # 4 > d/2 exercises the complement branch
        mask = RandomSource(gen(9)).random_subsets(n, d, m)
        assert (mask.sum(dim=1) == m).all()
        k = math.comb(d, m)
        assert chi_square_pvalue(subset_counts(mask, m), [1 / k] * k) > ALPHA
    # positive control: top-2 of uniform keys that favour column 0 by 20 % is caught
    keys = RandomSource(gen(9)).uniform((n, 5)) * torch.tensor([1.2, 1, 1, 1, 1], dtype=torch.float64)
    biased = torch.zeros(n, 5, dtype=torch.bool).scatter_(1, keys.topk(2, dim=1).indices, True)
    assert chi_square_pvalue(subset_counts(biased, 2), [0.1] * 10) < ALPHA


def test_degenerate_cases_identity_and_pure_noise():
    x = bit_vectors(4).repeat(50, 1)
    identity = GRRFS(epsilon=4 * 60.0, num_features=4)  # m = d, keep prob 1 - e^-60
    assert torch.equal(identity(x, generator=gen(0)), x)
    # a constant feature (domain size 1) is reported as is
    mech = GRRFS(epsilon=1.0, num_features=2, m=1, domain_sizes=[1, 3])
    y = mech(torch.tensor([[0, 2]] * 200), generator=gen(1))
    assert (y[:, 0] == 0).all() and set(y[:, 1].tolist()) <= {0, 1, 2}


# ---------------------------------------------------------------- exact privacy (the gap)

def test_probability_matches_brute_force_enumeration():
    gammas = [2, 3, 2, 4]
    mech = GRRFS.from_feature_epsilon(0.9, num_features=4, m=2, domain_sizes=gammas)
    x = torch.tensor([1, 2, 0, 3])
    outputs = torch.tensor(list(itertools.product(*[range(g) for g in gammas])))
    prob = exact_matrix(mech, x[None, :], outputs)[0]
    assert float(prob.sum()) == pytest.approx(1.0, abs=1e-12)
    for y, p in zip(outputs[::5], prob[::5], strict=True):
        assert float(p) == pytest.approx(brute_force_probability(x, y, eps_x=0.9, m=2, gammas=gammas),
                                         rel=1e-12)


# spec 004 §9.3 table: (d, m, eps_x) -> exact LDP eps, paper eps_X, single-feature-neighbour eps
SPEC_TABLE = [(3, 1, 1.0, 1.0, 0.4528, 0.4528), (4, 2, 1.0, 2.0, 1.4338, 0.6201),
              (5, 2, 0.5, 1.0, 0.5231, 0.2307), (6, 3, 0.3, 0.9, 0.5480, 0.1612),
              (6, 2, 2.0, 4.0, 2.9374, 1.1409)]


@pytest.mark.parametrize("d,m,eps_x,exact,paper,attribute", SPEC_TABLE)
def test_exact_worst_case_ratio_is_sound_epsilon_and_exceeds_paper(d, m, eps_x, exact, paper, attribute):
    mech = GRRFS.from_feature_epsilon(eps_x, num_features=d, m=m)
    vectors = bit_vectors(d)
    prob = exact_matrix(mech, vectors, vectors)
    worst = math.log(max_ratio(prob))
    assert worst == pytest.approx(exact, abs=1e-9)
    assert worst == pytest.approx(mech.epsilon, abs=1e-9)  # the sound per-user epsilon is tight
    assert mech.paper_epsilon == pytest.approx(paper, abs=1e-4)
    assert worst > mech.paper_epsilon + 0.3  # the gap: the paper's figure is not a valid bound
    hamming_one = (vectors[:, None, :] != vectors[None, :, :]).sum(dim=2) == 1
    assert math.log(max_ratio(prob, hamming_one)) == pytest.approx(attribute, abs=1e-4)
    assert _grr_fs_epsilon(eps_x, m, d, "attribute") == pytest.approx(attribute, abs=1e-4)


def test_heterogeneous_domains_worst_case_ratio_is_m_eps_x():
    gammas = [2, 3, 4]
    mech = GRRFS.from_feature_epsilon(0.7, num_features=3, m=2, domain_sizes=gammas)
    vectors = torch.tensor(list(itertools.product(*[range(g) for g in gammas])))
    prob = exact_matrix(mech, vectors, vectors)
    assert torch.allclose(prob.sum(dim=1), torch.ones(len(vectors), dtype=torch.float64))
    assert math.log(max_ratio(prob)) == pytest.approx(2 * 0.7, abs=1e-9)


@settings(max_examples=20, deadline=None)
@given(d=st.integers(1, 5), data=st.data(), eps_x=st.floats(0.05, 3.0))
def test_property_exact_ldp_epsilon_equals_m_eps_x(d, data, eps_x):
    m = data.draw(st.integers(1, d))
    mech = GRRFS.from_feature_epsilon(eps_x, num_features=d, m=m)
    vectors = bit_vectors(d)
    worst = math.log(max_ratio(exact_matrix(mech, vectors, vectors)))
    assert worst == pytest.approx(m * eps_x, rel=1e-9)
    assert worst >= mech.paper_epsilon - 1e-12


def test_grr_fs_epsilon_modes():
    assert _grr_fs_epsilon(0.5, 4, 20, "sound") == 2.0
    assert _grr_fs_epsilon(0.5, 4, 20) == 2.0  # sound is the default
    assert _grr_fs_epsilon(0.5, 4, 20, "paper") == pytest.approx(math.log(1 + 0.2 * (math.exp(2) - 1)))
    with pytest.raises(InvalidParameterError, match="mode"):
        _grr_fs_epsilon(0.5, 4, 20, "amplified")


def test_privacy_metadata_event_and_repr():
    mech = GRRFS(epsilon=10.0, num_features=53, m=10)
    assert mech.feature_epsilon == pytest.approx(1.0)
    assert mech.paper_epsilon == pytest.approx(8.3325, abs=1e-4)  # spec 004 §9.1 (Citeseer)
    assert mech.unit is PrivacyUnit.FEATURE and mech.relation is NeighboringRelation.REPLACE
    assert mech.event.num_buckets == 2
    assert mech.event.noise_parameter == pytest.approx(2 / (math.exp(10.0) + 1))
    assert "paper_epsilon=8.33" in repr(mech) and "feature_epsilon=1" in repr(mech)


# ---------------------------------------------------------------- grouping and bad input

def test_or_grouping_before_sampling():
    x = torch.tensor([[0, 3, 0, 0, 0], [0, 0, 0, 0, 1], [0, 0, 0, 0, 0]], dtype=torch.float32)
    mech = GRRFS(epsilon=2 * 60.0, num_features=5, group_size=2)  # d' = 3, m = 3, near-identity
    assert mech.num_reported == 3
    assert torch.equal(mech.prepare(x), torch.tensor([[1, 0, 0], [0, 0, 1], [0, 0, 0]]))
    assert torch.equal(mech(x, generator=gen(0)), mech.prepare(x))


def test_bad_input_raises_clear_errors():
    with pytest.raises(InvalidParameterError,
                       match="non-binary features given to GRR-FS without grouping.*containing 2"):
        GRRFS(epsilon=1.0, num_features=3, m=2)(torch.tensor([[0, 2, 1]]))
    with pytest.raises(InvalidParameterError, match="non-binary features given to GRR-FS without grouping"):
        GRRFS(epsilon=1.0, num_features=2, m=1)(torch.tensor([[0.5, 1.0]]))
    with pytest.raises(InvalidParameterError,
                       match=r"parameter 'm' must be an integer in \[1, 3\]; received 4"):
        GRRFS(epsilon=1.0, num_features=3, m=4)
    with pytest.raises(InvalidParameterError, match="'m'"):
        GRRFS(epsilon=1.0, num_features=10, m=4, group_size=5)  # d' = 2 < m
    for eps in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(InvalidParameterError, match="epsilon"):
            GRRFS(epsilon=eps, num_features=3, m=1)
    with pytest.raises(InvalidParameterError, match=r"\(n, 3\)"):
        GRRFS(epsilon=1.0, num_features=3, m=1)(torch.zeros(2, 4))
    with pytest.raises(InvalidParameterError, match="domain_sizes"):
        GRRFS(epsilon=1.0, num_features=3, m=1, domain_sizes=[2, 0, 2])
    with pytest.raises(InvalidParameterError, match="domain_sizes"):
        GRRFS(epsilon=1.0, num_features=3, m=1, domain_sizes=[2, 2, 2], group_size=2)
    with pytest.raises(InvalidParameterError, match="domain_sizes"):
        GRRFS(epsilon=1.0, num_features=2, m=1, domain_sizes=[2, 3])(torch.tensor([[0, 3]]))
    with pytest.raises(InvalidParameterError, match="non-negative"):
        GRRFS(epsilon=1.0, num_features=2, m=1, group_size=2)(torch.tensor([[-1.0, 0.0]]))


# ---------------------------------------------------------------- estimator (eq. 5)

def test_estimator_constants_from_spec():
    # spec 004 §4.1: Citeseer d = 53, m = 10, eps_x = 1 -> slope 11.4690, intercept -5.2345
    counts = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    est = grr_fs_frequencies(counts, feature_epsilon=1.0, m=10, num_features=53)
    assert float(est[0, 1] - est[1, 1]) == pytest.approx(11.4690, abs=1e-4)
    assert float(est[1, 1]) == pytest.approx(-5.2345, abs=1e-4)


def paper_eq9_typo_estimator(counts, *, eps_x, m, d, gamma):
    """Positive control: eq. 9's intercept with (p - q)^2 in the denominator (spec 004 §13.3)."""
    p, q = grr_probabilities(eps_x, gamma)
    lam = counts / counts.sum(dim=-1, keepdim=True)
    return d * lam / (m * (p - q)) + (m - d - m * gamma * q) / (m * gamma * (p - q) ** 2)


@pytest.mark.statistical
def test_estimator_unbiased_and_variance_matches_poisson_binomial():
    # spec 004 §12 check 4, with d = 10, m = 2 (same m/d) and R = 2000 to stay fast
    n, d, m, gamma, eps_x, reps = 500, 10, 2, 3, 0.7, 2000
    mech = GRRFS.from_feature_epsilon(eps_x, num_features=d, m=m, domain_sizes=[gamma] * d)
    column = torch.tensor([0] * 300 + [1] * 150 + [2] * 50)  # true shares (0.6, 0.3, 0.1)
    truth = torch.tensor([0.6, 0.3, 0.1], dtype=torch.float64)
    x = column[:, None].expand(n, d).repeat(reps, 1)
    reports = mech(x, generator=gen(21))[:, 0].view(reps, n)
    counts = torch.nn.functional.one_hot(reports, gamma).sum(dim=1)  # (reps, gamma)
    est = mech.estimate_frequencies(counts)
    p, q = grr_probabilities(eps_x, gamma)
    lam_u = (m / d) * torch.where(column[:, None] == torch.arange(gamma), p, q) + (1 - m / d) / gamma
    exact_var = d**2 * (lam_u * (1 - lam_u)).sum(dim=0) / (n**2 * m**2 * (p - q) ** 2)
    se_mean = torch.sqrt(exact_var / reps)
    assert (torch.abs(est.mean(dim=0) - truth) < 4 * se_mean).all()
    ratio = est.var(dim=0) / exact_var
    assert ((ratio > 0.9) & (ratio < 1.1)).all(), ratio
    lam_bar = lam_u.mean(dim=0)  # eq. 11 (binomial) is an upper bound
    assert (exact_var <= d**2 * lam_bar * (1 - lam_bar) / (n * m**2 * (p - q) ** 2) + 1e-15).all()
    typo = paper_eq9_typo_estimator(counts.double(), eps_x=eps_x, m=m, d=d, gamma=gamma)
    assert (torch.abs(typo.mean(dim=0) - truth) > 4 * se_mean).any()


def test_estimator_keeps_argmax_and_is_linear_in_unnormalised_counts():
    lam = torch.rand(100, 3, generator=gen(5), dtype=torch.float64)
    est = grr_fs_frequencies(lam, feature_epsilon=0.4, m=3, num_features=9, domain_size=3)
    assert torch.equal(est.argmax(dim=1), lam.argmax(dim=1))
    raw = grr_fs_frequencies(lam, feature_epsilon=0.4, m=3, num_features=9, domain_size=3,
                             normalize=False)
    assert torch.allclose(raw, est * lam.sum(dim=1, keepdim=True))
    with pytest.raises(InvalidParameterError, match="counts"):
        grr_fs_frequencies(-lam, feature_epsilon=0.4, m=3, num_features=9, domain_size=3)
    with pytest.raises(InvalidParameterError, match="'m'"):
        grr_fs_frequencies(lam, feature_epsilon=0.4, m=10, num_features=9, domain_size=3)
