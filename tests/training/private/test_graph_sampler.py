"""gp.make_private(..., sampler="graphs"): graph-level DP (unit graph) for any PyG model.

Per-graph clipping is checked against a naive loop that runs the model on every graph of the
batch alone and clips its whole gradient; controls show the checks catch what they should
(a model that pools without batch=, a node-level output, a broken per-graph rule).
"""

from __future__ import annotations

import io
import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch_geometric.data import Data
from torch_geometric.nn import (GCNConv, GINConv, GINEConv, GraphConv, SAGEConv,
                                global_add_pool, global_max_pool, global_mean_pool)

import gnnprivacy as gp
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.training.dp.flat_capture import SubgraphMixingError

F_IN, C, E_DIM = 5, 3, 3
POOLS = {"mean": global_mean_pool, "sum": global_add_pool, "max": global_max_pool}


def _graphs(n=60, seed=0, edge_attr=False, regression=False):
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        k = int(torch.randint(3, 12, (1,), generator=gen))
        m = 2 * k
        src = torch.randint(0, k, (m,), generator=gen)
        dst = torch.randint(0, k, (m,), generator=gen)
        ei = torch.stack([torch.cat([src, dst]), torch.cat([dst, src])])
        y = (torch.randn(1, 1, generator=gen, dtype=torch.float64) if regression
             else torch.tensor([i % C]))
        g = Data(x=torch.randn(k, F_IN, generator=gen, dtype=torch.float64), edge_index=ei, y=y)
        if edge_attr:
            g.edge_attr = torch.randn(ei.shape[1], E_DIM, generator=gen, dtype=torch.float64)
        out.append(g)
    return out


def _gin(f, h):
    return GINConv(nn.Sequential(nn.Linear(f, h), nn.ReLU(), nn.Linear(h, h)), train_eps=True)


def _gine(f, h):
    return GINEConv(nn.Sequential(nn.Linear(f, h), nn.ReLU(), nn.Linear(h, h)),
                    train_eps=True, edge_dim=E_DIM)


CONVS = {"gin": _gin, "gcn": GCNConv, "graphconv": GraphConv, "sage": SAGEConv, "gine": _gine}


class GraphNet(nn.Module):
    """Two convolutions, a pooling with batch=, a Linear head: one row per graph."""

    def __init__(self, conv, pool, out=C, h=8):
        super().__init__()
        self.edge = conv == "gine"
        self.c1, self.c2 = CONVS[conv](F_IN, h), CONVS[conv](h, h)
        self.pool, self.head = POOLS[pool], nn.Linear(h, out)

    def forward(self, x, edge_index, batch, edge_attr=None):
        extra = (edge_attr,) if self.edge else ()
        h = torch.tanh(self.c1(x, edge_index, *extra))
        h = torch.tanh(self.c2(h, edge_index, *extra))
        return self.head(self.pool(h, batch))


def _forward(model, b):
    return model(b.x, b.edge_index, b.batch, getattr(b, "edge_attr", None))


def _private(model, graphs, **kw):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    kw.setdefault("noise_multiplier", 1.0)
    kw.setdefault("steps", 3)
    return gp.make_private(model, opt, graphs, sampler="graphs", seed=0, **kw), opt


def _loss(out, y):
    return F.mse_loss(out, y) if y.is_floating_point() else F.cross_entropy(out, y)


def _engine_sums(pt, model):
    batch = pt._draw()
    _loss(_forward(model, batch), batch.y).backward()
    layout = pt._pending
    pt.capture.check_inputs(layout)
    pt.capture.check_output_rows(layout)
    sums = pt._clipped_sums(layout, float(layout.num_subgraphs))
    pt.close()
    return batch, sums


def _naive_sums(model, batch, graphs, clip):
    """Every graph of the batch alone (from the training list), its gradient clipped."""
    params = [p for p in model.parameters() if p.requires_grad]
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    rows = []
    for g_id in batch.g_id.tolist():
        g = graphs[g_id]
        out = model(g.x, g.edge_index, torch.zeros(g.num_nodes, dtype=torch.long),
                    getattr(g, "edge_attr", None))
        grads = torch.autograd.grad(_loss(out, g.y), params, allow_unused=True)
        rows.append(torch.cat([(torch.zeros_like(p) if d is None else d).flatten()
                               for d, p in zip(grads, params)]))
    flat = torch.stack(rows)                               # one whole gradient per graph
    norms = flat.norm(dim=1)
    clipped = (flat * (clip / norms).clamp(max=1.0).unsqueeze(1)).sum(0)
    parts = torch.split(clipped, [p.numel() for p in params])
    return {n: t.view_as(p) for n, t, p in zip(names, parts, params)}, norms.tolist()


