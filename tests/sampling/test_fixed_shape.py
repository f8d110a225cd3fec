"""Fixed-shape (GPU path) samplers: capacities, compaction, and the exact samplers' law.

The fixed-shape samplers draw the same trials as the exact samplers into padded buffers.
Checked here on the CPU (the code is device-agnostic): every compacted batch is a valid batch
of the exact sampler (structural invariants), the inclusion frequencies of centres and
peripherals match the exact sampler's (tolerance from the sample size, Bonferroni over the
checks, with a broken sampler as positive control), the capacities are one-sided tail
bounds, and an overflow is refused, never truncated silently.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from gnnprivacy.sampling import HeterPoissonSampler, NodeBatchSampler, fixed_shape
from gnnprivacy.sampling.fixed_shape import (CapacityExceededError, FixedShapeHeterPoisson,
                                             FixedShapeNodeBatches, capacity, compact)

from _sampling_stats import freq_tolerance


def _graph(n=60, p=0.12, seed=0):
    g = torch.Generator().manual_seed(seed)
    adj = torch.rand(n, n, generator=g) < p
    adj.fill_diagonal_(False)
    adj[:, 5] = True                       # a hub: node 5 aggregates everyone
    adj[5, 5] = False
    return adj.nonzero().t().contiguous(), n


def _sampler(**kw):
    ei, n = _graph()
    cand = torch.zeros(n, dtype=torch.bool)
    cand[: n // 2] = True
    elig = torch.ones(n, dtype=torch.bool)
    elig[-5:] = False
    args = dict(candidates=cand, eligible=elig, q_b=0.3, M=2.0) | kw
    return HeterPoissonSampler(ei, n, **args)


@pytest.mark.parametrize("n,q", [(50, 0.1), (10_000, 0.01), (1000, 0.9)])
def test_capacity_is_a_one_sided_binomial_tail_bound(n, q):
    for log_fail in (5.0, 20.0, 41.6):
        k = capacity(n * q, n * q * (1 - q), 1.0, log_fail=log_fail)
        assert stats.binom.sf(k, n, q) <= math.exp(-log_fail)
    # not absurdly loose: within a few standard deviations of the exact quantile
    exact = stats.binom.isf(math.exp(-41.6), n, q)
    assert k <= exact + 6 * math.sqrt(n * q * (1 - q)) + 30


def test_compact_keeps_order_and_counts_past_the_capacity():
    mask = torch.tensor([0, 1, 1, 0, 1, 1, 0, 1], dtype=torch.bool)
    values = torch.arange(8) * 10
    out, count = compact(mask, values, 6)
    assert out.tolist() == [10, 20, 40, 50, 70, 0] and int(count) == 5
    out, count = compact(mask, values, 3)
    assert out.tolist() == [10, 20, 40] and int(count) == 5    # overflow is visible
    out, count = compact(mask[:0], values[:0], 2)
    assert out.tolist() == [0, 0] and int(count) == 0


def _check_batch(sampler: HeterPoissonSampler, batch) -> None:
    """Structural invariants of a HeterPoisson batch (the exact sampler's guarantees)."""
    centers = batch.centers.tolist()
    assert centers == sorted(set(centers))
    assert all(sampler.candidate_mask[c] for c in centers)
    rowptr, src = sampler._rowptr, sampler._src
    sub = batch.periph_subgraph.tolist()
    assert sub == sorted(sub)
    for j, s in zip(batch.periph_nodes.tolist(), sub):
        i = centers[s]
        assert j in src[rowptr[i]:rowptr[i + 1]].tolist()       # an eligible in-neighbour
        if sampler.enforce_no_overlap:
            assert j not in centers
    pairs = list(zip(batch.periph_nodes.tolist(), sub))
    assert len(pairs) == len(set(pairs))


def _frequencies(draw, sampler, trials):
    n, e = sampler.num_nodes, sampler._src.numel()
    centre = np.zeros(n)
    edge = np.zeros(e)
    dst = torch.repeat_interleave(torch.arange(n), sampler._rowptr[1:] - sampler._rowptr[:-1])
    edge_id = torch.full((n, n), -1, dtype=torch.long)
    edge_id[sampler._src, dst] = torch.arange(e)
    for _ in range(trials):
        b = draw()
        centre[b.centers.numpy()] += 1
        ids = edge_id[b.periph_nodes, b.centers[b.periph_subgraph]].numpy()
        assert (ids >= 0).all()
        np.add.at(edge, ids, 1)
    return centre / trials, edge / trials


@pytest.mark.statistical
@pytest.mark.parametrize("no_overlap", [True, False])
def test_fixed_shape_heterpoisson_has_the_exact_law(no_overlap):
    sampler = _sampler(enforce_no_overlap=no_overlap)
    fixed = FixedShapeHeterPoisson(sampler, "cpu")
    trials = 1500
    gen = torch.Generator().manual_seed(1)
    batches = []

    def draw():
        b = fixed.sample(gen).compact()
        batches.append(b)
        return b

    c_fixed, e_fixed = _frequencies(draw, sampler, trials)
    fixed.check()
    for b in batches[:50]:
        _check_batch(sampler, b)
    gen2 = torch.Generator().manual_seed(2)
    c_exact, e_exact = _frequencies(lambda: sampler.sample(gen2), sampler, trials)
    tests = c_fixed.size + e_fixed.size
    for f, g in ((c_fixed, c_exact), (e_fixed, e_exact)):
        p = (f + g) / 2
        tol = np.array([freq_tolerance(pi, trials, tests) for pi in p]) * math.sqrt(2)
        assert np.all(np.abs(f - g) <= tol + 1e-12)


@pytest.mark.statistical
def test_a_broken_fixed_shape_sampler_is_caught():
    """Positive control: doubling the peripherals' keep probability fails the comparison."""
    sampler = _sampler()
    fixed = FixedShapeHeterPoisson(sampler, "cpu")
    fixed._keep_prob = (fixed._keep_prob * 2).clamp_max(1.0)
    trials = 1500
    gen, gen2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)
    _, e_fixed = _frequencies(lambda: fixed.sample(gen).compact(), sampler, trials)
    _, e_exact = _frequencies(lambda: sampler.sample(gen2), sampler, trials)
    p = (e_fixed + e_exact) / 2
    tol = np.array([freq_tolerance(pi, trials, e_fixed.size) for pi in p]) * math.sqrt(2)
    assert np.any(np.abs(e_fixed - e_exact) > tol)


