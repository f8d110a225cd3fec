"""Small synthetic graphs for the LDP tests (no dataset files needed)."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.utils import to_undirected


def sbm_graph(n: int = 300, c: int = 3, d: int = 24, p_in: float = 0.06, p_out: float = 0.004,
              signal: float = 0.35, seed: int = 0) -> Data:
    """Homophilous SBM with binary features whose 1-rate depends on the class; 50/25/25 split."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % c
    y = y[torch.randperm(n, generator=g)]
    prob = torch.where(y.view(-1, 1) == y.view(1, -1), p_in, p_out)
    adj = torch.rand(n, n, generator=g) < prob
    adj = torch.triu(adj, diagonal=1)
    edge_index = to_undirected(adj.nonzero().t(), num_nodes=n)
    block = torch.arange(d) % c  # feature j is "about" class j % c
    rate = torch.where(block.view(1, -1) == y.view(-1, 1), 0.5 + signal, 0.5 - signal)
    x = (torch.rand(n, d, generator=g) < rate).float()
    perm = torch.randperm(n, generator=g)
    masks = [torch.zeros(n, dtype=torch.bool) for _ in range(3)]
    masks[0][perm[: n // 2]] = True
    masks[1][perm[n // 2: 3 * n // 4]] = True
    masks[2][perm[3 * n // 4:]] = True
    return Data(x=x, y=y, edge_index=edge_index, train_mask=masks[0], val_mask=masks[1],
                test_mask=masks[2], num_classes=c)


@pytest.fixture(scope="session")
def sbm() -> Data:
    return sbm_graph()
