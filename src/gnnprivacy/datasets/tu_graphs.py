"""TU graph-classification datasets as *graph* datasets (one ``Data`` per graph).

``gnnprivacy.datasets.tu_merged`` merges ENZYMES and AIDS into one node graph for GRID's
link-stealing experiments; this module reads the same raw files (and COX2, DHFR,
PROTEINS_full) as lists of graphs for graph classification (``--task graph``).

Names: ``enzymes``, ``aids``, ``cox2``, ``dhfr``, ``proteins`` (PROTEINS_full). Read through
PyG's ``TUDataset(use_node_attr=True)`` in the cache (`pyg_cache`; the data root is never
written): node features are the continuous attributes then the one-hot node labels; AIDS
carries a 3-dim one-hot ``edge_attr`` (bond valence).

Preprocessing (`GraphSet`): node features go through ``sign(x) log(1 + |x|)``, a fixed map
that reads no statistic of the data (so it costs no privacy; the raw attributes span
several orders of magnitude, PROTEINS_full's up to ~1e4).

Protocol (`stratified_graph_split`): a fixed stratified split, 80% train / 10% validation /
10% test of every class, drawn from ``(seed, dataset)`` exactly like the node splits
(`gnnprivacy.datasets.splits.split_rng`); results average seeds 0, 1, 2. This is the hold-out
variant of Errica et al. (ICLR 2020), whose 10-fold protocol also takes 10% of the training
folds for model selection; it is lighter on the shared CPU than 10 folds.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from gnnprivacy.errors import InvalidParameterError, UnknownNameError

__all__ = ["GRAPH_DATASETS", "GraphSet", "graph_dataset_status", "list_graph_datasets",
           "load_graph_dataset", "stratified_graph_split"]

_TU_FILES = ("A", "graph_indicator", "graph_labels", "node_labels", "node_attributes")

#: name -> (TU folder, one-line description)
GRAPH_DATASETS: dict[str, tuple[str, str]] = {
    "aids": ("AIDS", "AIDS (TU) molecules, 2,000 graphs, 42 node features, 3 edge features, "
                     "2 classes (active / inactive)"),
    "cox2": ("COX2", "COX2 (TU) molecules, 467 graphs, 38 node features, 2 classes"),
    "dhfr": ("DHFR", "DHFR (TU) molecules, 756 graphs, 56 node features, 2 classes"),
    "enzymes": ("ENZYMES", "ENZYMES (TU) proteins, 600 graphs, 21 node features, 6 classes"),
    "proteins": ("PROTEINS_full", "PROTEINS_full (TU) proteins, 1,113 graphs, 32 node "
                                  "features, 2 classes"),
}
FRACTIONS = (0.8, 0.1, 0.1)


def list_graph_datasets() -> list[str]:
    """Names of the graph-classification datasets (``--task graph``)."""
    return sorted(GRAPH_DATASETS)


def _entry(name: str) -> tuple[str, tuple[str, ...]]:
    key = name.lower() if isinstance(name, str) else name
    if key not in GRAPH_DATASETS:
        raise UnknownNameError("graph dataset", name, GRAPH_DATASETS)
    folder = GRAPH_DATASETS[key][0]
    files = tuple(f"raw/{folder}_{f}.txt" for f in _TU_FILES)
    if folder == "AIDS":
        files += ("raw/AIDS_edge_labels.txt",)
    return folder, files


def graph_dataset_status(name: str, root=None):
    """`gnnprivacy.datasets.status.DatasetStatus` of graph dataset ``name`` under ``root``."""
    from gnnprivacy.datasets.paths import DataRoot, missing_files, resolve_root
    from gnnprivacy.datasets.status import DatasetStatus

    folder, files = _entry(name)
    data_root = root if isinstance(root, DataRoot) else resolve_root(root)
    base = data_root.path / folder
    missing = tuple(str(base / p) for p in missing_files(base, files))
    reason = f"{len(missing)} of {len(files)} raw file(s) missing" if missing else "ok"
    return DatasetStatus(name.lower(), not missing, str(data_root.path), missing, (), reason)


@dataclass
class GraphSet:
    """A graph-classification dataset with its split.

    Attributes:
        name: the dataset's name.
        graphs: every graph (``Data`` with float ``x``, ``edge_index``, ``y`` of shape
            ``[1]``, and ``edge_attr`` for AIDS).
        split: a `gnnprivacy.datasets.splits.Split` over graph indices.
        num_classes, num_features, edge_dim: sizes (``edge_dim`` 0 without edge features).
    """

    name: str
    graphs: list
    split: Any
    num_classes: int
    num_features: int
    edge_dim: int = 0

    def subset(self, part: str) -> list:
        """The graphs of ``"train"``, ``"val"`` or ``"test"``."""
        idx = getattr(self.split, f"{part}_idx")
        return [self.graphs[int(i)] for i in idx]

    @property
    def num_nodes(self) -> int:
        """Nodes over all graphs."""
        return sum(int(g.num_nodes) for g in self.graphs)

    @property
    def labels(self) -> np.ndarray:
        return np.array([int(g.y.view(-1)[0]) for g in self.graphs])


def stratified_graph_split(labels, *, seed: int, dataset: str,
                           fractions: tuple[float, float, float] = FRACTIONS):
    """A stratified split of graph indices: each class is permuted by
    ``split_rng(seed, dataset)`` and cut by ``fractions`` (``round``, train first; with the
    protocol's 80/10/10 the test part is the rest of the class, else ``round(test * size)``).

    Returns:
        A `gnnprivacy.datasets.splits.Split` (kind ``"random"``, ``num_nodes`` = graphs).
    """
    from gnnprivacy.datasets.splits import Split, split_rng

    labels = np.asarray(labels)
    rng = split_rng(seed, dataset)
    whole = all(abs(a - b) < 1e-9 for a, b in zip(fractions, FRACTIONS))  # test: the rest
    parts: list[list[int]] = [[], [], []]
    for c in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == c))
        n_tr = min(round(fractions[0] * members.size), members.size)
        n_va = min(round(fractions[1] * members.size), members.size - n_tr)
        n_te = (members.size - n_tr - n_va if whole
                else min(round(fractions[2] * members.size), members.size - n_tr - n_va))
        parts[0] += members[:n_tr].tolist()
        parts[1] += members[n_tr:n_tr + n_va].tolist()
        parts[2] += members[n_tr + n_va:n_tr + n_va + n_te].tolist()
    return Split(kind="random", seed=seed, train_idx=parts[0], val_idx=parts[1],
                 test_idx=parts[2], train_frac=fractions[0], val_frac=fractions[1],
                 test_frac=fractions[2] if not whole else 1.0 - fractions[0] - fractions[1],
                 num_nodes=labels.size, dataset=dataset)


def load_graph_dataset(name: str, *, root: str | os.PathLike | None = None, seed: int = 0,
                       cache_dir: str | os.PathLike | None = None,
                       train_frac: float | None = None, val_frac: float | None = None,
                       test_frac: float | None = None) -> GraphSet:
    """Load TU dataset ``name`` as a `GraphSet` with the stratified split of ``seed``.

    Args:
        train_frac, val_frac, test_frac: the split's fractions of every class (default 0.8 /
            0.1 / 0.1; missing ones as `gnnprivacy.datasets.splits.resolve_fractions`, the
            training default 0.8).

    Raises:
        UnknownNameError: not a graph dataset (the message lists them).
        DatasetNotFoundError: raw files missing (named, with the root).
        CorruptDatasetError: the raw files disagree with what was read from them (a
            truncated ``_A.txt`` ...), naming the file.
    """
    import torch

    from gnnprivacy._validation import check_int
    from gnnprivacy.datasets.paths import LoadContext, resolve_cache, resolve_root
    from gnnprivacy.datasets.pyg_cache import PygSource, load_pyg_dataset
    from gnnprivacy.datasets.splits import resolve_fractions

    folder, files = _entry(name)
    seed = check_int("seed", seed, low=0)
    fractions = resolve_fractions(train_frac, val_frac, test_frac, default_train=FRACTIONS[0])
    key = name.lower()
    ctx = LoadContext(name=key, root=resolve_root(root), cache=resolve_cache(cache_dir),
                      download=False)

    def factory(r):
        from torch_geometric.datasets import TUDataset

        return TUDataset(r, folder, use_node_attr=True)

    # the cache entry that tu_merged builds (same raw files and PyG call): built once
    dataset = load_pyg_dataset(ctx, PygSource(subdir=folder, required=files[:len(_TU_FILES)],
                                              factory=factory))
    _check_raw_counts(ctx.root.path / folder, folder, files, dataset)
    graphs = []
    for g in dataset:
        x = g.x.to(torch.float32)
        g.x = torch.sign(x) * torch.log1p(x.abs())
        g.y = g.y.view(-1)[:1].to(torch.long)
        if getattr(g, "edge_attr", None) is not None:
            g.edge_attr = g.edge_attr.to(torch.float32)
        graphs.append(g)
    if not graphs:
        raise InvalidParameterError("dataset", "a graph dataset with graphs", name)
    labels = np.array([int(g.y[0]) for g in graphs])
    split = stratified_graph_split(labels, seed=seed, dataset=key, fractions=fractions)
    edge_dim = int(graphs[0].edge_attr.shape[1]) if getattr(graphs[0], "edge_attr", None) \
        is not None else 0
    return GraphSet(key, graphs, split, int(labels.max()) + 1, int(graphs[0].x.shape[1]),
                    edge_dim)


def _lines(path) -> int:
    with open(path, "rb") as fh:
        return sum(1 for line in fh if line.strip())


def _why_fewer(base, folder: str, listed: int) -> str:
    """Why PyG read fewer graphs than listed: its TU reader counts graphs up to the last one
    with an edge, so trailing graphs without edges are dropped; else a truncated or edited
    ``_A.txt``."""
    try:
        indicator = np.loadtxt(base / f"raw/{folder}_graph_indicator.txt", dtype=np.int64, ndmin=1)
        edges = np.loadtxt(base / f"raw/{folder}_A.txt", delimiter=",", dtype=np.int64, ndmin=2)
        edges = edges[edges[:, 0] != edges[:, 1]]            # PyG drops self-loops first
        last = int(indicator[edges[:, 0].max() - 1]) if edges.size else 0
    except (OSError, ValueError, IndexError):
        last = None
    if last is not None and last < listed:
        return (f"graphs {last + 1}..{listed} have no edges in {folder}_A.txt besides "
                "self-loops, and PyG's TU reader drops self-loops and then every graph after "
                f"the last one with an edge: a truncated {folder}_A.txt, or list those graphs "
                "before it, or give each an edge")
    return f"a truncated or edited {folder}_A.txt?"


def _check_raw_counts(base, folder: str, files: tuple[str, ...], dataset) -> None:
    """The graphs and nodes PyG read agree with the raw files' own counts (one line per graph
    in ``_graph_labels.txt``, one per node in ``_graph_indicator.txt``); PyG reads a truncated
    ``_A.txt`` without a word (COX2 cut to 2% of its edges gave 13 graphs). The first file
    that does not parse is named, else the two counts.

    Raises:
        CorruptDatasetError: naming the file.
    """
    from gnnprivacy.datasets.validate import find_corrupt
    from gnnprivacy.errors import CorruptDatasetError

    graphs, nodes = len(dataset), sum(int(g.num_nodes) for g in dataset)
    want_graphs = _lines(base / f"raw/{folder}_graph_labels.txt")
    want_nodes = _lines(base / f"raw/{folder}_graph_indicator.txt")
    if (graphs, nodes) == (want_graphs, want_nodes):
        return
    bad = find_corrupt(base, files)
    where = (f"{base / bad[0]} is damaged ({bad[1]})" if bad is not None else
             f"its raw files disagree: {folder}_graph_labels.txt lists {want_graphs} graphs and "
             f"{folder}_graph_indicator.txt {want_nodes} nodes, but {graphs} graphs of {nodes} "
             f"nodes were read ({_why_fewer(base, folder, want_graphs)})")
    raise CorruptDatasetError(f"graph dataset {folder} under {base}: {where}; restore the "
                              "original TU files")
