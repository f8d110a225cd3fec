"""benchmarks/bench_module_ratios.py: every model it times trains under make_private on the
per-subgraph rules (no exact fallback), on batches that carry the edge attributes."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

import gnnprivacy as gp
from gnnprivacy.training.dp import FallbackWarning

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_module_ratios as bench  # noqa: E402


class _Args:
    dataset, data_root = "computers", "/nonexistent/for/the/csbm/fallback"


@pytest.fixture(scope="module")
def small():
    data = gp.load_dataset("csbm", num_nodes=300, num_features=16, split="random",
                           train_frac=0.8, val_frac=0.0, test_frac=0.2, seed=0)
    gen = torch.Generator().manual_seed(0)
    data.edge_attr = torch.randn(data.edge_index.shape[1], bench.EDGE_DIM, generator=gen)
    data.edge_weight = torch.rand(data.edge_index.shape[1], generator=gen) + 0.5
    return data


@pytest.mark.parametrize("name", list(bench.MODULES))
def test_every_benchmarked_model_steps_without_the_fallback(name, small):
    torch.manual_seed(0)
    model = bench.MODULES[name][0](small.num_features, 8, int(small.y.max()) + 1)
    before = [p.detach().clone() for p in model.parameters()]
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        pt = gp.make_private(model, opt, small, sampler="heterpoisson", noise_multiplier=1.0,
                             steps=2, batch_size=30, seed=0)
        for batch in pt.loader:
            assert batch.edge_attr.shape == (batch.edge_index.shape[1], bench.EDGE_DIM)
            opt.zero_grad()
            out = model(batch)
            F.cross_entropy(out[batch.center], batch.y[batch.center]).backward()
            opt.step()
    assert pt.steps == 2
    assert all(not torch.equal(a, p) for a, p in zip(before, model.parameters()))


def test_without_the_dataset_a_csbm_of_computers_size_stands_in():
    data, where = bench.load(_Args)
    assert where.startswith("csbm of Computers' size")
    assert (data.num_nodes, data.num_features, int(data.y.max()) + 1) == (13752, 767, 10)
    assert data.edge_attr.shape == (data.edge_index.shape[1], bench.EDGE_DIM)
