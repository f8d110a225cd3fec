"""Uniform neighbour sampling for non-private mini-batch training (GraphSAGE-style).

PyG's `NeighborLoader` needs ``pyg-lib`` or ``torch-sparse``;
neither has a wheel for this project's torch (2.13, CPU), so this module implements the same
sampling scheme in vectorised torch: for a batch of seed nodes, hop ``h`` samples for every
node reached in hop ``h-1`` up to ``fanouts[h]`` of its in-neighbours uniformly WITHOUT
replacement (``-1``: all of them). The batch is the subgraph formed by the sampled edges, with
the seed nodes first (``batch.n_id[:batch_size]``), like NeighborLoader's output.

Reference: Hamilton, Ying & Leskovec, "Inductive Representation Learning on Large Graphs",
NeurIPS 2017 (Algorithm 2).

Convention: ``edge_index[:, e] = (j, i)`` means ``i`` aggregates ``j``; a node's sampled
neighbours are sources ``j`` of edges into it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
from torch import Tensor
from torch_geometric.data import Data

from gnnprivacy._validation import check_int
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.nn.sparse import index_rows


def _csr_by_target(edge_index: Tensor, num_nodes: int) -> tuple[Tensor, Tensor]:
    """``(rowptr, sources)``: the edges into ``i`` come from ``sources[rowptr[i]:rowptr[i+1]]``."""
    dst = edge_index[1]
    perm = torch.argsort(dst, stable=True)
    counts = torch.bincount(dst, minlength=num_nodes)
    rowptr = torch.zeros(num_nodes + 1, dtype=torch.long)
    rowptr[1:] = torch.cumsum(counts, 0)
    return rowptr, edge_index[0, perm]


def sample_in_neighbors(rowptr: Tensor, sources: Tensor, targets: Tensor, fanout: int,
                        generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """For each target, up to ``fanout`` distinct in-edges chosen uniformly without replacement.

    Each in-edge of a target gets an independent uniform key; the ``fanout`` smallest keys per
    target win (a uniformly random subset). Cost ``O(E_t log E_t)`` for the ``E_t`` in-edges of
    the targets.

    Args:
        rowptr, sources: CSR of the graph by target node.
        targets: node ids ``(T,)``.
        fanout: maximum neighbours per target; ``-1`` keeps all in-edges.
        generator: randomness.

    Returns:
        ``(src, dst)``: the sampled edges (global node ids), grouped by target.
    """
    deg = rowptr[targets + 1] - rowptr[targets]
    seg = torch.repeat_interleave(torch.arange(targets.numel()), deg)
    start = torch.cumsum(deg, 0) - deg
    pos = rowptr[targets][seg] + torch.arange(seg.numel()) - start[seg]
    if fanout >= 0 and seg.numel():
        keys = seg.to(torch.float64) + torch.rand(seg.numel(), generator=generator,
                                                  dtype=torch.float64)
        order = torch.argsort(keys)  # stays grouped by target, random order inside a group
        rank = torch.arange(seg.numel()) - start[seg]
        keep = order[rank < fanout]
        seg, pos = seg[keep], pos[keep]
    return sources[pos], targets[seg]


def sample_subgraph(rowptr: Tensor, sources: Tensor, seeds: Tensor, fanouts: Sequence[int],
                    generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """Multi-hop neighbour sample around ``seeds``.

    Returns:
        ``(n_id, edge_index)``: the sampled nodes (seeds first, in the given order; then the
        nodes of hop 1, hop 2, ...) and the sampled edges relabelled to positions in ``n_id``.
    """
    num_nodes = rowptr.numel() - 1
    local = torch.full((num_nodes,), -1, dtype=torch.long)
    local[seeds] = torch.arange(seeds.numel())
    n_ids, srcs, dsts = [seeds], [], []
    frontier, count = seeds, seeds.numel()
    for fanout in fanouts:
        src, dst = sample_in_neighbors(rowptr, sources, frontier, fanout, generator)
        srcs.append(src)
        dsts.append(dst)
        new = torch.unique(src[local[src] < 0])
        local[new] = torch.arange(count, count + new.numel())
        count += new.numel()
        n_ids.append(new)
        frontier = new
    src, dst = torch.cat(srcs), torch.cat(dsts)
    return torch.cat(n_ids), torch.stack([local[src], local[dst]])


class NeighborBatchLoader:
    """Iterates over mini-batches of seed nodes with their sampled multi-hop neighbourhoods.

    Each batch is a `Data` with ``x``, ``y`` (and any other node
    tensor named in ``node_attrs``; a sparse CSR ``x`` stays CSR) restricted to ``n_id``, the
    relabelled ``edge_index``, ``n_id`` (global ids) and ``batch_size`` (the seeds are the first ``batch_size`` nodes).
    Iterating again draws a new shuffle and new samples from the same ``generator``.

    Args:
        data: graph with ``x``, ``edge_index`` (and ``y``).
        input_nodes: seed nodes (a boolean mask or an index tensor).
        fanouts: neighbours per hop (``-1``: all).
        batch_size: seeds per batch.
        shuffle: shuffle the seeds at every pass.
        generator: randomness of shuffling and sampling.
        node_attrs: node-level attributes copied into each batch.
    """

    def __init__(self, data: Data, input_nodes: Tensor, *, fanouts: Sequence[int],
                 batch_size: int, shuffle: bool = True, generator: torch.Generator | None = None,
                 node_attrs: Sequence[str] = ("x", "y")):
        self.fanouts = [check_int("fanout", f, low=-1) for f in fanouts]
        if not self.fanouts or 0 in self.fanouts:
            raise InvalidParameterError("fanouts", "a non-empty list of ints >= 1 or -1", fanouts)
        self.batch_size = check_int("batch_size", batch_size, low=1)
        self.data = data
        idx = input_nodes.nonzero().view(-1) if input_nodes.dtype == torch.bool else input_nodes
        self.input_nodes = idx.to(torch.long)
        self.shuffle = shuffle
        self.generator = generator
        self.node_attrs = [a for a in node_attrs if getattr(data, a, None) is not None]
        self._rowptr, self._sources = _csr_by_target(data.edge_index, data.num_nodes)

    def __len__(self) -> int:
        return -(-self.input_nodes.numel() // self.batch_size)

    def __iter__(self) -> Iterator[Data]:
        seeds = self.input_nodes
        if self.shuffle:
            seeds = seeds[torch.randperm(seeds.numel(), generator=self.generator)]
        for chunk in seeds.split(self.batch_size):
            n_id, edge_index = sample_subgraph(self._rowptr, self._sources, chunk, self.fanouts,
                                               self.generator)
            batch = Data(edge_index=edge_index, n_id=n_id, batch_size=chunk.numel(),
                         num_nodes=n_id.numel())
            for attr in self.node_attrs:
                batch[attr] = index_rows(self.data[attr], n_id)
            yield batch

    def __repr__(self) -> str:
        return (f"NeighborBatchLoader(seeds={self.input_nodes.numel()}, fanouts={self.fanouts}, "
                f"batch_size={self.batch_size}, shuffle={self.shuffle})")


def parse_fanouts(fanout: str | int | Sequence[int], num_layers: int) -> list[int]:
    """Fan-outs per hop from ``"10,10"``, ``10`` or ``[10, 10]``; a single value is repeated.

    Raises:
        InvalidParameterError: malformed string, a value that is 0 or below -1, or a length
            other than 1 or ``num_layers``.
    """
    expected = f"1 or {num_layers} comma-separated integers >= 1 (or -1 for all neighbours)"
    if isinstance(fanout, str):
        try:
            values = [int(v) for v in fanout.replace(" ", "").split(",")]
        except ValueError:
            raise InvalidParameterError("fanout", expected, fanout) from None
    elif isinstance(fanout, int):
        values = [fanout]
    else:
        values = list(fanout)
    if len(values) == 1:
        values = values * num_layers
    if len(values) != num_layers or any(v == 0 or v < -1 for v in values):
        raise InvalidParameterError("fanout", expected, fanout)
    return values


__all__ = ["NeighborBatchLoader", "parse_fanouts", "sample_in_neighbors", "sample_subgraph"]
