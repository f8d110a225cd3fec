"""Counter-based uniforms: reference value, determinism, uniformity, independence (+ controls)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _sampling_stats import ALPHA, chisquare_pvalue, z_bonferroni

from gnnprivacy.sampling import CounterRandom, keyed_uniform, splitmix64


def test_splitmix64_reference_values():
    # First outputs of the SplitMix64 generator seeded with 0 (state += golden gamma, then mix):
    # published reference values of Vigna's splitmix64.c.
    golden = np.uint64(0x9E3779B97F4A7C15)
    with np.errstate(over="ignore"):
        states = np.array([0, 1, 2, 3], dtype=np.uint64) * golden
    out = splitmix64(states)
    assert [int(v) for v in out] == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F,
                                     0xF88BB8A8724C81EC]


def test_uniforms_are_deterministic_and_depend_on_every_key():
    i = torch.arange(1000)
    a = CounterRandom(seed=5, step=3).uniform(1, i)
    assert torch.equal(a, CounterRandom(seed=5, step=3).uniform(1, i))
    for other in (CounterRandom(6, 3).uniform(1, i), CounterRandom(5, 4).uniform(1, i),
                  CounterRandom(5, 3).uniform(2, i), CounterRandom(5, 3).uniform(1, i, i)):
        assert float((other == a).double().mean()) < 0.01
    assert bool(((a >= 0) & (a < 1)).all()) and a.dtype == torch.float64
    # one element's value does not depend on which other elements are drawn
    assert torch.equal(CounterRandom(5, 3).uniform(1, i[500:510]), a[500:510])


def _uniformity_ok(u: np.ndarray, bins: int = 50) -> bool:
    idx = np.minimum((u * bins).astype(int), bins - 1)
    return chisquare_pvalue(idx, np.full(bins, 1.0 / bins)) > ALPHA


def _neighbour_corr_ok(u: np.ndarray) -> bool:
    r = np.corrcoef(u[:-1], u[1:])[0, 1]
    return abs(r) < z_bonferroni(1) / np.sqrt(len(u))


@pytest.mark.statistical
def test_sequential_keys_give_uniform_uncorrelated_draws():
    n = 100_000
    for u in (keyed_uniform(1, 0, 7, torch.arange(n)).numpy(),
              keyed_uniform(2, torch.arange(n), 3).numpy()):        # vary the step instead
        assert _uniformity_ok(u) and _neighbour_corr_ok(u)
    weak = (np.arange(n) * 0.618034) % 1.0                          # control: a Weyl sequence
    assert _uniformity_ok(weak) and not _neighbour_corr_ok(weak)
    raw = (np.arange(n, dtype=np.float64) / 2.0**64)                # control: no mixing at all
    assert not _uniformity_ok(raw)
