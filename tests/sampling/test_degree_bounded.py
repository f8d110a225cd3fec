"""DP-GNN Algorithm 2 (spec 002 §3.2, check 1-2): invariants I1-I6 on random graphs (+ controls)."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.sampling import (
    BoundedSubgraphs,
    NodeBatchSampler,
    SamplerInvariantError,
    sample_degree_bounded_subgraphs,
)


def _graph(seed: int, n: int, density: float, power_law: bool):
    g = torch.Generator().manual_seed(seed)
    if power_law:   # hub-heavy: edge probability ~ w_i w_j with Pareto-like weights
        w = torch.rand(n, generator=g).pow(-1.5)
        prob = torch.clamp(density * w[:, None] * w[None, :] / w.mean() ** 2, max=1.0)
    else:
        prob = torch.full((n, n), density)
    ei = (torch.rand(n, n, generator=g) < prob).nonzero().T              # includes self-loops
    train = torch.randperm(n, generator=g)[: max(1, int(0.6 * n))]
    return ei, train


def _sample(ei, n, train, k, seed, **kw) -> BoundedSubgraphs:
    return sample_degree_bounded_subgraphs(ei, n, train_nodes=train, max_degree=k,
                                           generator=torch.Generator().manual_seed(seed), **kw)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(2, 60), density=st.floats(0.0, 0.5),
       k=st.sampled_from([0, 1, 3, 7]), power_law=st.booleans(), symmetrize=st.booleans(),
       bound_all=st.booleans(), shuffle=st.booleans())
def test_invariants_hold_on_random_graphs(seed, n, density, k, power_law, symmetrize, bound_all, shuffle):
    ei, train = _graph(seed, n, density, power_law)
    kw = dict(symmetrize=symmetrize, bound_all_nodes=bound_all, shuffle_neighbors=shuffle)
    s = _sample(ei, n, train, k, seed, **kw)
    s.check_invariants()                                                   # I1-I5
    again = _sample(ei, n, train, k, seed, **kw)                           # I6
    assert torch.equal(s.neighbors, again.neighbors) and torch.equal(s.edge_index, again.edge_index)
    assert torch.equal(s.train_nodes, train)
    # every minibatch drawn from S_tr respects the bounds the accountant assumes
    m = max(1, s.num_train // 2)
    for mode in ("fixed", "poisson"):
        idx = NodeBatchSampler(s.num_train, batch_size=m, sampling=mode).sample(torch.Generator().manual_seed(seed))
        rows, mask = s.gather(idx)
        assert bool((mask.sum(1) <= k + 1).all())
        hits = torch.bincount(rows[mask], minlength=n)
        assert int(hits.max()) <= s.max_occurrence                # own row + K others


def test_k_zero_gives_singletons_and_large_k_gives_full_neighbourhoods():
    ei, train = _graph(1, 40, 0.2, power_law=False)
    s0 = _sample(ei, 40, train, 0, 0)
    assert s0.neighbors.shape == (train.numel(), 1) and torch.equal(s0.neighbors[:, 0], train)
    big = _sample(ei, 40, train, 40, 0)
    sym = torch.zeros(40, 40, dtype=torch.bool)
    sym[ei[0], ei[1]] = True
    sym = (sym | sym.T).fill_diagonal_(False)
    for row, v in zip(big.neighbors.tolist(), train.tolist()):
        assert sorted(u for u in row[1:] if u >= 0) == sym[v].nonzero().flatten().tolist()


def test_greedy_is_deterministic_per_seed_and_varies_across_seeds():
    ei, train = _graph(2, 60, 0.3, power_law=True)
    a, b = _sample(ei, 60, train, 3, 5), _sample(ei, 60, train, 3, 6)
    assert not torch.equal(a.neighbors, b.neighbors)


def _violated(s: BoundedSubgraphs) -> str:
    with pytest.raises(SamplerInvariantError) as info:
        s.check_invariants()
    return str(info.value).split(" ")[0]


def test_check_invariants_catches_broken_outputs():
    # star: hub 0 linked to training leaves 1..5 and K = 2
    ei = torch.tensor([[0, 0, 0, 0, 0], [1, 2, 3, 4, 5]])
    train = torch.arange(1, 6)
    s = _sample(ei, 6, train, 2, 0)
    s.check_invariants()
    assert int((s.neighbors == 0).sum()) == 2                 # the hub serves only K = 2 leaves
    # I3 control: the paper's algorithm without the count[u] test lets the hub into every row
    no_occ = torch.stack([train, torch.zeros(5, dtype=torch.long), torch.full((5,), -1)], dim=1)
    bounded = torch.tensor([[0] * 5 + list(range(1, 6)), list(range(1, 6)) + [0] * 5])
    assert _violated(dataclasses.replace(s, neighbors=no_occ, mask=no_occ >= 0, edge_index=bounded)) == "I3"
    # I2 control: a row longer than K
    wide = torch.stack([train, torch.zeros(5, dtype=torch.long), torch.full((5,), -1),
                        torch.full((5,), -1)], dim=1)
    wide[0, 2:] = torch.tensor([2, 3])
    assert _violated(dataclasses.replace(s, neighbors=wide, mask=wide >= 0)) == "I2"
    # I4 control: an edge that is not in the raw graph
    fake = s.neighbors.clone()
    free = int((fake[:, 1] == -1).nonzero()[0])
    fake[free, 1] = 5 if int(train[free]) != 5 else 4
    assert _violated(dataclasses.replace(s, neighbors=fake, mask=fake >= 0)) in {"I1", "I4"}
    # I5 control: drop every kept edge (nothing sampled although counts are < K)
    empty = torch.full_like(s.neighbors, -1)
    empty[:, 0] = train
    assert _violated(dataclasses.replace(s, neighbors=empty, mask=empty >= 0,
                                         edge_index=torch.zeros(2, 0, dtype=torch.long))) == "I5"


def test_occurrence_bound_and_multilayer_flag():
    ei, train = _graph(4, 50, 0.3, power_law=False)
    one = _sample(ei, 50, train, 3, 0)
    assert one.max_occurrence == 4 and one.occurrence_bound(1) == 4
    with pytest.raises(InvalidParameterError, match="bound_all_nodes"):
        one.occurrence_bound(2)
    allb = _sample(ei, 50, train, 3, 0, bound_all_nodes=True)
    allb.check_invariants()
    assert allb.occurrence_bound(2) == 1 + 3 + 9
    # empirical: a node reaches at most M_2 training nodes within 2 hops of the bounded graph
    adj = torch.zeros(50, 50)
    adj[allb.edge_index[0], allb.edge_index[1]] = 1.0
    reach = ((torch.eye(50) + adj + adj @ adj) > 0)[:, train]
    assert int(reach.sum(1).max()) <= allb.occurrence_bound(2)
    p = allb.accounting_params(num_layers=2)
    assert p["max_occurrence"] == 13 and p["num_train"] == train.numel() and "bounded" in p["scope"]
    assert "max_degree=3" in repr(allb)


def _reference_algorithm_2(nbrs: dict[int, list[int]], order: list[int], n: int, k: int) -> list[set[int]]:
    """Spec 002 §3.2 pseudo-code, literally, with Python sets."""
    count, S = [0] * n, [{x} for x in range(n)]
    for v in order:
        for u in nbrs[v]:
            if u == v or u in S[v]:
                continue
            if count[u] == k:
                continue
            if count[v] == k:
                break
            S[v].add(u)
            S[u].add(v)
            count[u] += 1
            count[v] += 1
    return S


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(1, 40), density=st.floats(0.0, 0.6),
       k=st.integers(0, 6))
def test_greedy_core_matches_the_literal_pseudo_code(seed, n, density, k):
    from gnnprivacy.sampling.degree_bounded import _greedy_pass

    rnd = torch.Generator().manual_seed(seed)
    adj = torch.rand(n, n, generator=rnd) < density
    adj = (adj | adj.T).fill_diagonal_(False)
    nbrs = {v: adj[v].nonzero().flatten()[torch.randperm(int(adj[v].sum()), generator=rnd)].tolist()
            for v in range(n)}
    rowptr, col = [0], []
    for v in range(n):
        col += nbrs[v]
        rowptr.append(len(col))
    order = torch.randperm(n, generator=rnd)[: max(1, n // 2)].tolist()
    kept_v, kept_u = _greedy_pass(rowptr, col, order, n, k)
    got = [{x} for x in range(n)]
    for v, u in zip(kept_v, kept_u):
        got[v].add(u)
        got[u].add(v)
    assert got == _reference_algorithm_2(nbrs, order, n, k)