def test_padding_is_masked_and_overflow_is_refused(monkeypatch):
    sampler = _sampler()
    fixed = FixedShapeHeterPoisson(sampler, "cpu")
    b = fixed.sample(torch.Generator().manual_seed(0))
    assert b.centers.shape == (fixed.capacity_centers,)
    assert b.periph_nodes.shape == (fixed.capacity_peripherals,)
    assert int(b.center_mask.sum()) == int(b.count)
    assert not bool(b.periph_nodes[~b.periph_mask].any())
    fixed.check()
    monkeypatch.setattr(fixed_shape, "capacity", lambda *args, **kw: 1)
    tiny = FixedShapeHeterPoisson(sampler, "cpu")   # certain overflow at q_b 0.3 of 30
    b = tiny.sample(torch.Generator().manual_seed(0))
    assert b.centers.shape == (1,) and int(b.count) > 1
    with pytest.raises(CapacityExceededError, match="capacity"):
        tiny.check()


def test_fixed_shape_node_batches(monkeypatch):
    fixed = FixedShapeNodeBatches.from_sampler(NodeBatchSampler(100, batch_size=10), "cpu")
    index, mask = fixed.sample(torch.Generator().manual_seed(0))
    assert mask is None and index.shape == (10,) and index.unique().numel() == 10
    poisson = FixedShapeNodeBatches.from_sampler(
        NodeBatchSampler(1000, batch_size=100, sampling="poisson"), "cpu")
    gen = torch.Generator().manual_seed(0)
    counts = np.zeros(1000)
    trials = 400
    for _ in range(trials):
        index, mask = poisson.sample(gen)
        assert index.shape == (poisson.capacity,)
        counts[index[mask].numpy()] += 1
    poisson.check()
    tol = freq_tolerance(0.1, trials * 1000)
    assert abs(counts.mean() / trials - 0.1) <= tol
    monkeypatch.setattr(fixed_shape, "capacity", lambda *args, **kw: 5)
    tiny = FixedShapeNodeBatches(1000, device="cpu", rate=0.1)
    index, mask = tiny.sample(gen)
    assert index.shape == mask.shape == (5,) and bool(mask.all())
    with pytest.raises(CapacityExceededError):
        tiny.check()
