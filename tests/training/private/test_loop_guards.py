"""The user's loop cannot break the per-subgraph bound without a refusal (issue 32, part 1).

Each bypass is measured first by a naive per-subgraph control: one node that sits in exactly
one subgraph of a HeterPoisson batch (400-node csbm, clip C = 1) is changed in the graph,
the same batch is drawn again, and every *other* subgraph's clipped gradient is compared (the
claim: no change). The broken loop must show the leak in the control, and `make_private`
must refuse it before the first noisy release. The honest loop shows no leak and trains.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch_geometric.nn import SAGEConv

import gnnprivacy as gp
from gnnprivacy.training.dp import clipping, flat_capture
from gnnprivacy.training.dp.flat_capture import SubgraphMixingError
from tests.training.private.test_make_private import C, data  # noqa: F401 (the fixture)

CLIP = 1.0


class Sage(nn.Module):
    def __init__(self, f, h=8):
        super().__init__()
        self.c1, self.c2, self.head = SAGEConv(f, h), SAGEConv(h, h), nn.Linear(h, C)

    def forward(self, x, edge_index):
        return self.head(torch.tanh(self.c2(torch.tanh(self.c1(x, edge_index)), edge_index)))


class TupleOut(Sage):
    """Mixes inside and returns a tuple (the eval-mode tensor probe skipped it)."""

    def forward(self, x, edge_index):
        h = torch.tanh(self.c1(x, edge_index))
        h = h - h.mean(0)
        return self.head(torch.tanh(self.c2(h, edge_index))), h


class DictOut(TupleOut):
    def forward(self, x, edge_index):
        out, h = super().forward(x, edge_index)
        return {"out": out, "hidden": h}


class HandNorm(nn.Module):
    """A hand-written batch normalisation: batch statistics in train mode only."""

    def __init__(self, h):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))

    def forward(self, x):
        if self.training:
            x = (x - x.mean(0)) / (x.std(0) + 1e-5)
        return x * self.weight


class WithHandNorm(Sage):
    def __init__(self, f, h=8):
        super().__init__(f, h)
        self.norm = HandNorm(h)

    def forward(self, x, edge_index):
        h = self.norm(torch.tanh(self.c1(x, edge_index)))
        return self.head(torch.tanh(self.c2(h, edge_index)))


class RunningMean(Sage):
    """Keeps a running mean of its inputs in a buffer (released by state_dict)."""

    def __init__(self, f, h=8):
        super().__init__(f, h)
        self.register_buffer("running", torch.zeros(f, dtype=torch.float64))

    def forward(self, x, edge_index):
        if torch.is_grad_enabled():
            self.running.mul_(0.9).add_(0.1 * x.mean(0))
        return super().forward(x, edge_index)


def honest(model, batch, ctx):
    out = model(batch.x, batch.edge_index)
    F.cross_entropy(out[batch.center], batch.y[batch.center]).backward()


def tuple_out(model, batch, ctx):
    out = model(batch.x, batch.edge_index)
    out = out["out"] if isinstance(out, dict) else out[0]
    F.cross_entropy(out[batch.center], batch.y[batch.center]).backward()


def loop_mixing(model, batch, ctx):
    out = model(batch.x - batch.x.mean(0), batch.edge_index)
    F.cross_entropy(out[batch.center], batch.y[batch.center]).backward()


def loss_mixing(model, batch, ctx):
    out = model(batch.x, batch.edge_index)
    F.cross_entropy((out - out.mean(0))[batch.center], batch.y[batch.center]).backward()


def detached_scale(model, batch, ctx):
    out = model(batch.x, batch.edge_index)
    scale = out.abs().mean().detach()             # one number from every subgraph
    F.cross_entropy(out[batch.center] * scale, batch.y[batch.center]).backward()


def python_number(model, batch, ctx):
    out = model(batch.x, batch.edge_index)
    shift = out.mean().item()                     # leaves autograd and the tensors
    F.cross_entropy(out[batch.center] - shift * out[batch.center].abs(),
                    batch.y[batch.center]).backward()


def teacher_in_loop(model, batch, ctx):
    with torch.no_grad():
        soft = ctx["teacher"](ctx["data"].x, ctx["data"].edge_index).softmax(1)
    out = model(batch.x, batch.edge_index)
    c = batch.center
    F.kl_div(out[c].log_softmax(1), soft[batch.n_id[c]], reduction="batchmean").backward()


def teacher_precomputed(model, batch, ctx):
    soft = ctx["soft"]          # computed on the whole graph before the loop
    out = model(batch.x, batch.edge_index)
    c = batch.center
    F.kl_div(out[c].log_softmax(1), soft[batch.n_id[c]], reduction="batchmean").backward()


def temperature(model, batch, ctx):
    out = model(batch.x, batch.edge_index)
    F.cross_entropy(out[batch.center] / ctx["temp"], batch.y[batch.center]).backward()


def _context(data, model):
    torch.manual_seed(1)
    teacher = Sage(data.num_features).double().eval()
    with torch.no_grad():
        soft = teacher(data.x, data.edge_index).softmax(1)
    return {"teacher": teacher, "data": data, "soft": soft,
            "temp": nn.Parameter(torch.tensor(1.5, dtype=torch.float64))}


def _make(model, data, **kw):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    pt = gp.make_private(model, opt, data, sampler="heterpoisson", noise_multiplier=1.0,
                         steps=3, batch_size=54, max_grad_norm=CLIP, seed=0, **kw)
    return pt, opt


def _clipped_per_subgraph(model, data, body, ctx):
    """The engine's clipped gradient of every subgraph of the first batch, without a step
    (so no check runs), shape (B, P); and the batch."""
    pt, _ = _make(model, data)
    batch = pt._draw()
    body(model, batch, ctx)
    pt.guard.stop()
    rows = _clipped_rows(pt, model)
    pt._pending = None
    pt.close()
    return rows, batch


def _clipped_rows(pt, model) -> torch.Tensor:
    """The engine's clipped gradient of every subgraph of ``pt``'s pending batch (B, P)."""
    layout = pt._pending
    contributions = pt.capture.contributions(layout)
    params = [p for p in model.parameters() if p.requires_grad]
    # the mean loss's gradients times the realised batch are the per-subgraph losses' (as in
    # make_private's clipped sums: every rule is linear in the captured gradients)
    scale = float(layout.num_subgraphs)
    norms = sum(contributions[p].norm_sq for p in params if p in contributions).sqrt() * scale
    factors = clipping.clip_factors(norms, CLIP) * scale
    rows = []
    for s in range(layout.num_subgraphs):
        one = torch.zeros_like(factors)
        one[s] = factors[s]
        rows.append(torch.cat([contributions[p].weighted(one).flatten() if p in contributions
                               else torch.zeros(p.numel(), dtype=p.dtype) for p in params]))
    return torch.stack(rows)


def _single_node(batch):
    """A node with exactly one row in the batch, in the largest possible subgraph."""
    counts = torch.bincount(batch.n_id)
    sizes = torch.bincount(batch.batch, minlength=int(batch.num_subgraphs))
    best = None
    for row in range(batch.n_id.numel()):
        node = int(batch.n_id[row])
        if counts[node] == 1:
            s = int(batch.batch[row])
            if best is None or sizes[s] > sizes[best[1]]:
                best = (node, s)
    return best


def _leak(make_model, data, body):
    """(largest, summed) change of the other subgraphs' clipped gradients, in units of C,
    when one node of one subgraph changes; and the model/context after each run."""
    torch.manual_seed(0)
    model = make_model(data.num_features).double()
    ctx = _context(data, model)
    first = copy.deepcopy(model)
    g0, batch = _clipped_per_subgraph(first, data, body, ctx)
    node, sub = _single_node(batch)
    changed = copy.copy(data)
    changed.x = data.x.clone()
    changed.x[node] += 3.0
    ctx2 = dict(ctx, data=changed)
    with torch.no_grad():
        ctx2["soft"] = ctx["teacher"](changed.x, changed.edge_index).softmax(1)
    second = copy.deepcopy(model)
    g1, batch1 = _clipped_per_subgraph(second, changed, body, ctx2)
    assert torch.equal(batch1.n_id, batch.n_id)          # the same sampled batch
    other = torch.arange(g0.shape[0]) != sub
    moved = (g1 - g0)[other].norm(dim=1) / CLIP
    assert (g1 - g0)[sub].norm() > 0                      # the change reached its subgraph
    return float(moved.max()), float(moved.sum()), (first, second)


def _run(model, data, body, ctx, steps=2):
    pt, opt = _make(model, data)
    done = 0
    for batch in pt.loader:
        opt.zero_grad()
        body(model, batch, ctx)
        opt.step()
        done += 1
        if done == steps:
            break
    pt.close()
    return pt


def test_the_honest_loop_moves_no_other_subgraph_and_trains(data):
    top, total, _ = _leak(Sage, data, honest)
    print(f"honest loop: other subgraphs moved by up to {top:.3g} C, {total:.3g} C in all")
    assert top < 1e-12 and total < 1e-12
    torch.manual_seed(0)
    model = Sage(data.num_features).double()
    pt = _run(model, data, honest, {})
    assert pt.steps == 2 and len(pt.guard.verified) == 1


BYPASSES = {
    # name: (model, loop body, what the refusal says)
    "tuple output": (TupleOut, tuple_out, "mixes subgraphs"),
    "dict output": (DictOut, tuple_out, "mixes subgraphs"),
    "train-mode batch statistics": (WithHandNorm, honest, "mixes subgraphs"),
    "mixing in the loop": (Sage, loop_mixing, "mixes subgraphs"),
    "a loss that mixes subgraphs": (Sage, loss_mixing, "mixes subgraphs"),
    "a no_grad teacher on the whole graph": (Sage, teacher_in_loop, "training graph itself"),
    "a detached batch statistic in the loss": (Sage, detached_scale, "mixes subgraphs"),
    "a Python number taken from the batch": (Sage, python_number, "Python value"),
    "a teacher's predictions from before the loop": (Sage, teacher_precomputed,
                                                      "one row per node"),
}


@pytest.mark.parametrize("name", sorted(BYPASSES))
def test_a_bypass_leaks_in_the_naive_control_and_is_refused(name, data):
    make_model, body, message = BYPASSES[name]
    top, total, _ = _leak(make_model, data, body)
    print(f"{name}: other subgraphs moved by up to {top:.3f} C, {total:.3f} C in all")
    assert top > 1e-6, (name, top)      # the control sees the leak (the honest loop: 0)
    torch.manual_seed(0)
    model = make_model(data.num_features).double()
    with pytest.raises(SubgraphMixingError, match=message):
        _run(model, data, body, _context(data, model))


def test_a_buffer_updated_in_forward_leaks_and_is_refused(data):
    _, _, (first, second) = _leak(RunningMean, data, honest)
    # the buffer is released by state_dict without noise, and it reads the changed node
    assert float((first.running - second.running).abs().max()) > 1e-4
    torch.manual_seed(0)
    model = RunningMean(data.num_features).double()
    with pytest.raises(SubgraphMixingError, match="buffer 'running'"):
        _run(model, data, honest, {})


def test_a_constant_buffer_is_allowed_and_listed(data):
    torch.manual_seed(0)
    model = Sage(data.num_features).double()
    model.register_buffer("scale", torch.ones(()))
    pt = _run(model, data, honest, {})
    assert pt.steps == 2
    assert any("buffers (scale)" in note for note in pt.privacy["unaccounted"])


def test_a_parameter_outside_the_model_leaks_and_is_refused(data):
    torch.manual_seed(0)
    model = Sage(data.num_features).double()
    ctx = _context(data, model)
    grads = []
    for graph in (data, None):
        if graph is None:
            graph = copy.copy(data)
            graph.x = data.x.clone()
            graph.x[_single_node(batch)[0]] += 3.0
        ctx["temp"].grad = None
        _, batch = _clipped_per_subgraph(copy.deepcopy(model), graph, temperature, ctx)
        grads.append(float(ctx["temp"].grad))
    # a second, plain optimizer would release this gradient without clipping or noise
    assert abs(grads[0] - grads[1]) > 1e-6
    with pytest.raises(SubgraphMixingError, match="outside the model"):
        _run(model, data, temperature, ctx)


def test_a_model_parameter_used_in_the_loss_is_refused(data):
    torch.manual_seed(0)
    model = Sage(data.num_features).double()

    def body(model, batch, ctx):
        out = model(batch.x, batch.edge_index)
        loss = F.cross_entropy(out[batch.center], batch.y[batch.center])
        (loss + model.head.bias.square().sum()).backward()

    with pytest.raises(SubgraphMixingError, match="'head.bias'.*outside the model's forward"):
        _run(model, data, body, {})


def test_nothing_is_released_before_the_refusal(data):
    torch.manual_seed(0)
    model = Sage(data.num_features).double()
    pt, opt = _make(model, data)
    before = copy.deepcopy(model.state_dict())
    with pytest.raises(SubgraphMixingError):
        for batch in pt.loader:
            opt.zero_grad()
            loss_mixing(model, batch, {})
            opt.step()
    assert pt.steps == 0 and pt.epsilon == 0.0
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert torch._C._len_torch_function_stack() == 0     # the recording mode is gone


def test_a_loop_that_changes_after_the_checked_step_is_refused(data):
    """Only the first step is replayed; every later step must run the same operations."""
    torch.manual_seed(0)
    model = Sage(data.num_features).double()
    calls = []

    def body(model, batch, ctx):
        (honest if not calls else loss_mixing)(model, batch, ctx)
        calls.append(1)

    with pytest.raises(SubgraphMixingError, match="other torch operations"):
        _run(model, data, body, {}, steps=3)
    assert len(calls) == 2


def test_logging_after_the_step_is_not_part_of_the_loop_check(data):
    torch.manual_seed(0)
    model = Sage(data.num_features).double()
    pt, opt = _make(model, data)
    seen = []
    for i, batch in enumerate(pt.loader):
        opt.zero_grad()
        out = model(batch.x, batch.edge_index)
        loss = F.cross_entropy(out[batch.center], batch.y[batch.center])
        loss.backward()
        opt.step()
        if i % 2 == 0:                   # logging on some steps only, after the step
            seen.append((out.argmax(1) == batch.y).double().mean().item() + loss.item())
    assert pt.steps == 3 and len(seen) == 2


class Dropped(Sage):
    """Dropout on the input and between the layers: the replay redraws the same masks."""

    def forward(self, x, edge_index):
        h = torch.tanh(self.c1(F.dropout(x, 0.5, self.training), edge_index))
        return self.head(F.dropout(torch.tanh(self.c2(h, edge_index)), 0.3, self.training))


def _gat(f):
    from torch_geometric.nn import GATConv

    class Gat(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.head = GATConv(f, 8, heads=2, dropout=0.2), nn.Linear(16, C)

        def forward(self, x, edge_index):
            return self.head(torch.tanh(self.c1(x, edge_index)))

    return Gat()


def _honest_models():
    from tests.training.private.test_make_private import MODELS

    return {**MODELS, "dropout-0.5": Dropped, "gat": _gat}


@pytest.mark.parametrize("sampler", ["heterpoisson", "degree_bounded", "nodes"])
@pytest.mark.parametrize("name", sorted(_honest_models()))
def test_honest_loops_of_every_supported_module_pass_the_check(name, sampler, data):
    """No false refusal: every module of the per-subgraph correctness tests, dropout and
    attention included, on each sampler."""
    torch.manual_seed(0)
    model = _honest_models()[name](data.num_features).double()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    pt = gp.make_private(model, opt, data, sampler=sampler, noise_multiplier=1.0, steps=2,
                         batch_size=24, seed=0)
    for batch in pt.loader:
        opt.zero_grad()
        out = model(batch.x, batch.edge_index)
        F.cross_entropy(out[batch.center], batch.y[batch.center]).backward()
        opt.step()
    assert pt.steps == 2 and len(pt.guard.verified) == 1


def test_a_parameter_changed_in_the_loop_is_refused(data):
    """Writing data into a parameter between the draw and the step bypasses the noise."""
    torch.manual_seed(0)
    model = Sage(data.num_features).double()

    def body(model, batch, ctx):
        honest(model, batch, ctx)
        with torch.no_grad():
            model.head.bias.copy_(batch.x[:, :C].mean(0))

    with pytest.raises(SubgraphMixingError, match="parameter 'head.bias'.*changed"):
        _run(model, data, body, {})


def test_parameters_outside_the_optimizer_are_listed(data):
    torch.manual_seed(0)
    model = Sage(data.num_features).double()
    opt = torch.optim.SGD(model.head.parameters(), lr=0.1)
    pt = gp.make_private(model, opt, data, sampler="heterpoisson", noise_multiplier=1.0,
                         steps=2, seed=0)
    notes = pt.privacy["unaccounted"]
    assert any("parameters outside the optimizer (c1." in n for n in notes)
    assert not any("buffers" in n for n in notes)


def test_a_parameter_outside_the_model_trained_from_a_later_step_is_refused(data):
    """The temperature joins the loss's graph only from the second step on (after the
    replayed one): the cheap per-step check still sees the gradient it receives."""
    torch.manual_seed(0)
    model = Sage(data.num_features).double()
    ctx = _context(data, model)
    ctx["temp"].requires_grad_(False)
    calls = []

    def body(model, batch, ctx):
        if calls:
            ctx["temp"].requires_grad_(True)
        calls.append(1)
        temperature(model, batch, ctx)

    with pytest.raises(SubgraphMixingError, match="outside the model"):
        _run(model, data, body, ctx, steps=3)
    assert len(calls) == 2


def test_leaving_the_loop_after_a_draw_stops_the_recording(data):
    torch.manual_seed(0)
    model = Sage(data.num_features).double()
    pt, opt = _make(model, data)
    for batch in pt.loader:
        assert torch._C._len_torch_function_stack() == 1       # recording this step
        break
    assert torch._C._len_torch_function_stack() == 0
    pt.close()
    pt, opt = _make(Sage(data.num_features).double(), data)
    with pytest.raises(RuntimeError, match="in the loop body"):
        for batch in pt.loader:
            raise RuntimeError("a bug in the loop body")
    pt.close()
    assert torch._C._len_torch_function_stack() == 0


def test_the_engines_own_hook_operations_are_not_traced_on_light_steps(data):
    """The capture's bookkeeping (freezing the parameters, detaching inputs, gradient hooks)
    and the model's forward run in the trace's muted section: recorded for the replay on the
    checked step, out of every step's signature, and not dispatched through the trace at all
    on later steps (the forward is compared by its autograd graph and the trained modules'
    calls instead). The loop's own operations around the model still are traced."""
    torch.manual_seed(0)
    model = Sage(data.num_features).double()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    pt = gp.make_private(model, opt, data, sampler="heterpoisson", noise_multiplier=1.0,
                         steps=3, seed=0)
    seen = []
    for i, batch in enumerate(pt.loader):
        opt.zero_grad()
        honest(model, batch, {})
        trace = pt.guard.trace
        names = [getattr(f, "__name__", "") for f in trace.funcs]
        seen.append((trace.light, names, [op.name for op in trace.ops]))
        opt.step()
    (light0, names0, ops0), (light1, names1, ops1) = seen[0], seen[1]
    assert not light0 and light1
    engine_ops = {"requires_grad_", "register_hook", "detach"}
    assert engine_ops <= set(ops0) and "linear" in ops0   # recorded on the checked step
    assert not (engine_ops | {"linear"}) & (set(names0) | set(names1) | set(ops1))
    assert {"cross_entropy", "backward"} <= set(names1)
    assert [n for n in names0 if n not in guards_unsigned()] == [
        n for n in names1 if n not in guards_unsigned()]
    ((_, graph, calls),) = pt.guard.verified
    assert any(node[0] == "AddmmBackward0" for node in graph if isinstance(node, tuple))
    assert [c[0] for c in calls] == list(range(len(calls)))      # c1's maps, c2's, head


