"""``gnnprivacy train-sharded SHARDS``: heterpoisson over a graph sharded across the ranks
(``dpsgd-graph``, graph-level DP, over graph shards: a graph dataset or list partitioned).

Run it on every rank with ``torchrun`` (one process per part of ``gnnprivacy partition``)::

    torchrun --standalone --nproc_per_node 2 -m gnnprivacy.cli train-sharded shards/ --epsilon 8

Rank ``k`` trains on part ``k`` (`gnnprivacy.method.sharded.run_sharded`); rank 0 alone
checkpoints and, once the run has finished, writes the run record. A rank that dies stops
the others: each exits with status 1 and one line (``Error: rank 0 of 2: a collective failed
at step 3 ...``), no record is written, and the same command with ``--resume`` continues
from rank 0's last checkpoint to the same ledger. Without ``torchrun`` (no ``WORLD_SIZE``
in the environment) it is one process on a one-part partition.

A command of its own rather than ``train --shards``: ``train`` loads a dataset into one
process and evaluates it, while here no process holds the graph, only ``heterpoisson``
applies, and the data options of ``train`` (dataset, split, fractions) have no meaning.
"""

from __future__ import annotations

import datetime
import os
import sys

import click

from gnnprivacy.cli.options import add_options, collect_fields

#: the `RunConfig` fields that apply to a sharded run (the shard folder is the data)
SHARDED_RUN_FIELDS = ("seed", "runs_dir", "device", "resume")


def _fields():
    from gnnprivacy.method.config import RunConfig
    from gnnprivacy.method.registry import get_method

    fields = collect_fields([("common", RunConfig),
                             ("heterpoisson", get_method("heterpoisson").params),
                             ("dpsgd-graph", get_method("dpsgd-graph").params)])
    run_only = {f for f, e in fields.items() if e["owners"] == ["common"]}
    return {k: v for k, v in fields.items()
            if k not in run_only or k in SHARDED_RUN_FIELDS}


def init_group(timeout_s: float, device: str) -> None:
    """Join ``torchrun``'s process group (``env://``) with a collective timeout, when the
    environment names one (``WORLD_SIZE``) and none is initialised yet."""
    import torch.distributed as dist

    if "WORLD_SIZE" not in os.environ or dist.is_initialized():
        return
    backend = "nccl" if device.startswith("cuda") else "gloo"
    if backend == "nccl":
        import torch

        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))


def _train_sharded(shards, checkpoint_every, timeout, as_json, quiet, **options):
    from gnnprivacy.cli.train_cmd import echo_result_warnings, privacy_summary
    from gnnprivacy.errors import GnnPrivacyError, WriteFailedError
    from gnnprivacy.method.sharded import run_sharded
    from gnnprivacy.records.record import dumps
    from gnnprivacy.training.sharded import ShardedRunError

    values = {k: v for k, v in options.items() if v is not None}
    init_group(timeout, values.get("device", "cpu"))
    from gnnprivacy.training.distributed import rank_and_world

    rank = rank_and_world()[0]
    log = (lambda m: None) if quiet or rank else (lambda m: click.echo(m, err=True))
    try:
        record = run_sharded(values, shards, checkpoint_every=checkpoint_every, log=log)
    except ShardedRunError as exc:
        # the group is broken: tearing it down (at interpreter exit too) waits for the dead
        # peer until torchrun kills this rank, so the one line is printed and the rank exits
        click.echo(f"Error: {exc}", err=True)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
    except (ValueError, GnnPrivacyError) as exc:
        if isinstance(exc, WriteFailedError):   # the fault guard prints the record
            raise
        raise click.ClickException(str(exc)) from None
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
    if record is None:          # ranks other than 0 write nothing
        return
    if quiet:  # -q drops the chatter, not what the reader of the result must know
        echo_result_warnings(record)
    if as_json:
        click.echo(dumps(record.summary()))
        return
    units = ("test graphs" if record.info.get("task") == "graph" else "test nodes"
             if "test nodes" in record.info["test_nodes"] else "non-training nodes")
    click.echo(f"{record.method} on {shards} ({record.info['world_size']} rank(s), "
               f"{record.info['steps']} steps): test accuracy "
               f"{record.metrics['test_accuracy']:.4f} ({record.info['num_test']} {units})  "
               f"{privacy_summary(record)}  "
               f"({record.timings['total_seconds']:.1f} s)")
    click.echo(f"record: {record.config['runs_dir']}/{record.run_id}.json")


def _build():
    fields = _fields()
    command = add_options(_train_sharded, fields, common=set(SHARDED_RUN_FIELDS))
    command = click.option("--quiet", "-q", is_flag=True,
                           help="no log on stderr (warnings about the result are still "
                                "printed)")(command)
    command = click.option("--json", "as_json", is_flag=True,
                           help="print a machine-readable result on stdout (rank 0)")(command)
    command = click.option("--timeout", type=click.FloatRange(min=1.0), default=600.0,
                           show_default=True,
                           help="seconds a rank waits in a collective for the others before "
                                "the run stops (a silent rank)")(command)
    command = click.option("--checkpoint-every", type=click.IntRange(min=1), default=100,
                           show_default=True,
                           help="rank 0 checkpoints every this many steps (--resume "
                                "continues from the last)")(command)
    command = click.argument("shards", type=click.Path(exists=True, file_okay=False))(command)
    doc = ("Train heterpoisson on a graph sharded over the ranks (gnnprivacy partition), or "
           "dpsgd-graph on graph shards (a partitioned graph dataset); run on every rank with "
           "torchrun.\n\n\b\n"
           "  torchrun --standalone --nproc_per_node 2 -m gnnprivacy.cli train-sharded SHARDS ...\n\n"
           "Rank 0 writes the run record once the run has finished; a rank that dies stops "
           "the others (exit status 1, no record), and --resume continues from rank 0's last "
           "checkpoint.")
    return click.command("train-sharded", help=doc)(command)


train_sharded_command = _build()
