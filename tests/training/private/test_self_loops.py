"""Graphs that carry self-loops (issue 45 item 5): PyG's convolutions drop them and add one per
node, so an edge-level tensor of the step has its rows in another order than the batch's
edge list. With a loop on every node the row count equals the edge count, and reading the
rows in the batch's order misplaced them: the loop guard refused an honest GCN + mean-pool
model ("the loop mixes subgraphs"), and GATConv's edge features were clipped in the wrong
graphs (per-graph clipping unequal to the naive loop: a broken sensitivity bound).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch_geometric.nn import GATConv, GCNConv, global_mean_pool
from torch_geometric.utils import add_self_loops, remove_self_loops

from gnnprivacy.training.dp import flat_capture
from gnnprivacy.training.dp.flat_capture import SubgraphMixingError
from tests.training.private.test_graph_sampler import (E_DIM, F_IN, C, _engine_sums, _graphs,
                                                       _naive_sums, _private)


def _looped(graphs, every: bool):
    """The graphs without their own self-loops, then (``every``) one loop on every node."""
    for g in graphs:
        ei, ea = remove_self_loops(g.edge_index, getattr(g, "edge_attr", None))
        if every:
            ei, ea = add_self_loops(ei, ea, fill_value=1.0, num_nodes=g.num_nodes)
        g.edge_index = ei
        if ea is not None:
            g.edge_attr = ea
    return graphs


class GAT(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.head = GATConv(F_IN, 8, edge_dim=E_DIM), nn.Linear(8, C)

    def forward(self, x, edge_index, batch, edge_attr=None):
        return self.head(global_mean_pool(torch.tanh(self.c1(x, edge_index, edge_attr)), batch))


class GCN(nn.Module):
    def __init__(self, pool_all=False):
        super().__init__()
        self.c1, self.c2, self.head = GCNConv(F_IN, 8), GCNConv(8, 8), nn.Linear(8, C)
        self.pool_all = pool_all

    def forward(self, x, edge_index, batch, edge_attr=None):
        h = F.relu(self.c2(F.relu(self.c1(x, edge_index)), edge_index))
        if self.pool_all:           # mixes the graphs: a whole-batch mean added to each row
            h = h + h.mean(0, keepdim=True)
        return self.head(global_mean_pool(h, batch))


def _gat_matches_naive(graphs) -> bool:
    torch.manual_seed(0)
    model = GAT().double()
    pt, _ = _private(model, graphs, max_grad_norm=0.05, batch_size=12)
    batch, sums = _engine_sums(pt, model)
    naive, norms = _naive_sums(model, batch, graphs, 0.05)
    assert max(norms) > 0.05                        # clipping is active
    return all(torch.allclose(sums[n], ref, rtol=1e-5, atol=1e-9 * (1 + ref.abs().max()))
               for n, ref in naive.items())


@pytest.mark.parametrize("every", [True, False], ids=["loop-on-every-node", "some-loops"])
def test_gat_edge_features_are_clipped_per_graph_with_self_loops_in_the_input(every):
    graphs = _graphs(edge_attr=True)
    if every:
        graphs = _looped(graphs, every=True)
    else:                                            # random graphs: some self-loops
        assert any(bool((g.edge_index[0] == g.edge_index[1]).any()) for g in graphs)
    assert _gat_matches_naive(graphs)


def test_control_reading_the_rows_in_the_batch_order_breaks_the_per_graph_clipping(monkeypatch):
    """Control: the capture reading GATConv's edge rows as the batch's own edge order (what
    it did) gives per-graph sums unequal to the naive loop on graphs with a loop per node."""
    monkeypatch.setattr(flat_capture, "_edge_level",
                        lambda model: dict.fromkeys(_edge_ids(model), False))
    assert not _gat_matches_naive(_looped(_graphs(edge_attr=True), every=True))


def _edge_ids(model):
    return [id(m.lin_edge) for m in model.modules() if isinstance(getattr(m, "lin_edge", None),
                                                                    nn.Module)]


def _train(model, graphs):
    pt, opt = _private(model, graphs, batch_size=12)
    for batch in pt.loader:
        opt.zero_grad()
        F.cross_entropy(model(batch.x, batch.edge_index, batch.batch), batch.y).backward()
        opt.step()
    pt.close()
    return pt


def test_an_honest_gcn_on_graphs_with_a_loop_on_every_node_trains():
    torch.manual_seed(0)
    pt = _train(GCN().double(), _looped(_graphs(), every=True))
    assert pt.steps == pt.steps_planned == 3


def test_a_model_that_mixes_graphs_is_still_refused_on_looped_graphs():
    """Control: the reading added for re-added loops does not blind the check."""
    torch.manual_seed(0)
    with pytest.raises(SubgraphMixingError, match="mixes subgraphs"):
        _train(GCN(pool_all=True).double(), _looped(_graphs(), every=True))


def test_control_without_the_re_added_reading_the_honest_gcn_is_refused(monkeypatch):
    """Control: the loop guard without the reading of re-added loops refuses the honest model
    (the false positive of issue 45: "the loop mixes subgraphs")."""
    monkeypatch.setattr(flat_capture.BatchLayout, "loops_readded",
                        lambda self: torch.zeros(0, dtype=torch.long))
    torch.manual_seed(0)
    with pytest.raises(SubgraphMixingError, match="the loop mixes subgraphs"):
        _train(GCN().double(), _looped(_graphs(), every=True))
