"""Seconds per epoch of non-private GCN training beside a plain hand-written PyG loop.

Times complete epochs of `gnnprivacy.training.FullBatchTrainer` (one Adam step on the whole
graph + the validation forward, through the trainer's progress callback) and, in the same
process with the same threads, of two plain PyG loops doing the same work (2-layer GCN, width
``--hidden``, dropout 0.5 on the input and hidden layer, Adam lr 0.01, weight decay 5e-4, one
training step and one validation forward with accuracy and loss per epoch):

* ``plain PyG (edge_index)``: ``GCNConv(cached=True)`` layers fed ``data.edge_index``, as in
  PyG's own ``examples/gcn.py``;
* ``plain PyG (sparse adj_t)``: the same layers fed the sparse CSR adjacency from
  ``ToSparseTensor(layout=torch.sparse_csr)``, PyG's recommended fast path.

Prints, per loop, the median wall and CPU seconds per epoch (the first epoch is a warm-up and
is not counted), the minor page faults per epoch, and the ratio of the trainer's CPU time to
each plain loop's (acceptance of issue 15: at most 1.1 against the edge_index loop). No loop
here tunes glibc's malloc (``gnnprivacy.training.memory.tune_malloc`` is applied by the DP
trainers only), so the page faults are each loop's own. With
``--mini-batch`` it also times `gnnprivacy.training.MiniBatchTrainer`.

Example::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_nonprivate.py \\
        --data-root ../shared/datasets --dataset computers --epochs 10
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import time
import warnings


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


class EpochClock:
    """Progress object recording wall time, CPU time and page faults at the end of every epoch."""

    def __init__(self):
        self.stamps = [self._now()]

    @staticmethod
    def _now() -> tuple[float, float, int]:
        return time.perf_counter(), time.process_time(), _faults()

    def update(self, n: int = 1) -> None:
        self.stamps.append(self._now())

    def per_epoch(self) -> list[tuple[float, float, int]]:
        """(wall s, CPU s, page faults) of every epoch after the warm-up epoch."""
        deltas = [tuple(b[i] - a[i] for i in range(3))
                  for a, b in zip(self.stamps, self.stamps[1:])]
        return deltas[1:]


def time_trainer(trainer_cls, data, *, epochs: int, **kwargs) -> list[tuple[float, float, int]]:
    """Per-epoch (wall, CPU, faults) of ``epochs + 1`` epochs, the warm-up epoch dropped."""
    clock = EpochClock()
    trainer_cls("gcn", epochs=epochs + 1, patience=epochs + 1, generator=0,
                progress=lambda desc, total: clock, **kwargs).fit(data)
    return clock.per_epoch()


def time_plain_loop(data, *, epochs: int, hidden: int, sparse_adj: bool):
    """A plain PyG training loop doing one trainer epoch's work; per-epoch (wall, CPU, faults)."""
    import torch
    import torch.nn.functional as F
    from torch_geometric.nn import GCNConv

    class Net(torch.nn.Module):
        def __init__(self, c_in: int, c_hidden: int, c_out: int):
            super().__init__()
            self.conv1 = GCNConv(c_in, c_hidden, cached=True)
            self.conv2 = GCNConv(c_hidden, c_out, cached=True)

        def forward(self, x, edge_index):
            x = F.dropout(x, p=0.5, training=self.training)
            x = F.relu(self.conv1(x, edge_index))
            x = F.dropout(x, p=0.5, training=self.training)
            return self.conv2(x, edge_index)

    if sparse_adj:
        import torch_geometric.transforms as T

        graph = T.ToSparseTensor(layout=torch.sparse_csr)(data.clone())
        edges = graph.adj_t
    else:
        edges = data.edge_index
    torch.manual_seed(0)
    model = Net(data.num_features, hidden, int(data.y.max()) + 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    x, y, train, val = data.x, data.y, data.train_mask, data.val_mask
    clock = EpochClock()
    for _ in range(epochs + 1):
        model.train()
        optimizer.zero_grad()
        out = model(x, edges)
        loss = F.cross_entropy(out[train], y[train])
        loss.backward()
        optimizer.step()
        model.eval()
        with torch.no_grad():
            out = model(x, edges)[val]
            float((out.argmax(1) == y[val]).float().mean()), float(F.cross_entropy(out, y[val]))
        clock.update()
    return clock.per_epoch()


def _summary(label: str, rows) -> float:
    wall = statistics.median(r[0] for r in rows)
    cpu = statistics.median(r[1] for r in rows)
    faults = statistics.median(r[2] for r in rows)
    print(f"{label:<40} {wall:9.3f} {cpu:9.3f} {faults:12.0f}")
    return cpu


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default=os.environ.get("GNNPRIVACY_DATA"),
                        help="folder holding the raw datasets (default $GNNPRIVACY_DATA)")
    parser.add_argument("--dataset", default="computers", help="dataset name (default computers)")
    parser.add_argument("--cache-dir", default=None,
                        help="PyG processing cache (default: a temporary folder)")
    parser.add_argument("--epochs", type=int, default=10, help="timed epochs (median reported)")
    parser.add_argument("--hidden", type=int, default=64, help="hidden channels")
    parser.add_argument("--mini-batch", action="store_true", help="also time mini-batch epochs")
    parser.add_argument("--batch-size", type=int, default=1024, help="mini-batch seed nodes")
    parser.add_argument("--fanout", default="10,10", help="mini-batch neighbours per hop")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", message=".*[Ss]parse.*")

    import torch

    from gnnprivacy.datasets import load_dataset
    from gnnprivacy.training import FullBatchTrainer, MiniBatchTrainer

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        data = load_dataset(args.dataset, root=args.data_root, cache_dir=args.cache_dir or tmp)
        print(f"loaded {args.dataset} in {time.perf_counter() - t0:.1f} s: {data.num_nodes} "
              f"nodes, {data.num_edges} edges, {data.num_features} features, "
              f"{int(data.train_mask.sum())} training nodes; torch threads "
              f"{torch.get_num_threads()}; median of {args.epochs} epochs after a warm-up")
    print(f"{'loop':<40} {'wall s':>9} {'CPU s':>9} {'faults':>12}   (per epoch)")
    ours = _summary("gnnprivacy FullBatchTrainer (gcn)",
                    time_trainer(FullBatchTrainer, data, epochs=args.epochs,
                                 hidden_channels=args.hidden))
    plain = _summary("plain PyG (edge_index)",
                     time_plain_loop(data, epochs=args.epochs, hidden=args.hidden,
                                     sparse_adj=False))
    plain_sparse = _summary("plain PyG (sparse adj_t)",
                            time_plain_loop(data, epochs=args.epochs, hidden=args.hidden,
                                            sparse_adj=True))
    if args.mini_batch:
        _summary(f"MiniBatchTrainer (batch {args.batch_size}, fanout {args.fanout})",
                 time_trainer(MiniBatchTrainer, data, epochs=args.epochs,
                              hidden_channels=args.hidden, batch_size=args.batch_size,
                              fanouts=args.fanout))
    print(f"ratio trainer / plain PyG (edge_index), CPU: {ours / plain:.2f} "
          f"(acceptance <= 1.1)")
    print(f"ratio trainer / plain PyG (sparse adj_t), CPU: {ours / plain_sparse:.2f}")


if __name__ == "__main__":
    main()
