"""Time one DP-GNN step against a non-private step on Amazon Computers (side by side).

Setting of spec 002's speed acceptance (issue 5): Amazon ``computers`` (13,752 nodes, 767
features, 10 classes), random 80/20 split, degree bound ``K = 5``, batch ``m = 10,000``,
the one-layer GCN ``767-100-100-10`` of DP-GNN (1 hop). The 002 authors' JAX code took
36.9 s per DP step against 0.049 s for its non-private step (~750x, 13.6 GB peak).

Timed, interleaved, median over ``--repeats``:

* ``nonprivate``:  forward on the padded ``(m, K+1)`` batch, mean loss, backward, Adam;
* ``dp``:          sample a batch + gather its rows + per-node clipped gradients (engine,
  one backward) + Gaussian noise + Adam;
* ``dp_nosample``: the same DP step on the fixed batch of ``nonprivate`` (no sampling);
* ``sample_only``: drawing the batch and gathering its padded rows.

The model is the one `DPGNNTrainer` trains (first
encoder layer an ``IndexedLinear``: ``x Wᵀ`` over distinct nodes, then gathered; per-node
input Gram matrices cached once); ``--plain-encoder`` times the naive model that gathers
``x[nodes]`` into a ``(m, K+1, d)`` block first.

Also timed once: the degree-bounded sampling (Algorithm 2) and the full-graph evaluation
forward. Peak RSS from ``resource.getrusage`` after loading and at the end.

Nothing of ``bench_dp_step.py`` fits here (its step helpers are for StarGNN, its timing
loop is inline), so the interleaved timing loop is `interleaved_medians` below.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_dpgnn_step.py``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from collections.abc import Callable

import torch
from torch.nn import functional as F

from gnnprivacy.datasets import load_dataset
from gnnprivacy.nn.dpgnn import OneLayerGCN
from gnnprivacy.sampling import NodeBatchSampler, sample_degree_bounded_subgraphs
from gnnprivacy.training.dp import DPEngine, make_optimizer
from gnnprivacy.training.node_dp import dpgnn as _dpgnn_trainer  # noqa: F401 (IndexedLinear rule)

AUTHORS = {"dp_s": 36.9, "nonprivate_s": 0.049, "peak_gb": 13.6}


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far (MiB; Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def interleaved_medians(timers: dict[str, Callable[[], object]], repeats: int,
                        warmup: int = 1) -> dict[str, float]:
    """Median seconds per timer, running the timers round-robin ``repeats`` times."""
    for _ in range(warmup):
        for fn in timers.values():
            fn()
    times: dict[str, list[float]] = {k: [] for k in timers}
    for _ in range(repeats):
        for k, fn in timers.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def timed(fn: Callable[[], object]) -> tuple[object, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-root", default="/work/shared/datasets")
    ap.add_argument("--dataset", default="computers")
    ap.add_argument("--max-degree", type=int, default=5)
    ap.add_argument("--batch", type=int, default=10000)
    ap.add_argument("--hidden", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--plain-encoder", action="store_true",
                    help="gather x[nodes] into a (m, K+1, d) block and use nn.Linear (the "
                         "pre-IndexedLinear model) instead of the trainer's IndexedLinear")
    args = ap.parse_args()

    data, t_load = timed(lambda: load_dataset(
        args.dataset, root=args.data_root, split="random", train_frac=0.8, val_frac=0.0,
        test_frac=0.2))
    rss_data = peak_rss_mb()
    train = data.train_mask.nonzero().flatten()
    gen = torch.Generator().manual_seed(0)
    bounded, t_bound = timed(lambda: sample_degree_bounded_subgraphs(
        data.edge_index, data.num_nodes, train_nodes=train, max_degree=args.max_degree,
        generator=gen))
    m = min(args.batch, int(train.numel()))
    batches = NodeBatchSampler(int(train.numel()), batch_size=m, sampling="fixed")
    x, y = data.x, data.y
    torch.manual_seed(0)
    model = OneLayerGCN(x.shape[1], int(data.num_classes), hidden_channels=args.hidden,
                        indexed_input=not args.plain_encoder)
    t_grams = 0.0
    if not args.plain_encoder:  # what DPGNNTrainer does once, before training
        _, t_grams = timed(lambda: model.encoder[0].cache_grams(x, bounded.neighbors))
    opt = make_optimizer("adam", model.parameters(), lr=0.003)
    engine = DPEngine(model, opt, clip_norm=1.0, noise_multiplier=2.0 * bounded.max_occurrence,
                      expected_batch_size=m, generator=torch.Generator().manual_seed(1))
    nodes, mask = bounded.gather(batches.sample(gen))
    print(f"{args.dataset}: {data.num_nodes} nodes, {data.edge_index.shape[1]} directed edges, "
          f"{x.shape[1]} features, {len(train)} train nodes; K={args.max_degree}, m={m}, "
          f"mean bounded degree {float(bounded.degrees().float().mean()):.2f}; model "
          f"{x.shape[1]}-{args.hidden}-{args.hidden}-{int(data.num_classes)}; torch threads "
          f"{torch.get_num_threads()}; encoder {'plain' if args.plain_encoder else 'indexed'}; load average {os.getloadavg()[0]:.2f}")

    def nonprivate() -> None:
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x, nodes, mask), y[nodes[:, 0]]).backward()
        opt.step()

    def dp() -> None:
        n, k = bounded.gather(batches.sample(gen))
        engine.step(lambda: F.cross_entropy(model(x, n, k), y[n[:, 0]], reduction="none"))

    def dp_nosample() -> None:
        engine.step(lambda: F.cross_entropy(model(x, nodes, mask), y[nodes[:, 0]],
                                            reduction="none"))

    med = interleaved_medians({"nonprivate": nonprivate, "dp": dp, "dp_nosample": dp_nosample,
                               "sample_only": lambda: bounded.gather(batches.sample(gen))},
                              args.repeats)
    with torch.no_grad():
        _, t_eval = timed(lambda: model.forward_full(x, data.edge_index))
    rss_end = peak_rss_mb()

    print(f"{'step':<14}{'median ms':>12}{'x nonprivate':>15}")
    for k, v in med.items():
        print(f"{k:<14}{1e3 * v:>12.2f}{v / med['nonprivate']:>15.2f}")
    print(f"ratio dp / nonprivate           = {med['dp'] / med['nonprivate']:.2f}  (target <= 1.5)")
    print(f"ratio dp_nosample / nonprivate  = {med['dp_nosample'] / med['nonprivate']:.2f}")
    print(f"one-off: load {t_load:.2f} s, degree-bounded sampling {t_bound:.2f} s, "
          f"Gram cache {t_grams:.2f} s, "
          f"full-graph eval forward {1e3 * t_eval:.1f} ms")
    print(f"peak RSS: after loading {rss_data:.0f} MiB, at the end {rss_end:.0f} MiB")
    print(f"authors (JAX, spec 002): dp {AUTHORS['dp_s']} s, nonprivate "
          f"{AUTHORS['nonprivate_s']} s, ratio ~{AUTHORS['dp_s'] / AUTHORS['nonprivate_s']:.0f}x, "
          f"peak {AUTHORS['peak_gb']} GB; ours dp is "
          f"{AUTHORS['dp_s'] / med['dp']:.0f}x faster than theirs")


if __name__ == "__main__":
    main()
