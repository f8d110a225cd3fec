"""Acceptance of issue 16: every node-DP method at its defaults (preset auto), eps 8, 80/20.

Usage: python benchmarks/bench_adaptive_defaults.py DATASET [METHOD ...] [--data-root DIR]
[--seeds 0,1,2]
Prints one JSON line per run (method, seed, test accuracy, resolved hyperparameters); the
summary line per method gives the mean over seeds. Physics is large: one run per method
per seed, nothing more.
"""

import argparse
import json
import time

from _cli import int_list

from gnnprivacy.method.runner import run

METHODS = ["heterpoisson", "dpgnn", "dpmlp", "gcn"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dataset")
    ap.add_argument("methods", nargs="*", default=METHODS,
                    help=f"methods to run (default: {' '.join(METHODS)})")
    ap.add_argument("--data-root", default="../shared/datasets")
    ap.add_argument("--seeds", type=int_list, default="0,1,2")
    args = ap.parse_args()
    base = {"dataset": args.dataset, "data_root": args.data_root, "train_frac": 0.8,
            "val_frac": 0.0, "test_frac": 0.2}
    for method in args.methods:
        accs = []
        for seed in args.seeds:
            values = {**base, "method": method, "seed": seed}
            if method not in ("gcn", "mlp"):
                values["epsilon"] = 8.0
            t = time.time()
            rec = run(values, save=False)
            accs.append(rec.metrics["test_accuracy"])
            print(json.dumps({"dataset": args.dataset, "method": method, "seed": seed,
                              "test_accuracy": round(accs[-1], 4), "epsilon": rec.epsilon,
                              "hparams": rec.info.get("hparams"),
                              "sec": round(time.time() - t, 1)}), flush=True)
        print(json.dumps({"dataset": args.dataset, "method": method, "summary": True,
                          "mean_test_accuracy": round(sum(accs) / len(accs), 4),
                          "per_seed": [round(a, 4) for a in accs]}), flush=True)


if __name__ == "__main__":
    main()
