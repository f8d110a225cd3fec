"""O(batch) sampling draws exactly the distribution of the old O(N) samplers (issue 15).

Poisson sampling is now a ``Binomial(N, q)`` count plus a uniform subset of that size
(:func:`poisson_subset`); fixed-size batches draw a uniform subset without permuting all
items (:func:`uniform_subset`). The old samplers are kept here as references. With few
items every subset is a cell, so a chi-square test against the exact law compares whole
distributions (not only marginals); a deliberately wrong sampler is rejected (positive
control). Seeds are fixed: the tests are deterministic.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from scipy import stats

from gnnprivacy.sampling import HeterPoissonSampler
from gnnprivacy.sampling.minibatch import NodeBatchSampler, poisson_subset, uniform_subset

DRAWS = 6000
ALPHA = 1e-3


def old_poisson(n, q, gen):
    return (torch.rand(n, generator=gen, dtype=torch.float64) < q).nonzero().flatten()


def old_fixed(n, m, gen):
    return torch.randperm(n, generator=gen)[:m]


def _exact_poisson_law(n, q):
    cells = list(itertools.product([0, 1], repeat=n))
    return cells, np.array([q ** sum(c) * (1 - q) ** (n - sum(c)) for c in cells])


def _chi2_pvalue(samples, cells, probs):
    index = {c: i for i, c in enumerate(cells)}
    counts = np.zeros(len(cells))
    for s in samples:
        counts[index[s]] += 1
    return stats.chisquare(counts, probs * counts.sum()).pvalue


def _as_cell(batch, n):
    cell = [0] * n
    for i in batch.tolist():
        cell[i] = 1
    return tuple(cell)


@pytest.mark.parametrize("n, q", [(5, 0.3), (6, 0.1)])
def test_poisson_subset_has_the_exact_poisson_law(n, q):
    cells, probs = _exact_poisson_law(n, q)
    for sampler in (poisson_subset, old_poisson):              # new, and the old as reference
        gen = torch.Generator().manual_seed(1)
        samples = [_as_cell(sampler(n, q, gen), n) for _ in range(DRAWS)]
        assert _chi2_pvalue(samples, cells, probs) > ALPHA


def test_broken_poisson_sampler_is_rejected():
    """Positive control: a fixed count round(n q) instead of a binomial one."""
    n, q = 5, 0.3
    cells, probs = _exact_poisson_law(n, q)
    gen = torch.Generator().manual_seed(1)
    samples = [_as_cell(torch.sort(uniform_subset(n, round(n * q), gen)).values, n)
               for _ in range(DRAWS)]
    assert _chi2_pvalue(samples, cells, probs) < ALPHA


def test_poisson_subset_large_counts_and_order():
    gen = torch.Generator().manual_seed(0)
    n, q = 200_000, 0.01
    sizes = np.array([poisson_subset(n, q, gen).numel() for _ in range(300)])
    # binomial mean and variance
    assert abs(sizes.mean() - n * q) < 4 * math.sqrt(n * q * (1 - q) / 300)
    assert 0.7 < sizes.var() / (n * q * (1 - q)) < 1.35
    batch = poisson_subset(n, q, gen)
    assert torch.all(batch[1:] > batch[:-1]) and int(batch.max()) < n
    assert poisson_subset(10, 1.0, gen).tolist() == list(range(10))


@pytest.mark.parametrize("n, m", [(6, 2), (7, 3), (5, 4)])
def test_uniform_subset_is_uniform_over_ordered_subsets(n, m):
    cells = list(itertools.permutations(range(n), m))
    probs = np.full(len(cells), 1.0 / len(cells))
    for sampler in (uniform_subset, old_fixed):
        gen = torch.Generator().manual_seed(2)
        samples = [tuple(sampler(n, m, gen).tolist()) for _ in range(DRAWS * 2)]
        assert _chi2_pvalue(samples, cells, probs) > ALPHA


def test_node_batch_sampler_modes():
    gen = torch.Generator().manual_seed(3)
    fixed = NodeBatchSampler(1000, batch_size=10, sampling="fixed").sample(gen)
    assert fixed.numel() == 10 and fixed.unique().numel() == 10
    poisson = NodeBatchSampler(1000, batch_size=10, sampling="poisson").sample(gen)
    assert torch.all(poisson[1:] > poisson[:-1])


def test_heterpoisson_centres_have_the_poisson_law():
    n = 5
    edge_index = torch.tensor([[0, 1, 2, 3, 4, 0], [1, 2, 3, 4, 0, 2]])
    sampler = HeterPoissonSampler(edge_index, n, candidates=torch.ones(n, dtype=torch.bool),
                                  eligible=torch.ones(n, dtype=torch.bool), q_b=0.3, M=1.0)
    cells, probs = _exact_poisson_law(n, 0.3)
    gen = torch.Generator().manual_seed(4)
    samples = []
    for _ in range(DRAWS):
        batch = sampler.sample(gen)
        samples.append(_as_cell(batch.centers, n))
        # overlap removal: no peripheral is a centre of the same step
        assert not set(batch.periph_nodes.tolist()) & set(batch.centers.tolist())
    assert _chi2_pvalue(samples, cells, probs) > ALPHA
