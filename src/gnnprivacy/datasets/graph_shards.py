r"""A list of graphs split into per-rank shards (sharded graph-level DP training).

`partition_graph_list` writes, in a folder (`gnnprivacy.datasets.shard_files`: staged,
installed at the end, replacing only what a partition wrote)::

    meta.json                 kind "graphs", sizes, the partition's id, the files written
    owner.npy       (G,)      int32: the part that holds each graph                (global)
    local.npy       (G,)      int64: the graph's row inside its part               (global)
    train_mask.npy  (G,)      bool: the training graphs (the privacy units)         (global)
    val_mask.npy, test_mask.npy (G,) bool: the rest of the split, when there is one
    part{k}/part.json         the partition's id and ``k``
    part{k}/graphs.npy  (g_k,)      the part's graph ids, ascending
    part{k}/node_ptr.npy (g_k+1,)   the rows of graph ``r`` are ``x[node_ptr[r]:node_ptr[r+1]]``
    part{k}/edge_ptr.npy (g_k+1,)   its edges are ``edge_index[:, edge_ptr[r]:edge_ptr[r+1]]``
    part{k}/x.npy       (n_k, F)    node features
    part{k}/edge_index.npy (2, E_k) int64, node ids local to each graph
    part{k}/y.npy       (g_k, ...)  one label row per graph
    part{k}/edge_attr.npy (E_k, D)  edge features, when the graphs have them

Graph ``g`` of the list is graph ``g`` here; a training graph's index in the list of training
graphs (ascending ids: the list ``make_private(sampler="graphs")`` gets in one process) is the
number of training graphs before it, which every rank computes from the global mask.
Parts hold contiguous blocks of graph ids with about the same number of nodes each.

Privacy: none by itself (a re-layout of the data).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gnnprivacy._validation import check_int
from gnnprivacy.datasets.shard_files import (PART_META, PartOf, StagedFolder, check_part_rows,
                                             load_array, read_meta)
from gnnprivacy.datasets.shards import check_part_meta, check_world_size, write_part_meta
from gnnprivacy.errors import InvalidParameterError

__all__ = ["GraphShard", "open_graph_shard", "partition_graph_list"]

FORMAT_VERSION = 1
_PART = ("graphs.npy", "node_ptr.npy", "edge_ptr.npy", "x.npy", "edge_index.npy", "y.npy")
META_KEYS = {"format_version": int, "num_graphs": int, "num_parts": int, "num_train": int,
             "num_features": int, "num_classes": int, "edge_dim": int, "part_sizes": list,
             "part_nodes": list, "part_edges": list, "feature_dtype": str}
_MASKS = ("val_mask", "test_mask")


def _arrays(graphs: list) -> dict:
    """The graphs as flat arrays, after the checks a writer needs (one line naming the graph)."""
    import torch

    def bad(i, what):
        return InvalidParameterError("graphs", "graphs with float features x [n, F] of one width, "
                                     "finite, an integer label row y and integer edge ids in "
                                     "[0, n) of their own graph", f"graph {i}: {what}")

    xs, eis, ys, eas = [], [], [], []
    width = None
    for i, g in enumerate(graphs):
        x, y, ei = (getattr(g, k, None) for k in ("x", "y", "edge_index"))
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or not x.is_floating_point():
            raise bad(i, f"x {getattr(x, 'dtype', type(x).__name__)} "
                         f"{tuple(getattr(x, 'shape', ()))}")
        width = int(x.shape[1]) if width is None else width
        if int(x.shape[1]) != width or not bool(torch.isfinite(x).all()):
            raise bad(i, f"x of width {int(x.shape[1])} (first graph: {width})"
                      if int(x.shape[1]) != width else "NaN or infinite features")
        if not isinstance(y, torch.Tensor) or y.dim() < 1 or y.shape[0] != 1 or \
                y.is_floating_point() or y.dtype == torch.bool or int(y.min()) < 0:
            raise bad(i, f"y {getattr(y, 'dtype', '')} {tuple(getattr(y, 'shape', ()))}")
        if ei is None:
            ei = torch.zeros(2, 0, dtype=torch.long)
        if not isinstance(ei, torch.Tensor) or ei.dim() != 2 or ei.shape[0] != 2 or \
                ei.is_floating_point() or (ei.numel() and (int(ei.min()) < 0
                                                           or int(ei.max()) >= x.shape[0])):
            raise bad(i, f"edge_index {getattr(ei, 'dtype', '')} {tuple(getattr(ei, 'shape', ()))}")
        xs.append(x.detach().cpu().numpy())
        eis.append(ei.detach().cpu().long().numpy())
        ys.append(y.detach().cpu().long().numpy()[:1])
        eas.append(getattr(g, "edge_attr", None))
    has_attr = [a is not None for a in eas]
    if any(has_attr) and not all(has_attr):
        raise InvalidParameterError("graphs", "edge_attr on every graph or on none",
                                    f"{sum(has_attr)} of {len(graphs)} graphs with edge_attr")
    out = {"x": xs, "edge_index": eis, "y": ys}
    if all(has_attr) and eas:
        out["edge_attr"] = [a.detach().cpu().numpy().reshape(a.shape[0], -1) for a in eas]
    return out


def _blocks(sizes: np.ndarray, parts: int) -> np.ndarray:
    """Part of every graph: contiguous blocks of ids with about ``total / parts`` nodes each,
    every part non-empty."""
    g = sizes.size
    cum = np.cumsum(sizes) - sizes                       # nodes before each graph
    total = max(int(sizes.sum()), 1)
    starts = [int(np.searchsorted(cum, k * total / parts)) for k in range(parts)]
    starts[0] = 0
    for k in range(1, parts):
        starts[k] = max(starts[k], starts[k - 1] + 1)
    starts[-1] = min(starts[-1], g - 1) if parts > 1 else 0
    for k in range(parts - 2, 0, -1):
        starts[k] = min(starts[k], starts[k + 1] - 1)
    owner = np.zeros(g, dtype=np.int32)
    for k, s in enumerate(starts):
        owner[s:] = k
    return owner


def _files(parts: int, masks, edge_attr: bool) -> list[str]:
    own = [*_PART, *(("edge_attr.npy",) if edge_attr else ()), PART_META]
    return ["owner.npy", "local.npy", "train_mask.npy", *(f"{m}.npy" for m in masks),
            *(f"part{k}/{f}" for k in range(parts) for f in own)]


def partition_graph_list(graphs, out, *, num_parts: int, train=None, val=None, test=None,
                         overwrite: bool = False, source: str = "graphs") -> Path:
    """Split a list of graphs into ``num_parts`` shards in the folder ``out``.

    Args:
        graphs: a sequence of PyG ``Data`` (``x``, ``edge_index``, one label row ``y``,
            ``edge_attr`` on all or none).
        out: the output folder (as `gnnprivacy.datasets.shards.partition_graph`).
        num_parts: ``P`` in ``[1, G]``.
        train, val, test: graph indices (or boolean masks) of the split; without ``train``
            every graph is a training graph and there is no test set.
        overwrite: replace the shards already in ``out`` (only the files a partition wrote).
        source: the name recorded in ``meta.json``.

    Raises:
        InvalidParameterError: not a list of valid graphs (the message names the graph), a
            split that is not disjoint, or ``out`` refused (`StagedFolder`).
        WriteFailedError: a file could not be written; nothing is left half-written.
    """
    graphs = list(graphs)
    g = len(graphs)
    if g < 1:
        raise InvalidParameterError("graphs", "at least one graph", "an empty list")
    parts = check_int("num_parts", num_parts, low=1, high=g)
    flat = _arrays(graphs)
    masks = {}
    for name, given in (("train_mask", train), ("val_mask", val), ("test_mask", test)):
        if given is None:
            continue
        m = np.asarray(given.cpu() if hasattr(given, "cpu") else given)
        if m.dtype != bool:
            idx = m.astype(np.int64).reshape(-1)
            if idx.size and (idx.min() < 0 or idx.max() >= g):
                raise InvalidParameterError(name, f"graph indices in [0, {g})", "out of range")
            m = np.zeros(g, dtype=bool)
            m[idx] = True
        if m.shape != (g,):
            raise InvalidParameterError(name, f"a mask of {g} graphs", f"shape {m.shape}")
        masks[name] = m
    train_mask = masks.pop("train_mask", np.ones(g, dtype=bool))
    if sum(int(m.sum()) for m in (train_mask, *masks.values())) != int(
            (train_mask | np.logical_or.reduce([*masks.values(), np.zeros(g, bool)])).sum()):
        raise InvalidParameterError("split", "disjoint training, validation and test graphs",
                                    "overlapping sets")
    if int(train_mask.sum()) < 2:
        raise InvalidParameterError("train", "at least 2 training graphs",
                                    int(train_mask.sum()))
    sizes = np.array([x.shape[0] for x in flat["x"]], dtype=np.int64)
    esizes = np.array([e.shape[1] for e in flat["edge_index"]], dtype=np.int64)
    owner = _blocks(sizes, parts)
    counts = np.bincount(owner, minlength=parts)
    starts = np.concatenate([[0], np.cumsum(counts)])
    local = np.arange(g, dtype=np.int64) - np.repeat(starts[:-1], counts)
    names = sorted(masks)
    with StagedFolder(out, overwrite=overwrite,
                      planned=_files(parts, names, "edge_attr" in flat)) as stage:
        stage.save("owner.npy", owner)
        stage.save("local.npy", local)
        stage.save("train_mask.npy", train_mask)
        for name in names:
            stage.save(f"{name}.npy", masks[name])
        pid = uuid.uuid4().hex
        part_nodes, part_edges = [], []
        for k in range(parts):
            ids = np.arange(starts[k], starts[k + 1], dtype=np.int64)
            d = f"part{k}"
            stage.save(f"{d}/graphs.npy", ids)
            stage.save(f"{d}/node_ptr.npy", np.concatenate([[0], np.cumsum(sizes[ids])]))
            stage.save(f"{d}/edge_ptr.npy", np.concatenate([[0], np.cumsum(esizes[ids])]))
            for key, axis in (("x", 0), ("edge_index", 1), ("y", 0), ("edge_attr", 0)):
                if key in flat:
                    chunk = [flat[key][i] for i in ids]
                    stage.save(f"{d}/{key}.npy", np.concatenate(chunk, axis=axis))
            part_nodes.append(int(sizes[ids].sum()))
            part_edges.append(int(esizes[ids].sum()))
        ys = np.concatenate(flat["y"])
        meta = {"format_version": FORMAT_VERSION, "kind": "graphs", "partition_id": pid,
                "num_graphs": g, "num_parts": parts, "num_train": int(train_mask.sum()),
                "num_features": int(flat["x"][0].shape[1]),
                "num_classes": int(ys.max()) + 1,
                "edge_dim": int(flat["edge_attr"][0].shape[1]) if "edge_attr" in flat else 0,
                "feature_dtype": str(flat["x"][0].dtype), "y_shape": list(ys.shape[1:]),
                "part_sizes": [int(c) for c in counts], "part_nodes": part_nodes,
                "part_edges": part_edges, "masks": names,
                **{f"num_{m[:-5]}": int(masks[m].sum()) for m in names}, "source": source}
        write_part_meta(stage, meta)
        return stage.install(meta)


@dataclass(frozen=True)
class GraphShard(PartOf):
    """One rank's part of a partitioned graph list (arrays are read-only memory maps).

    Attributes:
        meta, part: ``meta.json`` and ``k``.
        owner, local, train_mask: the global maps (``(G,)``); ``masks``: val/test masks.
        graphs, node_ptr, edge_ptr, x, edge_index, y, edge_attr: part ``k`` (module docstring).
    """

    meta: dict
    part: int
    owner: np.ndarray
    local: np.ndarray
    train_mask: np.ndarray
    graphs: np.ndarray
    node_ptr: np.ndarray
    edge_ptr: np.ndarray
    x: np.ndarray
    edge_index: np.ndarray
    y: np.ndarray
    edge_attr: np.ndarray | None = None
    masks: dict = field(default_factory=dict)

    @property
    def num_graphs(self) -> int:
        return int(self.meta["num_graphs"])

    @property
    def num_train(self) -> int:
        """Training graphs over all parts."""
        return int(self.meta["num_train"])

    def graph_list(self, rows) -> list:
        """The part's graphs at ``rows`` as PyG ``Data`` (for evaluation)."""
        import torch
        from torch_geometric.data import Data

        out = []
        for r in np.asarray(rows, dtype=np.int64):
            a, b = int(self.node_ptr[r]), int(self.node_ptr[r + 1])
            c, d = int(self.edge_ptr[r]), int(self.edge_ptr[r + 1])
            g = Data(x=torch.from_numpy(np.array(self.x[a:b])),
                     edge_index=torch.from_numpy(np.array(self.edge_index[:, c:d])),
                     y=torch.from_numpy(np.array(self.y[r:r + 1])))
            if self.edge_attr is not None:
                g.edge_attr = torch.from_numpy(np.array(self.edge_attr[c:d]))
            out.append(g)
        return out

    def train_index(self) -> np.ndarray:
        """Each of the part's graphs' index in the list of training graphs (ascending ids;
        ``-1`` for the others)."""
        mask = np.asarray(self.train_mask, dtype=bool)
        before = np.cumsum(mask) - mask
        ids = np.asarray(self.graphs, dtype=np.int64)
        return np.where(mask[ids], before[ids], -1)


