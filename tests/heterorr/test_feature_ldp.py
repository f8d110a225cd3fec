"""Feature LDP baselines (spec 001 §5.3, check §7.14): unbiased, ratio <= e^eps, valid params."""

from __future__ import annotations

import math

import pytest
import torch

from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.mechanisms.feature_ldp import (FEATURE_MECHANISMS, Duchi, PMSub, Piecewise,
                                               ThreeOutput, three_output_params)

XS = (-1.0, -0.5, 0.0, 0.5, 1.0)


@pytest.mark.statistical
@pytest.mark.parametrize("name", sorted(FEATURE_MECHANISMS))
@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_unbiased(name, eps):
    mech = FEATURE_MECHANISMS[name](epsilon=eps)
    g = torch.Generator().manual_seed(3)
    x = torch.tensor(XS, dtype=torch.float64).repeat_interleave(40_000)
    y = mech(x, generator=g).view(len(XS), -1)
    mean, se = y.mean(dim=1), y.std(dim=1) / math.sqrt(y.size(1))
    assert ((mean - torch.tensor(XS)).abs() < 4 * se).all(), (mean, se)


@pytest.mark.statistical
def test_unbiasedness_positive_control():
    class Biased(Duchi):   # deliberately broken: P[+] off by 0.02
        def prob_positive(self, x):
            return super().prob_positive(x) + 0.02

    y = Biased(epsilon=1.0)(torch.zeros(200_000, dtype=torch.float64),
                            generator=torch.Generator().manual_seed(4))
    assert abs(float(y.mean())) > 4 * float(y.std()) / math.sqrt(y.numel())


@pytest.mark.parametrize("eps", [0.3, 0.69, 1.0, 1.5, 1.7, 2.0, 5.0])
def test_three_output_params_valid_and_ratio(eps):
    a, b, d, C = three_output_params(eps)
    assert a >= 0 and C > 0
    x = torch.linspace(-1, 1, 401, dtype=torch.float64)
    probs = torch.stack(ThreeOutput(epsilon=eps).probabilities(x))       # (3, X)
    assert ((probs >= -1e-12) & (probs <= 1 + 1e-12)).all()
    torch.testing.assert_close(probs.sum(0), torch.ones_like(x))
    mean = C * (probs[2] - probs[0])
    torch.testing.assert_close(mean, x)                                     # exactly unbiased
    for row in probs:
        pos = row[row > 0]
        if pos.numel():
            assert float(pos.max() / pos.min()) <= math.exp(eps) * (1 + 1e-9)
            assert (row > 0).all()


@pytest.mark.parametrize("cls", [Piecewise, PMSub])
@pytest.mark.parametrize("eps", [0.1, 1.0, 4.0])
def test_density_ratio_by_enumeration(cls, eps):
    mech = cls(epsilon=eps)
    x = torch.linspace(-1, 1, 81, dtype=torch.float64)
    C = float(mech.params(torch.tensor(0.0))[1 if cls is Piecewise else 2])
    y = torch.linspace(-C + 1e-9, C - 1e-9, 2001, dtype=torch.float64)
    dens = mech.density(x[:, None], y[None, :])                             # (X, Y)
    assert (dens > 0).all()
    ratio = dens.max(dim=0).values / dens.min(dim=0).values
    assert float(ratio.max()) <= math.exp(eps) * (1 + 1e-9)
    # each density integrates to 1
    integral = torch.trapezoid(dens, y, dim=1)
    torch.testing.assert_close(integral, torch.ones_like(integral), atol=5e-3, rtol=0)


def test_duchi_ratio():
    for eps in (0.2, 1.0, 3.0):
        m = Duchi(epsilon=eps)
        p = m.prob_positive(torch.tensor([-1.0, 1.0], dtype=torch.float64))
        assert float(p[1] / p[0]) == pytest.approx(math.exp(eps))


def test_bad_input():
    with pytest.raises(InvalidParameterError):
        Duchi(epsilon=0.0)
    with pytest.raises(InvalidParameterError):
        Piecewise(epsilon=1.0)(torch.tensor([1.5], dtype=torch.float64))
