"""DP / non-private step time and step memory per supported module under gp.make_private.

For each module of docs/own-model.md's supported table, a two-layer model (or, for LayerNorm
and Embedding, a two-layer MLP around the module) is trained under ``gp.make_private`` with the
``heterpoisson`` sampler at its default batch size on Amazon Computers (80/20 split); the
batches the DP run drew are then replayed through a plain PyTorch step of an identical model
(forward, mean cross-entropy over the centres, ``loss.backward()``, Adam), so both columns see
the same subgraphs. Computers has no edge attributes: the edge-attribute models read a fixed
random ``edge_attr`` (4 columns) or ``edge_weight`` added to the graph, which the loader
slices per subgraph like any other edge-level attribute.

The DP and the non-private step alternate, batch by batch, in one process under the default
allocator, so that both see the same load on a shared machine. Then each side takes a few
more steps in its own forked copy of the process: its peak RSS over them (graph and both
models included), and the step's own memory, with large allocations switched to ``mmap``
(``mallopt``) so that freed memory leaves the process, the peak RSS reset
(``/proc/self/clear_refs``) before each step and the peak less the RSS before it read.

Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_module_ratios.py [--data-root data]
        [--steps 10] [--modules gin,gat] [--hidden 64] [--batch-size N]

Without the dataset under ``--data-root`` a csbm graph of Computers' size stands in (13,752
nodes, 767 features, 10 classes, average degree 36). Prints, per module, the median step
times (wall and the process's CPU time), their ratio, the median step memory of each and
their ratio (targets: CPU time at most 2x, GAT at most 3x; RSS at most 2x).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import time
import warnings
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F
from torch_geometric.nn import GATConv, GCNConv, GINConv, GINEConv, GraphConv, SAGEConv

import gnnprivacy as gp

EDGE_DIM = 4
M_MMAP_THRESHOLD = -3          # glibc mallopt parameter
MEMORY_STEPS = 2


def _mlp(a: int, b: int) -> nn.Module:
    return nn.Sequential(nn.Linear(a, b), nn.ReLU(), nn.Linear(b, b))


class TwoConvs(nn.Module):
    """``conv1 -> ReLU -> conv2 -> ReLU -> Linear``; ``edge`` names the batch attribute the
    convs read after ``edge_index`` (or ``None``)."""

    def __init__(self, make, f: int, h: int, classes: int, edge: str | None = None):
        super().__init__()
        self.conv1, self.conv2, self.head = make(f, h), make(h, h), nn.Linear(h, classes)
        self.edge = edge

    def forward(self, batch):
        extra = () if self.edge is None else (batch[self.edge],)
        h = F.relu(self.conv1(batch.x, batch.edge_index, *extra))
        return self.head(F.relu(self.conv2(h, batch.edge_index, *extra)))


class NormMLP(nn.Module):
    """``Linear -> LayerNorm -> ReLU -> Linear -> LayerNorm -> ReLU -> Linear``."""

    def __init__(self, f: int, h: int, classes: int):
        super().__init__()
        self.lin1, self.norm1 = nn.Linear(f, h), nn.LayerNorm(h)
        self.lin2, self.norm2, self.head = nn.Linear(h, h), nn.LayerNorm(h), nn.Linear(h, classes)

    def forward(self, batch):
        h = F.relu(self.norm1(self.lin1(batch.x)))
        return self.head(F.relu(self.norm2(self.lin2(h))))


class EmbeddingMLP(nn.Module):
    """An ``Embedding`` of a per-row token (the index of the row's largest feature, modulo
    the vocabulary) added to a Linear map of the features, then a Linear head."""

    def __init__(self, f: int, h: int, classes: int, vocab: int = 256):
        super().__init__()
        self.vocab = vocab
        self.emb, self.lin = nn.Embedding(vocab, h), nn.Linear(f, h)
        self.lin2, self.head = nn.Linear(h, h), nn.Linear(h, classes)

    def forward(self, batch):
        tokens = batch.x.argmax(1) % self.vocab
        h = F.relu(self.lin(batch.x) + self.emb(tokens))
        return self.head(F.relu(self.lin2(h)))


def _gat(a: int, b: int) -> nn.Module:
    return GATConv(a, b // 4, heads=4, edge_dim=EDGE_DIM)


MODULES = {   # name: (model builder (f, h, classes), target ratio)
    "GraphConv": (lambda f, h, c: TwoConvs(GraphConv, f, h, c), 2.0),
    "GIN (eps trained)": (lambda f, h, c: TwoConvs(
        lambda a, b: GINConv(_mlp(a, b), train_eps=True), f, h, c), 2.0),
    "GINE + edge_attr": (lambda f, h, c: TwoConvs(
        lambda a, b: GINEConv(_mlp(a, b), train_eps=True, edge_dim=EDGE_DIM), f, h, c,
        "edge_attr"), 2.0),
    "GCN + edge_weight": (lambda f, h, c: TwoConvs(GCNConv, f, h, c, "edge_weight"), 2.0),
    "SAGE": (lambda f, h, c: TwoConvs(SAGEConv, f, h, c), 2.0),
    "GAT (edge_dim)": (lambda f, h, c: TwoConvs(_gat, f, h, c, "edge_attr"), 3.0),
    "LayerNorm": (lambda f, h, c: NormMLP(f, h, c), 2.0),
    "Embedding": (lambda f, h, c: EmbeddingMLP(f, h, c), 2.0),
}


def _rss_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _step(model, opt, batch, memory: bool = False) -> tuple[float, float, float]:
    """One training step: (wall s, CPU s, step memory MB or 0 when not measured)."""
    if memory:
        _libc().malloc_trim(0)
        before = _rss_kb("VmRSS")
        _reset_peak()
    t, c = time.perf_counter(), time.process_time()
    opt.zero_grad()
    out = model(batch)
    F.cross_entropy(out[batch.center], batch.y[batch.center]).backward()
    opt.step()
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    return wall, cpu, (max(0, _rss_kb("VmHWM") - before) / 1024 if memory else 0.0)


def _libc():
    return ctypes.CDLL("libc.so.6")


def _forked(fn) -> dict:
    """``fn()``'s JSON result, computed in a child process (a copy of this one)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:                                        # child
        os.close(read)
        code = 0
        try:
            payload = json.dumps(fn()).encode()
        except BaseException as exc:                    # report, never fall through
            payload, code = json.dumps({"error": repr(exc)}).encode(), 1
        with os.fdopen(write, "wb") as f:
            f.write(payload)
        os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        payload = f.read()
    os.waitpid(pid, 0)
    result = json.loads(payload or b'{"error": "no result"}')
    if "error" in result:
        raise RuntimeError(result["error"])
    return result


