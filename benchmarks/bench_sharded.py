"""Sharded HeterPoisson over ``--world-size`` local ranks against the single-process run.

For ``--num-nodes N`` the script generates (once, into ``--workdir``) a ``csbm-large`` graph
(average degree ``--avg-degree``, ``--features`` float32 features, seed 0), partitions it into
``--world-size`` shards (`partition_graph`, ``--method``; training nodes drawn with
probability ``--train-frac``), then runs, each in a fresh forked process (so each peak RSS is
that process's own):

* the single-process `HeterPoissonTrainer` (``sampling_stream="counter"``) on the
  memory-mapped whole graph with the shards' training mask;
* `ShardedHeterPoissonTrainer` on ``W`` ranks (gloo through a file, no port), rank ``k`` on
  part ``k``;

both GCN, ``--steps`` steps, noise multiplier 1, expected batch ``--batch``
(``q_b = batch / |V_tr|``), ``degree_public=True``, seed 0. The single-process run does not
depend on ``W``: it runs once per configuration and is kept in ``--workdir``
(``--fresh-single`` runs it again). It prints and writes to ``--out`` (JSON, ``{"runs":
[...]}``, one entry per ``W``): per-rank peak RSS beside the single process's (and the
ratio, accepted at <= 0.6), the relative parameter difference ``||a - b|| / ||b||`` of the
worst tensor (accepted at <= 1e-5) beside the largest entry difference, whether the ledgers
are equal, steps per second of both (the median step, set-up excluded), the bytes exchanged
per step (all ranks, and the largest rank's) beside the features of the sampled remote
neighbours per step (accepted within 2x), and the machine's load average around each run
(the times depend on it; bytes and memory do not). ``--table-from FILE...`` prints the
Markdown table of docs/scale.md from such files.

Why a norm-wise difference: the two runs add the same clipped gradients in another order
(two partial sums and an ``all_reduce`` against one sum), a difference of ~1e-7 relative.
Adam's first steps divide by ``|g| + 1e-8``, so the few entries whose noisy gradient happens
to fall within ~1e-7 of zero move by up to ~1e-6 differently; the tensors as a whole stay
within ~1e-6.

Example::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_sharded.py --world-size 2,4,8 \\
        --num-nodes 100000 --out sharded-1e5.json
    .venv/bin/python benchmarks/bench_sharded.py --table-from sharded-1e5.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scale import StepClock, ensure_graph, peak_rss_gib  # noqa: E402


def _trainer_kwargs(args, n_train: int, clock) -> dict:
    return dict(steps=args.steps, noise_multiplier=1.0, generator=0, progress=clock,
                q_b=min(1.0, args.batch / n_train), degree_public=True,
                feature_norm=args.feature_norm)


def _timing(clock: StepClock) -> dict:
    steps = clock.steps()[1:] or clock.steps()          # drop the warm-up step
    return {"step_s": statistics.median(s[0] for s in steps),
            "setup_s": clock.first[0] - clock.start}


def _single(graph: str, shards: str, args, out: str) -> None:
    """Child: the single-process run on the mapped whole graph."""
    import numpy as np
    import torch

    from gnnprivacy.datasets.stream import large_graph_data, open_large_graph
    from gnnprivacy.training.node_dp import HeterPoissonTrainer

    torch.set_num_threads(1)
    data = large_graph_data(open_large_graph(graph))
    data.train_mask = torch.from_numpy(np.load(Path(shards) / "train_mask.npy"))
    clock = StepClock()
    trainer = HeterPoissonTrainer("gcn", sampling_stream="counter",
                                  **_trainer_kwargs(args, int(data.train_mask.sum()), clock))
    trainer.fit(data)
    torch.save({"params": trainer.model_.state_dict(), "ledger": trainer.ledger_,
                "rss_gib": peak_rss_gib(), **_timing(clock)}, out)


def _rank(rank: int, world: int, shards: str, args, out_dir: str) -> None:
    """One rank of the sharded run."""
    import torch

    from gnnprivacy.datasets.shards import open_shard
    from gnnprivacy.training.sharded import ShardedHeterPoissonTrainer

    torch.set_num_threads(1)
    clock = StepClock()
    n_train = int(open_shard(shards, rank).meta["num_train"])
    trainer = ShardedHeterPoissonTrainer("gcn", **_trainer_kwargs(args, n_train, clock))
    trainer.fit(shards)
    torch.save({"params": trainer.model_.state_dict(), "ledger": trainer.ledger_,
                "rss_gib": peak_rss_gib(), "exchange": trainer.exchange_, **_timing(clock)},
               f"{out_dir}/rank{rank}.pt")


def _prepare(args, world: int, queue) -> None:
    """Child: generate the graph (once) and partition it into ``world`` parts (once)."""
    from gnnprivacy.datasets.shards import partition_graph

    graph = ensure_graph(args.num_nodes, args)
    shards = Path(args.workdir) / f"{graph.name}-p{world}-{args.method}-t{args.train_frac:g}"
    t0 = time.perf_counter()
    if not (shards / "meta.json").exists():
        partition_graph(graph, shards, num_parts=world, method=args.method,
                        train_fraction=args.train_frac, overwrite=True)
    meta = json.loads((shards / "meta.json").read_text())
    queue.put((str(graph), str(shards), time.perf_counter() - t0, meta))


def _in_child(ctx, target, *a) -> None:
    p = ctx.Process(target=target, args=a)
    p.start()
    p.join()
    if p.exitcode != 0:
        raise SystemExit(f"{target.__name__} failed with exit code {p.exitcode}")


def _rel_diffs(a: dict, b: dict) -> dict:
    """Per tensor: ``||a - b|| / ||b||`` (the relative error of the tensor)."""
    return {k: float((a[k] - b[k]).norm() / b[k].norm().clamp_min(1e-30)) for k in b}


def _single_key(args) -> str:
    """The single-process run's identity (everything but the world size)."""
    keys = ("num_nodes", "steps", "batch", "features", "avg_degree", "train_frac",
            "feature_norm")
    return hashlib.sha256(json.dumps({k: getattr(args, k) for k in keys}, sort_keys=True)
                          .encode()).hexdigest()[:12]


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _one_world(args, world: int, ctx) -> dict:
    import torch

    from gnnprivacy.training.distributed import spawn_local

    queue = ctx.Queue()
    _in_child(ctx, _prepare, args, world, queue)
    graph, shards, t_part, meta = queue.get()
    single_file = Path(args.workdir) / f"single-{_single_key(args)}.pt"
    load_single = None
    if args.fresh_single or not single_file.exists():
        load_single = _load()
        _in_child(ctx, _single, graph, shards, args, str(single_file))
    single = torch.load(single_file)
    load_before = _load()
    with tempfile.TemporaryDirectory() as tmp:
        spawn_local(_rank, world, shards, args, tmp, start_method="fork")
        ranks = [torch.load(f"{tmp}/rank{r}.pt") for r in range(world)]
    load_after = _load()
    steps = ranks[0]["exchange"]["steps"]
    sent = sum(r["exchange"]["bytes_sent"] for r in ranks) / steps
    remote = sum(r["exchange"]["remote_feature_bytes"] for r in ranks) / steps
    rss = [r["rss_gib"] for r in ranks]
    result = {
        "num_nodes": meta["num_nodes"], "num_edges": meta["num_edges"],
        "world_size": world, "partition": meta["method"],
        "partition_s": round(t_part, 2), "cut_edges": meta["cut_edges"],
        "steps": args.steps, "batch": args.batch, "features": args.features,
        "single_rss_gib": single["rss_gib"], "rank_rss_gib": rss,
        "rss_ratio_max": max(rss) / single["rss_gib"],
        "rel_param_diff": _rel_diffs(ranks[0]["params"], single["params"]),
        "ranks_agree": all(torch.equal(r["params"][k], ranks[0]["params"][k])
                           for r in ranks for k in ranks[0]["params"]),
        "ledgers_equal": all(r["ledger"] == single["ledger"] for r in ranks),
        "single_steps_per_s": 1.0 / single["step_s"],
        "sharded_steps_per_s": 1.0 / max(r["step_s"] for r in ranks),
        "single_setup_s": single["setup_s"], "sharded_setup_s": max(r["setup_s"] for r in ranks),
        "bytes_per_step": sent, "remote_feature_bytes_per_step": remote,
        "max_rank_bytes_per_step": max(r["exchange"]["bytes_sent"] for r in ranks) / steps,
        "bytes_ratio": sent / remote if remote else float("nan"),
        "remote_rows_per_step": sum(r["exchange"]["remote_rows"] for r in ranks) / steps,
        "load_avg": {"single": load_single, "before": load_before, "after": load_after},
        "cpus": os.cpu_count(),
    }
    result["max_rel_param_diff"] = max(result["rel_param_diff"].values())
    result["max_abs_entry_diff"] = max(float((ranks[0]["params"][k] - v).abs().max())
                                       for k, v in single["params"].items())
    _report(result, t_part, meta)
    return result


