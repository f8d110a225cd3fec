"""The public Python API (``import gnnprivacy as gp``): same code path as the CLI, user data in."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import gnnprivacy as gp
from gnnprivacy.errors import InvalidParameterError, UnknownNameError

REPO = Path(__file__).resolve().parents[2]
METHODS = ("heterpoisson", "dpgnn", "dpmlp", "rgnn", "gcn")
#: small budgets of work so five methods train in seconds (defaults otherwise)
FAST = {"heterpoisson": {"epochs": 3}, "dpgnn": {"epochs": 5}, "dpmlp": {},
        "rgnn": {"epochs": 30}, "gcn": {"epochs": 30}}


def hand_built(n: int = 240, d: int = 16, classes: int = 3, seed: int = 0):
    from torch_geometric.data import Data

    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, classes, (n,), generator=g)
    # binary features (RGNN's GRR-FS reports 0/1 features), informative about the class
    x = ((torch.randn(n, d, generator=g) + 2.0 * torch.nn.functional.one_hot(y, d).float()) > 1.0).float()
    src = torch.randint(0, n, (4 * n,), generator=g)
    same = y[src]
    dst = torch.stack([torch.nonzero(y == c).view(-1)[torch.randint(0, int((y == c).sum()), (1,),
                                                                      generator=g)] for c in same.tolist()]).view(-1)
    return Data(x=x, y=y, edge_index=torch.stack([src, dst]))


@pytest.mark.parametrize("method", METHODS)
def test_train_on_hand_built_data(method):
    data = hand_built()
    before = {k: v.clone() for k, v in data.items()}
    result = gp.train(data, method=method, seed=1, train_frac=0.6, val_frac=0.2, test_frac=0.2,
                      **FAST[method])
    rec = result.record
    assert rec.method == method and rec.dataset == "custom"
    assert result.metrics["test_accuracy"] == rec.metrics["test_accuracy"]
    assert 0.0 <= result.metrics["test_accuracy"] <= 1.0
    if method == "gcn":
        assert result.epsilon == float("inf") and result.delta is None
    else:
        # node-level DP: the target (8); RGNN: the sound per-user budget m * eps_x + eps_y
        assert 0 < result.epsilon <= (11.0 if method == "rgnn" else 8.0)
        assert result.privacy["private"] is True
    logits = result.predict()
    assert logits.dim() == 2 and logits.shape[1] == 3
    # the user's object is untouched (no masks added, no symmetrisation in place)
    assert set(data.keys()) == set(before)
    for k, v in before.items():
        assert torch.equal(data[k], v)


def test_record_equals_the_cli_record(tmp_path):
    """Same options, same seed: the API and the CLI write the same metrics and epsilon."""
    args = {"method": "dpmlp", "epsilon": 4.0, "dataset_args": "num_nodes=300", "seed": 3}
    api = gp.train("csbm", runs_dir=str(tmp_path / "api"), **args)
    out = subprocess.run(
        [sys.executable, "-m", "gnnprivacy.cli", "train", "--method", "dpmlp", "--epsilon", "4",
         "--dataset-args", "num_nodes=300", "--seed", "3", "--runs-dir", str(tmp_path / "cli"),
         "--json", "-q"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    cli = json.loads(out.stdout)
    assert cli["epsilon"] == pytest.approx(api.epsilon, rel=1e-12)
    assert cli["metrics"] == pytest.approx(api.metrics)
    saved = gp.read_record(tmp_path / "api" / f"{api.record.run_id}.json")
    assert saved.config == api.record.config


def test_masks_are_used_and_split_recorded():
    data = hand_built()
    n = data.num_nodes
    data.train_mask = torch.zeros(n, dtype=torch.bool)
    data.train_mask[:120] = True
    data.test_mask = torch.zeros(n, dtype=torch.bool)
    data.test_mask[150:] = True
    result = gp.train(data, method="gcn", epochs=5)
    assert result.record.split["sizes"] == {"train": 120, "val": 0, "test": n - 150}


@pytest.mark.parametrize("mutate, needle", [
    (lambda d: d.x.__setitem__((0, 0), float("nan")), "1 NaN"),
    (lambda d: setattr(d, "y", torch.zeros_like(d.y)), "class"),
    (lambda d: setattr(d, "edge_index", d.edge_index.float()), "edge_index"),
    (lambda d: setattr(d, "train_mask", torch.ones(d.num_nodes)), "train_mask"),
])
def test_bad_data_is_refused_with_a_clear_error(mutate, needle):
    data = hand_built()
    if needle == "train_mask":
        data.test_mask = torch.zeros(data.num_nodes, dtype=torch.bool)
    mutate(data)
    with pytest.raises(InvalidParameterError, match=needle):
        gp.train(data, method="dpmlp")


def test_unknown_method_and_option_list_the_choices():
    with pytest.raises(UnknownNameError, match="heterpoisson"):
        gp.train(hand_built(), method="heterpoison")
    with pytest.raises(UnknownNameError, match="epochs"):
        gp.train(hand_built(), method="gcn", epoch=3)
    with pytest.raises(InvalidParameterError, match="data"):
        gp.train([1, 2, 3], method="gcn")


def test_methods_and_account():
    names = {m.name: m for m in gp.methods()}
    assert {"heterpoisson", "dpgnn", "dpmlp", "rgnn", "gcn"} <= set(names)
    assert names["heterpoisson"].private and not names["gcn"].private
    assert "epsilon" in {p.name for p in names["heterpoisson"].parameters}
    r = gp.account("dpsgd", sample_rate=0.01, noise_multiplier=1.1, steps=1000, delta=1e-5)
    assert r["epsilon"] == pytest.approx(1.51619, rel=1e-4)
    assert r["unit"] == "node" and r["relation"] == "add_or_remove"
    cal = gp.account("dpsgd", sample_rate=0.01, target_epsilon=2.0, steps=1000, delta=1e-5)
    assert cal["epsilon"] <= 2.0
    with pytest.raises(InvalidParameterError, match="sample_rate"):
        gp.account("dpsgd", noise_multiplier=1.0)


def test_train_docstring_and_light_import():
    assert "Example" in gp.train.__doc__ and "Data" in gp.train.__doc__
    code = "import sys, gnnprivacy; assert 'torch' not in sys.modules; print(gnnprivacy.__version__)"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.dataset
def test_train_on_planetoid_cora_loaded_by_user_code(tmp_path):
    """A user loads Cora with PyG's own class and hands the Data to gnnprivacy."""
    from torch_geometric.datasets import Planetoid

    shared = Path(os.environ.get("GNNPRIVACY_SHARED_DATASETS", REPO.parent / "shared" / "datasets"))
    if not (shared / "Cora" / "raw").is_dir():
        pytest.skip(f"Cora raw files not found under {shared}")
    shutil.copytree(shared / "Cora" / "raw", tmp_path / "Cora" / "raw")
    data = Planetoid(str(tmp_path), "Cora")[0]
    accs = {}
    for method in METHODS:
        result = gp.train(data, method=method, **FAST[method])
        assert result.record.split["sizes"]["train"] == 140
        accs[method] = result.metrics["test_accuracy"]
        if method not in ("gcn", "rgnn"):
            assert result.epsilon <= 8.0
    assert accs["gcn"] > 0.7, accs


