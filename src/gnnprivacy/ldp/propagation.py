"""Sparse K-hop propagation operators used by the LDP server side.

Two operators, both built as ``torch`` sparse (COO) matrices from an ``edge_index``; no dense
``N x N`` matrix is ever formed, so one hop costs ``O(|E| * F)``.

* `mean_adjacency`: ``Â = (D + I)^{-1} (A + I)``, the mean over ``{v} ∪ N(v)``, used by
  RGNN's reconstructions (Bhaila et al., "Local Differential Privacy in Graph Neural Networks:
  a Reconstruction Approach", SDM 2024, Algorithms 1-2; spec 004 §5). Existing self-loops are
  dropped first and exactly one self-loop of weight 1 is added; rows sum to 1 and an isolated
  node keeps its own value.
* `sym_adjacency`: ``D^{-1/2} A D^{-1/2}`` without self-loops, LPGNN's KProp operator
  (Sajadmanesh & Gatica-Perez, "Locally Private Graph Neural Networks", CCS 2021; spec 004
  §10.3). Isolated nodes get an all-zero row.

Updates are synchronous (``X_{k+1} = Â X_k``), never in place. The adjacency is treated as
unweighted; duplicate edges are merged.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor

from gnnprivacy._validation import check_int
from gnnprivacy.errors import InvalidParameterError


def _check_edge_index(edge_index: Tensor, num_nodes: int) -> Tensor:
    if not isinstance(edge_index, Tensor) or edge_index.dim() != 2 or edge_index.size(0) != 2:
        shape = tuple(edge_index.shape) if isinstance(edge_index, Tensor) else type(edge_index)
        raise InvalidParameterError("edge_index", "a 2 x E integer tensor", shape)
    if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= num_nodes):
        raise InvalidParameterError("edge_index", f"node ids in [0, {num_nodes})",
                                    (int(edge_index.min()), int(edge_index.max())))
    return edge_index.long()


def _sparse(row: Tensor, col: Tensor, val: Tensor, n: int) -> Tensor:
    mat = torch.sparse_coo_tensor(torch.stack([row, col]), val, (n, n), check_invariants=True)
    return mat.coalesce()


def _binary_adjacency(edge_index: Tensor, num_nodes: int) -> tuple[Tensor, Tensor]:
    """Unique off-diagonal (row, col) pairs of the unweighted adjacency."""
    ei = _check_edge_index(edge_index, num_nodes)
    ei = ei[:, ei[0] != ei[1]]
    key = torch.unique(ei[0] * num_nodes + ei[1])
    return key // num_nodes, key % num_nodes


def mean_adjacency(edge_index: Tensor, num_nodes: int) -> Tensor:
    """``Â = rownorm(A - diag(A) + I)`` as a coalesced sparse COO ``(N, N)`` float tensor.

    Args:
        edge_index: ``(2, E)`` edges ``row -> col``; row ``v`` of ``Â`` averages the values at
            ``{v} ∪ {u : (v, u) in edge_index}`` (pass both directions for an undirected graph).
        num_nodes: ``N``.
    """
    n = check_int("num_nodes", num_nodes, low=1)
    row, col = _binary_adjacency(edge_index, n)
    loops = torch.arange(n)
    row, col = torch.cat([row, loops]), torch.cat([col, loops])
    deg = torch.bincount(row, minlength=n).to(torch.float32)
    return _sparse(row, col, 1.0 / deg[row], n)


def sym_adjacency(edge_index: Tensor, num_nodes: int) -> Tensor:
    """``D^{-1/2} A D^{-1/2}`` (no self-loops) as a coalesced sparse COO ``(N, N)`` tensor."""
    n = check_int("num_nodes", num_nodes, low=1)
    row, col = _binary_adjacency(edge_index, n)
    deg = torch.bincount(row, minlength=n).to(torch.float32)
    inv_sqrt = torch.where(deg > 0, deg.clamp(min=1).rsqrt(), torch.zeros_like(deg))
    return _sparse(row, col, inv_sqrt[row] * inv_sqrt[col], n)


def propagate(adj: Tensor, x: Tensor, steps: int) -> Tensor:
    """``adj^steps @ x`` by repeated sparse products (differentiable in ``x``).

    Args:
        adj: sparse ``(N, N)`` operator from `mean_adjacency` or `sym_adjacency`.
        x: dense ``(N, F)`` tensor.
        steps: number of hops ``K >= 0`` (``0`` returns ``x`` unchanged).
    """
    check_int("steps", steps, low=0)
    out = x
    for _ in range(steps):
        out = torch.sparse.mm(adj, out)
    return out


def propagate_snapshots(adj: Tensor, x: Tensor, steps: Iterable[int]) -> dict[int, Tensor]:
    """``{K: adj^K @ x}`` for every ``K`` in ``steps``, sharing the hops (cost ``max(steps)``)."""
    wanted = sorted({check_int("steps", k, low=0) for k in steps})
    out: dict[int, Tensor] = {}
    cur, done = x, 0
    for k in wanted:
        cur = propagate(adj, cur, k - done)
        done = k
        out[k] = cur
    return out


__all__ = ["mean_adjacency", "sym_adjacency", "propagate", "propagate_snapshots"]
