"""HeteroRR relative claims (issue 13 item 7): accuracy cells over seeds and budgets.

Run (one part at a time, appends JSON lines to --out)::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/heterorr_claims.py feature --dataset cora \
        --eps 1 10 100 1000 --seeds 0 1 2 3 4 --out runs/heterorr_feature_cora.jsonl
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/heterorr_claims.py edge --dataset cora \
        --eps 0.1 0.4 1 2 --seeds 0 1 2 3 4 --out runs/heterorr_edge_cora.jsonl
    .venv/bin/python benchmarks/heterorr_claims.py summary runs/heterorr_feature_cora.jsonl

``feature``: FeatureRR vs the six feature LDP baselines at equal eps_f (edges clean);
``edge``: EdgeRR (rho = 0.3, public edges kept) vs LapGraph, privHRG (and EdgeRand where
its output fits) at equal eps_e, features clean. Each cell is one release + one GCN
(2 layers, hidden 32, Adam 0.01, <= 150 epochs, patience 30, no dropout as in [R]; small for a shared 2-core box) through
`gnnprivacy.ldp.heterorr.pipeline.release`, the same code ``gnnprivacy train`` runs.
``--hidden --dropout --lr --weight-decay --epochs --patience`` set that GCN (the paper's [R]:
hidden 128, no dropout, no weight decay, Adam 0.001; spec 001 §3.7).
``summary`` prints every cell (mean +- sd over seeds) and a paired two-tailed t-test of the
first method against the best other one over the (eps, seed) cells (spec E21).
"""

from __future__ import annotations

import argparse
import hashlib
import math
import time

import numpy as np

from _cli import append_row, read_rows, resume_rows

FEATURE = ["featurerr", "featurerr-raw", "duchi", "piecewise", "hybrid", "three-output", "pm-sub", "multibit", "clean"]
EDGE = ["edgerr", "lapgraph", "privhrg", "edgerand", "clean"]


def _seed_for(seed: int):
    def seed_for(purpose: str) -> int:
        key = int.from_bytes(hashlib.sha256(purpose.encode()).digest()[:4], "little")
        ss = np.random.SeedSequence([seed, key])
        return int(ss.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))
    return seed_for


