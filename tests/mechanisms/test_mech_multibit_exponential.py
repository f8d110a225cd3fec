"""LPGNN multi-bit encoder + rectifier, and the exponential mechanism."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from _mechanism_stats import ALPHA, chi_square_pvalue, gen, max_ratio

from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.mechanisms import ExponentialMechanism, MultiBit, lpgnn_default_m

# ---------------------------------------------------------------- multi-bit


def multibit_law_pvalue(mech: MultiBit, *, claimed: MultiBit, x_row, n: int, seed: int) -> float:
    """Chi-square of the per-dimension {-1, 0, 1} counts against ``claimed``'s law."""
    x = torch.tensor([x_row] * n, dtype=torch.float64)
    y = mech(x, generator=gen(seed))
    assert ((y != 0).sum(dim=1) == claimed.m).all()
    prob_one = claimed.one_probability(x[:1])[0]
    rate = claimed.m / claimed.num_features
    pvalues = []
    for i in range(len(x_row)):
        counts = [(y[:, i] == v).sum().item() for v in (-1, 0, 1)]
        law = [rate * (1 - prob_one[i]), 1 - rate, rate * prob_one[i]]
        pvalues.append(chi_square_pvalue(counts, law))
    return min(pvalues) * len(x_row)  # Bonferroni


@pytest.mark.statistical
def test_multibit_output_law_with_positive_control():
    mech = MultiBit(epsilon=2.0, num_features=4, m=2, lower=0.0, upper=1.0)
    row = [0.0, 0.25, 0.8, 1.0]
    assert multibit_law_pvalue(mech, claimed=mech, x_row=row, n=100_000, seed=1) > ALPHA
    # positive control: each sampled dimension spends eps instead of eps / m
    broken = MultiBit(epsilon=2.0 * 2, num_features=4, m=2, lower=0.0, upper=1.0)
    assert multibit_law_pvalue(broken, claimed=mech, x_row=row, n=100_000, seed=1) < ALPHA


def biased_rectifier(mech: MultiBit, x_star: torch.Tensor) -> torch.Tensor:
    """Positive control: a rectifier that forgets the d/m sampling factor."""
    return mech.rectify(x_star) * mech.m / mech.num_features + \
        (1 - mech.m / mech.num_features) * (mech.lower + mech.upper) / 2


@pytest.mark.statistical
def test_rectifier_unbiased_with_positive_control():
    d, m, eps, n = 6, 2, 3.0, 200_000
    lower, upper = torch.tensor([-1.0] * 3 + [0.0] * 3), torch.tensor([1.0] * 3 + [5.0] * 3)
    mech = MultiBit(epsilon=eps, num_features=d, m=m, lower=lower, upper=upper)
    x_row = torch.tensor([-1.0, 0.2, 1.0, 0.0, 2.5, 4.0], dtype=torch.float64)
    x_star = mech(x_row.repeat(n, 1), generator=gen(3))
    rect = mech.rectify(x_star)
    e = math.exp(eps / m)
    scale = d * (upper - lower).double() / (2 * m) * (e + 1) / (e - 1)
    mean_star = (m / d) * (e - 1) / (e + 1) * (2 * (x_row - lower) / (upper - lower) - 1)
    se = scale * torch.sqrt((m / d - mean_star**2) / n)  # exact SD of x' / sqrt(n)
    assert (torch.abs(rect.mean(dim=0) - x_row) < 4 * se).all()
    assert (torch.abs(biased_rectifier(mech, x_star).mean(dim=0) - x_row) > 4 * se).any()


def test_multibit_exact_worst_case_ratio_equals_e_eps():
    eps, d, m = 1.7, 3, 2
    mech = MultiBit(epsilon=eps, num_features=d, m=m, lower=0.0, upper=1.0)
    inputs = torch.tensor(list(itertools.product([0.0, 0.5, 1.0], repeat=d)), dtype=torch.float64)
    outputs = torch.tensor(list(itertools.product([-1.0, 0.0, 1.0], repeat=d)), dtype=torch.float64)
    a, b = len(inputs), len(outputs)
    prob = mech.probability(inputs[:, None].expand(a, b, d).reshape(-1, d),
                            outputs[None].expand(a, b, d).reshape(-1, d)).reshape(a, b)
    assert torch.allclose(prob.sum(dim=1), torch.ones(a, dtype=torch.float64))
    assert max_ratio(prob) == pytest.approx(math.exp(eps), rel=1e-12)