def _assert_equal(sums, naive):
    for n, ref in naive.items():
        assert torch.allclose(sums[n], ref, rtol=1e-5, atol=1e-9 * (1 + ref.abs().max())), n


@pytest.mark.parametrize("pool", sorted(POOLS))
@pytest.mark.parametrize("conv", sorted(CONVS))
def test_per_graph_clipping_equals_a_naive_loop_over_single_graphs(conv, pool):
    graphs = _graphs(edge_attr=conv == "gine")
    torch.manual_seed(0)
    model = GraphNet(conv, pool).double()
    pt, _ = _private(model, graphs, max_grad_norm=0.05, batch_size=12)
    batch, sums = _engine_sums(pt, model)
    assert batch.num_graphs > 3 and batch.edge_index.shape[1] > 0
    assert torch.equal(batch.y, torch.cat([graphs[i].y for i in batch.g_id.tolist()]))
    naive, norms = _naive_sums(model, batch, graphs, 0.05)
    assert max(norms) > 0.05                       # clipping is active
    _assert_equal(sums, naive)


def test_a_wrong_graph_assignment_fails_the_naive_comparison():
    """Control: clipping groups that move one node to the next graph disagree with the naive
    loop (the comparison sees which rows make up a graph)."""
    graphs = _graphs()
    torch.manual_seed(0)
    model = GraphNet("sage", "mean").double()
    pt, _ = _private(model, graphs, max_grad_norm=0.05, batch_size=12)
    batch = pt._draw()
    _loss(_forward(model, batch), batch.y).backward()
    layout = pt._pending
    layout.batch = layout.batch.clone()
    layout.batch[int(batch.ptr[1])] = 0                # graph 1's first node counted in graph 0
    sums = pt._clipped_sums(layout, float(layout.num_subgraphs))
    pt.close()
    naive, _ = _naive_sums(model, batch, graphs, 0.05)
    assert not all(torch.allclose(sums[n], naive[n], rtol=1e-5) for n in naive)


def _loop(pt, model, opt, forward=_forward):
    for batch in pt.loader:
        opt.zero_grad()
        _loss(forward(model, batch), batch.y).backward()
        opt.step()


def test_ledger_epsilon_and_privacy_statement_are_graph_level():
    graphs = _graphs(n=80)
    model = GraphNet("gin", "sum").double()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    pt = gp.make_private(model, opt, graphs, sampler="graphs", epsilon=4.0, batch_size=16,
                         epochs=3, seed=1)
    for _ in range(3):                              # one pass of pt.loader per epoch
        _loop(pt, model, opt)
    assert pt.steps == pt.steps_planned == math.ceil(3 / (16 / 80))
    assert 0 < pt.epsilon <= 4.0 + 1e-9
    assert sum(e["count"] for e in pt.ledger["ledger"]["entries"]) == pt.steps
    rec = pt.privacy
    assert rec["unit"] == "graph" and rec["relation"] == "add_or_remove"
    assert rec["sample_rate"] == pytest.approx(0.2) and rec["num_train_graphs"] == 80
    assert "graph" in rec["scope"] and pt.delta == pytest.approx(1 / 800)
    assert pt.accountant.unit.value == "graph"


def test_the_batch_is_a_pyg_batch_with_the_graphs_fields():
    from torch_geometric.data import Batch

    graphs = _graphs(edge_attr=True)
    model = GraphNet("gine", "mean").double()
    pt, _ = _private(model, graphs, batch_size=12)
    batch = pt._draw()
    pt.close()                      # a drawn batch starts the loop check's recording: stop it
    assert isinstance(batch, Batch) and batch.num_graphs == batch.num_subgraphs
    assert batch.edge_attr.shape == (batch.edge_index.shape[1], E_DIM)
    assert torch.equal(batch.ptr[1:] - batch.ptr[:-1],
                       torch.bincount(batch.batch, minlength=batch.num_graphs))
    for k, g_id in enumerate(batch.g_id.tolist()):   # every graph intact, edges local
        rows = slice(int(batch.ptr[k]), int(batch.ptr[k + 1]))
        assert torch.equal(batch.x[rows], graphs[g_id].x)
        keep = batch.batch[batch.edge_index[0]] == k
        assert torch.equal(batch.edge_index[:, keep] - int(batch.ptr[k]), graphs[g_id].edge_index)
        assert torch.equal(batch.edge_attr[keep], graphs[g_id].edge_attr)


