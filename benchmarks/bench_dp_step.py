"""Time one DP step against a non-private step and a per-subgraph loop (side by side).

Setup: a random directed graph the size of Amazon Computers (13,752 nodes, 491,722 edges),
767 features, 10 classes, HeterPoisson sampling with expected batch 4096 and M = 1, the
star GCN ``767-128-10`` of spec 000. Timed, interleaved, median over ``--repeats``:

* ``nonprivate``: forward + mean loss + backward + Adam step on a fixed sampled batch;
* ``dp``:         sample a batch + per-subgraph norms + clip + noise + Adam step;
* ``dp_nosample``: the same DP step on the fixed batch (no sampling);
* ``loop``:       one backward per subgraph (timed on ``--loop-subgraphs`` subgraphs and
  scaled to the full batch) + clip + sum + noise;
* ``vmap`` (``--vmap``): materialised per-subgraph gradients with ``torch.func.vmap``;
* ``opacus_ghost`` (``--opacus``): Opacus 1.6 ghost clipping (two backward passes).

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_dp_step.py``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn
from torch.nn import functional as F

from gnnprivacy.nn.star import StarGNN
from gnnprivacy.sampling.heter_poisson import HeterPoissonSampler
from gnnprivacy.training.dp import DPEngine, gaussian_noise, make_optimizer


def random_graph(num_nodes: int, num_edges: int, gen: torch.Generator) -> torch.Tensor:
    src = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    dst = torch.randint(0, num_nodes, (num_edges,), generator=gen)
    return torch.stack([src, dst])


def loss_vector(model: nn.Module, x, y, batch) -> torch.Tensor:
    return F.cross_entropy(model(x, batch), y[batch.centers], reduction="none")


def nonprivate_step(model, opt, x, y, batch, b_exp: float) -> None:
    opt.zero_grad(set_to_none=True)
    (loss_vector(model, x, y, batch).sum() / b_exp).backward()
    opt.step()


def loop_step(model, opt, x, y, batch, num_loop: int, clip: float, std: float, gen) -> float:
    """Per-subgraph backward loop on ``num_loop`` subgraphs; returns seconds (loop part)."""
    params = [p for p in model.parameters()]
    total = [torch.zeros_like(p) for p in params]
    ptr = batch.rowptr()
    t0 = time.perf_counter()
    for i in range(num_loop):
        sub = type(batch)(batch.centers[i:i + 1], batch.periph_nodes[ptr[i]:ptr[i + 1]],
                          torch.zeros(int(ptr[i + 1] - ptr[i]), dtype=torch.long), 1)
        grads = torch.autograd.grad(loss_vector(model, x, y, sub).sum(), params)
        norm = torch.sqrt(sum(g.square().sum() for g in grads))
        c = min(1.0, clip / float(norm))
        for acc, g in zip(total, grads):
            acc.add_(g, alpha=c)
    elapsed = time.perf_counter() - t0
    for p, acc in zip(params, total):
        p.grad = (acc + gaussian_noise(acc, std, generator=gen)) / batch.num_subgraphs
    opt.step()
    return elapsed


def vmap_step(model, opt, x, y, batch, clip: float, std: float, gen) -> None:
    """Naive per-sample gradients materialised with torch.func (one row per subgraph)."""
    from torch.func import functional_call, grad, vmap

    agg = model.aggregate(x, batch)
    params = {k: v.detach() for k, v in model.named_parameters()}

    def one(p, a, t):
        out = functional_call(model.classifier, {k[11:]: v for k, v in p.items()
                                                 if k.startswith("classifier.")},
                              (functional_call(model.update, {k[7:]: v for k, v in p.items()
                                                              if k.startswith("update.")},
                                               (a.unsqueeze(0),)),))
        return F.cross_entropy(out, t.unsqueeze(0))

    per = vmap(grad(one), in_dims=(None, 0, 0))(params, agg, y[batch.centers])
    norms = torch.sqrt(sum(g.flatten(1).square().sum(1) for g in per.values()))
    c = torch.clamp(clip / norms, max=1.0)
    for k, p in model.named_parameters():
        s = torch.einsum("b,b...->...", c, per[k])
        p.grad = (s + gaussian_noise(s, std, generator=gen)) / batch.num_subgraphs
    opt.step()


def opacus_ghost_step_fn(args, x, y, batch, b_exp):
    """A step of Opacus' GradSampleModuleFastGradientClipping on a copy of the model."""
    from opacus.grad_sample import GradSampleModuleFastGradientClipping
    from opacus.optimizers import DPOptimizerFastGradientClipping
    from opacus.utils.fast_gradient_clipping_utils import DPLossFastGradientClipping

    model = StarGNN(args.features, args.classes, aggregator=args.aggregator,
                    hidden_channels=args.hidden)
    gsm = GradSampleModuleFastGradientClipping(model, max_grad_norm=0.5, use_ghost_clipping=True,
                                               loss_reduction="sum")
    opt = DPOptimizerFastGradientClipping(torch.optim.Adam(gsm.parameters(), lr=0.01),
                                          noise_multiplier=2.0, max_grad_norm=0.5,
                                          expected_batch_size=int(b_exp), loss_reduction="sum",
                                          generator=torch.Generator().manual_seed(2))
    criterion = DPLossFastGradientClipping(gsm, opt, nn.CrossEntropyLoss(reduction="sum"),
                                           loss_reduction="sum")

    def step():
        opt.zero_grad()
        criterion(gsm(x, batch), y[batch.centers]).backward()
        opt.step()

    return step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=13752)
    ap.add_argument("--edges", type=int, default=491722)
    ap.add_argument("--features", type=int, default=767)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--batch", type=int, default=4096, help="expected batch size")
    ap.add_argument("--aggregator", default="gcn")
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--loop-subgraphs", type=int, default=256)
    ap.add_argument("--vmap", action="store_true", help="also time naive vmap per-sample grads")
    ap.add_argument("--opacus", action="store_true", help="also time Opacus ghost clipping")
    args = ap.parse_args()

    gen = torch.Generator().manual_seed(0)
    edge_index = random_graph(args.nodes, args.edges, gen)
    x = torch.randn(args.nodes, args.features, generator=gen)
    y = torch.randint(0, args.classes, (args.nodes,), generator=gen)
    everyone = torch.ones(args.nodes, dtype=torch.bool)
    q_b = min(1.0, args.batch / args.nodes)
    sampler = HeterPoissonSampler(edge_index, args.nodes, candidates=everyone, eligible=everyone,
                                  q_b=q_b, M=1.0)
    b_exp = q_b * args.nodes
    model = StarGNN(args.features, args.classes, aggregator=args.aggregator,
                    hidden_channels=args.hidden)
    opt = make_optimizer("adam", model.parameters(), lr=0.01)
    engine = DPEngine(model, opt, clip_norm=0.5, noise_multiplier=2.0, expected_batch_size=b_exp,
                      generator=torch.Generator().manual_seed(1))
    fixed = sampler.sample(gen)
    print(f"graph: {args.nodes} nodes, {args.edges} edges; batch {fixed.num_subgraphs} stars, "
          f"{fixed.num_peripherals} peripherals; model {args.features}-{args.hidden}-{args.classes}"
          f" ({args.aggregator}); torch threads {torch.get_num_threads()}")

    timers = {
        "nonprivate": lambda: nonprivate_step(model, opt, x, y, fixed, b_exp),
        "dp": lambda: engine.step(lambda: loss_vector(model, x, y, sampler.sample(gen))),
        "dp_nosample": lambda: engine.step(lambda: loss_vector(model, x, y, fixed)),
        "sample_only": lambda: sampler.sample(gen),
    }
    if args.vmap:
        timers["vmap"] = lambda: vmap_step(model, opt, x, y, fixed, 0.5, 1.0, gen)
    if args.opacus:
        timers["opacus_ghost"] = opacus_ghost_step_fn(args, x, y, fixed, b_exp)
    times: dict[str, list[float]] = {k: [] for k in timers}
    for fn in timers.values():  # warm-up
        fn()
    for _ in range(args.repeats):
        for k, fn in timers.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    n_loop = min(args.loop_subgraphs, fixed.num_subgraphs)
    loop_times = [loop_step(model, opt, x, y, fixed, n_loop, 0.5, 1.0, gen) for _ in range(3)]
    loop_full = statistics.median(loop_times) * fixed.num_subgraphs / n_loop

    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{'step':<14}{'median ms':>12}{'x nonprivate':>15}")
    for k, v in med.items():
        print(f"{k:<14}{1e3 * v:>12.2f}{v / med['nonprivate']:>15.2f}")
    print(f"{'loop (est.)':<14}{1e3 * loop_full:>12.1f}{loop_full / med['nonprivate']:>15.1f}"
          f"   (timed on {n_loop} subgraphs, scaled to {fixed.num_subgraphs})")
    print(f"ratio dp / nonprivate           = {med['dp'] / med['nonprivate']:.2f}  (target <= 1.5)")
    print(f"ratio dp_nosample / nonprivate  = {med['dp_nosample'] / med['nonprivate']:.2f}")
    print(f"speed-up of dp over loop        = {loop_full / med['dp']:.1f}x  (target >= 10)")


if __name__ == "__main__":
    main()
