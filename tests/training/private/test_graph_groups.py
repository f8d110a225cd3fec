"""Issue 43 item 6: units are what the user thinks. A training list with the same graph twice
(one object listed twice, or equal copies) is warned about: the guarantee is per entry.
``GraphSampler(groups=...)`` makes the individual behind several entries the unit: its graphs
are sampled together, each clipped to C, and the noise covers the largest group; the code
audit checks the grouping (an unscaled noise, or a grouping the accounting ignores, is
flagged)."""

from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch

import gnnprivacy as gp
from tests.auditing.audit_paths import GraphNet, failed, graph_list, graph_loop, unchecked
from gnnprivacy.auditing.code import code_audit
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.training.private.graph_sampler import DuplicateGraphWarning, GraphSampler


def _private(graphs, sampler="graphs", **kw):
    torch.manual_seed(0)
    model = GraphNet(graphs[0].num_features, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    kw = {"noise_multiplier": 1.0, "steps": 5, "batch_size": 12, "seed": 0, **kw}
    return gp.make_private(model, opt, graphs, sampler=sampler, **kw), model, opt


@pytest.mark.parametrize("copy", ["the same object", "equal tensors"])
def test_a_graph_listed_twice_is_warned_about(copy):
    graphs = graph_list(n=40)
    twin = graphs[3] if copy == "the same object" else graphs[3].clone()
    with pytest.warns(DuplicateGraphWarning, match=r"entries 3, 40.*per entry.*groups="):
        _private(graphs + [twin])[0].close()


def test_distinct_graphs_and_grouped_copies_are_not_warned_about():
    graphs = graph_list(n=40)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DuplicateGraphWarning)
        _private(graphs)[0].close()
        ids = list(range(40)) + [3]                   # the copy is individual 3's
        _private(graphs + [graphs[3]], GraphSampler(groups=ids))[0].close()


def _people(n_people=30, per=3):
    graphs = graph_list(n=n_people * per)
    return graphs, [i // per for i in range(n_people * per)]


def test_a_group_is_sampled_whole_and_the_noise_covers_it():
    graphs, ids = _people()
    pt, model, opt = _private(graphs, GraphSampler(groups=ids), batch_size=6, steps=8)
    plain, _, _ = _private(graphs, batch_size=6, steps=8)
    assert pt.plan.noise_scale == 3 and pt.engine.occurrence_bound == 3
    assert pt.noise_std == pytest.approx(3 * plain.noise_std)     # same z, three clip norms
    assert pt.privacy["num_groups"] == 30 and "individual" in pt.privacy["scope"]
    assert pt.plan.expected_batch_size == pytest.approx(6 * 3)
    for batch in pt.loader:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(batch.x, batch.edge_index, batch.batch),
                                          batch.y).backward()
        opt.step()
        members = {}                     # read after the step (the loop guard's window)
        for person, graph in zip(batch.group.tolist(), batch.g_id.tolist()):
            members.setdefault(person, []).append(graph)
        assert all(sorted(g) == [3 * p, 3 * p + 1, 3 * p + 2] for p, g in members.items())
    pt.close()
    plain.close()


def test_bad_groups_are_refused():
    graphs, ids = _people()
    with pytest.raises(InvalidParameterError, match="one id per training graph"):
        _private(graphs, GraphSampler(groups=ids[:-1]))
    with pytest.raises(InvalidParameterError, match="at least 2 individuals"):
        _private(graphs, GraphSampler(groups=[0] * len(graphs)))


def _grouped_audit(monkeypatch=None, **plan_changes):
    graphs, ids = _people()
    if plan_changes:
        plan = GraphSampler.plan
        monkeypatch.setattr(GraphSampler, "plan", lambda self, batch_size: dataclasses.replace(
            plan(self, batch_size=batch_size), **plan_changes))

    def train(graphs):
        pt, model, opt = _private(graphs, GraphSampler(groups=ids), epsilon=2.0,
                                  noise_multiplier=None, batch_size=6, steps=30)
        graph_loop(pt, model, opt)
        pt.close()
        return {"epsilon": pt.epsilon, "delta": pt.delta, "privacy": pt.privacy,
                "model": model.state_dict()}

    return code_audit(train, data=graphs, seed=0, num_canaries=64, num_noise=64)


def test_the_code_audit_passes_an_honest_grouping():
    result = _grouped_audit()
    assert not unchecked(result), unchecked(result)
    assert not result.violation, result.summary()
    assert result.details["checks"][0]["occurrence"]["max_per_step"] == 3


def test_the_code_audit_flags_a_grouping_without_scaled_noise(monkeypatch):
    result = _grouped_audit(monkeypatch, noise_scale=1.0)
    assert result.violation and "noise" in failed(result), result.summary()


def test_the_code_audit_flags_a_grouping_the_accounting_ignores(monkeypatch):
    result = _grouped_audit(monkeypatch, noise_scale=1.0, occurrence=1)
    assert result.violation and "occurrence" in failed(result), result.summary()
