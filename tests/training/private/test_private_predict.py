"""`private_predict`: the user's own model predicts without reading any training node
(issue 38 item 4)."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch_geometric.nn import GCNConv, global_mean_pool

from gnnprivacy.datasets import load_dataset
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.training.private import private_predict


@pytest.fixture(scope="module")
def data():
    return load_dataset("csbm", num_nodes=200, num_features=8, num_classes=3, seed=0)


class Net(nn.Module):
    """Two GCN layers and a global term: every node's output reads the whole graph it sees."""

    def __init__(self, f, h=8, c=3):
        super().__init__()
        self.c1, self.c2, self.head = GCNConv(f, h), GCNConv(h, h), nn.Linear(h, c)

    def forward(self, x, edge_index):
        h = torch.relu(self.c2(torch.relu(self.c1(x, edge_index)), edge_index))
        whole = global_mean_pool(h, torch.zeros(h.shape[0], dtype=torch.long))
        return self.head(h + whole)


def test_no_training_node_reaches_a_prediction(data):
    torch.manual_seed(0)
    model = Net(data.num_features)
    queries = (~data.train_mask).nonzero().flatten()
    before = private_predict(model, data)
    assert before.shape == (queries.numel(), 3)
    changed = data.clone()
    changed.x[data.train_mask] += 50.0                       # every training node's features
    extra = data.train_mask.nonzero().flatten()[:5]          # and new edges of training nodes
    changed.edge_index = torch.cat([data.edge_index, torch.stack([extra, queries[:5]]),
                                    torch.stack([queries[:5], extra])], 1)
    torch.testing.assert_close(private_predict(model, changed), before)
    # control: the model on the whole graph reads them (multi-hop and through the global term)
    with torch.no_grad():
        assert not torch.allclose(model(changed.x, changed.edge_index)[queries],
                                  model(data.x, data.edge_index)[queries])
    # the same logits as the model on the graph without the training nodes' edges and rows
    with torch.no_grad():
        sub = data.subgraph(~data.train_mask)
        torch.testing.assert_close(model(sub.x, sub.edge_index), before)


def test_queries_keep_their_order_and_training_queries_are_refused(data):
    model = Net(data.num_features)
    every = private_predict(model, data)
    queries = (~data.train_mask).nonzero().flatten()
    pick = queries[[5, 0, 3]]
    torch.testing.assert_close(private_predict(model, data, nodes=pick), every[[5, 0, 3]])
    with pytest.raises(InvalidParameterError, match="nodes.*non-training nodes.*training node"):
        private_predict(model, data, nodes=data.train_mask.nonzero().flatten()[:2])


def test_the_run_training_set_overrides_the_graphs_split(data):
    model = Net(data.num_features)
    other = data.clone()
    other.train_mask = torch.zeros_like(data.train_mask)     # a split with no training node
    got = private_predict(model, other, train_mask=data.train_mask)
    torch.testing.assert_close(got, private_predict(model, data))
    with pytest.raises(InvalidParameterError, match="train_mask"):
        del other.train_mask
        private_predict(model, other)


def test_edge_attributes_travel_with_the_edges_and_the_mode_is_restored(data):
    model = Net(data.num_features)
    model.train()
    weighted = data.clone()
    weighted.edge_weight = torch.rand(data.edge_index.shape[1], generator=torch.Generator().manual_seed(0))
    seen = {}

    def forward(m, g):
        seen["training"], seen["weights"] = m.training, g.edge_weight.numel() == g.edge_index.shape[1]
        return m.head(torch.relu(m.c1(g.x, g.edge_index, g.edge_weight)))

    private_predict(model, weighted, forward=forward)
    assert seen == {"training": False, "weights": True} and model.training