def test_multibit_metadata_defaults_and_bad_input():
    mech = MultiBit(epsilon=10.0, num_features=50, lower=0.0, upper=1.0)
    assert mech.m == lpgnn_default_m(10.0, 50) == 4
    assert MultiBit(epsilon=1.0, num_features=5, lower=0, upper=1).m == 1
    assert mech.unit is PrivacyUnit.FEATURE and mech.relation is NeighboringRelation.REPLACE
    assert mech.sensitivity == 50.0 and mech.event.num_buckets == 2
    assert repr(mech) == "MultiBit(epsilon=10, m=4, num_features=50, unit='feature', secure_mode=False)"
    with pytest.raises(InvalidParameterError, match="'m'"):
        MultiBit(epsilon=1.0, num_features=3, m=4, lower=0.0, upper=1.0)
    with pytest.raises(InvalidParameterError, match="epsilon"):
        MultiBit(epsilon=0.0, num_features=3, lower=0.0, upper=1.0)
    with pytest.raises(InvalidParameterError, match="upper"):
        MultiBit(epsilon=1.0, num_features=3, lower=1.0, upper=1.0)
    with pytest.raises(TypeError):
        MultiBit(epsilon=1.0, num_features=3)  # public bounds are required
    with pytest.raises(InvalidParameterError, match="public bounds"):
        MultiBit(epsilon=1.0, num_features=2, lower=0.0, upper=1.0)(torch.tensor([[0.5, 1.5]]))
    clipped = MultiBit(epsilon=1.0, num_features=2, m=1, lower=0.0, upper=1.0, clip=True)
    assert clipped.one_probability(torch.tensor([[1.5, -2.0]]))[0].tolist() == pytest.approx(
        [math.e / (math.e + 1), 1 / (math.e + 1)])


# ---------------------------------------------------------------- exponential mechanism


def exponential_pvalue(mech, *, claimed_probs, scores, n: int, seed: int) -> float:
    picks = mech(scores.expand(n, -1), generator=gen(seed))
    return chi_square_pvalue(torch.bincount(picks, minlength=scores.numel()), claimed_probs)


@pytest.mark.statistical
def test_exponential_output_law_with_positive_control():
    scores = torch.tensor([0.0, 1.0, 2.5, 2.0, -1.0], dtype=torch.float64)
    eps, sens = 1.2, 1.0
    claimed = torch.softmax(eps * scores / (2 * sens), dim=0)
    good = ExponentialMechanism(epsilon=eps, sensitivity=sens, unit="node")
    assert torch.allclose(good.probabilities(scores), claimed)
    assert exponential_pvalue(good, claimed_probs=claimed, scores=scores, n=50_000, seed=4) > ALPHA
    # positive control: the monotone variant (no factor 2) used where the law needs it
    broken = ExponentialMechanism(epsilon=eps, sensitivity=sens, unit="node", monotonic=True)
    assert exponential_pvalue(broken, claimed_probs=claimed, scores=scores, n=50_000, seed=4) < ALPHA


def test_exponential_exact_worst_case_ratio_within_e_eps():
    eps, sens, k = 0.9, 2.0, 3
    grid = torch.tensor(list(itertools.product([0.0, 1.0, 2.0], repeat=k)), dtype=torch.float64)
    neighbours = (grid[:, None, :] - grid[None, :, :]).abs().amax(dim=2) <= sens  # all pairs here
    mech = ExponentialMechanism(epsilon=eps, sensitivity=sens, unit="node")
    worst = max_ratio(mech.probabilities(grid), neighbours)
    c = math.exp(eps / 2)
    assert worst == pytest.approx(c * (1 + (k - 1) * c) / (c + k - 1), rel=1e-12)  # closed form
    assert worst <= math.exp(eps)
    # the bound is approached with many candidates: one score down by Delta, the rest up
    n = 10_000
    s, s2 = torch.zeros(n, dtype=torch.float64), torch.full((n,), sens, dtype=torch.float64)
    s[0], s2[0] = sens, 0.0
    ratio = float(mech.probabilities(s)[0] / mech.probabilities(s2)[0])
    assert math.exp(eps) * 0.999 < ratio <= math.exp(eps)
    # positive control: the monotone formula on non-monotone neighbours violates e^eps
    loose = ExponentialMechanism(epsilon=eps, sensitivity=sens, unit="node", monotonic=True)
    assert max_ratio(loose.probabilities(grid), neighbours) > math.exp(eps)


def test_exponential_batches_metadata_and_bad_input():
    mech = ExponentialMechanism(epsilon=1.0, sensitivity=1.0, unit="node")
    picks = mech(torch.tensor([[0.0, 100.0, 0.0], [100.0, 0.0, 0.0]]), generator=gen(0))
    assert picks.tolist() == [1, 0] and picks.dtype == torch.int64
    assert mech.event.noise_parameter == pytest.approx(2 / (math.e + 1))
    assert mech.relation is NeighboringRelation.ADD_OR_REMOVE
    assert repr(mech).startswith("ExponentialMechanism(epsilon=1, sensitivity=1, monotonic=False")
    with pytest.raises(InvalidParameterError, match="epsilon"):
        ExponentialMechanism(epsilon=-1.0, sensitivity=1.0, unit="node")
    with pytest.raises(InvalidParameterError, match="sensitivity"):
        ExponentialMechanism(epsilon=1.0, sensitivity=0.0, unit="node")
    with pytest.raises(InvalidParameterError, match="scores"):
        mech(torch.tensor([]))
    with pytest.raises(InvalidParameterError, match="finite"):
        mech(torch.tensor([0.0, float("inf")]))
