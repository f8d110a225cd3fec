"""Every real dataset of the shared offline folder loads with MANIFEST.md's counts.

The data root is the shared folder itself: the test also proves nothing is written there.
"""

from __future__ import annotations

import os

import pytest
import torch
from torch_geometric.utils import coalesce, is_undirected

from gnnprivacy.datasets import dataset_status, load_dataset
from gnnprivacy.errors import DatasetNotFoundError

# name: (nodes, edge_index columns, features, classes), from ../shared/datasets/MANIFEST.md.
# Facebook: MANIFEST's 342,004 columns list the 179 self-loops twice; coalesced -> 341,825.
EXPECTED = {
    "cora": (2708, 10556, 1433, 7),
    "citeseer": (3327, 9104, 3703, 6),
    "photo": (7650, 238162, 745, 8),
    "computers": (13752, 491722, 767, 10),
    "cs": (18333, 163788, 6805, 15),
    "physics": (34493, 495924, 8415, 5),
    "facebook": (22470, 342004 - 179, 4714, 4),
    "twitch-de": (9498, 315774, 3170, 2),
    "twitch-en": (7126, 77774, 3170, 2),
    "twitch-es": (4648, 123412, 3170, 2),
    "twitch-fr": (6549, 231881, 3170, 2),
    "twitch-pt": (1912, 64510, 3170, 2),
    "twitch-ru": (4385, 78993, 3170, 2),
    "german": (1000, 43484, 37, 2),
}


def _processed_dirs(root) -> list[str]:
    return [d for d, subdirs, _ in os.walk(root) if "processed" in subdirs]


# Each dataset is loaded once per session (one parametrized case; the session cache keeps
# the processed files). Physics writes a 1.1 GB processed file (dense x): ~15-30 s wall.
@pytest.mark.dataset
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_dataset_counts(name, shared_root, session_cache, no_data_env):
    nodes, edges, features, classes = EXPECTED[name]
    data = load_dataset(name, root=shared_root, cache_dir=session_cache, download=False)
    assert (data.num_nodes, data.edge_index.size(1), data.x.size(1), data.num_classes) == (
        nodes, edges, features, classes)
    assert data.x.dtype == torch.float32 and data.y.dtype == torch.int64
    assert data.name == name and isinstance(data.num_classes, int)
    for key in ("train_mask", "val_mask", "test_mask"):
        assert data[key].dtype == torch.bool and data[key].numel() == nodes
    ei = data.edge_index
    assert torch.equal(coalesce(ei, num_nodes=nodes), ei), "edge_index must be coalesced"
    assert is_undirected(ei, num_nodes=nodes), "edge_index must hold both directions"
    assert _processed_dirs(shared_root) == [], "PyG wrote into the shared data root"


@pytest.mark.dataset
def test_incomplete_datasets_report_missing_files(shared_root, session_cache, no_data_env):
    for name, missing in (("pubmed", "PubMed/raw/ind.pubmed.allx"),
                          ("lastfm", "LastFMAsia/raw/lastfm_asia.npz")):
        assert not dataset_status(name, shared_root).available
        with pytest.raises(DatasetNotFoundError) as info:
            load_dataset(name, root=shared_root, cache_dir=session_cache, download=False)
        # the message names the file under the root as given or as resolved (a symlinked root)
        message = str(info.value)
        assert str(shared_root / missing) in message or str(shared_root.resolve() / missing) in message


@pytest.mark.dataset
def test_status_of_shared_root(shared_root):
    for name in EXPECTED:
        assert dataset_status(name, shared_root).available, name


@pytest.mark.dataset
def test_german_preprocessing(shared_root, session_cache, no_data_env):
    rgnn = load_dataset("german", root=shared_root, cache_dir=session_cache)
    assert int(rgnn.y.sum()) == 700 and int(rgnn.sens.sum()) == 310  # good customers, women
    names = rgnn.feature_names
    assert "GoodCustomer" not in names and "OtherLoansAtStore" not in names and len(names) == 37
    assert torch.equal(rgnn.x[:, names.index("Gender")].long(), rgnn.sens)
    purpose = [i for i, n in enumerate(names) if n.startswith("PurposeOfLoan=")]
    assert len(purpose) == 10 and torch.all(rgnn.x[:, purpose].sum(1) == 1)
    assert not (rgnn.edge_index[0] == rgnn.edge_index[1]).any()
    nifty = load_dataset("german", root=shared_root, cache_dir=session_cache, features="nifty")
    assert nifty.x.shape == (1000, 27) and torch.equal(nifty.edge_index, rgnn.edge_index)
    assert torch.equal(nifty.x, rgnn.x[:, :27])
