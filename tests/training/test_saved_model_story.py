"""One saved-model story (issue 45 items 1 and 6): `gnnprivacy.load` and ``gnnprivacy predict``
read every model file the library writes (a built-in node method's, the graph task's, a
``gp.save_model`` file of a node or a graph model), each result has ``predict``; writing a
model never replaces a run's files without ``force``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

import gnnprivacy as gp
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.training.user_model import SavedModel

MODULE = '''
import torch
from torch_geometric.nn import GCNConv


class Net(torch.nn.Module):
    def __init__(self, in_channels, classes):
        super().__init__()
        self.conv = GCNConv(in_channels, classes)

    def forward(self, x, edge_index):
        return self.conv(x, edge_index)
'''


def _shared() -> Path:
    """The shared datasets' root with COX2 (`test_graph_inputs._shared`), else a skip."""
    from tests.training.test_graph_inputs import _shared as shared

    return shared()


@pytest.fixture
def graph_run(tmp_path, monkeypatch):
    monkeypatch.setenv("GNNPRIVACY_CACHE", str(tmp_path / "cache"))
    return gp.train("cox2", method="dpsgd-graph", task="graph", epochs=1, hidden=8,
                    data_root=str(_shared()), runs_dir=str(tmp_path / "runs"))


def test_a_graph_task_predicts_saves_and_loads_back(graph_run, tmp_path):
    logits = graph_run.predict()                          # was: AttributeError
    assert graph_run.task == "graph" and logits.shape == (467, 2)
    test = graph_run.data.subset("test")
    assert torch.allclose(graph_run.predict(test), logits[graph_run.data.split.test_idx],
                          atol=1e-5)
    assert graph_run.predict(test, [0, 3]).shape == (2, 2)
    for path in (tmp_path / "g.model.pt", next((tmp_path / "runs").glob("*.model.pt"))):
        if not path.exists():
            graph_run.save(str(path))
        back = gp.load(str(path))                            # was: refused
        assert back.task == "graph" and back.epsilon == graph_run.epsilon
        assert back.record.run_id == graph_run.record.run_id
        assert torch.allclose(back.predict(test), graph_run.predict(test))
    with pytest.raises(InvalidParameterError, match="the graphs to predict on"):
        back.predict()


def test_the_cli_predicts_with_the_graph_tasks_model(graph_run, tmp_path):
    from gnnprivacy.cli import main

    model = next((tmp_path / "runs").glob("*.model.pt"))
    out = CliRunner(env={"GNNPRIVACY_CACHE": str(tmp_path / "cache")}).invoke(
        main, ["predict", str(model), "--data-root", str(_shared())])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[0] == "graph,prediction,logit_0,logit_1" and len(lines) == 1 + 467


def test_a_save_model_file_loads_and_predicts_everywhere(tmp_path, monkeypatch):
    """A user model in the user's own module, saved with gp.save_model: gp.load, load_model and
    the CLI (predict, assess) read it; --import finds the module in the current folder."""
    from gnnprivacy.cli import main

    (tmp_path / "mymodels_i45.py").write_text(MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    import mymodels_i45

    data = gp.load_dataset("csbm", num_nodes=200)
    torch.manual_seed(0)
    net = mymodels_i45.Net(data.num_features, int(data.y.max()) + 1)
    path = gp.save_model(net, tmp_path / "net.pt", dataset={"name": "csbm", "num_nodes": 200},
                         init={"in_channels": data.num_features,
                               "classes": int(data.y.max()) + 1})
    for loaded in (gp.load(str(path)), gp.load_model(path, imports="mymodels_i45")):
        assert isinstance(loaded, SavedModel) and loaded.level == "node"
        with torch.no_grad():
            assert torch.allclose(loaded.predict(data), net(data.x, data.edge_index))
        assert loaded.predict(data, [1, 2]).shape == (2, net.conv.out_channels)
    del sys.modules["mymodels_i45"]
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in (str(tmp_path), "")])
    runner = CliRunner()
    out = runner.invoke(main, ["predict", "net.pt", "--import", "mymodels_i45"])
    assert out.exit_code == 0, out.output
    assert out.output.splitlines()[0].startswith("node,prediction,logit_0")
    assert len(out.output.splitlines()) == 201
    card = runner.invoke(main, ["assess", "net.pt", "--import", "mymodels_i45", "-q",
                                "--no-link-stealing"])          # was: needed PYTHONPATH=.
    assert card.exit_code == 0 and "In plain words" in card.output, card.output


