"""What make_private's loop check costs: the first step's replay and the later steps' signature.

The model of docs/own-model.md (two SAGEConv layers, LayerNorm, a residual, a Linear head).
Three identical runs (same model, seed and batches) step in turn, so a busy machine slows them
alike: one with the loop check (`gnnprivacy.training.private.guards.LoopGuard`: the first step
recorded in full and replayed twice; on every later step the loop's own torch functions
around the model recorded, and the model's forward compared by its autograd graph and its
modules' calls; and the state checks of issue 43: nothing changes the model between steps, no
tensor is kept on it, no custom autograd Function), one with the loop check but without the
state checks, one with the recording switched off (the engine as it was before the check). A
fourth, plain copy of the model steps without make_private on the checked run's batches. Only
the step is timed (forward to update, the next draw's state check included), not the sampling.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_loop_guard.py [--dataset cora]
        [--steps 60] [--data-root ../shared/datasets] [--sampler heterpoisson]

Prints the first step of each run, the median of the later steps (wall and the process's own
CPU time), the ratio of the later steps, the check's cost per step against a plain step
(target: at most 10%), what the state checks add to the first and the later steps, and the
first, fully checked step in CPU seconds and plain steps (target: at most 1 s or 10 plain
steps).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch
from bench_user_model import Net, step

import gnnprivacy as gp


def timed_step(model, opt, batch, pt) -> tuple[float, float]:
    t, c = time.perf_counter(), time.process_time()
    step(model, opt, batch)
    if pt is not None:
        pt.guard.check_between_steps()          # what the next draw checks first
    return time.perf_counter() - t, time.process_time() - c


def without_state_checks(guard) -> None:
    """Switch off issue 43's state checks on one run's guard (the control)."""
    guard._attributes = lambda *_: {}
    guard.after_step = lambda *_: None
    guard.check_between_steps = lambda *_: None


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="cora")
    ap.add_argument("--data-root", default="../shared/datasets")
    ap.add_argument("--sampler", default="heterpoisson")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--hidden", type=int, default=64)
    args = ap.parse_args(argv)
    data = gp.load_dataset(args.dataset, root=args.data_root)
    torch.manual_seed(0)
    model = Net(data.num_features, args.hidden, int(data.y.max()) + 1)
    runs = {}
    for name in ("checked", "no state", "unchecked"):
        m = copy.deepcopy(model)
        opt = torch.optim.Adam(m.parameters(), lr=0.01)
        pt = gp.make_private(m, opt, data, sampler=args.sampler, noise_multiplier=1.0,
                             steps=args.steps, seed=0)
        if name != "checked":
            without_state_checks(pt.guard)
        if name == "unchecked":
            pt.guard.begin = lambda: None          # nothing recorded, nothing replayed
            pt.guard.check = lambda layout, calls=(): None
        runs[name] = (m, opt, iter(pt.loader), pt, [])
    plain = copy.deepcopy(model)
    runs["plain"] = (plain, torch.optim.Adam(plain.parameters(), lr=0.01), None, None, [])
    for _ in range(args.steps):
        for m, opt, loader, pt, times in runs.values():
            if loader is not None:
                batch = next(loader)            # every DP run draws the same batches
            times.append(timed_step(m, opt, batch, pt))
    checked = runs["checked"][3]
    funcs, graph, calls = next(iter(checked.guard.verified))
    print(f"{args.dataset}, sampler {args.sampler}: {args.steps} steps each, torch threads "
          f"{torch.get_num_threads()}; the signature: {len(funcs)} torch functions of the loop "
          f"around the model, {len(graph)} entries of the autograd graph, {len(calls)} "
          "module calls")
    print(f"{'':<11}{'first step ms':>14}{'later wall ms':>15}{'later CPU ms':>14}")
    med = {}
    for name, (*_, times) in runs.items():
        wall = statistics.median(t for t, _ in times[1:])
        cpu = statistics.median(c for _, c in times[1:])
        med[name] = (wall, cpu)
        print(f"{name:<11}{times[0][0] * 1e3:14.1f}{wall * 1e3:15.2f}{cpu * 1e3:14.2f}")
    (w1, c1), (w0, c0), (ws, cs), (_, cp) = (med["checked"], med["unchecked"], med["no state"],
                                             med["plain"])
    print(f"later steps, checked / unchecked: {w1 / w0:.3f}x wall, {c1 / c0:.3f}x CPU; the "
          f"check's cost per step {1e3 * (c1 - c0):.2f} ms CPU = {(c1 - c0) / cp:.1%} of a "
          f"plain step ({1e3 * cp:.2f} ms; target at most 10%)")
    first = {name: times[0] for name, (*_, times) in runs.items()}
    print(f"the state checks (issue 43): first step +"
          f"{(first['checked'][0] - first['no state'][0]) * 1e3:.1f} ms, later steps +"
          f"{(w1 - ws) * 1e3:.3f} ms wall, +{(c1 - cs) * 1e3:.3f} ms CPU "
          f"({(c1 - cs) / c0:.1%} of an unchecked step)")
    print(f"first (fully checked) step {first['checked'][1]:.2f} s CPU = "
          f"{first['checked'][1] / cp:.0f} plain steps (target at most 1 s or 10 plain steps)")
    return {"check_ms": 1e3 * (c1 - c0), "plain_ms": 1e3 * cp, "share": (c1 - c0) / cp,
            "first_s": first["checked"][1], "first_plain_steps": first["checked"][1] / cp}


if __name__ == "__main__":
    main()
