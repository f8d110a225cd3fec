"""EdgeRand and LapGraph (sparse): flip law, exact LapGraph law vs a dense reference, events."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from gnnprivacy.accounting import make_accountant
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.mechanisms.edge_dp import (_pairs_from_index, edge_rand, lap_graph,
                                           sample_non_edges)


def _graph(n=30, seed=0, p=0.15):
    rng = np.random.default_rng(seed)
    iu = np.stack(np.triu_indices(n, 1))
    return torch.as_tensor(iu[:, rng.random(iu.shape[1]) < p])


def _keys(ei, n):
    u, v = ei.numpy()
    m = u < v
    return set((u[m] * n + v[m]).tolist())


def test_pair_index_bijection():
    for n in (2, 3, 7, 40):
        keys = _pairs_from_index(np.arange(n * (n - 1) // 2), n)
        u, v = keys // n, keys % n
        assert (u < v).all() and np.unique(keys).size == keys.size


@pytest.mark.statistical
def test_edge_rand_flip_probability():
    n, eps, runs = 30, 1.0, 400
    ei = _graph(n)
    edges = _keys(ei, n)
    total = n * (n - 1) // 2
    kept = added = 0
    rng = np.random.default_rng(1)
    for _ in range(runs):
        out = _keys(edge_rand(ei, n, epsilon=eps, generator=rng), n)
        kept += len(out & edges)
        added += len(out - edges)
    flip = 1 / (1 + math.exp(eps))
    for observed, trials in ((len(edges) * runs - kept, len(edges) * runs),
                             (added, (total - len(edges)) * runs)):
        assert abs(observed / trials - flip) < 4 * math.sqrt(flip * (1 - flip) / trials)


def _dense_lap_graph(keys_set, n, eps, rng):
    """Reference: the LinkTeller algorithm on the dense lower triangle."""
    eps1, eps2 = 0.01 * eps, 0.99 * eps
    iu = np.stack(np.triu_indices(n, 1))
    key = iu[0] * n + iu[1]
    a = np.isin(key, list(keys_set)).astype(float) + rng.laplace(0, 1 / eps2, key.size)
    T = len(keys_set) + int(rng.laplace(0, 1 / eps1))
    return set(key[np.argsort(-a)[:T]].tolist())


@pytest.mark.statistical
def test_lap_graph_matches_dense_reference_in_law():
    n, eps, runs = 40, 3.0, 300
    ei = _graph(n, p=0.1)
    edges = _keys(ei, n)
    rng = np.random.default_rng(2)
    sparse = [len(_keys(lap_graph(ei, n, epsilon=eps, generator=rng), n) & edges)
              for _ in range(runs)]
    dense = [len(_dense_lap_graph(edges, n, eps, rng) & edges) for _ in range(runs)]
    se = math.sqrt(np.var(sparse) / runs + np.var(dense) / runs)
    assert abs(np.mean(sparse) - np.mean(dense)) < 4 * se
    assert 0 < np.mean(sparse) < len(edges)


def test_lap_graph_edge_count_and_high_budget():
    ei = _graph(50, p=0.1)
    edges = _keys(ei, 50)
    out = lap_graph(ei, 50, epsilon=5000.0, generator=0)   # T = |E| and noise ~ 0
    assert _keys(out, 50) == edges
    counts = [len(_keys(lap_graph(ei, 50, epsilon=1.0, generator=s), 50)) for s in range(200)]
    sd = math.sqrt(2) * 100 / math.sqrt(200)       # int(Laplace(100)) per run
    assert abs(np.mean(counts) - len(edges)) < 4 * sd


def test_sparse_on_a_large_graph():
    n = 100_000     # a dense N x N matrix would need 80 GB of float64
    ei = torch.stack([torch.arange(0, n - 1), torch.arange(1, n)])
    out = lap_graph(ei, n, epsilon=1.0, generator=0)
    assert out.size(1) > 0 and int(out.max()) < n
    out = edge_rand(ei, n, epsilon=25.0, generator=0)
    assert out.size(1) > 0


def test_sample_non_edges_distinct_and_excluded():
    rng = np.random.default_rng(0)
    edges = np.array([0 * 10 + 1, 2 * 10 + 3])
    s = sample_non_edges(edges, 10, 40, rng)
    assert np.unique(s).size == 40 and not np.isin(s, edges).any()


def test_events_and_errors():
    ei = _graph(20)
    acc = make_accountant("pld", unit="edge", relation="add_or_remove")
    edge_rand(ei, 20, epsilon=2.0, generator=0, accountant=acc)
    assert acc.get_epsilon(0.0) == pytest.approx(2.0)
    acc2 = make_accountant("pld", unit="edge", relation="add_or_remove")
    lap_graph(_graph(60, p=0.05), 60, epsilon=1.5, generator=0, accountant=acc2)
    assert acc2.get_epsilon(0.0) == pytest.approx(1.5)
    for bad in (0.0, -1.0, float("inf")):
        with pytest.raises(InvalidParameterError):
            edge_rand(ei, 20, epsilon=bad, generator=0)
        with pytest.raises(InvalidParameterError):
            lap_graph(ei, 20, epsilon=bad, generator=0)
    with pytest.raises(InvalidParameterError, match="max_edges"):
        edge_rand(ei, 20, epsilon=0.1, generator=0, max_edges=10)
