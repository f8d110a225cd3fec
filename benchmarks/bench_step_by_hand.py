"""A DP step written by hand for one model, beside ours and the plain step: how much of the
DP / plain ratio is the mathematics and how much the library.

`bench_step_matrix.py` measures ``make_private``'s DP step against the plain step. This
script asks how far a direct implementation of the same step gets on this machine: for the
matrix's LayerNorm MLP (``Linear -> LayerNorm -> ReLU -> Linear -> LayerNorm -> ReLU ->
Linear``) it runs, on the same heterpoisson batches and alternating in one process,

* ``plain``: forward, mean cross-entropy, ``loss.backward()``, Adam (the matrix's plain step);
* ``hand``: a DP step written by hand for this one model, with no library code and none of
  the library's checks (no loop guard, input checks, hooks, ledger or audit bookkeeping):
  one ``torch.autograd.grad`` for the gradients of the five layer outputs, every
  subgraph's squared gradient norm over all parameters in the Gram form (each row's own
  term and each pair of rows inside a subgraph), the clip factors, the clipped sum as the
  product a plain backward computes with each row scaled by its subgraph's factor
  (book-keeping, Bu et al. 2023), one Gaussian draw, Adam. Two forms of the norms are timed
  (every block side by side with the block sums as one product, or one fused kernel per
  block) and the faster is kept;
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
from pathlib import Path

import torch
from torch import Tensor
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _cli import int_list  # noqa: E402
from bench_module_ratios import NormMLP  # noqa: E402
from bench_step_matrix import _load, _node_step, _write, node_graph  # noqa: E402

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


def _outputs(model: NormMLP, batch):
    """The forward pass, keeping every trained layer's input and output."""
    lin, norms = (model.lin1, model.lin2, model.head), (model.norm1, model.norm2)
    a0 = batch.x
    z1 = lin[0](a0)
    n1 = norms[0](z1)
    a1 = F.relu(n1)
    z2 = lin[1](a1)
    n2 = norms[1](z2)
    a2 = F.relu(n2)
    z3 = lin[2](a2)
    return (a0, a1, a2), (z1, z2), (z1, n1, z2, n2, z3)


def _combine(s):
    """Block sums (a ``(blocks, n)`` tensor or a list) -> the sum of every parameter's term:
    each Linear map's weight (its output block times its input block) and bias (its output
    block), then the LayerNorms' weights and biases (one block each)."""
    return s[0] * s[1] + s[1] + s[2] * s[3] + s[3] + s[4] * s[5] + s[5] + sum(s[6:])


