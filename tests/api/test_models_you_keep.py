"""Models you keep: save/load bit-identical, one predict shape, `gnnprivacy predict`, assess
on the saved model (no retraining)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

import gnnprivacy as gp

SMALL = {"dataset_args": "num_nodes=300"}
FAST = {"gap": {"encoder_epochs": 2, "epochs": 2, "max_degree": 5}}


def _cora_root():
    root = os.environ.get("GNNPRIVACY_SHARED_DATASETS",
                          str(Path(__file__).resolve().parents[3] / "shared" / "datasets"))
    if not (Path(root) / "Cora" / "raw").is_dir():
        pytest.skip(f"Cora raw files not found under {root}")
    return root


@pytest.fixture(scope="module")
def results():
    out = {}
    for m in ("gcn", "heterpoisson", "dpgnn", "dpmlp", "gap"):
        with _nullwarn():
            out[m] = gp.train("csbm", method=m, seed=0, **SMALL, **FAST.get(m, {}))
    return out


class _nullwarn:
    def __enter__(self):
        import warnings
        self._c = warnings.catch_warnings()
        self._c.__enter__()
        warnings.simplefilter("ignore")

    def __exit__(self, *a):
        return self._c.__exit__(*a)


@pytest.mark.parametrize("method", ["gcn", "heterpoisson", "dpgnn", "dpmlp", "gap"])
def test_predict_shape_and_save_load_bit_identical(method, results, tmp_path):
    r = results[method]
    logits = r.predict()
    assert logits.shape == (300, 4)
    rows = torch.tensor([3, 1, 7])
    assert torch.allclose(r.predict(nodes=rows), logits[rows], rtol=1e-5, atol=1e-6)
    path = r.save(tmp_path / "m.pt")
    blob = torch.load(path, weights_only=True)          # weights + JSON, no pickled code
    assert blob["format"] == "gnnprivacy-model/1" and isinstance(blob["params"], str)
    loaded = gp.load(path)
    assert loaded.record.run_id == r.record.run_id and loaded.epsilon == r.epsilon
    assert torch.equal(loaded.predict(r.data), logits)


def test_loaded_model_needs_a_graph_and_bad_files_are_refused(results, tmp_path):
    from gnnprivacy.errors import InvalidParameterError

    loaded = gp.load(results["dpmlp"].save(tmp_path / "m.pt"))
    with pytest.raises(InvalidParameterError, match="graph to predict on"):
        loaded.predict()
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a model")
    with pytest.raises(InvalidParameterError, match="saved model"):
        gp.load(bad)
    torch.save({"x": torch.zeros(1)}, tmp_path / "other.pt")
    with pytest.raises(InvalidParameterError, match="format"):
        gp.load(tmp_path / "other.pt")


@pytest.mark.dataset
def test_rgnn_predict_has_the_same_shape_and_round_trips(tmp_path):
    root = _cora_root()
    with _nullwarn():
        r = gp.train("cora", method="rgnn", seed=0, data_root=root)
    logits = r.predict()
    assert logits.shape == (2708, 7)
    loaded = gp.load(r.save(tmp_path / "rgnn.pt"))
    assert torch.equal(loaded.predict(), logits)


def test_train_keeps_the_model_and_predict_cli_reads_it(tmp_path):
    from gnnprivacy.cli import main

    runs = tmp_path / "runs"
    res = CliRunner().invoke(main, ["train", "--method", "heterpoisson", "--dataset", "csbm",
                                    "--dataset-args", "num_nodes=300", "--runs-dir", str(runs),
                                    "-q"])
    assert res.exit_code == 0, res.output
    models = list(runs.glob("*.model.pt"))
    assert len(models) == 1 and "model:" in res.output
    out = tmp_path / "pred.csv"
    res = CliRunner().invoke(main, ["predict", str(models[0]), "-o", str(out)])
    assert res.exit_code == 0, res.output
    lines = out.read_text().splitlines()
    assert lines[0].startswith("node,prediction,logit_0") and len(lines) == 301
    loaded = gp.load(models[0])
    from gnnprivacy.cli.predict_cmd import load_prediction_graph

    ref = loaded.predict(load_prediction_graph(loaded.record, None, None))
    row = [float(v) for v in lines[8].split(",")[2:]]
    assert row == pytest.approx(ref[7].tolist(), rel=1e-5)
    nodes = tmp_path / "nodes.txt"
    nodes.write_text("node\n4\n500\n")
    res = CliRunner().invoke(main, ["predict", str(models[0]), "--nodes", str(nodes)])
    assert res.exit_code != 0 and "outside [0, 300)" in res.output


def test_save_model_path_option(tmp_path):
    from gnnprivacy.cli import main

    target = tmp_path / "keep" / "mine.pt"
    res = CliRunner().invoke(main, ["train", "--method", "dpmlp", "--dataset", "csbm",
                                    "--dataset-args", "num_nodes=300", "--runs-dir",
                                    str(tmp_path / "runs"), "--save-model", str(target), "-q"])
    assert res.exit_code == 0, res.output
    assert target.is_file() and gp.load(target).record.method == "dpmlp"


def test_assess_uses_the_saved_model_instead_of_retraining(tmp_path, monkeypatch):
    from gnnprivacy.auditing import report_card as rc

    r = gp.train("csbm", method="gcn", seed=0, runs_dir=str(tmp_path), **SMALL)
    record_path = tmp_path / f"{r.record.run_id}.json"

    def no_retraining(*a, **k):
        raise AssertionError("assess retrained the model")

    monkeypatch.setattr(rc, "retrain_from_record", no_retraining)
    card = rc.report_card(record_path, baseline=False, audit_runs=100)
    assert "saved model" in card["link_stealing"]["model"]
    card2 = rc.report_card(tmp_path / f"{r.record.run_id}.model.pt", baseline=False,
                           audit_runs=100)
    assert card2["link_stealing"]["auc"] == card["link_stealing"]["auc"]


def _other_split(data, seed: int):
    """``data`` with another random split of the same nodes (what a fresh load may give)."""
    import copy

    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(int(data.num_nodes), generator=g)
    n_train = int(data.train_mask.sum())
    other = copy.copy(data)
    other.train_mask = torch.zeros_like(data.train_mask)
    other.train_mask[perm[:n_train]] = True
    other.val_mask = torch.zeros_like(data.train_mask)
    other.test_mask = ~other.train_mask
    return other


def test_a_loaded_heterpoisson_model_keeps_its_runs_training_set(results, tmp_path):
    """Issue 38 item 4: the passed graph's train_mask is not the private set; the run's is."""
    r = results["heterpoisson"]
    loaded = gp.load(r.save(tmp_path / "m.pt"))
    run_train = r.data.train_mask
    assert torch.equal(loaded.model.train_mask_, run_train)   # the file keeps the run's set
    other = _other_split(r.data, seed=1)
    assert not torch.equal(other.train_mask, run_train)
    expected = loaded.predict(r.data)
    with pytest.warns(UserWarning, match=r"differs from the run's training set .*excludes the "
                                         r"run's \d+ training nodes"):
        got = loaded.predict(other)
    assert torch.equal(got, expected)      # as `gnnprivacy predict` (the run's split) gives
    # no training node of the run is aggregated: a query's logits do not move when the
    # features of every run training node (other than the query itself) change
    query = (~run_train).nonzero().flatten()[:20]
    moved = _other_split(r.data, seed=1)
    moved.x = r.data.x.clone()
    moved.x[run_train] += 100.0
    with pytest.warns(UserWarning):
        assert torch.allclose(loaded.predict(moved, nodes=query), expected[query])
    # control: with the graph's own split (the old behaviour) the predictions do move
    loaded.model.train_mask_ = other.train_mask
    assert not torch.equal(loaded.predict(other), expected)


def test_a_heterpoisson_model_saved_without_its_training_set_still_loads(results, tmp_path):
    r = results["heterpoisson"]
    path = r.save(tmp_path / "m.pt")
    blob = torch.load(path, weights_only=True)
    del blob["tensors"]["train_mask_"]          # a file of the earlier format
    torch.save(blob, path)
    loaded = gp.load(path)
    assert not hasattr(loaded.model, "train_mask_")
    assert torch.equal(loaded.predict(r.data), r.predict())
