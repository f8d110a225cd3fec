"""LinkTeller against the HeteroRR victims over seeds (issue 13: AUC against a non-private GCN,
and near 0.5 against EdgeRR for eps_e in [0.1, 1]).

Run::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/linkteller_claims.py --dataset cora \\
        --seeds 0 1 2 3 4 --out runs/linkteller_cora.jsonl
    .venv/bin/python benchmarks/linkteller_claims.py --summary runs/linkteller_cora.jsonl

Each row is one `gnnprivacy.experiments.linkteller_run.run_linkteller` (what
``gnnprivacy attack linkteller`` runs). Victims: the non-private GCN on the true graph, the
GCN on the public edges only (what the adversary gets without any private edge), and EdgeRR
at rho = 0.3 (a declared random 30 % of the edges private) and rho = 1 (every edge private).
``auc`` is the spec's protocol (private edges vs non-edges among 500 targets);
``auc_beyond_public`` is the same scores on the pairs more than 2 public hops apart, where
the public edges cannot explain any influence of a 2-layer GCN.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from _cli import append_row, read_rows, resume_rows, run_or_summary

VICTIMS = [("gcn", None, 0.3), ("gcn-public", None, 0.3)] + [
    ("edgerr", e, rho) for rho in (0.3, 1.0) for e in (0.1, 0.4, 1.0)]
KEYS = ("auc", "auc_beyond_public", "average_precision", "model_test_accuracy")


def run(args) -> None:
    from gnnprivacy.experiments.linkteller_run import run_linkteller

    out, done = resume_rows(args.out, ("method", "eps_e", "private_edge_frac", "seed"))
    for seed in args.seeds:
        for method, eps, rho in VICTIMS:
            if (method, eps, rho, seed) in done:
                continue
            r = run_linkteller(args.dataset, method=method, eps_e=eps, private_edge_frac=rho,
                               seed=seed, data_root=args.root)
            row = {"method": method, "eps_e": eps, "private_edge_frac": rho, "seed": seed,
                   "dataset": args.dataset, **{k: r[k] for k in KEYS},
                   "num_positives": r["num_positives"],
                   "num_positives_beyond_public": r["num_positives_beyond_public"]}
            append_row(out, row)


def summary(paths) -> None:
    rows = read_rows(paths)
    for dataset in sorted({r["dataset"] for r in rows}):
        print(f"\n## LinkTeller on {dataset}: mean +- sd over seeds (n)")
        print("| victim | rho | eps_e | " + " | ".join(KEYS) + " |")
        print("|---|---|---|" + "---|" * len(KEYS))
        for method, eps, rho in VICTIMS:
            sub = [r for r in rows if r["dataset"] == dataset and r["method"] == method
                   and r["eps_e"] == eps and r["private_edge_frac"] == rho]
            if not sub:
                continue
            cells = []
            for k in KEYS:
                v = np.array([r[k] for r in sub if r[k] is not None and not math.isnan(r[k])])
                cells.append(f"{v.mean():.3f} +- {v.std(ddof=1) if v.size > 1 else 0:.3f} ({v.size})"
                             if v.size else "n/a")
            print(f"| {method} | {rho:g} | {'-' if eps is None else f'{eps:g}'} | "
                  + " | ".join(cells) + " |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dataset", default="cora")
    p.add_argument("--root", default="/work/shared/datasets")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--out")
    p.add_argument("--summary", nargs="+")
    run_or_summary(p, run, summary)


if __name__ == "__main__":
    main()
