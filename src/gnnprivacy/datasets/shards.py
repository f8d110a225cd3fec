r"""A graph split into per-rank shards that the ranks memory-map (sharded node-level DP training).

`partition_graph` reads a graph in the streamed ``csbm-large`` format (a folder written by
`gnnprivacy.datasets.stream.generate_large_graph`, or any PyG ``Data``), assigns every node
to one of ``num_parts`` parts and writes, in a folder::

    meta.json             sizes, method, seed, training fraction, format version, the
                          partition's id and the list of the files it wrote
    owner.npy       (N,)  int32: the part that owns each node                 (global map)
    local.npy       (N,)  int64: the node's row inside its owner's part         (global map)
    out_degree.npy  (N,)  int64: out-degree in the whole graph, self-loops removed (public)
    train_mask.npy  (N,)  bool:  the training (central candidate) nodes
    val_mask.npy, test_mask.npy (N,) bool: the source's split, when it has one
    part{k}/part.json     the partition's id and ``k`` (a part of another partition is refused)
    part{k}/nodes.npy   (n_k,)    the part's global node ids, ascending
    part{k}/x.npy       (n_k, F)  their features (the source's dtype)
    part{k}/y.npy       (n_k,)    their labels
    part{k}/indptr.npy  (n_k+1,)  CSR over the part's nodes: the in-edges of row r are
    part{k}/src.npy     (E_k,)    src[indptr[r]:indptr[r+1]], GLOBAL source ids, ascending

Every node is in exactly one part, and every edge ``j -> i`` of the cleaned graph (self-loops
dropped, duplicates merged) is in ``src`` of ``i``'s part exactly once. A rank holds its own
part plus the four global maps (21 bytes per node, memory-mapped: only the pages of the nodes
a step touches become resident); the features of other parts' nodes reach it through
``torch.distributed`` (`gnnprivacy.training.sharded`).

Partitioners:

* ``"metis"``: METIS k-way through ``pymetis`` on the symmetrised graph (fewest cut edges,
  hence fewest remote neighbours per step). It holds the whole CSR in memory
  (about 16 bytes per directed edge plus METIS's own copy);
* ``"contiguous"``: node ids ``[k N / P, (k + 1) N / P)`` go to part ``k``, O(1) memory and
  time, for graphs METIS cannot hold. Every cut edge costs one remote row when sampled;
  on graphs whose ids carry no locality (``csbm-large``) about ``(P - 1) / P`` of the edges
  are cut, against fewer with METIS;
* ``"auto"``: METIS up to ``METIS_MAX_EDGES`` directed edges, else contiguous.

Training nodes: the source's ``train_mask`` when it has one, else each node independently with
probability ``train_fraction`` (numpy's ``SeedSequence(seed)`` per chunk of nodes, so the
split does not depend on the partition).

The source is checked as a graph a method trains on (`gnnprivacy.datasets.validate_data`:
finite float features, integer labels, edge ids below the node count ...); the folder is
written as `gnnprivacy.datasets.shard_files` describes (staged, installed at the end,
replacing only the files a partition wrote), and `open_shard` checks the part it maps against
``meta.json`` (one error naming the file when a file is missing, damaged or from another
partition).

Privacy: none by itself (a re-layout of the data; the structure-only partition is computed
from the edges, which HeterPoisson's threat model already treats as the fixed graph).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gnnprivacy._validation import check_choice, check_int, check_probability
from gnnprivacy.datasets.shard_files import (PART_META, PartOf, StagedFolder, check_digest,
                                             check_part_rows, load_array, meta_digest,
                                             read_json, read_meta)
from gnnprivacy.errors import InvalidParameterError

FORMAT_VERSION = 1
METHODS = ("auto", "metis", "contiguous")
#: ``"auto"`` uses METIS up to this many directed edges (about 2 GB of CSR for METIS)
METIS_MAX_EDGES = 60_000_000
_CHUNK = 1 << 18
_GLOBAL = ("owner.npy", "local.npy", "out_degree.npy", "train_mask.npy")
_MASKS = ("val_mask", "test_mask")
_PART = ("nodes.npy", "x.npy", "y.npy", "indptr.npy", "src.npy")
#: what every node ``meta.json`` holds, with its type
META_KEYS = {"format_version": int, "num_nodes": int, "num_edges": int, "num_parts": int,
             "num_train": int, "num_features": int, "num_classes": int, "max_out_degree": int,
             "part_sizes": list, "part_edges": list, "method": str, "feature_dtype": str}

__all__ = ["METHODS", "METIS_MAX_EDGES", "Shard", "check_world_size", "open_shard",
           "partition_graph"]


@dataclass(frozen=True)
class _Source:
    """A graph as CSR over targets: ``indices[indptr[i]:indptr[i+1]]`` are ``i``'s in-neighbours
    (ascending, no self-loop, no duplicate); arrays may be memory maps."""

    num_nodes: int
    indptr: np.ndarray
    indices: np.ndarray
    x: np.ndarray
    y: np.ndarray
    train_mask: np.ndarray | None
    masks: dict
    symmetric: bool | None = None


def _checked_data(data, train_fraction: float, seed: int):
    """The split of ``data`` (its masks, or a drawn training set) after `validate_data` of the
    graph with that split: the checks every node dataset gets (finite float ``x``, one integer
    label per node, edge ids in ``[0, n)``, boolean masks, two training classes)."""
    import torch
    from torch_geometric.data import Data

    from gnnprivacy.datasets.validate import check_storage, validate_data

    check_storage(data)
    x = getattr(data, "x", None)
    n = int(x.shape[0]) if isinstance(x, torch.Tensor) and x.dim() >= 1 else 0
    given = {k: getattr(data, k, None) for k in ("train_mask", "val_mask", "test_mask")}
    train = given["train_mask"]
    if train is None and n:
        train = torch.from_numpy(_drawn_train_mask(n, train_fraction, seed))
    masks = {"train_mask": train, "val_mask": given["val_mask"],
             "test_mask": given["test_mask"] if given["test_mask"] is not None
             else None if train is None or not isinstance(train, torch.Tensor)
             else ~train.bool() & (~given["val_mask"].bool() if isinstance(
                 given["val_mask"], torch.Tensor) else True)}
    probe = Data(x=x, y=getattr(data, "y", None), edge_index=getattr(data, "edge_index", None),
                 **{k: v for k, v in masks.items() if v is not None})
    validate_data(probe)
    return given["train_mask"] is not None, {k: v for k, v in given.items()
                                              if k != "train_mask" and v is not None}, train


def _source_from_data(data, train_fraction: float, seed: int) -> _Source:
    has_split, masks, train = _checked_data(data, train_fraction, seed)
    n = int(data.x.shape[0])
    ei = data.edge_index.detach().cpu().long().numpy()
    ei = ei[:, ei[0] != ei[1]]
    key = np.unique(ei[1] * n + ei[0])            # sorted by (target, source), merged
    dst, src = key // n, key % n
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=indptr[1:])
    return _Source(n, indptr, src, data.x.detach().cpu().numpy(),
                   data.y.detach().cpu().view(-1).numpy(),
                   train.detach().cpu().numpy().astype(bool) if has_split else None,
                   {k: m.detach().cpu().numpy().astype(bool) for k, m in masks.items()})


def _source_from_folder(path) -> _Source:
    from gnnprivacy.datasets.stream import open_large_graph

    g = open_large_graph(path)   # CSR sorted by (target, source), deduplicated, no self-loop
    return _Source(g.num_nodes, g.indptr, g.edge_index[0], g.x, g.y, None, {},
                   symmetric=True)   # generate_large_graph stores both directions


def _is_symmetric(src: _Source) -> bool:
    """Whether every edge ``j -> i`` comes with ``i -> j`` (what DP-GNN's bounding reads)."""
    if src.symmetric is not None:
        return src.symmetric
    n = src.num_nodes
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(np.asarray(src.indptr)))
    forward = dst * n + np.asarray(src.indices, dtype=np.int64)   # sorted (CSR order)
    return bool(np.array_equal(forward, np.sort(np.asarray(src.indices, np.int64) * n + dst)))


