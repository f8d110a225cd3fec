"""A rank's part of a sharded graph and what crosses between the ranks (the building blocks
of `gnnprivacy.training.sharded` and of the sharded samplers).

* `open_part`: every rank opens its own part and the ranks agree on the outcome, so a bad
  part is the same `InvalidParameterError` on every rank;
* `collective_guard`: a collective that fails because a peer stopped or went silent becomes
  one `ShardedRunError` line naming the rank and the step;
* `exchange_rows` / `fetch_rows`: rows of other ranks' tables (features, or any per-node
  table such as a bounded adjacency) by ``torch.distributed`` all-to-all;
* `rank_zero_seed`: the counter stream's seed, rank 0's on every rank.

Privacy: none by themselves (the ranks are one trusted party: a rank reads the rows it
fetches).
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor
from torch_geometric.data import Data

from gnnprivacy.datasets.shards import Shard, open_shard
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.sampling._graph import gather_segments
from gnnprivacy.sampling.counter_rng import CounterRandom, counter_seed
from gnnprivacy.sampling.heter_poisson import STREAM_CENTRAL, STREAM_NEIGHBOR
from gnnprivacy.sampling.star_batch import StarBatch
from gnnprivacy.training.distributed import rank_and_world
from gnnprivacy.training.node_dp.common import FeatureNorm
from gnnprivacy.training.private.samplers import SubgraphSampler

__all__ = ["ShardedRunError", "collective_guard", "exchange_rows", "fetch_rows",
           "is_collective_failure", "new_exchange", "open_part", "rank_zero_seed",
           "sample_part_stars"]


def rank_zero_seed(generator: torch.Generator) -> int:
    """The counter stream's seed: one draw of ``generator`` (`counter_seed`), rank 0's
    broadcast to every rank (so an OS-seeded generator in secure mode gives one stream)."""
    seed = counter_seed(generator)
    if rank_and_world()[1] > 1:
        box = torch.tensor([seed], dtype=torch.long)
        dist.broadcast(box, src=0)
        seed = int(box)
    return seed


class ShardedRunError(RuntimeError):
    """A collective of a sharded run failed: another rank stopped or did not answer in time."""


#: words of the errors a failed collective raises (gloo, NCCL, the store): a peer gone or late
_COLLECTIVE_WORDS = ("gloo", "nccl", "connection", "timed out", "timeout", "peer", "socket",
                     "broken pipe")


def is_collective_failure(exc: BaseException) -> bool:
    """Whether ``exc`` comes from a collective whose peers stopped or did not answer (and
    not, say, from the model: those pass through unchanged)."""
    if isinstance(exc, ShardedRunError):
        return False
    dist_error = getattr(dist, "DistError", None)
    if dist_error is not None and isinstance(exc, dist_error):
        return True
    text = str(exc).lower()
    return any(word in text for word in _COLLECTIVE_WORDS)


@contextlib.contextmanager
def collective_guard(step):
    """Turn a failed collective (a peer gone or silent past the group's timeout) inside the
    block into one `ShardedRunError` line naming this rank and the step (``step``: an int,
    ``None`` before training, or a callable giving it when the failure happens); other
    errors pass through."""
    try:
        yield
    except RuntimeError as exc:
        if not dist.is_initialized() or not is_collective_failure(exc):
            raise
        rank, world = rank_and_world()
        now = step() if callable(step) else step
        at = (f"at step {now}" if isinstance(now, int) else "before the first step"
              if now is None else f"while {now}")
        raise ShardedRunError(
            f"rank {rank} of {world}: a collective failed {at} (another rank stopped, or did "
            "not answer within the process group's timeout); the run is not finished "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from exc


def open_part(shards, opener=None):
    """This rank's part of ``shards`` (a folder, or this rank's part already opened), opened
    on every rank of the group together: each rank checks its own part (``opener(folder,
    rank, world_size=world)``, `open_shard` by default), the ranks exchange the outcome, and
    if any part failed every rank raises the same `InvalidParameterError` naming the first
    failing rank, so no rank is left waiting in a collective for one that stopped.

    Raises:
        InvalidParameterError: a partition into another number of parts than ranks, or a part
            that is missing, damaged or from another partition (on every rank).
        ShardedRunError: another rank stopped before answering.
    """
    from gnnprivacy.datasets.graph_shards import GraphShard

    rank, world = rank_and_world()
    opener = opener or open_shard
    failure = None
    part = None
    try:
        if isinstance(shards, (Shard, GraphShard)):
            part = shards
            if part.num_parts != world or part.part != rank:
                raise InvalidParameterError(
                    "shards", f"part {rank} of a partition into {world} part(s), one per rank",
                    f"part {part.part} of {part.num_parts}")
        else:
            part = opener(shards, rank, world_size=world)
    except InvalidParameterError as exc:
        received = exc.received if isinstance(exc.received, (str, int, float)) else \
            str(exc.received)
        failure = (exc.name, exc.expected, received)
    failures = [failure]
    if world > 1:
        failures = [None] * world
        with collective_guard(None):
            dist.all_gather_object(failures, failure)
    for r, found in enumerate(failures):
        if found is not None:
            raise InvalidParameterError(*found, where=f"rank {r} of {world}")
    return part


def _unsupported(exc: Exception) -> bool:
    text = str(exc).lower()
    return "not supported" in text or "unsupported" in text or "not implemented" in text


def _all_to_all_v(send: Tensor, send_sizes: list[int], recv_sizes: list[int]) -> Tensor:
    """Uneven all-to-all of rows: ``send`` holds the rows for rank ``p`` in block ``p``
    (``send_sizes[p]`` rows); returns the blocks received from every rank, in rank order.
    ``all_to_all_single`` with split sizes (gloo and NCCL have it), or paired point-to-point
    sends where a backend lacks it."""
    out = send.new_empty((sum(recv_sizes),) + tuple(send.shape[1:]))
    if getattr(_all_to_all_v, "native", True):
        try:
            dist.all_to_all_single(out, send, recv_sizes, send_sizes)
            return out
        except (RuntimeError, NotImplementedError) as exc:
            if not _unsupported(exc):
                raise
            _all_to_all_v.native = False  # type: ignore[attr-defined]
    rank = dist.get_rank()
    outs, ins = out.split(recv_sizes), send.split(send_sizes)
    ops = []
    for peer in range(dist.get_world_size()):
        if peer == rank:
            outs[peer].copy_(ins[peer])
        else:
            ops += [dist.P2POp(dist.isend, ins[peer].contiguous(), peer),
                    dist.P2POp(dist.irecv, outs[peer], peer)]
    for work in dist.batch_isend_irecv(ops) if ops else []:
        work.wait()
    return out


def exchange_rows(requests: list[Tensor], table: np.ndarray) -> tuple[Tensor, int]:
    """Fetch rows of the other ranks' ``table`` (every rank calls it once per step).

    Args:
        requests: per rank ``p``, the rows of ``p``'s table this rank needs (int64; the own
            rank's entry is ignored).
        table: this rank's ``(n_k, F)`` rows (a memory map is fine).

    Returns:
        ``(rows, bytes_sent)``: ``rows`` stacks ``table_p[requests[p]]`` for ``p`` in rank
        order (the own rank's block empty); ``bytes_sent`` counts what this rank put on the
        wire (its request counts and row ids, and the rows it served).
    """
    rank, world = rank_and_world()
    requests = [r if p != rank else r[:0] for p, r in enumerate(requests)]
    ask = [int(r.numel()) for r in requests]
    ones = [1] * world
    counts = _all_to_all_v(torch.tensor(ask, dtype=torch.long), ones, ones).tolist()
    asked = _all_to_all_v(torch.cat(requests), ask, counts)
    served = torch.from_numpy(np.ascontiguousarray(table[asked.numpy()]))
    rows = _all_to_all_v(served.reshape((asked.numel(),) + tuple(table.shape[1:])), counts, ask)
    sent = 8 * (world - 1) + 8 * sum(ask) + served.numel() * served.element_size()
    return rows, int(sent)


def _feature_norm(requested: str, shard: Shard) -> FeatureNorm:
    """`FeatureNorm` over all parts: a standardisation's moments (float64 sums over this
    part's public, or all, rows) are all-reduced; whether any node is public is the whole
    graph's."""
    train = np.asarray(shard.train_mask[np.asarray(shard.nodes)], dtype=bool)
    public_total = int(shard.meta["num_nodes"]) - int(shard.meta["num_train"])

    def reduce(moments: Tensor) -> Tensor:
        if rank_and_world()[1] > 1:
            dist.all_reduce(moments)
        return moments

    return FeatureNorm(requested).fit(shard.x, ~train, has_public=public_total > 0, reduce=reduce)


class _Part:
    """The torch-side view of a shard used by every step (small arrays loaded, large mapped)."""

    def __init__(self, shard: Shard):
        self.shard = shard
        nodes = np.asarray(shard.nodes)
        train = np.asarray(shard.train_mask[nodes], dtype=bool)
        self.cand = torch.from_numpy(nodes[train].copy())           # global ids, ascending
        self.cand_rows = torch.from_numpy(np.flatnonzero(train).astype(np.int64))
        self.indptr = torch.from_numpy(np.asarray(shard.indptr, dtype=np.int64).copy())
        self.y = torch.from_numpy(np.asarray(shard.y, dtype=np.int64).copy())

    def in_edges(self, rows: Tensor) -> tuple[Tensor, Tensor]:
        """Global sources of the in-edges of the part's ``rows`` and their row slot."""
        edge_ids, sub = gather_segments(self.indptr, rows)
        src = torch.from_numpy(np.asarray(self.shard.src[edge_ids.numpy()], dtype=np.int64))
        return src, sub

    def lookup(self, name: str, ids: Tensor) -> Tensor:
        return torch.from_numpy(np.asarray(getattr(self.shard, name)[ids.numpy()]))


def sample_part_stars(part: _Part, rng: CounterRandom, *, q_b: float, M: float,
                      peripheral_pool: str = "all_visible",
                      enforce_no_overlap: bool = True) -> tuple[StarBatch, Tensor]:
    """This rank's star sub-graphs of the global HeterPoisson sample of ``rng``'s step.

    Returns:
        ``(stars, rows)``: the stars in global node ids (centres ascending, edges
        peripheral -> centre) and the part's row of each centre.
    """
    hit = rng.uniform(STREAM_CENTRAL, part.cand) < q_b
    centers, rows = part.cand[hit], part.cand_rows[hit]
    src, sub = part.in_edges(rows)
    if peripheral_pool == "train_only":
        keep = part.lookup("train_mask", src)
        src, sub = src[keep], sub[keep]
    prob = torch.clamp(M / part.lookup("out_degree", src).to(torch.float64), max=1.0)
    kept = (rng.uniform(STREAM_NEIGHBOR, centers[sub], src) < prob).nonzero().flatten()
    src, sub = src[kept], sub[kept]
    if enforce_no_overlap and src.numel():
        central = part.lookup("train_mask", src) & (rng.uniform(STREAM_CENTRAL, src) < q_b)
        src, sub = src[~central], sub[~central]
    return StarBatch(centers, src, sub, int(centers.numel())), rows


def new_exchange() -> dict[str, int]:
    """Per-rank exchange totals: bytes sent, remote rows fetched, their features' bytes."""
    return {"bytes_sent": 0, "remote_rows": 0, "remote_feature_bytes": 0, "steps": 0}


def fetch_rows(part: _Part, ids: Tensor, exchange: dict[str, int], table=None) -> Tensor:
    """Rows of the global ``ids`` in a per-node table (``table``: this part's ``(n_k, ...)``
    rows; default its raw features): own rows read here, the others' fetched from their
    owners (`exchange_rows`; every rank calls it as often as the others). Adds the traffic
    to ``exchange`` (`new_exchange`; features also count as remote feature bytes and a
    step)."""
    rank, world = rank_and_world()
    features = table is None
    table = part.shard.x if features else table
    owner = part.lookup("owner", ids).long()
    local = part.lookup("local", ids)
    mine = owner == rank
    out = torch.empty((ids.numel(),) + tuple(table.shape[1:]),
                      dtype=torch.from_numpy(np.empty(0, dtype=table.dtype)).dtype)
    out[mine] = torch.from_numpy(np.asarray(table[local[mine].numpy()]))
    if world > 1:
        where = [(owner == p).nonzero().flatten() for p in range(world)]
        where[rank] = where[rank][:0]
        rows, sent = exchange_rows([local[w] for w in where], table)
        out[torch.cat(where)] = rows
        exchange["bytes_sent"] += sent
        if features:
            remote = int((~mine).sum())
            exchange["remote_rows"] += remote
            exchange["remote_feature_bytes"] += (remote * int(np.prod(out.shape[1:]))
                                                 * out.element_size())
    if features:
        exchange["steps"] += 1
    return out


class _ShardedSubgraphs(SubgraphSampler):
    """What the sharded samplers of `make_private_sharded` share: set up from this rank's
    `Shard` (the global sizes from its meta), the counter stream with rank 0's seed, batch
    rows read from the part or fetched from their owners."""

    sampling_stream = "counter"

    def setup(self, data: Shard, *, model: torch.nn.Module | None = None,
              generator: torch.Generator | None = None) -> None:
        if not isinstance(data, Shard):
            raise InvalidParameterError("shards", "a Shard (open_shard) or a shard folder",
                                        type(data).__name__)
        self._shard, self._part = data, _Part(data)
        self.graph = Data()                  # no rank holds the graph
        self.num_nodes = data.num_nodes
        self.num_train = int(data.meta["num_train"])
        self.train_nodes = self._part.cand    # this part's training nodes (global ids)
        self.exchange_ = new_exchange()
        self._fetched = (torch.zeros(0, dtype=torch.long), torch.zeros(0))

    def _stream_seed(self, generator: torch.Generator) -> int:
        return rank_zero_seed(generator)      # rank 0's stream (OS-seeded in secure mode)

    def _edge_keys(self) -> list[str]:
        return []

    def _rows(self, nodes: Tensor) -> tuple[Tensor, Tensor]:
        """Rows of this step's fetched features; labels of the part's own nodes, ``-1`` for
        the others' (a loss reads the centres' labels, which are all own)."""
        ids, x = self._fetched
        part = self._part
        owner = part.lookup("owner", nodes).long()
        local = part.lookup("local", nodes).long()
        mine = owner == rank_and_world()[0]
        y = torch.full((nodes.numel(),), -1, dtype=part.y.dtype)
        y[mine] = part.y[local[mine]]
        return x[torch.searchsorted(ids, nodes)], y

    def _fetch(self, ids: Tensor) -> None:
        self._fetched = (ids, fetch_rows(self._part, ids, self.exchange_))
