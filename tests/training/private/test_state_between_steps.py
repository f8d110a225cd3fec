"""Issue 43 item 5: no state outlives a step. Four loops that `make_private` accepted moved
other subgraphs' (or graphs') clipped gradients, or the parameters, when one node (graph)
changed: a model that keeps a batch statistic in a plain attribute and uses it in the next
steps, a custom ``autograd.Function`` whose backward mixes rows, an in-place edit of a
parameter after ``optimizer.step()``, and a second module sharing the model's head trained by
a plain optimizer. Each is measured with the new checks switched off (the leak is real), then
refused with them on, on the node path and on the graph path.

The measure: two runs on graphs that differ in one node (graph) of the first batch, SGD at
learning rate 0 (the DP step moves nothing, so what moves is the loop's doing); the clipped
per-subgraph gradients of the second batch, which does not hold the changed unit, and the
parameters after the first step are compared."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import gnnprivacy as gp
from gnnprivacy.training.dp.flat_capture import SubgraphMixingError
from gnnprivacy.training.private import guards
from gnnprivacy.training.private.guards import LoopGuard
from tests.training.private.test_graph_sampler import _graphs
from tests.training.private.test_loop_guards import (CLIP, Sage, _clipped_rows, _leak, _run,
                                                      honest)
from tests.training.private.test_make_private import data  # noqa: F401 (the fixture)


# ---------------------------------------------------------------------- the patterns
class KeepsMean(Sage):
    """Adds the previous batch's mean embedding, kept in a plain attribute."""

    def __init__(self, f, h=8):
        super().__init__(f, h)
        self.prev = torch.zeros(h, dtype=torch.float64)

    def forward(self, x, edge_index):
        h = torch.tanh(self.c1(x, edge_index)) + self.prev
        if torch.is_grad_enabled():
            self.prev = h.mean(0).detach()
        return self.head(torch.tanh(self.c2(h, edge_index)))


class MixRows(torch.autograd.Function):
    """The identity forward; a backward that adds the batch's mean gradient to every row."""

    @staticmethod
    def forward(ctx, h):
        return h.clone()

    @staticmethod
    def backward(ctx, g):
        return g + g.mean(0, keepdim=True)


class CustomBackward(Sage):
    def forward(self, x, edge_index):
        h = MixRows.apply(torch.tanh(self.c1(x, edge_index)))
        return self.head(torch.tanh(self.c2(h, edge_index)))


def edit_after_step(model, batch, ctx):
    with torch.no_grad():
        model.head.bias.add_(0.01 * batch.x.mean())


def shared_head_after_step(model, batch, ctx):
    if "aux" not in ctx:
        ctx["aux"] = nn.Sequential(nn.Linear(batch.x.shape[1], model.head.in_features),
                                   nn.Tanh(), model.head).double()
        ctx["aux_opt"] = torch.optim.SGD(ctx["aux"][0].parameters(), lr=0.1)
        ctx["aux_opt"].add_param_group({"params": model.head.parameters()})
    ctx["aux_opt"].zero_grad()
    F.cross_entropy(ctx["aux"](batch.x), batch.y).backward()
    ctx["aux_opt"].step()


class GraphKeepsMean(nn.Module):
    def __init__(self, f, c=3, h=8):
        super().__init__()
        from torch_geometric.nn import GCNConv

        self.conv, self.head = GCNConv(f, h), nn.Linear(h, c)
        self.prev = torch.zeros(h, dtype=torch.float64)

    def forward(self, x, edge_index, batch):
        from torch_geometric.nn import global_mean_pool

        g = global_mean_pool(torch.tanh(self.conv(x, edge_index)), batch) + self.prev
        if torch.is_grad_enabled():
            self.prev = g.mean(0).detach()
        return self.head(g)


class GraphCustomBackward(GraphKeepsMean):
    def forward(self, x, edge_index, batch):
        from torch_geometric.nn import global_mean_pool

        g = global_mean_pool(MixRows.apply(torch.tanh(self.conv(x, edge_index))), batch)
        return self.head(g)


# ---------------------------------------------------------------------- the measure
@pytest.fixture
def checks_off(monkeypatch):
    """The control: the checks of this item switched off."""
    monkeypatch.setattr(LoopGuard, "_since_step", lambda self, state, kept: None)
    monkeypatch.setattr(LoopGuard, "check_between_steps", lambda self: None)
    monkeypatch.setattr(LoopGuard, "_check_kept", lambda self, *args: None)
    monkeypatch.setattr(guards, "_custom_function", lambda node: None)


def _node_forward(model, batch):
    out = model(batch.x, batch.edge_index)
    F.cross_entropy(out[batch.center], batch.y[batch.center]).backward()


def _graph_forward(model, batch):
    F.cross_entropy(model(batch.x, batch.edge_index, batch.batch), batch.y).backward()


