"""Graph classification: the TU graph datasets, the stratified split, the GIN/GCN classifier,
the built-in ``graph`` / ``dpsgd-graph`` methods on the CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from torch_geometric.data import Data

from gnnprivacy.datasets.tu_graphs import (GraphSet, graph_dataset_status, load_graph_dataset,
                                           stratified_graph_split)
from gnnprivacy.errors import InvalidParameterError, UnknownNameError
from gnnprivacy.training.graph_classification import (GraphClassifier, accuracy,
                                                      fit_graph_classifier)


def _shared() -> Path:
    env = os.environ.get("GNNPRIVACY_SHARED_DATASETS")
    return Path(env) if env else Path(__file__).resolve().parents[2].parent / "shared" / "datasets"


def _toy(n=120, seed=0):
    """Label = whether the graph's features are shifted up: easy to learn from pooled x."""
    gen = torch.Generator().manual_seed(seed)
    graphs = []
    for i in range(n):
        k = int(torch.randint(4, 10, (1,), generator=gen))
        ring = torch.arange(k)
        ei = torch.stack([torch.cat([ring, (ring + 1) % k]), torch.cat([(ring + 1) % k, ring])])
        y = i % 2
        x = torch.randn(k, 4, generator=gen) + (1.5 if y else -1.5)
        graphs.append(Data(x=x, edge_index=ei, y=torch.tensor([y]),
                           edge_attr=torch.ones(ei.shape[1], 2)))
    return graphs


def test_stratified_split_keeps_class_shares_and_is_seeded():
    labels = np.array([0] * 300 + [1] * 100 + [2] * 50)
    a = stratified_graph_split(labels, seed=0, dataset="x")
    assert a.sizes == {"train": 360, "val": 45, "test": 45}
    for idx, share in ((a.train_idx, 0.8), (a.val_idx, 0.1), (a.test_idx, 0.1)):
        assert np.bincount(labels[idx], minlength=3).tolist() == [round(share * 300),
                                                                   round(share * 100),
                                                                   round(share * 50)]
    again = stratified_graph_split(labels, seed=0, dataset="x")
    other = stratified_graph_split(labels, seed=1, dataset="x")
    assert a.digest == again.digest and a.digest != other.digest
    assert not set(a.train_idx) & set(a.test_idx)


@pytest.mark.parametrize("backbone,edge_dim", [("gin", 0), ("gin", 2), ("gcn", 0), ("gcn", 2)])
def test_classifier_returns_one_row_per_graph(backbone, edge_dim):
    from torch_geometric.data import Batch

    batch = Batch.from_data_list(_toy(5))
    model = GraphClassifier(4, 3, backbone=backbone, edge_dim=edge_dim)
    out = model(batch.x, batch.edge_index, batch.batch, batch.edge_attr)
    assert out.shape == (5, 3)
    gine = any(type(m).__name__ == "GINEConv" for m in model.modules())
    assert gine == (backbone == "gin" and edge_dim > 0)


def test_private_and_nonprivate_fits_learn_and_report_their_cost():
    graphs = _toy()
    train, test = graphs[:96], graphs[96:]
    plain = fit_graph_classifier(train, num_features=4, num_classes=2, epochs=5, batch_size=16)
    assert plain.epsilon == float("inf") and plain.steps == 30
    assert accuracy(plain.model, test) >= 0.9
    private = fit_graph_classifier(train, num_features=4, num_classes=2, epsilon=8.0,
                                   epochs=5, batch_size=16, edge_dim=2)
    assert 0 < private.epsilon <= 8.0 + 1e-9 and private.delta == pytest.approx(1 / 960)
    assert private.privacy["unit"] == "graph" and private.steps == 30
    assert accuracy(private.model, test) >= 0.8
    with pytest.raises(InvalidParameterError, match="epsilon"):
        fit_graph_classifier(train, num_features=4, num_classes=2, epsilon=-1.0)


