"""The built-in edge-level methods (issue 46): ``edge-dp`` (make_private's edge sampler with
edge-private predictions) and ``gap-edge`` (GAP's edge-level mode), and the link
prediction task (``--task link``)."""

from __future__ import annotations

import math

import pytest
import torch
from click.testing import CliRunner

import gnnprivacy as gp
from gnnprivacy.training.edge_dp import EdgeDPTrainer
from gnnprivacy.training.gap import GAPTrainer
from gnnprivacy.training.link_prediction import (LinkSubgraphs, fit_link_predictor,
                                                 hits_at_k, link_split)


@pytest.fixture(scope="module")
def data():
    return gp.load_dataset("csbm", num_nodes=300, seed=0)


def _rewired(data):
    other = data.clone()
    other.edge_index = torch.randint(0, int(data.num_nodes), (2, 400))
    return other


def test_edge_dp_spends_within_the_target_and_its_predictions_read_no_edge(data):
    trainer = EdgeDPTrainer(epsilon=2.0, steps=5, pretrain_epochs=5, generator=0).fit(data)
    record = trainer.privacy_record()
    assert trainer.epsilon_ <= 2.0 and record["unit"] == "edge"
    assert record["inference_release"]["released"] and record["edge_unit"] == "undirected"
    torch.testing.assert_close(trainer.predict_logits(data),
                               trainer.predict_logits(_rewired(data)))
    open_ = EdgeDPTrainer(epsilon=2.0, steps=5, pretrain_epochs=5, generator=0,
                          inference="unprotected").fit(data)
    assert "UNPROTECTED" in open_.privacy_record()["unaccounted"][0]
    assert not torch.allclose(open_.predict_logits(data), open_.predict_logits(_rewired(data)))


def test_gap_edge_level_noises_only_the_aggregation(data):
    gap = GAPTrainer(epsilon=1.0, level="edge", encoder_epochs=2, epochs=2, generator=0)
    gap.fit(data)
    record = gap.privacy_record()
    assert record["unit"] == "edge" and gap.epsilon_ <= 1.0
    assert record["aggregation_sensitivity"] == pytest.approx(math.sqrt(2.0))
    assert gap.agg_std_ == pytest.approx(gap.noise_multiplier_ * math.sqrt(2.0))
    assert [e["count"] for e in gap.ledger_["ledger"]["entries"]] == [2]
    torch.testing.assert_close(gap.predict_logits(data), gap.predict_logits(_rewired(data)))
    node = GAPTrainer(epsilon=1.0, encoder_epochs=2, epochs=2, generator=0, max_degree=5)
    assert node.fit(data).privacy_record()["unit"] == "node"


@pytest.mark.parametrize("method,values", [
    pytest.param("edge-dp", {"steps": 4, "pretrain_epochs": 3}, marks=pytest.mark.slow),
    ("gap-edge", {"epochs": 2, "encoder_epochs": 2})])
def test_edge_methods_run_through_the_runner(method, values, data, tmp_path):
    result = gp.train(data, method=method, epsilon=2.0, **values)
    assert result.record.privacy["unit"] == "edge" and result.epsilon <= 2.0


def test_link_split_keeps_held_out_edges_out_of_the_graph(data):
    split = link_split(data, val_frac=0.1, test_frac=0.2, seed=0)
    n = int(data.num_nodes)
    graph = set((split.graph.edge_index[0] * n + split.graph.edge_index[1]).tolist())
    everything = set((data.edge_index[0] * n + data.edge_index[1]).tolist())
    for pos, neg in (split.val, split.test):
        for u, v in pos.t().tolist():
            assert u * n + v not in graph and v * n + u not in graph
            assert u * n + v in everything
        for u, v in neg.t().tolist():
            assert u * n + v not in everything and v * n + u not in everything
    assert split.sizes()["test_pairs"] == round(0.2 * len(everything) / 2)


@pytest.mark.parametrize("level", ["edge", "node"])
def test_link_batches_keep_each_pair_inside_its_subgraph(level, data):
    from gnnprivacy.training.link_prediction import _sampler

    graph = link_split(data, seed=0).graph
    graph.train_mask = torch.rand(300, generator=torch.Generator().manual_seed(0)) < 0.8 \
        if level == "node" else torch.ones(300, dtype=torch.bool)
    graph.y = data.y
    sampler = _sampler(level, negatives=3, max_degree=3, inference="none")
    sampler.setup(graph, generator=torch.Generator().manual_seed(0))
    sampler.plan(batch_size=40)
    batch = sampler.sample(torch.Generator().manual_seed(1))
    label = batch.link_label
    assert bool((label[batch.center] == -1).all())
    negatives = (label == 0).nonzero().flatten()
    touched = torch.zeros(batch.num_nodes, dtype=torch.bool)
    touched[batch.edge_index.flatten()] = True
    assert negatives.numel() > 0 and not bool(touched[negatives].any())
    if level == "node":                    # negatives are public nodes only
        assert not bool(graph.train_mask[batch.n_id[negatives]].any())
    positives = (label == 1).nonzero().flatten()
    centre_of = batch.center[batch.batch[positives]]
    linked = set(map(tuple, batch.edge_index.t().tolist()))
    assert all((int(p), int(c)) in linked for p, c in zip(positives, centre_of))


