"""gp.make_private: per-subgraph clipping of the user's own PyG model in a plain loop.

Correctness is checked against a naive loop that runs the model on every subgraph alone
and clips its gradient; positive controls show that the engine notices what would break the
per-subgraph bound (an edge across subgraphs, a model that mixes subgraphs, a foreign batch).
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch_geometric.nn import GCNConv, GINConv, GINEConv, GraphConv, SAGEConv
from torch_geometric.nn import LayerNorm as PygLayerNorm
from torch_geometric.nn.dense.linear import Linear as PygLinear

import gnnprivacy as gp
from gnnprivacy.datasets import load_dataset
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.training.dp import UnsupportedModuleError
from gnnprivacy.training.dp.flat_capture import SubgraphMixingError
from gnnprivacy.training.private import DegreeBoundedSubgraphs, HeterPoissonSubgraphs

C = 4  # classes of the csbm graph


@pytest.fixture(scope="module")
def data():
    d = load_dataset("csbm", num_nodes=400)
    d.x = d.x.double()
    return d


class Conv2(nn.Module):
    """Two layers of one conv type, a Linear head (the acceptance's 'two-layer model')."""

    def __init__(self, make, f, h=8):
        super().__init__()
        self.c1, self.c2, self.head = make(f, h), make(h, h), nn.Linear(h, C)

    def forward(self, x, edge_index):
        h = torch.tanh(self.c1(x, edge_index))
        return self.head(torch.tanh(self.c2(h, edge_index)))


class Single(nn.Module):
    """One module under test between a fixed input map and the head."""

    def __init__(self, module, f, h=8, pre=None):
        super().__init__()
        self.pre = pre if pre is not None else nn.Linear(f, h)
        self.module, self.head = module, nn.Linear(h, C)

    def forward(self, x, edge_index):
        return self.head(torch.tanh(self.module(torch.tanh(self.pre(x)))))


class EmbeddingModel(nn.Module):
    """Embedding of a (public) node type id, added to a feature map."""

    def __init__(self, f, h=8):
        super().__init__()
        self.emb, self.lin, self.head = nn.Embedding(5, h, padding_idx=0), nn.Linear(f, h), \
            nn.Linear(h, C)

    def forward(self, x, edge_index):
        ids = (x[:, 0].abs() * 10).long() % 5
        return self.head(torch.tanh(self.lin(x) + self.emb(ids)))


class GineModel(nn.Module):
    def __init__(self, f, h=8):
        super().__init__()
        self.c1 = GINEConv(nn.Sequential(nn.Linear(f, h), nn.ReLU(), nn.Linear(h, h)),
                           train_eps=True, edge_dim=3)
        self.c2 = GINEConv(nn.Sequential(nn.Linear(h, h)), train_eps=True, edge_dim=3)
        self.head = nn.Linear(h, C)

    def forward(self, x, edge_index):
        attr = torch.stack([x[edge_index[0], 0], x[edge_index[1], 1],
                            torch.ones(edge_index.shape[1], dtype=x.dtype)], 1)
        h = torch.tanh(self.c1(x, edge_index, attr))
        return self.head(torch.tanh(self.c2(h, edge_index, attr)))


class OwnScale(nn.Module):
    """A module without a rule (exact torch.func fallback): per-feature scale and shift."""

    def __init__(self, h):
        super().__init__()
        self.w, self.b = nn.Parameter(torch.linspace(0.5, 1.5, h)), nn.Parameter(torch.zeros(h))

    def forward(self, x):
        return torch.sin(x * self.w) + self.b


def _frozen_weight(norm: nn.LayerNorm) -> nn.LayerNorm:
    norm.weight.requires_grad_(False)       # the LayerNorm rule then clips the bias alone
    return norm


def _gin(f, h):
    return GINConv(nn.Sequential(nn.Linear(f, h), nn.ReLU(), nn.Linear(h, h)), train_eps=True)


MODELS = {
    "gcn": lambda f: Conv2(GCNConv, f),
    "sage": lambda f: Conv2(SAGEConv, f),
    "graphconv": lambda f: Conv2(GraphConv, f),
    "gin": lambda f: Conv2(_gin, f),
    "gine": lambda f: GineModel(f),
    "torch-linear": lambda f: Single(nn.Linear(8, 8), f),
    "pyg-linear": lambda f: Single(PygLinear(8, 8), f),
    "torch-layernorm": lambda f: Single(nn.LayerNorm(8), f),
    "torch-layernorm-no-bias": lambda f: Single(nn.LayerNorm(8, bias=False), f),
    "torch-layernorm-frozen-weight": lambda f: Single(_frozen_weight(nn.LayerNorm(8)), f),
    "pyg-layernorm-node": lambda f: Single(PygLayerNorm(8, mode="node"), f),
    "embedding": lambda f: EmbeddingModel(f),
    "dropout-p0": lambda f: Single(nn.Dropout(0.0), f),
    "fallback": lambda f: Single(OwnScale(8), f),
}


def _private(model, data, sampler, **kw):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    kw.setdefault("noise_multiplier", 1.0)
    kw.setdefault("steps", 3)
    return gp.make_private(model, opt, data, sampler=sampler, seed=0, **kw), opt


def _engine_sums(pt, model, edge_keys=()):
    """Draw a batch, run the user's forward/backward, return (batch, clipped sums); the
    batch's ``edge_keys`` attributes are passed after ``edge_index``."""
    batch = pt._draw()
    out = model(batch.x, batch.edge_index, *(batch[k] for k in edge_keys))
    loss = F.cross_entropy(out[batch.center], batch.y[batch.center])
    loss.backward()
    layout = pt._pending
    pt.capture.check_inputs(layout)
    sums = pt._clipped_sums(layout, float(layout.num_subgraphs))
    pt.close()                      # the naive loop must see the plain model
    return batch, sums


def _naive_sums(model, batch, clip, edge_keys=()):
    """Run the model on every subgraph alone (with its edges' ``edge_keys`` attributes);
    clip each whole gradient; sum."""
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    params = [p for _, p in model.named_parameters() if p.requires_grad]
    total = [torch.zeros_like(p) for p in params]
    norms = []
    for i in range(int(batch.num_subgraphs)):
        rows = (batch.batch == i).nonzero().flatten()
        local = torch.full((batch.num_nodes,), -1, dtype=torch.long)
        local[rows] = torch.arange(rows.numel())
        keep = (batch.batch[batch.edge_index[0]] == i) & (batch.batch[batch.edge_index[1]] == i)
        ei = local[batch.edge_index[:, keep]]
        out = model(batch.x[rows], ei, *(batch[k][keep] for k in edge_keys))
        c = int(batch.center[i]) - int(rows[0])
        loss = F.cross_entropy(out[c:c + 1], batch.y[rows][c:c + 1])
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        grads = [torch.zeros_like(p) if g is None else g for g, p in zip(grads, params)]
        norm = math.sqrt(sum(float(g.square().sum()) for g in grads))
        norms.append(norm)
        factor = min(1.0, clip / norm) if norm > 0 else 1.0
        total = [t + factor * g for t, g in zip(total, grads)]
    return dict(zip(names, total)), norms


@pytest.mark.parametrize("rows", ["gram", "per-row"])
@pytest.mark.parametrize("sampler", ["heterpoisson", "degree_bounded"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_clipped_sum_equals_a_naive_per_subgraph_loop(name, sampler, rows, data, monkeypatch):
    """Both ways of a row mapping: Gram norms with the scaled-rows product, and per-row
    gradients summed per subgraph (`segments.ROW_ELEMENTS`: small batches)."""
    from gnnprivacy.training.dp import flat_capture

    monkeypatch.setattr(flat_capture, "ROW_ELEMENTS", 0 if rows == "gram" else 2 ** 40)
    torch.manual_seed(0)
    model = MODELS[name](data.num_features).double()
    spec = (HeterPoissonSubgraphs() if sampler == "heterpoisson"
            else DegreeBoundedSubgraphs(max_degree=3, hops=2))
    pt, _ = _private(model, data, spec, max_grad_norm=0.05, batch_size=24)
    batch, sums = _engine_sums(pt, model)
    assert batch.num_subgraphs > 3 and batch.edge_index.shape[1] > 0
    naive, norms = _naive_sums(model, batch, 0.05)
    assert max(norms) > 0.05            # clipping is active
    for n, ref in naive.items():
        assert torch.allclose(sums[n], ref, rtol=1e-5, atol=1e-9 * (1 + ref.abs().max())), n


def test_a_broken_rule_fails_the_naive_comparison(data, monkeypatch):
    """Positive control: a Linear rule that drops one row per subgraph disagrees."""
    from gnnprivacy.training.dp import flat_rules

    original = flat_rules._rows

    def broken(calls, arg):
        a, d, seg = original(calls, arg)
        odd = (torch.arange(d.shape[0]) % 2).unsqueeze(1).to(d.dtype)
        return a, d * (1 + 0.1 * odd), seg

    monkeypatch.setattr(flat_rules, "_rows", broken)
    torch.manual_seed(0)
    model = MODELS["sage"](data.num_features).double()
    pt, _ = _private(model, data, "heterpoisson", max_grad_norm=0.05, batch_size=24)
    batch, sums = _engine_sums(pt, model)
    naive, _ = _naive_sums(model, batch, 0.05)
    assert not all(torch.allclose(sums[n], naive[n], rtol=1e-5) for n in naive)


def _loop(pt, model, opt, *, tamper=None):
    for batch in pt.loader:
        opt.zero_grad()
        ei = batch.edge_index if tamper is None else tamper(batch)
        out = model(batch.x, ei)
        F.cross_entropy(out[batch.center], batch.y[batch.center]).backward()
        opt.step()


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_the_step_releases_the_clipped_sum_of_the_loss(reduction, data):
    """``optimizer.step()`` end to end (checks, clipping, release) with negligible noise
    (std 1e-9 C): SGD at rate 1 moves the parameters by the naive loop's clipped sum over
    the expected batch,
    whichever reduction the loss uses (a mean loss's gradients are the per-subgraph ones
    over the realised batch: the step scales them back before clipping)."""
    torch.manual_seed(0)
    model = MODELS["sage"](data.num_features).double()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    pt = gp.make_private(model, opt, data, sampler="heterpoisson", noise_multiplier=1e-9,
                         steps=1, batch_size=24, max_grad_norm=2.3, seed=0,
                         loss_reduction=reduction)
    for batch in pt.loader:
        opt.zero_grad()
        out = model(batch.x, batch.edge_index)
        F.cross_entropy(out[batch.center], batch.y[batch.center],
                        reduction=reduction).backward()
        opt.step()
    pt.close()
    naive, norms = _naive_sums(model_at(model, before), batch, 2.3)
    assert min(norms) < 2.3 < max(norms)         # some subgraphs clipped, some not
    scale = pt.plan.expected_batch_size
    for n, p in model.named_parameters():
        moved = (before[n] - p.detach()) * scale
        assert torch.allclose(moved, naive[n], rtol=1e-5, atol=1e-9 * (1 + naive[n].abs().max())), n


def model_at(model, state):
    """A copy of ``model`` with the parameters ``state``."""
    import copy

    twin = copy.deepcopy(model)
    with torch.no_grad():
        for n, p in twin.named_parameters():
            p.copy_(state[n])
    return twin


@pytest.mark.parametrize("how", ["wrapper", "in place", "submodule", "forward"])
def test_a_compiled_model_is_refused_at_make_private(how, data):
    """torch.compile traces through the capture's hooks and the loop trace and failed deep in
    the compiler at the first step ('Cannot access data pointer of Tensor (e.g.
    FakeTensor...)' after the compile); make_private refuses it at once, naming the module.
    Control: the same model uncompiled is accepted."""
    torch.manual_seed(0)
    model = MODELS["sage"](data.num_features).double()
    if how == "wrapper":
        compiled = torch.compile(model)
    elif how == "in place":
        compiled = MODELS["sage"](data.num_features).double()
        compiled.compile()
    elif how == "submodule":
        compiled = MODELS["sage"](data.num_features).double()
        compiled.c2 = torch.compile(compiled.c2)
    else:
        compiled = MODELS["sage"](data.num_features).double()
        compiled.c1.forward = torch.compile(compiled.c1.forward)
    with pytest.raises(UnsupportedModuleError, match=r"torch\.compile|compiled in place"):
        _private(compiled, data, "heterpoisson")
    _private(model, data, "heterpoisson")[0].close()


def test_an_edge_joining_two_subgraphs_is_detected(data):
    model = MODELS["gcn"](data.num_features).double()
    pt, opt = _private(model, data, "heterpoisson", batch_size=24)

    def cross(batch):
        a, b = int(batch.center[0]), int(batch.center[1])
        return torch.cat([batch.edge_index, torch.tensor([[a], [b]])], 1)

    with pytest.raises(SubgraphMixingError, match="joins subgraph 0 to subgraph 1"):
        _loop(pt, model, opt, tamper=cross)
    assert pt.steps == 0 and pt.epsilon == 0.0
    pt.close()                    # the model is free for another make_private

    def in_place(batch):          # the sampler's own edge_index, changed: checked again
        batch.edge_index[1, 0] = int(batch.center[1]) if int(
            batch.batch[batch.edge_index[0, 0]]) != 1 else int(batch.center[0])
        return batch.edge_index

    pt, opt = _private(model, data, "heterpoisson", batch_size=24)
    with pytest.raises(SubgraphMixingError, match="joins subgraph"):
        _loop(pt, model, opt, tamper=in_place)


class GlobalCentering(nn.Module):
    def __init__(self, f):
        super().__init__()
        self.lin = nn.Linear(f, C)

    def forward(self, x, edge_index):
        return self.lin(x - x.mean(0))          # mixes every row of the batch


def test_a_model_that_mixes_subgraphs_is_refused(data):
    model = GlobalCentering(data.num_features).double()
    pt, opt = _private(model, data, "nodes", batch_size=40)
    with pytest.raises(SubgraphMixingError, match="mixes subgraphs"):
        _loop(pt, model, opt)


def test_batchnorm_is_refused_with_what_to_use_instead(data):
    model = Single(nn.BatchNorm1d(8), data.num_features).double()
    with pytest.raises(UnsupportedModuleError, match="module.BatchNorm1d|LayerNorm"):
        _private(model, data, "nodes")


def test_graph_mode_layernorm_without_batch_is_refused(data):
    model = Single(PygLayerNorm(8), data.num_features).double()      # mode="graph"
    pt, opt = _private(model, data, "heterpoisson", batch_size=24)
    with pytest.raises(SubgraphMixingError, match="batch=batch.batch"):
        _loop(pt, model, opt)


def test_a_foreign_batch_is_refused(data):
    model = MODELS["sage"](data.num_features).double()
    pt, opt = _private(model, data, "heterpoisson", batch_size=24)
    next(iter(pt.loader))
    pt._pending = pt._pending  # a batch is pending, but the forward uses other tensors
    opt.zero_grad()
    out = model(data.x[:50].clone(), data.edge_index[:, :0])
    F.cross_entropy(out[:5], data.y[:5]).backward()
    with pytest.raises(SubgraphMixingError, match="did not use the batch"):
        opt.step()
    assert pt.steps == 0


def test_step_without_a_loader_batch_and_skipped_batches_are_refused(data):
    model = MODELS["sage"](data.num_features).double()
    pt, opt = _private(model, data, "heterpoisson", batch_size=24)
    out = model(data.x, data.edge_index)
    F.cross_entropy(out[:5], data.y[:5]).backward()
    with pytest.raises(SubgraphMixingError, match="without a batch from pt.loader"):
        opt.step()
    with pytest.raises(SubgraphMixingError, match="without calling optimizer.step"):
        for _ in pt.loader:
            pass


class WrongRows(nn.Module):
    def __init__(self, f):
        super().__init__()
        self.lin, self.head = nn.Linear(f, 8), nn.Linear(8, C)

    def forward(self, x, edge_index):
        h = self.lin(x)
        return self.head(torch.cat([h, h[:1]]))     # one extra row: belongs to no subgraph


def test_output_rows_that_fit_no_batch_are_refused(data):
    model = WrongRows(data.num_features).double()
    pt, opt = _private(model, data, "heterpoisson", batch_size=24)
    with pytest.raises(SubgraphMixingError, match="rows"):
        _loop(pt, model, opt)


def test_an_optimizer_over_foreign_parameters_is_refused(data):
    model = MODELS["sage"](data.num_features)
    other = nn.Linear(3, 3)
    opt = torch.optim.SGD(list(model.parameters()) + list(other.parameters()), lr=0.1)
    with pytest.raises(InvalidParameterError, match="not in the model"):
        gp.make_private(model, opt, data, sampler="nodes", epsilon=8.0)


def test_ledger_equals_the_executed_steps_and_the_loader_stops_at_the_plan(data):
    model = MODELS["sage"](data.num_features).double()
    pt, opt = _private(model, data, "heterpoisson", batch_size=24, steps=5)
    _loop(pt, model, opt)
    assert pt.steps == 5 and len(list(pt.loader)) == 0
    ledger = pt.ledger
    assert sum(e["count"] for e in ledger["ledger"]["entries"]) == 5
    other = MODELS["sage"](data.num_features).double()
    fresh = gp.make_private(other, torch.optim.SGD(other.parameters(), lr=0.1), data,
                            sampler="heterpoisson", noise_multiplier=1.0, steps=5,
                            batch_size=24, seed=0)
    fresh.accountant.compose(fresh.event, 5)
    assert pt.epsilon == pytest.approx(fresh.accountant.get_epsilon(pt.delta))
    with pytest.raises(SubgraphMixingError, match="plan of 5 noisy steps is spent"):
        opt.step()


def test_epsilon_target_is_met_and_privacy_record_is_complete(data):
    model = MODELS["gcn"](data.num_features).double()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    pt = gp.make_private(model, opt, data, sampler="degree_bounded", epsilon=4.0, seed=1)
    _loop(pt, model, opt)
    assert pt.epsilon <= 4.0 + 1e-9 and pt.steps == pt.steps_planned
    rec = pt.privacy
    assert rec["unit"] == "node" and rec["relation"] == "replace"
    assert rec["scope"] and rec["unaccounted"] and rec["hops"] == 2


def test_checkpoint_round_trip_continues_the_same_run(data):
    def run(split):
        torch.manual_seed(0)
        model = MODELS["sage"](data.num_features).double()
        pt, opt = _private(model, data, "heterpoisson", batch_size=24, steps=4)
        it = iter(pt.loader)
        for _ in range(split):
            batch = next(it)
            opt.zero_grad()
            out = model(batch.x, batch.edge_index)
            F.cross_entropy(out[batch.center], batch.y[batch.center]).backward()
            opt.step()
        return pt, model, opt

    full, model_full, opt_full = run(0)
    _loop(full, model_full, opt_full)
    half, _, _ = run(2)
    state = half.state_dict()
    torch.manual_seed(0)
    model = MODELS["sage"](data.num_features).double()
    resumed, opt = _private(model, data, "heterpoisson", batch_size=24, steps=4)
    resumed.load_state_dict(state)
    _loop(resumed, model, opt)
    assert resumed.steps == 4 and resumed.epsilon == pytest.approx(full.epsilon)
    for a, b in zip(model.parameters(), model_full.parameters()):
        assert torch.allclose(a, b)


def test_dpengine_must_know_how_batches_are_drawn():
    """Owned sampling (issue 22 item 8): an accountant event without a declared sampling, or
    one that does not match the declaration, is refused."""
    from dp_accounting import dp_event

    from gnnprivacy.accounting import make_accountant
    from gnnprivacy.training.dp import DPEngine

    model = nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    acc = make_accountant("pld")
    poisson = dp_event.PoissonSampledDpEvent(0.1, dp_event.GaussianDpEvent(1.0))
    base = dict(clip_norm=1.0, noise_multiplier=1.0, expected_batch_size=4.0,
                generator=torch.Generator().manual_seed(0), accountant=acc)
    with pytest.raises(InvalidParameterError, match="how its batches are drawn"):
        DPEngine(model, opt, step_event=poisson, **base)
    with pytest.raises(InvalidParameterError, match="HeterPoissonDpEvent"):
        DPEngine(model, opt, step_event=poisson, sampling="heterpoisson", **base)
    with pytest.raises(InvalidParameterError, match="no subsampling"):
        DPEngine(model, opt, step_event=poisson, sampling="full", **base)
    assert DPEngine(model, opt, step_event=poisson, sampling="poisson", **base).sampling == \
        "poisson"


@pytest.mark.parametrize("degree,hops", [(1, 1), (1, 3), (2, 2), (3, 1), (3, 2)])
def test_occurrence_bound_holds_on_the_sampled_subgraphs(degree, hops, data):
    """Every node lies in at most M_K of the K-hop subgraphs the sampler builds (all training
    nodes as centres at once), and the bound is attained or nearly so."""
    from gnnprivacy.training.private.samplers import occurrence_bound

    spec = DegreeBoundedSubgraphs(max_degree=degree, hops=hops)
    model = MODELS["gcn"](data.num_features).double()
    pt, _ = _private(model, data, spec, batch_size=int(data.train_mask.sum()))
    batch = pt.sampler.sample(torch.Generator().manual_seed(0))
    per_node = torch.bincount(batch.n_id)
    assert int(per_node.max()) <= occurrence_bound(degree, hops)
    assert int(per_node.max()) >= min(2, occurrence_bound(degree, hops))
    pt.close()


def test_moore_bound_is_tighter_and_sound_against_a_control():
    """Positive control: the looser sum D^j is >= the Moore bound; for D = 1 a node is in 2
    neighbourhoods whatever the radius (its own and its partner's)."""
    from gnnprivacy.training.private.samplers import auto_degree_bound, occurrence_bound

    assert [occurrence_bound(1, k) for k in (1, 2, 5)] == [2, 2, 2]
    assert occurrence_bound(3, 2) == 10 < sum(3 ** j for j in range(3))
    assert [auto_degree_bound(k) for k in range(4)] == [1, 3, 1, 1]