def test_unknown_graph_dataset_lists_the_names():
    with pytest.raises(UnknownNameError, match="proteins"):
        load_graph_dataset("cora")


def test_the_cli_refuses_a_method_of_the_other_task():
    from gnnprivacy.cli import main

    result = CliRunner().invoke(main, ["train", "--task", "graph", "--method", "gcn"])
    assert result.exit_code != 0 and "the task of method 'gcn'" in result.output
    result = CliRunner().invoke(main, ["train", "--task", "node", "--method", "dpsgd-graph"])
    assert result.exit_code != 0 and "'graph', the task of method 'dpsgd-graph'" in result.output


@pytest.mark.dataset
def test_tu_graph_datasets_load_with_the_manifest_counts(tmp_path):
    root = _shared()
    if not (root / "PROTEINS_full" / "raw").is_dir():
        pytest.skip(f"TU raw files not found under {root} (set GNNPRIVACY_SHARED_DATASETS)")
    assert all(graph_dataset_status(n, root).available
               for n in ("enzymes", "aids", "cox2", "dhfr", "proteins"))
    # two of them parsed (seconds each): AIDS with its edge features, COX2 without
    expected = {"aids": (2000, 42, 3, 2), "cox2": (467, 38, 0, 2)}
    for name, (n, f, e, c) in expected.items():
        gs = load_graph_dataset(name, root=root, cache_dir=tmp_path)
        assert isinstance(gs, GraphSet)
        assert (len(gs.graphs), gs.num_features, gs.edge_dim, gs.num_classes) == (n, f, e, c)
        assert gs.split.sizes["train"] == sum(round(0.8 * k) for k in np.bincount(gs.labels))
        assert all(g.x.abs().max() < 12 for g in gs.graphs)    # log1p-compressed features


@pytest.mark.dataset
def test_train_graph_task_on_the_cli_writes_a_graph_level_record(tmp_path):
    from gnnprivacy.cli import main

    root = _shared()
    if not (root / "COX2" / "raw").is_dir():
        pytest.skip(f"TU raw files not found under {root} (set GNNPRIVACY_SHARED_DATASETS)")
    env = {"GNNPRIVACY_CACHE": str(tmp_path / "cache")}
    result = CliRunner(env=env).invoke(main, [
        "train", "--task", "graph", "--dataset", "cox2", "--method", "dpsgd-graph",
        "--epsilon", "4", "--epochs", "2", "--data-root", str(root), "--runs-dir",
        str(tmp_path / "runs"), "--json", "-q"])
    assert result.exit_code == 0, result.output
    record = json.loads(next((tmp_path / "runs").glob("*dpsgd-graph-cox2*.json")).read_text())
    assert record["config"]["task"] == "graph" and record["epsilon"] <= 4.0
    assert record["privacy"]["unit"] == "graph" and record["privacy"]["relation"] == "add_or_remove"
    assert record["delta"] < 1 / record["info"]["num_train_graphs"]
    assert 0.0 <= record["metrics"]["test_accuracy"] <= 1.0


@pytest.mark.dataset
def test_a_sweep_and_its_report_run_the_graph_task(tmp_path):
    """`gnnprivacy sweep` with ``task: graph`` in its base (issue 33: sweeps and reports for
    the built-in graph task): both methods run, each record is graph-level, `results` and
    `report` read them."""
    import yaml

    from gnnprivacy.cli import main

    root = _shared()
    if not (root / "COX2" / "raw").is_dir():
        pytest.skip(f"TU raw files not found under {root} (set GNNPRIVACY_SHARED_DATASETS)")
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({
        "name": "graph-sweep", "base": {"task": "graph", "dataset": "cox2", "epochs": 1},
        "grid": {"method": ["graph", "dpsgd-graph"], "epsilon": [8]}, "seeds": 1, "seed": 0}))
    runs = tmp_path / "runs"
    runner = CliRunner(env={"GNNPRIVACY_CACHE": str(tmp_path / "cache")})
    result = runner.invoke(main, ["sweep", "-c", str(path), "--runs-dir", str(runs),
                                  "--workers", "1", "--data-root", str(root), "-q"])
    assert result.exit_code == 0, result.output
    records = {json.loads(p.read_text())["method"]: json.loads(p.read_text())
               for p in runs.glob("*.json")}
    assert set(records) == {"graph", "dpsgd-graph"}
    assert records["dpsgd-graph"]["privacy"]["unit"] == "graph"
    assert records["dpsgd-graph"]["epsilon"] <= 8.0
    assert all(r["config"]["task"] == "graph" for r in records.values())
    assert runner.invoke(main, ["results", str(runs)]).exit_code == 0
    report = runner.invoke(main, ["report", str(runs), "-o", str(tmp_path / "rep")])
    assert report.exit_code == 0, report.output
    assert "dpsgd-graph" in (tmp_path / "rep" / "report.md").read_text()


