r"""DP-GNN's degree-bounded subgraphs with the graph sharded over the ranks
(``sampler="degree_bounded"`` of `gnnprivacy.training.sharded.make_private_sharded`).

What one process does in `DegreeBoundedSubgraphs` (with ``sampling_stream="counter"``), each
rank does for its part of `gnnprivacy.datasets.shards.partition_graph`, with the same result:

1. **the degree bounding** (once, at set-up): DP-GNN's greedy pass with the scan order and the
   neighbour orders keyed by node (`CounterRandom`, rank 0's seed), computed in rounds
   (`gnnprivacy.sampling.bounded_rounds`): per round each rank proposes, for each of its nodes
   that is not full, its smallest undecided edge; the proposals and the "full" notices for
   nodes of other ranks travel in one all-to-all; an edge proposed by both ends is kept. The
   bounded graph is the sequential pass's (every rank keeps its own nodes' bounded
   neighbours, at most ``D`` each, in a ``(n_k, D)`` table);
2. **the batch** (each step): the ``m`` training nodes with the smallest keys keyed by
   ``(step, node)`` (``"fixed"``: each rank sends its ``m`` smallest keys in one all-gather
   and keeps its nodes at or below the global ``m``-th), or those below ``m / N``
   (``"poisson"``); a rank's centres are its own nodes of the sample;
3. **the K-hop neighbourhoods**: each hop and the induced edges read the bounded neighbours of
   nodes on other ranks from their tables (`fetch_rows`, ``K + 1`` exchanges a step), then the
   features of every node of the rank's subgraphs;
4. **clipping, noise, release**: each rank clips its subgraphs, rank 0 adds ONE noise draw,
   one ``all_reduce``, one ledger entry per step (`DistributedDPEngine`).

The occurrence bound ``M_K`` is computed from ``D`` and ``K`` (`occurrence_bound`) on every rank,
as in one process; the bounded graph being the same, so is every node's occurrence.

*Privacy.* The single-process ``DegreeBoundedSubgraphs(sampling_stream="counter")`` run's with
the same seed: unit node, DP-GNN's multi-term amplified Gaussian with the occurrence bound; the
greedy pass reads the raw graph (unaccounted, as in one process). The ranks are one trusted
party (a rank reads the rows it fetches).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor

from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.sampling.bounded_rounds import PartRounds
from gnnprivacy.sampling.counter_rng import CounterRandom
from gnnprivacy.training.distributed import rank_and_world
from gnnprivacy.training.private.samplers import DegreeBoundedSubgraphs
from gnnprivacy.training.sharded_parts import _all_to_all_v, _ShardedSubgraphs, fetch_rows

__all__ = ["ShardedDegreeBoundedSubgraphs", "bound_part"]


def bound_part(part, rng: CounterRandom, *, max_degree: int, bound_all_nodes: bool
               ) -> tuple[np.ndarray, int]:
    """This rank's side of the degree bounding (module docstring, 1): every rank calls it.

    Args:
        part: this rank's `_Part` (a symmetric graph's part).
        rng: the pass's keyed stream (the same on every rank).
        max_degree: ``D``.
        bound_all_nodes: scan the non-training nodes too (more than one hop).

    Returns:
        ``(table, rounds)``: the ``(n_k, D)`` bounded neighbours of the part's nodes (``-1``
        padding) and the number of rounds.
    """
    shard = part.shard
    rank, world = rank_and_world()
    rounds = PartRounds(np.asarray(shard.nodes), np.asarray(shard.indptr),
                        np.asarray(shard.src), part=rank, rng=rng, max_degree=max_degree,
                        is_train=lambda ids: np.asarray(shard.train_mask[ids], dtype=bool),
                        owner=lambda ids: np.asarray(shard.owner[ids], dtype=np.int64),
                        bound_all_nodes=bound_all_nodes, num_nodes=shard.num_nodes)
    # each round decides the globally smallest undecided edge within two rounds
    limit = 2 * int(shard.meta["num_edges"]) + 10
    while True:
        active = torch.tensor([rounds.active()], dtype=torch.long)
        if world > 1:
            dist.all_reduce(active)
        if not int(active):
            break
        if rounds.rounds > limit:                  # pragma: no cover - ranks that disagree
            raise RuntimeError(f"rank {rank}: the degree bounding did not end in {limit} "
                               "rounds (the ranks disagree on the partition or the seed)")
        tgt, src, kind = rounds.outgoing()
        if world > 1:
            dest = np.asarray(shard.owner[tgt], dtype=np.int64) if tgt.size else tgt
            order = np.argsort(dest, kind="stable")
            send = torch.from_numpy(np.stack([tgt, src, kind], 1)[order].copy())
            sizes = np.bincount(dest, minlength=world).tolist()
            ones = [1] * world
            got = _all_to_all_v(torch.tensor(sizes, dtype=torch.long), ones, ones).tolist()
            recv = _all_to_all_v(send, sizes, got).numpy()
            tgt, src, kind = recv[:, 0], recv[:, 1], recv[:, 2]
        rounds.incoming(tgt, src, kind)
    return rounds.table(), rounds.rounds


class ShardedDegreeBoundedSubgraphs(_ShardedSubgraphs, DegreeBoundedSubgraphs):
    """`DegreeBoundedSubgraphs` on this rank's part (``sampler="degree_bounded"`` of
    `make_private_sharded`; module docstring). Options as `DegreeBoundedSubgraphs`; the
    stream is always ``"counter"``.

    Attributes (after set-up): ``bounding_rounds_`` (rounds of the bounding), ``exchange_``
    (bytes sent: adjacency rows and features; remote feature rows).
    """

    def __init__(self, *, max_degree: int | None = None, hops: int | None = None,
                 sampling: str = "fixed", sampling_stream: str = "counter"):
        if sampling_stream != "counter":
            raise InvalidParameterError("sampling_stream", "'counter' (sharded sampling keys "
                                        "every trial by node)", sampling_stream)
        super().__init__(max_degree=max_degree, hops=hops, sampling=sampling,
                         sampling_stream="counter")

    def setup(self, data, *, model: torch.nn.Module | None = None,
              generator: torch.Generator | None = None) -> None:
        _ShardedSubgraphs.setup(self, data, model=model, generator=generator)
        if data.meta.get("symmetric") is False:
            raise InvalidParameterError(
                "shards", "the partition of an undirected graph (DP-GNN bounds the symmetrised "
                "graph; symmetrise the edges, e.g. torch_geometric.utils.to_undirected, and "
                "partition again)", "a directed graph")
        self._set_bounds(model)
        self._table, self.bounding_rounds_ = bound_part(
            self._part, self._bounding_random(generator), max_degree=self.max_degree_,
            bound_all_nodes=self.hops_ > 1)

    def _assemble(self, nodes, seg, first, num, edges):
        ids = torch.unique(nodes)
        self._fetched = (ids, fetch_rows(self._part, ids, self.exchange_))
        return super()._assemble(nodes, seg, first, num, edges)

    def _kth_key(self, u: Tensor, m: int) -> float:
        """The global ``m``-th smallest key: each rank's ``m`` smallest, gathered."""
        world = rank_and_world()[1]
        mine = torch.sort(u).values[:m]
        if world == 1:
            return float(mine[m - 1]) if mine.numel() >= m else float("inf")
        box = torch.full((m,), float("inf"), dtype=torch.float64)
        box[:mine.numel()] = mine
        everyone = [torch.empty_like(box) for _ in range(world)]
        dist.all_gather(everyone, box)
        self.exchange_["bytes_sent"] += 8 * m * (world - 1)
        return float(torch.kthvalue(torch.cat(everyone), m).values)

    def _neighbours(self, nodes: Tensor) -> tuple[Tensor, Tensor]:
        """Bounded neighbours from the tables: own nodes' here, the others' fetched (every
        rank calls it as often as the others: ``hops + 1`` times a step)."""
        table = fetch_rows(self._part, nodes, self.exchange_, table=self._table)
        valid = table >= 0
        rep = torch.arange(nodes.numel()).repeat_interleave(valid.sum(1))
        return rep, table[valid]