def _chunks(n: int):
    for c, lo in enumerate(range(0, n, _CHUNK)):
        yield c, lo, min(lo + _CHUNK, n)


def _drawn_train_mask(n: int, fraction: float, seed: int) -> np.ndarray:
    mask = np.empty(n, dtype=bool)
    for c, lo, hi in _chunks(n):
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(7, c)))
        mask[lo:hi] = rng.random(hi - lo) < fraction
    return mask


def _train_mask(src: _Source, fraction: float, seed: int) -> np.ndarray:
    if src.train_mask is not None:
        return np.asarray(src.train_mask, dtype=bool)
    return _drawn_train_mask(src.num_nodes, fraction, seed)


def _out_degree(src: _Source) -> np.ndarray:
    deg = np.zeros(src.num_nodes, dtype=np.int64)
    e = int(src.indptr[-1])
    for lo in range(0, e, 1 << 22):
        deg += np.bincount(np.asarray(src.indices[lo:lo + (1 << 22)]), minlength=src.num_nodes)
    return deg


def _metis(src: _Source, parts: int, seed: int) -> np.ndarray:
    import pymetis

    n = src.num_nodes
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(np.asarray(src.indptr)))
    s = np.asarray(src.indices, dtype=np.int64)
    key = np.unique(np.concatenate([dst * n + s, s * n + dst]))   # METIS needs both directions
    del dst, s
    row, col = key // n, key % n
    del key
    xadj = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(row, minlength=n), out=xadj[1:])
    del row
    if col.size == 0:
        raise InvalidParameterError("method", "'contiguous' for a graph without edges", "metis")
    graph = pymetis.CSRAdjacency(adj_starts=xadj, adjacent=col)
    result = pymetis.part_graph(parts, graph, recursive=False,
                                options=pymetis.Options(seed=seed))
    return np.asarray(result.vertex_part, dtype=np.int32)


