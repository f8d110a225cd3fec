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
    new = gp.assess(result.model, result.data, privacy=result.record, link_attacks=())
    via_result = gp.assess(result, result.data, link_attacks=())
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
    card = gp.assess(model, small_graph, link_attacks=())
    assert math.isinf(card["claimed"]["epsilon"])
    assert "without DP" in card_to_markdown(card)
    assert card["link_stealing"]["auc"] > 0.5
    lo, hi = card["link_stealing"]["auc_ci95"]
    assert lo <= card["link_stealing"]["auc"] <= hi


# ----------------------------------------------------------------------------- bad input
def test_a_model_whose_output_is_not_one_row_per_node(small_graph):
    class Pooled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(small_graph.num_features, 3)

        def forward(self, x, edge_index):
            return self.lin(x).mean(0, keepdim=True)

    with pytest.raises(InvalidParameterError, match="one row of logits per node"):
        gp.assess(Pooled(), small_graph)


def test_a_graph_of_another_feature_size(small_graph):
    from torch_geometric.nn import GCNConv

    with pytest.raises(InvalidParameterError, match="model's 7 features per node"):
        gp.assess(GCNConv(7, 3), small_graph)


def test_a_train_fn_that_returns_something_else(small_graph):
    model = fit(small_graph, 0, epochs=2)
    with pytest.raises(InvalidParameterError, match="train_fn.*returning dict"):
        gp.assess(model, small_graph, train_fn=lambda data, seed: {"model": model}, shadows=4,
                  link_stealing=False)


def test_assess_needs_the_graph_of_a_model(small_graph):
    with pytest.raises(InvalidParameterError, match="the graph the model was trained on"):
        gp.assess(fit(small_graph, 0, epochs=1))


# ----------------------------------------------------------------------------- saved models
def test_a_saved_user_model_round_trips_weights_only(small_graph, tmp_path):
    from torch_geometric.nn.models import GraphSAGE

    model = fit(small_graph, 0, epochs=20)
    init = {"in_channels": small_graph.num_features, "hidden_channels": 32, "num_layers": 2,
            "out_channels": int(small_graph.y.max()) + 1}
    claim = {"epsilon": 3.0, "delta": 1e-5, "unit": "node", "relation": "add/remove"}
    path = gp.save_model(model, tmp_path / "sage.pt", privacy=claim, init=init,
                         dataset={"name": "csbm", "num_nodes": 300, "train_frac": 0.5,
                                  "val_frac": 0.0, "test_frac": 0.5})
    blob = torch.load(path, weights_only=True)          # tensors and strings only
    assert blob["class"] == "torch_geometric.nn.models.basic_gnn:GraphSAGE"
    saved = gp.load_model(path)
    assert isinstance(saved.model, GraphSAGE) and saved.privacy["epsilon"] == 3.0
    with torch.no_grad():
        model.eval()
        assert torch.equal(saved.model(small_graph.x, small_graph.edge_index),
                           model(small_graph.x, small_graph.edge_index))
    card = gp.assess(saved.model, small_graph, privacy=saved.privacy, link_attacks=())
    assert card["claimed"]["epsilon"] == 3.0 and card["claimed"]["relation"] == "add/remove"


def test_save_model_refuses_init_that_does_not_rebuild_the_model(small_graph, tmp_path):
    with pytest.raises(InvalidParameterError, match="init"):
        gp.save_model(fit(small_graph, 0, epochs=1), tmp_path / "m.pt", init={"in_channels": 3})


def test_a_saved_file_that_is_not_a_model(tmp_path):
    from click.testing import CliRunner

    from gnnprivacy.cli import main

    torch.save({"weights": torch.zeros(3)}, tmp_path / "other.pt")
    (tmp_path / "text.pt").write_text("not a torch file")
    for name in ("other.pt", "text.pt"):
        with pytest.raises(InvalidParameterError, match="a model saved by gnnprivacy"):
            gp.load_model(tmp_path / name)
        result = CliRunner().invoke(main, ["assess", str(tmp_path / name)])
        assert result.exit_code != 0 and "a model saved by gnnprivacy" in result.output
        assert "Traceback" not in result.output