def test_every_capability_of_the_cli_has_a_top_level_function():
    """train/account/audit/assess/tune/attack: the CLI's code path, reachable as gp.NAME."""
    import inspect

    from gnnprivacy.api import assess
    from gnnprivacy.attacks.link_stealing.method import run_link_stealing
    from gnnprivacy.auditing.api import audit
    from gnnprivacy.experiments.tune import tune

    assert gp.audit is audit and gp.assess is assess and gp.tune is tune
    assert gp.attack_link_stealing is run_link_stealing
    from gnnprivacy.experiments.linkteller_run import run_linkteller

    assert gp.attack_linkteller is run_linkteller
    for name in ("train", "account", "audit", "assess", "tune", "attack_link_stealing",
                 "attack_linkteller"):
        assert inspect.getdoc(getattr(gp, name)), name
    with pytest.raises(AttributeError, match="no attribute"):
        gp.not_a_function  # noqa: B018


def test_a_split_under_500_training_nodes_warns_in_output_and_record():
    # issue 25: Cora's public split (140 training nodes) halves heterpoisson's accuracy
    from gnnprivacy.errors import SmallSplitWarning

    lines = []
    with pytest.warns(SmallSplitWarning, match="150 training nodes"):
        small = gp.train("csbm", method="dpmlp", epsilon=4.0, dataset_args="num_nodes=300",
                         log=lines.append)
    assert any(line.startswith("warning: the split leaves 150 training nodes") for line in lines)
    assert small.record.warnings and "fewer than 500" in small.record.warnings[0]
    assert small.record.summary()["warnings"] == small.record.warnings
    # control: 600 training nodes, no warning
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", SmallSplitWarning)
        large = gp.train("csbm", method="gcn", epochs=2, dataset_args="num_nodes=1200")
    assert large.record.warnings == [] and "warnings" not in large.record.summary()


def test_gp_datasets_stays_callable_once_the_subpackage_is_imported(tmp_path):
    """Importing gnnprivacy.datasets rebinds the package attribute `datasets` to the module;
    `gp.datasets()` must still list the datasets (it failed with 'module' object is not callable)."""
    import subprocess
    import sys

    code = ("import gnnprivacy as gp\n"
            "first = gp.datasets()\n"
            "import gnnprivacy.datasets\n"
            "second = gp.datasets()\n"
            "assert first == second and {'name', 'available'} <= set(first[0])\n"
            "assert gnnprivacy.datasets.load_dataset is not None\n"
            "print(len(second))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) >= 10
