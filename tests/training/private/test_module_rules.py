"""Per-subgraph rules for GIN's eps and GATConv's attention, and edge attributes in batches.

Each model is checked against the naive loop that runs every subgraph alone (as in
test_make_private.py) with the exact fallback switched off, so the rules themselves are what
is compared; positive controls show that a wrong per-row or per-edge term is caught.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch_geometric.nn import GATConv, GCNConv, GINConv, GINEConv

from gnnprivacy.datasets import load_dataset
from gnnprivacy.training.dp import flat_capture, flat_rules
from gnnprivacy.training.private import DegreeBoundedSubgraphs, HeterPoissonSubgraphs

from .test_make_private import MODELS, Conv2, OwnScale, Single, _engine_sums, _naive_sums, _private

C = 4


@pytest.fixture(scope="module")
def data():
    d = load_dataset("csbm", num_nodes=400)
    d.x = d.x.double()
    gen = torch.Generator().manual_seed(1)
    e = d.edge_index.shape[1]
    d.edge_attr = torch.randn(e, 3, generator=gen, dtype=torch.float64)
    d.edge_weight = torch.rand(e, generator=gen, dtype=torch.float64) + 0.1
    return d


class EdgeConv2(nn.Module):
    """Two convs that read one edge-level attribute, a Linear head."""

    def __init__(self, make, f, h=8):
        super().__init__()
        self.c1, self.c2, self.head = make(f, h), make(h, h), nn.Linear(h, C)

    def forward(self, x, edge_index, attr):
        h = torch.tanh(self.c1(x, edge_index, attr))
        return self.head(torch.tanh(self.c2(h, edge_index, attr)))


def _gine(f, h):
    return GINEConv(nn.Sequential(nn.Linear(f, h), nn.Tanh(), nn.Linear(h, h)), train_eps=True,
                    edge_dim=3)


RULE_MODELS = {      # name: (model, edge attribute passed to the model or None)
    "gin-eps": (MODELS["gin"], None),
    "gin-eps-linear-nn": (lambda f: Conv2(lambda a, b: GINConv(nn.Linear(a, b),
                                                                train_eps=True), f), None),
    "gat": (lambda f: Conv2(lambda a, b: GATConv(a, b // 2, heads=2), f), None),
    "gat-mean-heads": (lambda f: Conv2(lambda a, b: GATConv(a, b, heads=3, concat=False), f),
                       None),
    "gat-separate-src-dst-maps": (lambda f: Conv2(lambda a, b: GATConv((a, a), b // 2, heads=2),
                                                  f), None),
    "gat-residual-no-self-loops": (lambda f: Conv2(lambda a, b: GATConv(
        a, b // 2, heads=2, residual=True, add_self_loops=False), f), None),
    "gat-edge-dim": (lambda f: EdgeConv2(lambda a, b: GATConv(a, b // 2, heads=2, edge_dim=3),
                                         f), "edge_attr"),
    "gine-edge-attr": (lambda f: EdgeConv2(_gine, f), "edge_attr"),
    "gcn-edge-weight": (lambda f: EdgeConv2(GCNConv, f), "edge_weight"),
}


def _no_fallback(monkeypatch):
    def refuse(self, module, calls):
        raise AssertionError(f"exact fallback ran for {type(module).__name__}")

    monkeypatch.setattr(flat_capture.FlatCapture, "_replay", refuse)


def _compare(name, sampler, data):
    torch.manual_seed(0)
    make, key = RULE_MODELS[name]
    model = make(data.num_features).double()
    spec = (HeterPoissonSubgraphs() if sampler == "heterpoisson"
            else DegreeBoundedSubgraphs(max_degree=3, hops=2))
    pt, _ = _private(model, data, spec, max_grad_norm=0.05, batch_size=24)
    keys = () if key is None else (key,)
    batch, sums = _engine_sums(pt, model, keys)
    assert batch.num_subgraphs > 3 and batch.edge_index.shape[1] > 0
    naive, norms = _naive_sums(model, batch, 0.05, keys)
    assert max(norms) > 0.05                      # clipping is active
    return sums, naive


@pytest.mark.parametrize("sampler", ["heterpoisson", "degree_bounded"])
@pytest.mark.parametrize("name", sorted(RULE_MODELS))
def test_rules_equal_the_naive_per_subgraph_loop(name, sampler, data, monkeypatch):
    _no_fallback(monkeypatch)
    sums, naive = _compare(name, sampler, data)
    for n, ref in naive.items():
        assert torch.allclose(sums[n], ref, rtol=1e-5, atol=1e-9 * (1 + ref.abs().max())), n
    trained = [n for n in naive if n.endswith(("eps", "att_src", "att_dst", "att_edge"))]
    assert all(naive[n].abs().max() > 0 for n in trained)     # the new terms are exercised


@pytest.mark.parametrize("name,key", [("gin-eps", "h"), ("gat-edge-dim", "alpha_j")])
def test_a_wrong_row_term_fails_the_naive_comparison(name, key, data, monkeypatch):
    """Positive control: the probe's gradient perturbed on every other row disagrees."""
    rule = flat_rules._RULES[GINConv if name == "gin-eps" else GATConv]

    def broken(module, calls):
        for call in calls:
            g = call.extra.get(key)
            if g is not None:
                odd = (torch.arange(g.shape[0]) % 2).to(g.dtype).view(-1, *[1] * (g.dim() - 1))
                call.extra[key] = g * (1 + 0.5 * odd)
        return rule(module, calls)

    monkeypatch.setitem(flat_rules._RULES, GINConv if name == "gin-eps" else GATConv, broken)
    sums, naive = _compare(name, "heterpoisson", data)
    assert not all(torch.allclose(sums[n], naive[n], rtol=1e-5) for n in naive)


