"""CSBM: exact pair decoding, determinism, and statistics close to the parameters.

Statistical checks use a fixed seed, a tolerance of 5 standard deviations derived from
the number of edges / nodes, and a positive control: a deliberately broken generator
must fail the very same check.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from gnnprivacy.datasets import generate_csbm, load_dataset
from gnnprivacy.datasets.csbm import _triangle_pairs, generate_csbm_arrays
from gnnprivacy.errors import InvalidParameterError

N, C, DEG, H = 4000, 4, 10.0, 0.8


def _stats(x, y, edges):
    n = y.size
    m = edges.shape[1]
    homophily = float(np.mean(y[edges[0]] == y[edges[1]])) if m else float("nan")
    return m, homophily, 2.0 * m / n


def _check_graph_stats(generator, *, n=N, c=C, deg=DEG, h=H) -> None:
    """Assert edge homophily and average degree within 5 sigma of the parameters."""
    x, y, edges = generator(num_nodes=n, num_classes=c, avg_degree=deg, homophily=h, seed=11)
    m, homophily, avg_degree = _stats(x, y, edges)
    expected_m = n * deg / 2
    tol_h = 5 * math.sqrt(h * (1 - h) / expected_m)        # binomial share of intra edges
    tol_d = 5 * 2 * math.sqrt(expected_m) / n              # sum of binomials: var <= mean
    assert abs(homophily - h) <= tol_h, f"homophily {homophily:.4f} vs {h} (tol {tol_h:.4f})"
    assert abs(avg_degree - deg) <= tol_d, f"avg degree {avg_degree:.3f} vs {deg} (tol {tol_d:.3f})"


@pytest.mark.statistical
@pytest.mark.parametrize("h", [0.8, 0.2, 1.0])
def test_homophily_and_degree_match_parameters(h):
    _check_graph_stats(generate_csbm_arrays, h=h)


@pytest.mark.statistical
def test_positive_controls_are_caught():
    def ignores_homophily(**kw):  # every pair equally likely: homophily 1/C
        return generate_csbm_arrays(**{**kw, "homophily": 1 / kw["num_classes"]})

    def halves_degree(**kw):  # counts each edge once in the degree
        return generate_csbm_arrays(**{**kw, "avg_degree": kw["avg_degree"] / 2})

    def slightly_off(**kw):  # 0.05 homophily error, ~8 sigma at this size
        return generate_csbm_arrays(**{**kw, "homophily": kw["homophily"] - 0.05})

    for broken in (ignores_homophily, halves_degree, slightly_off):
        with pytest.raises(AssertionError):
            _check_graph_stats(broken)


@pytest.mark.statistical
def test_feature_signal_separates_class_means():
    x, y, _ = generate_csbm_arrays(num_nodes=N, num_features=16, feature_signal=3.0, seed=2)
    means = np.stack([x[y == k].mean(axis=0) for k in range(C)])
    dist = np.linalg.norm(means[0] - means[1])
    tol = 5 * math.sqrt(2 * 16 / (N / C))  # noise of a difference of two class means
    assert abs(dist - 3.0 * math.sqrt(2)) <= tol
    x0, y0, _ = generate_csbm_arrays(num_nodes=N, num_features=16, feature_signal=0.0, seed=2)
    assert np.linalg.norm(x0[y0 == 0].mean(0) - x0[y0 == 1].mean(0)) <= tol


def test_triangle_decoding_is_exact():
    for m in range(2, 40):
        i, j = _triangle_pairs(np.arange(m * (m - 1) // 2), m)
        ti, tj = np.triu_indices(m, 1)
        assert np.array_equal(i, ti) and np.array_equal(j, tj)
    m = 3_000_000
    k = np.array([0, 1, m - 2, m - 1, m * (m - 1) // 2 - 2, m * (m - 1) // 2 - 1])
    i, j = _triangle_pairs(k, m)
    assert i.tolist() == [0, 0, 0, 1, m - 3, m - 2] and j.tolist() == [1, 2, m - 1, 2, m - 1, m - 1]


def test_graph_is_simple_undirected_and_deterministic():
    data = generate_csbm(num_nodes=500, seed=4)
    ei = data.edge_index
    assert data.x.dtype == torch.float32 and data.y.dtype == torch.int64
    assert not (ei[0] == ei[1]).any(), "self-loop"
    assert torch.equal(torch.unique(ei, dim=1), ei)
    assert {tuple(e) for e in ei.t().tolist()} == {tuple(e) for e in ei.flip(0).t().tolist()}
    assert torch.bincount(data.y).tolist() == [125] * 4  # balanced classes
    again = generate_csbm(num_nodes=500, seed=4)
    assert torch.equal(again.edge_index, ei) and torch.equal(again.x, data.x)
    assert not torch.equal(generate_csbm(num_nodes=500, seed=5).edge_index, ei)


def test_load_dataset_csbm_defaults_and_kwargs():
    data = load_dataset("csbm")
    assert (data.num_nodes, data.x.size(1), data.num_classes, data.name) == (1000, 32, 4, "csbm")
    small = load_dataset("csbm", num_nodes=300, num_classes=3, num_features=5, graph_seed=1)
    assert (small.num_nodes, small.x.size(1), small.num_classes) == (300, 5, 3)
    # the split seed does not change the graph; graph_seed does
    assert torch.equal(load_dataset("csbm", seed=1).edge_index, data.edge_index)
    assert not torch.equal(load_dataset("csbm", graph_seed=1).edge_index, data.edge_index)


@pytest.mark.parametrize("kwargs", [dict(homophily=1.5), dict(num_nodes=1), dict(avg_degree=-1),
                                    dict(num_nodes=20, avg_degree=50), dict(num_classes=0)])
def test_invalid_parameters(kwargs):
    with pytest.raises(InvalidParameterError):
        generate_csbm(**kwargs)


def test_large_graph_without_dense_matrix():
    # 200k nodes: a dense adjacency would need 40e9 entries; the sampler only touches edges.
    x, y, edges = generate_csbm_arrays(num_nodes=200_000, num_features=2, avg_degree=4, seed=0)
    m, homophily, avg_degree = _stats(x, y, edges)
    assert abs(avg_degree - 4) < 0.05 and abs(homophily - 0.8) < 0.01