def test_saving_never_replaces_a_runs_files_without_force(graph_run, tmp_path):
    run_model = next((tmp_path / "runs").glob("*.model.pt"))
    record = next((tmp_path / "runs").glob("*.json"))
    before = run_model.read_bytes(), record.read_bytes()
    init = graph_run.model.init_args
    for target in (run_model, record):
        with pytest.raises(InvalidParameterError, match="force=True"):
            gp.save_model(graph_run.model, target, init=init)
    assert (run_model.read_bytes(), record.read_bytes()) == before
    mine = tmp_path / "mine.pt"
    gp.save_model(graph_run.model, mine, init=init)
    gp.save_model(graph_run.model, mine, init=init)       # the user's own save: replaced
    gp.save_model(graph_run.model, run_model, init=init, force=True)
    assert gp.load(str(run_model)).model is not None


def test_control_without_the_check_save_model_replaces_a_runs_model(graph_run, tmp_path,
                                                                  monkeypatch):
    monkeypatch.setattr("gnnprivacy.training.user_model._check_target",
                        lambda path, force: None)
    run_model = next((tmp_path / "runs").glob("*.model.pt"))
    before = run_model.read_bytes()
    gp.save_model(graph_run.model, run_model, init=graph_run.model.init_args)
    assert run_model.read_bytes() != before


@pytest.mark.parametrize("imports, fragment", [
    ("m", r"m \(ModuleNotFoundError"), (123, "a module name or a list"),
    (["os", "not a name"], "'not a name'")])
def test_load_model_imports_takes_a_name_or_names(tmp_path, imports, fragment):
    path = gp.save_model(torch.nn.Linear(2, 2), tmp_path / "lin.pt",
                         init={"in_features": 2, "out_features": 2})
    with pytest.raises(InvalidParameterError, match=fragment):
        gp.load_model(path, imports=imports)


def test_a_built_in_model_file_is_read_by_load_and_named_by_load_model(tmp_path):
    result = gp.train("csbm", method="gcn", epochs=1, dataset_args="num_nodes=120")
    path = result.save(str(tmp_path / "gcn.model.pt"))
    assert torch.allclose(gp.load(str(path)).predict(result.data), result.predict())
    with pytest.raises(InvalidParameterError, match="read it with gnnprivacy.load"):
        gp.load_model(path)


def test_control_without_the_current_folder_assess_import_fails(tmp_path, monkeypatch):
    """Control: the console script does not put the current folder on sys.path, so without
    importable_from_cwd ``--import`` fails (the issue's error, 'No module named')."""
    from gnnprivacy.cli import assess_cmd, main

    (tmp_path / "mymodels_i45b.py").write_text(MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    import mymodels_i45b

    net = mymodels_i45b.Net(4, 2)
    gp.save_model(net, tmp_path / "net.pt", init={"in_channels": 4, "classes": 2},
                  dataset={"name": "csbm"})
    del sys.modules["mymodels_i45b"]
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in (str(tmp_path), "")])
    monkeypatch.setattr(assess_cmd, "importable_from_cwd", tuple)
    out = CliRunner().invoke(main, ["assess", "net.pt", "--import", "mymodels_i45b", "-q"])
    assert out.exit_code != 0 and "No module named 'mymodels_i45b'" in out.output, out.output
