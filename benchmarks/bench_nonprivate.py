"""Seconds per epoch of non-private GCN training on Coauthor Physics (34,493 nodes, 8,415 features).

Times complete epochs of :class:`gnnprivacy.training.FullBatchTrainer` (one Adam step on the whole
graph + the validation forward) and, with ``--mini-batch``, of
:class:`gnnprivacy.training.MiniBatchTrainer` (neighbour-sampled batches over all training nodes +
the validation forward), through the trainers' progress callback, and prints the median over
``--epochs`` epochs (the first epoch is a warm-up and is not counted).

Example::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_nonprivate.py \\
        --data-root ../shared/datasets --epochs 5 --mini-batch
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time


class EpochClock:
    """Progress object recording the wall time at the end of every epoch."""

    def __init__(self):
        self.stamps = [time.perf_counter()]

    def update(self, n: int) -> None:
        self.stamps.append(time.perf_counter())

    def epoch_seconds(self) -> list[float]:
        return [b - a for a, b in zip(self.stamps, self.stamps[1:])]


def time_trainer(trainer_cls, data, *, epochs: int, **kwargs) -> list[float]:
    """Per-epoch seconds of ``epochs + 1`` epochs, the warm-up epoch dropped."""
    clock = EpochClock()
    trainer_cls("gcn", epochs=epochs + 1, patience=epochs + 1, generator=0,
                progress=lambda desc, total: clock, **kwargs).fit(data)
    return clock.epoch_seconds()[1:]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default=os.environ.get("GNNPRIVACY_DATA"),
                        help="folder holding Physics/raw/ms_academic_phy.npz "
                             "(default $GNNPRIVACY_DATA)")
    parser.add_argument("--cache-dir", default=None,
                        help="PyG processing cache (default: a temporary folder)")
    parser.add_argument("--epochs", type=int, default=5, help="timed epochs (median reported)")
    parser.add_argument("--hidden", type=int, default=64, help="hidden channels")
    parser.add_argument("--mini-batch", action="store_true", help="also time mini-batch epochs")
    parser.add_argument("--batch-size", type=int, default=1024, help="mini-batch seed nodes")
    parser.add_argument("--fanout", default="10,10", help="mini-batch neighbours per hop")
    args = parser.parse_args(argv)

    import torch

    from gnnprivacy.datasets import load_dataset
    from gnnprivacy.training import FullBatchTrainer, MiniBatchTrainer

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        data = load_dataset("physics", root=args.data_root, cache_dir=args.cache_dir or tmp)
        print(f"loaded physics in {time.perf_counter() - t0:.1f} s: {data.num_nodes} nodes, "
              f"{data.num_edges} edges, {data.num_features} features, "
              f"{int(data.train_mask.sum())} training nodes; torch threads "
              f"{torch.get_num_threads()}")
    runs = [("full-batch", FullBatchTrainer, {})]
    if args.mini_batch:
        runs.append((f"mini-batch (batch {args.batch_size}, fanout {args.fanout})",
                     MiniBatchTrainer, {"batch_size": args.batch_size, "fanouts": args.fanout}))
    for label, cls, extra in runs:
        seconds = time_trainer(cls, data, epochs=args.epochs, hidden_channels=args.hidden, **extra)
        print(f"GCN {label}: {statistics.median(seconds):.3f} s/epoch (median of {len(seconds)}; "
              f"min {min(seconds):.3f}, max {max(seconds):.3f})")


if __name__ == "__main__":
    main()