def test_gnnprivacy_assess_a_saved_user_model(small_graph, tmp_path):
    import json

    from click.testing import CliRunner

    from gnnprivacy.cli import main

    model = fit(small_graph, 0, epochs=20)
    init = {"in_channels": small_graph.num_features, "hidden_channels": 32, "num_layers": 2,
            "out_channels": int(small_graph.y.max()) + 1}
    gp.save_model(model, tmp_path / "sage.pt", init=init,
                  dataset={"name": "csbm", "num_nodes": 300, "train_frac": 0.5,
                           "val_frac": 0.0, "test_frac": 0.5})
    result = CliRunner().invoke(main, ["assess", str(tmp_path / "sage.pt"), "--json",
                                         "--link-attacks", ""])
    assert result.exit_code == 0, result.output
    card = json.loads(result.stdout)
    direct = gp.assess(gp.load_model(tmp_path / "sage.pt").model, small_graph, link_attacks=())
    assert card["link_stealing"]["auc"] == direct["link_stealing"]["auc"]
    assert card["claimed"]["epsilon"] == "inf" or math.isinf(card["claimed"]["epsilon"])


# ----------------------------------------------------------------------------- code audit
def _private_train_fn(epsilon):
    def train_fn(data, seed):
        from torch_geometric.nn.models import GraphSAGE

        torch.manual_seed(seed)
        model = GraphSAGE(data.num_features, 16, 1, int(data.y.max()) + 1)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        pt = gp.make_private(model, opt, data, sampler="heterpoisson", epsilon=epsilon,
                             seed=seed, steps=40)
        for batch in pt.loader:
            opt.zero_grad()
            out = model(batch.x, batch.edge_index)
            F.cross_entropy(out[batch.center], batch.y[batch.center]).backward()
            opt.step()
        return pt
    return train_fn


@pytest.mark.parametrize("noise", ["honest", "secretly off"])
def test_a_private_model_whose_noise_is_secretly_off_is_flagged(noise, monkeypatch):
    from gnnprivacy.training.dp import engine as engine_module

    if noise == "secretly off":
        original = engine_module.noised_flat
        monkeypatch.setattr(engine_module, "noised_flat",
                            lambda sums, std, **kw: original(sums, std * 0.01, **kw))   # 1% of the plan
    data = gp.load_dataset("csbm", num_nodes=400)
    train_fn = _private_train_fn(1.0)
    pt = train_fn(data, 0)
    card = gp.assess(pt, data, train_fn=train_fn, shadows=0, link_stealing=False)
    assert card["claimed"]["epsilon"] == pytest.approx(pt.epsilon)
    assert card["audit"]["mode"] == "code"
    assert card["audit"]["violation"] == (noise != "honest"), card["audit"]
    assert ("EXCEEDS THE CLAIM" in card_to_markdown(card)) == (noise != "honest")


def test_the_html_card_plots_the_membership_roc_curves(small_graph):
    card = gp.assess(fit(small_graph, 0, epochs=20), small_graph, link_stealing=False)
    page = card_to_html(card)
    assert page.count("<polyline") == 1 + len(card["membership"]) and "<svg" in page
    card["membership"] = {}
    assert "<svg" not in card_to_html(card)


def test_several_cards_plot_auc_against_epsilon(small_graph):
    from gnnprivacy.auditing.report_card import cards_to_html

    model = fit(small_graph, 0, epochs=20)
    cards = [gp.assess(model, small_graph, link_stealing=False,
                       privacy=None if eps is None else {"epsilon": eps, "delta": 1e-5})
             for eps in (None, 1.0, 8.0)]
    page = cards_to_html(cards)
    assert page.count("<section") == 3 and "auc-vs-epsilon" in page
    assert "auc-vs-epsilon" not in cards_to_html(cards[:1])