def _report(result: dict, t_part: float, meta: dict) -> None:
    rss = result["rank_rss_gib"]
    print(f"N={result['num_nodes']:.0e} ({result['num_edges']} edges), {result['world_size']} "
          f"ranks, {meta['method']} partition ({t_part:.1f} s, {meta['cut_edges']} cut edges)")
    print(f"peak RSS GiB: single {result['single_rss_gib']:.3f}, ranks "
          f"{', '.join(f'{r:.3f}' for r in rss)} -> ratio {result['rss_ratio_max']:.2f} "
          f"(accept <= 0.6)")
    print(f"parameters after {result['steps']} steps: relative difference ||a-b||/||b|| "
          f"{result['max_rel_param_diff']:.2e} (accept <= 1e-5; largest entry difference "
          f"{result['max_abs_entry_diff']:.1e}); ledgers equal: "
          f"{result['ledgers_equal']}; ranks hold one model: {result['ranks_agree']}")
    print(f"steps/s: single {result['single_steps_per_s']:.2f}, sharded "
          f"{result['sharded_steps_per_s']:.2f} (set-up s: {result['single_setup_s']:.1f} vs "
          f"{result['sharded_setup_s']:.1f}; load average {result['load_avg']['before']} -> "
          f"{result['load_avg']['after']} on {result['cpus']} cores)")
    print(f"bytes exchanged per step {result['bytes_per_step']:,.0f}; features of the sampled "
          f"remote neighbours {result['remote_feature_bytes_per_step']:,.0f} "
          f"({result['remote_rows_per_step']:.0f} rows) -> ratio {result['bytes_ratio']:.3f} "
          f"(accept <= 2)", flush=True)


