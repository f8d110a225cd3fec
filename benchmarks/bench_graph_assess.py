"""What an attacker learns from a graph classifier: gp.assess on PROTEINS_full, LiRA shadows.

PROTEINS_full with its stratified split (`gnnprivacy.datasets.tu_graphs.load_graph_dataset`, seed 0: 890
training, 111 validation, 112 test graphs); the released model is the built-in task's
`GraphClassifier` (GIN, 30 epochs, batch 64) trained on the 890 training graphs, non-private
and through ``make_private(sampler="graphs")`` at epsilon 1 (`fit_graph_classifier`). For
each setting and seed, ``gp.assess(model, gset, train_fn=..., shadows=K)`` (members: the
training graphs, non-members: the test graphs) trains ``K`` shadows with the same function,
each on a random half of the 1,002 candidate graphs, and reports LiRA (online, offline, and
the released model scored against the shadows), the loss-threshold attack, the code audit of
one private run and the empirical lower bounds. The table gives each figure with its
bootstrap 95% interval, one row per seed.

Compute is small on purpose (the machine is shared): 8 shadows of about 5 s each. LiRA with
more shadows is stronger; these figures are lower estimates of what an attacker with more
compute learns.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_graph_assess.py [--data-root DATA]
        [--seeds 0] [--shadows 8] [--settings none,1] [--epochs 30]
"""

from __future__ import annotations

import argparse
import time

from _cli import int_list, name_list

import gnnprivacy as gp
from gnnprivacy.datasets.tu_graphs import load_graph_dataset
from gnnprivacy.training.graph_classification import fit_graph_classifier


def make_train_fn(gset, epsilon: float | None, *, epochs: int):
    """``train_fn(graphs, seed)``: the built-in task's GIN on ``graphs``, non-private or
    through make_private(sampler="graphs") at ``epsilon``; returns the model, the claim is
    given to assess as ``privacy=``."""
    def train_fn(graphs, seed):
        return fit_graph_classifier(graphs, num_features=gset.num_features,
                                    num_classes=gset.num_classes, edge_dim=gset.edge_dim,
                                    epsilon=epsilon, epochs=epochs, seed=seed).model
    return train_fn


def one(gset, epsilon, seed: int, shadows: int, epochs: int) -> dict:
    fit = fit_graph_classifier(gset.subset("train"), num_features=gset.num_features,
                               num_classes=gset.num_classes, edge_dim=gset.edge_dim,
                               epsilon=epsilon, epochs=epochs, seed=seed)
    privacy = None if epsilon is None else {**fit.privacy, "epsilon": fit.epsilon,
                                            "delta": fit.delta}
    t0 = time.perf_counter()
    card = gp.assess(fit.model, gset, train_fn=make_train_fn(gset, epsilon, epochs=epochs),
                     privacy=privacy, shadows=shadows, seed=seed)
    card["seconds"] = time.perf_counter() - t0
    return card


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-root", default=None)
    ap.add_argument("--seeds", type=int_list, default="0")
    ap.add_argument("--shadows", type=int, default=8)
    ap.add_argument("--settings", type=name_list, default="none,1")
    ap.add_argument("--epochs", type=int, default=30)
    args = ap.parse_args(argv)
    gset = load_graph_dataset("proteins", root=args.data_root)
    seeds = args.seeds
    print(f"PROTEINS_full: {len(gset.subset('train'))} member (training) graphs, "
          f"{len(gset.subset('test'))} non-member (test) graphs; {args.shadows} shadows, "
          f"GIN {args.epochs} epochs; seeds {seeds}")
    head = ["model", "seed", "test accuracy", "LiRA online AUC", "TPR at 1% FPR",
            "LiRA offline AUC", "released model vs shadows AUC", "loss threshold AUC",
            "audited epsilon (lower bound)", "seconds"]
    print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for setting in args.settings:
        epsilon = None if setting == "none" else float(setting)
        for seed in seeds:
            card = one(gset, epsilon, seed, args.shadows, args.epochs)
            mem = card["membership"]

            def auc(section):
                lo, hi = mem[section]["auc_ci95"]
                return f"{mem[section]['auc']:.3f} [{lo:.3f}, {hi:.3f}]"

            audit = "n/a (not private)" if epsilon is None else \
                f"{card['audit']['epsilon_lower_bound']:.3f}" + (
                    " VIOLATION" if card["audit"]["violation"] else "")
            name = "non-private" if epsilon is None else \
                f"make_private(sampler=\"graphs\"), epsilon {card['claimed']['epsilon']:.2f}"
            cells = [name, str(seed), f"{card['utility']['test_accuracy']:.3f}",
                     auc("lira_online"), f"{mem['lira_online']['tpr_at_1pct_fpr']:.3f}",
                     auc("lira_offline"), auc("lira_released_model"), auc("loss_threshold"),
                     audit, f"{card['seconds']:.0f}"]
            print("| " + " | ".join(cells) + " |", flush=True)

if __name__ == "__main__":
    main()
