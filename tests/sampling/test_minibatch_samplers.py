"""Minibatch samplers: fixed-size (hypergeometric, Lemma 3) and Poisson (binomial), with controls."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _sampling_stats import ALPHA, chisquare_pvalue, freq_tolerance
from scipy import stats

from gnnprivacy.sampling import NodeBatchSampler, poisson_node_batch

N, M_BATCH, S = 20, 10, torch.tensor([0, 5, 11, 17])      # |S| = K+1 = 4
REPS = 5000


def _overlaps(draw) -> np.ndarray:
    g = torch.Generator().manual_seed(0)
    return np.array([int(torch.isin(draw(g), S).sum()) for _ in range(REPS)])


@pytest.mark.statistical
def test_fixed_size_batches_are_distinct_and_hypergeometric():
    sampler = NodeBatchSampler(N, batch_size=M_BATCH, sampling="fixed")
    g = torch.Generator().manual_seed(1)
    for _ in range(200):
        b = sampler.sample(g)
        assert b.numel() == M_BATCH and torch.unique(b).numel() == M_BATCH
        assert int(b.min()) >= 0 and int(b.max()) < N
    hg = stats.hypergeom.pmf(np.arange(5), N, 4, M_BATCH)
    assert chisquare_pvalue(_overlaps(sampler.sample), hg) > ALPHA
    # controls: Poisson batches are not hypergeometric; with-replacement batches repeat items
    poisson = NodeBatchSampler(N, batch_size=M_BATCH, sampling="poisson")
    assert chisquare_pvalue(_overlaps(poisson.sample), hg) <= ALPHA
    g = torch.Generator().manual_seed(2)
    repeats = [torch.unique(torch.randint(0, N, (M_BATCH,), generator=g)).numel() < M_BATCH for _ in range(50)]
    assert any(repeats)


@pytest.mark.statistical
def test_poisson_batches_are_binomial():
    sampler = NodeBatchSampler(N, batch_size=M_BATCH, sampling="poisson")
    q = sampler.sample_rate
    binom = stats.binom.pmf(np.arange(5), 4, q)
    assert chisquare_pvalue(_overlaps(sampler.sample), binom) > ALPHA
    g = torch.Generator().manual_seed(3)
    sizes = np.array([sampler.sample(g).numel() for _ in range(REPS)])
    assert chisquare_pvalue(sizes, stats.binom.pmf(np.arange(N + 1), N, q)) > ALPHA
    fixed = NodeBatchSampler(N, batch_size=M_BATCH, sampling="fixed")      # control
    assert chisquare_pvalue(_overlaps(fixed.sample), binom) <= ALPHA
    assert sampler.accounting_params() == {"num_train": N, "batch_size": M_BATCH, "sample_rate": 0.5,
                                           "sampling": "poisson"}
    assert "poisson" in repr(sampler)


@pytest.mark.statistical
def test_poisson_node_batch_rate():
    nodes = torch.arange(100, 300)
    g = torch.Generator().manual_seed(4)
    batches = [poisson_node_batch(nodes, rate=0.1, generator=g) for _ in range(500)]
    assert all(bool(torch.isin(b, nodes).all()) and bool((b.diff() > 0).all()) for b in batches)
    counts = torch.bincount(torch.cat(batches) - 100, minlength=200).numpy() / 500
    assert abs(counts.mean() - 0.1) <= freq_tolerance(0.1, 500 * 200)
    assert np.all(np.abs(counts - 0.1) <= freq_tolerance(0.1, 500, num_tests=200))
    assert poisson_node_batch(nodes, rate=1.0, generator=g).tolist() == nodes.tolist()
    wrong = [poisson_node_batch(nodes, rate=0.12, generator=g) for _ in range(500)]   # control
    assert abs(sum(b.numel() for b in wrong) / (500 * 200) - 0.1) > freq_tolerance(0.1, 500 * 200)
