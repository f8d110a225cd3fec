"""``gp.assess(model, data, ...)``: the report card of any node model (issue 34)."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F

import gnnprivacy as gp
from gnnprivacy.auditing.report_card import card_to_html, card_to_markdown
from gnnprivacy.errors import InvalidParameterError

SMALL = "num_nodes=300"


@pytest.fixture(scope="module")
def builtin(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    result = gp.train("csbm", method="dpmlp", epsilon=2.0, steps=10, dataset_args=SMALL,
                      runs_dir=str(runs))
    return result, runs / f"{result.record.run_id}.json"


def test_a_builtin_record_through_the_model_path_gives_todays_numbers(builtin):
    result, record_path = builtin
    old = gp.assess(record_path, audit_runs=300, baseline=False)
    new = gp.assess(result.model, result.data, privacy=result.record)
    via_result = gp.assess(result, result.data)
    for card in (new, via_result):
        for key in ("epsilon", "delta", "unit", "relation", "scope", "accountant",
                    "unaccounted"):
            assert card["claimed"][key] == old["claimed"][key], key
        for key in ("auc", "auc_ci95", "tpr_at_1pct_fpr", "pairs", "auc_vs_nhop"):
            assert card["link_stealing"][key] == old["link_stealing"][key], key
        for name in ("loss_threshold", "confidence_threshold"):
            assert card["membership"][name] == old["membership"][name], name
        assert card["utility"]["test_accuracy"] == pytest.approx(
            old["utility"]["test_accuracy"], abs=1e-6)
    assert "Link stealing" in card_to_markdown(new) and "<table>" in card_to_html(new)


def fit(data, seed, epochs=200):
    """PyG's own GraphSAGE, fitted to the training nodes."""
    from torch_geometric.nn.models import GraphSAGE

    torch.manual_seed(seed)
    model = GraphSAGE(data.num_features, 32, 2, int(data.y.max()) + 1)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    for _ in range(epochs):
        opt.zero_grad()
        out = model(data.x, data.edge_index)
        F.cross_entropy(out[data.train_mask], data.y[data.train_mask]).backward()
        opt.step()
    return model


@pytest.fixture(scope="module")
def small_graph():
    return gp.load_dataset("csbm", num_nodes=300, train_frac=0.5, val_frac=0.0, test_frac=0.5)


def test_a_non_private_model_is_assessed_and_the_card_says_so(small_graph):
    model = fit(small_graph, 0)
    card = gp.assess(model, small_graph)
    assert math.isinf(card["claimed"]["epsilon"])
    assert "without DP" in card_to_markdown(card)
    assert card["link_stealing"]["auc"] > 0.5
    lo, hi = card["link_stealing"]["auc_ci95"]
    assert lo <= card["link_stealing"]["auc"] <= hi
