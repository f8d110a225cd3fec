"""Mechanism-only canary audits: runtime at R = 10^4 runs per world, and the spec-000 AU figures.

Prints, side by side for the HeterPoisson Facebook configuration of spec 000 §8 AU (q_b =
4096/|V|, T = 50, delta = |V|^-1.1, M = 1, sound PLD accounting, claimed epsilon 2):

* the audit at the calibrated noise (threshold on held-out runs; GDP estimate beside it), and
  with the threshold chosen on the counted runs (the over-claiming default before issue 22),
* the AU2 positive control (noise multiplier 4x too small, still claiming 2: must exceed 2),
* the paper-literal per-step mode (GDP-composed, heuristic),
* the no-excess-loss grid (AU1) for heterpoisson, dpgnn, dpmlp and gap at eps 1, 2, 4, 8,
* seconds per audit.

Usage::

    python benchmarks/bench_audit.py [--runs 10000] [--dataset facebook] [--data-root ../shared/datasets]
        [--grid-dataset cora] [--skip-grid]
    python benchmarks/bench_audit.py --mia [--mia-datasets cora,facebook] [--mia-models 8]
        [--mia-query full|0hop|full+0hop] [--mia-per-node-variance] [--mia-methods gcn,rgnn]
    python benchmarks/bench_audit.py --mia-variants [--mia-datasets facebook] [--mia-models 64]
        [--mia-gcn-params dropout=0,weight_decay=0] [--mia-games labels]
    python benchmarks/bench_audit.py --mia-speed [--mia-datasets facebook]
    python benchmarks/bench_audit.py --code [--code-dataset cora]

``--code`` runs the white-box code audit (``mode="code"``) of heterpoisson, dpgnn, dpmlp and
gap at epsilon 4 at its defaults, on the honest engine and with two bugs patched into it
(noise std divided by 2, clipping skipped), and prints the executed-epsilon bound, whether
it flags the run, and the seconds per audit (the acceptance: every bug flagged, the honest
code not, each within 2 minutes on Cora).

``--mia`` instead runs the membership-inference acceptance: LiRA (and the shadow attack) on
the non-private GCN of each dataset, and on every sound private method that trains a node
classifier at epsilon 2 on the first dataset (AUC must stay within 0.5 +- 0.03): the node-DP
methods (heterpoisson, dpgnn, dpmlp, gap sound) in the ``induced`` game, the local-DP
methods (rgnn, lpgnn, ldp-naive, sound budget ``m eps_x + eps_y`` with m = 10, eps_x = 0.1,
eps_y = 1) in the transductive ``labels`` game, beside the non-private GCN in that game.
``--mia-query`` is the attacker's query graph (local-DP methods: always ``full``, their
predictions are transductive); ``--mia-methods`` keeps only the listed methods.

``--mia-variants`` trains the non-private GCN of each dataset once (``--mia-games labels``:
in the transductive game), in blocks of 8 models
(each block balanced, so every prefix is a valid game), with both queries, and prints LiRA
after every block for each query (full, 0hop, full+0hop) and variance (global, per node):
the attack's dependence on the number of models, the query graph and the variance model.
"""

from __future__ import annotations

import argparse
import time

from gnnprivacy.auditing import audit


def _row(label: str, r, seconds: float) -> str:
    gdp = "n/a" if r.epsilon_estimate_gdp is None else f"{r.epsilon_estimate_gdp:7.3f}"
    flag = "EXCEEDS" if r.violation else "ok"
    return (f"{label:<44} claimed {r.epsilon_claimed:6.3f}  CP lb {r.epsilon_lower_bound:7.3f}  "
            f"GDP est. {gdp}  MIA acc {r.mia_accuracy if r.mia_accuracy is not None else float('nan'):.3f}"
            f"  runs {r.runs:6d}  {seconds:7.2f}s  {flag}")