@pytest.mark.slow
def test_link_predictors_report_auc_and_spend_within_the_target(data):
    plain = fit_link_predictor(data, privacy="none", steps=30, batch_size=60, seed=0)
    assert plain["metrics"]["test_auc"] > 0.6 and plain["epsilon"] == math.inf
    edge = fit_link_predictor(data, privacy="edge", epsilon=4.0, steps=5, batch_size=60)
    assert edge["epsilon"] <= 4.0 and edge["privacy"]["unit"] == "edge"
    assert edge["privacy"]["inference_release"]["released"]
    node = fit_link_predictor(data, privacy="node", epsilon=4.0, steps=5, batch_size=60)
    assert node["epsilon"] <= 4.0 and node["privacy"]["unit"] == "node"
    assert node["privacy"]["unaccounted"][0].startswith("inference")
    assert 0.0 <= node["metrics"]["test_auc"] <= 1.0


def test_hits_at_k_counts_positives_above_the_kth_negative():
    neg = torch.tensor([0.9, 0.5, 0.1, 0.0])
    assert hits_at_k(torch.tensor([1.0, 0.6, 0.2]), neg, 2) == pytest.approx(2 / 3)
    assert hits_at_k(torch.tensor([1.0]), neg, 10) == 1.0


def test_link_task_from_the_cli(tmp_path):
    from gnnprivacy.cli import main

    out = CliRunner().invoke(main, ["train", "--task", "link", "--method", "link",
                                    "--dataset", "csbm", "--steps", "3", "--runs-dir",
                                    str(tmp_path)])
    assert out.exit_code == 0, out.output
    # the result line names the task's metric (it said "test accuracy nan")
    assert "test AUC" in out.output and "Hits@50" in out.output and "nan" not in out.output
    bad = CliRunner().invoke(main, ["train", "--task", "link", "--method", "dpmlp",
                                    "--dataset", "csbm", "--runs-dir", str(tmp_path)])
    assert bad.exit_code != 0 and "task" in bad.output and "Traceback" not in bad.output
    assert isinstance(LinkSubgraphs, type)


@pytest.mark.slow
def test_assess_runs_linkteller_on_edge_claims_with_the_features_only_control(data):
    """The card of an edge-level model runs LinkTeller (unit edge), and a comparison states
    each edge attack's advantage over the features-only control; the unprotected control
    (the same model predicting on the true graph) is caught by LinkTeller."""
    import torch_geometric.nn as pyg_nn
    from torch import nn

    from gnnprivacy.auditing.report_card import comparison_to_markdown

    safe = EdgeDPTrainer(epsilon=2.0, steps=3, pretrain_epochs=3, generator=0).fit(data)
    open_ = EdgeDPTrainer(epsilon=2.0, steps=3, pretrain_epochs=3, generator=0,
                          inference="unprotected").fit(data)

    class Mlp(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(data.num_features, 4)

        def forward(self, x, edge_index):
            return self.lin(x)

    torch.manual_seed(0)
    models = {"edge-dp": {"model": safe, "privacy": {**safe.privacy_record(),
                                                     "epsilon": safe.epsilon_,
                                                     "delta": safe.delta_}},
              "unprotected": {"model": open_, "privacy": {**open_.privacy_record(),
                                                          "epsilon": open_.epsilon_,
                                                          "delta": open_.delta_}},
              "mlp": Mlp(), "gcn": pyg_nn.GCNConv(data.num_features, 4)}
    out = gp.assess(models, data, control="mlp", linkteller=True, linkteller_targets=60,
                    link_attacks=(), n_hop=None, code_audit=False)
    cards = {c["run_id"]: c for c in out["cards"]}
    assert cards["edge-dp"]["linkteller"]["auc"] == pytest.approx(0.5)
    assert cards["unprotected"]["linkteller"]["auc"] > 0.9
    assert cards["mlp"]["advantage_over_control"] == {"link_stealing": 0.0, "linkteller": 0.0}
    text = comparison_to_markdown(out)
    assert "link stealing over mlp" in text and "LinkTeller" in text


@pytest.mark.slow
def test_the_edge_privacy_page_commands_run(tmp_path):
    """Every ``gnnprivacy`` command of docs/edge-privacy.md runs as written."""
    import re
    import shlex
    from pathlib import Path

    from gnnprivacy.cli import main

    page = (Path(__file__).resolve().parents[2] / "docs" / "edge-privacy.md").read_text()
    blocks = re.findall(r"^```bash\n(.*?)^```", page, re.S | re.M)
    commands = [line for b in blocks for line in b.splitlines() if line.startswith("gnnprivacy")]
    assert len(commands) == 3
    for line in commands:
        out = CliRunner().invoke(main, shlex.split(line)[1:] + ["--runs-dir", str(tmp_path)])
        assert out.exit_code == 0, (line, out.output[-2000:])
