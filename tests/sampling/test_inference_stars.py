"""Private inference stars (spec 000 §3.5, check S7): never a training node; uniform fan-out."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from _sampling_stats import ALPHA, chisquare_pvalue
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.sampling import StarBatch, inference_stars


def _random_split(seed: int, n: int, density: float):
    g = torch.Generator().manual_seed(seed)
    ei = (torch.rand(n, n, generator=g) < density).nonzero().T
    train = torch.rand(n, generator=g) < 0.5
    return ei, train, g


def _touches(batch: StarBatch, nodes: torch.Tensor) -> bool:
    return bool(nodes[batch.periph_nodes].any())


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(1, 40), density=st.floats(0.0, 0.8),
       fanout=st.integers(0, 6))
def test_test_stars_never_touch_a_training_node(seed, n, density, fanout):
    ei, train, g = _random_split(seed, n, density)
    test = ~train
    queries = test.nonzero().flatten()
    b = inference_stars(ei, n, query_nodes=queries, allowed=test, fanout=fanout, generator=g,
                        forbidden=train)
    assert torch.equal(b.centers, queries)
    assert not _touches(b, train)
    adj = torch.zeros(n, n, dtype=torch.bool)
    adj[ei[0], ei[1]] = True
    adj.fill_diagonal_(False)
    centre_of = b.centers[b.periph_subgraph]
    assert bool(adj[b.periph_nodes, centre_of].all())                 # j is an in-neighbour of u
    reachable = (adj & test[:, None]).sum(0)[queries]                  # |I_u|
    assert b.degrees().tolist() == torch.clamp(reachable, max=fanout).tolist()
    keys = centre_of * n + b.periph_nodes
    assert torch.unique(keys).numel() == keys.numel()                  # without replacement


def test_full_neighbourhood_control_reaches_training_nodes():
    ei, train, g = _random_split(3, 30, 0.4)
    queries = (~train).nonzero().flatten()
    b = inference_stars(ei, 30, query_nodes=queries, allowed=torch.ones(30, dtype=torch.bool),
                        generator=g)
    assert _touches(b, train)              # the S7 check catches passing the full NB(u)
    with pytest.raises(InvalidParameterError, match="'allowed'.*disjoint"):
        inference_stars(ei, 30, query_nodes=queries, allowed=torch.ones(30, dtype=torch.bool),
                        generator=g, forbidden=train)


def test_isolated_query_is_predicted_alone_and_order_is_kept():
    ei = torch.tensor([[1, 2, 3], [0, 0, 0]])            # 0 aggregates 1, 2, 3; 4 isolated
    b = inference_stars(ei, 5, query_nodes=torch.tensor([4, 0]), allowed=torch.tensor([1, 2, 3]),
                        fanout=13, generator=torch.Generator().manual_seed(0))
    assert b.centers.tolist() == [4, 0] and b.degrees().tolist() == [0, 3]
    assert sorted(b.periph_nodes.tolist()) == [1, 2, 3]


PAIRS = {p: i for i, p in enumerate(itertools.combinations(range(1, 6), 2))}
COPIES = 40


def _pair_ids(batch: StarBatch) -> list[int]:
    """Index of the chosen pair of each star (ids taken modulo the 6-node copy)."""
    local = (batch.periph_nodes % 6).reshape(-1, 2).sort(dim=1).values.tolist()
    return [PAIRS[tuple(p)] for p in local]


@pytest.mark.statistical
def test_fanout_subset_is_uniform_without_replacement():
    star = torch.tensor([[1, 2, 3, 4, 5], [0, 0, 0, 0, 0]])
    ei = torch.cat([star + 6 * r for r in range(COPIES)], dim=1)     # independent copies
    queries = 6 * torch.arange(COPIES)
    allowed = torch.ones(6 * COPIES, dtype=torch.bool)
    allowed[queries] = False
    g = torch.Generator().manual_seed(11)
    samples = [i for _ in range(50) for i in _pair_ids(
        inference_stars(ei, 6 * COPIES, query_nodes=queries, allowed=allowed, fanout=2, generator=g))]
    assert chisquare_pvalue(np.array(samples), np.full(10, 0.1)) > ALPHA
    # control: a biased choice (always the lowest id, then one at random) must fail
    biased = [PAIRS[(1, int(torch.randint(2, 6, (1,), generator=g)))] for _ in range(len(samples))]
    assert chisquare_pvalue(np.array(biased), np.full(10, 0.1)) <= ALPHA