def run(args) -> None:
    import torch

    from gnnprivacy.datasets import load_dataset
    from gnnprivacy.method.builtin.heterorr import HeteroRRParams, train_gcn
    from gnnprivacy.ldp.heterorr.pipeline import release

    data = load_dataset(args.dataset, root=args.root)
    params = HeteroRRParams(epochs=args.epochs, hidden=args.hidden, patience=args.patience,
                            dropout=args.dropout, lr=args.lr, weight_decay=args.weight_decay)
    methods = args.methods or (FEATURE if args.part == "feature" else EDGE)
    out, done = resume_rows(args.out, ("method", "eps", "seed"))
    for seed in args.seeds:
        for eps in args.eps:
            for m in methods:
                if (m, eps, seed) in done:
                    continue
                start = time.perf_counter()
                kw = dict(feature_method=m, edge_method="clean", eps_f=eps) \
                    if args.part == "feature" else \
                    dict(feature_method="clean", edge_method=m, eps_e=eps)
                try:
                    rel = release(data, private_edge_frac=args.rho, seed_for=_seed_for(seed),
                                  mcmc_steps=args.mcmc_steps, **kw)
                except Exception as exc:   # e.g. EdgeRand's output too large: record it
                    rec = {"method": m, "eps": eps, "seed": seed, "error": str(exc)[:200]}
                else:
                    gen = torch.Generator().manual_seed(_seed_for(seed)("train") % (2**62))
                    trainer = train_gcn(rel.data, params, generator=gen)
                    acc = trainer.evaluate(rel.data, "test_mask")["accuracy"]
                    rec = {"method": m, "eps": eps, "seed": seed, "test_accuracy": acc,
                           "epsilon_features": rel.privacy["epsilon_features"],
                           "epsilon_edges": rel.privacy["epsilon_edges"],
                           "released_edges": int(rel.data.edge_index.size(1)) // 2}
                rec.update(train={k: getattr(args, k) for k in ("hidden", "dropout", "lr",
                                                                 "weight_decay", "epochs", "patience")})
                rec.update(dataset=args.dataset, part=args.part, rho=args.rho,
                           seconds=round(time.perf_counter() - start, 2))
                append_row(out, rec)


def summary(paths) -> None:
    rows = read_rows(paths)
    for (dataset, part) in sorted({(r["dataset"], r["part"]) for r in rows}):
        sub = [r for r in rows if r["dataset"] == dataset and r["part"] == part]
        methods = [m for m in (FEATURE if part == "feature" else EDGE)
                   if any(r["method"] == m for r in sub)]
        eps_grid = sorted({r["eps"] for r in sub})
        acc = {(r["method"], r["eps"], r["seed"]): r.get("test_accuracy") for r in sub}
        print(f"\n## {dataset} / {part}: test accuracy, mean +- sd over seeds (n)")
        print("| method | " + " | ".join(f"eps={e:g}" for e in eps_grid) + " |")
        print("|---|" + "---|" * len(eps_grid))
        for m in methods:
            cells = []
            for e in eps_grid:
                v = [a for (mm, ee, _), a in acc.items() if mm == m and ee == e and a is not None]
                cells.append(f"{np.mean(v):.4f} +- {np.std(v, ddof=1) if len(v) > 1 else 0:.4f}"
                             f" ({len(v)})" if v else "n/a")
            print(f"| {m} | " + " | ".join(cells) + " |")
        ours = [m for m in methods if m in ("featurerr", "featurerr-raw", "edgerr")]
        others = [m for m in methods if m not in ours and m != "clean"]
        if not others:
            continue
        means = {m: np.mean([a for (mm, _, _), a in acc.items() if mm == m and a is not None]
                            or [math.nan]) for m in others}
        best = max(others, key=lambda m: -math.inf if math.isnan(means[m]) else means[m])
        for first in ours:
            for rival in dict.fromkeys([best] + (["lapgraph"] if "lapgraph" in others else [])):
                _paired(acc, first, rival, eps_grid)
            _paired_best_per_eps(acc, first, others, eps_grid)


def _paired_best_per_eps(acc, first, others, eps_grid) -> None:
    """``first`` against the best other method *at each eps* (by mean), paired by (eps, seed)."""
    from scipy import stats

    def cells(m, e):
        return {s: a for (mm, ee, s), a in acc.items() if mm == m and ee == e and a is not None}

    a, b, wins, picks = [], [], 0, []
    for e in eps_grid:
        ours = cells(first, e)
        rivals = {m: cells(m, e) for m in others if cells(m, e)}
        if not ours or not rivals:
            continue
        best = max(rivals, key=lambda m: np.mean(list(rivals[m].values())))
        picks.append(f"{e:g}: {best}")
        wins += np.mean(list(ours.values())) > np.mean(list(rivals[best].values()))
        for s in sorted(set(ours) & set(rivals[best])):
            a.append(ours[s])
            b.append(rivals[best][s])
    if len(a) < 2:
        return
    a, b = np.array(a), np.array(b)
    t = stats.ttest_rel(a, b)
    print(f"\n{first} vs the best other method at each eps ({'; '.join(picks)}): mean gap "
          f"{np.mean(a - b):+.4f} (absolute), {np.mean(a - b) / np.mean(b):+.2%} (relative), "
          f"paired two-tailed t-test over {len(a)} (eps, seed) cells: t = {t.statistic:.3f}, "
          f"p = {t.pvalue:.3g}; {first} ahead on {wins} of {len(picks)} eps values")


def _paired(acc, first, rival, eps_grid) -> None:
    from scipy import stats

    pairs = [(acc[(first, e, s)], acc[(rival, e, s)]) for (m, e, s) in acc
             if m == first and acc.get((rival, e, s)) is not None
             and acc[(first, e, s)] is not None]
    if len(pairs) < 2:
        return
    a, b = np.array(pairs).T
    t = stats.ttest_rel(a, b)

    def mean(m, e):
        return np.mean([x for (mm, ee, _), x in acc.items() if mm == m and ee == e
                        and x is not None])

    wins = sum(mean(first, e) > mean(rival, e) for e in eps_grid)
    print(f"\n{first} vs {rival}: mean gap {np.mean(a - b):+.4f} (absolute), "
          f"{np.mean(a - b) / np.mean(b):+.2%} (relative), paired two-tailed t-test "
          f"over {len(a)} (eps, seed) cells: t = {t.statistic:.3f}, p = {t.pvalue:.3g}; "
          f"{first} ahead on {wins} of {len(eps_grid)} eps values")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="part", required=True)
    for name in ("feature", "edge"):
        p = sub.add_parser(name)
        p.add_argument("--dataset", default="cora")
        p.add_argument("--root", default="/work/shared/datasets")
        p.add_argument("--eps", type=float, nargs="+", required=True)
        p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
        p.add_argument("--methods", nargs="+")
        p.add_argument("--rho", type=float, default=0.3)
        p.add_argument("--mcmc-steps", type=int, default=None)
        p.add_argument("--epochs", type=int, default=150)
        p.add_argument("--hidden", type=int, default=32)
        p.add_argument("--patience", type=int, default=30)
        p.add_argument("--dropout", type=float, default=0.0)
        p.add_argument("--lr", type=float, default=0.01)
        p.add_argument("--weight-decay", type=float, default=5e-4)
        p.add_argument("--out", required=True)
    s = sub.add_parser("summary")
    s.add_argument("paths", nargs="+")
    args = parser.parse_args()
    if args.part == "summary":
        summary(args.paths)
    else:
        run(args)


if __name__ == "__main__":
    main()
