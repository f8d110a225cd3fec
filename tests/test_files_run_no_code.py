"""No file the library reads runs code (issue 32 part 4, issue 35 class 2).

A pickle payload (an object whose ``__reduce__`` opens a marker file for writing) is planted in
every kind of file gnnprivacy reads: a training checkpoint (``train --resume`` and the trainers'
``resume=True``), a saved model (``gp.load``, ``gnnprivacy predict``), a run record and the
runs directory's index cache (``gnnprivacy results``), a split file, the accounting disk cache,
the dataset listing's memo, Planetoid's raw ``ind.*`` files (``gnnprivacy datasets`` and the
loader) and PyG's processed cache. Each test asserts that the marker is never created and that
what the user sees is one clear line (or, for a cache, a warning and a rebuild), not a message
that blames something else (the fingerprint).

Broken control: `test_the_payload_runs_when_unpickled` shows that the payload does run under
``pickle.load`` / ``torch.load(weights_only=False)``, so a test here that finds no marker has
read the file in a way that refuses code.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

import gnnprivacy as gp
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.cli import main

SMALL = "num_nodes=200"
REPO = Path(__file__).resolve().parents[1]


class Payload:
    """Unpickling this creates ``marker`` (``open(marker, "w")``)."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture
def marker(tmp_path):
    path = tmp_path / "PAYLOAD-RAN"
    yield path
    assert not path.exists(), "the planted payload ran"


def torch_payload(path: Path, marker: Path, **fields) -> Path:
    torch.save({**fields, "payload": Payload(marker)}, path)
    return path


def pickle_payload(marker: Path, protocol: int = 2) -> bytes:
    return pickle.dumps({"x": Payload(marker)}, protocol=protocol)


def cli(*args):
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=True)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def one_error_line(text: str) -> str:
    assert "Traceback" not in text, text
    errors = [ln for ln in text.splitlines() if ln.startswith("Error:")]
    assert len(errors) == 1, text
    return errors[0]


def test_the_payload_runs_when_unpickled(tmp_path):
    """Broken control: the payload is live (what ``weights_only=False`` or ``pickle.load`` did)."""
    marker = tmp_path / "ran"
    pickle.loads(pickle_payload(marker))
    assert marker.exists()
    marker.unlink()
    torch.load(torch_payload(tmp_path / "c.pt", marker, version=1), weights_only=False)
    assert marker.exists()


# -- checkpoints ------------------------------------------------------------------------------

def test_train_resume_refuses_a_checkpoint_with_a_payload(tmp_path, marker):
    from gnnprivacy.method.config import resolve_config
    from gnnprivacy.method.runner import checkpoint_path_for

    runs = tmp_path / "runs"
    args = ["train", "--method", "dpmlp", "--dataset", "csbm", "--dataset-args", SMALL,
            "--steps", "2", "-q", "--runs-dir", runs, "--resume"]
    config, params = resolve_config({"method": "dpmlp", "dataset": "csbm",
                                     "dataset_args": SMALL, "steps": 2, "runs_dir": str(runs)})
    ckpt = checkpoint_path_for(config, params)
    ckpt.parent.mkdir(parents=True)
    torch_payload(ckpt, marker, version=1, fingerprint="whatever")
    code, text = cli(*args)
    line = one_error_line(text)
    assert code != 0 and "checkpoint" in line and "open" in line and "nothing in it ran" in line
    assert "fingerprint" not in line


def test_trainer_resume_refuses_a_checkpoint_with_a_payload(tmp_path, marker):
    from gnnprivacy.datasets import load_dataset
    from gnnprivacy.training.node_dp import DPMLPTrainer

    ckpt = torch_payload(tmp_path / "ckpt.pt", marker, version=1)
    trainer = DPMLPTrainer(batch_size=32, steps=2, noise_multiplier=1.0, generator=0,
                           checkpoint_path=ckpt, resume=True)
    with pytest.raises(InvalidParameterError, match="names the Python object") as info:
        trainer.fit(load_dataset("csbm", num_nodes=200, seed=0))
    assert "\n" not in str(info.value) and "fingerprint" not in str(info.value)


