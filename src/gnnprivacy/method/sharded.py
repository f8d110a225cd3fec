"""One sharded HeterPoisson run from a flat configuration, with its run record (every rank calls it).

`run_sharded` is what ``gnnprivacy train-sharded SHARDS`` runs on every rank (``torchrun``,
or `gnnprivacy.training.distributed.spawn_local` in tests): rank ``k`` trains on part ``k``
of the shard folder with `ShardedHeterPoissonTrainer`, rank 0 alone checkpoints (under
``<runs_dir>/checkpoints``, keyed by the configuration like ``gnnprivacy train``) and, only
once the run has finished, publishes the run record atomically (`ResultStore.publish`). A
rank that dies stops the others with `ShardedRunError`: no record is written, the last
checkpoint is kept, and the same command with ``resume`` continues from it to the same
ledger.

The record has the schema of a ``heterpoisson`` record: ``privacy`` adds what a sharded run
changes in the trust model (``scope`` and ``unaccounted`` say that the ranks are one trusted
party; ``sampling_stream`` is ``"counter"``). The shards carry no split beyond the training
mask unless the partitioned dataset had a split: ``test_accuracy`` is that of private
inference on the shards' test nodes (the nodes ``gnnprivacy train`` scores on the same
dataset, split and seed), or on every non-training node when there is none
(`ShardedHeterPoissonTrainer.score_parts`, ``info["num_test"]`` nodes); no rank holds the
graph, so no model file is written.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.method.config import config_to_dict, resolve_config
from gnnprivacy.method.context import MethodResult, RunContext
from gnnprivacy.method.registry import get_method
from gnnprivacy.records.record import RunRecord

__all__ = ["SHARDED_SCOPE", "SHARDED_UNACCOUNTED", "run_sharded", "shards_kind"]

#: what a sharded run adds to the record's ``privacy["scope"]``
SHARDED_SCOPE = ("the ranks of the sharded run are one trusted party (the trainer); the "
                 "released noisy sum equals the single-process run's with the counter "
                 "sampling stream and the same seed")
#: what a sharded run adds to the record's ``privacy["unaccounted"]``
SHARDED_UNACCOUNTED = [
    "the ranks are one trusted party: before the noise a rank reads the raw feature rows it "
    "fetches from other ranks and, inside the all_reduce, their clipped gradient sums",
    "the sampling stream is 'counter' (splitmix64 keyed hashes, not a CSPRNG); its seed is "
    "one draw of rank 0's sampling generator, broadcast to the other ranks"]


#: what a sharded graph-classification run adds to ``privacy["unaccounted"]`` (no row crosses)
SHARDED_GRAPH_UNACCOUNTED = [
    "the ranks are one trusted party: inside the all_reduce a rank reads the other ranks' "
    "clipped gradient sums", SHARDED_UNACCOUNTED[1]]


def _graph_unaccounted() -> list[str]:
    from gnnprivacy.training.graph_classification import TRAIN_SCORE_UNACCOUNTED

    return [*SHARDED_GRAPH_UNACCOUNTED, TRAIN_SCORE_UNACCOUNTED]


def shards_kind(shards: str | Path) -> str:
    """``"graphs"`` for graph shards, else ``"nodes"`` (a folder that is neither is refused
    later, by the node path's checks, on every rank)."""
    from gnnprivacy.datasets.shard_files import read_json

    try:
        meta = read_json(Path(shards) / "meta.json")
    except (InvalidParameterError, OSError):
        return "nodes"
    return "graphs" if isinstance(meta, dict) and meta.get("kind") == "graphs" else "nodes"


def run_sharded(values: dict[str, Any], shards: str | Path, *, checkpoint_every: int = 100,
                log: Callable[[str], None] | None = None, progress: Callable | None = None,
                run_id: str | None = None) -> RunRecord | None:
    """Train ``heterpoisson`` on this rank's part of ``shards`` (``dpsgd-graph`` on graph
    shards: graph-level DP-SGD, `gnnprivacy.training.sharded_graphs`); rank 0 writes the
    record.

    Every rank of the default process group (as many ranks as parts; none for a one-part
    partition) calls it with the same ``values``.

    Args:
        values: flat configuration: `RunConfig`'s ``seed``, ``runs_dir``, ``device``,
            ``resume`` and ``heterpoisson``'s parameters (``method`` other than
            ``heterpoisson`` is refused; the dataset is the shard folder).
        shards: the folder of `gnnprivacy.datasets.shards.partition_graph`.
        checkpoint_every: rank 0 checkpoints every this many executed steps.
        log: rank 0's message sink: a warning when the shards hold fewer than 500
            training nodes (as `gnnprivacy.method.runner.run` gives for a small split; the
            record's ``warnings`` keep it), and the step a ``resume`` continued from. The
            other ranks send nothing.
        progress: progress factory (as `gnnprivacy.method.runner.run`).
        run_id: fixed record id (default: time + random suffix).

    Returns:
        On rank 0, the `RunRecord` written to ``<runs_dir>/<run_id>.json``; ``None`` on
        the other ranks.

    Raises:
        ShardedRunError: another rank stopped (nothing is published; rank 0's last
            checkpoint is kept for ``resume``).
        InvalidParameterError: another method, or a partition for another world size.
    """
    from gnnprivacy.datasets.splits import small_train_set_warnings
    from gnnprivacy.method.runner import (check_executed_ledger, check_run_outputs,
                                          checkpoint_path_for, describe_checkpoint, publish_run)
    from gnnprivacy.training.distributed import rank_and_world
    from gnnprivacy.training.sharded import ShardedHeterPoissonTrainer, open_part

    t_start = time.perf_counter()
    values = dict(values)
    if values.get("dataset") is not None:
        raise InvalidParameterError("dataset", "none (the shard folder is the data)",
                                    values["dataset"])
    if shards_kind(shards) == "graphs":
        return _run_graph_shards(values, shards, log=log, run_id=run_id)
    method = values.pop("method", None) or "heterpoisson"
    if method != "heterpoisson":
        raise InvalidParameterError("method", "'heterpoisson' (the sharded trainer of node "
                                    "shards)", method)
    rank, world = rank_and_world()
    shard = open_part(shards)
    config, params = resolve_config({**values, "method": "heterpoisson"})
    config = dataclasses.replace(config, dataset=f"shards:{Path(shards).resolve()}")
    spec = get_method("heterpoisson")
    if rank == 0:   # the runs directory and checkpoint folder, before any work
        ckpt = check_run_outputs(config, params, spec, save=True)
        describe_checkpoint(ckpt, config, params)
    else:
        ckpt = checkpoint_path_for(config, params)
    meta = shard.meta
    say = (log or (lambda m: None)) if rank == 0 else (lambda m: None)
    notes = small_train_set_warnings(int(meta["num_train"]), holder="the shards hold",
                                     made=f"{int(meta['num_nodes'])} nodes in all")
    for note in notes:
        say(f"warning: {note}")
    kwargs = params.trainer_kwargs(num_train=int(meta["num_train"]),
                                   num_nodes=int(meta["num_nodes"]),
                                   num_features=int(meta["num_features"]),
                                   num_classes=int(meta["num_classes"]))
    ctx = RunContext(config=config, params=params, data=None, seed=config.seed,
                     device=config.device)
    trainer = ShardedHeterPoissonTrainer(
        **kwargs, generator=ctx.seed_for("train"), progress=progress, device=config.device,
        checkpoint_path=str(ckpt), checkpoint_every=checkpoint_every,
        resume=bool(config.resume)).fit(shard)
    resumed = int(getattr(trainer, "resumed_from_step_", 0))
    if resumed:
        say(f"resumed from step {resumed} of {trainer.steps_} ({ckpt})")
    metrics = trainer.score_parts(shard, seed=0)   # every rank: the counts are all-reduced
    if rank != 0:
        return None
    privacy = trainer.privacy_record()
    privacy.update(scope=f"{privacy['scope']}; {SHARDED_SCOPE}", sampling_stream="counter",
                   unaccounted=[*privacy.get("unaccounted", []), *SHARDED_UNACCOUNTED])
    result = MethodResult(metrics={k: v for k, v in metrics.items() if k.endswith("accuracy")},
                          epsilon=trainer.epsilon_, delta=trainer.delta_,
                          ledger=trainer.ledger_, privacy=privacy)
    check_executed_ledger(result, target=params.epsilon, what=f"heterpoisson on {shards}")
    t_end = time.perf_counter()
    info = {**trainer.info_, "steps": trainer.steps_, "shards": str(Path(shards).resolve()),
            "resumed_from_step": getattr(trainer, "resumed_from_step_", 0),
            "preset": params.preset, "hparams": kwargs,
            "checkpoint_every": checkpoint_every, "num_test": metrics["num_test"],
            "test_nodes": ("the shards' test nodes (the partitioned dataset's split, as "
                           "gnnprivacy train scores it; private inference)"
                           if "test_mask" in (shard.masks or {}) else
                           "every non-training node of the shards (private inference)")}
    record = RunRecord(
        run_id=run_id or RunRecord.new_id("heterpoisson", f"shards-{Path(shards).name}"),
        method="heterpoisson", dataset=config.dataset, config=config_to_dict(config, params),
        seeds={"run": config.seed, "partition": meta.get("seed")},
        epsilon=float(result.epsilon), delta=float(result.delta),
        privacy={"private": True, **privacy, "ledger": result.ledger},
        metrics=result.metrics, timings={"load_seconds": 0.0, "fit_seconds": t_end - t_start,
                             "total_seconds": t_end - t_start},
        split={"kind": "shards", "num_train": int(meta["num_train"]),
               "num_nodes": int(meta["num_nodes"]), "partition": meta.get("method")},
        info=info, warnings=notes)
    publish_run(record, None, Path(config.runs_dir), ckpt)
    return record


def _run_graph_shards(values: dict[str, Any], shards: str | Path, *,
                      log: Callable[[str], None] | None, run_id: str | None) -> RunRecord | None:
    """``dpsgd-graph`` on graph shards: the model, loop and plan of ``train --task graph``
    (`fit_graph_classifier`) with `make_private_sharded`; every part's train/val/test
    graphs scored (the stratified split of the partitioned dataset). No checkpoints."""
    from gnnprivacy.datasets.graph_shards import open_graph_shard
    from gnnprivacy.method.runner import check_executed_ledger, check_run_outputs, publish_run
    from gnnprivacy.training.distributed import rank_and_world
    from gnnprivacy.training.sharded import fit_graph_classifier_sharded
    from gnnprivacy.training.sharded_graphs import score_graph_parts
    from gnnprivacy.training.sharded_parts import open_part

    t_start = time.perf_counter()
    method = values.pop("method", None) or "dpsgd-graph"
    if method != "dpsgd-graph":
        raise InvalidParameterError("method", "'dpsgd-graph' (graph shards: graph-level DP)",
                                    method)
    config, params = resolve_config({**values, "method": "dpsgd-graph", "task": "graph"})
    config = dataclasses.replace(config, dataset=f"shards:{Path(shards).resolve()}")
    rank, world = rank_and_world()
    shard = open_part(shards, open_graph_shard)
    if rank == 0:
        check_run_outputs(config, params, get_method("dpsgd-graph"), save=True)
    meta = shard.meta
    ctx = RunContext(config=config, params=params, data=None, seed=config.seed,
                     device=config.device)
    fit = fit_graph_classifier_sharded(shard, seed=ctx.seed_for("train"),
                                       **params.fit_kwargs())
    metrics = score_graph_parts(fit.model, shard)      # every rank: counts all-reduced
    if rank != 0:
        return None
    privacy = dict(fit.privacy)
    privacy.update(scope=f"{privacy['scope']}; {SHARDED_SCOPE}", sampling_stream="counter",
                   unaccounted=[*privacy.get("unaccounted", []), *_graph_unaccounted()])
    result = MethodResult(metrics={k: v for k, v in metrics.items() if k.endswith("accuracy")},
                          epsilon=fit.epsilon, delta=fit.delta, ledger=fit.ledger,
                          privacy=privacy)
    check_executed_ledger(result, target=params.epsilon, what=f"dpsgd-graph on {shards}")
    t_end = time.perf_counter()
    info = {"task": "graph", "backbone": params.backbone, "steps": fit.steps,
            "num_graphs": int(meta["num_graphs"]), "num_train_graphs": int(meta["num_train"]),
            "edge_dim": int(meta["edge_dim"]), "world_size": world,
            "shards": str(Path(shards).resolve()), "num_test": metrics["num_test"],
            "test_nodes": ("the shards' test graphs (the partitioned dataset's split, as "
                           "gnnprivacy train --task graph scores it)"),
            "seconds": fit.seconds}
    record = RunRecord(
        run_id=run_id or RunRecord.new_id("dpsgd-graph", f"shards-{Path(shards).name}"),
        method="dpsgd-graph", dataset=config.dataset, config=config_to_dict(config, params),
        seeds={"run": config.seed}, epsilon=float(result.epsilon), delta=float(result.delta),
        privacy={"private": True, **privacy, "ledger": result.ledger},
        metrics=result.metrics, timings={"load_seconds": 0.0, "fit_seconds": t_end - t_start,
                                         "total_seconds": t_end - t_start},
        split={"kind": "shards", "num_train": int(meta["num_train"]),
               "num_graphs": int(meta["num_graphs"])},
        info=info, warnings=[])
    if log is not None:
        log(f"dpsgd-graph: {fit.steps} steps over {world} rank(s)")
    publish_run(record, None, Path(config.runs_dir), None)
    return record