def _memory(step) -> dict:
    """In this (forked) process: peak RSS over `MEMORY_STEPS` calls of ``step`` and the
    median step memory."""
    _libc().mallopt(M_MMAP_THRESHOLD, 65536)
    _libc().malloc_trim(0)
    _reset_peak()
    steps = [step() for _ in range(MEMORY_STEPS)]
    return {"peak_mb": _rss_kb("VmHWM") / 1024,
            "step_mb": statistics.median(m for _, _, m in steps)}


def load(args):
    """Computers (80/20) from ``--data-root``, or a csbm of its size; plus a fixed random
    ``edge_attr`` and ``edge_weight``."""
    try:
        data = gp.load_dataset(args.dataset, root=args.data_root, split="random",
                               train_frac=0.8, val_frac=0.0, test_frac=0.2, seed=0)
        where = f"{args.dataset} from {args.data_root}"
    except Exception as exc:                  # no dataset here: a csbm of the same size
        data = gp.load_dataset("csbm", num_nodes=13752, num_classes=10, num_features=767,
                               avg_degree=36.0, split="random", train_frac=0.8, val_frac=0.0,
                               test_frac=0.2, seed=0)
        where = f"csbm of Computers' size ({type(exc).__name__}: {exc})"
    gen = torch.Generator().manual_seed(0)
    e = data.edge_index.shape[1]
    data.edge_attr = torch.randn(e, EDGE_DIM, generator=gen)
    data.edge_weight = torch.rand(e, generator=gen) + 0.5
    return data, where


