"""n-hop neighbour sets and GRID's core threshold delta (spec 003 §4.3).

``Q_i`` (default ``q_mode="exact"``) is the set of nodes at shortest-path distance exactly
``n`` from ``i``; ``q_mode="within"`` gives ``2 <= d(i, k) <= n``. Rows of the distance
indicator are computed for a batch of source nodes at once by a sparse breadth-first search
(frontier ``F_{t+1} = (F_t A) minus seen``), so no dense N x N matrix is formed.

delta is the mean similarity over at most 1,000 distinct unordered n-hop pairs: all of them
(exact mean) when there are at most 1,000, else pairs drawn by choosing a node with degree
> 0 uniformly and then a node at distance n from it uniformly (up to 20,000 attempts). With no
n-hop pair at all, the mean similarity of random non-adjacent pairs is used and a warning is
issued. All draws come from one seeded generator.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp

from gnnprivacy.defenses.grid.similarity import similarity

__all__ = ["Q_MODES", "adjacency", "estimate_delta", "nhop_rows"]

Q_MODES = ("exact", "within")


def adjacency(edges: np.ndarray, num_nodes: int) -> sp.csr_matrix:
    """Symmetric 0/1 CSR adjacency (float64) of undirected edges ``(E, 2)``."""
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    rows = np.concatenate([e[:, 0], e[:, 1]])
    cols = np.concatenate([e[:, 1], e[:, 0]])
    adj = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(num_nodes, num_nodes))
    adj.data[:] = 1.0
    return adj


def _binary(m: sp.csr_matrix) -> sp.csr_matrix:
    m = m.tocsr()
    m.eliminate_zeros()
    m.data[:] = 1.0
    return m


def nhop_rows(adj: sp.csr_matrix, sources: np.ndarray, n: int, q_mode: str = "exact") -> sp.csr_matrix:
    """0/1 CSR matrix ``(len(sources), N)``: row ``r`` marks the n-hop set ``Q`` of ``sources[r]``."""
    m, num = len(sources), adj.shape[0]
    seen = sp.csr_matrix((np.ones(m), (np.arange(m), np.asarray(sources))), shape=(m, num))
    frontier = seen
    within = None
    for step in range(1, n + 1):
        nxt = _binary(frontier @ adj)
        nxt = _binary(nxt - nxt.multiply(seen))
        seen = _binary(seen + nxt)
        frontier = nxt
        if step == 2:
            within = nxt.copy()
        elif step > 2 and q_mode == "within":
            within = _binary(within + nxt)
    if q_mode == "within":
        return within if within is not None else frontier
    return frontier


def _mean_sim(v, pairs, kind):
    if len(pairs) == 0:
        return float("nan")
    p = np.asarray(pairs, dtype=np.int64)
    return float(similarity(v[p[:, 0]], v[p[:, 1]], kind).mean())


def estimate_delta(adj: sp.csr_matrix, v: np.ndarray, n: int, *, max_pairs: int = 1000,
                   max_attempts: int = 20000, kind: str = "corr+cos",
                   generator: np.random.Generator, batch: int = 256) -> tuple[float, dict]:
    """delta = mean sim over (sampled) n-hop pairs; returns ``(delta, info)``.

    ``info`` has ``pairs`` (how many were used), ``exact`` (all pairs used) and ``fallback``.
    """
    deg = np.asarray(adj.sum(1)).ravel()
    active = np.flatnonzero(deg > 0)
    # Exact path: count the unordered n-hop pairs, stopping as soon as there are too many.
    collected, ordered = [], 0
    for start in range(0, active.size, batch):
        src = active[start:start + batch]
        q = nhop_rows(adj, src, n).tocoo()
        ordered += q.nnz
        if ordered > 2 * max_pairs:
            break
        keep = src[q.row] < q.col
        collected.append(np.stack([src[q.row][keep], q.col[keep]], 1))
    else:
        pairs = np.concatenate(collected) if collected else np.zeros((0, 2), np.int64)
        if len(pairs):
            return _mean_sim(v, pairs, kind), {"pairs": int(len(pairs)), "exact": True,
                                               "fallback": False}
        return _fallback(adj, v, kind, max_pairs, generator)
    chosen: dict[tuple[int, int], None] = {}
    attempts = 0
    while len(chosen) < max_pairs and attempts < max_attempts:
        src = active[generator.integers(0, active.size, size=min(batch, max_attempts - attempts))]
        q = nhop_rows(adj, src, n)
        for r in range(src.size):
            attempts += 1
            cols = q.indices[q.indptr[r]:q.indptr[r + 1]]
            if cols.size == 0:
                continue
            k = int(cols[generator.integers(0, cols.size)])
            key = (min(int(src[r]), k), max(int(src[r]), k))
            chosen.setdefault(key, None)
            if len(chosen) >= max_pairs or attempts >= max_attempts:
                break
    return _mean_sim(v, list(chosen), kind), {"pairs": len(chosen), "exact": False,
                                              "fallback": False}


def _fallback(adj, v, kind, max_pairs, generator):
    num = adj.shape[0]
    if num < 2:
        return float("nan"), {"pairs": 0, "exact": False, "fallback": True}
    warnings.warn("GRID: the graph has no n-hop pair; delta falls back to the mean similarity "
                  "of random non-adjacent pairs", RuntimeWarning, stacklevel=3)
    i = generator.integers(0, num, size=4 * max_pairs)
    k = generator.integers(0, num, size=4 * max_pairs)
    ok = (i != k) & (np.asarray(adj[i, k]).ravel() == 0)
    pairs = np.stack([i[ok], k[ok]], 1)[:max_pairs]
    return _mean_sim(v, pairs, kind), {"pairs": int(len(pairs)), "exact": False, "fallback": True}