def test_loading_never_imports_a_module_the_file_names(small_graph, tmp_path, monkeypatch):
    """A saved file names its class; importing that class's module would run its code, so
    load_model refuses a module that is not imported unless the caller names it."""
    import sys

    from click.testing import CliRunner

    from gnnprivacy.cli import main

    marker = tmp_path / "ran"
    (tmp_path / "planted_net.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
        "from torch_geometric.nn import GraphSAGE as Net\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    model = fit(small_graph, 0, epochs=1)
    init = {"in_channels": small_graph.num_features, "hidden_channels": 32, "num_layers": 2,
            "out_channels": int(small_graph.y.max()) + 1}
    path = gp.save_model(model, tmp_path / "sage.pt", init=init)
    blob = torch.load(path, weights_only=True)
    blob["class"] = "planted_net:Net"                    # a forged file names another module
    torch.save(blob, path)
    with pytest.raises(InvalidParameterError, match="never imports a module"):
        gp.load_model(path)
    result = CliRunner().invoke(main, ["assess", str(path)])
    assert result.exit_code != 0 and "--import planted_net" in result.output
    assert not marker.exists() and "planted_net" not in sys.modules
    saved = gp.load_model(path, imports=["planted_net"])   # the caller's choice: imported
    assert marker.exists() and isinstance(saved.model, torch.nn.Module)
    sys.modules.pop("planted_net", None)


# ----------------------------------------------------------------------------- several models
def test_several_models_in_one_card(small_graph):
    from gnnprivacy.auditing.report_card import comparison_to_html

    released = fit(small_graph, 0, epochs=60)
    models = {"non-private": released,
              "eps 1": {"model": fit(small_graph, 1, epochs=5),
                        "privacy": {"epsilon": 1.0, "delta": 1e-5}},
              "eps 8": {"model": fit(small_graph, 2, epochs=20),
                        "privacy": {"epsilon": 8.0, "delta": 1e-5}}}
    cmp = gp.assess(models, small_graph, link_attacks=(3,))
    assert [c["run_id"] for c in cmp["cards"]] == list(models)
    alone = gp.assess(released, small_graph, link_attacks=(3,), name="non-private")
    assert cmp["cards"][0]["membership"]["loss_threshold"] == alone["membership"]["loss_threshold"]
    assert cmp["cards"][0]["link_stealing"] == alone["link_stealing"]
    md = card_to_markdown(cmp)
    table = [line for line in md.splitlines() if line.startswith("| ")]
    # rows by claimed epsilon, the release without DP last and labelled
    assert [r.split(" | ")[0] for r in table[1:4]] == ["| eps 1", "| eps 8", "| non-private"]
    assert "no DP" in table[3] and "link stealing attack 3 AUC" in table[0]
    assert md.count("### Privacy report card") == 3
    page = card_to_html(cmp)
    assert page == comparison_to_html(cmp)
    rocs = page.split('aria-label="ROC curves of loss threshold, one per model"')[1]
    assert rocs.split("</svg>")[0].count("<polyline") == 1 + 3          # diagonal + 3 models
    plot = page.split('class="auc-vs-epsilon"')[1].split("</svg>")[0]
    assert ">no DP</text>" in plot and ">1</text>" in plot and ">8</text>" in plot
    assert "link stealing attack 3" in plot


def test_a_list_of_models_is_named_by_class(small_graph):
    cmp = gp.assess([fit(small_graph, 0, epochs=2), fit(small_graph, 1, epochs=2)], small_graph,
                    link_stealing=False)
    assert [c["run_id"] for c in cmp["cards"]] == ["GraphSAGE #1", "GraphSAGE #2"]


def test_several_models_bad_input(small_graph):
    from torch_geometric.nn import GCNConv

    with pytest.raises(InvalidParameterError, match="at least one model; received 'an empty list'"):
        gp.assess([], small_graph)
    with pytest.raises(InvalidParameterError, match="at least one model"):
        gp.assess({}, small_graph)
    # a model of another graph (7 features) among models of this one: named, before training
    calls = []
    with pytest.raises(InvalidParameterError, match=r"models of one graph, each taking its "
                                                    r"\d+ features per node; received \"'other' "
                                                    r"takes 7\""):
        gp.assess({"ok": {"model": fit(small_graph, 0, epochs=1),
                          "train_fn": lambda d, s: calls.append(s)},
                   "other": GCNConv(7, 3)}, small_graph)
    assert calls == []
    with pytest.raises(InvalidParameterError, match="given per model"):
        gp.assess([fit(small_graph, 0, epochs=1)] * 2, small_graph, privacy={"epsilon": 1.0})
    with pytest.raises(InvalidParameterError, match=r"models\[b\]"):
        gp.assess({"a": fit(small_graph, 0, epochs=1), "b": "not a model"}, small_graph)
    with pytest.raises(InvalidParameterError, match="the graph the models were trained on"):
        gp.assess([fit(small_graph, 0, epochs=1)])


# ----------------------------------------------------------------------------- link stealing
class RandomLogits(torch.nn.Module):
    """A 'model' whose outputs ignore the graph: no link can be read from them."""

    def __init__(self, in_channels, classes):
        super().__init__()
        self.lin = torch.nn.Linear(in_channels, classes)
        self.register_buffer("noise", torch.randn(300, classes,
                                                  generator=torch.Generator().manual_seed(0)))

    def forward(self, x, edge_index):
        return self.noise[: x.shape[0]] * 3


def test_the_attacker_knowledge_variants_of_link_stealing(small_graph):
    from gnnprivacy.auditing.model_card import claim_of, link_stealing_section, model_logits

    def section(model):
        post = torch.softmax(model_logits(model, small_graph), 1).numpy()
        return link_stealing_section(post, small_graph, attacks=(2, 3, 6), pairs=300,
                                     n_hop=None)

    sage = section(fit(small_graph, 0))
    blind = section(RandomLogits(small_graph.num_features, int(small_graph.y.max()) + 1))
    for ls in (sage, blind):
        assert set(ls["variants"]) == {"attack_2", "attack_3", "attack_6"}
        for v in ls["variants"].values():
            lo, hi = v["auc_ci95"]
            assert lo <= v["auc"] <= hi
        a3 = ls["variants"]["attack_3"]
        # the attacker knows half the pairs and is tested on the rest
        assert a3["train_pairs"] + a3["pairs"] == ls["pairs"] == 600
        assert a3["train_pairs"] == 300
    # the trained model's posteriors give links away with part of the graph known ...
    assert sage["variants"]["attack_3"]["auc_ci95"][0] > 0.6
    # ... outputs that ignore the graph do not (broken control: the attack is not reading labels)
    lo, hi = blind["variants"]["attack_3"]["auc_ci95"]
    assert lo < 0.5 < hi
    a6 = blind["variants"]["attack_6"]                  # the features alone still work
    assert a6["auc"] == pytest.approx(a6["auc_output_blind"], abs=0.05)
    card = {"run_id": "r", "method": "m", "dataset": "d", "claimed": claim_of(None),
            "utility": {"test_accuracy": None}, "link_stealing": sage}
    md = card_to_markdown(card)
    assert "Link stealing, He et al. Attack-3 (the attacker knows part of the graph, A*)" in md
    assert "(trained on 300 known pairs, tested on 300)" in md
    assert "without the model's outputs: AUC" in md


def test_link_attacks_that_need_a_shadow_dataset_are_refused(small_graph):
    model = fit(small_graph, 0, epochs=1)
    for bad in ((1,), (0, 5), ("x",), 3):
        with pytest.raises(InvalidParameterError, match="need a shadow dataset"):
            gp.assess(model, small_graph, link_attacks=bad)
    card = gp.assess(model, small_graph, link_attacks=(0,), n_hop=None)
    assert "variants" not in card["link_stealing"]


def test_split_known_is_a_stratified_partition():
    import numpy as np

    from gnnprivacy.attacks.link_stealing.knowledge import split_known
    from gnnprivacy.datasets.link_splits import PairSet

    pairs = PairSet(np.arange(40), np.arange(40) + 100, np.r_[np.ones(10, int), np.zeros(30, int)])
    known, test = split_known(pairs, 0.3, seed=0)
    assert (known.label.sum(), len(known), test.label.sum(), len(test)) == (3, 12, 7, 28)
    assert not set(known.u.tolist()) & set(test.u.tolist())
    with pytest.raises(InvalidParameterError, match="known_frac"):
        split_known(pairs, 1.0, seed=0)


def test_gnnprivacy_assess_several_saved_models_in_one_card(small_graph, tmp_path):
    import json

    from click.testing import CliRunner

    from gnnprivacy.auditing.model_card import assess_models
    from gnnprivacy.cli import main

    init = {"in_channels": small_graph.num_features, "hidden_channels": 32, "num_layers": 2,
            "out_channels": int(small_graph.y.max()) + 1}
    dataset = {"name": "csbm", "num_nodes": 300, "train_frac": 0.5, "val_frac": 0.0,
               "test_frac": 0.5}
    plain, private = fit(small_graph, 0, epochs=20), fit(small_graph, 1, epochs=5)
    gp.save_model(plain, tmp_path / "plain.pt", init=init, dataset=dataset)
    gp.save_model(private, tmp_path / "eps2.pt", init=init, dataset=dataset,
                  privacy={"epsilon": 2.0, "delta": 1e-5})
    run = CliRunner().invoke(main, ["assess", str(tmp_path / "plain.pt"),
                                    str(tmp_path / "eps2.pt"), "--json", "--link-attacks", ""])
    assert run.exit_code == 0, run.output
    card = json.loads(run.stdout)
    direct = assess_models({"plain.pt": plain, "eps2.pt": {"model": private, "privacy": {
        "epsilon": 2.0, "delta": 1e-5}}}, small_graph, link_attacks=())
    assert [c["run_id"] for c in card["cards"]] == ["plain.pt", "eps2.pt"]
    for got, want in zip(card["cards"], direct["cards"]):
        assert got["link_stealing"]["auc"] == want["link_stealing"]["auc"]
        assert got["membership"]["loss_threshold"]["auc"] == \
            want["membership"]["loss_threshold"]["auc"]
    run = CliRunner().invoke(main, ["assess", str(tmp_path / "plain.pt"),
                                    str(tmp_path / "eps2.pt"), "--format", "html",
                                    "--link-attacks", ""])
    assert run.exit_code == 0 and 'class="comparison"' in run.output
    assert 'class="auc-vs-epsilon"' in run.output and ">no DP</text>" in run.output
    # bad input: a model saved with another graph, and a file that is not a model
    gp.save_model(GCNConvModel(7), tmp_path / "other.pt", init={"in_channels": 7},
                  dataset={**dataset, "num_nodes": 200})
    torch.save({"weights": torch.zeros(3)}, tmp_path / "weights.pt")
    for other, says in (("other.pt", "models saved with one dataset"),
                        ("weights.pt", "expected models saved by gp.save_model")):
        run = CliRunner().invoke(main, ["assess", str(tmp_path / "plain.pt"),
                                        str(tmp_path / other)])
        assert run.exit_code != 0 and says in run.output and "Traceback" not in run.output
    run = CliRunner().invoke(main, ["assess", str(tmp_path / "plain.pt"), "--link-attacks", "1"])
    assert run.exit_code != 0 and "need a shadow dataset" in run.output


class GCNConvModel(torch.nn.Module):
    """A one-layer model of 7 input features (a graph of another feature size)."""

    def __init__(self, in_channels):
        super().__init__()
        from torch_geometric.nn import GCNConv

        self.conv = GCNConv(in_channels, 3)

    def forward(self, x, edge_index):
        return self.conv(x, edge_index)
