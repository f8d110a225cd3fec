"""Private inference for star GNNs with one independent random stream per query node.

Spec 000 §4.4 (and §3.5): a query node ``u`` aggregates up to ``N_test`` neighbours drawn
uniformly without replacement among the *non-sensitive* nodes only:

```
I_u = { j in NB(u) : j allowed (not a training node), j != u }
N_u = the min(N_test, |I_u|) members of I_u with the smallest keys  key(seed, u, j)
```

The keys come from a counter-based generator
(`gnnprivacy.sampling.counter_rng.keyed_uniform`) keyed by ``(seed, u, j)``, so the
choice for ``u`` is a function of ``u``'s allowed neighbours alone: it does not depend on
how many other queries were answered before it, on their order, or on any edge that
touches a training node. (The earlier default drew all queries from one stateful stream,
so removing training edges shifted the draws of unrelated test nodes: 8 of 1000 test
predictions changed.) Sorting i.i.d. uniform keys and keeping the ``k`` smallest is a
uniform ``k``-subset.

Queries are processed in chunks of ``chunk_size`` nodes: only the features of the nodes a
chunk touches are gathered and transformed, so the working set is bounded by the chunk,
not by the graph.

*Privacy.* Nothing is spent: a prediction reads the released DP model and the features of
the query node and of non-training nodes (post-processing, spec 000 §4.4). Training nodes
are never aggregated (``allowed`` must exclude them; a clash raises). Unit node, relation
add/remove, no event.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from gnnprivacy._validation import check_int
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.sampling._graph import CleanGraph, clean_graph, gather_segments, node_ids, node_mask
from gnnprivacy.sampling.counter_rng import keyed_uniform
from gnnprivacy.sampling.star_batch import StarBatch

__all__ = ["INFERENCE_STREAM", "keyed_inference_stars", "keyed_pick", "private_star_logits"]

#: stream id separating the inference keys from any other keyed draw
INFERENCE_STREAM = 0x1F3E
_WHERE = "private inference"


def keyed_inference_stars(graph: CleanGraph, queries: Tensor, allowed: Tensor, *, fanout: int,
                          seed: int) -> StarBatch:
    """Stars of ``queries`` (ids, in order) with up to ``fanout`` keyed neighbours each.

    Args:
        graph: the cleaned whole graph (``clean_graph``; column ``(j, u)``: ``u`` reads ``j``).
        queries: ``(Q,)`` node ids.
        allowed: ``(N,)`` bool mask of the nodes that may be aggregated.
        fanout: ``N_test >= 0``.
        seed: non-negative integer key of the inference randomness.
    """
    edge_ids, sub = gather_segments(graph.rowptr, queries)
    src = graph.src[edge_ids]
    ok = allowed[src] & (src != queries[sub])
    return keyed_pick(queries, src[ok], sub[ok], fanout=fanout, seed=seed)


def keyed_pick(queries: Tensor, src: Tensor, sub: Tensor, *, fanout: int,
               seed: int) -> StarBatch:
    """Stars of ``queries`` from their candidate neighbours ``src`` (query slot ``sub``,
    already restricted to allowed nodes other than the query): the ``fanout`` candidates
    with the smallest keys ``key(seed, u, j)`` per query (`keyed_inference_stars`)."""
    keys = keyed_uniform(int(seed), INFERENCE_STREAM, queries[sub], src)
    order = torch.argsort(keys)
    order = order[torch.sort(sub[order], stable=True).indices]
    src, sub = src[order], sub[order]
    counts = torch.bincount(sub, minlength=queries.numel())
    starts = torch.cumsum(counts, 0) - counts
    take = (torch.arange(sub.numel()) - starts[sub]) < fanout
    return StarBatch(queries, src[take], sub[take], int(queries.numel()))


def private_star_logits(model: Callable[[Tensor, StarBatch], Tensor], x: Tensor,
                        edge_index: Tensor, *, queries: Tensor, allowed: Tensor,
                        forbidden: Tensor | None, fanout: int, seed: int,
                        transform: Callable[[Tensor], Tensor] = lambda t: t,
                        device: torch.device | str = "cpu",
                        chunk_size: int = 65536) -> Tensor:
    """Logits ``(Q, C)`` of ``queries`` by keyed private inference, in chunks.

    Args:
        model: ``model(x_rows, star_batch) -> logits`` (a `StarGNN`).
        x: ``(N, d)`` raw features (CPU); only the rows a chunk reads are transformed.
        edge_index: ``(2, E)`` whole graph.
        queries: node ids or bool mask of the nodes to predict (kept in order).
        allowed: nodes that may be aggregated (mask or ids).
        forbidden: nodes that must never be aggregated (the training nodes), or ``None``.
        fanout: ``N_test``.
        seed: key of the inference randomness (non-negative int).
        transform: per-row feature preprocessing applied to the gathered rows.
        device: where the model runs.
        chunk_size: queries per chunk (bounds the working set).

    Raises:
        InvalidParameterError: bad graph, node sets, fanout, seed, or ``allowed`` meeting
            ``forbidden``.
    """
    k = check_int("fanout", fanout, low=0, where=_WHERE)
    seed = check_int("seed", seed, low=0, where=_WHERE)
    chunk = check_int("chunk_size", chunk_size, low=1, where=_WHERE)
    n = int(x.shape[0])
    graph = clean_graph(edge_index, n, where=_WHERE)
    q = node_ids(queries, n, name="queries", where=_WHERE, keep_order=True)
    allowed_mask = node_mask(allowed, n, name="allowed", where=_WHERE)
    if forbidden is not None:
        clash = allowed_mask & node_mask(forbidden, n, name="forbidden", where=_WHERE)
        if bool(clash.any()):
            raise InvalidParameterError(
                "allowed", "a node set disjoint from the training nodes",
                f"{int(clash.sum())} training node(s), e.g. {int(clash.nonzero()[0])}",
                where=_WHERE)
    outs = []
    with torch.no_grad():
        for part in q.split(chunk):
            stars = keyed_inference_stars(graph, part, allowed_mask, fanout=k, seed=seed)
            b = stars.num_subgraphs
            ids, inv = torch.unique(torch.cat([stars.centers, stars.periph_nodes]),
                                    return_inverse=True)
            local = StarBatch(inv[:b].to(device), inv[b:].to(device),
                              stars.periph_subgraph.to(device), b)
            outs.append(model(transform(x[ids]).to(device), local).cpu())
    if not outs:
        raise InvalidParameterError("queries", "at least one node", 0, where=_WHERE)
    return torch.cat(outs)
