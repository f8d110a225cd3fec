"""The full-batch trainer's precomputed inputs: same propagation, same dropout distribution."""

from __future__ import annotations

import math

import pytest
import torch
from torch_geometric.nn import GCNConv

from gnnprivacy.training.nonprivate import _InputDropout, gcn_adjacency


def _directed_graph(n: int = 30, e: int = 120, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, e), generator=g)
    return torch.cat([ei, ei[:, :5]], dim=1)  # some duplicate edges


@pytest.mark.parametrize("improved", [False, True])
def test_gcn_adjacency_matches_gcnconv(improved):
    n, ei = 30, _directed_graph()
    torch.manual_seed(0)
    conv = GCNConv(8, 4, improved=improved)
    h = torch.randn(n, 8)
    expected = conv(h, ei)
    adj = gcn_adjacency(ei, n, improved=improved)
    conv.normalize = False
    torch.testing.assert_close(conv(h, adj), expected, rtol=1e-5, atol=1e-6)
    # positive control: the transposed (wrong-direction) matrix gives another output
    wrong = gcn_adjacency(ei.flip(0), n, improved=improved)
    assert not torch.allclose(conv(h, wrong), expected, atol=1e-4)


def test_input_dropout_distribution_and_buffer_reuse():
    g = torch.Generator().manual_seed(1)
    x = torch.rand(200, 50, generator=g) * (torch.rand(200, 50, generator=g) < 0.3)
    p = 0.4
    drop = _InputDropout(x, p)
    torch.manual_seed(0)
    first = drop()
    ptr = first.data_ptr()
    kept_total, trials = 0, 20
    nnz = int((x != 0).sum())
    for _ in range(trials):
        out = drop()
        assert out.data_ptr() == ptr  # the same buffer every call
        assert bool((out[x == 0] == 0).all())  # zeros stay zero
        kept = out != 0
        torch.testing.assert_close(out[kept], x[kept] / (1 - p))
        kept_total += int(kept.sum())
    n = nnz * trials
    sd = math.sqrt(n * p * (1 - p))
    assert abs(kept_total - n * (1 - p)) < 5 * sd
    # positive control: a keep rate of p instead of 1 - p is far outside the band
    assert abs(n * p - n * (1 - p)) > 5 * sd


@pytest.mark.parametrize("encoder", ["gcn", "sage"])
@pytest.mark.parametrize("normalize", [False, True])
def test_query_fn_equals_predict_logits_dense_and_sparse(encoder, normalize):
    """The repeated-query API gives what predict_logits gives, for dense and sparse CSR x,
    and follows a change of the features (it is not a cached output)."""
    from torch_geometric.data import Data

    from gnnprivacy.training.nonprivate import FullBatchTrainer

    g = torch.Generator().manual_seed(2)
    n = 60
    x = torch.rand(n, 40, generator=g) * (torch.rand(n, 40, generator=g) < 0.02)   # sparse
    idx = torch.arange(n)
    data = Data(x=x, y=torch.randint(0, 3, (n,), generator=g), edge_index=_directed_graph(n, 240),
                train_mask=idx < 30, val_mask=(idx >= 30) & (idx < 45), test_mask=idx >= 45)
    trainer = FullBatchTrainer(encoder, epochs=5, generator=0, normalize_features=normalize).fit(data)
    query = trainer.query_fn(data)
    feats = trainer.query_features(data)
    assert feats.layout == (torch.sparse_csr if encoder == "gcn" else torch.strided)
    torch.testing.assert_close(query(feats), trainer.predict_logits(data), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(query(data.x), trainer.predict_logits(data), rtol=1e-5, atol=1e-6)
    moved = data.clone()
    moved.x = data.x * 3.0 + 0.1
    out = query(moved.x)
    torch.testing.assert_close(out, trainer.predict_logits(moved), rtol=1e-5, atol=1e-6)
    assert not torch.allclose(out, query(data.x))            # control: the features matter