def test_make_private_state_round_trips_weights_only(tmp_path):
    """``pt.state_dict()`` holds tensors and plain values: it reads back with
    ``torch.load(weights_only=True)``, the way docs/own-model.md says to resume."""
    from torch import nn
    from torch_geometric.nn import GCNConv

    from gnnprivacy.datasets import load_dataset
    from gnnprivacy.training.private import make_private

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = GCNConv(32, 4)

        def forward(self, x, edge_index):
            return self.conv(x, edge_index)

    data = load_dataset("csbm", num_nodes=200, seed=0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pt = make_private(model, opt, data, sampler="nodes", epsilon=4.0, steps=2, seed=0)
    torch.save(pt.state_dict(), tmp_path / "state.pt")
    state = torch.load(tmp_path / "state.pt", weights_only=True)
    pt.load_state_dict(state)


# -- saved models ---------------------------------------------------------------------------

def test_a_saved_model_with_a_payload_is_refused(tmp_path, marker):
    path = torch_payload(tmp_path / "m.model.pt", marker, format="gnnprivacy-model/1")
    with pytest.raises(InvalidParameterError, match="names the Python object") as info:
        gp.load(path)
    assert "\n" not in str(info.value)
    code, text = cli("predict", path)
    assert code != 0 and "nothing in it ran" in one_error_line(text)


def test_a_plain_pickle_posing_as_a_model_is_refused(tmp_path, marker):
    """Not torch's zip format: a bare pickle; the message still names what it would call."""
    path = tmp_path / "bare.model.pt"
    path.write_bytes(pickle_payload(marker, protocol=4))
    with pytest.raises(InvalidParameterError, match="names the Python object .*open"):
        gp.load(path)


# -- records, the index cache, splits ---------------------------------------------------------

def test_records_index_and_split_files_with_a_payload(tmp_path, marker):
    from gnnprivacy.datasets.splits import Split
    from gnnprivacy.errors import CorruptDatasetError
    from gnnprivacy.records.record import read_record

    runs = tmp_path / "runs"
    code, text = cli("train", "--method", "gcn", "--dataset", "csbm", "--dataset-args", SMALL,
                     "--epochs", "2", "-q", "--runs-dir", runs)
    assert code == 0, text
    (record,) = runs.glob("*.json")
    (split,) = runs.glob("*.split.npz")
    record.write_bytes(pickle_payload(marker))
    (runs / ".index.json").write_bytes(pickle_payload(marker))
    buffer = io.BytesIO()
    np.savez(buffer, meta=np.array([Payload(marker)], dtype=object))
    split.write_bytes(buffer.getvalue())
    with pytest.raises(InvalidParameterError, match="run record"):
        read_record(record)
    with pytest.raises(CorruptDatasetError, match="cannot be read"):
        Split.load(split)
    code, text = cli("results", "--runs-dir", runs)
    assert "Traceback" not in text


# -- caches ------------------------------------------------------------------------------------

def test_accounting_cache_entries_with_a_payload_are_ignored(tmp_path, marker, monkeypatch):
    from gnnprivacy.accounting import disk_cache

    monkeypatch.setenv(disk_cache.ENV, str(tmp_path / "acc"))
    disk_cache.save_arrays("k", a=np.zeros(3))
    disk_cache.save_json("j", {"a": 1})
    (path,) = (tmp_path / "acc").rglob("k.npz")
    buffer = io.BytesIO()
    np.savez(buffer, a=np.array([Payload(marker)], dtype=object))
    path.write_bytes(buffer.getvalue())
    (jpath,) = (tmp_path / "acc").rglob("j.json")
    jpath.write_bytes(pickle_payload(marker))
    with pytest.warns(RuntimeWarning, match="accounting cache entry"):
        assert disk_cache.load_arrays("k") is None
    assert disk_cache.load_json("j") is None


def _cora_copy(tmp_path) -> Path:
    shared = Path(os.environ.get("GNNPRIVACY_SHARED_DATASETS", REPO.parent / "shared" / "datasets"))
    if not (shared / "Cora" / "raw").is_dir():
        pytest.skip(f"Cora raw files not found under {shared}")
    root = tmp_path / "root"
    shutil.copytree(shared / "Cora" / "raw", root / "Cora" / "raw")
    return root


def test_dataset_listing_never_unpickles_planetoid_files(tmp_path, marker, monkeypatch):
    """``gnnprivacy datasets`` parses ``ind.*`` files for what they name; a payload is
    reported as such (the old check ran ``pickle.load``). The listing's memo (JSON) with a
    payload is ignored."""
    monkeypatch.setenv("GNNPRIVACY_CACHE", str(tmp_path / "cache"))
    root = _cora_copy(tmp_path)
    (root / "Cora" / "raw" / "ind.cora.x").write_bytes(pickle_payload(marker))
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "raw-checks.json").write_bytes(pickle_payload(marker))
    from gnnprivacy.datasets.status import dataset_status

    st = dataset_status("cora", str(root))
    assert not st.available and "ind.cora.x" in st.reason and "open" in st.reason
    assert "\n" not in st.reason
    code, text = cli("datasets", "--data-root", root)
    assert "Traceback" not in text and "ind.cora.x" in text


