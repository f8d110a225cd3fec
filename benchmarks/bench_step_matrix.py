"""The DP step against the plain step over widths, batches and models (one ratio per cell).

Node level (``--part nodes``): for each input width F in ``--features`` (16, 128, 767), each
expected number of subgraphs per step B in ``--subgraphs`` (100, 1,000, 10,000) and each model
of ``--modules`` (two layers of GCN, SAGE, GIN with a trained eps, GINE with ``edge_attr``, GAT
with ``edge_dim``, and an MLP with LayerNorm; hidden ``--hidden``), a csbm graph of 2.5 B
nodes (at least 600; F features, 10 classes, average degree 10; 80% training nodes, so the
sampling rate is B / (2 B)) is trained under ``gp.make_private(sampler="heterpoisson",
batch_size=B)`` with the loop guard on. Graph level (``--part graphs``): PROTEINS_full's
training graphs under ``make_private(sampler="graphs")``, GIN and GCN of the built-in task
(hidden 32, two layers), expected batches ``--graph-batches`` (64, 256).

Every batch the DP run draws from ``pt.loader`` is also given to a plain step of an identical
model (forward, mean cross-entropy, ``loss.backward()``, Adam): DP and plain steps alternate
on the same batches in one process, so both see the same load on a shared machine. The
first DP step (the loop guard's full check) and ``--warmup`` more are not in the medians;
its CPU time is reported on its own. Then each side takes ``MEMORY_STEPS`` more steps in a
forked copy of the process: the step's own peak memory above the RSS before it
(`bench_module_ratios._memory`).

``--part opacus``: a DP-SGD step of a 3-layer MLP (hidden 64) with our ``nodes`` sampler at
an expected batch of 1,024 training rows against Opacus 1.6's ghost clipping on the same
batches (same model, one process, the three steps alternating): Computers (767 features),
Facebook (4,714) and a csbm graph (32), medians of steps 4-26. Without a dataset under
``--data-root`` its row is skipped (said in the output).

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_step_matrix.py --out F.json
    OMP_NUM_THREADS=1 python benchmarks/bench_step_matrix.py --out F.json --quick
    OMP_NUM_THREADS=1 python benchmarks/bench_step_matrix.py --out F.json --part nodes \\
        --features 16 --subgraphs 1000 --modules gin,gine --steps 10

Prints one line per cell as it finishes (DP ms, plain ms, ratio of the medians of process CPU
time, first step, step memory) and at the end the worst cell, the median ratio and each cell
against its target (2x, GAT 3x; the median at most 1.5x; graph classification at most 1.5x).
``--out`` receives every cell so far after each one (written atomically), with the machine's
load average before and after each cell.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _cli import int_list, name_list  # noqa: E402
from bench_module_ratios import (EDGE_DIM, MEMORY_STEPS, NormMLP, TwoConvs,  # noqa: E402
                                 _forked, _gat, _memory, _mlp)

import gnnprivacy as gp  # noqa: E402

#: model builders ``(features, hidden, classes) -> model`` of the node-level cells
MODULES = {
    "gcn": ("GCN", lambda f, h, c: TwoConvs(_conv("GCNConv"), f, h, c)),
    "sage": ("SAGE", lambda f, h, c: TwoConvs(_conv("SAGEConv"), f, h, c)),
    "gin": ("GIN (eps trained)", lambda f, h, c: TwoConvs(
        lambda a, b: _conv("GINConv")(_mlp(a, b), train_eps=True), f, h, c)),
    "gine": ("GINE + edge_attr", lambda f, h, c: TwoConvs(
        lambda a, b: _conv("GINEConv")(_mlp(a, b), train_eps=True, edge_dim=EDGE_DIM), f, h,
        c, "edge_attr")),
    "gat": ("GAT (edge_dim)", lambda f, h, c: TwoConvs(_gat, f, h, c, "edge_attr")),
    "layernorm": ("LayerNorm MLP", lambda f, h, c: NormMLP(f, h, c)),
}
TARGET, GAT_TARGET, MEDIAN_TARGET, GRAPH_TARGET = 2.0, 3.0, 1.5, 1.5


def _conv(name: str):
    import torch_geometric.nn as pyg

    return getattr(pyg, name)


def _load() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


def _cpu(fn) -> tuple[float, float]:
    """(wall s, process CPU s) of ``fn()``."""
    t, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t, time.process_time() - c


def _node_step(model, opt, batch) -> None:
    opt.zero_grad()
    out = model(batch)
    F.cross_entropy(out[batch.center], batch.y[batch.center]).backward()
    opt.step()


def _graph_step(model, opt, batch) -> None:
    opt.zero_grad()
    out = model(batch.x, batch.edge_index, batch.batch, getattr(batch, "edge_attr", None))
    F.cross_entropy(out, batch.y).backward()
    opt.step()


def node_graph(features: int, subgraphs: int):
    """A csbm graph for B subgraphs per step: 2.5 B nodes (at least 600), 80% training
    nodes, a fixed random ``edge_attr`` (`EDGE_DIM` columns)."""
    data = gp.load_dataset("csbm", num_nodes=max(600, int(2.5 * subgraphs)), num_classes=10,
                           num_features=features, avg_degree=10.0, split="random",
                           train_frac=0.8, val_frac=0.0, test_frac=0.2, seed=0)
    gen = torch.Generator().manual_seed(0)
    data.edge_attr = torch.randn(data.edge_index.shape[1], EDGE_DIM, generator=gen)
    return data


def alternate(pt, dp_side, plain_side, step, *, warmup: int, memory: bool, sample=None
              ) -> dict:
    """DP and plain steps alternating on the batches of ``pt.loader``; then, unless not
    ``memory``, each side's step memory in a forked copy (the plain side on batches drawn
    by ``sample()``, the DP side on the loader's next ones)."""
    (model, opt), (plain, plain_opt) = dp_side, plain_side
    loader = iter(pt.loader)
    dp, base, sizes = [], [], []
    for _ in range(pt.steps_planned - pt.steps - (MEMORY_STEPS if memory else 0)):
        batch = next(loader)
        dp.append(_cpu(lambda: step(model, opt, batch)))
        base.append(_cpu(lambda: step(plain, plain_opt, batch)))
        sizes.append((int(batch.num_subgraphs) if hasattr(batch, "num_subgraphs")
                      else int(batch.num_graphs), int(batch.num_nodes)))
    timed = slice(1 + warmup, None)
    out = {"dp_ms": 1e3 * statistics.median(c for _, c in dp[timed]),
           "plain_ms": 1e3 * statistics.median(c for _, c in base[timed]),
           "dp_wall_ms": 1e3 * statistics.median(w for w, _ in dp[timed]),
           "plain_wall_ms": 1e3 * statistics.median(w for w, _ in base[timed]),
           "first_dp_s": dp[0][1], "first_plain_ms": 1e3 * base[0][1],
           "timed_steps": len(dp[timed]),
           "subgraphs_mean": statistics.mean(s for s, _ in sizes),
           "rows_mean": statistics.mean(r for _, r in sizes)}
    out["ratio"] = out["dp_ms"] / out["plain_ms"]
    if memory:
        def measured(fn):
            return _memory(lambda: (0.0, 0.0, _stepped_mb(fn)))

        mem_dp = _forked(lambda: measured(lambda: step(model, opt, next(loader))))
        mem_plain = _forked(lambda: measured(lambda: step(plain, plain_opt, sample())))
        out.update(dp_step_mb=mem_dp["step_mb"], plain_step_mb=mem_plain["step_mb"],
                   dp_peak_mb=mem_dp["peak_mb"], plain_peak_mb=mem_plain["peak_mb"])
    return out


