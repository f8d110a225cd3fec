"""``gnnprivacy predict MODEL --dataset D``: predictions of a saved model, as CSV.

Example:

```
gnnprivacy train --method heterpoisson --dataset cora --data-root ../shared/datasets
gnnprivacy predict runs/<run_id>.model.pt --dataset cora --data-root ../shared/datasets \\
    -o predictions.csv
```

On the dataset the model was trained on, the graph and its split are the record's (same
seeds), so a method with a private inference (heterpoisson) queries exactly as it did after
training. On another dataset every node is a query node and none is a training node.
"""

from __future__ import annotations

import click

from gnnprivacy.cli.options import import_option, importable_from_cwd


def read_node_file(path: str, num_nodes: int):
    """Node ids from a file: one per line, or the first column of a CSV (a non-numeric
    header line is skipped).

    Raises:
        click.BadParameter: a non-integer entry or an id outside ``[0, num_nodes)``.
    """
    import torch

    ids = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            text = line.split(",")[0].strip()
            if not text or (number == 1 and not text.lstrip("-").isdigit()):
                continue
            if not text.lstrip("-").isdigit():
                raise click.BadParameter(f"line {number}: {text!r} is not a node id",
                                         param_hint="--nodes")
            ids.append(int(text))
    nodes = torch.tensor(ids, dtype=torch.long)
    bad = nodes[(nodes < 0) | (nodes >= num_nodes)]
    if bad.numel():
        raise click.BadParameter(f"node id {int(bad[0])} is outside [0, {num_nodes}) "
                                 f"({bad.numel()} such ids)", param_hint="--nodes")
    return nodes


def load_prediction_graph(record, dataset: str | None, data_root: str | None):
    """The graph to predict on: the record's dataset and split, or another dataset with
    every node a query node; for a graph task's record the graph set (every graph)."""
    import torch

    from gnnprivacy.method.config import RUN_FIELDS, resolve_config
    from gnnprivacy.method.data import load_run_data

    name = dataset or record.dataset
    values = {k: v for k, v in record.config.items() if k in RUN_FIELDS}
    values = {k: v for k, v in values.items() if k not in ("runs_dir", "resume", "device")}
    values["method"] = record.method
    if data_root is not None:
        values["data_root"] = data_root
    if name != record.dataset:
        values.update(dataset=name, dataset_args="")
    config, _ = resolve_config(values)
    data = load_run_data(config)
    if config.task == "graph":
        return data
    if name != record.dataset:
        n = int(data.num_nodes)
        data.train_mask = torch.zeros(n, dtype=torch.bool)
        data.val_mask = torch.zeros(n, dtype=torch.bool)
        data.test_mask = torch.ones(n, dtype=torch.bool)
    return data


def _level(result) -> str:
    return getattr(result, "level", None) or getattr(result, "task", "node")


def _prediction_data(result, dataset: str | None, data_root: str | None):
    """``(data, rows)``: what to predict on and its number of rows (nodes, or graphs). A run's
    model: `load_prediction_graph`; a model saved by ``gp.save_model``: ``--dataset`` (every
    node or graph a query) or the dataset the file names."""
    from gnnprivacy.training.predict import as_graph_list

    if hasattr(result, "record"):
        data = load_prediction_graph(result.record, dataset, data_root)
    else:
        from gnnprivacy.auditing.report_card import saved_dataset
        from gnnprivacy.errors import InvalidParameterError

        named = ({"name": dataset, **({"task": "graph"} if result.level == "graph" else {})}
                 if dataset else result.dataset)
        if not named:
            raise InvalidParameterError("--dataset", "the dataset to predict on (the model "
                                        "file names none)", None)
        data = saved_dataset(named, data_root)
    graphs = as_graph_list(data)
    return data, len(graphs) if graphs is not None else int(data.num_nodes)


@click.command("predict")
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("--dataset", default=None,
              help="Dataset to predict on (default: the one the model was trained on).")
@click.option("--data-root", type=click.Path(file_okay=False), default=None,
              help="Dataset root (default: the record's).")
@click.option("--nodes", "nodes_file", type=click.Path(exists=True, dir_okay=False),
              default=None, help="File of node ids (one per line, or a CSV's first column); "
                                 "default: every node.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="CSV to write (default: stdout).")
@click.option("--force", is_flag=True, help="let -o replace an existing run record, model or checkpoint")
@import_option
def predict_command(model, dataset, data_root, nodes_file, output, force, imports) -> None:
    """Predictions of a saved model, any the library writes (node, predicted class, one logit
    column per class; a graph classifier: one row per graph)."""
    import io

    import gnnprivacy as gp
    from gnnprivacy.errors import GnnPrivacyError

    try:
        if output is not None:  # before any work; never the model or node file being read
            from gnnprivacy._files import check_output_file

            check_output_file(output, name="-o/--output", force=force, reads=(model, nodes_file))
        result = gp.load(model, imports=importable_from_cwd(imports))
        data, rows_of = _prediction_data(result, dataset, data_root)
        nodes = None if nodes_file is None else read_node_file(nodes_file, rows_of)
        logits = result.predict(data, nodes)
    except (GnnPrivacyError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    unit = "graph" if _level(result) == "graph" else "node"
    ids = range(rows_of) if nodes is None else nodes.tolist()
    buffer = io.StringIO()
    buffer.write(f"{unit},prediction," + ",".join(f"logit_{c}" for c in range(logits.shape[1]))
                 + "\n")
    for node, row in zip(ids, logits.tolist()):
        best = max(range(len(row)), key=row.__getitem__)
        buffer.write(f"{node},{best}," + ",".join(f"{v:.6g}" for v in row) + "\n")
    if output is None:
        click.echo(buffer.getvalue(), nl=False)
        return
    from gnnprivacy._files import atomic_write

    try:
        atomic_write(output, buffer.getvalue(), what="predictions")
    except GnnPrivacyError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"{len(ids)} predictions of {result.record.method} ({result.record.run_id}) "
               f"-> {output}", err=True)
