"""``gp.assess(model, graphs, ...)``: the report card of a graph-level model (issues 33, 34).

The graph path is the node path with a graph as the unit (`gnnprivacy.auditing.model_card`):
its LiRA numbers are those of `gnnprivacy.attacks.graph_membership` on the same shadows, a
"private" model whose noise is secretly off is flagged by the card, and bad input gets one
typed error each.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch_geometric.data import Data
from torch_geometric.nn import GCNConv, global_mean_pool

import gnnprivacy as gp
from gnnprivacy.auditing.report_card import card_to_html, card_to_markdown
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.training.graph_classification import (GraphClassifier, accuracy,
                                                      fit_graph_classifier)

F_IN, C = 5, 2
FIT = {"epochs": 15, "batch_size": 16, "hidden": 16}


def _graphs(n=48, seed=0, random_labels=False):
    """Small graphs whose label is readable from the features (class c: mean shifted by c),
    or random labels (a memorisable set)."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        k = int(torch.randint(4, 10, (1,), generator=gen))
        src = torch.randint(0, k, (2 * k,), generator=gen)
        dst = torch.randint(0, k, (2 * k,), generator=gen)
        y = int(torch.randint(0, C, (1,), generator=gen)) if random_labels else i % C
        x = torch.randn(k, F_IN, generator=gen) + 0.5 * y
        out.append(Data(x=x, edge_index=torch.stack([torch.cat([src, dst]),
                                                     torch.cat([dst, src])]),
                        y=torch.tensor([y])))
    return out


def _graph_set(graphs, name="synthetic"):
    from gnnprivacy.datasets.tu_graphs import GraphSet, stratified_graph_split

    labels = [int(g.y[0]) for g in graphs]
    return GraphSet(name, graphs, stratified_graph_split(labels, seed=0, dataset=name), C, F_IN)


def _fit(graphs, seed):
    return fit_graph_classifier(graphs, num_features=F_IN, num_classes=C, seed=seed,
                                **FIT).model


@pytest.fixture(scope="module")
def graphs():
    return _graphs()