def _two_steps(model, source, *, sampler, forward, after):
    """Step 1 (the loop's body, ``optimizer.step()``, then ``after``), then the second
    batch's forward and backward; its clipped rows, the parameters after step 1, the
    batches' units."""
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    pt = gp.make_private(model, opt, source, sampler=sampler, noise_multiplier=1.0, steps=3,
                         batch_size=54 if sampler != "graphs" else 12, max_grad_norm=CLIP,
                         seed=0)
    ctx = {}
    batches = iter(pt.loader)         # kept: a loop that stops iterating is refused
    first = next(batches)
    opt.zero_grad()
    forward(model, first)
    opt.step()
    if after is not None:
        after(model, first, ctx)
    params = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
    second = pt._draw()
    opt.zero_grad()
    forward(model, second)
    pt.guard.stop()
    rows = _clipped_rows(pt, model)
    pt._pending = None
    pt.close()
    units = (lambda b: set((b.g_id if hasattr(b, "g_id") else b.n_id).tolist()))
    return rows, params, units(first), units(second)


def _moves(make, source, changed_source, *, sampler, forward, after=None):
    """(largest, summed) change of the second batch's clipped rows in units of C, and the
    largest change of a parameter, between the two graphs."""
    torch.manual_seed(0)
    model = make()
    rows0, p0, _, _ = _two_steps(copy.deepcopy(model), source, sampler=sampler,
                                 forward=forward, after=after)
    rows1, p1, _, _ = _two_steps(copy.deepcopy(model), changed_source, sampler=sampler,
                                 forward=forward, after=after)
    moved = (rows1 - rows0).norm(dim=1) / CLIP
    return float(moved.max()), float(moved.sum()), float((p1 - p0).abs().max())


def _node_pair(data):
    """The graph and a copy in which one node of the first batch, absent from the second,
    has other features."""
    torch.manual_seed(0)
    _, _, first, second = _two_steps(Sage(data.num_features).double(), data,
                                     sampler="heterpoisson", forward=_node_forward, after=None)
    node = min(first - second)
    changed = copy.copy(data)
    changed.x = data.x.clone()
    changed.x[node] += 3.0
    return changed


def _graph_pair(graphs):
    torch.manual_seed(0)
    _, _, first, second = _two_steps(GraphKeepsMean(graphs[0].num_features).double(), graphs,
                                     sampler="graphs", forward=_graph_forward, after=None)
    g = min(first - second)
    changed = list(graphs)
    changed[g] = graphs[g].clone()
    changed[g].x = graphs[g].x + 3.0
    return changed


NODE_PATTERNS = {
    # name: (model, after optimizer.step(), what the refusal says)
    "a batch statistic kept in a plain attribute": (KeepsMean, None, "keeps a tensor"),
    "an in-place edit of a parameter after step()": (Sage, edit_after_step,
                                                     "changed after optimizer.step"),
    "a second module sharing the head, trained after step()": (Sage, shared_head_after_step,
                                                               "changed after optimizer.step"),
}


# ---------------------------------------------------------------------- node path
def test_the_honest_loop_moves_nothing_across_steps(data):
    top, total, params = _moves(lambda: Sage(data.num_features).double(), data,
                                _node_pair(data), sampler="heterpoisson",
                                forward=_node_forward)
    assert top == 0 and total == 0 and params == 0


@pytest.mark.parametrize("name", sorted(NODE_PATTERNS))
def test_a_state_pattern_leaks_with_the_check_off(name, data, checks_off):
    make_model, after, _ = NODE_PATTERNS[name]
    top, total, params = _moves(lambda: make_model(data.num_features).double(), data,
                                _node_pair(data), sampler="heterpoisson",
                                forward=_node_forward, after=after)
    print(f"{name}: other subgraphs moved by up to {top:.3f} C ({total:.3f} C in all), "
          f"parameters by {params:.3g}")
    assert top > 1e-6 or params > 1e-6


@pytest.mark.parametrize("name", sorted(NODE_PATTERNS))
def test_a_state_pattern_is_refused(name, data):
    make_model, after, message = NODE_PATTERNS[name]
    torch.manual_seed(0)
    model = make_model(data.num_features).double()
    with pytest.raises(SubgraphMixingError, match=message):
        _two_steps(model, data, sampler="heterpoisson", forward=_node_forward, after=after)


def test_a_custom_backward_leaks_in_the_naive_control_and_is_refused(data):
    top, total, _ = _leak(CustomBackward, data, honest)
    print(f"custom backward: other subgraphs moved by up to {top:.3f} C, {total:.3f} C in all")
    assert top > 1e-6
    torch.manual_seed(0)
    model = CustomBackward(data.num_features).double()
    with pytest.raises(SubgraphMixingError, match="custom torch.autograd.Function.*MixRows"):
        _run(model, data, honest, {})


