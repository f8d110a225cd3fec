"""Star models of HeterPoisson (spec 000 §3.4): aggregation formulas, removal, engine support."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.nn import GCNConv

from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.nn.star import SelfScale, StarGNN, star_aggregate
from gnnprivacy.sampling.star_batch import StarBatch, empty_star_batch
from gnnprivacy.training.dp import check_model

DT = torch.float64


def batch_of(centers, lists):
    sub = torch.repeat_interleave(torch.arange(len(lists)), torch.tensor([len(v) for v in lists]))
    periph = torch.tensor([j for v in lists for j in v], dtype=torch.long)
    return StarBatch(torch.tensor(centers), periph, sub, len(centers))


@pytest.fixture
def x():
    return torch.randn(8, 3, generator=torch.Generator().manual_seed(0), dtype=DT)


def test_gcn_aggregation_equals_pyg_gcnconv_on_the_star(x):
    batch = batch_of([0, 4, 7], [[1, 2, 3], [], [5]])
    conv = GCNConv(3, 3, bias=False, add_self_loops=True, normalize=True).to(DT)
    conv.lin.weight.data = torch.eye(3, dtype=DT)
    expected = conv(x, batch.star_edge_index())[batch.centers]
    torch.testing.assert_close(star_aggregate(x, batch, "gcn"), expected)
    # the formula: x_u / d_u + sum_j x_j / sqrt(d_u), d_u = |N_u| + 1
    torch.testing.assert_close(star_aggregate(x, batch, "gcn")[0],
                               x[0] / 4 + (x[1] + x[2] + x[3]) / 2)


def test_sage_and_gin_aggregations(x):
    batch = batch_of([0, 4], [[1, 2], []])
    torch.testing.assert_close(star_aggregate(x, batch, "sage")[0], (x[0] + x[1] + x[2]) / 3)
    torch.testing.assert_close(star_aggregate(x, batch, "sage")[1], x[4])
    model = StarGNN(3, 2, aggregator="gin", gin_init=0.5).to(DT)
    torch.testing.assert_close(model.aggregate(x, batch),
                               torch.stack([x[1] + x[2] + 1.5 * x[0], 1.5 * x[4]]))


def test_removal_is_not_zeroing(x):
    """G5: a removed peripheral leaves no trace; zeroing its row would change d_u (control)."""
    kept = batch_of([0], [[1, 2]])
    removed = batch_of([0], [[1]])
    zeroed_x = x.clone()
    zeroed_x[2] = 0
    for agg in ("gcn", "sage"):
        zeroed = star_aggregate(zeroed_x, kept, agg)
        assert not torch.allclose(zeroed, star_aggregate(x, removed, agg))
    gin = StarGNN(3, 2, aggregator="gin").to(DT)  # a plain sum cannot tell the two apart
    torch.testing.assert_close(gin.aggregate(zeroed_x, kept), gin.aggregate(x, removed))


@pytest.mark.parametrize("aggregator", ["gcn", "gin", "sage"])
def test_forward_shapes_empty_and_isolated(aggregator, x):
    model = StarGNN(3, 4, aggregator=aggregator, hidden_channels=5).to(DT)
    assert model(x, batch_of([0, 1], [[2], []])).shape == (2, 4)
    assert model(x, empty_star_batch()).shape == (0, 4)
    check_model(model)  # every trainable module has a ghost rule
    assert aggregator in repr(model)


def test_architecture_is_f_128_c_by_default():
    model = StarGNN(767, 10)
    shapes = [tuple(p.shape) for p in model.parameters()]
    assert shapes == [(128, 767), (128,), (10, 128), (10,)]
    assert len(list(StarGNN(5, 2, aggregator="gin", update_layers=2).parameters())) == 7


def test_self_scale():
    s = SelfScale(0.25, size=2)
    torch.testing.assert_close(s(torch.ones(3, 2)), torch.full((3, 2), 1.25))
    assert SelfScale().weight.shape == ()
    with pytest.raises(InvalidParameterError):
        SelfScale(size=0)


def test_bad_arguments():
    with pytest.raises(InvalidParameterError):
        StarGNN(3, 2, aggregator="gat")
    with pytest.raises(InvalidParameterError):
        StarGNN(0, 2)
    with pytest.raises(InvalidParameterError):
        StarGNN(3, 1)
    with pytest.raises(InvalidParameterError):
        star_aggregate(torch.zeros(2, 2), empty_star_batch(), "gin")
