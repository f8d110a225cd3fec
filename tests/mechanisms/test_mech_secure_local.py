"""Secure mode of the local mechanisms: OS CSPRNG only, no user seed, same output law."""

from __future__ import annotations

import math

import pytest
import torch
from _mechanism_stats import ALPHA, chi_square_pvalue, gen, seed_os_bytes

from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.mechanisms import (GRR, GRRFS, ExponentialMechanism, MultiBit, RandomizedResponse,
                                   grr_probabilities)
from gnnprivacy.mechanisms._random import RandomSource


@pytest.fixture
def os_stream(monkeypatch):
    return seed_os_bytes(monkeypatch, 99)


def secure_mechanisms():
    return [
        (RandomizedResponse(epsilon=1.0, unit="edge", secure_mode=True), torch.tensor([0.0, 1.0] * 8)),
        (GRR(epsilon=1.0, num_categories=4, unit="label", secure_mode=True), torch.arange(4).repeat(4)),
        (GRRFS(epsilon=2.0, num_features=4, m=2, secure_mode=True), torch.ones(4, 4, dtype=torch.int64)),
        (MultiBit(epsilon=2.0, num_features=4, m=2, lower=0.0, upper=1.0, secure_mode=True),
         torch.full((4, 4), 0.5)),
        (ExponentialMechanism(epsilon=1.0, sensitivity=1.0, unit="node", secure_mode=True),
         torch.zeros(4, 5)),
    ]


def test_every_local_mechanism_draws_from_the_os_and_refuses_a_seed(os_stream):
    for mech, x in secure_mechanisms():
        before = len(os_stream)
        mech(x)
        assert len(os_stream) > before, mech
        with pytest.raises(InvalidParameterError, match="generator"):
            mech(x, generator=gen(0))


@pytest.mark.statistical
def test_secure_grr_law_with_positive_control(os_stream):
    k, eps, n = 4, 1.0, 100_000
    p, q = grr_probabilities(eps, k)
    law = [q, p, q, q]
    for epsilon, should_pass in ((eps, True), (eps / 2, False)):
        mech = GRR(epsilon=epsilon, num_categories=k, unit="label", secure_mode=True)
        counts = torch.bincount(mech(torch.ones(n, dtype=torch.int64)), minlength=k)
        assert (chi_square_pvalue(counts, law) > ALPHA) is should_pass


@pytest.mark.statistical
def test_secure_uniform_is_uniform_on_the_53_bit_grid(os_stream):
    u = RandomSource(secure=True).uniform(100_000)
    assert u.dtype == torch.float64 and float(u.min()) >= 0.0 and float(u.max()) < 1.0
    assert torch.equal(u * 2.0**53, torch.round(u * 2.0**53))
    counts = torch.histc(u, bins=20, min=0.0, max=1.0)
    assert chi_square_pvalue(counts, [0.05] * 20) > ALPHA
    z = RandomSource(secure=True).normal(100_000)
    assert abs(float(z.mean())) < 4 / math.sqrt(1e5) and abs(float(z.var()) - 1) < 4 * math.sqrt(2 / 1e5)


def test_real_os_randomness_differs_between_calls():
    mech = GRRFS(epsilon=1.0, num_features=64, m=8, secure_mode=True)
    x = torch.zeros(8, 64, dtype=torch.int64)
    assert not torch.equal(mech(x), mech(x))
