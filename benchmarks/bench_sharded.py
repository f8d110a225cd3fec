"""Sharded HeterPoisson over ``--world-size`` local ranks against the single-process run.

For ``--num-nodes N`` the script generates (once, into ``--workdir``) a ``csbm-large`` graph
(average degree ``--avg-degree``, ``--features`` float32 features, seed 0), partitions it into
``--world-size`` shards (`partition_graph`, ``--method``; training nodes drawn with
probability ``--train-frac``), then runs, each in a fresh forked process (so each peak RSS is
that process's own):

* the single-process `HeterPoissonTrainer` (``sampling_stream="counter"``) on the
  memory-mapped whole graph with the shards' training mask;
* `ShardedHeterPoissonTrainer` on ``--world-size`` ranks (gloo through a file, no port),
  rank ``k`` on part ``k``;

both GCN, ``--steps`` steps, noise multiplier 1, expected batch ``--batch``
(``q_b = batch / |V_tr|``), ``degree_public=True``, seed 0. It prints and writes to
``--out`` (JSON): per-rank peak RSS beside the single process's (and the ratio, accepted at
<= 0.6), the relative parameter difference ``||a - b|| / ||b||`` of the worst tensor
(accepted at <= 1e-5) beside the largest entry difference, and whether the ledgers are equal, steps per second of both (the median step, set-up excluded), and the
bytes exchanged per step (all ranks) beside the features of the sampled remote neighbours
per step (accepted within 2x).

Why a norm-wise difference: the two runs add the same clipped gradients in another order
(two partial sums and an ``all_reduce`` against one sum), a difference of ~1e-7 relative.
Adam's first steps divide by ``|g| + 1e-8``, so the few entries whose noisy gradient happens
to fall within ~1e-7 of zero move by up to ~1e-6 differently; the tensors as a whole stay
within ~1e-6.

Example::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_sharded.py --world-size 2 \\
        --num-nodes 100000 --out sharded-1e5.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
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


def _prepare(args, queue) -> None:
    """Child: generate the graph (once) and partition it."""
    from gnnprivacy.datasets.shards import partition_graph

    graph = ensure_graph(args.num_nodes, args)
    shards = Path(args.workdir) / f"{graph.name}-p{args.world_size}-{args.method}"
    t0 = time.perf_counter()
    if not (shards / "meta.json").exists():
        partition_graph(graph, shards, num_parts=args.world_size, method=args.method,
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


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--num-nodes", type=lambda s: int(float(s)), default=100_000)
    ap.add_argument("--out", required=True, help="JSON file of the results")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=4096, help="expected batch")
    ap.add_argument("--features", type=int, default=64)
    ap.add_argument("--avg-degree", type=float, default=10.0)
    ap.add_argument("--train-frac", type=float, default=0.5)
    ap.add_argument("--method", default="auto", choices=["auto", "metis", "contiguous"])
    ap.add_argument("--feature-norm", default="auto", help="the trainers' feature_norm")
    ap.add_argument("--workdir", default="/tmp/gnnprivacy-scale")
    args = ap.parse_args(argv)
    import torch

    from gnnprivacy.training.distributed import spawn_local

    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    _in_child(ctx, _prepare, args, queue)
    graph, shards, t_part, meta = queue.get()
    with tempfile.TemporaryDirectory() as tmp:
        _in_child(ctx, _single, graph, shards, args, f"{tmp}/single.pt")
        spawn_local(_rank, args.world_size, shards, args, tmp, start_method="fork")
        single = torch.load(f"{tmp}/single.pt")
        ranks = [torch.load(f"{tmp}/rank{r}.pt") for r in range(args.world_size)]
    steps = ranks[0]["exchange"]["steps"]
    sent = sum(r["exchange"]["bytes_sent"] for r in ranks) / steps
    remote = sum(r["exchange"]["remote_feature_bytes"] for r in ranks) / steps
    rss = [r["rss_gib"] for r in ranks]
    result = {
        "num_nodes": meta["num_nodes"], "num_edges": meta["num_edges"],
        "world_size": args.world_size, "partition": meta["method"],
        "partition_s": round(t_part, 2), "cut_edges": meta["cut_edges"],
        "steps": args.steps, "batch": args.batch,
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
        "bytes_ratio": sent / remote if remote else float("nan"),
        "remote_rows_per_step": sum(r["exchange"]["remote_rows"] for r in ranks) / steps,
    }
    result["max_rel_param_diff"] = max(result["rel_param_diff"].values())
    result["max_abs_entry_diff"] = max(float((ranks[0]["params"][k] - v).abs().max())
                                       for k, v in single["params"].items())
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"N={result['num_nodes']:.0e} ({result['num_edges']} edges), {args.world_size} ranks, "
          f"{meta['method']} partition ({t_part:.1f} s, {meta['cut_edges']} cut edges)")
    print(f"peak RSS GiB: single {single['rss_gib']:.3f}, ranks "
          f"{', '.join(f'{r:.3f}' for r in rss)} -> ratio {result['rss_ratio_max']:.2f} "
          f"(accept <= 0.6)")
    print(f"parameters after {args.steps} steps: relative difference ||a-b||/||b|| "
          f"{result['max_rel_param_diff']:.2e} (accept <= 1e-5; largest entry difference "
          f"{result['max_abs_entry_diff']:.1e}); ledgers equal: "
          f"{result['ledgers_equal']}; ranks hold one model: {result['ranks_agree']}")
    print(f"steps/s: single {result['single_steps_per_s']:.2f}, sharded "
          f"{result['sharded_steps_per_s']:.2f} (set-up s: {result['single_setup_s']:.1f} vs "
          f"{result['sharded_setup_s']:.1f})")
    print(f"bytes exchanged per step {sent:,.0f}; features of the sampled remote neighbours "
          f"{remote:,.0f} ({result['remote_rows_per_step']:.0f} rows) -> ratio "
          f"{result['bytes_ratio']:.3f} (accept <= 2)")


if __name__ == "__main__":
    main()
