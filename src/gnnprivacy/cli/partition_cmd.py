"""``gnnprivacy partition GRAPH --parts N --out DIR``: per-rank shards for sharded training.

GRAPH is a folder of the streamed ``csbm-large`` format (`generate_large_graph`) or a
registered dataset name. The shards are what `ShardedHeterPoissonTrainer` maps, one part
per rank (``docs/scale.md``).

Example:

```
gnnprivacy partition /data/csbm-1e6 --parts 2 --out /data/csbm-1e6-2parts
```
"""

from __future__ import annotations

import json

import click


@click.command("partition")
@click.argument("graph")
@click.option("--parts", type=click.IntRange(min=1), required=True,
              help="number of parts (one per rank)")
@click.option("--out", "out", type=click.Path(file_okay=False), required=True,
              help="folder of the shards")
@click.option("--method", type=click.Choice(["auto", "metis", "contiguous"]), default="auto",
              show_default=True,
              help="METIS (fewest cut edges; holds the graph in memory) or contiguous node "
                   "ids (no memory); auto: METIS up to 6e7 directed edges")
@click.option("--seed", type=click.IntRange(min=0, max=2**31 - 1), default=0, show_default=True,
              help="METIS seed, and the training split's when the graph has none")
@click.option("--train-fraction", type=click.FloatRange(0.0, 1.0), default=0.5,
              show_default=True, help="share of training nodes drawn when the graph has no split")
@click.option("--data-root", "data_root", type=click.Path(file_okay=False), default=None,
              help="folder with the raw datasets (a named dataset)")
@click.option("--overwrite", is_flag=True, help="replace shards already in --out")
def partition_command(graph: str, parts: int, out: str, method: str, seed: int,
                      train_fraction: float, data_root: str | None, overwrite: bool) -> None:
    """Split GRAPH (a csbm-large folder or a dataset name) into PARTS shards in OUT."""
    from gnnprivacy.api import partition
    from gnnprivacy.errors import InvalidParameterError

    try:
        folder = partition(graph, out, parts=parts, method=method, seed=seed,
                           train_fraction=train_fraction, data_root=data_root,
                           overwrite=overwrite)
    except InvalidParameterError as exc:
        raise click.UsageError(str(exc)) from exc
    meta = json.loads((folder / "meta.json").read_text())
    click.echo(f"{meta['num_nodes']} nodes, {meta['num_edges']} edges -> {meta['num_parts']} "
               f"parts ({meta['method']}) in {folder}: sizes {meta['part_sizes']}, "
               f"{meta['cut_edges']} cut edges, {meta['num_train']} training nodes")
