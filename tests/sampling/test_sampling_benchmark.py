"""Timing of the samplers at Amazon-Computers scale (slow; prints the figures).

Run: ``OMP_NUM_THREADS=1 .venv/bin/python -m pytest tests/sampling/test_sampling_benchmark.py -m slow -s``
or ``OMP_NUM_THREADS=1 .venv/bin/python tests/sampling/test_sampling_benchmark.py``.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

import pytest
import torch

from gnnprivacy.sampling import CounterRandom, HeterPoissonSampler, sample_degree_bounded_subgraphs

NUM_NODES, NUM_EDGES = 13_752, 491_722          # Amazon Computers (PyG, directed count)
RAW = Path(os.environ.get("GNNPRIVACY_SHARED_DATASETS", Path(__file__).parents[3] / "shared" / "datasets"))


def _random_graph(seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    half = torch.randint(0, NUM_NODES, (2, NUM_EDGES // 2), generator=g)
    return torch.cat([half, half.flip(0)], dim=1)   # undirected, stored both ways like PyG


def _amazon_graph() -> torch.Tensor | None:
    raw = RAW / "Computers" / "raw"
    if not (raw / "amazon_electronics_computers.npz").exists():
        return None
    from torch_geometric.datasets import Amazon

    with tempfile.TemporaryDirectory() as root:      # processed files go to a temp dir only
        (Path(root) / "Computers").mkdir()
        (Path(root) / "Computers" / "raw").symlink_to(raw)
        return Amazon(root, name="Computers")[0].edge_index.clone()


def _time_steps(sampler: HeterPoissonSampler, rng, steps: int = 50) -> tuple[float, float, float]:
    times, sizes, periph = [], [], []
    for t in range(steps):
        gen = rng.at_step(t) if isinstance(rng, CounterRandom) else rng
        t0 = time.perf_counter()
        b = sampler.sample(gen)
        times.append(time.perf_counter() - t0)
        sizes.append(b.num_subgraphs)
        periph.append(b.num_peripherals)
    return 1000 * statistics.median(times), statistics.mean(sizes), statistics.mean(periph)


def heter_poisson_report(edge_index: torch.Tensor, label: str) -> float:
    n = int(edge_index.max()) + 1
    g = torch.Generator().manual_seed(1)
    train = torch.randperm(n, generator=g)[: int(0.8 * n)]
    t0 = time.perf_counter()
    sampler = HeterPoissonSampler(edge_index, n, candidates=train, eligible=torch.ones(n, dtype=torch.bool),
                                  q_b=4096 / n, M=1)
    build = time.perf_counter() - t0
    ms, b, e = _time_steps(sampler, g)
    ms_c, _, _ = _time_steps(sampler, CounterRandom(seed=1))
    print(f"[{label}] HeterPoisson N={n} E={edge_index.shape[1]} q_b=4096/N M=1: build {build:.2f} s; "
          f"per step {ms:.1f} ms (torch.Generator), {ms_c:.1f} ms (CounterRandom); "
          f"mean batch {b:.0f} sub-graphs, {e:.0f} peripherals")
    return ms


def greedy_report(edge_index: torch.Tensor, label: str, k: int = 10) -> float:
    n = int(edge_index.max()) + 1
    g = torch.Generator().manual_seed(2)
    train = torch.randperm(n, generator=g)[: int(0.8 * n)]
    t0 = time.perf_counter()
    s = sample_degree_bounded_subgraphs(edge_index, n, train_nodes=train, max_degree=k, generator=g)
    secs = time.perf_counter() - t0
    t0 = time.perf_counter()
    s.check_invariants()
    check = time.perf_counter() - t0
    print(f"[{label}] Algorithm 2 greedy, {s.graph.num_edges} directed edges, K={k}: {secs:.2f} s "
          f"(check_invariants {check:.2f} s); mean degree {float(s.degrees().float().mean()):.2f}")
    return secs


@pytest.mark.slow
def test_sampler_timings_at_amazon_scale():
    assert heter_poisson_report(_random_graph(), "random") < 500
    assert greedy_report(_random_graph(), "random") < 120
    amazon = _amazon_graph()
    if amazon is not None:
        assert heter_poisson_report(amazon, "Amazon Computers") < 500
        assert greedy_report(amazon, "Amazon Computers") < 120


if __name__ == "__main__":
    test_sampler_timings_at_amazon_scale()
