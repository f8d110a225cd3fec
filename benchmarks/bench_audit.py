"""Mechanism-only canary audits: runtime at R = 10^4 runs per world, and the spec-000 AU figures.

Prints, side by side for the HeterPoisson Facebook configuration of spec 000 §8 AU (q_b =
4096/|V|, T = 50, delta = |V|^-1.1, M = 1, sound PLD accounting, claimed epsilon 2):

* the audit at the calibrated noise (not vacuous: Clopper-Pearson >= 0.8, GDP figure beside it),
* the AU2 positive control (noise multiplier 4x too small, still claiming 2: must exceed 2),
* the paper-literal per-step mode (GDP-composed, heuristic),
* the no-excess-loss grid (AU1) for heterpoisson, dpgnn, dpmlp and gap at eps 1, 2, 4, 8,
* seconds per audit.

Usage::

    python benchmarks/bench_audit.py [--runs 10000] [--dataset facebook] [--data-root ../shared/datasets]
        [--grid-dataset cora] [--skip-grid]
    python benchmarks/bench_audit.py --mia [--mia-datasets cora,facebook] [--mia-models 8]
        [--mia-query full|0hop|full+0hop] [--mia-per-node-variance] [--mia-methods gcn,rgnn]

``--mia`` instead runs the membership-inference acceptance: LiRA (and the shadow attack) on
the non-private GCN of each dataset, and on every sound private method that trains a node
classifier at epsilon 2 on the first dataset (AUC must stay within 0.5 +- 0.03): the node-DP
methods (heterpoisson, dpgnn, dpmlp, gap sound) in the ``induced`` game, the local-DP
methods (rgnn, lpgnn, ldp-naive, sound budget ``m eps_x + eps_y`` with m = 10, eps_x = 0.1,
eps_y = 1) in the transductive ``labels`` game, beside the non-private GCN in that game.
``--mia-query`` is the attacker's query graph (local-DP methods: always ``full``, their
predictions are transductive); ``--mia-methods`` keeps only the listed methods.
"""

from __future__ import annotations

import argparse
import time

from gnnprivacy.auditing import audit


def _row(label: str, r, seconds: float) -> str:
    gdp = "n/a" if r.epsilon_lower_bound_gdp is None else f"{r.epsilon_lower_bound_gdp:7.3f}"
    flag = "EXCEEDS" if r.violation else "ok"
    return (f"{label:<44} claimed {r.epsilon_claimed:6.3f}  CP lb {r.epsilon_lower_bound:7.3f}  "
            f"GDP {gdp}  MIA acc {r.mia_accuracy if r.mia_accuracy is not None else float('nan'):.3f}"
            f"  runs {r.runs:6d}  {seconds:7.2f}s  {flag}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--dataset", default="facebook")
    ap.add_argument("--grid-dataset", default="cora")
    ap.add_argument("--data-root", default="../shared/datasets")
    ap.add_argument("--skip-grid", action="store_true")
    ap.add_argument("--mia", action="store_true")
    ap.add_argument("--mia-datasets", default="cora,facebook")
    ap.add_argument("--mia-models", type=int, default=8)
    ap.add_argument("--mia-query", default="full")
    ap.add_argument("--mia-per-node-variance", action="store_true")
    ap.add_argument("--mia-methods", default=None)
    args = ap.parse_args()
    if args.mia:
        _mia(args)
        return
    common = dict(data_root=args.data_root, runs=args.runs)
    hp = dict(params={"M": 1.0, "steps": 50})
    for label, kw in (("heterpoisson eps 2 (sound PLD)", {}),
                      ("heterpoisson eps 2, noise x1/4 (AU2 control)", {"noise_scale": 0.25}),
                      ("heterpoisson eps 2, paper-literal per-step", {"mode": "paper"})):
        t = time.perf_counter()
        r = audit("heterpoisson", args.dataset, epsilon=2.0, **common, **hp, **kw)
        print(_row(label, r, time.perf_counter() - t), flush=True)
        if kw.get("mode") == "paper":
            print(f"{'':<44} (per-step lower bound; the GDP column is sqrt(T)-composed: "
                  "heuristic)")
    if args.skip_grid:
        return
    print(f"\nAU1 grid on {args.grid_dataset} (lower bound must stay <= claimed):", flush=True)
    for method in ("heterpoisson", "dpgnn", "dpmlp", "gap"):
        for eps in (1.0, 2.0, 4.0, 8.0):
            t = time.perf_counter()
            r = audit(method, args.grid_dataset, epsilon=eps, data_root=args.data_root,
                      runs=args.runs)
            print(_row(f"{method} eps {eps:g}", r, time.perf_counter() - t), flush=True)
    for eps in (1.0, 2.0, 4.0, 8.0):
        r = audit("rgnn", args.grid_dataset, epsilon=eps, data_root=args.data_root)
        print(_row(f"rgnn eps {eps:g} (sound, exact enumeration)", r, r.seconds))
    r = audit("rgnn", args.grid_dataset, data_root=args.data_root, params={"eps_mode": "paper"})
    print(_row("rgnn (paper eps_X, exact enumeration)", r, r.seconds))


def _mia(args) -> None:
    from gnnprivacy.attacks.membership import TRANSDUCTIVE_METHODS, run_membership

    datasets = args.mia_datasets.split(",")
    ldp = {"eps_x": 0.1, "eps_y": 1.0}           # m = 10: sound budget 10 * 0.1 + 1 = 2
    jobs = [("gcn", d, {}, None) for d in datasets]
    jobs += [(m, datasets[0], {"epsilon": 2.0}, None) for m in ("heterpoisson", "dpgnn", "dpmlp",
                                                                   "gap")]
    jobs += [("gcn", datasets[0], {}, "labels")]
    jobs += [(m, datasets[0], ldp, "labels") for m in TRANSDUCTIVE_METHODS]
    keep = None if args.mia_methods is None else set(args.mia_methods.split(","))
    for method, dataset, params, game in jobs:
        if keep is not None and method not in keep:
            continue
        query = "full" if method in TRANSDUCTIVE_METHODS else args.mia_query
        t = time.perf_counter()
        r = run_membership(method, dataset, data_root=args.data_root,
                           num_models=args.mia_models, params=params, query=query, game=game,
                           fixed_variance=not args.mia_per_node_variance)
        li, sh = r["lira"], r["shadow"]
        print(f"{method:<13} {dataset:<9} {r['game']:<7} q={r['query']:<9} "
              f"eps {r['claimed_epsilon']:<8.3g} LiRA AUC "
              f"{li['auc']:.3f} [{li['auc_ci95']['low']:.3f}, {li['auc_ci95']['high']:.3f}] "
              f"TPR@1% {li['tpr_at_1pct_fpr']:.3f} TPR@0.1% {li['tpr_at_0.1pct_fpr']:.4f}  "
              f"shadow AUC {sh['auc']:.3f}  non-member acc {r['nonmember_accuracy']:.3f}  "
              f"models {r['num_models']}  {time.perf_counter() - t:6.1f}s", flush=True)


if __name__ == "__main__":
    main()
