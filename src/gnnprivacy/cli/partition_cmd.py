"""``gnnprivacy partition GRAPH --parts N --out DIR``: per-rank shards for sharded training.

GRAPH is a folder of the streamed ``csbm-large`` format (`generate_large_graph`) or a
registered dataset name: a node dataset is loaded with ``train``'s split options
(``--split``, ``--train-frac`` ..., ``--seed``), so ``train-sharded`` scores the test nodes
``train`` scores; a graph dataset (``cox2`` ...) is split into graph shards with its
stratified split. The shards are what `gnnprivacy.training.sharded` maps, one part per rank
(``docs/scale.md``). It is `gnnprivacy.partition` (the same code path).

Example:

```
gnnprivacy partition /data/csbm-1e6 --parts 2 --out /data/csbm-1e6-2parts
gnnprivacy partition cora --parts 2 --out cora-2parts --seed 3
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
              help="folder of the shards (other files there are kept)")
@click.option("--method", type=click.Choice(["auto", "metis", "contiguous"]), default="auto",
              show_default=True,
              help="METIS (fewest cut edges; holds the graph in memory) or contiguous node "
                   "ids (no memory); auto: METIS up to 6e7 directed edges")
@click.option("--seed", type=click.IntRange(min=0, max=2**31 - 1), default=0, show_default=True,
              help="METIS seed; the drawn training split's; a named dataset's split seed "
                   "unless --split-seed (as train --seed)")
@click.option("--train-fraction", type=click.FloatRange(0.0, 1.0), default=None,
              help="share of training nodes drawn for a graph folder without a split "
                   "[default: 0.5]")
@click.option("--split", default=None, help="a named node dataset's split: random | public "
                                            "(as train --split)")
@click.option("--split-seed", type=click.IntRange(min=0), default=None,
              help="the split's seed (default: --seed)")
@click.option("--train-frac", type=float, default=None, help="a named dataset's training fraction")
@click.option("--val-frac", type=float, default=None, help="its validation fraction")
@click.option("--test-frac", type=float, default=None, help="its test fraction")
@click.option("--dataset-args", default=None, help="a named dataset's arguments, key=value,...")
@click.option("--data-root", "data_root", type=click.Path(file_okay=False), default=None,
              help="folder with the raw datasets (a named dataset)")
@click.option("--overwrite", is_flag=True, help="replace the shards of an earlier partition in "
                                                "--out (only the files it wrote)")
def partition_command(graph: str, parts: int, out: str, method: str, seed: int,
                      train_fraction: float | None, split: str | None, split_seed: int | None,
                      train_frac: float | None, val_frac: float | None, test_frac: float | None,
                      dataset_args: str | None, data_root: str | None, overwrite: bool) -> None:
    """Split GRAPH (a csbm-large folder or a dataset name) into PARTS shards in OUT."""
    from gnnprivacy.api import partition
    from gnnprivacy.errors import InvalidParameterError, WriteFailedError

    try:
        folder = partition(graph, out, num_parts=parts, method=method, seed=seed,
                           train_fraction=train_fraction, split=split, split_seed=split_seed,
                           train_frac=train_frac, val_frac=val_frac, test_frac=test_frac,
                           dataset_args=dataset_args, data_root=data_root, overwrite=overwrite)
    except WriteFailedError:
        raise                                   # the fault guard prints its one line
    except (InvalidParameterError, ValueError) as exc:
        raise click.UsageError(str(exc)) from exc
    meta = json.loads((folder / "meta.json").read_text())
    split_note = (f", {meta['num_test']} test" if "num_test" in meta else "")
    if meta.get("kind") == "graphs":
        click.echo(f"{meta['num_graphs']} graphs -> {meta['num_parts']} parts in {folder}: "
                   f"sizes {meta['part_sizes']}, {meta['num_train']} training graphs"
                   f"{split_note}")
        return
    click.echo(f"{meta['num_nodes']} nodes, {meta['num_edges']} edges -> {meta['num_parts']} "
               f"parts ({meta['method']}) in {folder}: sizes {meta['part_sizes']}, "
               f"{meta['cut_edges']} cut edges, {meta['num_train']} training nodes{split_note}")