def test_loading_refuses_a_planetoid_file_with_a_payload(tmp_path, marker, monkeypatch):
    """Before PyG's loader unpickles ``ind.*``, the loader parses them and refuses one that
    names code."""
    from gnnprivacy.datasets import load_dataset
    from gnnprivacy.errors import CorruptDatasetError

    monkeypatch.setenv("GNNPRIVACY_CACHE", str(tmp_path / "cache"))
    root = _cora_copy(tmp_path)
    (root / "Cora" / "raw" / "ind.cora.tx").write_bytes(pickle_payload(marker))
    with pytest.raises(CorruptDatasetError, match="ind.cora.tx.*open") as info:
        load_dataset("cora", root=str(root))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("planted", ["data.pt", "pre_transform.pt"])
def test_processed_cache_with_a_payload_is_rebuilt_not_run(tmp_path, marker, monkeypatch, planted):
    """PyG reads ``processed/pre_transform.pt`` with ``weights_only=False`` on every open and
    falls back to it for ``data.pt``: a payload planted in the cache is refused, the entry
    rebuilt from the raw files."""
    from gnnprivacy.datasets import load_dataset
    from gnnprivacy.datasets.pyg_cache import CacheRebuiltWarning

    monkeypatch.setenv("GNNPRIVACY_CACHE", str(tmp_path / "cache"))
    root = _cora_copy(tmp_path)
    first = load_dataset("cora", root=str(root))
    (target,) = (tmp_path / "cache").rglob(f"processed/{planted}")
    torch_payload(target, marker)
    with pytest.warns(CacheRebuiltWarning, match="names the Python object"):
        again = load_dataset("cora", root=str(root))
    assert torch.equal(again.x, first.x)


# -- configuration files ---------------------------------------------------------------------

def test_a_yaml_config_with_a_python_tag_is_refused(tmp_path, marker):
    config = tmp_path / "evil.yaml"
    config.write_text(f"method: gcn\ndataset: !!python/object/apply:builtins.open "
                      f"['{marker}', 'w']\n")
    code, text = cli("train", "-c", config, "--runs-dir", tmp_path / "runs")
    assert code != 0
    assert "Traceback" not in text


def test_checkpoint_message_is_one_line_for_a_torn_file(tmp_path):
    from gnnprivacy.training.checkpoint import load_checkpoint

    good = tmp_path / "good.pt"
    torch.save({"version": 1}, good)
    torn = tmp_path / "torn.pt"
    torn.write_bytes(good.read_bytes()[:60])
    with pytest.raises(InvalidParameterError) as info:
        load_checkpoint(torn)
    assert "\n" not in str(info.value) and len(str(info.value)) < 400
    json.dumps(str(info.value))
