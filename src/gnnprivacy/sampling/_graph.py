"""Graph plumbing shared by the samplers: validation, cleaning, CSR, node sets.

Convention (spec 000 §2.1): an edge ``j -> i`` is stored as column ``(j, i)`` of a PyG
``edge_index``; it means *i aggregates j*. ``NB(i)`` are the in-neighbours (sources of edges
into ``i``) and ``D_ot(j)`` is the out-degree of ``j`` (number of edges leaving ``j``),
always measured in the whole graph after self-loop removal.

Everything here is vectorised; nothing loops over nodes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from gnnprivacy._validation import check_int
from gnnprivacy.errors import InvalidParameterError


@dataclass(frozen=True, eq=False)
class CleanGraph:
    """A validated simple directed graph, in-edges grouped by target (CSR over targets).

    Attributes:
        num_nodes: number of nodes ``N``.
        src: (E,) sources ``j`` of edges ``j -> i``, sorted by ``(dst, src)``.
        dst: (E,) targets ``i`` (the aggregating nodes), sorted ascending.
        rowptr: (N+1,) ``src[rowptr[i]:rowptr[i+1]]`` is ``NB(i)``.
        num_self_loops: self-loops removed while cleaning.
        num_duplicates: duplicate edges removed while cleaning.
    """

    num_nodes: int
    src: Tensor
    dst: Tensor
    rowptr: Tensor
    num_self_loops: int
    num_duplicates: int

    @property
    def num_edges(self) -> int:
        return int(self.src.numel())

    def out_degree(self) -> Tensor:
        """``D_ot`` of every node in this graph, shape (N,), int64."""
        return torch.bincount(self.src, minlength=self.num_nodes)

    def in_degree(self) -> Tensor:
        """``|NB(i)|`` of every node, shape (N,), int64."""
        return self.rowptr[1:] - self.rowptr[:-1]

    def edge_index(self) -> Tensor:
        """The cleaned edges as a (2, E) PyG ``edge_index``."""
        return torch.stack([self.src, self.dst])

    def __repr__(self) -> str:
        return (f"CleanGraph(num_nodes={self.num_nodes}, num_edges={self.num_edges}, "
                f"self_loops_removed={self.num_self_loops}, duplicates_removed={self.num_duplicates})")


def validate_edge_index(edge_index: object, num_nodes: int, *, where: str) -> Tensor:
    """Check shape, dtype and range of ``edge_index``; return it as a (2, E) int64 CPU tensor."""
    if not isinstance(edge_index, Tensor):
        raise InvalidParameterError("edge_index", "a torch.Tensor of shape (2, E)",
                                    type(edge_index).__name__, where=where)
    if edge_index.dim() != 2 or edge_index.shape[0] != 2:
        raise InvalidParameterError("edge_index", "a tensor of shape (2, E)",
                                    tuple(edge_index.shape), where=where)
    if edge_index.dtype.is_floating_point or edge_index.dtype.is_complex or edge_index.dtype == torch.bool:
        raise InvalidParameterError("edge_index", "an integer tensor", edge_index.dtype, where=where)
    ei = edge_index.detach().to(device="cpu", dtype=torch.long)
    if ei.numel() > 0:
        lo, hi = int(ei.min()), int(ei.max())
        if lo < 0 or hi >= num_nodes:
            raise InvalidParameterError(
                "edge_index", f"node ids in [0, num_nodes={num_nodes})",
                f"ids in [{lo}, {hi}]", where=where)
    return ei


def clean_graph(edge_index: object, num_nodes: object, *, symmetrize: bool = False,
                where: str = "graph") -> CleanGraph:
    """Validate ``edge_index``, drop self-loops and duplicate edges, group edges by target.

    Args:
        edge_index: (2, E) integer tensor, column ``(j, i)`` is the edge ``j -> i``.
        num_nodes: number of nodes (ids must lie in ``[0, num_nodes)``).
        symmetrize: add the reverse of every edge before de-duplication.
        where: prefix of error messages.

    Returns:
        A `CleanGraph` (a simple directed graph: no self-loops, no multi-edges).

    Raises:
        InvalidParameterError: bad ``num_nodes`` or ``edge_index`` (shape, dtype, range).
    """
    n = check_int("num_nodes", num_nodes, low=1, where=where)
    ei = validate_edge_index(edge_index, n, where=where)
    loops = ei[0] == ei[1]
    ei = ei[:, ~loops]
    if symmetrize:
        ei = torch.cat([ei, ei.flip(0)], dim=1)
    key = torch.unique(ei[1] * n + ei[0], sorted=True)   # sorted by (dst, src)
    dst, src = key // n, key % n
    counts = torch.bincount(dst, minlength=n)
    rowptr = torch.zeros(n + 1, dtype=torch.long)
    rowptr[1:] = torch.cumsum(counts, 0)
    n_before = ei.shape[1]
    return CleanGraph(n, src, dst, rowptr, int(loops.sum()), n_before - int(key.numel()))


def node_mask(nodes: object, num_nodes: int, *, name: str, where: str) -> Tensor:
    """Turn a node set (bool mask of length N, or a 1-D tensor of ids) into a bool mask."""
    if not isinstance(nodes, Tensor):
        raise InvalidParameterError(name, "a bool mask of shape (num_nodes,) or a 1-D tensor of node ids",
                                    type(nodes).__name__, where=where)
    if nodes.dtype == torch.bool:
        if nodes.shape != (num_nodes,):
            raise InvalidParameterError(name, f"a bool mask of shape ({num_nodes},)",
                                        tuple(nodes.shape), where=where)
        return nodes.detach().cpu().clone()
    if nodes.dim() != 1 or nodes.dtype.is_floating_point or nodes.dtype.is_complex:
        raise InvalidParameterError(name, "a bool mask or a 1-D integer tensor of node ids",
                                    f"{nodes.dtype} tensor of shape {tuple(nodes.shape)}", where=where)
    ids = nodes.detach().cpu().long()
    if ids.numel() > 0 and (int(ids.min()) < 0 or int(ids.max()) >= num_nodes):
        raise InvalidParameterError(name, f"node ids in [0, {num_nodes})",
                                    f"ids in [{int(ids.min())}, {int(ids.max())}]", where=where)
    mask = torch.zeros(num_nodes, dtype=torch.bool)
    mask[ids] = True
    return mask


def node_ids(nodes: object, num_nodes: int, *, name: str, where: str, keep_order: bool = False) -> Tensor:
    """Node ids of a node set. Masks give ascending ids; with ``keep_order`` id tensors keep
    their order and must not contain repeats."""
    if keep_order and isinstance(nodes, Tensor) and nodes.dtype != torch.bool:
        mask = node_mask(nodes, num_nodes, name=name, where=where)
        ids = nodes.detach().cpu().long()
        if int(mask.sum()) != ids.numel():
            raise InvalidParameterError(name, "node ids without repeats",
                                        f"{ids.numel() - int(mask.sum())} repeated id(s)", where=where)
        return ids.clone()
    return node_mask(nodes, num_nodes, name=name, where=where).nonzero().flatten()


def gather_segments(rowptr: Tensor, rows: Tensor) -> tuple[Tensor, Tensor]:
    """Positions of the CSR entries of ``rows`` (in that order) and the row slot of each.

    Returns:
        ``(entry_ids, segment)``: ``entry_ids`` index the CSR arrays; ``segment[e]`` is the
        position in ``rows`` of the row entry ``e`` belongs to. Both are grouped by segment.
    """
    starts = rowptr[rows]
    counts = rowptr[rows + 1] - starts
    segment = torch.repeat_interleave(torch.arange(rows.numel()), counts)
    shift = starts - (torch.cumsum(counts, 0) - counts)       # CSR start minus output start
    entry_ids = torch.arange(segment.numel()) + torch.repeat_interleave(shift, counts)
    return entry_ids, segment
