r"""A graph split into per-rank shards that the ranks memory-map (sharded node-level DP training).

`partition_graph` reads a graph in the streamed ``csbm-large`` format (a folder written by
`gnnprivacy.datasets.stream.generate_large_graph`, or any PyG ``Data``), assigns every node
to one of ``num_parts`` parts and writes, in a folder::

    meta.json             sizes, method, seed, training fraction, format version
    owner.npy       (N,)  int32: the part that owns each node                 (global map)
    local.npy       (N,)  int64: the node's row inside its owner's part         (global map)
    out_degree.npy  (N,)  int64: out-degree in the whole graph, self-loops removed (public)
    train_mask.npy  (N,)  bool:  the training (central candidate) nodes
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

Privacy: none by itself (a re-layout of the data; the structure-only partition is computed
from the edges, which HeterPoisson's threat model already treats as the fixed graph).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gnnprivacy._validation import check_choice, check_int, check_probability
from gnnprivacy.errors import InvalidParameterError

FORMAT_VERSION = 1
METHODS = ("auto", "metis", "contiguous")
#: ``"auto"`` uses METIS up to this many directed edges (about 2 GB of CSR for METIS)
METIS_MAX_EDGES = 60_000_000
_CHUNK = 1 << 18
_GLOBAL = ("owner.npy", "local.npy", "out_degree.npy", "train_mask.npy")
_PART = ("nodes.npy", "x.npy", "y.npy", "indptr.npy", "src.npy")

__all__ = ["METHODS", "METIS_MAX_EDGES", "Shard", "open_shard", "partition_graph"]


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


def _source_from_data(data) -> _Source:
    n = int(data.num_nodes)
    ei = data.edge_index.detach().cpu().long().numpy()
    ei = ei[:, ei[0] != ei[1]]
    key = np.unique(ei[1] * n + ei[0])            # sorted by (target, source), merged
    dst, src = key // n, key % n
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=indptr[1:])
    mask = getattr(data, "train_mask", None)
    return _Source(n, indptr, src, data.x.detach().cpu().numpy(),
                   data.y.detach().cpu().numpy(),
                   None if mask is None else mask.detach().cpu().numpy().astype(bool))


def _source_from_folder(path) -> _Source:
    from gnnprivacy.datasets.stream import open_large_graph

    g = open_large_graph(path)   # CSR sorted by (target, source), deduplicated, no self-loop
    return _Source(g.num_nodes, g.indptr, g.edge_index[0], g.x, g.y, None)


def _chunks(n: int):
    for c, lo in enumerate(range(0, n, _CHUNK)):
        yield c, lo, min(lo + _CHUNK, n)


def _train_mask(src: _Source, fraction: float, seed: int) -> np.ndarray:
    if src.train_mask is not None:
        return np.asarray(src.train_mask, dtype=bool)
    mask = np.empty(src.num_nodes, dtype=bool)
    for c, lo, hi in _chunks(src.num_nodes):
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(7, c)))
        mask[lo:hi] = rng.random(hi - lo) < fraction
    return mask


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


def _write_part(folder: Path, src: _Source, nodes: np.ndarray) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "nodes.npy", nodes)
    starts = np.asarray(src.indptr[nodes], dtype=np.int64)
    counts = np.asarray(src.indptr[nodes + 1], dtype=np.int64) - starts
    indptr = np.zeros(nodes.size + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    np.save(folder / "indptr.npy", indptr)
    x = np.lib.format.open_memmap(folder / "x.npy", mode="w+", dtype=src.x.dtype,
                                  shape=(nodes.size,) + tuple(src.x.shape[1:]))
    y = np.empty(nodes.size, dtype=np.int64)
    out = np.lib.format.open_memmap(folder / "src.npy", mode="w+", dtype=np.int64,
                                    shape=(int(indptr[-1]),))
    for lo in range(0, nodes.size, _CHUNK):
        hi = min(lo + _CHUNK, nodes.size)
        ids = nodes[lo:hi]
        x[lo:hi] = src.x[ids]
        y[lo:hi] = src.y[ids]
        c = counts[lo:hi]
        pos = np.repeat(starts[lo:hi] - (np.cumsum(c) - c), c) + np.arange(int(c.sum()))
        out[indptr[lo]:indptr[hi]] = src.indices[pos]
    np.save(folder / "y.npy", y)
    x.flush()
    out.flush()
    del x, out
    return int(indptr[-1])


def partition_graph(graph, out, *, num_parts: int, method: str = "auto", seed: int = 0,
                    train_fraction: float = 0.5, overwrite: bool = False) -> Path:
    """Split ``graph`` into ``num_parts`` shards in the folder ``out`` (layout: module docstring).

    Args:
        graph: a folder in the ``csbm-large`` format (`generate_large_graph`) or a PyG
            ``Data`` (edges are cleaned: self-loops dropped, duplicates merged).
        out: the output folder (created; must not hold shards unless ``overwrite``).
        num_parts: ``P`` in ``[1, N]``: one part per rank.
        method: ``"auto"``, ``"metis"`` or ``"contiguous"`` (see the module docstring).
        seed: METIS's seed, and the seed of the training split when ``graph`` has none.
        train_fraction: probability that a node is a training node when ``graph`` has no
            ``train_mask``.
        overwrite: replace shards already in ``out``.

    Returns:
        The folder.

    Raises:
        InvalidParameterError: a parameter out of range, a graph that is not a ``Data`` or a
            ``csbm-large`` folder, or ``out`` already holding shards.
    """
    method = check_choice("method", method, METHODS)
    seed = check_int("seed", seed, low=0, high=2**31 - 1)
    train_fraction = check_probability("train_fraction", train_fraction)
    if isinstance(graph, (str, Path)):
        src = _source_from_folder(graph)
        name = str(graph)
    elif hasattr(graph, "edge_index") and hasattr(graph, "x"):
        src = _source_from_data(graph)
        name = type(graph).__name__
    else:
        raise InvalidParameterError("graph", "a csbm-large folder or a PyG Data",
                                    type(graph).__name__)
    n = src.num_nodes
    parts = check_int("num_parts", num_parts, low=1, high=n)
    folder = Path(out)
    if (folder / "meta.json").exists():
        if not overwrite:
            raise InvalidParameterError("out", "a folder without shards (or overwrite=True)",
                                        str(folder))
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
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
    np.save(folder / "owner.npy", owner)
    np.save(folder / "local.npy", local)
    np.save(folder / "train_mask.npy", train)
    deg = _out_degree(src)
    np.save(folder / "out_degree.npy", deg)
    part_edges = [_write_part(folder / f"part{k}", src, order[bounds[k]:bounds[k + 1]])
                  for k in range(parts)]
    meta = {"format_version": FORMAT_VERSION, "num_nodes": n, "num_edges": num_edges,
            "num_parts": parts, "method": method, "seed": seed,
            "train_fraction": None if src.train_mask is not None else train_fraction,
            "num_train": int(train.sum()), "num_features": int(src.x.shape[1]),
            "num_classes": int(np.asarray(src.y).max()) + 1 if n else 0,
            "feature_dtype": str(src.x.dtype), "max_out_degree": int(deg.max()) if n else 0,
            "part_sizes": [int(s) for s in sizes], "part_edges": part_edges,
            "cut_edges": num_edges - _internal_edges(folder, parts, owner),
            "source": name}
    (folder / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return folder


def _internal_edges(folder: Path, parts: int, owner: np.ndarray) -> int:
    total = 0
    for k in range(parts):
        src = np.load(folder / f"part{k}" / "src.npy", mmap_mode="r")
        for lo in range(0, src.size, 1 << 22):
            total += int((owner[np.asarray(src[lo:lo + (1 << 22)])] == k).sum())
    return total


@dataclass(frozen=True)
class Shard:
    """One rank's view of a partitioned graph (arrays are read-only memory maps).

    Attributes:
        meta: ``meta.json``; part: this shard's index ``k``.
        owner, local, out_degree, train_mask: the global maps (``(N,)`` each).
        nodes, x, y, indptr, src: part ``k``'s arrays (module docstring).
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

    @property
    def num_parts(self) -> int:
        return int(self.meta["num_parts"])

    @property
    def num_nodes(self) -> int:
        return int(self.meta["num_nodes"])


