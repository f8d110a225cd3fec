"""Sparse propagation operators (spec 004 §5, §12 check 8)."""

from __future__ import annotations

import pytest
import torch

from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.ldp.propagation import (mean_adjacency, propagate, propagate_snapshots,
                                        sym_adjacency)


def _naive_mean_hops(edges: list[tuple[int, int]], x: torch.Tensor, k: int) -> torch.Tensor:
    """Algorithm 1 lines 6-9 as a per-node synchronous loop (reference implementation)."""
    n = x.size(0)
    nbrs = [{v} for v in range(n)]
    for u, v in edges:
        if u != v:
            nbrs[u].add(v)
    cur = x.clone()
    for _ in range(k):
        nxt = torch.empty_like(cur)
        for v in range(n):
            nxt[v] = torch.stack([cur[u] for u in sorted(nbrs[v])]).mean(0)
        cur = nxt
    return cur


def test_mean_adjacency_rows_sum_to_one_and_is_sparse():
    ei = torch.tensor([[0, 1, 1, 2, 3, 3], [1, 0, 2, 1, 3, 3]])  # node 3: self-loops only
    adj = mean_adjacency(ei, 5)                                    # node 4: isolated
    assert adj.is_sparse and adj.shape == (5, 5)
    dense = adj.to_dense()
    assert torch.allclose(dense.sum(1), torch.ones(5))
    assert dense[3, 3] == 1.0 and dense[4, 4] == 1.0   # existing self-loops not double counted
    assert dense[1, 0] == dense[1, 1] == dense[1, 2] == pytest.approx(1 / 3)


def test_zero_hops_is_identity_and_isolated_node_keeps_its_value():
    ei = torch.tensor([[0, 1], [1, 0]])
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
    adj = mean_adjacency(ei, 3)
    assert torch.equal(propagate(adj, x, 0), x)
    assert torch.allclose(propagate(adj, x, 5)[2], x[2])


def test_vectorised_equals_naive_synchronous_loop():
    g = torch.Generator().manual_seed(1)
    n = 12
    ei = torch.randint(0, n, (2, 30), generator=g)
    ei = torch.cat([ei, ei.flip(0)], 1)
    x = torch.rand(n, 3, generator=g)
    edges = list(zip(ei[0].tolist(), ei[1].tolist()))
    got = propagate(mean_adjacency(ei, n), x, 3)
    assert torch.allclose(got, _naive_mean_hops(edges, x, 3), atol=1e-6)


def test_snapshots_share_hops_and_match_single_runs():
    g = torch.Generator().manual_seed(2)
    ei = torch.randint(0, 20, (2, 60), generator=g)
    adj = mean_adjacency(ei, 20)
    x = torch.rand(20, 2, generator=g)
    snaps = propagate_snapshots(adj, x, [4, 0, 2, 4])
    assert sorted(snaps) == [0, 2, 4]
    for k, v in snaps.items():
        assert torch.allclose(v, propagate(adj, x, k), atol=1e-6)


def test_sym_adjacency_is_symmetric_normalised_without_self_loops():
    ei = torch.tensor([[0, 1, 1, 2, 2, 2], [1, 0, 2, 1, 2, 2]])
    dense = sym_adjacency(ei, 4).to_dense()
    deg = torch.tensor([1.0, 2.0, 1.0])
    expected = torch.zeros(4, 4)
    for u, v in [(0, 1), (1, 0), (1, 2), (2, 1)]:
        expected[u, v] = 1 / (deg[u] * deg[v]).sqrt()
    assert torch.allclose(dense, expected)
    assert dense[3].abs().sum() == 0     # isolated: zero row


def test_propagation_is_differentiable():
    adj = mean_adjacency(torch.tensor([[0, 1], [1, 0]]), 2)
    x = torch.rand(2, 2, requires_grad=True)
    propagate(adj, x, 2).sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_bad_edge_index_and_steps():
    with pytest.raises(InvalidParameterError, match="edge_index"):
        mean_adjacency(torch.tensor([[0, 5], [5, 0]]), 3)
    with pytest.raises(InvalidParameterError, match="edge_index"):
        mean_adjacency(torch.tensor([0, 1]), 3)
    with pytest.raises(InvalidParameterError, match="steps"):
        propagate(mean_adjacency(torch.tensor([[0], [1]]), 2), torch.ones(2, 1), -1)


def test_reconstruction_scales_without_dense_matrices():
    """A ring of 200,000 nodes: a dense N x N float matrix would need 160 GB."""
    from gnnprivacy.ldp.reconstruction import reconstruct_features, reconstruct_labels

    n = 200_000
    src = torch.arange(n)
    ei = torch.stack([torch.cat([src, (src + 1) % n]), torch.cat([(src + 1) % n, src])])
    adj = mean_adjacency(ei, n)
    assert adj.is_sparse and adj._nnz() == 3 * n
    rep = (src % 2).view(-1, 1).repeat(1, 3)
    out = reconstruct_features(adj, rep, feature_epsilon=1.0, m=2, steps=4)
    assert out.shape == (n, 3)
    labels = reconstruct_labels(adj, src % 3, torch.ones(n, dtype=torch.bool), epsilon=1.0,
                                num_classes=3, steps=4)
    assert labels.shape == (n,)
