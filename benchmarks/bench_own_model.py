"""The docs/own-model.md model in the user's own loop against the built-in heterpoisson.

Amazon Computers, 80/20 split, epsilon 8, seeds 0-2. For each seed: the built-in
``heterpoisson`` at its defaults (``gp.train``), and the two-SAGEConv model (LayerNorm,
residual, Linear head) trained with ``gp.make_private`` and ``sampler="heterpoisson"`` and
``sampler="degree_bounded"`` at the samplers' defaults (full-graph inference). Prints every
cell, the means, epsilon spent, and whether each sampler reaches the built-in default minus 2
points (the acceptance of the "bring your own GNN" issue).

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_own_model.py [--seeds 0,1,2]
        [--data-root ../shared/datasets] [--batch-size N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.nn import functional as F

import gnnprivacy as gp

sys.path.insert(0, str(Path(__file__).parent))
from _cli import int_list  # noqa: E402
from bench_user_model import Net  # noqa: E402


def user_model(data, sampler: str, seed: int, batch_size):
    public = ~data.train_mask
    data = data.clone()
    data.x = (data.x - data.x[public].mean()) / data.x[public].std()
    torch.manual_seed(seed)
    model = Net(data.num_features, 64, int(data.y.max()) + 1)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    pt = gp.make_private(model, opt, data, sampler=sampler, epsilon=8.0, seed=seed,
                         batch_size=batch_size)
    for batch in pt.loader:
        opt.zero_grad()
        out = model(batch.x, batch.edge_index)
        F.cross_entropy(out[batch.center], batch.y[batch.center]).backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        pred = model(data.x, data.edge_index).argmax(1)
    acc = float((pred[data.test_mask] == data.y[data.test_mask]).float().mean())
    return acc, pt.epsilon


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int_list, default="0,1,2")
    ap.add_argument("--data-root", default="../shared/datasets")
    ap.add_argument("--batch-size", type=int, default=None,
                    help="degree_bounded batch (default: the sampler's)")
    args = ap.parse_args()
    seeds = args.seeds
    rows = {"built-in heterpoisson": [], "own model, heterpoisson": [],
            "own model, degree_bounded": []}
    for seed in seeds:
        split = dict(split="random", train_frac=0.8, val_frac=0.0, test_frac=0.2)
        t = time.perf_counter()
        r = gp.train("computers", method="heterpoisson", epsilon=8.0, seed=seed,
                     data_root=args.data_root, **split)
        rows["built-in heterpoisson"].append((r.metrics["test_accuracy"], r.epsilon))
        print(f"seed {seed} built-in heterpoisson {r.metrics['test_accuracy']:.4f} "
              f"eps {r.epsilon:.3f} ({time.perf_counter() - t:.0f} s)", flush=True)
        data = gp.load_dataset("computers", root=args.data_root, seed=seed, **split)
        for sampler, batch in (("heterpoisson", None), ("degree_bounded", args.batch_size)):
            t = time.perf_counter()
            acc, eps = user_model(data, sampler, seed, batch)
            rows[f"own model, {sampler}"].append((acc, eps))
            print(f"seed {seed} own model {sampler} {acc:.4f} eps {eps:.3f} "
                  f"({time.perf_counter() - t:.0f} s)", flush=True)
    base = statistics.mean(a for a, _ in rows["built-in heterpoisson"])
    print(f"\n{'':<28}{'mean acc':>9}{'max eps':>9}  seeds: " + " ".join(map(str, seeds)))
    for name, cells in rows.items():
        mean = statistics.mean(a for a, _ in cells)
        verdict = "" if name.startswith("built-in") else (
            "  >= built-in - 2 points" if mean >= base - 0.02 else "  BELOW built-in - 2 points")
        print(f"{name:<28}{mean:>9.4f}{max(e for _, e in cells):>9.3f}  "
              + " ".join(f"{a:.4f}" for a, _ in cells) + verdict)


if __name__ == "__main__":
    main()
