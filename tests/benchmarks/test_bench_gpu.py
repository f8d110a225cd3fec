"""benchmarks/bench_gpu.py without a GPU: the clear refusal, its CSBM graph, its cell order.

The GPU run itself is a prepared one-call script (docs/scale.md, "GPU: how to measure");
``--device cpu --quick`` is its CPU smoke run (under 2 minutes on the project machine).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import bench_gpu  # noqa: E402


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_no_cuda_is_one_clear_line(capsys):
    assert bench_gpu.main(["--device", "cuda"]) == 2
    out = capsys.readouterr().out.strip()
    assert "CUDA is not available" in out and "--device cpu" in out and "\n" not in out


def test_unknown_names_are_listed(capsys):
    assert bench_gpu.main(["--device", "cpu", "--methods", "gcn,nope"]) == 2
    assert "nope" in capsys.readouterr().out


def test_fast_csbm_is_a_symmetric_homophilous_graph_with_a_split():
    data = bench_gpu.fast_csbm(4000, max_test=300)
    src, dst = data.edge_index
    assert not bool((src == dst).any())
    pairs = set(zip(src.tolist(), dst.tolist()))
    assert all((d, s) in pairs for s, d in list(pairs)[:2000])
    assert 9.0 < data.num_edges / data.num_nodes < 10.5          # average degree about 10
    same = float((data.y[src] == data.y[dst]).float().mean())
    assert 0.75 < same < 0.85                                      # homophily about 0.8
    assert int(data.train_mask.sum()) == 3200 and int(data.test_mask.sum()) == 300
    assert not bool((data.train_mask & data.test_mask).any())


def test_cells_put_the_targets_first_and_skip_what_cannot_run():
    order = bench_gpu.cells(["computers", "physics", "csbm-1e6", "csbm-1e7"],
                            list(bench_gpu.METHODS), quick=False)
    assert order[:6] == [("computers", m) for m in bench_gpu.METHODS]
    assert order[6:11] == [("physics", "heterpoisson"), ("physics", "dpgnn"),
                           ("csbm-1e6", "heterpoisson"), ("csbm-1e6", "dpgnn"),
                           ("csbm-1e7", "heterpoisson")]
    assert ("csbm-1e6", "gap") not in order and ("csbm-1e7", "dpgnn") not in order
    assert ("csbm-1e7", "dpgnn") in bench_gpu.cells(["csbm-1e7"], ["dpgnn"], quick=False)
