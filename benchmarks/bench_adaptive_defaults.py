"""Acceptance of issue 16: every node-DP method at its defaults (preset auto), eps 8, 80/20.

Usage: python benchmarks/bench_adaptive_defaults.py DATASET [METHOD ...]
Prints one JSON line per run (method, seed, test accuracy, resolved hyperparameters); the
summary line per method gives the mean over seeds. Physics is large: one run per method
per seed, nothing more.
"""

import json
import sys
import time

from gnnprivacy.method.runner import run

dataset = sys.argv[1]
methods = sys.argv[2:] or ["heterpoisson", "dpgnn", "dpmlp", "gcn"]
base = {"dataset": dataset, "data_root": "/work/shared/datasets", "train_frac": 0.8,
        "val_frac": 0.0, "test_frac": 0.2}
for method in methods:
    accs = []
    for seed in (0, 1, 2):
        values = {**base, "method": method, "seed": seed}
        if method not in ("gcn", "mlp"):
            values["epsilon"] = 8.0
        t = time.time()
        rec = run(values, save=False)
        accs.append(rec.metrics["test_accuracy"])
        print(json.dumps({"dataset": dataset, "method": method, "seed": seed,
                          "test_accuracy": round(accs[-1], 4), "epsilon": rec.epsilon,
                          "hparams": rec.info.get("hparams"), "sec": round(time.time() - t, 1)}),
              flush=True)
    print(json.dumps({"dataset": dataset, "method": method, "summary": True,
                      "mean_test_accuracy": round(sum(accs) / len(accs), 4),
                      "per_seed": [round(a, 4) for a in accs]}), flush=True)
