"""Large synthetic graphs streamed to disk in chunks and loaded memory-mapped."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from gnnprivacy.datasets import load_dataset
from gnnprivacy.datasets.stream import generate_large_graph, large_graph_data, open_large_graph
from gnnprivacy.errors import InvalidParameterError

N, CHUNK = 3000, 700


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    root = tmp_path_factory.mktemp("stream")
    out = {}
    for model in ("uniform", "powerlaw"):
        generate_large_graph(root / model, num_nodes=N, num_features=8, degree_model=model,
                             seed=3, chunk_nodes=CHUNK)
        out[model] = open_large_graph(root / model)
    return root, out


@pytest.mark.parametrize("model", ["uniform", "powerlaw"])
def test_structure_csr_symmetric_simple(graphs, model):
    g = graphs[1][model]
    assert isinstance(g.x, np.memmap) and isinstance(g.edge_index, np.memmap)
    src, dst = np.asarray(g.edge_index[0]), np.asarray(g.edge_index[1])
    assert g.indptr[-1] == src.size == g.meta["num_edges"]
    np.testing.assert_array_equal(np.diff(g.indptr), np.bincount(dst, minlength=N))
    key = dst * N + src
    assert (np.diff(key) > 0).all()  # sorted by (target, source), no duplicates
    assert (src != dst).all()
    np.testing.assert_array_equal(np.sort(src * N + dst), key)  # undirected: both directions
    np.testing.assert_array_equal(g.neighbors(5), src[g.indptr[5]:g.indptr[6]])
    assert g.x.shape == (N, 8) and g.y.shape == (N,)


def test_degrees_and_homophily(graphs):
    uni, pl = graphs[1]["uniform"], graphs[1]["powerlaw"]
    for g in (uni, pl):
        ei = np.asarray(g.edge_index)
        assert 9.0 < ei.shape[1] / N < 10.5
        y = np.asarray(g.y)
        assert abs((y[ei[0]] == y[ei[1]]).mean() - 0.8) < 0.03
    # the power-law variant has hubs, the CSBM has Poisson degrees
    assert np.diff(pl.indptr).max() > 5 * np.diff(uni.indptr).max()
    # the features carry the class signal
    x, y = np.asarray(uni.x), np.asarray(uni.y)
    means = np.stack([x[y == c].mean(0) for c in range(4)])
    assert np.linalg.norm(means[0] - means[1]) > 1.0


def test_deterministic_for_a_seed(graphs, tmp_path):
    root, g = graphs
    generate_large_graph(tmp_path / "a", num_nodes=N, num_features=8, seed=3, chunk_nodes=CHUNK)
    again = open_large_graph(tmp_path / "a")
    for name in ("indptr", "edge_index", "x", "y"):
        np.testing.assert_array_equal(getattr(again, name), getattr(g["uniform"], name))
    generate_large_graph(tmp_path / "b", num_nodes=N, num_features=8, seed=4, chunk_nodes=CHUNK)
    other = open_large_graph(tmp_path / "b")
    assert other.edge_index.shape != again.edge_index.shape or \
        not np.array_equal(other.edge_index, again.edge_index)


def _peak_bytes(path, chunk):
    tracemalloc.start()
    generate_large_graph(path, num_nodes=40_000, num_features=64, seed=0, chunk_nodes=chunk)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def test_generation_memory_is_bounded_by_the_chunk(tmp_path):
    data_bytes = 40_000 * 64 * 4 + 400_000 * 16  # features + edge_index
    small = _peak_bytes(tmp_path / "small", 2000)
    assert small < 0.5 * data_bytes
    # positive control: one chunk holding every node needs far more
    assert _peak_bytes(tmp_path / "whole", 40_000) > 3 * small


def test_float16_and_registered_dataset(tmp_path):
    data = load_dataset("csbm-large", num_nodes=1500, num_features=6, feature_dtype="float16",
                        path=str(tmp_path / "g"), cache_dir=tmp_path / "cache")
    g = open_large_graph(tmp_path / "g")
    assert g.x.dtype == np.float16 and g.meta["feature_dtype"] == "float16"
    assert data.num_nodes == 1500 and data.x.shape == (1500, 6)
    assert data.edge_index.shape[1] == g.meta["num_edges"]
    assert int(data.train_mask.sum()) > 0
    mapped = large_graph_data(g)  # no copy: shares memory with the map
    assert mapped.x.data_ptr() == g.x.ctypes.data
    with pytest.raises(InvalidParameterError, match="path"):
        load_dataset("csbm-large", num_nodes=1600, num_features=6, path=str(tmp_path / "g"),
                     cache_dir=tmp_path / "cache")


def test_errors(tmp_path):
    with pytest.raises(InvalidParameterError, match="degree_model"):
        generate_large_graph(tmp_path / "x", num_nodes=10, degree_model="zipf")
    with pytest.raises(InvalidParameterError, match="path"):
        open_large_graph(tmp_path / "missing")
    generate_large_graph(tmp_path / "y", num_nodes=10)
    with pytest.raises(InvalidParameterError, match="path"):
        generate_large_graph(tmp_path / "y", num_nodes=10)
