"""``gnnprivacy datasets``: list the registered datasets and whether each is available locally.

Only the registry and file checks are imported (no torch), so the command is fast.
"""

from __future__ import annotations

import json
import os

import click


def _missing_text(paths: list[str]) -> str:
    """``dir/{a, b}`` per directory, so long lists of files stay readable."""
    groups: dict[str, list[str]] = {}
    for p in paths:
        groups.setdefault(os.path.dirname(p), []).append(os.path.basename(p))
    parts = []
    for folder, names in groups.items():
        parts.append(f"{folder}/{names[0]}" if len(names) == 1 else f"{folder}/{{{', '.join(names)}}}")
    return "; ".join(parts)


def _why(status) -> str:
    if status.available:
        return status.reason if status.root is None else ""
    reasons = []
    if status.missing_packages:
        reasons.append(f"needs package {', '.join(status.missing_packages)} (not installed)")
    if status.missing_files:
        reasons.append(f"missing {_missing_text(list(status.missing_files))}")
    if status.corrupt_files:
        reasons.append(f"corrupt {'; '.join(status.corrupt_files)}")
    return "; ".join(reasons)


@click.command("datasets")
@click.option("--data-root", "data_root", type=click.Path(file_okay=False), default=None,
              help="folder with the raw datasets in PyG's layout "
                   "(else $GNNPRIVACY_DATA, else ~/.cache/gnnprivacy)")
@click.option("--json", "as_json", is_flag=True, help="print a JSON document instead of a table")
def datasets_command(data_root: str | None, as_json: bool) -> None:
    """List every registered dataset, whether its raw files are present, and if not, why."""
    from gnnprivacy.datasets.paths import resolve_root
    from gnnprivacy.datasets.registry import dataset_info
    from gnnprivacy.datasets.status import all_statuses
    from gnnprivacy.errors import InvalidParameterError

    try:
        root = resolve_root(data_root)
        statuses = all_statuses(root)
    except InvalidParameterError as exc:
        raise click.BadParameter(str(exc), param_hint="--data-root") from exc
    from gnnprivacy.datasets.tu_graphs import (GRAPH_DATASETS, graph_dataset_status,
                                               list_graph_datasets)

    graphs = [graph_dataset_status(name, root) for name in list_graph_datasets()]
    if as_json:
        rows = [{**s.to_dict(), "description": dataset_info(s.name).description} for s in statuses]
        grows = [{**s.to_dict(), "description": GRAPH_DATASETS[s.name][1]} for s in graphs]
        click.echo(json.dumps({"root": str(root.path), "root_source": root.source,
                               "datasets": rows, "graph_datasets": grows}, indent=2))
        return
    click.echo(f"Data root: {root.describe()}")
    width = max(len(s.name) for s in statuses)
    click.echo(f"{'dataset'.ljust(width)}  available  details")
    for s in statuses:
        mark = "yes" if s.available else "no"
        click.echo(f"{s.name.ljust(width)}  {mark.ljust(9)}  {_why(s)}".rstrip())
    n_ok = sum(s.available for s in statuses)
    click.echo(f"{n_ok} of {len(statuses)} datasets available.")
    if n_ok < len(statuses):
        click.echo("Missing raw files go under the data root in PyG's layout "
                   "(or choose another root with --data-root / $GNNPRIVACY_DATA).")
    click.echo("Graph classification (--task graph; one graph per privacy unit):")
    for s in graphs:
        mark = "yes" if s.available else "no"
        click.echo(f"{s.name.ljust(width)}  {mark.ljust(9)}  {_why(s)}".rstrip())