def hand_clipped_sum(model: NormMLP, batch, clip: float, *, cross: bool = True,
                      form: str = "wide", every_row: bool = False) -> Tensor:
    """``Σ_i min(1, C/‖g_i‖) g_i`` over the subgraphs of ``batch``, ``g_i`` the gradient of
    subgraph ``i``'s loss (its centre's cross-entropy) over all parameters, laid end to end
    in ``model.parameters()`` order. ``cross=False`` drops the pairs' cross terms (a broken
    step, for the test's control). ``form``: ``"wide"`` lays every block side by side (a
    few operations, for few rows), ``"narrow"`` takes one fused kernel per block (for many
    rows); the benchmark times both and keeps the faster. ``every_row``: subgraph ``i``'s
    loss is the sum over all its rows (in this model only the centre's row has a gradient
    otherwise, and every pair's cross term is zero; the test's check of the cross terms)."""
    acts, pre, outs = _outputs(model, batch)
    center = batch.center if not every_row else slice(None)
    loss = F.cross_entropy(outs[-1][center], batch.y[center], reduction="sum")
    d1, dn1, d2, dn2, d3 = torch.autograd.grad(loss, outs)
    with torch.no_grad():
        seg, num = batch.batch, int(batch.num_subgraphs)
        norms = (model.norm1, model.norm2)
        xh = [F.layer_norm(z, n.normalized_shape, eps=n.eps) for z, n in zip(pre, norms)]
        ln = [dn1 * xh[0], dn1, dn2 * xh[1], dn2]
        blocks = [acts[0], d1, acts[1], d2, acts[2], d3, *ln]
        sq = torch.zeros(num)
        pairs, rowwise = (_pairs(seg, num) if cross else None), None
        if form == "wide":
            x = torch.cat(blocks, 1)
            ind = _indicator(tuple(t.shape[1] for t in blocks))
            sq.index_add_(0, seg, _combine(ind @ (x * x).t()))
            if cross:
                first, second, owner = pairs
                sq.index_add_(0, owner, _combine(ind @ (x[first] * x[second]).t()), alpha=2)
        else:                                   # one fused kernel per block
            sq.index_add_(0, seg, _combine([torch.linalg.vector_norm(t, dim=1).square()
                                            for t in blocks]))
            if cross:
                first, second, owner = pairs
                sq.index_add_(0, owner, _combine([torch.linalg.vecdot(t[first], t[second])
                                                  for t in blocks]), alpha=2)
        factor = (clip / sq.clamp_min(1e-30).sqrt()).clamp_max(1.0)
        c = factor[seg]
        if form == "wide":                      # every bias and LayerNorm parameter at once
            rowwise = c @ x
            edges = torch.cumsum(torch.tensor([0] + [t.shape[1] for t in blocks]), 0).tolist()

        def block(k):
            return blocks[k].t() @ c if rowwise is None else rowwise[edges[k]:edges[k + 1]]

        weights = [((d * c.unsqueeze(1)).t() @ a).reshape(-1)
                   for a, d in ((acts[0], d1), (acts[1], d2), (acts[2], d3))]
        return torch.cat([weights[0], block(1), block(6), block(7), weights[1], block(3),
                          block(8), block(9), weights[2], block(5)])


def hand_step(model: NormMLP, opt, batch, gen: torch.Generator, expected: float,
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


def cell(features: int, subgraphs: int, hidden: int, steps: int, warmup: int) -> dict:
    data = node_graph(features, subgraphs)
    classes = int(data.y.max()) + 1
    models = []
    for _ in range(4):
        torch.manual_seed(0)
        models.append(NormMLP(features, hidden, classes))
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
    return {"features": features, "subgraphs": subgraphs, "rows_mean": statistics.mean(rows),
            "plain_ms": med["plain"], "hand_ms": hand, "hand_form": form,
            "hand_wide_ms": med["wide"], "hand_narrow_ms": med["narrow"],
            "ours_ms": med["ours"], "hand_ratio": hand / med["plain"],
            "ours_ratio": med["ours"] / med["plain"], "ours_over_hand": med["ours"] / hand,
            "timed_steps": steps}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--features", type=int_list, default="16,128,767")
    ap.add_argument("--subgraphs", type=int_list, default="100,1000")
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--steps", type=int, default=40, help="timed steps per cell")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--out", default=None, help="JSON file of every cell")
    args = ap.parse_args(argv)
    result = {"command": " ".join(sys.argv), "torch_threads": torch.get_num_threads(),
              "load_start": _load(), "cells": []}
    print(f"LayerNorm MLP, hidden {args.hidden}; torch threads {torch.get_num_threads()}, "
          f"load {result['load_start']}; medians of process CPU time")
    print(f"{'F':>5}{'B':>7}{'rows':>7}{'plain ms':>10}{'hand ms':>10}{'ours ms':>9}"
          f"{'hand/plain':>12}{'ours/plain':>12}{'ours/hand':>11}  hand's form")
    for f in args.features:
        for b in args.subgraphs:
            c = cell(f, b, args.hidden, args.steps, args.warmup)
            c["load"] = _load()
            result["cells"].append(c)
            print(f"{f:>5}{b:>7}{c['rows_mean']:>7.0f}{c['plain_ms']:>10.2f}"
                  f"{c['hand_ms']:>10.2f}{c['ours_ms']:>9.2f}{c['hand_ratio']:>11.2f}x"
                  f"{c['ours_ratio']:>11.2f}x{c['ours_over_hand']:>10.2f}x  {c['hand_form']}",
                  flush=True)
            _write(args.out, result)
    return result


if __name__ == "__main__":
    main()
