"""Graph-level DP (``make_private(sampler="graphs")``): step cost, accuracy table, membership.

Five parts (``--part``):

* ``step``: the DP step against the non-private step of an identical GIN on PROTEINS_full's
  training graphs at an expected batch of 64 graphs. The DP run draws its batches from
  ``pt.loader``; the same batches are replayed through a plain step (forward, cross-entropy,
  ``backward``, Adam). Both are timed from forward to update, in alternating rounds; medians
  of wall and process CPU time (target: DP at most 1.5x). ``--linear-norms ghost`` or
  ``materialised`` forces one form of the Linear norms instead of the cost model's choice.
* ``phases``: where the CPU time of each step goes, phase by phase, in the DP loop and the
  plain loop on the same batches (forward, backward, the per-graph gradients, the clipped
  sum, noise, the loop guard's check, the update).
* ``floor``: the step part with two more runs (analysis only), one whose per-graph gradients
  are not computed (zeros) and one whose loop guard stops tracing after 3 steps: what the
  rest of the DP step costs, what that leaves for the per-graph gradients under the 1.5x
  target, the guard's share; and the bare batched products of the Linear layers, alone.
* ``table``: test accuracy of the built-in task (``dpsgd-graph`` at each epsilon and the
  non-private ``graph`` with the same model, batch, epochs and split) on the TU sets, seeds
  0-2 of the stratified 80/10/10 split; mean and std over seeds, epsilon spent, delta.
* ``mia``: LiRA graph membership inference (`gnnprivacy.attacks.graph_membership`) at
  epsilon 1 and non-private: AUC with its bootstrap 95% interval.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_graph_classification.py --part step
    OMP_NUM_THREADS=1 python benchmarks/bench_graph_classification.py --part phases
    OMP_NUM_THREADS=1 python benchmarks/bench_graph_classification.py --part floor \\
        [--step-batch 64] [--hidden 32] [--layers 2]
    OMP_NUM_THREADS=1 python benchmarks/bench_graph_classification.py --part table \\
        [--datasets proteins,aids,enzymes,cox2,dhfr] [--epsilons 1,4,8] [--seeds 0,1,2]
    OMP_NUM_THREADS=1 python benchmarks/bench_graph_classification.py --part mia \\
        [--dataset proteins] [--models 8] [--mia-epsilons none,1] [--epochs 30]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time

from _cli import float_list, int_list, name_list

import torch
from torch import nn
from torch.nn import functional as F

import gnnprivacy as gp
from gnnprivacy.datasets.tu_graphs import load_graph_dataset
from gnnprivacy.training.graph_classification import (GraphClassifier, accuracy,
                                                      fit_graph_classifier)


def _step(model, opt, batch):
    opt.zero_grad()
    out = model(batch.x, batch.edge_index, batch.batch, getattr(batch, "edge_attr", None))
    F.cross_entropy(out, batch.y).backward()
    opt.step()


def _timed(fn):
    t, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t, time.process_time() - c


def _pair(args, steps: int):
    """``make_private`` over an identical GIN/GCN and its plain copy with its own Adam, on
    the training graphs at an expected batch of 64: ``(pt, (model, opt), (plain, opt))``."""
    gset = load_graph_dataset(args.dataset, root=args.data_root, seed=0)
    torch.manual_seed(0)
    model = GraphClassifier(gset.num_features, gset.num_classes, backbone=args.backbone,
                            edge_dim=gset.edge_dim, hidden=args.hidden, layers=args.layers)
    plain = copy.deepcopy(model)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    plain_opt = torch.optim.Adam(plain.parameters(), lr=0.01)
    pt = gp.make_private(model, opt, gset.subset("train"), sampler="graphs",
                         noise_multiplier=1.0, batch_size=args.step_batch, steps=steps,
                         seed=0)
    return pt, (model, opt), (plain, plain_opt)


def part_step(args) -> None:
    if args.linear_norms != "auto":            # one form for every Linear, to compare
        from gnnprivacy.training.dp import flat_rules
        keep = args.linear_norms == "materialised"
        flat_rules.keep_materialised = lambda segs, p, q: keep
    pt, (model, opt), (plain, plain_opt) = _pair(args, args.steps + 3)
    dp, base, graphs, rows = [], [], [], []
    for batch in pt.loader:                    # alternate: one DP step, then the same batch
        dp.append(_timed(lambda: _step(model, opt, batch)))
        base.append(_timed(lambda: _step(plain, plain_opt, batch)))
        graphs.append(batch.num_graphs)
        rows.append(batch.num_nodes)
    med = [statistics.median(t[i] for t in times[3:]) for times in (dp, base) for i in (0, 1)]
    print(f"{args.dataset} ({args.backbone}, {args.linear_norms} Linear norms), {len(dp)} steps, mean {statistics.mean(graphs):.0f}"
          f" graphs / {statistics.mean(rows):.0f} nodes per batch, torch threads "
          f"{torch.get_num_threads()}")
    print(f"{'':<17}{'wall ms':>9}{'CPU ms':>9}")
    print(f"non-private step {med[2] * 1e3:9.1f}{med[3] * 1e3:9.1f}")
    print(f"DP step          {med[0] * 1e3:9.1f}{med[1] * 1e3:9.1f}   ratio {med[0] / med[2]:.2f}x "
          f"wall, {med[1] / med[3]:.2f}x CPU (target <= 1.5x)")


def _without_guard_after(pt, checked: int) -> None:
    """Analysis only: ``pt``'s loop guard records and checks its first ``checked`` draws as
    usual (the deep check included), then neither traces the loop nor checks it."""
    guard, begin, check, draws = pt.guard, pt.guard.begin, pt.guard.check, [0]

    def begin_then_stop():
        draws[0] += 1
        if draws[0] <= checked:
            return begin()
        guard.trace = None

    guard.begin = begin_then_stop
    guard.check = lambda layout, calls=(): check(layout, calls) if draws[0] <= checked else None


def _bare_products(model, batch) -> float:
    """Median CPU seconds of the batched products alone (`torch.bmm` over the chunk layout
    the Linear rule uses; gathers and sums left out) of the node-level Linear layers of
    ``model.convs`` on ``batch``'s rows, random inputs of each layer's shape, summed."""
    from torch_geometric.nn.dense.linear import Linear as PygLinear

    from gnnprivacy.training.dp.segments import Segments

    chunks = Segments(batch.batch, batch.num_graphs).chunks(0)
    k, w = int(chunks.owner.numel()), chunks.width
    total = 0.0
    for layer in model.convs.modules():
        if isinstance(layer, (nn.Linear, PygLinear)):
            p, q = layer.weight.shape
            d, a = torch.randn(k, w, p), torch.randn(k, w, q)
            runs = [_timed(lambda: torch.bmm(d.transpose(1, 2), a))[1] for _ in range(200)]
            total += statistics.median(runs[10:])
    return total


def part_floor(args) -> None:
    """The step part with two more copies (analysis only): one whose capture hands back zero
    per-graph gradients without computing them (its updates are noise), one whose loop guard
    stops tracing and checking the loop after its first 3 steps. They show what the rest of
    the DP step costs (capture hooks, the loop guard, clipping, noise, update), so what is
    left for the per-graph gradients under the 1.5x target, and the guard's share. The four
    steps alternate on the same batches (every DP run draws with seed 0). Last, the bare
    batched products of the node-level Linear layers on one batch, timed alone."""
    from gnnprivacy.training.dp.flat_rules import Contribution

    pt, (model, opt), (plain, plain_opt) = _pair(args, args.steps + 3)
    floor_pt, (floor_model, floor_opt), _ = _pair(args, args.steps + 3)
    free_pt, (free_model, free_opt), _ = _pair(args, args.steps + 3)

    def no_gradients(layout):
        return {p: Contribution(None, None, torch.zeros(layout.num_subgraphs, p.numel()))
                for p in floor_model.parameters() if p.requires_grad}

    floor_pt.capture.contributions = no_gradients
    _without_guard_after(free_pt, 3)
    others = {"floor": (iter(floor_pt.loader), floor_model, floor_opt),
              "no guard": (iter(free_pt.loader), free_model, free_opt)}
    times = {"dp": [], "floor": [], "no guard": [], "plain": []}
    for batch in pt.loader:                    # one trace open at a time: draw, step, draw
        times["dp"].append(_timed(lambda: _step(model, opt, batch))[1])
        for key, (runs, other, other_opt) in others.items():
            drawn = next(runs)
            times[key].append(_timed(lambda: _step(other, other_opt, drawn))[1])
        times["plain"].append(_timed(lambda: _step(plain, plain_opt, batch))[1])
    med = {k: statistics.median(v[3:]) * 1e3 for k, v in times.items()}
    bare = _bare_products(model, batch) * 1e3
    print(f"{args.dataset} ({args.backbone}, hidden {args.hidden}, {args.layers} layers, batch "
          f"{args.step_batch}), {len(times['dp'])} steps, CPU ms (medians)")
    rows = (("non-private step", "plain"), ("DP step", "dp"),
            ("DP step, per-graph gradients not computed", "floor"),
            ("DP step, loop not traced after step 3", "no guard"))
    for label, key in rows:
        print(f"  {label:<42}{med[key]:7.2f}   {med[key] / med['plain']:.2f}x")
    print(f"  per-graph gradients (difference)          {med['dp'] - med['floor']:7.2f}; left for "
          f"them under 1.5x: {1.5 * med['plain'] - med['floor']:.2f}")
    print(f"  loop guard's tracing (difference)         {med['dp'] - med['no guard']:7.2f}")
    print(f"  bare batched products of the node-level Linear layers, alone: {bare:.2f}")


def part_phases(args) -> None:
    """Where a step's CPU time goes: each phase of the DP loop and of the plain loop on the
    same batches (medians of process time over the steps after the first 5)."""
    pt, (model, opt), (plain, plain_opt) = _pair(args, args.steps + 5)
    times: dict[str, list[float]] = {}

    def timed(key, fn):
        def run(*a, **k):
            start = time.process_time()
            try:
                return fn(*a, **k)
            finally:
                times.setdefault(key, []).append(time.process_time() - start)
        return run

    # the DP step's parts (inside optimizer.step())
    pt.capture.contributions = timed("per-graph gradients", pt.capture.contributions)
    pt.engine.add_noise = timed("noise", pt.engine.add_noise)
    pt.engine._update = timed("optimizer update", pt.engine._update)
    pt.guard.check = timed("loop guard's check", pt.guard.check)
    clipped = pt._clipped_sums
    pt._clipped_sums = timed("clipped sums (with per-graph gradients)", clipped)

    def loop(m, o, batch, who):
        edge_attr = getattr(batch, "edge_attr", None)
        timed(f"{who} zero_grad", o.zero_grad)()
        out = timed(f"{who} forward", m)(batch.x, batch.edge_index, batch.batch, edge_attr)
        loss = F.cross_entropy(out, batch.y)
        timed(f"{who} backward", loss.backward)()
        timed(f"{who} optimizer.step", o.step)()

    for batch in pt.loader:
        loop(model, opt, batch, "DP")
        loop(plain, plain_opt, batch, "non-private")
    med = {k: statistics.median(v[5:]) * 1e3 for k, v in times.items()}
    med["clip factors and c @ G"] = (med.pop("clipped sums (with per-graph gradients)")
                                     - med["per-graph gradients"])
    print(f"{args.dataset} ({args.backbone}), {len(times['DP forward'])} steps, CPU ms "
          "(medians)")
    for key in sorted(med):
        print(f"  {key:<32}{med[key]:7.2f}")
    total = {who: sum(med[f"{who} {part}"] for part in
                      ("zero_grad", "forward", "backward", "optimizer.step"))
             for who in ("DP", "non-private")}
    print(f"  total: DP {total['DP']:.2f}, non-private {total['non-private']:.2f}, ratio "
          f"{total['DP'] / total['non-private']:.2f}x")


def _fit(gset, epsilon, seed, args):
    fit = fit_graph_classifier(gset.subset("train"), num_features=gset.num_features,
                               num_classes=gset.num_classes, edge_dim=gset.edge_dim,
                               backbone=args.backbone, epsilon=epsilon, epochs=args.epochs,
                               batch_size=args.batch_size, lr=args.lr, seed=seed)
    return accuracy(fit.model, gset.subset("test")), fit


def part_table(args) -> None:
    epsilons = [None] + args.epsilons
    seeds = args.seeds
    rows = []
    for name in args.datasets:
        sets = {s: load_graph_dataset(name, root=args.data_root, seed=s) for s in seeds}
        n_train = len(sets[seeds[0]].subset("train"))
        cells = []
        for eps in epsilons:
            accs, spent, delta = [], [], None
            for s in seeds:
                acc, fit = _fit(sets[s], eps, s, args)
                accs.append(acc)
                spent.append(fit.epsilon)
                delta = fit.delta
            mean, sd = statistics.mean(accs), (statistics.stdev(accs) if len(accs) > 1 else 0.0)
            cells.append({"epsilon": eps, "mean": mean, "std": sd, "accs": accs,
                          "spent": max(spent), "delta": delta})
            print(f"{name:<9} eps {'inf' if eps is None else eps:>4}: {100 * mean:5.1f} "
                  f"+- {100 * sd:4.1f}  (spent {max(spent):.3f}, delta "
                  f"{'-' if delta is None else f'{delta:.2g}'})", flush=True)
        rows.append({"dataset": name, "num_train_graphs": n_train, "cells": cells})
    head = " | ".join(["non-private"] + [f"epsilon {e:g}" for e in epsilons[1:]])
    print(f"\n| dataset (train graphs, delta) | {head} |")
    print("|---" * (len(epsilons) + 1) + "|")
    for r in rows:
        delta = next(c["delta"] for c in r["cells"] if c["delta"] is not None)
        vals = " | ".join(f"{100 * c['mean']:.1f} ± {100 * c['std']:.1f}" for c in r["cells"])
        print(f"| {r['dataset']} ({r['num_train_graphs']}, {delta:.2g}) | {vals} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


def part_mia(args) -> None:
    from gnnprivacy.attacks.graph_membership import graph_membership

    gset = load_graph_dataset(args.dataset, root=args.data_root, seed=0)
    for text in args.mia_epsilons.split(","):
        eps = None if text == "none" else float(text)
        out = graph_membership(gset, epsilon=eps, num_models=args.models, seed=0,
                               backbone=args.backbone, epochs=args.epochs,
                               batch_size=args.batch_size, lr=args.lr)
        ci = out["auc_ci95"]
        print(f"{args.dataset} {'non-private' if eps is None else f'epsilon {eps:g}'}: LiRA AUC "
              f"{out['auc']:.3f} [95% CI {ci['low']:.3f}, {ci['high']:.3f}], TPR@1%FPR "
              f"{out['tpr_at_1pct_fpr']:.3f}, {out['num_models']} models on halves of "
              f"{out['pool']} graphs, spent {out['epsilon']:.3f}, mean test accuracy "
              f"{out['test_accuracy']:.3f} ({out['seconds']:.0f} s)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("step", "phases", "floor", "table", "mia"),
                    default="step")
    ap.add_argument("--data-root", default="../shared/datasets")
    ap.add_argument("--dataset", default="proteins")
    ap.add_argument("--datasets", type=name_list, default="proteins,aids,enzymes,cox2,dhfr")
    ap.add_argument("--epsilons", type=float_list, default="1,4,8")
    ap.add_argument("--seeds", type=int_list, default="0,1,2")
    ap.add_argument("--backbone", default="gin")
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--step-batch", type=int, default=64,
                    help="step, phases and floor parts: expected graphs per batch")
    ap.add_argument("--hidden", type=int, default=32,
                    help="step, phases and floor parts: channels per layer (the built-in's 32)")
    ap.add_argument("--layers", type=int, default=2,
                    help="step, phases and floor parts: message-passing layers (built-in: 2)")
    ap.add_argument("--models", type=int, default=8)
    ap.add_argument("--mia-epsilons", default="none,1",
                    help="settings of the membership part ('none': non-private)")
    ap.add_argument("--linear-norms", choices=("auto", "ghost", "materialised"),
                    default="auto",
                    help="step part: every Linear's per-graph norms in one form (ghost: Gram "
                         "and the scaled-rows product; materialised: per-graph gradients and "
                         "c @ G) instead of the cost model's choice, to compare")
    ap.add_argument("--json", default=None, help="also write the table's numbers here")
    args = ap.parse_args()
    {"step": part_step, "phases": part_phases, "floor": part_floor, "table": part_table,
     "mia": part_mia}[args.part](args)


if __name__ == "__main__":
    main()
