"""End-to-end tests of ``gnnprivacy train`` on the embedded CSBM graph (and Cora when present)."""

import json
import math
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from gnnprivacy import __version__
from gnnprivacy.cli import main

SMALL = ["--dataset", "csbm", "--dataset-args", "num_nodes=300,feature_signal=0.5", "--epochs", "30"]


def _invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_version():
    result = _invoke("--version")
    assert result.exit_code == 0 and __version__ in result.output


def test_train_json_writes_a_record(tmp_path):
    result = _invoke("train", "--method", "gcn", *SMALL, "--runs-dir", tmp_path, "--json", "--quiet")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    for key in ("method", "dataset", "epsilon", "delta", "test_accuracy", "seconds"):
        assert key in out
    assert out["epsilon"] == "inf" and out["delta"] is None
    assert 0.0 <= out["test_accuracy"] <= 1.0
    record = json.loads((tmp_path / f"{out['run_id']}.json").read_text())
    assert record["config"]["epochs"] == 30 and record["config"]["method"] == "gcn"
    assert record["privacy"]["ledger"] == [{"event": "NonPrivateDpEvent", "count": 1}]
    assert record["versions"]["torch"].startswith("2.13")
    assert (tmp_path / f"{out['run_id']}.split.npz").exists()


def test_yaml_config_and_print_config(tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("method: mlp\ndataset: csbm\nhidden: 17\nepochs: 5\n")
    result = _invoke("train", "-c", cfg, "--epochs", "7", "--print-config")
    assert result.exit_code == 0, result.output
    assert "method: mlp" in result.output and "hidden: 17" in result.output
    assert "epochs: 7" in result.output  # the command line overrides the file


@pytest.mark.parametrize("args, fragment", [
    (["--dataset", "no-such-graph"], "cora"),                       # lists the choices
    (["--train-frac", "0.9", "--test-frac", "0.5"], "summing to <= 1"),
    (["--data-root", "/no/such/dir"], "data_root"),
    (["--method", "nope"], "gcn"),
])
def test_bad_input_is_a_clear_usage_error(args, fragment, tmp_path):
    result = CliRunner().invoke(main, ["train", *args, "--runs-dir", str(tmp_path)])
    assert result.exit_code != 0
    assert fragment in result.output
    assert "Traceback" not in result.output


def test_option_of_another_method_is_rejected(tmp_path):
    result = CliRunner().invoke(main, ["train", "--method", "gcn", "--epsilon", "1", "--runs-dir", str(tmp_path)])
    assert result.exit_code != 0 and "epsilon" in result.output


def test_missing_raw_files_are_named(tmp_path):
    (tmp_path / "root").mkdir()
    result = CliRunner().invoke(main, ["train", "--dataset", "cora", "--data-root", str(tmp_path / "root"),
                                       "--runs-dir", str(tmp_path / "runs")],
                                env={"GNNPRIVACY_CACHE": str(tmp_path / "cache")})
    assert result.exit_code != 0
    assert "ind.cora" in result.output


def _shared_datasets():
    env = os.environ.get("GNNPRIVACY_SHARED_DATASETS")
    path = Path(env) if env else Path(__file__).resolve().parents[2] / ".." / "shared" / "datasets"
    return path if (path / "Cora" / "raw").is_dir() else None


@pytest.mark.dataset
def test_gcn_beats_mlp_on_cora_public_split(tmp_path):
    root = _shared_datasets()
    if root is None:
        pytest.skip("../shared/datasets (or $GNNPRIVACY_SHARED_DATASETS) not present")
    env = {"GNNPRIVACY_CACHE": str(tmp_path / "cache")}
    accs = {}
    for method in ("gcn", "mlp"):
        result = CliRunner().invoke(main, ["train", "--method", method, "--dataset", "cora", "--data-root",
                                           str(root), "--runs-dir", str(tmp_path), "--json", "--quiet"], env=env)
        assert result.exit_code == 0, result.output
        accs[method] = json.loads(result.stdout)["test_accuracy"]
    assert accs["gcn"] >= 0.80
    assert accs["mlp"] < accs["gcn"] - 0.1
    assert not math.isnan(accs["mlp"])