def _stepped_mb(fn) -> float:
    """``fn()``'s own peak memory above the RSS before it (MB)."""
    from bench_module_ratios import _libc, _reset_peak, _rss_kb

    _libc().malloc_trim(0)
    before = _rss_kb("VmRSS")
    _reset_peak()
    fn()
    return max(0, _rss_kb("VmHWM") - before) / 1024


def node_cell(key: str, data, subgraphs: int, args) -> dict:
    label, make = MODULES[key]
    classes = int(data.y.max()) + 1
    torch.manual_seed(0)
    model = make(data.num_features, args.hidden, classes)
    torch.manual_seed(0)
    plain = make(data.num_features, args.hidden, classes)
    steps = 1 + args.warmup + args.steps + (0 if args.no_memory else MEMORY_STEPS)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        pt = gp.make_private(model, opt, data, sampler="heterpoisson", noise_multiplier=1.0,
                             steps=steps, seed=0, batch_size=subgraphs)
        gen = torch.Generator().manual_seed(1)
        out = alternate(pt, (model, opt), (plain, torch.optim.Adam(plain.parameters(),
                                                                   lr=0.01)),
                        _node_step, warmup=args.warmup, memory=not args.no_memory,
                        sample=lambda: pt.sampler.sample(gen))
    out["fallback"] = [str(w.message) for w in caught
                       if type(w.message).__name__ == "FallbackWarning"]
    out.update(part="nodes", module=label, features=data.num_features, subgraphs=subgraphs,
               target=GAT_TARGET if key == "gat" else TARGET)
    return out


