"""Your own model under gp.make_private: DP step against the same model's non-private step.

The model of docs/own-model.md (two SAGEConv layers, LayerNorm, a residual, a Linear head) on
Amazon Computers (80/20). One DP run draws its batches from ``pt.loader``; every batch is kept,
and the same batches are then replayed through a plain PyTorch step of an identical model
(forward, mean cross-entropy over the centres, ``loss.backward()``, Adam), so both columns see
the same subgraphs. Only the step is timed (forward to update), not the sampling.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_user_model.py [--sampler heterpoisson]
        [--steps 30] [--data-root ../shared/datasets] [--dataset computers]

Prints the median step times, wall and CPU (the process's own CPU time, which a busy machine
inflates much less than wall time), and their ratios (target: DP at most 1.5x on CPU).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch
from torch import nn
from torch.nn import functional as F
from torch_geometric.nn import SAGEConv

import gnnprivacy as gp


class Net(nn.Module):
    def __init__(self, in_channels, hidden, classes):
        super().__init__()
        self.conv1, self.norm = SAGEConv(in_channels, hidden), nn.LayerNorm(hidden)
        self.conv2, self.head = SAGEConv(hidden, hidden), nn.Linear(hidden, classes)

    def forward(self, x, edge_index):
        h = self.norm(F.relu(self.conv1(x, edge_index)))
        h = h + F.relu(self.conv2(h, edge_index))
        return self.head(h)


def step(model, opt, batch):
    opt.zero_grad()
    out = model(batch.x, batch.edge_index)
    F.cross_entropy(out[batch.center], batch.y[batch.center]).backward()
    opt.step()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="computers")
    ap.add_argument("--data-root", default="../shared/datasets")
    ap.add_argument("--sampler", default="heterpoisson")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--hidden", type=int, default=64)
    args = ap.parse_args()
    data = gp.load_dataset(args.dataset, root=args.data_root, split="random", train_frac=0.8,
                           val_frac=0.0, test_frac=0.2, seed=0)
    torch.manual_seed(0)
    model = Net(data.num_features, args.hidden, int(data.y.max()) + 1)
    plain = copy.deepcopy(model)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    pt = gp.make_private(model, opt, data, sampler=args.sampler, noise_multiplier=1.0,
                         steps=args.steps + 3, seed=0)
    batches, dp_times, dp_cpu = [], [], []
    for batch in pt.loader:
        t, c = time.perf_counter(), time.process_time()
        step(model, opt, batch)
        dp_times.append(time.perf_counter() - t)
        dp_cpu.append(time.process_time() - c)
        batches.append(batch)
    plain_opt = torch.optim.Adam(plain.parameters(), lr=0.01)
    plain_times, plain_cpu = [], []
    for batch in batches:
        t, c = time.perf_counter(), time.process_time()
        step(plain, plain_opt, batch)
        plain_times.append(time.perf_counter() - t)
        plain_cpu.append(time.process_time() - c)
    dp, base = statistics.median(dp_times[3:]), statistics.median(plain_times[3:])
    dp_c, base_c = statistics.median(dp_cpu[3:]), statistics.median(plain_cpu[3:])
    rows = statistics.mean(b.num_nodes for b in batches)
    print(f"{args.dataset}, sampler {args.sampler}: {len(batches)} steps, mean "
          f"{statistics.mean(b.num_subgraphs for b in batches):.0f} subgraphs / {rows:.0f} rows "
          f"per batch, torch threads {torch.get_num_threads()}")
    print(f"{'':<17}{'wall ms':>9}{'CPU ms':>9}   (CPU time: this process only, robust to a "
          "busy machine)")
    print(f"non-private step {base * 1e3:9.1f}{base_c * 1e3:9.1f}")
    print(f"DP step          {dp * 1e3:9.1f}{dp_c * 1e3:9.1f}   ratio {dp / base:.2f}x wall, "
          f"{dp_c / base_c:.2f}x CPU (target <= 1.5x)")


if __name__ == "__main__":
    main()
