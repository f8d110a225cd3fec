"""Per-step time, per-epoch time and peak memory of node-level DP training from 10^5 to 10^7 nodes.

For every size in ``--sizes`` the script generates (once, into ``--workdir``) a CSBM graph with
average degree ``--avg-degree`` and ``--features`` float32 features with
`gnnprivacy.datasets.stream.generate_large_graph` (streamed in chunks), then for every
method in ``--methods`` fits, in a forked child (so each peak RSS is that run's own):

* ``heterpoisson``: HeterPoisson GCN with a FIXED expected batch ``--batch``
  (``q_b = batch / |V_tr|``), ``--steps`` steps, noise multiplier 1 (no calibration) and
  ``degree_public=True`` (the accountant maximises over the real largest degree);
* ``dpgnn``: DP-GNN with batch ``--batch``, ``--steps`` steps, noise multiplier 1;

on the memory-mapped graph (`large_graph_data`: nothing is
copied at load), then scores ``--eval-nodes`` test nodes (chunked private inference). It
prints, side by side: the median step time (wall and CPU), the mean CPU time per step in
the batch sampler (``sample()``), set-up time (fit start to first
step: sampler, degree bounding, feature normalisation), the per-epoch time derived as
``median step x steps per epoch`` (``|V_tr| / batch``), evaluation time, and the peak RSS of
the child; then the log-log slope of the step time in ``N`` per method (issue 15 accepts
<= 0.1 for heterpoisson) and whether the largest run stayed within 16 GiB peak RSS.

MEMORY. Sizes above 10^6 run only when ``/proc/meminfo`` shows at least ``--min-free-gib``
(18) GiB available, and are skipped with a message otherwise (on a shared machine leave the
10^7 run for a quiet one). Generation needs ~32 bytes per node of RAM plus one chunk, and
``N * (features * 4 + avg_degree * 16)`` bytes of disk (about 8 GB at 10^7).

Example::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_scale.py --sizes 1e5,1e6
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_scale.py --sizes 1e5,1e6,1e7
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import resource
import statistics
import time
from pathlib import Path


def available_gib() -> float:
    """``MemAvailable`` from ``/proc/meminfo`` in GiB (``inf`` where unknown)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return math.inf


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


class StepClock:
    """A trainer ``progress`` factory recording wall and CPU time of every step."""

    def __init__(self):
        self.start = time.perf_counter()
        self.first = None
        self.marks: list[tuple[float, float]] = []

    def __call__(self, _name: str, _total: int) -> StepClock:
        self.first = (time.perf_counter(), time.process_time())
        return self

    def update(self, _n: int = 1) -> None:
        self.marks.append((time.perf_counter(), time.process_time()))

    def steps(self) -> list[tuple[float, float]]:
        marks = [self.first] + self.marks
        return [(b[0] - a[0], b[1] - a[1]) for a, b in zip(marks, marks[1:])]


def _split(data, *, train_frac: float, eval_nodes: int, seed: int):
    import torch

    n = data.num_nodes
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    n_train = int(train_frac * n)
    masks = {k: torch.zeros(n, dtype=torch.bool) for k in ("train_mask", "val_mask", "test_mask")}
    masks["train_mask"][perm[:n_train]] = True
    test = perm[n_train:] if eval_nodes <= 0 else perm[n_train:n_train + eval_nodes]
    masks["test_mask"][test] = True
    for k, v in masks.items():
        data[k] = v
    data.num_classes = int(data.y.max()) + 1
    return n_train


def _time_sampling(cpu: list[float]) -> None:
    """Accumulate the CPU seconds of every batch-sampler call into ``cpu[0]`` (this child
    process only: the class attribute is replaced after the fork)."""
    from gnnprivacy.sampling import HeterPoissonSampler
    from gnnprivacy.sampling.minibatch import NodeBatchSampler

    for cls in (HeterPoissonSampler, NodeBatchSampler):
        def timed(self, *a, _inner=cls.sample, **kw):
            t0 = time.process_time()
            try:
                return _inner(self, *a, **kw)
            finally:
                cpu[0] += time.process_time() - t0

        cls.sample = timed


def run_one(method: str, folder: str, args, queue) -> None:
    """Child process: map the graph, fit, score; report timings and peak RSS."""
    import torch

    from gnnprivacy.datasets.stream import large_graph_data, open_large_graph
    from gnnprivacy.training.node_dp import DPGNNTrainer, HeterPoissonTrainer

    torch.set_num_threads(1)
    sample_cpu = [0.0]
    _time_sampling(sample_cpu)
    rss_start = peak_rss_gib()
    graph = open_large_graph(folder)
    data = large_graph_data(graph)
    n_train = _split(data, train_frac=args.train_frac, eval_nodes=args.eval_nodes, seed=0)
    clock = StepClock()
    common = dict(steps=args.steps, noise_multiplier=1.0, generator=0, progress=clock)
    if method == "heterpoisson":
        trainer = HeterPoissonTrainer("gcn", q_b=min(1.0, args.batch / n_train),
                                      degree_public=True, **common)
    else:
        trainer = DPGNNTrainer(batch_size=min(args.batch, n_train), **common)
    trainer.fit(data)
    sample_ms = 1e3 * sample_cpu[0] / max(trainer.steps_, 1)
    t_fit = time.perf_counter() - clock.start
    rss_fit = peak_rss_gib()
    t0 = time.perf_counter()
    scores = trainer.score(data)
    t_eval = time.perf_counter() - t0
    steps = clock.steps()[1:] or clock.steps()  # drop the first (warm-up) step
    step_wall = statistics.median(s[0] for s in steps)
    queue.put({"method": method, "n": graph.num_nodes, "n_train": n_train,
               "step_wall": step_wall, "step_cpu": statistics.median(s[1] for s in steps),
               "sample_ms": sample_ms,
               "setup": clock.first[0] - clock.start, "fit": t_fit,
               "epoch": step_wall * n_train / args.batch, "eval": t_eval,
               "acc": scores.get("test_accuracy", float("nan")), "rss_start": rss_start,
               "rss_fit": rss_fit, "rss_end": peak_rss_gib()})