def _code(args) -> None:
    import torch

    from gnnprivacy.training.dp import clipping
    from gnnprivacy.training.dp import engine as engine_module

    honest_noise, honest_clip = engine_module.noised_flat, clipping.clip_factors
    bugs = {"honest": lambda: None,
            "noise std / 2": lambda: setattr(engine_module, "noised_flat",
                                             lambda sums, std, **k: honest_noise(sums, std / 2,
                                                                                 **k)),
            "clip skipped": lambda: setattr(clipping, "clip_factors",
                                            lambda norms, c: torch.ones_like(norms))}
    print(f"code audits on {args.code_dataset}, claimed epsilon 4 (defaults):")
    print(f"{'method':<14}{'engine':<16}{'claimed':>9}{'executed >=':>13}{'flagged':>9}"
          f"{'seconds':>9}")
    for method in ("heterpoisson", "dpgnn", "dpmlp", "gap"):
        for label, patch in bugs.items():
            patch()
            try:
                t = time.perf_counter()
                r = audit(method, args.code_dataset, epsilon=4.0, mode="code",
                          data_root=args.data_root)
                secs = time.perf_counter() - t
            finally:
                engine_module.noised_flat, clipping.clip_factors = honest_noise, honest_clip
            print(f"{method:<14}{label:<16}{r.epsilon_claimed:>9.3f}"
                  f"{r.epsilon_lower_bound:>13.3f}{str(r.violation):>9}{secs:>9.1f}", flush=True)


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
    ap.add_argument("--mia-variants", action="store_true")
    ap.add_argument("--mia-speed", action="store_true",
                    help="seconds per GCN model of the game, sparse vs dense first layer")
    ap.add_argument("--mia-games", default=None,
                    help="keep only jobs of these games (induced, labels); --mia-variants: "
                         "the game to train (default induced)")
    ap.add_argument("--mia-gcn-params", default="",
                    help="non-private GCN parameters, e.g. dropout=0,weight_decay=0")
    ap.add_argument("--code", action="store_true", help="white-box code audits (mode='code')")
    ap.add_argument("--code-dataset", default="cora")
    args = ap.parse_args()
    if args.code:
        _code(args)
        return
    if args.mia_variants:
        _mia_variants(args)
        return
    if args.mia_speed:
        _mia_speed(args)
        return
    if args.mia:
        _mia(args)
        return
    common = dict(data_root=args.data_root, runs=args.runs)
    hp = dict(params={"M": 1.0, "steps": 50})
    for label, kw in (("heterpoisson eps 2 (sound PLD)", {}),
                      ("heterpoisson eps 2, same-run threshold (old)", {"selection": "same"}),
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


def _gcn_params(args) -> dict:
    import json

    pairs = [kv.split("=", 1) for kv in args.mia_gcn_params.split(",") if kv]
    return {k: json.loads(v) for k, v in pairs}


def _mia(args) -> None:
    from gnnprivacy.attacks.membership import TRANSDUCTIVE_METHODS, run_membership

    datasets = args.mia_datasets.split(",")
    ldp = {"eps_x": 0.1, "eps_y": 1.0}           # m = 10: sound budget 10 * 0.1 + 1 = 2
    gcn = _gcn_params(args)
    jobs = [("gcn", d, gcn, None) for d in datasets]
    jobs += [(m, datasets[0], {"epsilon": 2.0}, None) for m in ("heterpoisson", "dpgnn", "dpmlp",
                                                                   "gap")]
    jobs += [("gcn", datasets[0], gcn, "labels")]
    jobs += [(m, datasets[0], ldp, "labels") for m in TRANSDUCTIVE_METHODS]
    keep = None if args.mia_methods is None else set(args.mia_methods.split(","))
    for method, dataset, params, game in jobs:
        if keep is not None and method not in keep:
            continue
        if args.mia_games is not None and (game or "induced") not in args.mia_games.split(","):
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


def _mia_variants(args, block: int = 8) -> None:
    import numpy as np

    from gnnprivacy.attacks.membership import MembershipGame, lira, train_membership_models
    from gnnprivacy.datasets import load_dataset

    for dataset in args.mia_datasets.split(","):
        data = load_dataset(dataset, root=args.data_root, seed=0)
        blocks, t = [], time.perf_counter()
        for b in range(max(1, args.mia_models // block)):
            blocks.append(train_membership_models("gcn", data, num_models=block, seed=b,
                                                   queries="full+0hop", params=_gcn_params(args),
                                                   game=(args.mia_games or "induced")))
            g = MembershipGame(
                "gcn", np.concatenate([x.memberships for x in blocks]),
                np.concatenate([x.phi for x in blocks]), np.zeros((1, 1, 1)), float("inf"),
                utility=sum((x.utility for x in blocks), []),
                extra_phi={"0hop": np.concatenate([x.extra_phi["0hop"] for x in blocks])})
            k = g.memberships.shape[0]
            print(f"gcn {dataset} ({blocks[0].game} game): {k} models, non-member accuracy (full) "
                  f"{np.mean(g.utility):.3f}, {time.perf_counter() - t:.0f}s", flush=True)
            for query in ("full", "0hop", "full+0hop"):
                for fixed in (True, False):
                    li = lira(g, query=query, fixed_variance=fixed, n_boot=100)
                    var = "global" if fixed else "per-node"
                    print(f"  K={k:<3d} query={query:<9} variance={var:<8}"
                          f" LiRA AUC {li['auc']:.3f} [{li['auc_ci95']['low']:.3f}, "
                          f"{li['auc_ci95']['high']:.3f}] TPR@1% {li['tpr_at_1pct_fpr']:.3f} "
                          f"TPR@0.1% {li['tpr_at_0.1pct_fpr']:.4f}", flush=True)
        for query in ("full", "0hop"):
            auc, effect = _oracle(g.memberships, g.phi_of(query))
            print(f"  ceiling, query={query}: oracle AUC {auc:.3f} (per-node IN/OUT means and "
                  f"variances from all {k} models, target included: optimistic); median "
                  f"|mu_in - mu_out| / sd = {effect:.3f}; p_y > 1/2 on "
                  f"{(g.phi_of(query) > 0)[g.memberships].mean():.3f} of members, "
                  f"{(g.phi_of(query) > 0)[~g.memberships].mean():.3f} of non-members",
                  flush=True)


def _mia_speed(args, epochs: int = 40) -> None:
    import numpy as np
    import torch

    from gnnprivacy.attacks.membership import _induced, balanced_memberships
    from gnnprivacy.datasets import load_dataset
    from gnnprivacy.training.nonprivate import FullBatchTrainer

    for dataset in args.mia_datasets.split(","):
        data = load_dataset(dataset, root=args.data_root, seed=0)
        mask = balanced_memberships(2, data.num_nodes, generator=np.random.default_rng(0))[0]
        sub = _induced(data, torch.from_numpy(mask))
        for sparse in (True, False):
            tr = FullBatchTrainer("gcn", hidden_channels=64, num_layers=2, dropout=0.5, lr=0.01,
                                  weight_decay=5e-4, epochs=epochs, generator=0,
                                  sparse_features=sparse)
            t = time.perf_counter()
            tr.fit(sub)
            per = (time.perf_counter() - t) / epochs
            print(f"gcn {dataset} member-induced half: sparse first layer {sparse!s:<5} "
                  f"{per * 1000:6.0f} ms/epoch, {per * 200:6.1f} s per 200-epoch model",
                  flush=True)


def _oracle(m, phi):
    """AUC of the likelihood ratio with each node's IN/OUT means and pooled variance taken
    from every model (the target's own output included: an optimistic ceiling for LiRA)."""
    import numpy as np

    from gnnprivacy.attacks.metrics import attack_metrics

    mu_in = (phi * m).sum(0) / m.sum(0)
    mu_out = (phi * ~m).sum(0) / (~m).sum(0)
    resid = phi - np.where(m, mu_in, mu_out)
    sd = np.sqrt((resid ** 2).sum(0) / (m.shape[0] - 2)) + 1e-6
    score = 0.5 * (((phi - mu_out) / sd) ** 2 - ((phi - mu_in) / sd) ** 2)
    auc = attack_metrics(score.ravel(), m.ravel().astype(int))["auc"]
    return auc, float(np.median(np.abs(mu_in - mu_out) / sd))


if __name__ == "__main__":
    main()