def run(name: str, data, args) -> dict:
    """DP and non-private steps alternate on the same batches (both see the same load on
    a shared machine); then one forked process per side measures memory."""
    make, target = MODULES[name]
    classes = int(data.y.max()) + 1
    torch.manual_seed(0)
    model = make(data.num_features, args.hidden, classes)
    torch.manual_seed(0)
    plain = make(data.num_features, args.hidden, classes)
    plain_opt = torch.optim.Adam(plain.parameters(), lr=0.01)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        pt = gp.make_private(model, opt, data, sampler="heterpoisson", noise_multiplier=1.0,
                             steps=args.warmup + args.steps + MEMORY_STEPS, seed=0,
                             batch_size=args.batch_size)
        loader = iter(pt.loader)
        dp, base, sizes = [], [], []
        for _ in range(args.warmup + args.steps):
            batch = next(loader)
            dp.append(_step(model, opt, batch))
            base.append(_step(plain, plain_opt, batch))
            sizes.append((batch.num_subgraphs, batch.num_nodes, batch.edge_index.shape[1]))
        fallback = [str(w.message) for w in caught
                    if type(w.message).__name__ == "FallbackWarning"]
        mem_dp = _forked(lambda: _memory(lambda: _step(model, opt, next(loader), True)))
    gen = pt._gens["sample"]                 # the batches the DP side drew, drawn again
    mem_base = _forked(lambda: _memory(
        lambda: _step(plain, plain_opt, pt.sampler.sample(gen), True)))
    timed = slice(args.warmup, None)
    med = [statistics.median(r[i] for r in rows[timed]) for rows in (dp, base) for i in (0, 1)]
    return {"target": target, "dp": med[:2], "base": med[2:], "sizes": sizes,
            "mem_dp": mem_dp, "mem_base": mem_base, "fallback": fallback}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="computers")
    ap.add_argument("--data-root", default="data")
    ap.add_argument("--steps", type=int, default=10, help="timed steps per module")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=None,
                    help="expected subgraphs per step (default: the sampler's adaptive one)")
    ap.add_argument("--modules", default=",".join(MODULES),
                    help="comma-separated names (prefixes) of: " + ", ".join(MODULES))
    args = ap.parse_args()
    wanted = [m.strip() for m in args.modules.split(",") if m.strip()]
    names = [n for n in MODULES if any(n.lower().startswith(w.lower()) for w in wanted)]
    data, where = load(args)
    print(f"{where}: {data.num_nodes} nodes, {data.edge_index.shape[1]} edges; sampler "
          f"heterpoisson, batch size {args.batch_size or 'default'}; hidden {args.hidden}; "
          f"medians of {args.steps} steps after {args.warmup} (DP and non-private alternating), memory over "
          f"{MEMORY_STEPS} more; torch threads {torch.get_num_threads()}", flush=True)
    print(f"{'module':<20}{'DP ms':>8}{'base ms':>8}{'CPU x':>7}{'wall x':>7}{'RSS MB':>8}"
          f"{'base':>6}{'x':>6}{'step MB':>8}{'base':>6}{'x':>6}  target")
    for name in names:
        r = run(name, data, args)
        (dw, dc), (bw, bc) = r["dp"], r["base"]
        md, mb = r["mem_dp"], r["mem_base"]
        rss = md["peak_mb"] / mb["peak_mb"]
        step = md["step_mb"] / max(mb["step_mb"], 1.0)
        ok = dc / bc <= r["target"] and rss <= 2
        print(f"{name:<20}{dc * 1e3:8.1f}{bc * 1e3:8.1f}{dc / bc:7.2f}{dw / bw:7.2f}"
              f"{md['peak_mb']:8.0f}{mb['peak_mb']:6.0f}{rss:6.2f}{md['step_mb']:8.1f}"
              f"{mb['step_mb']:6.1f}{step:6.2f}  <= {r['target']:g}x "
              f"{'ok' if ok else 'MISSED'}", flush=True)
        for msg in r["fallback"]:
            print(f"    {msg}")
    sizes = [s for s in r["sizes"]]
    print(f"batches: mean {statistics.mean(s[0] for s in sizes):.0f} subgraphs, "
          f"{statistics.mean(s[1] for s in sizes):.0f} rows, "
          f"{statistics.mean(s[2] for s in sizes):.0f} edges. CPU x: the ratio of the medians "
          "of the process's CPU time per step (robust to a busy machine); RSS: the process's "
          "peak over the memory steps (graph and both models included); step MB: the step's "
          "own peak above the RSS before it")


if __name__ == "__main__":
    main()
