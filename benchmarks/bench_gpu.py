"""One GPU against the same machine's CPU: training seconds, DP-step ms, DP vs non-private.

For each method -- ``gcn`` (non-private), ``heterpoisson``, ``dpgnn``, ``dpmlp``, ``gap`` and
``sage-own`` (the "your own model" of docs/own-model.md: two SAGEConv, LayerNorm, a residual,
a Linear head, trained with ``gp.make_private`` in a plain loop) -- on Amazon Computers,
Coauthor Physics and CSBM graphs of 10^6 and 10^7 nodes, it trains with the library's
defaults for ``--epsilon 8``, an 80/0/20 split and seed 0 (``gp.train``, the CLI's code
path) on CUDA and on the CPU with all cores, and prints ONE table:

* ``CUDA s`` / ``CPU s``: training seconds (the record's ``fit_seconds``: calibration,
  set-up, every planned step, scoring). A CPU run whose plan has more than ``--cpu-steps``
  steps is stopped after them and its seconds are PROJECTED (marked ``~``): measured
  set-up + planned steps x measured step time, without scoring (so the projection is an
  underestimate of the CPU's time, and the speed-up column is conservative);
* ``CUDA ms`` / ``CPU ms``: time per step of the run's main loop (DP steps; GCN epochs),
  first step excluded, CUDA synchronised at both ends;
* ``DP/NP``: a DP step against the non-private step of the same model on the same batches,
  on the table's first device (two short runs, ``--ratio-steps`` steps each; for the
  trainers the engine's step is swapped for ``backward()`` + ``optimizer.step()``, for
  ``sage-own`` the batches of the DP run are replayed through a plain loop);
* ``GiB``: peak GPU memory of the CUDA run (``torch.cuda.max_memory_allocated``);
* ``acc``: test accuracy of each full run;

and, below the table, the start-up: process start to the first DP step of
``gnnprivacy train --method heterpoisson --dataset computers`` on each device (a fresh
interpreter: imports, CUDA initialisation, loading, calibration, set-up).

CSBM graphs (4 classes, 64 features, average degree 10, homophily 0.8, 80/20 split with at
most 50,000 test nodes scored) are generated in memory with torch (on the GPU when there is
one), the model of ``gnnprivacy.datasets.csbm`` with a fixed edge count. At 10^7 nodes only
heterpoisson runs by default (``--methods`` to add others), built from the registry's own
defaults instead of ``gp.train`` (whose copy and symmetrisation of 10^8 edges would dominate).
``gap`` is not run on CSBM (its plan there is over 10^5 steps).

Cells run in priority order (the issue's targets first) and a cell that would start after
``--budget-s`` seconds is listed as skipped, so one call stays within its time limit.

Usage::

    python benchmarks/bench_gpu.py --device cuda --data-root DATA --out runs/gpu.json
    OMP_NUM_THREADS=1 python benchmarks/bench_gpu.py --device cpu --quick --threads 1 \\
        --data-root ../shared/datasets

``--quick`` shrinks everything to a smoke run (Computers and CSBM graphs of 10^4 and 10^5
nodes, Physics only when named in ``--datasets``, 5 steps or epochs per run);
``--device cpu`` leaves out the CUDA columns (the DP/NP column is then measured on the CPU).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import os
import statistics
import sys
import time

METHODS = ("gcn", "heterpoisson", "dpgnn", "dpmlp", "gap", "sage-own")
ENGINE_METHODS = ("heterpoisson", "dpgnn", "dpmlp")
FULL_SIZES = {"csbm-1e6": 10**6, "csbm-1e7": 10**7}
QUICK_SIZES = {"csbm-1e4": 10**4, "csbm-1e5": 10**5}


class Capped(Exception):
    """Raised by `Clock` to stop a CPU run after its measured steps."""


class Clock:
    """A ``progress`` factory timing every loop of a run (CUDA synchronised at the first and
    last update of each loop); stops the run after ``cap`` steps of a loop when given."""

    def __init__(self, device: str, cap: int | None = None):
        self.device, self.cap, self.bars = device, cap, []
        self.start = time.perf_counter()

    def __call__(self, name, total):
        bar = _Bar(self, name, int(total))
        self.bars.append(bar)
        return bar

    def sync(self) -> None:
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()

    def main(self):
        """The loop with the most planned steps."""
        return max(self.bars, key=lambda b: b.total) if self.bars else None


class _Bar:
    def __init__(self, clock: Clock, name: str, total: int):
        self.clock, self.name, self.total, self.done, self.stamps = clock, name, total, 0, []

    def update(self, n: int = 1) -> None:
        self.done += n
        cap = self.clock.cap
        last = self.done >= self.total or (cap is not None and self.done >= cap)
        if self.done == n or last:
            self.clock.sync()
        self.stamps.append((self.done, time.perf_counter()))
        if cap is not None and self.done >= cap and self.done < self.total:
            raise Capped()

    def step_ms(self) -> float | None:
        """ms per step after the first (``None`` with fewer than two updates): on CUDA the
        mean between the two synchronised ends (a step's updates only enqueue work); on the
        CPU the median step (robust to other jobs on the machine)."""
        if len(self.stamps) < 2:
            return None
        if self.clock.device == "cuda":
            (d0, t0), (d1, t1) = self.stamps[0], self.stamps[-1]
            return 1e3 * (t1 - t0) / max(d1 - d0, 1)
        return 1e3 * statistics.median((t1 - t0) / max(d1 - d0, 1) for (d0, t0), (d1, t1)
                                       in zip(self.stamps, self.stamps[1:]))


# ------------------------------------------------------------------------------ data
def fast_csbm(num_nodes: int, *, seed: int = 0, features: int = 64, avg_degree: float = 10.0,
              homophily: float = 0.8, classes: int = 4, max_test: int = 50_000,
              device: str = "cpu"):
    """A CSBM graph (``gnnprivacy.datasets.csbm``'s model with ``n d / 2`` edges drawn
    uniformly within or across classes), symmetric and coalesced, with an 80/20 split."""
    import torch
    from torch_geometric.data import Data

    g = torch.Generator(device=device).manual_seed(seed)
    n = num_nodes
    y = torch.randint(0, classes, (n,), generator=g, device=device)
    order = torch.argsort(y)
    counts = torch.bincount(y, minlength=classes)
    starts = torch.cumsum(counts, 0) - counts
    m = int(n * avg_degree / 2)
    src = torch.randint(0, n, (m,), generator=g, device=device)
    same = torch.rand(m, generator=g, device=device) < homophily
    shift = torch.randint(1, classes, (m,), generator=g, device=device)
    cls = torch.where(same, y[src], (y[src] + shift) % classes)
    pick = (torch.rand(m, generator=g, device=device) * counts[cls]).long()
    dst = order[starts[cls] + torch.minimum(pick, counts[cls] - 1)]
    keep = src != dst
    src, dst = src[keep], dst[keep]
    key = torch.unique(torch.cat([dst * n + src, src * n + dst]))
    edge_index = torch.stack([key % n, key // n])
    means = torch.randn(classes, features, generator=g, device=device)
    means = means / means.norm(dim=1, keepdim=True)
    x = torch.randn(n, features, generator=g, device=device) + means[y]
    perm = torch.randperm(n, generator=g, device=device)
    train = torch.zeros(n, dtype=torch.bool, device=device)
    test = torch.zeros(n, dtype=torch.bool, device=device)
    n_train = int(0.8 * n)
    train[perm[:n_train]] = True
    test[perm[n_train:n_train + min(n - n_train, max_test)]] = True
    data = Data(x=x.cpu(), y=y.cpu(), edge_index=edge_index.cpu(), train_mask=train.cpu(),
                test_mask=test.cpu(), val_mask=torch.zeros(n, dtype=torch.bool))
    return data


def load(name: str, args, device: str):
    """The graph named ``name`` or ``None`` with a printed reason."""
    sizes = QUICK_SIZES if args.quick else FULL_SIZES
    if name in sizes:
        t = time.perf_counter()
        gen_device = "cuda" if device == "cuda" else "cpu"
        data = fast_csbm(sizes[name], device=gen_device)
        print(f"# {name}: {data.num_nodes} nodes, {data.num_edges} edges, generated in "
              f"{time.perf_counter() - t:.1f} s", flush=True)
        return data
    import gnnprivacy as gp
    from gnnprivacy.errors import GnnPrivacyError

    try:
        t = time.perf_counter()
        data = gp.load_dataset(name, root=args.data_root, split="random", train_frac=0.8,
                               val_frac=0.0, test_frac=0.2, seed=0)
    except (GnnPrivacyError, FileNotFoundError) as err:  # no raw files, or no such root
        print(f"# {name}: not found under --data-root {args.data_root!r} "
              f"({type(err).__name__}: {str(err).splitlines()[0]}); its rows are skipped",
              flush=True)
        return None
    print(f"# {name}: {data.num_nodes} nodes, {data.num_edges} edges, {data.num_features} "
          f"features, loaded in {time.perf_counter() - t:.1f} s", flush=True)
    return data


# ------------------------------------------------------------------------------ runs
def method_options(method: str, args) -> dict:
    """Options of a quick run (everything small); nothing in a full run."""
    if not args.quick:
        return {}
    return {"gcn": {"epochs": args.quick_steps},
            "gap": {"encoder_epochs": 1, "epochs": 1, "batch_size": 1024}}.get(
                method, {"steps": args.quick_steps})


def registry_fit(method: str, data, device: str, clock: Clock, seed: int = 0, **extra):
    """Fit a private method's trainer with the registry's resolved defaults (no copy of the
    graph: for 10^7 nodes); returns ``(trainer, seconds)``."""
    from gnnprivacy.method.registry import get_method
    from gnnprivacy.training.node_dp import DPGNNTrainer, DPMLPTrainer, HeterPoissonTrainer

    cls = {"heterpoisson": HeterPoissonTrainer, "dpgnn": DPGNNTrainer,
           "dpmlp": DPMLPTrainer}[method]
    params = get_method(method).params(epsilon=8.0)
    kwargs = params.trainer_kwargs(int(data.train_mask.sum()), int(data.num_nodes))
    kwargs.update(extra)
    t = time.perf_counter()
    trainer = cls(**kwargs, generator=seed, progress=clock, device=device).fit(data)
    return trainer, time.perf_counter() - t


def run_method(method: str, data, device: str, clock: Clock, args, *, direct: bool):
    """One training run: ``(fit seconds, test accuracy)``."""
    if method == "sage-own":
        return own_model(data, device, clock, steps=method_options(method, args).get("steps"))
    if direct:
        trainer, seconds = registry_fit(method, data, device, clock,
                                        **method_options(method, args))
        return seconds, trainer.score(data)["test_accuracy"]
    import gnnprivacy as gp

    options = method_options(method, args)
    if method != "gcn":
        options["epsilon"] = 8.0
    result = gp.train(data, method=method, device=device, seed=0, progress=clock, **options)
    return result.record.timings["fit_seconds"], result.metrics.get("test_accuracy")


def measure(method: str, data, device: str, args, *, direct: bool, cap: int | None) -> dict:
    """Training seconds (measured or projected), step ms, peak GPU memory, accuracy."""
    import torch

    clock = Clock(device, cap=cap)
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    out: dict = {}
    try:
        seconds, acc = run_method(method, data, device, clock, args, direct=direct)
        out.update(seconds=seconds, accuracy=acc, projected=False)
    except Capped:
        bar = clock.main()
        first = bar.stamps[0][1]
        setup = first - t0 - bar.step_ms() / 1e3         # up to the start of step 1
        out.update(seconds=setup + bar.total * bar.step_ms() / 1e3, accuracy=None,
                   projected=True)
    bar = clock.main()
    out.update(step_ms=bar.step_ms() if bar else None, steps=bar.total if bar else None,
               loop=bar.name if bar else None)
    if device == "cuda":
        out["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
    return out


@contextlib.contextmanager
def nonprivate_engine():
    """Swap `DPEngine.step` for a non-private step on the same closure (forward,
    ``(losses.sum() / B_exp).backward()``, optimizer step), keeping the loop's bookkeeping."""
    from gnnprivacy.training.dp import engine as eng

    original = eng.DPEngine.step

    def step(self, closure, *, row_mask=None):
        self.optimizer.zero_grad(set_to_none=True)
        losses = closure()
        (losses.sum() / self.expected_batch_size).backward()
        self._update()
        self.steps_ += 1
        if self.accountant is not None:
            self.accountant.compose(self.step_event)
        return eng.StepInfo(self.steps_, int(losses.shape[0]), 0.0)

    eng.DPEngine.step = step
    try:
        yield
    finally:
        eng.DPEngine.step = original


def dp_over_nonprivate(method: str, data, device: str, args) -> float | None:
    """Step time of a DP run over that of the same loop with non-private steps."""
    from gnnprivacy import _fixed_shapes

    steps = args.ratio_steps
    if method == "sage-own":
        return own_model_ratio(data, device, steps)
    if method not in ENGINE_METHODS or (method == "dpmlp"
                                        and not _fixed_shapes.fixed_shapes(device)):
        return None                     # dpmlp on the CPU runs the user path (no engine.step)
    times = []
    for private in (True, False):
        clock = Clock(device)
        with contextlib.nullcontext() if private else nonprivate_engine():
            registry_fit(method, data, device, clock, steps=steps, noise_multiplier=1.0)
        times.append(clock.main().step_ms())
    return times[0] / times[1]


# ------------------------------------------------------------------------------ start-up
STARTUP_CHILD = r"""
import os, sys
from gnnprivacy.training.dp import engine

def first_step(self, *args, **kwargs):
    print("FIRST_STEP", flush=True)
    os._exit(0)

engine.DPEngine.step = first_step
sys.argv = ["gnnprivacy"] + sys.argv[1:]
from gnnprivacy.cli import main
main()
"""


def startup_seconds(device: str, args) -> float | None:
    """Process start to the first DP step of ``gnnprivacy train --method heterpoisson
    --dataset computers`` (a fresh interpreter: imports, CUDA initialisation, loading from
    the processed cache, calibration, set-up), or ``None`` when it did not get there."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as runs:
        cmd = [sys.executable, "-c", STARTUP_CHILD, "train", "--method", "heterpoisson",
               "--dataset", "computers", "--data-root", args.data_root, "--epsilon", "8",
               "--train-frac", "0.8", "--val-frac", "0", "--test-frac", "0.2", "--seed", "0",
               "--device", device, "--runs-dir", runs, "-q"]
        t = time.perf_counter()
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
        seconds = None
        for line in child.stdout:
            if "FIRST_STEP" in line:
                seconds = time.perf_counter() - t
                break
        child.kill()
        err = child.communicate()[1]
        if seconds is None:
            print(f"# start-up on {device}: no first step ({err.strip().splitlines()[-1:]})")
        return seconds


# ------------------------------------------------------------------------------ own model
def _sage_net(data, hidden: int = 64):
    """docs/own-model.md's model (the same class as ``bench_user_model.py``)."""
    import torch
    from bench_user_model import Net

    torch.manual_seed(0)
    return Net(data.num_features, hidden, int(data.y.max()) + 1)


def _standardised(data):
    out = copy.copy(data)
    public = ~data.train_mask
    out.x = (data.x - data.x[public].mean()) / data.x[public].std()
    return out


def _step(model, opt, batch) -> None:
    """One step of the docs' loop (``bench_user_model.step``)."""
    from bench_user_model import step

    step(model, opt, batch)


def own_model(data, device: str, clock: Clock, steps: int | None = None):
    """docs/own-model.md's loop on ``device``: ``(seconds, test accuracy)``."""
    import torch

    import gnnprivacy as gp

    t = time.perf_counter()
    data = _standardised(data)
    model = _sage_net(data).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    pt = gp.make_private(model, opt, data, sampler="heterpoisson", epsilon=8.0, seed=0,
                         steps=steps)
    bar = clock("sage-own", pt.steps_planned)
    for batch in pt.loader:
        _step(model, opt, batch)
        bar.update(1)
    model.eval()
    with torch.no_grad():
        pred = model(data.x.to(device), data.edge_index.to(device)).argmax(1).cpu()
    acc = float((pred[data.test_mask] == data.y[data.test_mask]).float().mean())
    return time.perf_counter() - t, acc


def own_model_ratio(data, device: str, steps: int) -> float:
    """DP step of the own model against its non-private step on the DP run's batches."""
    import torch

    import gnnprivacy as gp

    data = _standardised(data)
    model = _sage_net(data).to(device)
    plain = copy.deepcopy(model)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    pt = gp.make_private(model, opt, data, sampler="heterpoisson", noise_multiplier=1.0,
                         steps=steps + 1, seed=0)
    batches, dp = [], []
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for batch in pt.loader:
        sync()
        t = time.perf_counter()
        _step(model, opt, batch)
        sync()
        dp.append(time.perf_counter() - t)
        batches.append(batch)
    plain_opt = torch.optim.Adam(plain.parameters(), lr=0.01)
    base = []
    for batch in batches:
        sync()
        t = time.perf_counter()
        _step(plain, plain_opt, batch)
        sync()
        base.append(time.perf_counter() - t)
    return statistics.median(dp[1:]) / statistics.median(base[1:])


# ------------------------------------------------------------------------------ table
def cells(datasets: list[str], methods: list[str], quick: bool) -> list[tuple[str, str]]:
    """(dataset, method) pairs, the issue's targets first."""
    small, large = (("csbm-1e4", "csbm-1e5") if quick else ("csbm-1e6", "csbm-1e7"))
    first = [("computers", m) for m in METHODS]
    first += [(d, m) for d in ("physics", small) for m in ("heterpoisson", "dpgnn")]
    first += [(large, "heterpoisson")]
    rest = [(d, m) for d in ("physics", small) for m in METHODS
            if m not in ("heterpoisson", "dpgnn")]
    rest += [(large, m) for m in METHODS if m != "heterpoisson"]
    chosen = [c for c in first + rest if c[0] in datasets and c[1] in methods]
    explicit = bool(set(methods) - set(METHODS)) or methods != list(METHODS)
    return [c for c in chosen
            if not (c[1] == "gap" and c[0].startswith("csbm"))
            and (explicit or not (c[0] == large and c[1] != "heterpoisson"))]


def fmt(value, spec: str = ".2f", projected: bool = False) -> str:
    if value is None:
        return "-"
    return ("~" if projected else "") + format(value, spec)


def print_table(rows: list[dict], devices: list[str]) -> None:
    cuda = "cuda" in devices
    head = ["dataset", "method"]
    if cuda:
        head += ["CUDA s", "CPU s", "CPU/CUDA", "CUDA ms", "CPU ms", "DP/NP", "GiB",
                 "acc CUDA", "acc CPU"]
    else:
        head += ["CPU s", "CPU ms", "DP/NP", "acc CPU"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        g, c = r.get("cuda") or {}, r.get("cpu") or {}
        line = [r["dataset"], r["method"]]
        if cuda:
            speed = (c["seconds"] / g["seconds"] if g.get("seconds") and c.get("seconds")
                     else None)
            line += [fmt(g.get("seconds")), fmt(c.get("seconds"), projected=c.get("projected")),
                     fmt(speed, ".1f", projected=c.get("projected")), fmt(g.get("step_ms")),
                     fmt(c.get("step_ms")), fmt(r.get("dp_over_nonprivate")),
                     fmt(g.get("peak_gib")), fmt(g.get("accuracy"), ".3f"),
                     fmt(c.get("accuracy"), ".3f")]
        else:
            line += [fmt(c.get("seconds"), projected=c.get("projected")), fmt(c.get("step_ms")),
                     fmt(r.get("dp_over_nonprivate")), fmt(c.get("accuracy"), ".3f")]
        print("| " + " | ".join(line) + " |")


# ------------------------------------------------------------------------------ main
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cuda",
                    help="cuda: every run on CUDA and on the CPU; cpu: the CPU only")
    ap.add_argument("--quick", action="store_true", help="a smoke run (small graphs, few steps)")
    ap.add_argument("--out", help="write the rows as JSON to this file")
    ap.add_argument("--data-root", default=os.environ.get("GNNPRIVACY_DATA",
                                                          "../shared/datasets"))
    ap.add_argument("--datasets", help="comma-separated subset of the table's datasets")
    ap.add_argument("--methods", help=f"comma-separated subset of {','.join(METHODS)}")
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                    help="CPU threads (default: every core this process may use)")
    ap.add_argument("--cpu-steps", type=int, default=None,
                    help="stop a CPU run after this many steps and project (default 300; "
                         "quick: no cap)")
    ap.add_argument("--ratio-steps", type=int, default=None,
                    help="steps of each DP/NP timing run (default 40; quick 4)")
    ap.add_argument("--quick-steps", type=int, default=5)
    ap.add_argument("--table-from", metavar="JSON",
                    help="print the table of a JSON written by --out (e.g. of a killed run)")
    ap.add_argument("--budget-s", type=float, default=None,
                    help="start no cell after this many seconds (default 420; quick 90)")
    args = ap.parse_args(argv)
    if args.table_from:
        with open(args.table_from) as f:
            saved = json.load(f)
        print_table(saved.get("rows", []), saved.get("devices", ["cpu"]))
        print(f"# start-up s: {saved.get('startup_s')}; skipped: {saved.get('skipped')}")
        return 0
    args.cpu_steps = args.cpu_steps if args.cpu_steps is not None else (None if args.quick
                                                                       else 300)
    args.ratio_steps = args.ratio_steps or (4 if args.quick else 40)
    budget = args.budget_s or (90.0 if args.quick else 420.0)
    start = time.perf_counter()

    all_sets = ["computers", "physics"] + list((QUICK_SIZES if args.quick else FULL_SIZES))
    default_sets = [d for d in all_sets if not (args.quick and d == "physics")]
    datasets = args.datasets.split(",") if args.datasets else default_sets
    methods = args.methods.split(",") if args.methods else list(METHODS)
    unknown = sorted(set(methods) - set(METHODS)) + sorted(set(datasets) - set(all_sets))
    if unknown:
        print(f"unknown method or dataset {unknown}; methods {list(METHODS)}, datasets "
              f"{all_sets}")
        return 2
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"CUDA is not available here (torch {torch.__version__}, "
              f"cuda {torch.version.cuda}): run with --device cpu for the CPU columns only")
        return 2
    torch.set_num_threads(args.threads)
    devices = ["cuda", "cpu"] if args.device == "cuda" else ["cpu"]
    gpu = torch.cuda.get_device_name() if args.device == "cuda" else None
    print(f"# bench_gpu: devices {devices}{' (' + gpu + ')' if gpu else ''}, {args.threads} "
          f"CPU threads, torch {torch.__version__}, quick={args.quick}", flush=True)
    loaded: dict = {}
    rows, skipped, startup, report = [], [], {}, {}
    large = "csbm-1e5" if args.quick else "csbm-1e7"
    for dataset, method in cells(datasets, methods, args.quick):
        if time.perf_counter() - start > budget:
            skipped.append(f"{dataset}/{method}")
            continue
        if dataset not in loaded:
            loaded[dataset] = load(dataset, args, args.device)
        data = loaded[dataset]
        if data is None:
            continue
        row = {"dataset": dataset, "method": method}
        direct = dataset == large and method in ENGINE_METHODS
        for dev in devices:
            cap = args.cpu_steps if dev == "cpu" and "cuda" in devices else None
            try:
                row[dev] = measure(method, data, dev, args, direct=direct, cap=cap)
            except Exception as err:      # one failing cell must not lose the table
                row[dev] = {"error": f"{type(err).__name__}: {err}"}
                print(f"# {dataset}/{method} on {dev}: {row[dev]['error']}", flush=True)
        try:                              # not at 10^7: two more set-ups of 10^8 edges
            row["dp_over_nonprivate"] = (None if dataset == large and not args.quick else
                                         dp_over_nonprivate(method, data, devices[0], args))
        except Exception as err:
            print(f"# {dataset}/{method} DP/NP: {type(err).__name__}: {err}", flush=True)
        rows.append(row)
        print(f"# done {dataset}/{method} at {time.perf_counter() - start:.0f} s: "
              f"{json.dumps({k: v for k, v in row.items() if k not in ('dataset', 'method')})}",
              flush=True)
        if dataset == large:
            loaded.pop(dataset, None)
        if dataset == "computers" and method == cells(datasets, methods, args.quick)[0][1]:
            startup = {dev: startup_seconds(dev, args) for dev in devices}
            print(f"# start-up to the first step: {json.dumps(startup)}", flush=True)
        report = {"devices": devices, "gpu": gpu, "threads": args.threads,
                  "torch": torch.__version__, "quick": args.quick, "rows": rows,
                  "startup_s": startup, "skipped": skipped,
                  "elapsed_s": time.perf_counter() - start}
        if args.out:                     # after every cell: a killed run keeps its rows
            with open(args.out, "w") as f:
                json.dump(report, f, indent=1)
    print()
    print_table(rows, devices)
    notes = ["~ projected: measured set-up + planned steps x step time (no scoring)",
             f"DP/NP on {devices[0]}", f"elapsed {time.perf_counter() - start:.0f} s",
             "start-up (process start to the first heterpoisson step on Computers, "
             "gnnprivacy train): " + (', '.join(f'{k} {fmt(v)} s' for k, v in startup.items())
                                      or "not measured (needs the Computers cells)")]
    if skipped:
        notes.append(f"skipped after the {budget:.0f} s budget: {', '.join(skipped)}")
    print("\n".join(f"# {n}" for n in notes))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({**report, "skipped": skipped}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