def _contiguous(n: int, parts: int) -> np.ndarray:
    bounds = (np.arange(parts + 1, dtype=np.int64) * n) // parts
    return np.repeat(np.arange(parts, dtype=np.int32), np.diff(bounds))


def _write_part(stage: StagedFolder, k: int, src: _Source, nodes: np.ndarray) -> int:
    part = f"part{k}"
    stage.save(f"{part}/nodes.npy", nodes)
    starts = np.asarray(src.indptr[nodes], dtype=np.int64)
    counts = np.asarray(src.indptr[nodes + 1], dtype=np.int64) - starts
    indptr = np.zeros(nodes.size + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    stage.save(f"{part}/indptr.npy", indptr)
    y = np.empty(nodes.size, dtype=np.int64)
    with stage.writer(f"{part}/x.npy", src.x.dtype, (nodes.size,) + tuple(src.x.shape[1:])) as x, \
            stage.writer(f"{part}/src.npy", np.int64, (int(indptr[-1]),)) as out:
        for lo in range(0, nodes.size, _CHUNK):
            hi = min(lo + _CHUNK, nodes.size)
            ids = nodes[lo:hi]
            x.write(src.x[ids])
            y[lo:hi] = src.y[ids]
            c = counts[lo:hi]
            pos = np.repeat(starts[lo:hi] - (np.cumsum(c) - c), c) + np.arange(int(c.sum()))
            out.write(src.indices[pos])
    stage.save(f"{part}/y.npy", y)
    return int(indptr[-1])


def _files(parts: int, masks=()) -> list[str]:
    """The files of a node partition into ``parts`` parts (with the split ``masks``)."""
    return [*_GLOBAL, *(f"{m}.npy" for m in masks),
            *(f"part{k}/{f}" for k in range(parts) for f in (*_PART, PART_META))]


def _legacy_files(meta: dict) -> list[str]:
    """The files of a partition written before ``meta.json`` listed them."""
    return ["meta.json", *_files(int(meta["num_parts"]))[:-1]] if isinstance(
        meta.get("num_parts"), int) else []


def partition_graph(graph, out, *, num_parts: int, method: str = "auto", seed: int = 0,
                    train_fraction: float | None = None, overwrite: bool = False) -> Path:
    """Split ``graph`` into ``num_parts`` shards in the folder ``out`` (layout: module docstring).

    Args:
        graph: a folder in the ``csbm-large`` format (`generate_large_graph`) or a PyG
            ``Data`` (checked like every node dataset; edges are cleaned: self-loops dropped,
            duplicates merged; its ``val_mask``/``test_mask`` are kept for scoring).
        out: the output folder (created; must not hold shards unless ``overwrite``, and
            nothing else in it is touched).
        num_parts: ``P`` in ``[1, N]``: one part per rank.
        method: ``"auto"``, ``"metis"`` or ``"contiguous"`` (see the module docstring).
        seed: METIS's seed, and the seed of the training split when ``graph`` has none.
        train_fraction: probability that a node is a training node when ``graph`` has no
            ``train_mask`` (default 0.5; refused for a graph with one).
        overwrite: replace the shards already in ``out`` (only the files a partition wrote).

    Returns:
        The folder.

    Raises:
        InvalidParameterError: a parameter out of range, a graph that is not a valid ``Data``
            or a ``csbm-large`` folder, or ``out`` already holding shards (or files of the
            names a partition writes that no partition wrote).
        WriteFailedError: a file could not be written (a full disk ...): nothing is left
            half-written and ``out`` is as it was.
    """
    method = check_choice("method", method, METHODS)
    seed = check_int("seed", seed, low=0, high=2**31 - 1)
    given_fraction = train_fraction
    train_fraction = check_probability("train_fraction",
                                       0.5 if train_fraction is None else train_fraction)
    if given_fraction is not None and getattr(graph, "train_mask", None) is not None:
        raise InvalidParameterError("train_fraction", "unset for a graph with a train_mask "
                                    "(its training nodes are the mask's)", given_fraction)
    if isinstance(graph, (str, Path)):
        src = _source_from_folder(graph)
        name = str(graph)
    elif hasattr(graph, "edge_index") and hasattr(graph, "x"):
        src = _source_from_data(graph, train_fraction, seed)
        name = type(graph).__name__
    else:
        raise InvalidParameterError("graph", "a csbm-large folder or a PyG Data",
                                    type(graph).__name__)
    n = src.num_nodes
    parts = check_int("num_parts", num_parts, low=1, high=n)
    masks = sorted(src.masks)
    with StagedFolder(out, overwrite=overwrite, planned=_files(parts, masks),
                      legacy_files=_legacy_files) as stage:
        num_edges = int(src.indptr[-1])
        if method == "auto":
            method = "metis" if num_edges <= METIS_MAX_EDGES else "contiguous"
        owner = (np.zeros(n, dtype=np.int32) if parts == 1 else
                 _metis(src, parts, seed) if method == "metis" else _contiguous(n, parts))
        train = _train_mask(src, train_fraction, seed)
        order = np.argsort(owner, kind="stable")          # ascending ids inside every part
        sizes = np.bincount(owner, minlength=parts)
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        local = np.empty(n, dtype=np.int64)
        local[order] = np.arange(n, dtype=np.int64) - np.repeat(bounds[:-1], sizes)
        stage.save("owner.npy", owner)
        stage.save("local.npy", local)
        stage.save("train_mask.npy", train)
        for mask in masks:
            stage.save(f"{mask}.npy", src.masks[mask])
        deg = _out_degree(src)
        stage.save("out_degree.npy", deg)
        partition_id = uuid.uuid4().hex
        part_edges = [_write_part(stage, k, src, order[bounds[k]:bounds[k + 1]])
                      for k in range(parts)]
        meta = {"format_version": FORMAT_VERSION, "kind": "nodes", "partition_id": partition_id,
                "num_nodes": n, "num_edges": num_edges, "num_parts": parts, "method": method,
                "seed": seed,
                "train_fraction": None if src.train_mask is not None else train_fraction,
                "num_train": int(train.sum()), "num_features": int(src.x.shape[1]),
                "num_classes": int(np.asarray(src.y).max()) + 1 if n else 0,
                "feature_dtype": str(src.x.dtype), "max_out_degree": int(deg.max()) if n else 0,
                "part_sizes": [int(s) for s in sizes], "part_edges": part_edges,
                "cut_edges": num_edges - _internal_edges(stage.stage, parts, owner),
                "masks": masks, **{f"num_{m[:-5]}": int(src.masks[m].sum()) for m in masks},
                "symmetric": _is_symmetric(src),
                "source": name}
        write_part_meta(stage, meta)
        return stage.install(meta)


def _internal_edges(folder: Path, parts: int, owner: np.ndarray) -> int:
    total = 0
    for k in range(parts):
        src = np.load(folder / f"part{k}" / "src.npy", mmap_mode="r")
        for lo in range(0, src.size, 1 << 22):
            total += int((owner[np.asarray(src[lo:lo + (1 << 22)])] == k).sum())
    return total


@dataclass(frozen=True)
class Shard(PartOf):
    """One rank's view of a partitioned graph (arrays are read-only memory maps).

    Attributes:
        meta: ``meta.json``; part: this shard's index ``k``.
        owner, local, out_degree, train_mask: the global maps (``(N,)`` each).
        nodes, x, y, indptr, src: part ``k``'s arrays (module docstring).
        masks: the source's ``val_mask``/``test_mask`` global maps (those it had).
    """

    meta: dict
    part: int
    owner: np.ndarray
    local: np.ndarray
    out_degree: np.ndarray
    train_mask: np.ndarray
    nodes: np.ndarray
    x: np.ndarray
    y: np.ndarray
    indptr: np.ndarray
    src: np.ndarray
    masks: dict = None

    @property
    def num_nodes(self) -> int:
        return int(self.meta["num_nodes"])


def check_world_size(meta: dict, world_size: int | None, folder) -> None:
    """Refuse a partition whose number of parts is not ``world_size`` (one part per rank)."""
    if world_size is not None and int(meta["num_parts"]) != int(world_size):
        raise InvalidParameterError(
            "shards", f"a partition into {world_size} part(s), one per rank (this run has "
            f"{world_size} rank(s); partition again with --parts {world_size}, or start "
            f"{meta['num_parts']} ranks)", f"{meta['num_parts']} part(s) in {folder}")


def write_part_meta(stage: StagedFolder, meta: dict) -> None:
    """Every ``part{k}/part.json``: the partition's id, ``k`` and the digest of ``meta``."""
    for k in range(int(meta["num_parts"])):
        stage.save_json(f"part{k}/{PART_META}", {"partition_id": meta["partition_id"],
                                                 "part": k, "meta_digest": meta_digest(meta)})


def check_part_meta(folder: Path, meta: dict, part: int) -> None:
    """``part{k}/part.json`` names the partition of ``meta.json`` and ``k``, and the digest of
    this ``meta.json`` (a part copied from another partition, or an edited ``meta.json``, is
    refused)."""
    pid = meta.get("partition_id")
    rel = f"part{part}/{PART_META}"
    if pid is None:             # written before parts carried the partition's id ...
        if (folder / rel).exists() or "digests" in meta:     # ... not by this version
            raise InvalidParameterError("path", "a meta.json as the partition wrote it",
                                        f"{folder}/meta.json: its 'partition_id' is missing")
        return
    info = read_json_in(folder, rel)
    if not isinstance(info, dict) or info.get("partition_id") != pid or info.get("part") != part:
        got = info.get("partition_id") if isinstance(info, dict) else info
        raise InvalidParameterError(
            "path", f"shards of one partition (part{part} comes from another one: its "
            f"{PART_META} names partition {str(got)[:12]}, meta.json {pid[:12]})", str(folder))
    check_digest(folder, meta, rel)
    if "meta_digest" in info and info["meta_digest"] != meta_digest(meta):
        raise InvalidParameterError("path", "a meta.json as the partition wrote it",
                                    f"{folder}/meta.json: edited since (its content differs "
                                    f"from the digest in {rel})")


def read_json_in(folder: Path, rel: str):
    path = folder / rel
    if not path.is_file():
        raise InvalidParameterError("path", "complete shards", f"{folder}: missing {rel}")
    return read_json(path)


def read_node_meta(folder) -> dict:
    """The checked ``meta.json`` of a node partition (`open_shard`'s first step)."""
    folder = Path(folder)
    meta = read_meta(folder, kind="nodes", keys=META_KEYS)
    where = f"{folder / 'meta.json'}"
    if meta["format_version"] != FORMAT_VERSION:
        raise InvalidParameterError("path", f"shards of format_version {FORMAT_VERSION}",
                                    f"{where}: format_version {meta['format_version']}")
    p = meta["num_parts"]
    if not (1 <= p == len(meta["part_sizes"]) == len(meta["part_edges"])) or \
            sum(meta["part_sizes"]) != meta["num_nodes"] or \
            sum(meta["part_edges"]) != meta["num_edges"] or meta["num_train"] > meta["num_nodes"]:
        raise InvalidParameterError("path", "a meta.json whose part sizes add up (num_parts "
                                    "parts of num_nodes nodes and num_edges edges)", where)
    try:
        np.dtype(meta["feature_dtype"])
    except TypeError:
        raise InvalidParameterError("path", "a meta.json whose feature_dtype is a dtype",
                                    f"{where}: {meta['feature_dtype'][:40]}") from None
    masks = meta.get("masks", [])
    if not isinstance(masks, list) or not set(masks) <= set(_MASKS):
        raise InvalidParameterError("path", f"a meta.json whose masks are among {list(_MASKS)}",
                                    f"{where}: masks = {str(masks)[:60]}")
    return meta


def open_shard(path, part: int, *, world_size: int | None = None) -> Shard:
    """Memory-map part ``part`` of the shards in ``path`` with the global maps, after
    checking them against ``meta.json``: every file present, of its dtype and shape, the
    part of this partition (``part.json``), the part's rows where the global maps say,
    its edges' CSR consistent with source ids below the node count, labels below the class
    count, and as many training nodes as ``meta.json`` says. Costs one pass over the part's
    rows and edges (not its features).

    Args:
        path: the shard folder.
        part: the part to open.
        world_size: when given, a partition into another number of parts is refused first.

    Raises:
        InvalidParameterError: ``path`` holds no complete shards of this format, a file is
            missing, damaged or from another partition (the message names it), ``part`` is
            not one of its parts, or the parts are not ``world_size``.
    """
    folder = Path(path)
    meta = read_node_meta(folder)
    check_world_size(meta, world_size, folder)
    part = check_int("part", part, low=0, high=int(meta["num_parts"]) - 1)
    check_part_meta(folder, meta, part)
    n, n_k, e_k = meta["num_nodes"], meta["part_sizes"][part], meta["part_edges"][part]
    def load(rel, kinds, shape):
        return load_array(folder, rel, kinds=kinds, shape=shape, meta=meta)

    arrays = {"owner": load("owner.npy", "iu", (n,)), "local": load("local.npy", "iu", (n,)),
              "out_degree": load("out_degree.npy", "iu", (n,)),
              "train_mask": load("train_mask.npy", "b", (n,)),
              "nodes": load(f"part{part}/nodes.npy", "iu", (n_k,)),
              "x": load(f"part{part}/x.npy", "f", (n_k, meta["num_features"])),
              "y": load(f"part{part}/y.npy", "iu", (n_k,)),
              "indptr": load(f"part{part}/indptr.npy", "iu", (n_k + 1,)),
              "src": load(f"part{part}/src.npy", "iu", (e_k,))}
    masks = {m: load(f"{m}.npy", "b", (n,)) for m in meta.get("masks", [])}
    if arrays["x"].dtype != np.dtype(meta["feature_dtype"]):
        raise InvalidParameterError("path", "shards whose arrays match meta.json",
                                    f"{folder}/part{part}/x.npy: {arrays['x'].dtype}, "
                                    f"meta.json says {meta['feature_dtype']}")
    _check_part(folder, meta, part, arrays)
    return Shard(meta=meta, part=part, masks=masks, **arrays)


def _check_part(folder: Path, meta: dict, part: int, a: dict) -> None:
    """The cheap consistency checks of `open_shard` (one pass over rows and edges)."""
    n, k = meta["num_nodes"], part
    check_part_rows(folder, meta, part, a, ids="nodes", unit="node", total=n)
    indptr = np.asarray(a["indptr"], dtype=np.int64)
    where = f"{folder}/part{k}"
    if indptr[0] != 0 or indptr[-1] != a["src"].size or np.any(np.diff(indptr) < 0):
        raise InvalidParameterError("path", "shards whose files agree with each other",
                                    f"{where}/indptr.npy: not a CSR over {a['src'].size} edges")
    for lo in range(0, a["src"].size, 1 << 22):
        chunk = np.asarray(a["src"][lo:lo + (1 << 22)])
        if chunk.size and (chunk.min() < 0 or chunk.max() >= n):
            raise InvalidParameterError("path", "shards whose files agree with each other",
                                        f"{where}/src.npy: source ids outside [0, {n})")
