"""``StarBatch``: a batch of 1-hop star sub-graphs, stored CSR-style.

A star has one centre ``i`` and peripheral nodes ``j`` with edges ``j -> i`` (spec 000 §3.2
note (d)): the centre aggregates its peripherals. The batch stores

* ``centers`` (B,): the centre of each sub-graph;
* ``periph_nodes`` (E_b,) and ``periph_subgraph`` (E_b,): peripheral node ids and the index
  (into ``centers``) of the sub-graph each belongs to, grouped by sub-graph (non-decreasing
  ``periph_subgraph``), so that ``periph_subgraph`` doubles as a CSR segment id.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from gnnprivacy._validation import check_int
from gnnprivacy.errors import InvalidParameterError


@dataclass(frozen=True, eq=False, repr=False)
class StarBatch:
    """A batch of star sub-graphs (one per centre).

    Attributes:
        centers: (B,) int64 centre node ids.
        periph_nodes: (E_b,) int64 peripheral node ids.
        periph_subgraph: (E_b,) int64 index into ``centers``, non-decreasing.
        num_subgraphs: ``B`` (kept explicitly so an empty batch is unambiguous).
        node_ids: for a batch renumbered into the rows of a feature slice (a sharded step),
            the graph's node id of each local id; ``None`` when the ids are the graph's.
    """

    centers: Tensor
    periph_nodes: Tensor
    periph_subgraph: Tensor
    num_subgraphs: int
    node_ids: Tensor | None = None

    def __post_init__(self) -> None:
        if self.centers.shape != (self.num_subgraphs,):
            raise InvalidParameterError("centers", f"shape ({self.num_subgraphs},)",
                                        tuple(self.centers.shape), where="StarBatch")
        if self.periph_nodes.shape != self.periph_subgraph.shape or self.periph_nodes.dim() != 1:
            raise InvalidParameterError("periph_subgraph", "a 1-D tensor shaped like periph_nodes",
                                        tuple(self.periph_subgraph.shape), where="StarBatch")

    @property
    def num_peripherals(self) -> int:
        """Total number of (centre, peripheral) pairs ``E_b``."""
        return int(self.periph_nodes.numel())

    def degrees(self) -> Tensor:
        """Number of peripherals of each sub-graph, shape (B,)."""
        return torch.bincount(self.periph_subgraph, minlength=self.num_subgraphs)

    def rowptr(self) -> Tensor:
        """CSR pointer (B+1,): peripherals of sub-graph ``b`` are ``periph_nodes[rowptr[b]:rowptr[b+1]]``."""
        ptr = torch.zeros(self.num_subgraphs + 1, dtype=torch.long)
        ptr[1:] = torch.cumsum(self.degrees(), 0)
        return ptr

    def star_edge_index(self) -> Tensor:
        """Global (2, E_b) ``edge_index`` of the stars: columns ``(j, i)`` = edge ``j -> centre i``."""
        return torch.stack([self.periph_nodes, self.centers[self.periph_subgraph]])

    def to_padded(self, max_len: int | None = None) -> tuple[Tensor, Tensor]:
        """Dense (B, L) node-index layout: slot 0 the centre, then its peripherals, then -1.

        Args:
            max_len: width ``L`` (centre slot included). ``None`` uses ``1 + max degree``.
                Nothing is ever truncated: a width too small for some sub-graph is an error.

        Returns:
            ``(nodes, mask)``: int64 (B, L) ids with -1 padding, and the bool mask ``nodes >= 0``.

        Raises:
            InvalidParameterError: ``max_len`` smaller than ``1 + max degree``.
        """
        deg = self.degrees()
        need = 1 + (int(deg.max()) if self.num_subgraphs > 0 else 0)
        width = need if max_len is None else check_int("max_len", max_len, low=1, where="StarBatch.to_padded")
        if width < need:
            raise InvalidParameterError("max_len", f"an integer >= 1 + max degree = {need} (no truncation)",
                                        max_len, where="StarBatch.to_padded")
        nodes = torch.full((self.num_subgraphs, width), -1, dtype=torch.long)
        nodes[:, 0] = self.centers
        starts = self.rowptr()[:-1]
        slot = torch.arange(self.num_peripherals) - starts[self.periph_subgraph] + 1
        nodes[self.periph_subgraph, slot] = self.periph_nodes
        return nodes, nodes >= 0

    def __repr__(self) -> str:
        return (f"StarBatch(num_subgraphs={self.num_subgraphs}, "
                f"num_peripherals={self.num_peripherals})")


@dataclass(frozen=True, eq=False, repr=False)
class PaddedStarBatch:
    """A batch of star sub-graphs in buffers of a fixed size (the GPU path's batch).

    The same fields as `StarBatch`, padded: ``centers`` ``(C,)`` and the peripheral
    arrays ``(P,)`` have fixed capacities; ``center_mask`` and ``periph_mask`` mark the real
    entries (padding reads node 0 and sub-graph 0 and must be weighted by the masks).
    ``count`` is the realised number of sub-graphs as a 0-dim tensor on the device, so
    nothing about the batch has to be read on the host during a step.

    Attributes:
        centers: (C,) centre ids, ascending over the real entries.
        center_mask: (C,) bool, the first ``count`` entries.
        periph_nodes: (P,) peripheral ids; periph_subgraph: (P,) index into ``centers``,
            non-decreasing over the real entries; periph_mask: (P,) bool.
        count: 0-dim int64 tensor.
    """

    centers: Tensor
    center_mask: Tensor
    periph_nodes: Tensor
    periph_subgraph: Tensor
    periph_mask: Tensor
    count: Tensor

    @property
    def num_subgraphs(self) -> int:
        """The capacity ``C`` (number of slots, real or padding)."""
        return int(self.centers.numel())

    def compact(self) -> StarBatch:
        """The real entries as a `StarBatch` (reads the masks on the host)."""
        keep = self.periph_mask
        num = int(self.count)
        return StarBatch(self.centers[:num], self.periph_nodes[keep], self.periph_subgraph[keep],
                         num)

    def __repr__(self) -> str:
        return (f"PaddedStarBatch(capacity_centers={self.num_subgraphs}, "
                f"capacity_peripherals={int(self.periph_nodes.numel())})")


def empty_star_batch() -> StarBatch:
    """A batch with no sub-graph (spec 000 §3.2 (f): the step still happens)."""
    e = torch.zeros(0, dtype=torch.long)
    return StarBatch(e, e.clone(), e.clone(), 0)