@pytest.mark.parametrize("sampler", ["heterpoisson", "degree_bounded", "nodes"])
def test_batches_carry_every_edge_attribute_of_their_edges(sampler, data):
    model = MODELS["gcn"](data.num_features).double()
    pt, _ = _private(model, data, sampler, batch_size=40)
    batch = pt.sampler.sample(torch.Generator().manual_seed(0))
    pt.close()
    first = {}
    for e, (s, t) in enumerate(data.edge_index.t().tolist()):
        first.setdefault((s, t), e)
    ids = [first[(int(batch.n_id[s]), int(batch.n_id[t]))] for s, t in batch.edge_index.t()]
    assert sampler == "nodes" or len(ids) > 0
    for key in ("edge_attr", "edge_weight"):
        assert batch[key].shape[0] == batch.edge_index.shape[1]
        assert torch.equal(batch[key], data[key][torch.tensor(ids, dtype=torch.long)]), key
    assert batch.x.shape[0] == batch.num_nodes            # node tensors are not edge-sliced


class BipartiteGat(nn.Module):
    """GATConv called on a (source, target) pair: its rule falls back to the exact path."""

    def __init__(self, f, h=8):
        super().__init__()
        self.pre, self.conv = nn.Linear(f, h), GATConv((h, h), h // 2, heads=2)
        self.head = nn.Linear(h, C)

    def forward(self, x, edge_index):
        h = torch.tanh(self.pre(x))
        return self.head(torch.tanh(self.conv((h, h), edge_index)))


def test_a_gat_call_the_rule_cannot_read_falls_back_exactly(data):
    torch.manual_seed(0)
    model = BipartiteGat(data.num_features).double()
    pt, _ = _private(model, data, "heterpoisson", max_grad_norm=0.05, batch_size=24)
    with pytest.warns(flat_capture.FallbackWarning, match=r"'conv' \(GATConv\) \d+ ms"):
        batch, sums = _engine_sums(pt, model)
    naive, _ = _naive_sums(model, batch, 0.05)
    for n, ref in naive.items():
        assert torch.allclose(sums[n], ref, rtol=1e-5, atol=1e-9 * (1 + ref.abs().max())), n


def test_the_fallback_is_announced_with_its_measured_cost(data):
    model = Single(OwnScale(8), data.num_features).double()
    with pytest.warns(flat_capture.FallbackWarning,
                      match=r"'module' \(OwnScale\).* about 24 per step"):
        pt, opt = _private(model, data, "heterpoisson", batch_size=24)
    batches = iter(pt.loader)         # kept: a loop that stops iterating is refused
    batch = next(batches)
    opt.zero_grad()
    F.cross_entropy(model(batch.x, batch.edge_index)[batch.center],
                    batch.y[batch.center]).backward()
    with pytest.warns(flat_capture.FallbackWarning, match=r"OwnScale\) \d+ ms"):
        opt.step()


def test_modules_with_rules_are_not_announced(data, recwarn):
    for name in ("gin", "gine"):
        model = MODELS[name](data.num_features).double()
        _private(model, data, "heterpoisson", batch_size=24)[0].close()
    model = RULE_MODELS["gat-edge-dim"][0](data.num_features).double()
    _private(model, data, "heterpoisson", batch_size=24)[0].close()
    assert not [w for w in recwarn if issubclass(w.category, flat_capture.FallbackWarning)]


@pytest.mark.parametrize("k", [1, 2])
def test_parameters_used_behind_a_direct_forward_call_are_refused(k, data):
    """TAGConv runs its hop maps as lin.forward(x): no hook sees them, so without the check
    their gradients were silently zero (the naive loop's were not)."""
    from torch_geometric.nn import TAGConv

    from gnnprivacy.training.dp import UnsupportedModuleError

    model = Conv2(lambda a, b: TAGConv(a, b, K=k), data.num_features).double()
    pt, opt = _private(model, data, DegreeBoundedSubgraphs(max_degree=3, hops=2), batch_size=24)
    batches = iter(pt.loader)         # kept: a loop that stops iterating is refused
    batch = next(batches)
    opt.zero_grad()
    F.cross_entropy(model(batch.x, batch.edge_index)[batch.center],
                    batch.y[batch.center]).backward()
    with pytest.raises(UnsupportedModuleError, match=r"'c1.lins.1'.*\.forward\(\) directly"):
        opt.step()
    assert pt.steps == 0


def test_an_unused_module_is_not_refused(data):
    """Control: a module that is not called at all has no gradient to lose."""

    class Unused(nn.Module):
        def __init__(self, f):
            super().__init__()
            self.used, self.spare = nn.Linear(f, C), nn.Linear(f, C)

        def forward(self, x, edge_index):
            return self.used(x)

    model = Unused(data.num_features).double()
    pt, opt = _private(model, data, "heterpoisson", batch_size=24, steps=1)
    for batch in pt.loader:
        opt.zero_grad()
        F.cross_entropy(model(batch.x, batch.edge_index)[batch.center],
                        batch.y[batch.center]).backward()
        opt.step()
    assert pt.steps == 1


def test_a_parameter_the_rule_does_not_know_falls_back(data, monkeypatch):
    """A GATConv with an extra trainable parameter (as another PyG version might add) is
    not given a silently zero gradient: the rule hands it to the exact fallback."""
    torch.manual_seed(0)
    model = RULE_MODELS["gat"][0](data.num_features).double()
    model.c2.extra_scale = nn.Parameter(torch.ones((), dtype=torch.float64))
    original = GATConv.forward

    def forward(self, x, edge_index, *args, **kwargs):
        out = original(self, x, edge_index, *args, **kwargs)
        return out * self.extra_scale if hasattr(self, "extra_scale") else out

    monkeypatch.setattr(GATConv, "forward", forward)
    pt, _ = _private(model, data, "heterpoisson", max_grad_norm=0.05, batch_size=24)
    with pytest.warns(flat_capture.FallbackWarning, match=r"'c2' \(GATConv\) \d+ ms"):
        batch, sums = _engine_sums(pt, model)
    naive, _ = _naive_sums(model, batch, 0.05)
    assert naive["c2.extra_scale"].abs() > 0
    for n, ref in naive.items():
        assert torch.allclose(sums[n], ref, rtol=1e-5, atol=1e-9 * (1 + ref.abs().max())), n
