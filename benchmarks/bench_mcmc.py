"""PHRG MCMC speed (spec 001 §3.4): moves per minute on Cora and Facebook, compiled vs Python.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_mcmc.py [--steps 2000000]``.
Target (issue 13): at least 10^6 MCMC steps per minute on Cora. Each row fits the sound-mode
chain (joint acceptance, eps_e1 = 0.5) on a random 30 % private / 70 % public edge split,
with the incremental likelihood checked against a full recomputation after every 2^18 moves.
The "cora(loop-py)" row runs the move loop uncompiled (numba's ``py_func``; its helpers stay
compiled) on a short chain, to show what compiling the loop buys.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from gnnprivacy.datasets import load_dataset
from gnnprivacy.ldp.heterorr import _kernels as K
from gnnprivacy.ldp.heterorr.edge_rr import split_edges
from gnnprivacy.ldp.heterorr.hrg import build_dendrogram, fit_mcmc, temperature


def _chain(name: str, root: str, steps: int, seed: int = 0):
    data = load_dataset(name, root=root)
    rng = np.random.default_rng(seed)
    pub, pri = split_edges(data.edge_index, data.num_nodes, private_frac=0.3, rng=rng)
    D = build_dendrogram(data.num_nodes, pub, pri, np.ones(data.num_nodes, bool), rng)
    T = temperature(0.5, data.num_nodes)
    fit_mcmc(D, temperature=T, steps=1000, rng=rng)          # compile / warm up
    start = time.perf_counter()
    out = fit_mcmc(D, temperature=T, steps=steps, rng=rng)
    elapsed = time.perf_counter() - start
    return data.num_nodes, out, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="/work/shared/datasets")
    parser.add_argument("--steps", type=int, default=2_000_000)
    args = parser.parse_args()
    print(f"numba available: {K.HAVE_NUMBA}")
    print(f"{'graph':10s} {'nodes':>7s} {'moves':>10s} {'seconds':>8s} {'moves/min':>12s} "
          f"{'accepted':>9s} {'max drift':>9s}")
    for name in ("cora", "facebook"):
        n, out, sec = _chain(name, args.root, args.steps)
        print(f"{name:10s} {n:7d} {out['steps']:10d} {sec:8.2f} {out['steps'] / sec * 60:12.3g} "
              f"{out['accepted'] / out['steps']:9.3f} {out['max_drift']:9.2g}")
    if K.HAVE_NUMBA:   # the same kernel, interpreted
        saved = K.mcmc_run
        K.mcmc_run = K.mcmc_run.py_func
        try:
            n, out, sec = _chain("cora", args.root, 20_000)
        finally:
            K.mcmc_run = saved
        print(f"{'cora(loop-py)':10s} {n:7d} {out['steps']:10d} {sec:8.2f} "
              f"{out['steps'] / sec * 60:12.3g} {out['accepted'] / out['steps']:9.3f} "
              f"{out['max_drift']:9.2g}")


if __name__ == "__main__":
    main()