def test_poisson_rate_is_the_planned_one():
    graphs = _graphs(n=200)
    model = GraphNet("gcn", "mean").double()
    pt, _ = _private(model, graphs, batch_size=20, steps=400)
    gen = torch.Generator().manual_seed(3)
    counts = torch.zeros(200)
    for _ in range(400):
        counts[pt.sampler.sample(gen).g_id] += 1
    assert counts.sum() / (400 * 200) == pytest.approx(0.1, abs=0.005)   # 8,000 expected
    assert counts.min() > 15 and counts.max() < 70                      # ~Binomial(400, 0.1)


def test_checkpoint_round_trip_continues_the_same_run():
    graphs = _graphs()

    def run(split):
        torch.manual_seed(0)
        model = GraphNet("gin", "mean").double()
        pt, opt = _private(model, graphs, batch_size=12, steps=4)
        it = iter(pt.loader)
        for _ in range(split):
            batch = next(it)
            opt.zero_grad()
            _loss(_forward(model, batch), batch.y).backward()
            opt.step()
        return pt, model, opt

    reference = run(0)
    _loop(*reference)
    saved = io.BytesIO()
    torch.save(run(2)[0].state_dict(), saved)       # a run killed after 2 of 4 steps
    saved.seek(0)
    resumed = run(0)
    resumed[0].load_state_dict(torch.load(saved, weights_only=False))
    _loop(*resumed)
    assert resumed[0].steps == reference[0].steps == 4
    assert resumed[0].epsilon == pytest.approx(reference[0].epsilon)
    assert all(torch.allclose(a, b) for a, b in zip(resumed[1].parameters(),
                                                    reference[1].parameters()))


def test_secure_mode_draws_noise_without_a_generator():
    graphs = _graphs()
    model = GraphNet("gcn", "mean").double()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    pt = gp.make_private(model, opt, graphs, sampler="graphs", noise_multiplier=1.0, steps=2,
                         batch_size=12, secure_mode=True)
    _loop(pt, model, opt)
    assert pt.steps == 2 and pt.privacy["secure_mode"] and pt._gens["noise"] is None
    assert not any("seed" in u for u in pt.privacy["unaccounted"])


# ---------------------------------------------------------------------- refusals and bad input
class GlobalPool(GraphNet):
    """Pools the whole batch into one row (no batch=): mixes the graphs."""

    def forward(self, x, edge_index, batch, edge_attr=None):
        return super().forward(x, edge_index, None)


class NodeRows(GraphNet):
    """Returns one row per node (no pooling)."""

    def forward(self, x, edge_index, batch, edge_attr=None):
        return self.head(torch.tanh(self.c1(x, edge_index)))


class LeakyPool(GraphNet):
    """One row per graph, but every graph's row also reads the batch's global mean."""

    def forward(self, x, edge_index, batch, edge_attr=None):
        h = torch.tanh(self.c1(x, edge_index))
        return self.head(global_mean_pool(h, batch) + h.mean(0))


def test_pooling_without_batch_is_refused():
    model = GlobalPool("gcn", "mean").double()
    pt, opt = _private(model, _graphs(), batch_size=12)
    with pytest.raises(SubgraphMixingError, match="1 rows.*pool the node rows with batch="):
        _loop(pt, model, opt, forward=lambda m, b: m(b.x, b.edge_index, b.batch).expand(
            b.num_graphs, -1))


def test_an_output_with_one_row_per_node_is_refused():
    model = NodeRows("gcn", "mean").double()
    pt, opt = _private(model, _graphs(), batch_size=12)
    with pytest.raises(SubgraphMixingError, match="one row per graph"):
        for batch in pt.loader:
            opt.zero_grad()
            out = _forward(model, batch)
            F.cross_entropy(out, batch.y[batch.batch]).backward()   # node rows, graph labels
            opt.step()


def test_a_model_that_mixes_graphs_is_caught_by_the_probe():
    model = LeakyPool("gcn", "mean").double()
    pt, opt = _private(model, _graphs(), batch_size=12)
    with pytest.raises(SubgraphMixingError, match="mixes subgraphs"):
        _loop(pt, model, opt)


