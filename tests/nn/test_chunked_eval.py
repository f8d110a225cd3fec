"""Evaluation in chunks (issue 15 item 3): same logits as one pass, bounded working set."""

from __future__ import annotations

import torch

from gnnprivacy.nn.dpgnn import OneLayerGCN


def test_forward_full_in_chunks_equals_one_pass():
    g = torch.Generator().manual_seed(0)
    n = 50
    ei = torch.randint(0, n, (2, 300), generator=g)
    x = torch.randn(n, 6, generator=g, dtype=torch.float64)
    model = OneLayerGCN(6, 3, hidden_channels=5, encoder_layers=2).to(torch.float64)
    whole = model.forward_full(x, ei, chunk_size=n)
    for chunk in (1, 7, 49):
        torch.testing.assert_close(model.forward_full(x, ei, chunk_size=chunk), whole)
    seen = []
    chunked = model.forward_full(x, ei, chunk_size=16,
                                 transform=lambda part: seen.append(len(part)) or part * 2)
    assert seen == [16, 16, 16, 2]  # the transform never sees more than one chunk
    torch.testing.assert_close(chunked, model.forward_full(x * 2, ei))