def open_graph_shard(path, part: int, *, world_size: int | None = None) -> GraphShard:
    """Memory-map part ``part`` of the graph shards in ``path``, checked against ``meta.json``
    (as `gnnprivacy.datasets.shards.open_shard`).

    Raises:
        InvalidParameterError: no complete graph shards (the message names the file), another
            number of parts than ``world_size``, or ``part`` not one of them.
    """
    folder = Path(path)
    meta = read_meta(folder, kind="graphs", keys=META_KEYS)
    where = folder / "meta.json"
    p = meta["num_parts"]
    if meta["format_version"] != FORMAT_VERSION or not (
            1 <= p == len(meta["part_sizes"]) == len(meta["part_nodes"])
            == len(meta["part_edges"])) or sum(meta["part_sizes"]) != meta["num_graphs"]:
        raise InvalidParameterError("path", f"a graph-shard meta.json of format_version "
                                    f"{FORMAT_VERSION} whose part sizes add up", str(where))
    masks_listed = meta.get("masks", [])
    if not isinstance(masks_listed, list) or not set(masks_listed) <= set(_MASKS):
        raise InvalidParameterError("path", "a meta.json whose masks are val_mask/test_mask",
                                    str(where))
    check_world_size(meta, world_size, folder)
    part = check_int("part", part, low=0, high=p - 1)
    check_part_meta(folder, meta, part)
    gk, nk, ek, n = (meta["part_sizes"][part], meta["part_nodes"][part],
                     meta["part_edges"][part], meta["num_graphs"])
    def load(rel, kinds, shape):
        return load_array(folder, rel, kinds=kinds, shape=shape, meta=meta)

    arrays = {"owner": load("owner.npy", "iu", (n,)), "local": load("local.npy", "iu", (n,)),
              "train_mask": load("train_mask.npy", "b", (n,)),
              "graphs": load(f"part{part}/graphs.npy", "iu", (gk,)),
              "node_ptr": load(f"part{part}/node_ptr.npy", "iu", (gk + 1,)),
              "edge_ptr": load(f"part{part}/edge_ptr.npy", "iu", (gk + 1,)),
              "x": load(f"part{part}/x.npy", "f", (nk, meta["num_features"])),
              "edge_index": load(f"part{part}/edge_index.npy", "iu", (2, ek)),
              "y": load(f"part{part}/y.npy", "iu", (gk, None) if meta.get("y_shape") else (gk,))}
    if meta["edge_dim"]:
        arrays["edge_attr"] = load(f"part{part}/edge_attr.npy", "f", (ek, meta["edge_dim"]))
    masks = {m: load(f"{m}.npy", "b", (n,)) for m in masks_listed}
    _check_graph_part(folder, meta, part, arrays)
    return GraphShard(meta=meta, part=part, masks=masks, **arrays)