@pytest.mark.dataset
def test_tune_selects_a_dpsgd_graph_setting_within_the_target(tmp_path):
    """`gnnprivacy tune` on the graph task (it refused dpsgd-graph: "base.method must be one
    of dpmlp, dpgnn, heterpoisson"): trials are planned as Poisson sampling over the training
    graphs (the trial's own noise is checked against that plan), scored on the validation
    graphs with sensitivity 1, and the total stays within the target."""
    from gnnprivacy.experiments.tune import plan_spec, tune

    root = _shared()
    if not (root / "COX2" / "raw").is_dir():
        pytest.skip(f"TU raw files not found under {root} (set GNNPRIVACY_SHARED_DATASETS)")
    spec = {"name": "g", "base": {"task": "graph", "method": "dpsgd-graph", "dataset": "cox2",
                                  "epochs": 1, "data_root": str(root)},
            "grid": {"lr": [0.01, 0.03]}, "epsilon": 8.0, "seed": 0, "compare": False,
            "reproducible_selection": True,
            "trials": {"distribution": "negative_binomial", "mean": 1.5, "eta": 1}}
    plan = plan_spec(spec)
    gset = load_graph_dataset("cox2", root=root, seed=0)
    assert plan["num_train"] == gset.split.sizes["train"] and plan["num_val"] == \
        gset.split.sizes["val"]
    assert plan["score_sensitivity"] == 1.0 and plan["delta"] < 1 / plan["num_train"]
    out = tune(spec, runs_dir=tmp_path)
    t = out["tuning"]
    assert out["epsilon"] == t["total_epsilon"] <= 8.0
    assert t["training_epsilon_per_trial"] < t["total_epsilon"]
    assert out["privacy"]["unit"] == "graph"
    assert "val_accuracy_noisy" in out["metrics"] and "val_accuracy" not in out["metrics"]


def test_the_audit_plan_of_dpsgd_graph_is_the_noise_that_training_calibrates():
    """gp.audit's plan for dpsgd-graph (Poisson over training graphs) has the noise
    multiplier, steps and delta that make_private(sampler="graphs") calibrates."""
    import gnnprivacy as gp
    from gnnprivacy.auditing.plans import GraphFacts, plan_for
    from gnnprivacy.method.builtin.graph import PrivateGraphParams

    graphs = _toy(200)
    plan = plan_for("dpsgd-graph", PrivateGraphParams(epsilon=2.0, epochs=10, batch_size=20),
                    GraphFacts(num_nodes=1000, num_train=200, max_out_degree=0,
                               median_degree=0))
    model = GraphClassifier(4, 2)
    pt = gp.make_private(model, torch.optim.Adam(model.parameters()), graphs,
                         sampler="graphs", epsilon=2.0, epochs=10, batch_size=20, seed=0)
    assert plan.facts["steps"] == pt.steps_planned == 100
    assert plan.facts["calibrated_noise_multiplier"] == pytest.approx(pt.noise_multiplier)
    assert plan.delta == pytest.approx(pt.delta)
