"""Time one full RGNN run (spec 004, Algorithm 3) on a dataset, phase by phase.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_rgnn.py --data-root ../shared/datasets \
        [--dataset facebook] [--kx 16] [--ky 16] [--epochs 100] [--select]
    OMP_NUM_THREADS=1 python benchmarks/bench_rgnn.py --data-root ../shared/datasets \
        --table2 --dataset cora [--select]          # Table II cells (eps_x = 1), 5 seeds

Phases: loading + grouping, the users' reports (GRR-FS, GRR), feature and label reconstruction
(sparse K-hop propagation; no dense N x N matrix), METIS, training (100 full-batch epochs), and
the end-to-end time of the same configuration through ``gnnprivacy.method.runner.run``.
``--table2`` instead runs ``rgnn`` and ``ldp-naive`` through ``runner.run`` with seeds
123-127 on the paper's random 50/25/25 split for the Table II cells of the dataset
(eps_x = 1) and prints mean +- population std beside the paper's numbers.

Use one thread (``OMP_NUM_THREADS=1``): on a shared 2-core machine, torch's scatter kernels
with 2 threads ran about 20x slower than with 1.
"""

from __future__ import annotations

import argparse
import time

import torch


def _timed(label: str, rows: list, fn):
    start = time.perf_counter()
    out = fn()
    rows.append((label, time.perf_counter() - start))
    return out


#: Spec 004 Table II, eps_x = 1: {dataset: {eps_y: (GraphSAGE naive, RGNN)}}.
PAPER_TABLE2 = {"cora": {3.0: (31.5, 77.8), 2.0: (28.0, 75.5), 1.0: (25.9, 67.5),
                         0.5: (20.4, 41.9)},
                "citeseer": {3.0: (24.4, 55.7), 2.0: (24.3, 52.6), 1.0: (20.5, 47.1),
                             0.5: (19.4, 36.2)},
                "facebook": {3.0: (46.4, 76.3), 2.0: (45.2, 75.9), 1.0: (35.5, 72.6),
                             0.5: (29.7, 64.5)}}


def table2(args) -> None:
    """Table II cells of ``args.dataset`` (eps_y from ``--eps-y``), 5 seeds, via runner.run."""
    import numpy as np

    import gnnprivacy.method.builtin.ldp  # noqa: F401  (registers the methods)
    from gnnprivacy.method.runner import run

    paper = PAPER_TABLE2.get(args.dataset, {})
    print(f"{'eps_y':>5}  {'method':<10} {'ours (mean +- std)':>20}  {'paper':>6}  per seed")
    for eps_y in args.eps_y:
        for col, method in enumerate(("ldp-naive", "rgnn")):
            extra = {"select_hparams": True} if method == "rgnn" and args.select else {}
            accs = [100 * run({"method": method, "dataset": args.dataset, "seed": seed,
                               "data_root": args.data_root, "split": "random", "eps_x": 1.0,
                               "eps_y": eps_y, **extra}, save=False).metrics["test_accuracy"]
                    for seed in range(123, 128)]
            ref = paper.get(eps_y, (float("nan"),) * 2)[col]
            print(f"{eps_y:>5}  {method:<10} {np.mean(accs):>12.1f} +- {np.std(accs):4.1f}  "
                  f"{ref:>6.1f}  {[round(a, 1) for a in accs]}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default="../shared/datasets")
    parser.add_argument("--dataset", default="facebook")
    parser.add_argument("--seed", type=int, default=123)
    parser.add_argument("--kx", type=int, default=16)
    parser.add_argument("--ky", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--select", action="store_true", help="also time select_hparams=True")
    parser.add_argument("--table2", action="store_true", help="run the Table II cells instead")
    parser.add_argument("--eps-y", type=float, nargs="+", default=[3.0, 2.0, 1.0])
    args = parser.parse_args()
    if args.table2:
        table2(args)
        return

    import gnnprivacy.method.builtin.ldp as ldp_methods
    from gnnprivacy.datasets import load_dataset
    from gnnprivacy.method.runner import run
    from gnnprivacy.ldp.reports import collect_reports
    from gnnprivacy.ldp.rgnn import ReconstructionCache, RGNNConfig, train_rgnn

    rows: list[tuple[str, float]] = []
    data = _timed("load dataset", rows, lambda: load_dataset(
        args.dataset, root=args.data_root, split="random", seed=args.seed))
    x, prep = _timed("public preprocessing", rows,
                     lambda: ldp_methods.binary_features(data, None))
    gen = torch.Generator().manual_seed(args.seed)
    view = _timed("user reports (GRR-FS + GRR)", rows, lambda: collect_reports(
        x, data.y, edge_index=data.edge_index, train_mask=data.train_mask,
        val_mask=data.val_mask, test_mask=data.test_mask, num_classes=int(data.num_classes),
        eps_x=1.0, eps_y=1.0, m=10, generator=gen))
    cache = _timed("build sparse A_hat", rows, lambda: ReconstructionCache(view))
    _timed(f"f_X, K_x={args.kx}", rows, lambda: cache.features(args.kx))
    _timed(f"f_Y, K_y={args.ky}", rows, lambda: cache.labels(args.ky))
    _timed("METIS (C=16)", rows, lambda: cache.partition(16, args.seed))
    cfg = RGNNConfig(kx=args.kx, ky=args.ky, epochs=args.epochs, dropout=0.5)
    fit = _timed(f"train {args.epochs} epochs", rows, lambda: train_rgnn(cache, cfg, generator=gen,
                                                                         partition_seed=args.seed))
    base = {"method": "rgnn", "dataset": args.dataset, "data_root": args.data_root,
            "split": "random", "seed": args.seed, "kx": args.kx, "ky": args.ky,
            "epochs": args.epochs}
    rec = _timed("full run via runner.run", rows, lambda: run(base, save=False))
    if args.select:
        _timed("full run, select_hparams=True", rows,
               lambda: run({**base, "select_hparams": True}, save=False))

    print(f"RGNN on {args.dataset}: N={data.num_nodes}, "
          f"edge_index columns={data.edge_index.size(1)}, d'={x.size(1)} "
          f"({prep['preprocessing']}), torch threads={torch.get_num_threads()}")
    width = max(len(label) for label, _ in rows)
    for label, seconds in rows:
        print(f"  {label:<{width}}  {seconds:8.2f} s")
    print(f"  test accuracy (component run / runner run): "
          f"{(fit.logits[data.test_mask].argmax(1) == data.y[data.test_mask]).float().mean():.3f}"
          f" / {rec.metrics['test_accuracy']:.3f}")


if __name__ == "__main__":
    main()