def _check_graph_part(folder: Path, meta: dict, k: int, a: dict) -> None:
    def bad(rel, what):
        return InvalidParameterError("path", "graph shards whose files agree with each other",
                                     f"{folder}/{rel}: {what}")

    check_part_rows(folder, meta, k, a, ids="graphs", unit="graph", total=meta["num_graphs"])
    for name, total in (("node_ptr", a["x"].shape[0]), ("edge_ptr", a["edge_index"].shape[1])):
        ptr = np.asarray(a[name], dtype=np.int64)
        if ptr[0] != 0 or ptr[-1] != total or np.any(np.diff(ptr) < 0):
            raise bad(f"part{k}/{name}.npy", f"not offsets over {total} rows")
    ei = np.asarray(a["edge_index"], dtype=np.int64)
    if ei.size:
        nptr, eptr = np.asarray(a["node_ptr"]), np.asarray(a["edge_ptr"])
        size = np.diff(nptr)[np.repeat(np.arange(nptr.size - 1), np.diff(eptr))]
        if ei.min() < 0 or np.any(ei >= size):
            raise bad(f"part{k}/edge_index.npy", "node ids outside their own graph")
    if not bool(np.isfinite(np.asarray(a["x"])).all()):
        raise bad(f"part{k}/x.npy", "NaN or infinite features")
