"""Edge-level DP graph releases: EdgeRand and LapGraph (Wu et al., "LinkTeller", S&P 2022).

Both are sparse: neither builds an ``N x N`` matrix. The non-edges that enter the output are
sampled directly: their number is drawn from its exact law and the pairs uniformly among the
non-edges (by rejection from uniform pair indices).

* `edge_rand`: randomized response on every unordered pair; each pair is flipped
  with probability ``1/(1 + e^eps)`` (equivalently, replaced by a fair coin with probability
  ``s = 2/(e^eps + 1)``).
* `lap_graph`: Laplace(1/eps2) on every strictly lower-triangular adjacency entry,
  ``T = |E| + trunc(Laplace(1/eps1))`` with ``eps1 = 0.01 eps``, and the ``T`` largest noisy
  entries become the edges. Only the non-edges whose noise exceeds a threshold ``tau`` can be
  among the top ``T``; their number is ``Binomial(M0, P[Lap > tau])`` and their values
  ``tau + Exp(1/eps2)`` (the Laplace tail is memoryless), so the release has the exact law of
  the dense algorithm unless fewer than ``T`` entries exceed ``tau`` (``tau`` is set so that
  this has probability below ``e^{-T/4}``; it then raises instead of returning a biased graph).

*Privacy*: unit ``EDGE``, relation ``ADD_OR_REMOVE`` (neighbouring graphs differ in one edge);
the node set is public. EdgeRand is ``eps``-edge-DP (one pure event); LapGraph is
``eps1 + eps2 = eps`` by sequential composition (two pure events). Each function composes its
events into ``accountant`` when one is given and also returns the release only, so the event
lists are available from `edge_rand_events` / `lap_graph_events`.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from gnnprivacy._validation import check_int, check_real
from gnnprivacy.accounting.builders import pure_dp_event
from gnnprivacy.accounting.events import ScopedDpEvent
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.random import numpy_generator

__all__ = ["edge_rand", "edge_rand_events", "lap_graph", "lap_graph_events",
           "sample_non_edges"]

#: default cap on the number of output edges (a dense release is an error, not a hang)
MAX_EDGES = 20_000_000


def _eps(epsilon) -> float:
    eps = check_real("epsilon", epsilon, low=0.0, low_open=True)
    if math.isinf(eps):
        raise InvalidParameterError("epsilon", "a finite real number > 0", epsilon)
    return eps


def _event(eps: float) -> ScopedDpEvent:
    return ScopedDpEvent(pure_dp_event(epsilon=eps), PrivacyUnit.EDGE,
                         NeighboringRelation.ADD_OR_REMOVE)


def edge_rand_events(epsilon: float) -> list:
    """The events of one EdgeRand release."""
    return [_event(_eps(epsilon))]


def lap_graph_events(epsilon: float, count_share: float = 0.01) -> list:
    """The events of one LapGraph release (count ``count_share * eps``, entries the rest)."""
    eps = _eps(epsilon)
    share = check_real("count_share", count_share, low=0.0, high=1.0, low_open=True,
                       high_open=True)
    return [_event(share * eps), _event((1 - share) * eps)]


def _keys(edge_index, n: int) -> np.ndarray:
    ei = np.asarray(edge_index.cpu() if isinstance(edge_index, torch.Tensor) else edge_index,
                    dtype=np.int64)
    if ei.ndim != 2 or ei.shape[0] != 2:
        raise InvalidParameterError("edge_index", "an array of shape (2, E)", ei.shape)
    if ei.size and (ei.min() < 0 or ei.max() >= n):
        raise InvalidParameterError("edge_index", f"node ids in [0, {n})", "out of range")
    u, v = np.minimum(ei[0], ei[1]), np.maximum(ei[0], ei[1])
    return np.unique(u[u != v] * n + v[u != v])


def _pairs_from_index(k: np.ndarray, n: int) -> np.ndarray:
    """Row-major upper-triangle index ``k`` -> key ``u * n + v`` with ``u < v``."""
    kf = k.astype(np.float64)
    u = (n - 2 - np.floor(np.sqrt(-8 * kf + 4.0 * n * (n - 1) - 7) / 2 - 0.5)).astype(np.int64)
    start = u * (2 * n - u - 1) // 2          # index of (u, u+1)
    # guard floating error at block boundaries
    u = np.where(k < start, u - 1, u)
    start = u * (2 * n - u - 1) // 2
    nxt = (u + 1) * (2 * n - u - 2) // 2
    u = np.where(k >= nxt, u + 1, u)
    start = u * (2 * n - u - 1) // 2
    v = k - start + u + 1
    return u * n + v


def sample_non_edges(edge_keys: np.ndarray, n: int, m: int,
                     rng: np.random.Generator) -> np.ndarray:
    """``m`` distinct keys ``u * n + v`` drawn uniformly from the non-edges (``u < v``)."""
    total = n * (n - 1) // 2
    if m > total - edge_keys.size:
        raise InvalidParameterError("m", f"at most the {total - edge_keys.size} non-edges", m)
    if m == 0:
        return np.zeros(0, np.int64)
    if m > (total - edge_keys.size) // 8 and total <= 50_000_000:   # dense: enumerate
        all_keys = _pairs_from_index(np.arange(total, dtype=np.int64), n)
        free = np.setdiff1d(all_keys, edge_keys, assume_unique=True)
        return free[rng.permutation(free.size)[:m]]
    have = np.zeros(0, np.int64)
    while have.size < m:
        need = m - have.size
        draw = rng.integers(0, total, size=int(need * 1.2) + 16)
        have = np.union1d(have, np.setdiff1d(_pairs_from_index(draw, n), edge_keys))
    return rng.choice(have, size=m, replace=False) if have.size > m else rng.permutation(have)


def _to_edge_index(keys: np.ndarray, n: int) -> torch.Tensor:
    u, v = keys // n, keys % n
    ei = np.stack([np.concatenate([u, v]), np.concatenate([v, u])])
    order = np.lexsort((ei[1], ei[0]))
    return torch.as_tensor(ei[:, order], dtype=torch.long)


def edge_rand(edge_index, num_nodes: int, *, epsilon: float, generator=None,
              accountant=None, max_edges: int = MAX_EDGES) -> torch.Tensor:
    """EdgeRand: flip every unordered pair with probability ``1/(1 + e^eps)`` (sparse).

    Args:
        edge_index: ``(2, E)`` (either or both directions; self-loops ignored).
        num_nodes: ``n`` (public).
        epsilon: ``eps > 0``.
        generator: ``numpy.random.Generator`` or int seed.
        accountant: if given, the ``eps`` EDGE event is composed into it.
        max_edges: refuse (``InvalidParameterError``) when the expected output is larger.

    Returns:
        The released graph, both directions, as a sorted ``edge_index``.
    """
    eps = _eps(epsilon)
    n = check_int("num_nodes", num_nodes, low=2)
    rng = numpy_generator(generator)
    keys = _keys(edge_index, n)
    flip = 1.0 / (1.0 + math.exp(eps))
    non_edges = n * (n - 1) // 2 - keys.size
    expected = keys.size * (1 - flip) + non_edges * flip
    if expected > max_edges:
        raise InvalidParameterError("epsilon", f"a budget whose EdgeRand output fits in "
                                    f"max_edges={max_edges} edges (expected {expected:.3g})", eps)
    kept = keys[rng.random(keys.size) >= flip]
    added = sample_non_edges(keys, n, int(rng.binomial(non_edges, flip)), rng)
    if accountant is not None:
        for ev in edge_rand_events(eps):
            accountant.compose(ev)
    return _to_edge_index(np.sort(np.concatenate([kept, added])), n)


def lap_graph(edge_index, num_nodes: int, *, epsilon: float, generator=None,
              accountant=None, count_share: float = 0.01) -> torch.Tensor:
    """LapGraph: keep the ``T`` largest Laplace-noised adjacency entries (sparse, exact law).

    Args:
        edge_index: ``(2, E)`` (either or both directions; self-loops ignored).
        num_nodes: ``n`` (public).
        generator: ``numpy.random.Generator`` or int seed.
        accountant: if given, the two EDGE events are composed into it.
        epsilon: ``eps > 0``; ``eps1 = count_share * eps`` for ``T``, the rest for the entries.
        count_share: share of the budget spent on the edge count (0.01 in LinkTeller).
    """
    eps = _eps(epsilon)
    share = check_real("count_share", count_share, low=0.0, high=1.0, low_open=True,
                       high_open=True)
    n = check_int("num_nodes", num_nodes, low=2)
    rng = numpy_generator(generator)
    keys = _keys(edge_index, n)
    eps1, eps2 = share * eps, (1 - share) * eps
    total = n * (n - 1) // 2
    T = int(np.clip(keys.size + int(rng.laplace(0.0, 1.0 / eps1)), 0, total))   # trunc to 0
    b = 1.0 / eps2
    m0 = total - keys.size
    target = 2 * T + 100
    edge_vals = 1.0 + rng.laplace(0.0, b, size=keys.size)
    if 4 * target >= m0:       # small or dense graph: every non-edge is a candidate
        if total > 50_000_000:
            raise InvalidParameterError("edge_index", "a sparse graph (LapGraph keeps T ~ |E| "
                                        "of the n(n-1)/2 pairs)", f"T={T}, n={n}")
        all_keys = _pairs_from_index(np.arange(total, dtype=np.int64), n)
        non_keys = np.setdiff1d(all_keys, keys, assume_unique=True)
        non_vals = rng.laplace(0.0, b, size=non_keys.size)
        cand_keys = np.concatenate([keys, non_keys])
        cand_vals = np.concatenate([edge_vals, non_vals])
    else:
        tau = b * math.log(m0 / (2.0 * target))            # P[Lap > tau] = target / m0 < 1/8
        k = int(rng.binomial(m0, 0.5 * math.exp(-tau / b)))
        non_keys = sample_non_edges(keys, n, k, rng)
        non_vals = tau + rng.exponential(b, size=k)
        cand_keys = np.concatenate([keys[edge_vals > tau], non_keys])
        cand_vals = np.concatenate([edge_vals[edge_vals > tau], non_vals])
    if cand_keys.size < T:
        raise RuntimeError("LapGraph: fewer than T entries above the threshold (probability "
                           "< e^{-T/4}); rerun with another generator")
    top = np.argpartition(-cand_vals, T - 1)[:T] if T > 0 else np.zeros(0, np.int64)
    if accountant is not None:
        for ev in lap_graph_events(eps, share):
            accountant.compose(ev)
    return _to_edge_index(np.sort(cand_keys[top]), n)