def test_a_dataset_of_one_graph_is_refused():
    model = GraphNet("gcn", "mean").double()
    with pytest.raises(InvalidParameterError, match="at least 2 training graphs.*1 graph"):
        _private(model, _graphs(n=1))


def test_graphs_without_features_are_refused_with_the_fix():
    graphs = _graphs()
    del graphs[5].x
    graphs[5].num_nodes = 4
    model = GraphNet("gcn", "mean").double()
    with pytest.raises(InvalidParameterError, match="graph 5: x.*Constant.*NoneType"):
        _private(model, graphs)


def test_node_level_labels_and_partial_edge_attributes_are_refused():
    graphs = _graphs()
    graphs[2].y = torch.zeros(graphs[2].num_nodes, dtype=torch.long)
    model = GraphNet("gcn", "mean").double()
    with pytest.raises(InvalidParameterError, match="graph 2: y.*one label row per graph"):
        _private(model, graphs)
    graphs = _graphs(edge_attr=True)
    del graphs[0].edge_attr
    with pytest.raises(InvalidParameterError, match="edge_attr on every graph or on none"):
        _private(model, graphs)
    with pytest.raises(InvalidParameterError, match="a list of Data graphs"):
        _private(model, graphs[0])


def test_an_edge_outside_its_own_graph_is_refused_at_make_private():
    """The sampler guarantees that a batch's edges stay inside their graphs (so the engine
    need not re-check them each step): a graph whose edge_index names a node it does not
    have would join the next graph of a batch, and is refused up front."""
    graphs = _graphs()
    graphs[7].edge_index = graphs[7].edge_index.clone()
    graphs[7].edge_index[1, 0] = graphs[7].num_nodes          # one past its last node
    model = GraphNet("gcn", "mean").double()
    with pytest.raises(InvalidParameterError, match=r"graph 7: edge_index.*node ids in \[0, "):
        _private(model, graphs)


def _joining(batch):
    """The batch's edges plus one from graph 0's first node to graph 1's."""
    extra = torch.stack([batch.ptr[:1], batch.ptr[1:2]])
    return torch.cat([batch.edge_index, extra], 1)


def _rewired_in_place(model, b):
    ei = _joining(b)
    b.edge_index[:, -1:] = ei[:, -1:]       # the batch's own tensor, changed in place
    return _forward(model, b)


@pytest.mark.parametrize("forward", [
    lambda model, b: model(b.x, _joining(b), b.batch),      # another edge_index
    _rewired_in_place], ids=["another_tensor", "changed_in_place"])
def test_edges_joining_two_graphs_are_caught_though_the_batchs_own_are_trusted(forward):
    """Broken controls of the per-step skip: only the sampler's own, unchanged edge_index
    is trusted; a new tensor or an in-place change is checked and refused."""
    model = GraphNet("gcn", "mean").double()
    pt, opt = _private(model, _graphs())
    with pytest.raises(SubgraphMixingError, match="joins subgraph"):
        _loop(pt, model, opt, forward=forward)
    assert pt.steps == 0


def test_a_regression_target_trains_with_the_same_per_graph_clipping():
    """Documented behaviour: the sampler does not read y; a float target with an MSE loss is
    clipped per graph exactly like a class label."""
    graphs = _graphs(regression=True)
    torch.manual_seed(0)
    model = GraphNet("gin", "mean", out=1).double()
    pt, _ = _private(model, graphs, max_grad_norm=0.05, batch_size=12)
    batch, sums = _engine_sums(pt, model)
    assert batch.y.shape == (batch.num_graphs, 1) and batch.y.is_floating_point()
    naive, norms = _naive_sums(model, batch, graphs, 0.05)
    assert max(norms) > 0.05
    _assert_equal(sums, naive)


def test_the_code_audit_measures_the_graph_path():
    """The canary audit observes the graphs sampler's engine: it measures the executed noise,
    clip and rate and does not flag a correct run."""
    from gnnprivacy.auditing.code import code_audit

    graphs = _graphs(n=120)

    def train():
        model = GraphNet("gcn", "mean").double()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        pt = gp.make_private(model, opt, graphs, sampler="graphs", epsilon=2.0, batch_size=24,
                             steps=40, seed=0)
        _loop(pt, model, opt)
        pt.close()
        return {"epsilon": pt.epsilon, "delta": pt.delta}

    result = code_audit(train, num_canaries=64, num_noise=64)
    assert result.runs == 40 and not result.violation
    engine = result.details["engines"][0]
    assert 0 < result.epsilon_lower_bound <= 2.0 + 1e-9, engine