def graph_cell(backbone: str, batch: int, gset, args) -> dict:
    from gnnprivacy.training.graph_classification import GraphClassifier

    torch.manual_seed(0)
    model = GraphClassifier(gset.num_features, gset.num_classes, backbone=backbone,
                            edge_dim=gset.edge_dim, hidden=32, layers=2)
    torch.manual_seed(0)
    plain = GraphClassifier(gset.num_features, gset.num_classes, backbone=backbone,
                            edge_dim=gset.edge_dim, hidden=32, layers=2)
    plain.load_state_dict(model.state_dict())
    steps = 1 + args.warmup + args.graph_steps + (0 if args.no_memory else MEMORY_STEPS)
    train = gset.subset("train")
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    pt = gp.make_private(model, opt, train, sampler="graphs", noise_multiplier=1.0,
                         batch_size=batch, steps=steps, seed=0)
    gen = torch.Generator().manual_seed(1)
    out = alternate(pt, (model, opt), (plain, torch.optim.Adam(plain.parameters(), lr=0.01)),
                    _graph_step, warmup=args.warmup, memory=not args.no_memory,
                    sample=lambda: pt.sampler.sample(gen))
    out.update(part="graphs", module=f"{backbone.upper()} graphs", features=gset.num_features,
               subgraphs=batch, dataset=args.graph_dataset, target=GRAPH_TARGET)
    return out


# ---------------------------------------------------------------------------- Opacus
class MLP(nn.Module):
    """Three Linear layers, hidden 64, ReLU (the anchor model of the Opacus comparison)."""

    def __init__(self, f: int, classes: int, hidden: int = 64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(f, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                                 nn.ReLU(), nn.Linear(hidden, classes))

    def forward(self, x):
        return self.net(x)


def opacus_row(name: str, data, args) -> dict:
    """Ours (``nodes`` sampler), Opacus ghost clipping and the plain step on the same
    batches, alternating: medians of CPU time of steps 4-26 (the first three left out)."""
    import logging

    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    logging.getLogger("opacus").setLevel(logging.ERROR)
    classes = int(data.y.max()) + 1
    f = data.num_features
    torch.manual_seed(0)
    ours = MLP(f, classes)
    ghost, plain = MLP(f, classes), MLP(f, classes)
    ghost.load_state_dict(ours.state_dict())
    plain.load_state_dict(ours.state_dict())
    steps = args.opacus_steps
    opt = torch.optim.SGD(ours.parameters(), lr=0.05)
    pt = gp.make_private(ours, opt, data, sampler="nodes", noise_multiplier=1.0,
                         batch_size=1024, steps=steps, seed=0)
    n_train = int(data.train_mask.sum())
    ghost_opt = torch.optim.SGD(ghost.parameters(), lr=0.05)
    dummy = DataLoader(TensorDataset(torch.zeros(n_train, f), torch.zeros(n_train).long()),
                       batch_size=1024)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # Opacus: "Secure RNG turned off"
        engine = PrivacyEngine()
        ghost, ghost_opt, criterion, _ = engine.make_private(
            module=ghost, optimizer=ghost_opt, data_loader=dummy, noise_multiplier=1.0,
            max_grad_norm=1.0, grad_sample_mode="ghost",
            criterion=nn.CrossEntropyLoss(), poisson_sampling=False)
    ghost_opt.expected_batch_size = 1024
    plain_opt = torch.optim.SGD(plain.parameters(), lr=0.05)

    def ours_step(batch):
        opt.zero_grad()
        F.cross_entropy(ours(batch.x), batch.y).backward()
        opt.step()

    def ghost_step(batch):
        ghost_opt.zero_grad()
        criterion(ghost(batch.x), batch.y).backward()
        ghost_opt.step()

    def plain_step(batch):
        plain_opt.zero_grad()
        F.cross_entropy(plain(batch.x), batch.y).backward()
        plain_opt.step()

    times = {"ours": [], "opacus_ghost": [], "plain": []}
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # Opacus's notes on its hooks, every step
        for batch in pt.loader:
            times["ours"].append(_cpu(lambda: ours_step(batch))[1])
            times["opacus_ghost"].append(_cpu(lambda: ghost_step(batch))[1])
            times["plain"].append(_cpu(lambda: plain_step(batch))[1])
            rows.append(int(batch.num_nodes))
    med = {k: 1e3 * statistics.median(v[3:]) for k, v in times.items()}
    return {"part": "opacus", "dataset": name, "features": f, "rows_mean":
            statistics.mean(rows), "ours_ms": med["ours"], "opacus_ghost_ms":
            med["opacus_ghost"], "plain_ms": med["plain"],
            "ours_ratio": med["ours"] / med["plain"],
            "opacus_ratio": med["opacus_ghost"] / med["plain"]}


def _opacus_data(name: str, args):
    if name == "csbm":
        return gp.load_dataset("csbm", num_nodes=4000, num_classes=4, num_features=32,
                               split="random", train_frac=0.8, val_frac=0.0, test_frac=0.2,
                               seed=0)
    return gp.load_dataset(name, root=args.data_root, split="random", train_frac=0.8,
                           val_frac=0.0, test_frac=0.2, seed=0)


# ---------------------------------------------------------------------------- driver
def _write(path: str | None, result: dict) -> None:
    if not path:
        return
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(result, indent=1))
    os.replace(tmp, out)