class LaterInside(Sage):
    """Mixes inside its forward from the second call on (a curriculum, a bug)."""

    def __init__(self, f, h=8, *, detached=False):
        super().__init__(f, h)
        self.calls, self.detached = 0, detached

    def forward(self, x, edge_index):
        self.calls += 1
        if self.calls > 1 and torch.is_grad_enabled() and self.detached:
            x = x - x.mean(0)                # the raw input: no gradient, before any layer
        h = torch.tanh(self.c1(x, edge_index))
        if self.calls > 1 and torch.is_grad_enabled() and not self.detached:
            h = h - h.mean(0)
        return self.head(torch.tanh(self.c2(h, edge_index)))


@pytest.mark.parametrize("detached", [False, True])
def test_a_forward_that_changes_after_the_checked_step_is_refused(detached, data,
                                                                  monkeypatch):
    """Inside the forward, later steps are compared by the losses' autograd graph (a mean
    over the batch between layers adds nodes) and by the kinds of the trained modules'
    inputs (the first layer gets a computed tensor instead of the batch's x). Broken
    controls: without the graph (or without the calls) in the signature the step passes."""
    from gnnprivacy.training.private import guards

    torch.manual_seed(0)
    with pytest.raises(SubgraphMixingError, match="other torch operations"):
        _run(LaterInside(data.num_features, detached=detached).double(), data, honest, {},
             steps=3)
    torch.manual_seed(0)
    if detached:
        monkeypatch.setattr(flat_capture.FlatCapture, "call_signature", lambda self: ())
    else:
        original = guards.LoopGuard._check_leaves
        monkeypatch.setattr(guards.LoopGuard, "_check_leaves",
                            lambda self, losses, own: original(self, losses, own) and ())
    pt = _run(LaterInside(data.num_features, detached=detached).double(), data, honest, {},
              steps=3)
    assert pt.steps == 3


def test_what_the_later_steps_do_not_compare_inside_the_forward(data):
    """The documented limit (docs/own-model.md): inside the model's forward a later step is
    compared by its autograd graph and its modules' calls, not operation by operation, so a
    computation without gradient that is replaced by another one of the same kind goes
    unseen (here the input's scaling by a constant becomes a mean over the batch)."""

    class Swapped(LaterInside):
        def forward(self, x, edge_index):
            self.calls += 1
            x = x - x.mean(0) if self.calls > 1 and torch.is_grad_enabled() else x * 1.0
            return self.head(torch.tanh(self.c2(torch.tanh(self.c1(x, edge_index)),
                                                edge_index)))

    torch.manual_seed(0)
    pt = _run(Swapped(data.num_features).double(), data, honest, {}, steps=3)
    assert pt.steps == 3


def guards_unsigned():
    from gnnprivacy.training.private.guards import _UNSIGNED

    return _UNSIGNED
