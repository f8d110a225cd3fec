"""Page faults and time per DP step (DP-GNN on Amazon Computers, HeterPoisson on the same).

Issue 15 item 3: the DP-GNN step spent much of its time in the kernel, faulting in
temporaries that glibc had just returned to the OS (``OneLayerGCN.forward``,
``_indexed_clipped_sums``, ``_indexed_backs``). This script trains each method for
``--steps`` noisy steps in a fresh subprocess per variant and prints, side by side, the
minor page faults and the wall time per step (medians over steps 3..T), measured with
``resource.getrusage`` from the trainer's progress callback:

* ``malloc_tuning=off``: ``GNNPRIVACY_MALLOC_TUNE=0`` (glibc defaults);
* ``malloc_tuning=on``: the trainers' default (`gnnprivacy.training.memory`).

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_page_faults.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, resource, statistics, sys, time
from gnnprivacy.datasets import load_dataset
from gnnprivacy.training.node_dp import DPGNNTrainer, HeterPoissonTrainer

method, steps, root = sys.argv[1], int(sys.argv[2]), sys.argv[3]
data = load_dataset("computers", root=root, split="random", seed=0, train_frac=0.8,
                    val_frac=0.0, test_frac=0.2)
marks = []

class Probe:
    def update(self, n):
        marks.append((time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt))

if method == "dpgnn":
    tr = DPGNNTrainer(max_degree=5, batch_size=10000, steps=steps, noise_multiplier=1.0,
                      generator=0, progress=lambda *a: Probe())
else:
    tr = HeterPoissonTrainer(steps=steps, noise_multiplier=1.0, degree_public=True,
                             generator=0, progress=lambda *a: Probe())
tr.fit(data)
dt = [b[0] - a[0] for a, b in zip(marks[2:], marks[3:])]
df = [b[1] - a[1] for a, b in zip(marks[2:], marks[3:])]
print(json.dumps({"step_s": statistics.median(dt), "faults_per_step": statistics.median(df),
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def measure(method: str, steps: int, root: str, tune: bool) -> dict:
    env = {**os.environ, "GNNPRIVACY_MALLOC_TUNE": "1" if tune else "0"}
    out = subprocess.run([sys.executable, "-c", CHILD, method, str(steps), root], env=env,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--root", default=os.environ.get("GNNPRIVACY_SHARED_DATASETS",
                                                     "/work/shared/datasets"))
    ap.add_argument("--methods", default="dpgnn,heterpoisson")
    args = ap.parse_args()
    print(f"{'method':<13}{'malloc tuning':>14}{'faults/step':>13}{'s/step':>9}{'peak MB':>9}")
    for method in args.methods.split(","):
        for tune in (False, True):
            r = measure(method, args.steps, args.root, tune)
            print(f"{method:<13}{'on' if tune else 'off':>14}{r['faults_per_step']:>13.0f}"
                  f"{r['step_s']:>9.3f}{r['peak_rss_mb']:>9.0f}", flush=True)


if __name__ == "__main__":
    main()
