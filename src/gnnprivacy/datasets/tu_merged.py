"""TU graph-classification datasets merged into one node-classification graph (spec 003 §6.1).

GRID's paper uses ENZYMES and AIDS as single graphs: the disjoint union of all their graphs,
each node labelled with its graph's label. The merged ``Data`` carries ``graph_id`` (the
graph each node came from), so link-stealing splits can sample whole graphs
(``gnnprivacy.datasets.link_splits.attack_splits(split="component")``).

Features: PyG's ``TUDataset(use_node_attr=True)``: continuous node attributes followed by the
one-hot node labels (ENZYMES 18 + 3 = 21, AIDS 4 + 38 = 42).
"""

from __future__ import annotations

from gnnprivacy.datasets.spec import register_dataset

P003 = "003: Lou et al., GRID: Protecting Training Graph from Link Stealing Attacks on GNN Models"
_TU_FILES = ("A", "graph_indicator", "graph_labels", "node_labels", "node_attributes")


def merge_graphs(dataset):
    """One ``Data`` from a graph dataset: offset edges, node label = graph label, ``graph_id``."""
    import torch
    from torch_geometric.data import Data

    xs, edges, ys, gids = [], [], [], []
    offset = 0
    for g, graph in enumerate(dataset):
        n = int(graph.num_nodes)
        xs.append(graph.x)
        edges.append(graph.edge_index + offset)
        ys.append(graph.y.view(-1)[:1].repeat(n))
        gids.append(torch.full((n,), g, dtype=torch.long))
        offset += n
    return Data(x=torch.cat(xs), edge_index=torch.cat(edges, 1), y=torch.cat(ys),
                graph_id=torch.cat(gids), num_nodes=offset)


def _tu(name: str, registry_name: str, description: str, notes: str):
    files = [f"{name}_{f}.txt" for f in _TU_FILES]

    @register_dataset(registry_name, description=description,
                      pyg_class=f"torch_geometric.datasets.TUDataset(root, {name!r}, use_node_attr=True), merged",
                      raw_files=tuple(f"{name}/raw/{f}" for f in files), papers=(P003,), notes=notes)
    def load(ctx):
        from torch_geometric.datasets import TUDataset

        from gnnprivacy.datasets.pyg_cache import PygSource, load_pyg_dataset

        source = PygSource(subdir=name, required=tuple(f"raw/{f}" for f in files),
                           factory=lambda r: TUDataset(r, name, use_node_attr=True))
        return merge_graphs(load_pyg_dataset(ctx, source))

    return load


_tu("ENZYMES", "enzymes", "ENZYMES (TU) protein graphs merged into one graph; node label = graph's enzyme class",
    "600 graphs, 19,580 nodes, 37,282 undirected edges, 21 features (18 attributes + 3 one-hot "
    "labels), 6 classes; graph_id gives each node's graph (spec 003 merges the graphs).")
_tu("AIDS", "aids", "AIDS (TU) molecule graphs merged into one graph; node label = graph's activity",
    "2,000 graphs, 31,385 nodes, 32,390 undirected edges, 42 features (4 attributes + 38 one-hot "
    "labels), 2 classes (400 / 1,600 graphs); graph_id gives each node's graph.")
