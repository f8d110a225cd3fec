"""partition_graph writes shards that cover every node once, with every cleaned in-edge once."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from gnnprivacy.datasets import load_dataset
from gnnprivacy.datasets.shards import open_shard, partition_graph
from gnnprivacy.datasets.stream import generate_large_graph
from gnnprivacy.errors import InvalidParameterError


def _edges(shard) -> set[tuple[int, int]]:
    """The (source, target) pairs held by one part (targets from the CSR rows)."""
    nodes, indptr, src = (np.asarray(a) for a in (shard.nodes, shard.indptr, shard.src))
    dst = np.repeat(nodes, np.diff(indptr))
    return set(zip(src.tolist(), dst.tolist()))


def check_shards(folder, data_x, data_y, edges: set, train: np.ndarray) -> None:
    """Every node in one part with its row, features and label; the in-edges are complete."""
    parts = [open_shard(folder, k) for k in range(open_shard(folder, 0).num_parts)]
    nodes = np.concatenate([np.asarray(p.nodes) for p in parts])
    n = parts[0].num_nodes
    assert sorted(nodes.tolist()) == list(range(n))                 # each node exactly once
    held: list[tuple[int, int]] = []
    for p in parts:
        ids = np.asarray(p.nodes)
        assert np.all(np.diff(ids) > 0)
        assert np.all(np.asarray(p.owner)[ids] == p.part)
        assert np.array_equal(np.asarray(p.local)[ids], np.arange(ids.size))
        assert np.array_equal(np.asarray(p.x), data_x[ids])
        assert np.array_equal(np.asarray(p.y), data_y[ids])
        held += list(_edges(p))
    assert len(held) == len(set(held))                              # no edge twice
    assert set(held) == edges                                       # no edge missing
    assert np.array_equal(np.asarray(parts[0].train_mask), train)
    deg = np.bincount([s for s, _ in edges], minlength=n)
    assert np.array_equal(np.asarray(parts[0].out_degree), deg)
    assert parts[0].meta["max_out_degree"] == int(deg.max())


def _clean(edge_index) -> set[tuple[int, int]]:
    return {(s, d) for s, d in edge_index.t().tolist() if s != d}


@pytest.mark.parametrize("method", ["metis", "contiguous"])
def test_parts_cover_every_node_once_with_complete_in_edges(tmp_path, method):
    data = load_dataset("csbm", num_nodes=300, num_features=6, seed=1)
    folder = partition_graph(data, tmp_path / "s", num_parts=3, method=method)
    check_shards(folder, data.x.numpy(), data.y.numpy(), _clean(data.edge_index),
                 data.train_mask.numpy())
    meta = open_shard(folder, 0).meta
    assert meta["method"] == method and sum(meta["part_sizes"]) == 300
    assert meta["num_train"] == int(data.train_mask.sum())


def test_metis_cuts_fewer_edges_than_contiguous_ids(tmp_path):
    data = load_dataset("csbm", num_nodes=300, num_features=6, seed=1)
    cut = {m: open_shard(partition_graph(data, tmp_path / m, num_parts=2, method=m), 0)
           .meta["cut_edges"] for m in ("metis", "contiguous")}
    assert cut["metis"] < cut["contiguous"]


def test_self_loops_and_duplicates_are_cleaned(tmp_path):
    ei = torch.tensor([[0, 0, 1, 1, 2, 2, 3], [1, 1, 1, 0, 3, 0, 2]])
    data = Data(x=torch.arange(8.0).view(4, 2), y=torch.tensor([0, 1, 1, 0]), edge_index=ei,
                train_mask=torch.tensor([True, False, True, False]), num_nodes=4)
    folder = partition_graph(data, tmp_path / "s", num_parts=2, method="contiguous")
    check_shards(folder, data.x.numpy(), data.y.numpy(), {(0, 1), (1, 0), (2, 3), (2, 0),
                                                          (3, 2)}, data.train_mask.numpy())


def test_a_streamed_graph_with_a_drawn_training_split(tmp_path):
    graph = generate_large_graph(tmp_path / "g", num_nodes=2000, num_features=4, seed=0,
                                 chunk_nodes=512)
    folder = partition_graph(graph, tmp_path / "s", num_parts=2, train_fraction=0.3)
    x, y = np.load(graph / "x.npy"), np.load(graph / "y.npy")
    ei = np.load(graph / "edge_index.npy")
    train = np.asarray(open_shard(folder, 0).train_mask)
    check_shards(folder, x, y, set(zip(ei[0].tolist(), ei[1].tolist())), train)
    assert 0.25 < train.mean() < 0.35
    # the split is a function of the seed only, not of the partition
    other = partition_graph(graph, tmp_path / "c", num_parts=3, method="contiguous",
                            train_fraction=0.3)
    assert np.array_equal(np.asarray(open_shard(other, 0).train_mask), train)


def test_a_broken_shard_is_caught(tmp_path):
    # broken control: a part that lost an in-edge fails the completeness check
    data = load_dataset("csbm", num_nodes=120, num_features=3, seed=2)
    folder = partition_graph(data, tmp_path / "s", num_parts=2, method="contiguous")
    src = np.load(folder / "part1" / "src.npy")
    indptr = np.load(folder / "part1" / "indptr.npy")
    np.save(folder / "part1" / "src.npy", src[1:])
    np.save(folder / "part1" / "indptr.npy", np.maximum(indptr - 1, 0))
    # open_shard itself refuses a part whose edges disagree with meta.json ...
    with pytest.raises(InvalidParameterError, match="part1/(src|indptr).npy"):
        open_shard(folder, 1)
    # ... and with meta.json edited to agree (its digests dropped, or they refuse it too),
    # the completeness check catches the lost edge
    meta = json.loads((folder / "meta.json").read_text())
    meta["part_edges"][1] -= 1
    meta["num_edges"] -= 1
    meta.pop("digests")
    (folder / "meta.json").write_text(json.dumps(meta))
    for k in range(2):
        info = json.loads((folder / f"part{k}" / "part.json").read_text())
        info.pop("meta_digest")
        (folder / f"part{k}" / "part.json").write_text(json.dumps(info))
    open_shard(folder, 1)
    with pytest.raises(AssertionError):
        check_shards(folder, data.x.numpy(), data.y.numpy(), _clean(data.edge_index),
                     data.train_mask.numpy())


def test_bad_arguments_are_refused(tmp_path):
    data = load_dataset("csbm", num_nodes=50, num_features=3, seed=0)
    with pytest.raises(InvalidParameterError, match="num_parts"):
        partition_graph(data, tmp_path / "a", num_parts=0)
    with pytest.raises(InvalidParameterError, match="method"):
        partition_graph(data, tmp_path / "b", num_parts=2, method="random")
    partition_graph(data, tmp_path / "c", num_parts=2)
    with pytest.raises(InvalidParameterError, match="overwrite"):
        partition_graph(data, tmp_path / "c", num_parts=2)
    with pytest.raises(InvalidParameterError, match="part"):
        open_shard(tmp_path / "c", 2)
    with pytest.raises(InvalidParameterError, match="written by gnnprivacy partition"):
        open_shard(tmp_path / "missing", 0)