def test_the_graph_path_gives_the_numbers_of_graph_membership():
    """Same pool, same seeds: the card's LiRA (shadows trained by train_fn on random halves)
    equals the graph membership game run directly."""
    from gnnprivacy.attacks.graph_membership import graph_membership

    gset = _graph_set(_graphs(n=40))
    direct = graph_membership(gset, epsilon=None, num_models=4, seed=0, **FIT)
    pool = gset.subset("train")
    released = _fit(pool[: len(pool) // 2], 7)
    card = gp.assess(released, pool, members=range(len(pool) // 2),
                     nonmembers=range(len(pool) // 2, len(pool)), train_fn=_fit, shadows=4,
                     code_audit=False)
    lira = card["membership"]["lira_online"]
    assert lira["num_scores"] == direct["num_scores"]
    for key in ("auc", "tpr_at_1pct_fpr", "tpr_at_0.1pct_fpr", "accuracy"):
        assert lira[key] == pytest.approx(direct[key], abs=1e-12), key
    assert lira["query"] == "each graph alone"
    assert 0.0 <= card["membership"]["lira_offline"]["auc"] <= 1.0


def test_a_graph_set_is_assessed_with_its_split_and_the_card_says_link_stealing_does_not_apply(
        graphs):
    gset = _graph_set(graphs)
    model = _fit(gset.subset("train"), 0)
    card = gp.assess(model, gset)
    members = card["membership"]["loss_threshold"]
    assert (members["members"], members["nonmembers"]) == (len(gset.split.train_idx),
                                                           len(gset.split.test_idx))
    assert card["dataset"] == "synthetic" and card["level"] == "graph"
    assert card["link_stealing"]["applicable"] is False
    md = card_to_markdown(card)
    assert "| Link stealing | not applicable: a graph-level model" in md
    assert "graphs per side" in md and "<svg" in card_to_html(card)
    assert card["utility"]["test_accuracy"] == pytest.approx(accuracy(model,
                                                                      gset.subset("test")))
    # a non-private model memorising random labels: the threshold attack sees it
    noisy = _graphs(n=60, seed=3, random_labels=True)
    memorised = fit_graph_classifier(noisy[:30], num_features=F_IN, num_classes=C, seed=0,
                                     epochs=150, batch_size=16, hidden=32, lr=0.03).model
    card = gp.assess(memorised, noisy, members=range(30), nonmembers=range(30, 60))
    assert card["membership"]["loss_threshold"]["auc_ci95"][0] > 0.5, card["membership"]


def _private_train_fn(epsilon):
    def train_fn(graphs, seed):
        torch.manual_seed(seed)
        model = GraphClassifier(F_IN, C, hidden=16)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        pt = gp.make_private(model, opt, graphs, sampler="graphs", epsilon=epsilon,
                             batch_size=12, steps=20, seed=seed)
        for batch in pt.loader:
            opt.zero_grad()
            F.cross_entropy(model(batch.x, batch.edge_index, batch.batch), batch.y).backward()
            opt.step()
        pt.close()
        return pt
    return train_fn


@pytest.mark.parametrize("noise", ["honest", "secretly off"])
def test_a_private_graph_model_whose_noise_is_secretly_off_is_flagged(noise, graphs,
                                                                      monkeypatch):
    from gnnprivacy.training.dp import engine as engine_module

    if noise == "secretly off":
        original = engine_module.noised_flat
        monkeypatch.setattr(engine_module, "noised_flat",
                            lambda sums, std, **kw: original(sums, std * 0.0, **kw))
    train_fn = _private_train_fn(1.0)
    pt = train_fn(graphs[:32], 0)
    card = gp.assess(pt, graphs, members=range(32), nonmembers=range(32, 48),
                     train_fn=train_fn, shadows=0)
    assert card["claimed"]["epsilon"] == pytest.approx(pt.epsilon) and pt.epsilon <= 1.0
    assert card["claimed"]["unit"] == "graph"
    assert card["audit"]["mode"] == "code"
    assert card["audit"]["violation"] == (noise != "honest"), card["audit"]
    assert ("EXCEEDS THE CLAIM" in card_to_markdown(card)) == (noise != "honest")


class PerNode(nn.Module):
    """Forgets to pool: one row per node."""

    def __init__(self):
        super().__init__()
        self.conv = GCNConv(F_IN, C)

    def forward(self, x, edge_index, batch):
        return self.conv(x, edge_index)


class Pooled(nn.Module):
    def __init__(self, f=F_IN):
        super().__init__()
        self.conv = GCNConv(f, C)

    def forward(self, x, edge_index, batch):
        return global_mean_pool(self.conv(x, edge_index), batch)


def _refused(pattern):
    return pytest.raises(InvalidParameterError, match=pattern)


def test_bad_graph_input_gets_one_clear_error_each(graphs):
    split = {"members": range(24), "nonmembers": range(24, 48)}
    with _refused(r"one row of logits per graph .*received 'one row per node \(\d+ rows for 48 "
                  r"graphs: pool with batch=\)'"):
        gp.assess(PerNode(), graphs, **split)
    with _refused(r"^parameter 'graphs' must be graphs with the model's 7 features per node; "
                  r"received '5 features'"):
        gp.assess(Pooled(7), graphs, **split)
    with _refused(r"^parameter 'train_fn' must be .*returning the trained model.*received 'a "
                  r"function returning dict'"):
        gp.assess(Pooled(), graphs, train_fn=lambda gs, seed: {"model": Pooled()}, shadows=4,
                  **split)
    with _refused(r"^parameter 'members' must be graph ids in \[0, 48\)"):
        gp.assess(Pooled(), graphs, members=[0, 1, 48], nonmembers=range(24, 48))
    with _refused(r"^parameter 'nonmembers' must be graphs disjoint from the members; received "
                  r"'2 graph"):
        gp.assess(Pooled(), graphs, members=range(26), nonmembers=range(24, 48))
    with _refused(r"^parameter 'members' must be the indices of the training graphs"):
        gp.assess(Pooled(), graphs)
    floats = [Data(x=g.x, edge_index=g.edge_index, y=torch.tensor([0.5])) for g in graphs]
    with _refused("integer class labels"):
        gp.assess(Pooled(), floats, **split)


def test_several_graph_models_in_one_card(graphs):
    from gnnprivacy.auditing.report_card import comparison_columns

    out = gp.assess({"plain": _fit(graphs[:24], 0),
                     "claimed eps 1": {"model": _fit(graphs[:24], 1),
                                       "privacy": {"epsilon": 1.0, "delta": 1e-3}}},
                    graphs, members=range(24), nonmembers=range(24, 48))
    assert [c["run_id"] for c in out["cards"]] == ["plain", "claimed eps 1"]
    assert "link_stealing" not in comparison_columns(out)
    assert "auc-vs-epsilon" in card_to_html(out)
    with pytest.raises(InvalidParameterError, match=r"models of one set of graphs, each taking "
                                                    r"its 5 features per node"):
        gp.assess([Pooled(), Pooled(7)], graphs, members=range(24), nonmembers=range(24, 48))
    assert np.isfinite(out["cards"][0]["membership"]["loss_threshold"]["auc"])


# ----------------------------------------------------------------------------- saved models, CLI
def _shared():
    import os
    from pathlib import Path

    env = os.environ.get("GNNPRIVACY_SHARED_DATASETS")
    root = Path(env) if env else Path(__file__).resolve().parents[2].parent / "shared" / "datasets"
    if not (root / "COX2" / "raw").is_dir():
        pytest.skip(f"TU raw files not found under {root} (set GNNPRIVACY_SHARED_DATASETS)")
    return root


def _cli(*args, cache):
    from click.testing import CliRunner

    from gnnprivacy.cli import main

    result = CliRunner(env={"GNNPRIVACY_CACHE": str(cache)}).invoke(main, list(map(str, args)))
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout) if "--json" in args else result.output


@pytest.mark.dataset
def test_gnnprivacy_assess_a_builtin_graph_run_and_its_saved_model(tmp_path, monkeypatch):
    """The graph task keeps its classifier as a saved user model (weights-only); `assess`
    gives the graph-level card for the file and for the record, the numbers of gp.assess."""
    from gnnprivacy.datasets.tu_graphs import load_graph_dataset

    root, runs = _shared(), tmp_path / "runs"
    out = _cli("train", "--task", "graph", "--dataset", "cox2", "--method", "dpsgd-graph",
               "--epsilon", "1", "--epochs", "2", "--data-root", root, "--runs-dir", runs,
               "-q", cache=tmp_path / "cache")
    record = next(runs.glob("*dpsgd-graph-cox2*.json"))
    saved = record.with_name(record.stem + ".model.pt")
    assert f"(gnnprivacy assess {saved}" in out        # not predict: a graph model
    blob = torch.load(saved, weights_only=True)
    assert blob["class"] == "gnnprivacy.training.graph_classification:GraphClassifier"
    by_file = _cli("assess", saved, "--data-root", root, "--json", cache=tmp_path / "cache")
    by_record = _cli("assess", record, "--data-root", root, "--json", "--no-baseline",
                     "--audit-runs", "200", "--no-save", "--lira-models", "4",
                     cache=tmp_path / "cache")
    monkeypatch.setenv("GNNPRIVACY_CACHE", str(tmp_path / "cache"))
    by_api = gp.assess(saved, data_root=root)                 # gp.assess(path): the same card
    loaded = gp.load_model(saved)
    gset = load_graph_dataset("cox2", root=root, cache_dir=tmp_path / "cache")
    direct = gp.assess(loaded.model, gset, privacy=loaded.privacy)
    for card in (by_file, by_record, by_api):
        assert card["level"] == "graph" and card["claimed"]["unit"] == "graph"
        assert card["claimed"]["epsilon"] == pytest.approx(direct["claimed"]["epsilon"])
        assert card["claimed"]["epsilon"] <= 1.0
        assert card["link_stealing"]["applicable"] is False
        for name in ("loss_threshold", "confidence_threshold"):
            assert card["membership"][name]["auc"] == pytest.approx(
                direct["membership"][name]["auc"], abs=1e-12)
        assert card["utility"]["test_accuracy"] == pytest.approx(
            direct["utility"]["test_accuracy"])
    assert by_record["audit"]["mode"] in ("mechanism", "exact")
    lira = by_record["membership"]["lira"]         # attacks/graph_membership, 4 models
    assert lira["game"] == "graphs" and 0.0 <= lira["auc_ci95"][0] <= lira["auc"]
    assert json.loads(record.read_text())["metrics"]["test_accuracy"] == pytest.approx(
        by_record["utility"]["test_accuracy"])


class UserGraphNet(nn.Module):
    """A user's graph classifier (GCN, mean pooling), importable by its module path."""

    def __init__(self, in_channels, classes, hidden=16):
        super().__init__()
        self.conv = GCNConv(in_channels, hidden)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x, edge_index, batch):
        return self.head(global_mean_pool(torch.relu(self.conv(x, edge_index)), batch))


@pytest.mark.dataset
def test_gnnprivacy_assess_a_user_graph_model_saved_with_save_model(tmp_path):
    from gnnprivacy.datasets.tu_graphs import load_graph_dataset

    root = _shared()
    gset = load_graph_dataset("cox2", root=root, cache_dir=tmp_path / "cache")
    torch.manual_seed(0)
    model = UserGraphNet(gset.num_features, gset.num_classes)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    pt = gp.make_private(model, opt, gset.subset("train"), sampler="graphs", epsilon=1.0,
                         batch_size=32, steps=10, seed=0)
    for batch in pt.loader:
        opt.zero_grad()
        F.cross_entropy(model(batch.x, batch.edge_index, batch.batch), batch.y).backward()
        opt.step()
    pt.close()
    path = gp.save_model(pt, tmp_path / "net.pt",
                         init={"in_channels": gset.num_features, "classes": gset.num_classes},
                         dataset={"name": "cox2", "task": "graph", "seed": 0})
    card = _cli("assess", path, "--data-root", root, "--json", cache=tmp_path / "cache")
    direct = gp.assess(pt, gset)
    assert card["claimed"]["epsilon"] == pytest.approx(pt.epsilon)
    assert card["claimed"]["unit"] == "graph" and card["level"] == "graph"
    assert card["membership"]["loss_threshold"]["auc"] == pytest.approx(
        direct["membership"]["loss_threshold"]["auc"], abs=1e-12)
    assert "not applicable" in _cli("assess", path, "--data-root", root,
                                    cache=tmp_path / "cache")


def test_the_node_path_refuses_overlapping_members_too():
    from torch_geometric.nn import GCNConv as Conv

    data = gp.load_dataset("csbm", num_nodes=200)
    model = Conv(data.num_features, int(data.y.max()) + 1)
    with pytest.raises(InvalidParameterError, match=r"^parameter 'nonmembers' must be nodes "
                                                    r"disjoint from the members; received '3 "
                                                    r"node\(s\) in both"):
        gp.assess(model, data, members=[0, 1, 2, 3], nonmembers=[1, 2, 3, 4], link_stealing=False)


def test_a_pyg_dataset_of_graphs_is_graph_level_input():
    from torch_geometric.datasets import FakeDataset

    dataset = FakeDataset(num_graphs=24, avg_num_nodes=8, num_channels=F_IN, num_classes=C,
                          task="graph")
    torch.manual_seed(0)
    model = Pooled()
    card = gp.assess(model, dataset, members=range(12), nonmembers=range(12, 24))
    listed = gp.assess(model, [dataset[i] for i in range(24)], members=range(12),
                       nonmembers=range(12, 24))
    assert card["level"] == "graph" and card["dataset"] == "FakeDataset"
    assert card["membership"] == listed["membership"]