def table(files: list[str]) -> str:
    """The Markdown table of docs/scale.md from the JSON files of runs."""
    runs = []
    for name in files:
        doc = json.loads(Path(name).read_text())
        runs += doc["runs"] if "runs" in doc else [doc]
    runs.sort(key=lambda r: (r["num_nodes"], r["world_size"]))
    lines = ["| N | W | partition | peak RSS GiB: 1 process / largest rank (ratio) | "
             "bytes sent per step: all ranks / largest rank | remote rows per step | "
             "`‖a−b‖/‖b‖` | ledgers | steps/s: 1 process / sharded | load avg |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        load = r.get("load_avg", {}).get("before")
        lines.append(
            f"| 10^{len(str(r['num_nodes'])) - 1} | {r['world_size']} | {r['partition']} | "
            f"{r['single_rss_gib']:.3f} / {max(r['rank_rss_gib']):.3f} "
            f"({r['rss_ratio_max']:.2f}) | {r['bytes_per_step']:,.0f} / "
            f"{r.get('max_rank_bytes_per_step', float('nan')):,.0f} | "
            f"{r['remote_rows_per_step']:,.0f} | {r['max_rel_param_diff']:.1e} | "
            f"{'equal' if r['ledgers_equal'] else 'DIFFER'} | "
            f"{r['single_steps_per_s']:.2f} / {r['sharded_steps_per_s']:.2f} | "
            f"{load[0] if load else '?'} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world-size", default="2",
                    help="ranks, or a comma-separated list (2,4,8): one run per world size")
    ap.add_argument("--num-nodes", type=lambda s: int(float(s)), default=100_000)
    ap.add_argument("--out", help="JSON file of the results")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=4096, help="expected batch")
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--avg-degree", type=float, default=10.0)
    ap.add_argument("--train-frac", type=float, default=0.5)
    ap.add_argument("--method", default="auto", choices=["auto", "metis", "contiguous"])
    ap.add_argument("--feature-norm", default="auto", help="the trainers' feature_norm")
    ap.add_argument("--workdir", default="/tmp/gnnprivacy-scale")
    ap.add_argument("--fresh-single", action="store_true",
                    help="run the single process again instead of reusing the kept result")
    ap.add_argument("--table-from", nargs="+", metavar="FILE",
                    help="print the Markdown table of these result files and exit")
    args = ap.parse_args(argv)
    if args.table_from:
        print(table(args.table_from))
        return
    if not args.out:
        ap.error("--out is required (unless --table-from)")
    worlds = [int(w) for w in str(args.world_size).split(",") if w.strip()]
    if not worlds or min(worlds) < 1:
        ap.error(f"--world-size: positive integers, got {args.world_size!r}")
    ctx = mp.get_context("fork")
    runs = []
    for world in worlds:
        runs.append(_one_world(args, world, ctx))
        Path(args.out).write_text(json.dumps({"runs": runs}, indent=2) + "\n")
    if len(runs) == 1:       # one world size: the run itself at the top level, as before
        Path(args.out).write_text(json.dumps({**runs[0], "runs": runs}, indent=2) + "\n")


if __name__ == "__main__":
    main()
