"""What an attacker learns from the docs/own-model.md SAGE model: gp.assess with LiRA shadows.

Amazon Computers, 80/20 split (the members are the training nodes, the non-members the test
nodes), the two-SAGEConv model of docs/own-model.md, released non-private (full-batch Adam)
and trained with ``gp.make_private(sampler="heterpoisson")`` at epsilon 8 and 1. For each
setting and seed, ``gp.assess(model, data, train_fn=..., shadows=K)`` trains ``K`` shadows
with the same function on random halves of the candidate nodes and reports LiRA (online,
offline) AUC and TPR at 1% FPR, the loss-threshold attack and link-stealing Attack-0. The
table gives the mean over seeds with the range and a 95% t interval.

Compute is small on purpose (the machine is shared): 8 shadows, a short plan for the private
runs and 100 epochs for the non-private one (``--epochs``, ``--lr``: on Computers, where one
full-batch epoch takes seconds, fewer epochs at a higher rate; docs/assess.md gives the
setting and its test accuracy against the 100-epoch one). LiRA with more shadows is
stronger; these figures are lower estimates of what an attacker with more compute learns.
``--link-attacks 3,6`` adds He et al.'s attacker-knowledge link-stealing variants to the
table (`gnnprivacy.attacks.link_stealing.knowledge`).

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_assess.py [--data-root DATA] [--seeds 0,1]
        [--shadows 8] [--settings none,8,1] [--dataset computers] [--steps 60] [--epochs 100]
        [--lr 0.01] [--link-attacks 3,6]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.nn import functional as F

import gnnprivacy as gp

sys.path.insert(0, str(Path(__file__).parent))
from _cli import int_list, name_list  # noqa: E402
from bench_user_model import Net  # noqa: E402


def make_train_fn(epsilon: float | None, *, steps: int, epochs: int, lr: float = 0.01):
    """``train_fn(data, seed)``: the own-model SAGE on ``data.train_mask``; non-private
    (``epsilon=None``: ``epochs`` of full-batch Adam at rate ``lr``) or through make_private
    at ``epsilon`` (Adam at 0.01)."""
    def train_fn(data, seed):
        torch.manual_seed(seed)
        model = Net(data.num_features, 64, int(data.y.max()) + 1)
        opt = torch.optim.Adam(model.parameters(), lr=lr if epsilon is None else 0.01)
        if epsilon is None:
            for _ in range(epochs):
                opt.zero_grad()
                out = model(data.x, data.edge_index)
                F.cross_entropy(out[data.train_mask], data.y[data.train_mask]).backward()
                opt.step()
            return model
        pt = gp.make_private(model, opt, data, sampler="heterpoisson", epsilon=epsilon,
                             max_grad_norm=1.0, seed=seed, steps=steps)
        for batch in pt.loader:
            opt.zero_grad()
            out = model(batch.x, batch.edge_index)
            F.cross_entropy(out[batch.center], batch.y[batch.center]).backward()
            opt.step()
        return pt
    return train_fn


def interval(values: list[float]) -> str:
    """mean [95% t interval] over seeds (the range with fewer than 2 seeds)."""
    from scipy.stats import t

    m = statistics.mean(values)
    if len(values) < 2:
        return f"{m:.3f}"
    half = t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return f"{m:.3f} [{m - half:.3f}, {m + half:.3f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-root", default=None)
    ap.add_argument("--dataset", default="computers")
    ap.add_argument("--dataset-args", default="", help="e.g. num_nodes=1000 (csbm)")
    ap.add_argument("--seeds", type=int_list, default="0,1")
    ap.add_argument("--shadows", type=int, default=8)
    ap.add_argument("--settings", type=name_list, default="none,8,1",
                    help="comma list: none (non-private) or an epsilon")
    ap.add_argument("--steps", type=int, default=60, help="planned steps of the private runs")
    ap.add_argument("--epochs", type=int, default=100, help="epochs of the non-private run")
    ap.add_argument("--lr", type=float, default=0.01, help="Adam's rate of the non-private run")
    ap.add_argument("--link-attacks", default="",
                    help="comma list of He et al.'s variants beside Attack-0 (2, 3, 6)")
    args = ap.parse_args()
    extra = dict(kv.split("=") for kv in args.dataset_args.split(",") if kv)
    extra = {k: int(v) if v.isdigit() else v for k, v in extra.items()}
    seeds = args.seeds
    link_attacks = tuple(int(a) for a in args.link_attacks.split(",") if a)
    keys = [("lira_online", "auc"), ("lira_online", "tpr_at_1pct_fpr"),
            ("lira_offline", "auc"), ("loss_threshold", "auc"), ("link_stealing", "auc")]
    keys += [(f"attack_{a}", "auc") for a in link_attacks]
    table: dict[str, dict] = {}
    for setting in args.settings:
        epsilon = None if setting == "none" else float(setting)
        train_fn = make_train_fn(epsilon, steps=args.steps, epochs=args.epochs, lr=args.lr)
        cells = table.setdefault(setting, {k: [] for k in keys} | {"acc": [], "eps": []})
        for seed in seeds:
            t0 = time.perf_counter()
            data = gp.load_dataset(args.dataset, root=args.data_root, seed=seed, split="random",
                                   train_frac=0.8, val_frac=0.0, test_frac=0.2, **extra)
            public = ~data.train_mask
            data.x = (data.x - data.x[public].mean()) / data.x[public].std()
            released = train_fn(data, seed)
            card = gp.assess(released, data, train_fn=train_fn, shadows=args.shadows,
                             seed=seed, code_audit=False, link_attacks=link_attacks)
            ls = card["link_stealing"]
            for section, metric in keys:
                src = ls if section == "link_stealing" else ls["variants"][section] \
                    if section.startswith("attack_") else card["membership"][section]
                cells[(section, metric)].append(src[metric])
            cells["acc"].append(card["utility"]["test_accuracy"])
            cells["eps"].append(card["claimed"]["epsilon"])
            on = card["membership"]["lira_online"]
            print(f"{setting:>5} seed {seed}: LiRA online AUC {on['auc']:.3f} "
                  f"[{on['auc_ci95'][0]:.3f}, {on['auc_ci95'][1]:.3f}] "
                  f"TPR@1%FPR {on['tpr_at_1pct_fpr']:.3f}, offline "
                  f"{card['membership']['lira_offline']['auc']:.3f}, loss threshold "
                  f"{card['membership']['loss_threshold']['auc']:.3f}, Attack-0 "
                  f"{ls['auc']:.3f} [{ls['auc_ci95'][0]:.3f}, {ls['auc_ci95'][1]:.3f}]"
                  + "".join(f", Attack-{a} {v['auc']:.3f} [{v['auc_ci95'][0]:.3f}, "
                            f"{v['auc_ci95'][1]:.3f}]" for a, v in
                            ((a, ls["variants"][f"attack_{a}"]) for a in link_attacks))
                  + f", test acc "
                  f"{card['utility']['test_accuracy']:.3f}, epsilon "
                  f"{card['claimed']['epsilon']:.3g} ({time.perf_counter() - t0:.0f} s)",
                  flush=True)
    print(f"\n{args.dataset}, {args.shadows} shadows, seeds {','.join(map(str, seeds))}: mean [95% t interval "
          "over seeds]")
    print("| model | epsilon | LiRA AUC (online) | TPR@1%FPR (online) | LiRA AUC (offline) "
          "| loss-threshold AUC | Attack-0 AUC | "
          + "".join(f"Attack-{a} AUC | " for a in link_attacks) + "test accuracy |")
    print("|---" * (len(keys) + 3) + "|")
    for setting, cells in table.items():
        name = "non-private" if setting == "none" else "make_private"
        eps = "inf" if setting == "none" else f"{max(cells['eps']):.3g}"
        print(f"| {name} | {eps} | " + " | ".join(interval(cells[k]) for k in keys)
              + f" | {interval(cells['acc'])} |")


if __name__ == "__main__":
    main()