def ensure_graph(n: int, args) -> Path:
    from gnnprivacy.datasets.stream import generate_large_graph

    folder = Path(args.workdir) / f"csbm-n{n}-d{args.avg_degree:g}-f{args.features}"
    if not (folder / "meta.json").exists():
        t0 = time.perf_counter()
        generate_large_graph(folder, num_nodes=n, num_features=args.features,
                             avg_degree=args.avg_degree, seed=0, overwrite=True)
        print(f"generated N={n:.0e} in {time.perf_counter() - t0:.1f} s -> {folder}",
              flush=True)
    return folder


def slope(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of log(time) against log(N)."""
    if len(points) < 2:
        return float("nan")
    xs = [math.log(n) for n, _ in points]
    ys = [math.log(t) for _, t in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return (sum((x - mx) * (y - my) for x, y in zip(xs, ys))
            / sum((x - mx) ** 2 for x in xs))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1e5,1e6,1e7", help="node counts, comma-separated")
    ap.add_argument("--methods", default="heterpoisson,dpgnn")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=4096, help="expected batch (fixed across N)")
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--avg-degree", type=float, default=10.0)
    ap.add_argument("--train-frac", type=float, default=0.5)
    ap.add_argument("--eval-nodes", type=int, default=100_000,
                    help="test nodes scored by chunked private inference (0: all non-training)")
    ap.add_argument("--workdir", default=os.environ.get("GNNPRIVACY_SCALE_DIR",
                                                        "/tmp/gnnprivacy-scale"))
    ap.add_argument("--min-free-gib", type=float, default=18.0,
                    help="sizes above 1e6 run only with this much memory available")
    args = ap.parse_args(argv)
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    methods = args.methods.split(",")
    ctx = mp.get_context("fork")
    rows = []
    for n in sizes:
        if n > 1_000_000 and available_gib() < args.min_free_gib:
            print(f"SKIPPED N={n:.0e}: {available_gib():.1f} GiB available < "
                  f"{args.min_free_gib} GiB (run it on a quiet machine)", flush=True)
            continue
        folder = ensure_graph(n, args)
        for method in methods:
            queue = ctx.Queue()
            child = ctx.Process(target=run_one, args=(method, str(folder), args, queue))
            child.start()
            child.join()
            if child.exitcode != 0:
                print(f"{method} N={n:.0e}: child failed (exit {child.exitcode})", flush=True)
                continue
            rows.append(queue.get())
            r = rows[-1]
            print(f"done {method} N={n:.0e}: step {r['step_wall'] * 1e3:.1f} ms, "
                  f"peak RSS {r['rss_end']:.2f} GiB", flush=True)
    print(f"\nsteps={args.steps}, batch={args.batch}, features={args.features}, "
          f"avg degree={args.avg_degree:g}, train frac={args.train_frac}, eval nodes="
          f"{args.eval_nodes or 'all'}; per-epoch = median step x |V_tr|/batch")
    print(f"{'method':<13} {'N':>9} {'step ms':>8} {'step CPU ms':>12} {'sample CPU ms':>14} "
          f"{'setup s':>8} "
          f"{'epoch s':>9} {'eval s':>8} {'test acc':>9} {'RSS fit GiB':>12} {'RSS end GiB':>12}")
    for r in rows:
        print(f"{r['method']:<13} {r['n']:>9.0e} {r['step_wall'] * 1e3:8.1f} "
              f"{r['step_cpu'] * 1e3:12.1f} {r['sample_ms']:14.1f} {r['setup']:8.1f} "
              f"{r['epoch']:9.1f} "
              f"{r['eval']:8.1f} {r['acc']:9.3f} {r['rss_fit']:12.2f} {r['rss_end']:12.2f}")
    for method in methods:
        pts = [(r["n"], r["step_cpu"]) for r in rows if r["method"] == method]
        ptw = [(r["n"], r["step_wall"]) for r in rows if r["method"] == method]
        rest = [(r["n"], max(r["step_cpu"] - r["sample_ms"] / 1e3, 1e-9))
                for r in rows if r["method"] == method]
        print(f"log-log slope of the step time in N, {method}: CPU {slope(pts):.3f}, "
              f"wall {slope(ptw):.3f}, CPU without sampling {slope(rest):.3f} "
              f"(sizes {[f'{n:.0e}' for n, _ in pts]})"
              + ("  (acceptance <= 0.1)" if method == "heterpoisson" else ""))
    big = [r for r in rows if r["n"] >= 10_000_000]
    for r in big:
        print(f"{r['method']} at N={r['n']:.0e}: peak RSS {r['rss_end']:.2f} GiB "
              f"({'within' if r['rss_end'] <= 16 else 'ABOVE'} 16 GiB)")


if __name__ == "__main__":
    main()