def open_shard(path, part: int) -> Shard:
    """Memory-map part ``part`` of the shards in ``path`` with the global maps.

    Raises:
        InvalidParameterError: ``path`` holds no complete shards of this format, or ``part``
            is not one of its parts.
    """
    folder = Path(path)
    meta_file = folder / "meta.json"
    if not meta_file.exists():
        raise InvalidParameterError("path", "a folder written by partition_graph (meta.json)",
                                    str(folder))
    meta = json.loads(meta_file.read_text())
    if meta.get("format_version") != FORMAT_VERSION:
        raise InvalidParameterError("path", f"shards of format_version {FORMAT_VERSION}",
                                    meta.get("format_version"))
    part = check_int("part", part, low=0, high=int(meta["num_parts"]) - 1)
    sub = folder / f"part{part}"
    missing = [f for f in _GLOBAL if not (folder / f).exists()] + \
        [f"part{part}/{f}" for f in _PART if not (sub / f).exists()]
    if missing:
        raise InvalidParameterError("path", "complete shards", f"missing {', '.join(missing)}")
    arrays = {f[:-4]: np.load(folder / f, mmap_mode="r") for f in _GLOBAL}
    arrays.update({f[:-4]: np.load(sub / f, mmap_mode="r") for f in _PART})
    return Shard(meta=meta, part=part, **arrays)
