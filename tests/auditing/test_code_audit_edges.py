"""The code audit on the edge-level path (issue 46): ``make_private(sampler="edges")`` in a
user loop. The honest run passes every boundary check (none unchecked); a planted doubled
occurrence (every subgraph twice in its step, or subgraphs one hop deeper than the event
assumes) and a planted doubled rate are each flagged by their own check."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch_geometric.nn import SAGEConv

import gnnprivacy as gp
from gnnprivacy.auditing.code import code_audit
from gnnprivacy.training.private import edge_sampler as es

from audit_paths import node_loop

CHECKS = ("sampling_rate", "releases", "clip", "noise", "occurrence")


class Net(nn.Module):
    def __init__(self, f, c, h=16):
        super().__init__()
        self.lin, self.conv, self.head = nn.Linear(f, h), SAGEConv(h, h, aggr="sum"), \
            nn.Linear(h, c)

    def forward(self, x, edge_index):
        return self.head(torch.relu(self.conv(torch.relu(self.lin(x)), edge_index)))


def edge_loop(data, seed=0, steps=12):
    """A user loop on the edge sampler (one SAGE layer: occurrence 2): ``(pt, model)``."""
    torch.manual_seed(seed)
    model = Net(data.num_features, int(data.y.max()) + 1)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    pt = gp.make_private(model, opt, data, sampler=es.EdgeSubgraphs(inference="none"),
                         noise_multiplier=3.0, seed=seed, steps=steps, batch_size=40)
    node_loop(pt, model, opt)
    pt.close()
    return pt, model


def audit_edges(data, seed=0, steps=12):
    """The code audit of `edge_loop`."""
    def train():
        pt, _ = edge_loop(data, seed, steps)
        return {"epsilon": pt.epsilon, "delta": pt.delta}

    return code_audit(train, seed=seed, method="make_private-edges")


def _failed(result):
    return {name for checks in result.details["checks"] for name, c in checks.items()
            if c.get("checked") and not c["passed"]}


@pytest.fixture(scope="module")
def data():
    return gp.load_dataset("csbm", num_nodes=240, seed=0)


def test_the_honest_edge_path_passes_every_check(data):
    result = audit_edges(data)
    checks = result.details["checks"][0]
    assert all(checks[name]["checked"] for name in CHECKS), checks
    assert not result.violation and not _failed(result), result.summary()
    assert checks["occurrence"]["unit"] == "edge" and checks["occurrence"]["bound"] == 2


def _plant(kind, monkeypatch):
    if kind == "doubled_subgraphs":          # every centre's subgraph twice in its step
        original = es.EdgeSubgraphs.subgraphs
        monkeypatch.setattr(es.EdgeSubgraphs, "subgraphs", lambda self, centres: original(
            self, torch.cat([centres, centres])))
    elif kind == "one_hop_deeper":           # 2-hop subgraphs, the event still of 1 hop
        original = es.subgraph_entries
        monkeypatch.setattr(es, "subgraph_entries", lambda rowptr, src, centres, hops, n:
                            original(rowptr, src, centres, hops + 1, n))
    elif kind == "doubled_rate":             # centres drawn at 2q, the event at q
        plan = es.EdgeSubgraphs.plan

        def raised(self, *, batch_size):
            honest = plan(self, batch_size=batch_size)
            self._rate = min(1.0, 2 * self._rate)
            return honest

        monkeypatch.setattr(es.EdgeSubgraphs, "plan", raised)


@pytest.mark.parametrize("kind,check", [
    ("doubled_subgraphs", "occurrence"),
    pytest.param("one_hop_deeper", "occurrence", marks=pytest.mark.slow),
    pytest.param("doubled_rate", "sampling_rate", marks=pytest.mark.slow)])
def test_a_planted_bug_is_flagged_by_its_check(kind, check, data, monkeypatch):
    _plant(kind, monkeypatch)
    result = audit_edges(data)
    assert result.violation, result.summary()
    assert check in _failed(result), (_failed(result), result.summary())


@pytest.mark.slow
@pytest.mark.parametrize("level", ["edge", "node"])
def test_the_link_paths_pass_every_check(level, data):
    """Link prediction at edge and node level through the code audit: every check made,
    none failed (node level: the negatives' rows are public nodes, not units, and are not
    counted as occurrences; the positives are the bounded stars')."""
    from gnnprivacy.training.link_prediction import fit_link_predictor

    def train():
        out = fit_link_predictor(data, privacy=level, epsilon=4.0, steps=10, batch_size=40,
                                 inference="none" if level == "edge" else "noisy")
        return {"epsilon": out["epsilon"], "delta": out["delta"]}

    result = code_audit(train, seed=0, method=f"link-{level}")
    checks = result.details["checks"][0]
    assert all(checks[name]["checked"] for name in CHECKS), checks
    assert not _failed(result), result.summary()


@pytest.mark.slow
def test_counting_the_public_negatives_as_units_would_flag_node_level_link(data, monkeypatch):
    """Broken control of the exclusion above: without ``public_rows`` the public negatives
    count as occurrences and the node-level occurrence check fails."""
    from gnnprivacy.training import link_prediction as lp

    original = lp.LinkSubgraphs.with_pairs

    def unmarked(self, batch, generator):
        out = original(self, batch, generator)
        del out.public_rows
        return out

    monkeypatch.setattr(lp.LinkSubgraphs, "with_pairs", unmarked)

    def train():
        out = lp.fit_link_predictor(data, privacy="node", epsilon=4.0, steps=10, batch_size=40)
        return {"epsilon": out["epsilon"], "delta": out["delta"]}

    assert "occurrence" in _failed(code_audit(train, seed=0, method="link-node"))


def _edge_publishing_run(extra):
    """``train(data)`` of a user loop on the edge sampler publishing ``extra(data)`` beside
    what the run releases."""
    def train(data):
        pt, model = edge_loop(data, steps=6)
        return {"epsilon": pt.epsilon, "privacy": pt.privacy, "model": model.state_dict(),
                **extra(data)}

    return train


def test_the_publication_check_moves_the_edges_for_the_edge_unit(data):
    """Under the edge unit the features and labels are public: a published feature statistic
    passes, and a published edge statistic (the edges among training nodes) is flagged
    (broken control)."""
    from gnnprivacy.auditing.publication import publication_check

    public = publication_check(_edge_publishing_run(
        lambda d: {"feature_mean": float(d.x.mean())}), data)
    assert public["checked"] and public["passed"], public
    leaked = publication_check(_edge_publishing_run(lambda d: {"train_edges": int(
        (d.train_mask[d.edge_index[0]] & d.train_mask[d.edge_index[1]]).sum())}), data)
    assert leaked["checked"] and not leaked["passed"], leaked
    assert leaked["differences"][0]["path"] == "train_edges"
