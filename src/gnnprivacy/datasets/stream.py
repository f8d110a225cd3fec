r"""Large synthetic graphs streamed to disk in chunks and loaded memory-mapped (10^7 nodes).

`generate_large_graph` writes a contextual block-model graph to a folder of ``.npy``
files without ever holding its edges or features in memory; `open_large_graph` maps
them back (``np.load(mmap_mode="r")``) and `large_graph_data` wraps the maps in a PyG
``Data`` without copying. The registered dataset ``csbm-large`` does both.

Model (a degree-corrected contextual SBM; Karrer & Newman 2011 for the degree correction,
Deshpande et al. 2018 for the features):

* labels ``y_u`` uniform over ``num_classes`` classes, independently per node;
* node weights ``w_u = 1`` (``degree_model="uniform"``: Poisson degrees, the CSBM) or Pareto
  ``w_u = (1 - U)^{-1/(gamma - 1)}`` capped at ``sqrt(N)`` (``"powerlaw"``: degree tail
  ``P(deg >= k) ~ k^{1 - gamma}``, ``gamma = exponent``);
* every node ``u`` starts ``Poisson(avg_degree * w_u / (2 mean(w)))`` edges; each goes to the
  class of ``u`` with probability ``homophily``, else to one of the other classes uniformly,
  and within the chosen class to node ``v`` with probability proportional to ``w_v``;
* the graph is the undirected union of those edges (both directions stored, self-loops
  dropped, duplicates merged), so the average degree is about ``avg_degree`` and the fraction
  of intra-class edges about ``homophily``;
* features ``x_u = feature_signal * e_{y_u} + N(0, I)`` for orthonormal ``e_c``.

Files in the folder: ``meta.json`` (parameters, sizes, format version), ``indptr.npy``
(``N + 1``, int64: the in-neighbours of ``i`` are ``edge_index[0, indptr[i]:indptr[i+1]]``),
``edge_index.npy`` (``(2, E)`` int64, sorted by target then source, so row 0 is the CSR
``indices``), ``x.npy`` (``(N, F)``, float32 or float16) and ``y.npy`` (``N``, int64).

Memory: generation holds 32 bytes per node (labels, weights and the per-class sampling
tables; 320 MB at 10^7 nodes) plus one chunk of edges or features; edges pass through
per-chunk bucket files on disk. Deterministic for a given ``(seed, chunk_nodes)``: every
stage and chunk draws from its own ``numpy.random.SeedSequence`` child.

Privacy: none (a synthetic public dataset).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gnnprivacy._validation import check_choice, check_int, check_probability, check_real
from gnnprivacy.datasets.spec import register_dataset
from gnnprivacy.errors import InvalidParameterError

FORMAT_VERSION = 1
DEGREE_MODELS = ("uniform", "powerlaw")
FEATURE_DTYPES = ("float32", "float16")
_FILES = ("indptr.npy", "edge_index.npy", "x.npy", "y.npy")


def _rng(seed: int, stage: int, chunk: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(stage, chunk)))


def _chunks(n: int, size: int):
    for c, lo in enumerate(range(0, n, size)):
        yield c, lo, min(lo + size, n)


def _raw_to_npy(parts: list[Path], out: Path, dtype: np.dtype, shape: tuple[int, ...]) -> None:
    """Concatenate raw little-endian files into one ``.npy`` of ``shape`` (streamed copy)."""
    with open(out, "wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": np.dtype(dtype).str, "fortran_order": False, "shape": shape})
        for part in parts:
            with open(part, "rb") as src:
                shutil.copyfileobj(src, f, 1 << 20)


def _labels_and_weights(n, num_classes, degree_model, exponent, seed, chunk):
    y = np.empty(n, dtype=np.int64)
    w = np.ones(n, dtype=np.float64)
    cap = max(np.sqrt(n), 1.0)
    for c, lo, hi in _chunks(n, chunk):
        rng = _rng(seed, 0, c)
        y[lo:hi] = rng.integers(0, num_classes, hi - lo)
        if degree_model == "powerlaw":
            w[lo:hi] = np.minimum((1.0 - rng.random(hi - lo)) ** (-1.0 / (exponent - 1.0)), cap)
    return y, w


def _write_edge_buckets(tmp: Path, y, w, *, avg_degree, homophily, num_classes, seed, chunk):
    """Sample every node's started edges; write (target, source) pairs, both directions, into
    one bucket file per chunk of targets. Returns the bucket paths."""
    n = y.size
    members = np.argsort(y, kind="stable")
    sizes = np.bincount(y, minlength=num_classes)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    cum = np.concatenate([[0.0], np.cumsum(w[members])])  # weights in class order
    rate = avg_degree / (2.0 * float(w.mean()))
    idx_dtype = np.int32 if n < 2**31 else np.int64
    n_chunks = -(-n // chunk)
    paths = [tmp / f"bucket{b}.bin" for b in range(n_chunks)]
    handles = [open(p, "wb") for p in paths]
    try:
        for c, lo, hi in _chunks(n, chunk):
            rng = _rng(seed, 1, c)
            k = rng.poisson(rate * w[lo:hi])
            u = np.repeat(np.arange(lo, hi, dtype=np.int64), k)
            cls = y[u]
            if num_classes > 1:
                other = rng.random(u.size) >= homophily
                shift = rng.integers(1, num_classes, u.size)
                cls = np.where(other, (cls + shift) % num_classes, cls)
            lo_w, hi_w = cum[starts[cls]], cum[starts[cls + 1]]
            r = lo_w + rng.random(u.size) * (hi_w - lo_w)
            pos = np.searchsorted(cum, r, side="right") - 1
            pos = np.clip(pos, starts[cls], starts[cls + 1] - 1)
            v = members[pos]
            keep = (u != v) & (sizes[cls] > 0)
            u, v = u[keep], v[keep]
            pairs = np.concatenate([np.stack([u, v], 1), np.stack([v, u], 1)]).astype(idx_dtype)
            order = np.argsort(pairs[:, 0] // chunk, kind="stable")
            pairs = pairs[order]
            bounds = np.searchsorted(pairs[:, 0], np.arange(n_chunks + 1) * chunk)
            for b in range(n_chunks):
                if bounds[b + 1] > bounds[b]:
                    pairs[bounds[b]:bounds[b + 1]].tofile(handles[b])
    finally:
        for h in handles:
            h.close()
    return paths, idx_dtype


def _buckets_to_csr(tmp: Path, out: Path, buckets, idx_dtype, n: int, chunk: int) -> int:
    """Sort and deduplicate every bucket into CSR rows; write indptr.npy and edge_index.npy."""
    indptr = np.lib.format.open_memmap(out / "indptr.npy", mode="w+", dtype=np.int64,
                                       shape=(n + 1,))
    indptr[0] = 0
    src_raw, dst_raw = tmp / "src.bin", tmp / "dst.bin"
    total = 0
    with open(src_raw, "wb") as fs, open(dst_raw, "wb") as fd:
        for (c, lo, hi), path in zip(_chunks(n, chunk), buckets):
            pairs = np.fromfile(path, dtype=idx_dtype).reshape(-1, 2).astype(np.int64)
            path.unlink()
            key = np.unique((pairs[:, 0] - lo) * n + pairs[:, 1])
            dst, src = key // n, key % n
            counts = np.bincount(dst, minlength=hi - lo)
            indptr[lo + 1:hi + 1] = total + np.cumsum(counts)
            total += int(key.size)
            src.tofile(fs)
            (dst + lo).tofile(fd)
    indptr.flush()
    del indptr
    _raw_to_npy([src_raw, dst_raw], out / "edge_index.npy", np.int64, (2, total))
    return total


def _write_features(out: Path, y, *, num_features, num_classes, feature_signal, dtype, seed,
                    chunk) -> None:
    g = _rng(seed, 2, 0).standard_normal((num_features, num_classes))
    if num_classes <= num_features:
        means = np.linalg.qr(g)[0][:, :num_classes].T
    else:
        means = (g / np.linalg.norm(g, axis=0, keepdims=True)).T
    means = (feature_signal * means).astype(np.float32)
    with open(out / "x.npy", "wb") as f:  # plain writes: no mapped pages stay resident
        np.lib.format.write_array_header_1_0(
            f, {"descr": np.dtype(dtype).str, "fortran_order": False,
                "shape": (y.size, num_features)})
        for c, lo, hi in _chunks(y.size, chunk):
            rng = _rng(seed, 3, c)
            block = rng.standard_normal((hi - lo, num_features), dtype=np.float32)
            block += means[y[lo:hi]]
            block.astype(dtype, copy=False).tofile(f)


def generate_large_graph(path, *, num_nodes: int, num_classes: int = 4, num_features: int = 64,
                         avg_degree: float = 10.0, homophily: float = 0.8,
                         feature_signal: float = 1.0, degree_model: str = "uniform",
                         exponent: float = 2.5, feature_dtype: str = "float32", seed: int = 0,
                         chunk_nodes: int = 1 << 18, overwrite: bool = False) -> Path:
    """Generate a large contextual block-model graph into the folder ``path``, chunk by chunk.

    Args:
        path: output folder (created; must be empty or absent unless ``overwrite``).
        num_nodes: ``N`` (>= 2).
        num_classes, num_features, avg_degree, homophily, feature_signal: as the module
            docstring's model.
        degree_model: ``"uniform"`` (CSBM, Poisson degrees) or ``"powerlaw"``.
        exponent: power-law exponent ``gamma > 2`` of the degree tail (``powerlaw`` only).
        feature_dtype: ``"float32"`` or ``"float16"`` (half the disk and page cache).
        seed: the graph's seed.
        chunk_nodes: nodes per chunk (bounds the working set; part of the determinism key).
        overwrite: replace an existing graph in ``path``.

    Returns:
        The folder, holding ``meta.json`` and the ``.npy`` files listed in the module docstring.

    Raises:
        InvalidParameterError: a parameter out of range, or ``path`` already holds a graph and
            ``overwrite`` is false.
    """
    n = check_int("num_nodes", num_nodes, low=2)
    num_classes = check_int("num_classes", num_classes, low=1)
    num_features = check_int("num_features", num_features, low=1)
    avg_degree = check_real("avg_degree", avg_degree, low=0.0)
    homophily = check_probability("homophily", homophily)
    feature_signal = check_real("feature_signal", feature_signal, low=0.0)
    degree_model = check_choice("degree_model", degree_model, DEGREE_MODELS)
    exponent = check_real("exponent", exponent, low=2.0)
    if exponent <= 2.0:
        raise InvalidParameterError("exponent", "a power-law exponent > 2", exponent)
    feature_dtype = check_choice("feature_dtype", feature_dtype, FEATURE_DTYPES)
    seed = check_int("seed", seed, low=0)
    chunk = check_int("chunk_nodes", chunk_nodes, low=1)
    out = Path(path)
    if (out / "meta.json").exists() and not overwrite:
        raise InvalidParameterError("path", "a folder without a generated graph (or "
                                    "overwrite=True)", str(out))
    out.mkdir(parents=True, exist_ok=True)
    (out / "meta.json").unlink(missing_ok=True)  # an interrupted run leaves no meta.json
    t0 = time.perf_counter()
    y, w = _labels_and_weights(n, num_classes, degree_model, exponent, seed, chunk)
    np.save(out / "y.npy", y)
    with tempfile.TemporaryDirectory(dir=out, prefix=".tmp-") as tmp:
        buckets, idx_dtype = _write_edge_buckets(
            Path(tmp), y, w, avg_degree=avg_degree, homophily=homophily,
            num_classes=num_classes, seed=seed, chunk=chunk)
        del w
        num_edges = _buckets_to_csr(Path(tmp), out, buckets, idx_dtype, n, chunk)
    _write_features(out, y, num_features=num_features, num_classes=num_classes,
                    feature_signal=feature_signal, dtype=np.dtype(feature_dtype), seed=seed,
                    chunk=chunk)
    meta = {"format_version": FORMAT_VERSION, "num_nodes": n, "num_edges": num_edges,
            "num_classes": num_classes, "num_features": num_features, "avg_degree": avg_degree,
            "homophily": homophily, "feature_signal": feature_signal,
            "degree_model": degree_model, "exponent": exponent, "feature_dtype": feature_dtype,
            "seed": seed, "chunk_nodes": chunk,
            "generation_seconds": round(time.perf_counter() - t0, 3)}
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return out


@dataclass(frozen=True)
class LargeGraph:
    """A generated graph mapped from disk (arrays are read-only ``np.memmap``s).

    Attributes:
        meta: the parameters and sizes from ``meta.json``.
        indptr: ``(N + 1,)`` CSR row pointers over targets.
        edge_index: ``(2, E)`` edges ``j -> i`` sorted by ``(i, j)``; ``edge_index[0]`` is the
            CSR ``indices``.
        x: ``(N, F)`` features; y: ``(N,)`` labels.
    """

    meta: dict
    indptr: np.ndarray
    edge_index: np.ndarray
    x: np.ndarray
    y: np.ndarray

    @property
    def num_nodes(self) -> int:
        return int(self.meta["num_nodes"])

    def neighbors(self, i: int) -> np.ndarray:
        """In-neighbours of node ``i`` (a CSR slice, no copy)."""
        return self.edge_index[0, self.indptr[i]:self.indptr[i + 1]]


def open_large_graph(path, *, mmap_mode: str = "r") -> LargeGraph:
    """Memory-map a graph written by `generate_large_graph` (nothing is read eagerly).

    Raises:
        InvalidParameterError: ``path`` holds no complete graph of this format version.
    """
    folder = Path(path)
    meta_file = folder / "meta.json"
    if not meta_file.exists() or any(not (folder / f).exists() for f in _FILES):
        raise InvalidParameterError("path", "a folder written by generate_large_graph "
                                    f"(meta.json and {', '.join(_FILES)})", str(folder))
    meta = json.loads(meta_file.read_text())
    if meta.get("format_version") != FORMAT_VERSION:
        raise InvalidParameterError("path", f"format_version {FORMAT_VERSION}",
                                    meta.get("format_version"))
    arrays = {f[:-4]: np.load(folder / f, mmap_mode=mmap_mode) for f in _FILES}
    return LargeGraph(meta=meta, **arrays)


def large_graph_data(graph: LargeGraph):
    """A PyG ``Data`` whose tensors share memory with the maps (no copy; float16 stays float16).

    Maps opened with ``mmap_mode="r"`` are read-only: torch must not write into them (the
    library's trainers never write into ``data``).
    """
    import warnings

    import torch
    from torch_geometric.data import Data

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not writable.*")
        tensors = {k: torch.from_numpy(getattr(graph, k)) for k in ("x", "edge_index", "y")}
    return Data(**tensors, num_nodes=graph.num_nodes)


def _default_folder(ctx, params: dict) -> Path:
    key = "-".join(f"{k}={params[k]}" for k in sorted(params))
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return Path(ctx.cache) / "csbm-large" / digest


@register_dataset(
    "csbm-large", description="Large CSBM / power-law graph streamed to disk, memory-mapped",
    pyg_class="gnnprivacy.datasets.stream.generate_large_graph", generated=True,
    notes=("Dataset kwargs: num_nodes=100000, num_classes=4, num_features=64, avg_degree=10, "
           "homophily=0.8, feature_signal=1.0, degree_model='uniform'|'powerlaw', "
           "exponent=2.5, feature_dtype='float32'|'float16', graph_seed=0, path=None (default: "
           "a folder under the cache keyed by the parameters; generated once, then mapped). "
           "load_dataset standardises the edges (symmetrise + coalesce) in memory; for 10^7 "
           "nodes use open_large_graph + large_graph_data, which copy nothing."))
def _csbm_large(ctx, *, num_nodes: int = 100_000, num_classes: int = 4, num_features: int = 64,
                avg_degree: float = 10.0, homophily: float = 0.8, feature_signal: float = 1.0,
                degree_model: str = "uniform", exponent: float = 2.5,
                feature_dtype: str = "float32", graph_seed: int = 0, path: str | None = None):
    params = dict(num_nodes=num_nodes, num_classes=num_classes, num_features=num_features,
                  avg_degree=avg_degree, homophily=homophily, feature_signal=feature_signal,
                  degree_model=degree_model, exponent=exponent, feature_dtype=feature_dtype,
                  seed=graph_seed)
    folder = Path(path) if path is not None else _default_folder(ctx, params)
    if not (folder / "meta.json").exists():
        generate_large_graph(folder, **params)
    graph = open_large_graph(folder)
    stored = {k: graph.meta[k] for k in params}
    if stored != params:
        raise InvalidParameterError("path", f"a graph generated with {params}", stored)
    return large_graph_data(graph)


__all__ = ["DEGREE_MODELS", "FEATURE_DTYPES", "LargeGraph", "generate_large_graph",
           "large_graph_data", "open_large_graph"]
