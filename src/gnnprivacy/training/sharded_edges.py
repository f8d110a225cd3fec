"""Edge-level DP over shards: ``make_private_sharded(sampler="edges")``.

`EdgeSubgraphs` on this rank's part of `gnnprivacy.datasets.shards.partition_graph`, for
one message-passing layer (``K = 1``): each training node is a centre with probability
``q``, its trial keyed by ``(seed, step, node id)`` (the ``"counter"`` stream), so the union
of the ranks' centres IS the single-process sample of ``EdgeSubgraphs(sampling_stream=
"counter")``; a centre's subgraph is its star of every in-entry (self-loops and duplicates
dropped, as `clean_graph` drops them), read from the part's in-edges (a centre's in-edges
are all in its owner's part), and the neighbours' feature rows are fetched from their
owners. The subgraphs are those of the single process, so the clipped sums, the one noise
draw (rank 0), the event per step (`EdgeSubgraphDpEvent`, occurrence 2 for an undirected
edge, 1 for a directed one) and the ledger are that run's.

Not over shards yet: ``K >= 2`` (its out-degree bounding reads the sources' entries, which
live on other ranks), ``max_in_degree``, the edge-private inference release
(``inference="noisy"``: it runs the model on the whole graph) and edge attributes. The
default inference here is ``"none"``: the epsilon covers the parameters, and predictions on
the private graph are outside it (said in ``privacy.unaccounted``).

*Privacy.* Unit edge, add/remove, features and labels public, as `EdgeSubgraphs`; the ranks
are one trusted party (a rank reads the feature rows it fetches and, inside the reduction,
the other ranks' clipped sums).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor

from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.training.distributed import rank_and_world
from gnnprivacy.training.private.edge_sampler import EdgeSubgraphs
from gnnprivacy.training.private.samplers import _message_passing_depth
from gnnprivacy.training.sharded_parts import _ShardedSubgraphs, fetch_rows

__all__ = ["ShardedEdgeSubgraphs"]


class ShardedEdgeSubgraphs(_ShardedSubgraphs, EdgeSubgraphs):
    """`EdgeSubgraphs` on this rank's part (``sampler="edges"`` of `make_private_sharded`;
    module docstring). Options as `EdgeSubgraphs`, with ``inference`` ``"none"`` (default)
    or ``"unprotected"``; the stream is always ``"counter"``.

    Raises:
        InvalidParameterError: an option or model the sharded path does not cover yet
            (module docstring), naming it.
    """

    def __init__(self, **options: Any):
        stream = options.pop("sampling_stream", "counter")
        if stream != "counter":
            raise InvalidParameterError("sampling_stream", "'counter' (sharded sampling keys "
                                        "every trial by node)", stream)
        options.setdefault("inference", "none")
        if options["inference"] == "noisy":
            raise InvalidParameterError(
                "inference", "'none' or 'unprotected' over shards (the edge-private release "
                "runs the model on the whole graph, which no rank holds)", "noisy")
        if options.get("max_in_degree") is not None:
            raise InvalidParameterError("max_in_degree", "None over shards (not yet sharded)",
                                        options["max_in_degree"])
        super().__init__(sampling_stream="counter", **options)

    def setup(self, data, *, model: torch.nn.Module | None = None,
              generator: torch.Generator | None = None) -> None:
        _ShardedSubgraphs.setup(self, data, model=model, generator=generator)
        self.hops_ = _message_passing_depth(model) if self.hops is None else self.hops
        if self.hops_ != 1:
            raise InvalidParameterError(
                "model", "one message-passing layer for sampler='edges' over shards (K >= 2 "
                "needs the out-degree bounding, which is not sharded yet; train it with "
                "make_private in one process)", f"{self.hops_} layers")
        symmetric = data.meta.get("symmetric")
        self.undirected_ = (bool(symmetric) if self.edge_unit == "auto"
                            else self.edge_unit == "undirected")
        if self.undirected_ and symmetric is False:
            raise InvalidParameterError("edge_unit", "'directed' or 'auto' for the partition "
                                        "of a directed graph", self.edge_unit)
        self.max_out_degree_ = None
        entries, loops = self._count_entries()
        self.num_units = entries // 2 if self.undirected_ else entries
        self.entries_dropped_, self.self_loops_dropped_ = 0, loops

    def _count_entries(self) -> tuple[int, int]:
        """The graph's distinct entries without self-loops, and its self-loop entries (every
        part counts the in-edges of its own nodes; one ``all_reduce``)."""
        part = self._part
        rows = torch.arange(int(part.indptr.numel()) - 1)
        src, sub = part.in_edges(rows)
        dst = torch.from_numpy(np.asarray(part.shard.nodes, dtype=np.int64))[sub]
        loop = src == dst
        n = self.num_nodes
        counts = torch.tensor([int(torch.unique(dst[~loop] * n + src[~loop]).numel()),
                               int(loop.sum())], dtype=torch.long)
        if rank_and_world()[1] > 1:
            dist.all_reduce(counts)
        return int(counts[0]), int(counts[1])

    def subgraphs(self, centres: Tensor) -> Any:
        """The one-hop stars of this rank's ``centres``, read from the part's in-edges
        (self-loops and duplicates dropped, as `clean_graph` drops them in one process),
        laid out by `EdgeSubgraphs._entries_batch` as in one process."""
        n, num = self.num_nodes, int(centres.numel())
        src, sub = self._part.in_edges(self._part.lookup("local", centres).long())
        keep = src != centres[sub]
        entries = torch.unique(sub[keep] * n + src[keep])     # by (subgraph, source)
        sub, src = entries // n, entries % n
        keys = torch.cat([torch.arange(num) * n + centres, sub * n + src])
        return self._entries_batch(keys, sub * n + src, sub * n + centres[sub], num)

    def _assemble(self, nodes, seg, first, num, edges):
        ids = torch.unique(nodes)
        self._fetched = (ids, fetch_rows(self._part, ids, self.exchange_))
        return super()._assemble(nodes, seg, first, num, edges)

    def __repr__(self) -> str:
        return (f"ShardedEdgeSubgraphs(hops={self.hops!r}, edge_unit={self.edge_unit!r}, "
                f"inference={self.inference!r})")
