"""The ``"edges"`` sampler of make_private (issue 46): the occurrence bound of one edge,
found by enumeration on small adversarial graphs, the computation subgraphs' exactness
against the full graph, and the per-subgraph clipped sums against a naive loop."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch_geometric.data import Data
from torch_geometric.nn import GCNConv, SAGEConv

import gnnprivacy as gp
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.training.private import edge_sampler as es
from gnnprivacy.training.private.edge_sampler import (EdgeSubgraphs, edge_bounding_factor,
                                                      edge_occurrence_bound)


def _graph(n, pairs, *, undirected):
    ei = torch.tensor(pairs, dtype=torch.long).t().reshape(2, -1)
    if undirected and ei.numel():
        ei = torch.cat([ei, ei.flip(0)], 1)
    return Data(x=torch.eye(n), y=torch.arange(n) % 2, edge_index=ei,
                train_mask=torch.ones(n, dtype=torch.bool), num_nodes=n)


def _all_subgraphs(sampler, data):
    """``centre -> (nodes, entries)`` in node ids, every node a centre."""
    centres = torch.arange(data.num_nodes)
    batch = sampler.subgraphs(centres)
    out = {}
    for i in range(int(batch.num_subgraphs)):
        rows = batch.batch == i
        nodes = frozenset(batch.n_id[rows].tolist())
        keep = rows[batch.edge_index[1]]
        ei = batch.n_id[batch.edge_index[:, keep]]
        out[int(batch.n_id[batch.center[i]])] = (nodes, frozenset(map(tuple, ei.t().tolist())))
    return out


def _setup(data, seed=0, **kw):
    s = EdgeSubgraphs(**kw)
    s.setup(data, generator=torch.Generator().manual_seed(seed))
    return s


def _toggle(data, u, v, *, undirected):
    pairs = set(map(tuple, data.edge_index.t().tolist()))
    unit = {(u, v), (v, u)} if undirected else {(u, v)}
    new = (pairs - unit) if unit & pairs else (pairs | unit)
    out = data.clone()
    out.edge_index = (torch.tensor(sorted(new), dtype=torch.long).t().reshape(2, -1)
                      if new else torch.zeros(2, 0, dtype=torch.long))
    return out


def worst_changed(data, *, undirected, seed=0, **kw):
    """The most centres whose subgraph changes when one unit edge is added or removed, over
    every unit of ``data`` (enumeration), with the unit that attains it."""
    base = _all_subgraphs(_setup(data, seed, edge_unit="undirected" if undirected
                                 else "directed", **kw), data)
    n = int(data.num_nodes)
    units = (itertools.combinations(range(n), 2) if undirected
             else itertools.permutations(range(n), 2))
    best = (0, None)
    for u, v in units:
        other = _toggle(data, u, v, undirected=undirected)
        sub = _all_subgraphs(_setup(other, seed, edge_unit="undirected" if undirected
                                    else "directed", **kw), other)
        changed = sum(base[c] != sub[c] for c in base)
        best = max(best, (changed, (u, v)), key=lambda t: t[0])
    return best


def _random_pairs(n, p, seed):
    g = torch.Generator().manual_seed(seed)
    return [(a, b) for a in range(n) for b in range(n)
            if a != b and float(torch.rand(1, generator=g)) < p]


CASES = [  # hops, max_out_degree, max_in_degree, undirected
    (1, None, None, True), (1, None, 2, False), (2, 1, 2, False),
    pytest.param(1, None, None, False, marks=pytest.mark.slow),
    pytest.param(2, 1, None, False, marks=pytest.mark.slow),
    pytest.param(2, 2, None, True, marks=pytest.mark.slow),
    pytest.param(3, 1, None, True, marks=pytest.mark.slow)]


@pytest.mark.parametrize("hops,dout,din,undirected", CASES)
def test_worst_edge_by_enumeration_is_within_the_bound(hops, dout, din, undirected):
    """Every unit edge of random and dense small graphs (added or removed) changes at most
    ``occurrence * bounding_factor`` subgraphs."""
    bound = (edge_occurrence_bound(hops, dout, undirected=undirected)
             * edge_bounding_factor(hops, din))
    kw = {"hops": hops, "max_out_degree": dout, "max_in_degree": din}
    n = 7
    for seed, p in ((0, 0.3), (1, 0.6)):
        pairs = _random_pairs(n, p, seed)
        if undirected:
            pairs = [(a, b) for a, b in pairs if a < b]
        changed, unit = worst_changed(_graph(n, pairs, undirected=undirected),
                                      undirected=undirected, seed=seed, **kw)
        assert changed <= bound, (changed, bound, unit)


def _displacing_graph(seed):
    """Directed, D = 1, K = 2: ``u -> x -> x2`` and ``v -> v2``; adding ``u -> v`` (when it
    outranks ``u -> x``) changes the subgraphs of v, v2 (it enters) and x, x2 (``u -> x``
    leaves): 4 = occurrence 2 x bounding factor 2."""
    u, x, x2, v, v2 = range(5)
    return _graph(5, [(u, x), (x, x2), (v, v2)], undirected=False)


def test_the_bound_is_attained_and_the_bounding_factor_is_needed():
    """Tightness, and the broken control: the occurrence alone (2) is exceeded by the
    displacement an added edge causes under the degree bound."""
    kw = {"hops": 2, "max_out_degree": 1}
    results = [worst_changed(_displacing_graph(0), undirected=False, seed=s, **kw)[0]
               for s in range(3)]
    occurrence = edge_occurrence_bound(2, 1, undirected=False)
    assert occurrence == 2 and edge_bounding_factor(2, None) == 2
    assert max(results) == occurrence * 2 > occurrence
    # K = 1 needs no bound: an undirected edge changes exactly its two ends' stars
    star = worst_changed(_graph(5, [(0, 1), (1, 2), (2, 3), (0, 4)], undirected=True),
                         undirected=True, hops=1)
    assert star[0] == 2 == edge_occurrence_bound(1, None, undirected=True)


def test_subgraphs_one_hop_too_deep_would_break_the_bound(monkeypatch):
    """Broken control: a sampler that also takes the in-entries of the depth-K nodes (one
    hop more than the model reads) puts one edge into more subgraphs than the bound."""
    original = es.subgraph_entries
    path = _graph(6, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)], undirected=True)
    bound = edge_occurrence_bound(1, None, undirected=True)
    assert worst_changed(path, undirected=True, hops=1)[0] == bound
    monkeypatch.setattr(es, "subgraph_entries", lambda rowptr, src, centres, hops, n:
                        original(rowptr, src, centres, hops + 1, n))
    assert worst_changed(path, undirected=True, hops=1)[0] > bound


@pytest.fixture(scope="module")
def csbm():
    d = gp.load_dataset("csbm", num_nodes=300, seed=0)
    d.x = d.x.double()
    return d


@pytest.mark.parametrize("hops,dout", [(1, None), (2, 2),
                                       pytest.param(3, 1, marks=pytest.mark.slow)])
def test_one_step_holds_each_edge_in_at_most_occurrence_subgraphs(csbm, hops, dout):
    s = _setup(csbm, hops=hops, max_out_degree=dout)
    batch = s.subgraphs(s.train_nodes)
    ei = batch.n_id[batch.edge_index]
    key = torch.minimum(ei[0], ei[1]) * 300 + torch.maximum(ei[0], ei[1])
    per_unit = torch.unique(torch.stack([key, batch.batch[batch.edge_index[1]]]), dim=1)[0]
    most = int(torch.unique(per_unit, return_counts=True)[1].max())
    assert most <= s.occurrence_bound
    assert most >= min(2, s.occurrence_bound)


class SumSage(nn.Module):
    def __init__(self, f, h=8, c=4, layers=2):
        super().__init__()
        self.convs = nn.ModuleList([SAGEConv(f if i == 0 else h, h, aggr="sum")
                                    for i in range(layers)])
        self.head = nn.Linear(h, c)

    def forward(self, x, edge_index):
        for conv in self.convs:
            x = torch.tanh(conv(x, edge_index))
        return self.head(x)


@pytest.mark.parametrize("layers", [1, 2])
def test_a_centre_reads_the_same_output_in_its_subgraph_as_in_the_bounded_graph(csbm, layers):
    """The computation subgraph holds exactly what a K-layer model reads at its centre:
    the centre's output equals the model's on the whole (bounded) graph."""
    torch.manual_seed(0)
    model = SumSage(csbm.num_features, layers=layers).double()
    s = _setup(csbm, hops=layers, max_out_degree=None if layers == 1 else 3)
    batch = s.subgraphs(s.train_nodes[:40])
    counts = s._rowptr[1:] - s._rowptr[:-1]
    full_ei = torch.stack([s._src, torch.repeat_interleave(torch.arange(300), counts)])
    with torch.no_grad():
        full = model(csbm.x, full_ei)[batch.n_id[batch.center]]
        local = model(batch.x, batch.edge_index)[batch.center]
    torch.testing.assert_close(local, full)


def test_clipped_sums_equal_a_naive_per_subgraph_loop(csbm):
    from .test_make_private import _engine_sums, _naive_sums

    torch.manual_seed(0)
    model = SumSage(csbm.num_features, layers=2).double()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    pt = gp.make_private(model, opt, csbm, sampler=EdgeSubgraphs(max_out_degree=2,
                                                                  inference="none"),
                         noise_multiplier=1.0, steps=3, batch_size=24, seed=0,
                         max_grad_norm=0.05)
    batch, sums = _engine_sums(pt, model)
    assert batch.num_subgraphs > 3 and batch.edge_index.shape[1] > 0
    naive, norms = _naive_sums(model, batch, 0.05)
    assert max(norms) > 0.05
    for n, ref in naive.items():
        assert torch.allclose(sums[n], ref, rtol=1e-5, atol=1e-9 * (1 + ref.abs().max())), n


def test_units_directions_and_the_record(csbm):
    s = _setup(csbm)
    assert s.undirected_ and s.hops_ == 1
    assert s.num_units == int(csbm.edge_index.shape[1]) // 2
    directed = _graph(4, [(0, 1), (1, 2), (3, 2)], undirected=False)
    d = _setup(directed)
    assert not d.undirected_ and d.num_units == 3 and d.occurrence_bound == 1
    forced = _setup(directed, edge_unit="undirected")
    assert forced.undirected_ and forced.occurrence_bound == 2
    plan = s.plan(batch_size=30)
    event = plan.event_factory(3.0)
    assert plan.unit.value == "edge" and event.occurrence == 2 and event.undirected
    assert "undirected edge" in plan.scope and "predictions" in plan.scope
    unprotected = _setup(csbm, inference="unprotected").plan(batch_size=30)
    assert "UNPROTECTED" in unprotected.unaccounted[0]


def test_bad_options_are_refused_with_one_line(csbm):
    for kw in ({"edge_unit": "both"}, {"inference": "maybe"}, {"inference_share": 1.0},
               {"message_clip": float("inf")}, {"hops": 0}, {"max_out_degree": 0}):
        with pytest.raises(InvalidParameterError):
            EdgeSubgraphs(**kw)
    with pytest.raises(InvalidParameterError, match="max_out_degree"):
        _setup(csbm, hops=1, max_out_degree=3)
    mlp = nn.Sequential(nn.Linear(csbm.num_features, 4))
    with pytest.raises(InvalidParameterError, match="message passing"):
        EdgeSubgraphs().setup(csbm, model=mlp)
    gcn = GCNConv(csbm.num_features, 4)
    with pytest.raises(InvalidParameterError, match="normalise"):
        gp.make_private(gcn, torch.optim.SGD(gcn.parameters(), lr=0.1), csbm,
                        sampler="edges", epsilon=2.0)