def _print_cell(c: dict) -> None:
    mem = (f"  step MB {c['dp_step_mb']:.1f} / {c['plain_step_mb']:.1f}"
           if "dp_step_mb" in c else "")
    ok = "ok" if c["ratio"] <= c["target"] else "MISSED"
    print(f"{c['module']:<18}{c['features']:>5}{c['subgraphs']:>7}{c['rows_mean']:>8.0f}"
          f"{c['dp_ms']:>9.2f}{c['plain_ms']:>9.2f}{c['ratio']:>7.2f}x"
          f"{c['first_dp_s']:>8.2f}s{mem}  <= {c['target']:g}x {ok}  load {c['load']}",
          flush=True)


def summary(cells: list[dict]) -> dict:
    """The worst cell, the median ratio of the node cells and the misses."""
    ratios = [c["ratio"] for c in cells if c.get("part") in ("nodes", "graphs")]
    if not ratios:
        return {}
    worst = max((c for c in cells if "ratio" in c), key=lambda c: c["ratio"] / c["target"])
    node = [c["ratio"] for c in cells if c.get("part") == "nodes"]
    missed = [f"{c['module']} F={c['features']} B={c['subgraphs']}: {c['ratio']:.2f}x"
              for c in cells if "ratio" in c and c["ratio"] > c["target"]]
    return {"worst": {k: worst[k] for k in ("module", "features", "subgraphs", "ratio",
                                            "target")},
            "median_ratio": statistics.median(node) if node else None,
            "missed": missed}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="JSON file of every cell (rewritten after "
                    "each)")
    ap.add_argument("--part", type=name_list, default="nodes,graphs,opacus",
                    help="comma list of: nodes, graphs, opacus")
    ap.add_argument("--features", type=int_list, default="16,128,767")
    ap.add_argument("--subgraphs", type=int_list, default="100,1000,10000")
    ap.add_argument("--modules", type=name_list, default=",".join(MODULES),
                    help="comma list of: " + ", ".join(MODULES))
    ap.add_argument("--hidden", type=int, default=32)
    ap.add_argument("--steps", type=int, default=10, help="timed steps per node cell")
    ap.add_argument("--graph-steps", type=int, default=40, help="timed steps per graph cell")
    ap.add_argument("--warmup", type=int, default=2,
                    help="steps after the first (checked) one left out of the medians")
    ap.add_argument("--graph-backbones", type=name_list, default="gin,gcn")
    ap.add_argument("--graph-batches", type=int_list, default="64,256")
    ap.add_argument("--graph-dataset", default="proteins")
    ap.add_argument("--opacus-datasets", type=name_list, default="computers,facebook,csbm")
    ap.add_argument("--opacus-steps", type=int, default=26,
                    help="steps of the Opacus rows (the first 3 left out of the medians)")
    ap.add_argument("--data-root", default="../shared/datasets")
    ap.add_argument("--no-memory", action="store_true",
                    help="skip the forked step-memory measurement")
    ap.add_argument("--quick", action="store_true",
                    help="a small subset for CI: F=16, B=100, every module, GIN graphs at "
                         "batch 64, csbm for Opacus, 3 timed steps, no memory")
    args = ap.parse_args(argv)
    unknown = [m for m in args.modules if m not in MODULES]
    if unknown:
        ap.error(f"--modules: unknown {unknown}; choose from {list(MODULES)}")
    if args.quick:
        args.features, args.subgraphs, args.steps, args.graph_steps = [16], [100], 3, 3
        args.graph_backbones, args.graph_batches = ["gin"], [64]
        args.opacus_datasets, args.no_memory, args.warmup = ["csbm"], True, 1
        args.opacus_steps = 6
    result = {"command": " ".join(sys.argv), "torch_threads": torch.get_num_threads(),
              "cpus": os.cpu_count(), "load_start": _load(), "cells": [], "opacus": [],
              "skipped": []}
    print(f"torch threads {torch.get_num_threads()}, {os.cpu_count()} CPUs, load "
          f"{result['load_start']}; CPU time of the process, medians; ratio = DP / plain")
    print(f"{'model':<18}{'F':>5}{'B':>7}{'rows':>8}{'DP ms':>9}{'plain':>9}{'ratio':>8}"
          f"{'first':>9}")
    cells = result["cells"]

    def add(cell: dict, load: list[float]) -> None:
        cell["load"] = [load, _load()]
        cells.append(cell)
        _print_cell(cell)
        result.update(summary(cells))
        _write(args.out, result)

    if "nodes" in args.part:
        for f in args.features:
            for b in args.subgraphs:
                data = node_graph(f, b)
                for key in args.modules:
                    load = _load()
                    add(node_cell(key, data, b, args), load)
    if "graphs" in args.part:
        try:
            from gnnprivacy.datasets.tu_graphs import load_graph_dataset

            gset = load_graph_dataset(args.graph_dataset, root=args.data_root, seed=0)
        except Exception as exc:          # no dataset here: said, and in the file
            result["skipped"].append(f"graphs: {type(exc).__name__}: {exc}")
            print(f"graph cells skipped: {exc}")
        else:
            for backbone in args.graph_backbones:
                for b in args.graph_batches:
                    load = _load()
                    add(graph_cell(backbone, b, gset, args), load)
    if "opacus" in args.part:
        print(f"\n{'Opacus':<12}{'F':>6}{'rows':>7}{'ours ms':>9}{'ghost ms':>10}"
              f"{'plain':>8}{'ours x':>8}{'ghost x':>9}")
        for name in args.opacus_datasets:
            try:
                data = _opacus_data(name, args)
            except Exception as exc:
                result["skipped"].append(f"opacus {name}: {type(exc).__name__}: {exc}")
                print(f"{name}: skipped ({exc})")
                continue
            load = _load()
            row = opacus_row(name, data, args)
            row["load"] = [load, _load()]
            result["opacus"].append(row)
            verdict = "ok" if row["ours_ms"] <= row["opacus_ghost_ms"] else "SLOWER"
            print(f"{name:<12}{row['features']:>6}{row['rows_mean']:>7.0f}"
                  f"{row['ours_ms']:>9.2f}{row['opacus_ghost_ms']:>10.2f}{row['plain_ms']:>8.2f}"
                  f"{row['ours_ratio']:>8.2f}{row['opacus_ratio']:>9.2f}  {verdict}  load "
                  f"{row['load']}", flush=True)
            _write(args.out, result)
    result["load_end"] = _load()
    result.update(summary(cells))
    _write(args.out, result)
    if cells:
        s = summary(cells)
        w = s["worst"]
        print(f"\nworst cell: {w['module']} F={w['features']} B={w['subgraphs']} "
              f"{w['ratio']:.2f}x (target {w['target']:g}x); median of the node cells "
              + (f"{s['median_ratio']:.2f}x" if s["median_ratio"] is not None else "-")
              + f" (target {MEDIAN_TARGET:g}x); {len(s['missed'])} cells over target"
              + "".join(f"\n  {m}" for m in s["missed"]))
    return result


if __name__ == "__main__":
    main()
