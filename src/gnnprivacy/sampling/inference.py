"""Private inference stars (spec 000 §3.5, §9 A20): test nodes aggregate test nodes only."""

from __future__ import annotations

import torch
from torch import Tensor

from gnnprivacy._validation import check_int
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.sampling._graph import clean_graph, gather_segments, node_ids, node_mask
from gnnprivacy.sampling.star_batch import StarBatch

_WHERE = "inference_stars"


def inference_stars(edge_index: Tensor, num_nodes: int, *, query_nodes: Tensor, allowed: Tensor,
                    fanout: int = 13, generator: torch.Generator,
                    forbidden: Tensor | None = None) -> StarBatch:
    """One star per query node, with up to ``fanout`` neighbours drawn among ``allowed`` only.

    Reference: Xiang, Wang & Wang (S&P 2024) §4.4-§5 ("private inference", ``N_test``):

    ```
    I_u = { j in NB(u) : j in allowed, j != u }
    N_u = uniform subset of I_u of size min(fanout, |I_u|), without replacement
    ```

    An isolated query node (``I_u`` empty) is predicted from itself alone; it is never filled
    with random nodes. Self-loops and duplicate edges are dropped first.

    Privacy:
        None is spent: with ``allowed`` = the non-sensitive (test) nodes, prediction reads the
        released DP model and non-sensitive data only, i.e. post-processing (spec 000 §4.4).
        Unit node, relation add/remove; no event. Pass the training nodes as ``forbidden`` to
        turn a misconfigured ``allowed`` into an error instead of a silent leak.

    Args:
        edge_index: (2, E) whole graph; column ``(j, u)`` means ``u`` aggregates ``j``.
        num_nodes: number of nodes.
        query_nodes: ids (kept in order, no repeats) or bool mask of the nodes to predict.
        allowed: nodes that may be aggregated (mask or ids), e.g. the test nodes.
        fanout: ``N_test`` >= 0 (default 13).
        generator: a ``torch.Generator``.
        forbidden: nodes that must never be reachable (e.g. training nodes), optional.

    Returns:
        A `StarBatch` with ``centers == query_nodes`` (same order).

    Raises:
        InvalidParameterError: bad graph, node sets, ``fanout``, or ``allowed`` intersecting
            ``forbidden``.
    """
    if not isinstance(generator, torch.Generator):
        raise InvalidParameterError("generator", "a torch.Generator", type(generator).__name__, where=_WHERE)
    k = check_int("fanout", fanout, low=0, where=_WHERE)
    graph = clean_graph(edge_index, num_nodes, where=_WHERE)
    n = graph.num_nodes
    queries = node_ids(query_nodes, n, name="query_nodes", where=_WHERE, keep_order=True)
    allowed_mask = node_mask(allowed, n, name="allowed", where=_WHERE)
    if forbidden is not None:
        clash = allowed_mask & node_mask(forbidden, n, name="forbidden", where=_WHERE)
        if bool(clash.any()):
            raise InvalidParameterError("allowed", "a node set disjoint from `forbidden` (training nodes)",
                                        f"{int(clash.sum())} forbidden node(s), e.g. {int(clash.nonzero()[0])}",
                                        where=_WHERE)
    edge_ids, sub = gather_segments(graph.rowptr, queries)
    src = graph.src[edge_ids]
    ok = allowed_mask[src]
    src, sub = src[ok], sub[ok]
    # Random order inside each segment: sort by random key, then stably by segment.
    order = torch.argsort(torch.rand(src.numel(), generator=generator, dtype=torch.float64))
    order = order[torch.sort(sub[order], stable=True).indices]
    src, sub = src[order], sub[order]
    counts = torch.bincount(sub, minlength=queries.numel())
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.arange(sub.numel()) - starts[sub]
    take = rank < k
    return StarBatch(queries, src[take], sub[take], int(queries.numel()))
