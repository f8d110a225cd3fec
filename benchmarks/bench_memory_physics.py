"""Step time, fit time, accuracy and peak memory of node-level DP training on Coauthor Physics.

Physics has 34,493 nodes and 8,415 dense float32 features (a 1.16 GB feature matrix), so it
shows whether a trainer copies the features more often than it must. For each method in
``--methods`` (``heterpoisson`` = HeterPoisson GCN, spec 000; ``dpgnn`` = DP-GNN, spec 002)
the trainer is fitted at ``--epsilon`` on an 80/20 random split, in a forked child so that
each method's peak RSS is its own (data already loaded + that method's training), and the
script prints: median step time (from the trainer's progress callback), set-up time
(calibration, sampler, feature normalisation: fit start to first step), total fit time,
scoring time, test accuracy, and the peak RSS after loading and after fit + scoring.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_memory_physics.py``
(``--dpgnn-steps`` caps DP-GNN's steps when time is short; the default trains the full
schedule of each trainer).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_dpgnn_step import peak_rss_mb  # noqa: E402

from gnnprivacy.datasets import load_dataset  # noqa: E402
from gnnprivacy.training.node_dp import DPGNNTrainer, HeterPoissonTrainer  # noqa: E402


class StepClock:
    """A trainer ``progress`` factory recording the wall time of every step."""

    def __init__(self):
        self.start = time.perf_counter()
        self.first_step_start = None
        self.stamps: list[float] = []

    def __call__(self, _name: str, _total: int) -> "StepClock":
        self.first_step_start = time.perf_counter()
        return self

    def update(self, _n: int) -> None:
        self.stamps.append(time.perf_counter())

    def step_times(self) -> list[float]:
        marks = [self.first_step_start] + self.stamps
        return [b - a for a, b in zip(marks[:-1], marks[1:])]


def make_trainer(method: str, args, clock: StepClock):
    if method == "heterpoisson":
        return HeterPoissonTrainer("gcn", epsilon=args.epsilon, generator=0, progress=clock)
    return DPGNNTrainer(epsilon=args.epsilon, generator=0, progress=clock,
                        steps=args.dpgnn_steps, max_degree=args.max_degree)


def fit_one(method: str, args, data, queue) -> None:
    clock = StepClock()
    trainer = make_trainer(method, args, clock)
    trainer.fit(data)
    t_fit = time.perf_counter() - clock.start
    rss_fit = peak_rss_mb()
    t0 = time.perf_counter()
    scores = trainer.score(data)
    t_score = time.perf_counter() - t0
    steps = clock.step_times()
    queue.put({"method": method, "steps": len(steps), "step_median": statistics.median(steps),
               "setup": clock.first_step_start - clock.start, "fit": t_fit, "score": t_score,
               "test_accuracy": scores["test_accuracy"], "epsilon": trainer.epsilon_,
               "rss_fit": rss_fit, "rss_end": peak_rss_mb()})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-root", default="/work/shared/datasets")
    ap.add_argument("--methods", default="heterpoisson,dpgnn")
    ap.add_argument("--epsilon", type=float, default=8.0)
    ap.add_argument("--max-degree", type=int, default=10, help="DP-GNN's K")
    ap.add_argument("--dpgnn-steps", type=int, default=None)
    args = ap.parse_args()

    t0 = time.perf_counter()
    data = load_dataset("physics", root=args.data_root, split="random", train_frac=0.8,
                        val_frac=0.0, test_frac=0.2)
    t_load = time.perf_counter() - t0
    rss_data = peak_rss_mb()
    print(f"physics: {data.num_nodes} nodes, {data.edge_index.shape[1]} directed edges, "
          f"x {tuple(data.x.shape)} {data.x.dtype} ({data.x.numel() * 4 / 2**30:.2f} GiB); "
          f"load {t_load:.1f} s; peak RSS after loading {rss_data:.0f} MiB; load average "
          f"{os.getloadavg()[0]:.2f}", flush=True)
    ctx = mp.get_context("fork")
    for method in args.methods.split(","):
        queue = ctx.Queue()
        child = ctx.Process(target=fit_one, args=(method, args, data, queue))
        child.start()
        r = queue.get()
        child.join()
        print(f"{r['method']:<13} eps {r['epsilon']:.2f}  steps {r['steps']}  step median "
              f"{r['step_median']:.3f} s  set-up {r['setup']:.1f} s  fit {r['fit']:.1f} s  "
              f"score {r['score']:.1f} s  test acc {r['test_accuracy']:.4f}  peak RSS: after "
              f"fit {r['rss_fit']:.0f} MiB, after scoring {r['rss_end']:.0f} MiB; load average "
              f"{os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