def _trained(model, data, steps, between=None):
    """``steps`` honest steps, ``between(batch)`` after each ``optimizer.step()``."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    pt = gp.make_private(model, opt, data, sampler="heterpoisson", noise_multiplier=1.0,
                         steps=steps, batch_size=54, seed=0)
    for batch in pt.loader:
        opt.zero_grad()
        _node_forward(model, batch)
        opt.step()
        if between is not None:
            between(batch)
    return pt, opt, batch


def test_a_constant_tensor_attribute_and_evaluation_between_steps_are_allowed(data):
    """An attribute set before training and never changed, and a no-grad evaluation of the
    whole graph between steps, change nothing the checks watch."""
    torch.manual_seed(0)
    model = Sage(data.num_features).double()
    model.scale = torch.ones(1, dtype=torch.float64)

    def evaluate(batch):
        model.eval()
        with torch.no_grad():
            model(data.x, data.edge_index)
        model.train()

    pt, _, _ = _trained(model, data, 3, evaluate)
    pt.close()
    assert pt.steps == 3


def test_a_change_after_the_last_step_is_refused_at_close(data):
    torch.manual_seed(0)
    model = Sage(data.num_features).double()
    pt, opt, batch = _trained(model, data, 2)
    edit_after_step(model, batch, {})
    with pytest.raises(SubgraphMixingError, match="changed after optimizer.step"):
        pt.close()
    assert "step" not in opt.__dict__          # the hooks are gone all the same


# ---------------------------------------------------------------------- graph path
def _first_rows(model, graphs):
    """The clipped rows of the first batch of graphs (no step), and its graphs."""
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    pt = gp.make_private(model, opt, graphs, sampler="graphs", noise_multiplier=1.0, steps=3,
                         batch_size=12, max_grad_norm=CLIP, seed=0)
    batch = pt._draw()
    _graph_forward(model, batch)
    pt.guard.stop()
    rows = _clipped_rows(pt, model)
    pt._pending = None
    pt.close()
    return rows, batch.g_id.tolist()


def test_graph_path_kept_state_leaks_with_the_check_off(checks_off):
    graphs = _graphs(n=60)
    top, total, _ = _moves(lambda: GraphKeepsMean(graphs[0].num_features).double(), graphs,
                           _graph_pair(graphs), sampler="graphs", forward=_graph_forward)
    print(f"graph path, kept mean: other graphs moved by up to {top:.3f} C, {total:.3f} C")
    assert top > 1e-6


def test_graph_path_kept_state_is_refused():
    graphs = _graphs(n=60)
    torch.manual_seed(0)
    with pytest.raises(SubgraphMixingError, match="keeps a tensor.*prev"):
        _two_steps(GraphKeepsMean(graphs[0].num_features).double(), graphs, sampler="graphs",
                   forward=_graph_forward, after=None)


def test_graph_path_custom_backward_leaks_with_the_check_off(checks_off):
    """One graph's data reaches the other graphs' clipped gradients of the same step."""
    graphs = _graphs(n=60)
    torch.manual_seed(0)
    model = GraphCustomBackward(graphs[0].num_features).double()
    rows0, ids = _first_rows(copy.deepcopy(model), graphs)
    changed = list(graphs)
    changed[ids[0]] = graphs[ids[0]].clone()
    changed[ids[0]].x = graphs[ids[0]].x + 3.0
    rows1, _ = _first_rows(copy.deepcopy(model), changed)
    moved = ((rows1 - rows0)[1:].norm(dim=1) / CLIP)
    print(f"graph path, custom backward: other graphs moved by up to {float(moved.max()):.3f} "
          f"C, {float(moved.sum()):.3f} C in all")
    assert float(moved.max()) > 1e-6


def test_graph_path_custom_backward_is_refused():
    graphs = _graphs(n=60)
    torch.manual_seed(0)
    with pytest.raises(SubgraphMixingError, match="custom torch.autograd.Function"):
        _two_steps(GraphCustomBackward(graphs[0].num_features).double(), graphs,
                   sampler="graphs", forward=_graph_forward, after=None)


# ---------------------------------------------------------------------- a loop that stops
def _mixing_step_after_next_iter(model, data):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    pt = gp.make_private(model, opt, data, sampler="heterpoisson", noise_multiplier=1.0,
                         steps=3, batch_size=54, seed=0)
    batch = next(iter(pt.loader))          # the loader's generator is closed right here
    opt.zero_grad()
    out = model(batch.x - batch.x.mean(0), batch.edge_index)        # mixes the subgraphs
    F.cross_entropy(out[batch.center], batch.y[batch.center]).backward()
    opt.step()
    return pt


def test_a_step_after_the_loop_stopped_iterating_is_refused(data):
    torch.manual_seed(0)
    with pytest.raises(SubgraphMixingError, match="stopped iterating pt.loader"):
        _mixing_step_after_next_iter(Sage(data.num_features).double(), data)


def test_without_the_cut_check_such_a_step_goes_unchecked(data, monkeypatch):
    """The broken control: the recording ends with the generator, so a mixing loop's step
    is released unrefused."""
    stop = LoopGuard.stop
    monkeypatch.setattr(LoopGuard, "stop", lambda self, cut=False: stop(self))
    torch.manual_seed(0)
    pt = _mixing_step_after_next_iter(Sage(data.num_features).double(), data)
    assert pt.steps == 1
