"""The edge-level DP step (make_private(sampler="edges")) against the plain step on the same
batches, over models, widths and batch sizes (issue 46).

Setup: a random undirected graph the size of Facebook's (22,470 nodes, 171,002 edges), 128
features, 4 classes. For each (model, width, expected batch) cell one make_private run draws
``--steps`` batches; on each batch the DP step (forward, loss, backward, then
``optimizer.step()``: per-subgraph gradients, clipping, noise, Adam, one ledger entry) and
then the plain step (the same forward, loss, backward and Adam on a copy of the model, no
clipping or noise) are timed, alternating DP, plain, DP, plain (the plain step runs after
``optimizer.step()``, where the loop guard allows other code). The first DP step (its one-time probes and loop check) is left
out. Prints the median of each and their ratio.

Models: ``sage1`` (Linear, one sum-SAGE layer, head; K = 1, no degree bound), ``sage2``
(two sum-SAGE layers, K = 2 over the out-degree bound D = 2), ``gin1`` (one GIN layer).

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_edge_dp_step.py``.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F
from torch_geometric.data import Data
from torch_geometric.nn import GINConv, SAGEConv

sys.path.insert(0, str(Path(__file__).parent))
from _cli import int_list, name_list  # noqa: E402


class Net(nn.Module):
    def __init__(self, kind: str, f: int, h: int, c: int):
        super().__init__()
        self.lin = nn.Linear(f, h)
        if kind == "gin1":
            self.convs = nn.ModuleList([GINConv(nn.Sequential(nn.Linear(h, h), nn.ReLU()))])
        else:
            layers = 2 if kind == "sage2" else 1
            self.convs = nn.ModuleList([SAGEConv(h, h, aggr="sum") for _ in range(layers)])
        self.head = nn.Linear(h, c)

    def forward(self, x, edge_index):
        h = torch.relu(self.lin(x))
        for conv in self.convs:
            h = torch.tanh(conv(h, edge_index))
        return self.head(h)


def graph(n: int, edges: int, f: int, c: int, seed: int = 0) -> Data:
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, n, (edges,), generator=gen)
    dst = torch.randint(0, n, (edges,), generator=gen)
    keep = src != dst
    ei = torch.stack([src[keep], dst[keep]])
    ei = torch.unique(torch.cat([ei, ei.flip(0)], 1), dim=1)
    train = torch.rand(n, generator=gen) < 0.5
    return Data(x=torch.randn(n, f, generator=gen), y=torch.randint(0, c, (n,), generator=gen),
                edge_index=ei, train_mask=train, num_nodes=n)


def step(model, opt, batch) -> float:
    t0 = time.perf_counter()
    opt.zero_grad()
    out = model(batch.x, batch.edge_index)
    F.cross_entropy(out[batch.center], batch.y[batch.center]).backward()
    opt.step()
    return time.perf_counter() - t0


def cell(data, kind: str, hidden: int, batch: int, steps: int) -> dict:
    import gnnprivacy as gp
    from gnnprivacy.training.private import EdgeSubgraphs

    torch.manual_seed(0)
    model = Net(kind, data.num_features, hidden, int(data.y.max()) + 1)
    plain = copy.deepcopy(model)
    plain_opt = torch.optim.Adam(plain.parameters(), lr=0.01)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    sampler = EdgeSubgraphs(max_out_degree=2 if kind == "sage2" else None, inference="none")
    pt = gp.make_private(model, opt, data, sampler=sampler, noise_multiplier=2.0,
                         steps=steps + 1, batch_size=batch, seed=0)
    dp_times, plain_times, rows = [], [], []
    for k, b in enumerate(pt.loader):
        t = step(model, opt, b)
        # the plain step after optimizer.step(): the loop guard requires every step to run
        # the same code between the draw and the step, so the two alternate DP, plain, ...
        plain_times.append(step(plain, plain_opt, b))
        if k:                                       # the first DP step runs the probes
            dp_times.append(t)
        rows.append(int(b.num_nodes))
    pt.close()
    dp, pl = statistics.median(dp_times), statistics.median(plain_times[1:])
    return {"model": kind, "hidden": hidden, "batch": batch, "rows": statistics.median(rows),
            "plain_ms": 1e3 * pl, "dp_ms": 1e3 * dp, "ratio": dp / pl}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=name_list, default="sage1,sage2,gin1")
    ap.add_argument("--widths", type=int_list, default="32,128")
    ap.add_argument("--batches", type=int_list, default="256,1024")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--nodes", type=int, default=22470)
    ap.add_argument("--edges", type=int, default=171002)
    args = ap.parse_args()
    data = graph(args.nodes, args.edges, 128, 4)
    print("| model | width | expected batch | rows/step | plain ms | DP ms | DP / plain |")
    print("|---|---|---|---|---|---|---|")
    for kind in args.models:
        for hidden in args.widths:
            for batch in args.batches:
                r = cell(data, kind, hidden, batch, args.steps)
                print(f"| {r['model']} | {r['hidden']} | {r['batch']} | {r['rows']:.0f} | "
                      f"{r['plain_ms']:.1f} | {r['dp_ms']:.1f} | {r['ratio']:.2f} |",
                      flush=True)


if __name__ == "__main__":
    main()
