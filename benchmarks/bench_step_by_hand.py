"""A DP step written by hand, beside ours and the plain step: how much of the DP / plain ratio
is the mathematics and how much the library.

`bench_step_matrix.py` measures ``make_private``'s DP step against the plain step. This
script asks how far a direct implementation of the same step gets on this machine: for two
of the matrix's models (``--models``: ``layernorm``, the MLP ``Linear -> LayerNorm -> ReLU ->
Linear -> LayerNorm -> ReLU -> Linear``, and ``gcn``, two GCNConv layers and a Linear head)
it runs, on the same heterpoisson batches and alternating in one process,

* ``plain``: forward, mean cross-entropy, ``loss.backward()``, Adam (the matrix's plain step);
* ``hand``: a DP step written by hand, with no library code and none of the library's checks
  (no loop guard, input checks, rules, ledger or audit bookkeeping): the model's own forward
  with torch's forward hooks keeping each trained layer's input and output, one
  ``torch.autograd.grad`` for those outputs, every subgraph's squared gradient norm over all
  parameters in the Gram form (each row's own term and each pair of rows inside a
  subgraph), the clip factors, the clipped sum as the product a plain backward computes
  with each row scaled by its subgraph's factor (book-keeping, Bu et al. 2023), one
  Gaussian draw, Adam. Two forms of the norms are timed (every tensor side by side with the
  block sums as one product, or one fused kernel per tensor) and the faster is kept;
* ``ours``: ``gp.make_private(sampler="heterpoisson")``'s step (the matrix's DP step).

``hand_clipped_sum`` is the hand-written step's noiseless clipped sum; the benchmark's test
checks it against the naive loop (one backward per subgraph), so it computes what a DP step
must. It is one direct way of computing the step in eager PyTorch, not a lower bound: where
ours is faster (``ours/hand`` below 1), the library's forms beat it.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_step_by_hand.py
    OMP_NUM_THREADS=1 python benchmarks/bench_step_by_hand.py --features 16,128,767 \\
        --subgraphs 100,1000,10000 --steps 40 --out F.json

Prints per cell the medians of process CPU time (ms) of the three steps and the ratios
hand / plain, ours / plain and ours / hand.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from itertools import accumulate
from pathlib import Path

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch_geometric.nn import GCNConv
from torch_geometric.nn.dense.linear import Linear as PygLinear

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _cli import int_list, name_list  # noqa: E402
from bench_step_matrix import MODULES, _load, _node_step, _write, node_graph  # noqa: E402

import gnnprivacy as gp  # noqa: E402

CLIP, NOISE = 1.0, 1.0


def _pairs(seg: Tensor, num: int):
    """``(first, second, owner)``: every pair of rows ``r < r'`` of one subgraph (rows
    grouped by subgraph, as a heterpoisson batch holds them)."""
    counts = torch.bincount(seg, minlength=num)
    start = torch.cumsum(counts, 0) - counts
    pos = torch.arange(seg.numel())
    partners = counts[seg] - 1 - (pos - start[seg])
    first = torch.repeat_interleave(pos, partners)
    offsets = torch.cumsum(partners, 0) - partners
    second = first + 1 + (torch.arange(first.numel()) - offsets[first])
    return first, second, seg[first]


_INDICATORS: dict = {}


def _indicator(widths: tuple[int, ...]) -> Tensor:
    found = _INDICATORS.get(widths)
    if found is None:
        found = torch.zeros(len(widths), sum(widths))
        lo = 0
        for j, w in enumerate(widths):
            found[j, lo:lo + w] = 1
            lo += w
        _INDICATORS[widths] = found
    return found


def _captured(model: nn.Module, batch, every_row: bool):
    """The model's own forward with torch's forward hooks keeping each trained layer's input
    and output (a GCNConv: its ``lin``'s, and its own output for the bias), then one
    ``torch.autograd.grad`` of the summed per-subgraph losses for every kept output.

    Returns ``[(parameter, a, d), ...]``: a Linear map's weight has the rows ``a`` of its
    input and ``d`` of its output gradient (per-row gradient ``d_r a_rᵀ``); every other
    parameter ``a = None`` and per-row gradients ``d``."""
    kept: dict = {}
    handles = []
    for m in model.modules():
        if isinstance(m, (nn.Linear, PygLinear, nn.LayerNorm, GCNConv)):
            handles.append(m.register_forward_hook(
                lambda mod, inp, out: kept.__setitem__(mod, (inp[0], out))))
    try:
        out = model(batch)
    finally:
        for h in handles:
            h.remove()
    rows = batch.center if not every_row else slice(None)
    loss = F.cross_entropy(out[rows], batch.y[rows], reduction="sum")
    mods = list(kept)
    convs = {m.lin for m in mods if isinstance(m, GCNConv)}
    grads = dict(zip(mods, torch.autograd.grad(loss, [kept[m][1] for m in mods])))
    terms = []
    with torch.no_grad():
        for m in mods:
            x, d = kept[m][0], grads[m]
            if isinstance(m, (nn.Linear, PygLinear)):
                if m in convs:
                    continue                   # the conv's own entry below
                terms.append((m.weight, x, d))
                if m.bias is not None:
                    terms.append((m.bias, None, d))
            elif isinstance(m, nn.LayerNorm):
                xhat = F.layer_norm(x, m.normalized_shape, eps=m.eps)
                terms += [(m.weight, None, d * xhat), (m.bias, None, d)]
            else:                              # GCNConv: lin's rows, then the bias
                terms += [(m.lin.weight, kept[m.lin][0], grads[m.lin]), (m.bias, None, d)]
    return terms


def _row_sq(t: Tensor) -> Tensor:
    return torch.linalg.vector_norm(t, dim=1).square()


def hand_clipped_sum(model: nn.Module, batch, clip: float, *, cross: bool = True,
                     form: str = "wide", every_row: bool = False) -> Tensor:
    """``Σ_i min(1, C/‖g_i‖) g_i`` over the subgraphs of ``batch``, ``g_i`` the gradient of
    subgraph ``i``'s loss (its centre's cross-entropy) over all parameters, laid end to end
    in ``model.parameters()`` order. ``cross=False`` drops the pairs' cross terms (a broken
    step, for the test's control). ``form``: ``"wide"`` lays every tensor side by side (a
    few operations, for few rows), ``"narrow"`` takes one fused kernel per tensor (for many
    rows); the benchmark times both and keeps the faster. ``every_row``: subgraph ``i``'s
    loss is the sum over all its rows (in an MLP only the centre's row has a gradient
    otherwise, and every pair's cross term is zero; the test's check of the cross terms)."""
    terms = _captured(model, batch, every_row)
    with torch.no_grad():
        seg, num = batch.batch, int(batch.num_subgraphs)
        blocks: dict[int, int] = {}            # id of a tensor -> its block
        tensors: list[Tensor] = []
        for _, a, d in terms:
            for t in (a, d):
                if t is not None and id(t) not in blocks:
                    blocks[id(t)] = len(tensors)
                    tensors.append(t)
        pairs = _pairs(seg, num) if cross else None
        if form == "wide":
            x = torch.cat(tensors, 1)
            ind = _indicator(tuple(t.shape[1] for t in tensors))
            own = ind @ (x * x).t()
            dots = ind @ (x[pairs[0]] * x[pairs[1]]).t() if cross else None
        else:                                  # one fused kernel per tensor
            own = [_row_sq(t) for t in tensors]
            dots = ([torch.linalg.vecdot(t[pairs[0]], t[pairs[1]]) for t in tensors]
                    if cross else None)

        def total(s):                          # every term's product of its blocks, summed
            out = 0
            for _, a, d in terms:
                k = s[blocks[id(d)]]
                out = out + (k if a is None else k * s[blocks[id(a)]])
            return out

        sq = torch.zeros(num).index_add_(0, seg, total(own))
        if cross:
            sq.index_add_(0, pairs[2], total(dots), alpha=2)
        c = (clip / sq.clamp_min(1e-30).sqrt()).clamp_max(1.0)[seg]
        if form == "wide":                     # every row-wise sum in one product
            rowwise = c @ x
            edges = list(accumulate((t.shape[1] for t in tensors), initial=0))
        sums = {}
        for p, a, d in terms:
            if a is not None:
                sums[p] = ((d * c.unsqueeze(1)).t() @ a).reshape(-1)
            elif form == "wide":
                k = blocks[id(d)]
                sums[p] = rowwise[edges[k]:edges[k + 1]]
            else:
                sums[p] = c @ d
        return torch.cat([sums[p] for p in model.parameters()])


def hand_step(model: nn.Module, opt, batch, gen: torch.Generator, expected: float,
              form: str = "wide") -> None:
    """One DP step by hand: clipped sum, one Gaussian draw, ``/ expected batch``, Adam."""
    opt.zero_grad()
    flat = hand_clipped_sum(model, batch, CLIP, form=form)
    with torch.no_grad():
        flat = (flat + torch.randn(flat.shape, generator=gen) * (NOISE * CLIP)) / expected
        lo = 0
        for p in model.parameters():
            p.grad = flat[lo:lo + p.numel()].view_as(p)
            lo += p.numel()
    opt.step()


#: the models written by hand (keys of the matrix's `MODULES`)
HAND_MODELS = ("layernorm", "gcn")


def cell(key: str, features: int, subgraphs: int, hidden: int, steps: int,
         warmup: int) -> dict:
    data = node_graph(features, subgraphs)
    classes = int(data.y.max()) + 1
    models = []
    for _ in range(4):
        torch.manual_seed(0)
        models.append(MODULES[key][1](features, hidden, classes))
    ours, wide, narrow, plain = models
    opts = [torch.optim.Adam(m.parameters(), lr=0.01) for m in models]
    total = 1 + warmup + steps
    pt = gp.make_private(ours, opts[0], data, sampler="heterpoisson", noise_multiplier=NOISE,
                         max_grad_norm=CLIP, steps=total, seed=0, batch_size=subgraphs)
    expected = float(pt.engine.expected_batch_size)
    gen = torch.Generator().manual_seed(0)
    times: dict[str, list[float]] = {"ours": [], "wide": [], "narrow": [], "plain": []}
    rows = []
    for batch in pt.loader:
        for name, fn in (
                ("ours", lambda: _node_step(ours, opts[0], batch)),
                ("wide", lambda: hand_step(wide, opts[1], batch, gen, expected, "wide")),
                ("narrow", lambda: hand_step(narrow, opts[2], batch, gen, expected, "narrow")),
                ("plain", lambda: _node_step(plain, opts[3], batch))):
            c = time.process_time()
            fn()
            times[name].append(time.process_time() - c)
        rows.append(int(batch.num_nodes))
    med = {k: 1e3 * statistics.median(v[1 + warmup:]) for k, v in times.items()}
    form = min(("wide", "narrow"), key=med.get)
    hand = med[form]
    return {"module": MODULES[key][0], "features": features, "subgraphs": subgraphs,
            "rows_mean": statistics.mean(rows),
            "plain_ms": med["plain"], "hand_ms": hand, "hand_form": form,
            "hand_wide_ms": med["wide"], "hand_narrow_ms": med["narrow"],
            "ours_ms": med["ours"], "hand_ratio": hand / med["plain"],
            "ours_ratio": med["ours"] / med["plain"], "ours_over_hand": med["ours"] / hand,
            "timed_steps": steps}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=name_list, default=",".join(HAND_MODELS),
                    help="comma list of: " + ", ".join(HAND_MODELS))
    ap.add_argument("--features", type=int_list, default="16,128,767")
    ap.add_argument("--subgraphs", type=int_list, default="100,1000")
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--steps", type=int, default=40, help="timed steps per cell")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--out", default=None, help="JSON file of every cell")
    args = ap.parse_args(argv)
    unknown = [m for m in args.models if m not in HAND_MODELS]
    if unknown:
        ap.error(f"--models: unknown {unknown}; choose from {list(HAND_MODELS)}")
    result = {"command": " ".join(sys.argv), "torch_threads": torch.get_num_threads(),
              "load_start": _load(), "cells": []}
    print(f"hidden {args.hidden}; torch threads {torch.get_num_threads()}, "
          f"load {result['load_start']}; medians of process CPU time")
    print(f"{'model':<15}{'F':>5}{'B':>7}{'rows':>7}{'plain ms':>10}{'hand ms':>10}"
          f"{'ours ms':>9}{'hand/plain':>12}{'ours/plain':>12}{'ours/hand':>11}  hand's form")
    for key in args.models:
        for f in args.features:
            for b in args.subgraphs:
                c = cell(key, f, b, args.hidden, args.steps, args.warmup)
                c["load"] = _load()
                result["cells"].append(c)
                print(f"{c['module']:<15}{f:>5}{b:>7}{c['rows_mean']:>7.0f}{c['plain_ms']:>10.2f}"
                      f"{c['hand_ms']:>10.2f}{c['ours_ms']:>9.2f}{c['hand_ratio']:>11.2f}x"
                      f"{c['ours_ratio']:>11.2f}x{c['ours_over_hand']:>10.2f}x  "
                      f"{c['hand_form']}", flush=True)
                _write(args.out, result)
    return result


if __name__ == "__main__":
    main()
