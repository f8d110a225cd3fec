"""Edge-private predictions (issue 46 item 3): one noisy release of every message-passing
call's aggregate, composed into the training's accountant; the predictor reads no edge."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from scipy import stats
from torch import nn
from torch.nn import functional as F
from torch_geometric.data import Data
from torch_geometric.nn import GATConv, GCNConv, GINConv, GINEConv, GraphConv, SAGEConv

import gnnprivacy as gp
from gnnprivacy.training.private import EdgeSubgraphs
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.training.private import edge_inference as ei_mod
from gnnprivacy.training.private.edge_inference import (ReleasePlan, check_release_layers,
                                                        release_aggregates)


class One(nn.Module):
    def __init__(self, conv, edge_attr=False):
        super().__init__()
        self.conv, self.edge_attr = conv, edge_attr

    def forward(self, x, edge_index):
        if self.edge_attr:
            attr = torch.ones(edge_index.shape[1], 3)
            return self.conv(x, edge_index, attr)
        return self.conv(x, edge_index)


CONVS = {
    "sage-sum": lambda: One(SAGEConv(4, 3, aggr="sum")),
    "sage-mean": lambda: One(SAGEConv(4, 3)),
    "graphconv": lambda: One(GraphConv(4, 3)),
    "gin": lambda: One(GINConv(nn.Linear(4, 3))),
    "gine": lambda: One(GINEConv(nn.Linear(4, 3), edge_dim=3), edge_attr=True),
    "gcn-plain": lambda: One(GCNConv(4, 3, normalize=False)),
}


def _pairs_graph(n, pairs):
    ei = torch.tensor(pairs, dtype=torch.long).t().reshape(2, -1)
    return torch.cat([ei, ei.flip(0)], 1) if ei.numel() else ei


def _clean(model, x, edges, clip=1.0):
    plan = ReleasePlan(1, 0.0, clip, math.sqrt(2.0))
    return release_aggregates(model, x, edges, plan, generator=None)[0]


def _worst_move(model, x, n, pairs, clip):
    base = _clean(model, x, _pairs_graph(n, pairs), clip)
    worst = 0.0
    for u, v in itertools.combinations(range(n), 2):
        toggled = [p for p in pairs if p != (u, v)] if (u, v) in pairs else pairs + [(u, v)]
        worst = max(worst, float((_clean(model, x, _pairs_graph(n, toggled), clip)
                                  - base).norm()))
    return worst


@pytest.mark.parametrize("name", sorted(CONVS))
def test_one_undirected_edge_moves_a_release_by_at_most_sqrt2_b(name):
    """Enumeration over every pair of a small graph (added or removed), messages of large
    norm so that the clip binds: the clipped aggregate moves by at most ``sqrt(2) B``."""
    torch.manual_seed(0)
    model = CONVS[name]()
    n = 6
    x = 5.0 * torch.randn(n, 4)
    pairs = [(0, 1), (0, 2), (1, 2), (2, 3), (3, 4), (0, 5)]
    move = _worst_move(model, x, n, pairs, clip=0.5)
    assert move <= math.sqrt(2.0) * 0.5 + 1e-6, move
    assert move > 0.5                        # the clip binds: two rows move


def test_degree_normalisation_would_break_the_release(monkeypatch):
    """Broken control: GCNConv's degree normalisation moves many rows per edge, beyond
    ``sqrt(2) B``; that is why the release refuses it."""
    monkeypatch.setattr(ei_mod, "_supported", lambda module: None)
    torch.manual_seed(0)
    model = One(GCNConv(4, 3, add_self_loops=False))
    n = 7
    x = 5.0 * torch.randn(n, 4)
    pairs = [(0, k) for k in range(1, n)] + [(1, 2), (2, 3)]
    assert _worst_move(model, x, n, pairs, clip=0.5) > math.sqrt(2.0) * 0.5


def test_unsupported_layers_are_refused_with_one_line():
    for module, match in ((GCNConv(4, 3), "normalises"), (GATConv(4, 3), "GATConv"),
                          (SAGEConv(4, 3, aggr="max"), "aggregation")):
        with pytest.raises(InvalidParameterError, match=match):
            check_release_layers(One(module))


class Net(nn.Module):
    def __init__(self, f, h=16, c=4):
        super().__init__()
        self.lin = nn.Linear(f, h)
        self.conv1, self.conv2 = SAGEConv(h, h, aggr="sum"), SAGEConv(h, h, aggr="mean")
        self.head = nn.Linear(h, c)

    def forward(self, x, edge_index):
        h = torch.relu(self.lin(x))
        h = torch.relu(self.conv1(h, edge_index))
        return self.head(torch.relu(self.conv2(h, edge_index)))


def _trained(close=False):
    data = gp.load_dataset("csbm", num_nodes=300, seed=0)
    torch.manual_seed(0)
    model = Net(data.num_features)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    pt = gp.make_private(model, opt, data, sampler=EdgeSubgraphs(
        max_out_degree=2), epsilon=4.0, steps=5, batch_size=30, seed=0)
    for batch in pt.loader:
        opt.zero_grad()
        out = model(batch.x, batch.edge_index)
        F.cross_entropy(out[batch.center], batch.y[batch.center]).backward()
        opt.step()
    before = pt.epsilon
    if close:
        pt.close()
    predictor = pt.release_predictor()
    return data, model, pt, predictor, before


@pytest.fixture(scope="module")
def trained():
    return _trained()


def test_release_is_accounted_once_within_the_target(trained):
    data, model, pt, predictor, before = trained
    assert pt.release_plan.calls == 2 and len(predictor.aggregates) == 2
    plan = pt.release_plan                   # an undirected edge moves two rows per call
    assert plan.noise_std == pytest.approx(plan.noise_multiplier * plan.clip * math.sqrt(2))
    assert before < pt.epsilon <= 4.0
    entries = pt.ledger["ledger"]["entries"]
    assert entries[-1]["count"] == 2 and entries[-1]["unit"] == "edge"
    assert pt.privacy["inference_release"]["released"]
    with pytest.raises(InvalidParameterError, match="one call"):
        pt.release_predictor()


def test_the_predictor_reads_no_edge_and_linkteller_sees_nothing(trained):
    """Predictions do not move when the graph's edges change after the release, and one
    node's features move no other node's output (LinkTeller's influence is zero); the
    control, the model on the graph, moves its neighbours."""
    from gnnprivacy.attacks.linkteller import influence_matrix

    data, model, pt, predictor, _ = trained
    out = predictor(data.x)
    other = predictor(data.x, torch.randint(0, 300, (2, 50)))
    torch.testing.assert_close(out, other)
    targets = data.edge_index[:, :4].flatten().unique()
    infl = influence_matrix(lambda x: predictor(x), data.x.clone(), targets, delta=0.5)
    assert float(infl.abs().max()) == 0.0
    model.eval()
    plain = influence_matrix(lambda x: model(x, data.edge_index).detach(), data.x.clone(),
                             targets, delta=0.5)
    assert float(plain.max()) > 0.0


def test_refit_is_post_processing_kept_only_where_validation_is_better():
    """The refit reads the released aggregates and the public labels only: the ledger and
    epsilon do not move, predictions still read no edge, and what is kept is the better on
    the validation labels. The control: a refit on scrambled training labels validates
    worse and is not kept (the parameters are the trained ones)."""
    import copy

    data, model, pt, predictor, _ = _trained(close=True)
    eps, entries = pt.epsilon, len(pt.ledger["ledger"]["entries"])
    train, val = data.train_mask.nonzero().flatten(), data.val_mask.nonzero().flatten()
    refit = copy.deepcopy(predictor)
    report = refit.refit(data.x, data.y, train, val, epochs=60)
    assert pt.epsilon == eps and len(pt.ledger["ledger"]["entries"]) == entries
    assert report["val_accuracy"] >= report["val_accuracy_before"]
    out = refit(data.x)
    assert float((out[val].argmax(1) == data.y[val]).float().mean()) == \
        pytest.approx(report["val_accuracy"])
    torch.testing.assert_close(out, refit(data.x, torch.randint(0, 300, (2, 50))))
    assert "post-processing" in refit.privacy["refit"]

    scrambled = data.y.clone()
    scrambled[train] = (scrambled[train] + 1) % int(data.y.max() + 1)
    control = copy.deepcopy(refit)               # from the refitted (good) parameters
    before = [p.detach().clone() for p in control.model.parameters()]
    bad = control.refit(data.x, scrambled, train, val, epochs=40, lr=0.1)
    assert bad["val_accuracy_before"] == pytest.approx(report["val_accuracy"])
    assert bad["kept"] == "trained" and bad["val_accuracy"] == bad["val_accuracy_before"]
    for p, b in zip(control.model.parameters(), before):
        torch.testing.assert_close(p.detach(), b)
    # a named candidate (here the refitted values) is kept when it validates best
    good = [p.detach().clone() for p in refit.model.parameters()]
    again = copy.deepcopy(predictor)
    picked = again.refit(data.x, data.y, train, val, epochs=1, lr=1e-9,
                         candidates={"good": good})
    assert report["kept"] == "refit" and picked["kept"] == "good"
    assert picked["val_accuracy"] == pytest.approx(report["val_accuracy"])
    for p, g in zip(again.model.parameters(), good):
        torch.testing.assert_close(p.detach(), g)
    with pytest.raises(InvalidParameterError, match="candidates"):
        again.refit(data.x, data.y, train, val, epochs=1, candidates={"short": good[:1]})
    # while the training is open the DP engine would capture the refit: refused
    _, _, open_pt, open_predictor, _ = _trained()
    with pytest.raises(InvalidParameterError, match="pt.close"):
        open_predictor.refit(data.x, data.y, train, val, epochs=5)
    open_pt.close()


@pytest.mark.statistical
def test_released_noise_has_the_planned_std():
    """Released minus clean aggregates over 600 x 16 coordinates: a chi-square test of the
    std at the planned value (two-sided, 1e-3), and a plan at half the std fails it."""
    torch.manual_seed(0)
    data = gp.load_dataset("csbm", num_nodes=600, seed=0)
    model = One(SAGEConv(data.num_features, 16, aggr="sum"))
    plan = ReleasePlan(1, 2.0, 1.0, math.sqrt(2.0))
    noisy = release_aggregates(model, data.x, data.edge_index, plan,
                               generator=torch.Generator().manual_seed(1))[0]
    clean = _clean(model, data.x, data.edge_index)
    r = (noisy - clean).flatten().double()
    n = r.numel()

    def passes(std):
        ratio = float(r.square().mean()) / std ** 2
        return stats.chi2.ppf(5e-4, n) / n <= ratio <= stats.chi2.ppf(1 - 5e-4, n) / n

    assert passes(plan.noise_std)
    assert not passes(plan.noise_std / 2)


def test_no_planned_release_is_refused_and_unprotected_is_named():
    data = gp.load_dataset("csbm", num_nodes=200, seed=0)
    model = Net(data.num_features)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sampler = EdgeSubgraphs(max_out_degree=2, inference="unprotected")
    pt = gp.make_private(model, opt, data, sampler=sampler, epsilon=2.0, steps=3, seed=0)
    assert pt.release_plan is None and "UNPROTECTED" in pt.privacy["unaccounted"][0]
    with pytest.raises(InvalidParameterError, match="inference='noisy'"):
        pt.release_predictor()
    pt.close()
    with pytest.raises(InvalidParameterError, match="inference_noise_multiplier"):
        gp.make_private(model, opt, data, sampler=EdgeSubgraphs(
            max_out_degree=2), noise_multiplier=1.0, steps=3, seed=0)


def test_a_checkpoint_after_the_release_keeps_it_in_the_ledger(trained):
    """Resuming from a state saved after the release recomposes the release's events (the
    resumed epsilon is the same) and refuses a second release."""
    data, model, pt, predictor, _ = trained
    state = pt.state_dict()
    assert state["inference_released"]
    model = Net(data.num_features)           # the resumed process's own model
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    other = gp.make_private(model, opt, data, sampler=EdgeSubgraphs(max_out_degree=2),
                            epsilon=4.0, steps=5, batch_size=30, seed=0)
    other.load_state_dict(state)
    assert other.epsilon == pytest.approx(pt.epsilon, rel=1e-9)
    with pytest.raises(InvalidParameterError, match="before the checkpoint"):
        other.release_predictor()
    other.close()
