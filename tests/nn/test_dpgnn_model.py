"""DP-GNN's one-layer GCN (spec 002 §3.3): padded forward = full-matrix forward, padding inert."""

from __future__ import annotations

import pytest
import torch

from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.nn.dpgnn import OneLayerGCN
from gnnprivacy.training.dp import check_model

DT = torch.float64


def ring_graph(n: int) -> torch.Tensor:
    src = torch.arange(n)
    dst = (src + 1) % n
    return torch.cat([torch.stack([src, dst]), torch.stack([dst, src])], 1)


def padded_neighbourhoods(edge_index, n, width):
    nodes = torch.full((n, width), -1, dtype=torch.long)
    for v in range(n):  # tiny test graph: a loop is fine here
        nb = sorted(set(edge_index[0][edge_index[1] == v].tolist()) - {v})
        nodes[v, : 1 + len(nb)] = torch.tensor([v] + nb)
    return nodes


@pytest.mark.parametrize("normalization", ["inverse_degree", "sum"])
@pytest.mark.parametrize("post", [False, True])
def test_padded_forward_equals_full_graph_forward(normalization, post):
    """Spec 002 check 3 with S_v = {v} ∪ N_v (K >= max degree)."""
    n = 7
    ei = ring_graph(n)
    ei = torch.cat([ei, torch.tensor([[0, 3], [3, 0]]), ei[:, :2]], 1)  # a chord and duplicates
    x = torch.randn(n, 4, generator=torch.Generator().manual_seed(0), dtype=DT)
    model = OneLayerGCN(4, 3, hidden_channels=5, encoder_layers=2, decoder_layers=2,
                        normalization=normalization, post_agg_activation=post).to(DT)
    nodes = padded_neighbourhoods(ei, n, width=4)
    torch.testing.assert_close(model(x, nodes), model.forward_full(x, ei))


def test_padding_rows_have_no_influence():
    x = torch.randn(10, 4, generator=torch.Generator().manual_seed(1), dtype=DT)
    model = OneLayerGCN(4, 3, hidden_channels=6).to(DT)
    nodes = torch.tensor([[0, 1, -1, -1], [2, -1, -1, -1], [3, 4, 5, 6]])
    mask = nodes >= 0
    filled = torch.where(mask, nodes, torch.tensor(9))
    torch.testing.assert_close(model(x, nodes), model(x, filled, mask))
    assert not torch.allclose(model(x, nodes), model(x, filled))  # control: mask matters


def test_architecture_and_engine_support():
    model = OneLayerGCN(8, 3)
    names = [n for n, _ in model.named_parameters()]
    assert names == ["encoder.0.weight", "encoder.0.bias", "agg.weight", "decoder.0.weight",
                     "decoder.0.bias"]  # Θ_agg has no bias by default
    assert model.agg.weight.shape == (100, 100)
    check_model(model)
    assert "inverse_degree" in repr(model)


def test_symmetric_normalisation_is_refused():
    with pytest.raises(InvalidParameterError, match="normalization"):
        OneLayerGCN(4, 2, normalization="symmetric")
    with pytest.raises(InvalidParameterError):
        OneLayerGCN(4, 2, activation="sigmoid")
    with pytest.raises(InvalidParameterError):
        OneLayerGCN(4, 2, encoder_layers=0)


@pytest.mark.parametrize("cached", [False, True])
def test_indexed_first_layer_rule_matches_the_plain_model(cached):
    """The IndexedLinear ghost rule (used by the DP-GNN trainer) gives the same per-node norms
    and clipped sums as the plain (B, K+1, d) Linear rule, in float64."""
    from torch.nn import functional as F

    from gnnprivacy.training.dp import clipped_gradient_sum

    n = 9
    ei = torch.cat([ring_graph(n), torch.tensor([[0, 4], [4, 0]])], 1)
    x = torch.randn(n, 5, generator=torch.Generator().manual_seed(2), dtype=DT)
    y = torch.arange(n) % 3
    nodes = padded_neighbourhoods(ei, n, width=4)
    plain = OneLayerGCN(5, 3, hidden_channels=6).to(DT)
    indexed = OneLayerGCN(5, 3, hidden_channels=6, indexed_input=True).to(DT)
    indexed.load_state_dict(plain.state_dict())
    if cached:
        indexed.encoder[0].cache_grams(x, nodes)

    def run(model):
        return clipped_gradient_sum(
            model, lambda: F.cross_entropy(model(x, nodes), y, reduction="none"),
            clip_norm=0.05, row_mask=nodes >= 0)

    ref, got = run(plain), run(indexed)
    torch.testing.assert_close(got.norms, ref.norms)
    assert (ref.norms > 0.05).any()  # clipping is active, so the factors matter
    for name, value in ref.sums.items():
        torch.testing.assert_close(got.sums[name], value)
    # positive control: a different batch gives different sums, so the comparison can fail
    other = clipped_gradient_sum(
        plain, lambda: F.cross_entropy(plain(x, nodes.flip(0)), y, reduction="none"),
        clip_norm=0.05, row_mask=nodes.flip(0) >= 0)
    assert not torch.allclose(other.sums["encoder.0.weight"], got.sums["encoder.0.weight"])
