"""Algorithm 1 of GRID: threshold-based core-node selection (spec 003 §4.4).

Edges are weighted by ``w(i, j) = sim(v_i, v_j)``; each node's similarity-weighted degree is
``wdeg(i) = sum_{j in P_i} w(i, j)``. Edges are visited by descending weight (ties broken by
``(i, j)`` lexicographically); an edge with ``w >= delta`` whose endpoints are both outside
the core gets the endpoint with the higher ``wdeg`` added (``pick="higher"``, the paper's
algorithm; ties go to ``j``) or the lower one (``pick="lower"``, ablation). The result is a
vertex cover of ``E_delta = {e : w(e) >= delta}``.
"""

from __future__ import annotations

import numpy as np

from gnnprivacy.defenses.grid.similarity import similarity

__all__ = ["PICKS", "edge_weights", "select_core_nodes"]

PICKS = ("higher", "lower")


def edge_weights(v: np.ndarray, edges: np.ndarray, kind: str = "corr+cos") -> tuple[np.ndarray, np.ndarray]:
    """``(w, wdeg)``: per-edge similarity and per-node similarity-weighted degree."""
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    w = similarity(v[e[:, 0]], v[e[:, 1]], kind) if len(e) else np.zeros(0)
    wdeg = np.zeros(v.shape[0])
    np.add.at(wdeg, e[:, 0], w)
    np.add.at(wdeg, e[:, 1], w)
    return w, wdeg


def select_core_nodes(edges: np.ndarray, w: np.ndarray, wdeg: np.ndarray, delta: float,
                      *, pick: str = "higher") -> np.ndarray:
    """Algorithm 1: the sorted core node ids (int64)."""
    if pick not in PICKS:
        raise ValueError(f"unknown pick {pick!r}; choices: {PICKS}")
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    order = np.lexsort((e[:, 1], e[:, 0], -w))
    in_core = np.zeros(wdeg.shape[0], dtype=bool)
    for idx in order.tolist():
        if not w[idx] >= delta:  # sorted descending: every later edge is lighter (nan: stop)
            break
        i, j = int(e[idx, 0]), int(e[idx, 1])
        if in_core[i] or in_core[j]:
            continue
        if pick == "higher":
            in_core[i if wdeg[i] > wdeg[j] else j] = True
        else:
            in_core[i if wdeg[i] < wdeg[j] else j] = True
    return np.flatnonzero(in_core)
