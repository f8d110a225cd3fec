"""Link prediction without privacy, under edge-level DP and under node-level DP (issue 46):
test ROC AUC and Hits@50 on held-out edges, per (dataset, privacy, epsilon, seed).

Run (resumable)::

    OMP_NUM_THREADS=1 nice .venv/bin/python benchmarks/link_prediction_claims.py \\
        --datasets cora,facebook --epsilons 1,8 --seeds 0,1,2 \\
        --out runs/edge_level/link.jsonl
    .venv/bin/python benchmarks/link_prediction_claims.py --summary runs/edge_level/link.jsonl

Each cell is `gnnprivacy.training.link_prediction.fit_link_predictor` (what
``gnnprivacy train --task link --method link|link-edge-dp|link-node-dp`` runs) on the link
split of that seed (10 % of the edges held out for test, 5 % for validation), the same
encoder, decoder, batches and steps for the three; edge level with the noisy inference
release (in the epsilon), node level with DP-GNN's bounded stars (D = 3).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from _cli import (append_row, float_list, int_list, name_list, read_rows, resume_rows,
                  run_or_summary)

LEVELS = ("none", "edge", "node")


def run(args) -> None:
    import gnnprivacy as gp
    from gnnprivacy.training.link_prediction import fit_link_predictor, link_split

    out, done = resume_rows(args.out, ("dataset", "privacy", "epsilon", "seed"))
    for dataset in args.datasets:
        data = gp.load_dataset(dataset, root=args.root)
        for seed in args.seeds:
            split = link_split(data, seed=seed)
            for level in args.levels:
                for eps in (args.epsilons if level != "none" else [None]):
                    if (dataset, level, eps, seed) in done:
                        continue
                    t0 = time.perf_counter()
                    r = fit_link_predictor(data, privacy=level, epsilon=eps or 8.0, seed=seed,
                                           steps=args.steps, batch_size=args.batch_size,
                                           split=split)
                    m = r["metrics"]
                    append_row(out, {"dataset": dataset, "privacy": level, "epsilon": eps,
                                     "seed": seed, "test_auc": m["test_auc"],
                                     "test_hits@50": m["test_hits@50"],
                                     "val_auc": m.get("val_auc"), "epsilon_spent": r["epsilon"],
                                     "steps": r["steps"], **r["split"],
                                     "seconds": round(time.perf_counter() - t0, 1)})
                    done.add((dataset, level, eps, seed))


def summary(paths) -> None:
    from scipy import stats

    rows = read_rows(paths)
    print("| dataset | privacy | epsilon | test AUC | test Hits@50 | n |")
    print("|---|---|---|---|---|---|")
    keys = sorted({(r["dataset"], r["privacy"], r["epsilon"]) for r in rows},
                  key=lambda k: (k[0], LEVELS.index(k[1]), k[2] or 0))
    for dataset, level, eps in keys:
        sub = [r for r in rows if (r["dataset"], r["privacy"], r["epsilon"])
               == (dataset, level, eps)]
        cells = []
        for key in ("test_auc", "test_hits@50"):
            v = np.array([r[key] for r in sub], float)
            half = (stats.t.ppf(0.975, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size)
                    if v.size > 1 else float("nan"))
            cells.append(f"{v.mean():.3f} +- {half:.3f}")
        print(f"| {dataset} | {level} | {'-' if eps is None else f'{eps:g}'} | "
              + " | ".join(cells) + f" | {len(sub)} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", type=name_list, default="cora,facebook")
    p.add_argument("--levels", type=name_list, default=",".join(LEVELS))
    p.add_argument("--epsilons", type=float_list, default="1,8")
    p.add_argument("--seeds", type=int_list, default="0,1,2")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--root", default="/work/shared/datasets")
    p.add_argument("--out")
    p.add_argument("--summary", nargs="+")
    run_or_summary(p, run, summary)


if __name__ == "__main__":
    main()
