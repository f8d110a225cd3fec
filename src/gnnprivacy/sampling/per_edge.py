"""A stateless per-edge degree-bounding sampler for DP-GNN (spec 002 §8 A2, [EXT]).

DP-GNN's greedy Algorithm 2 (`sample_degree_bounded_subgraphs`)
scans nodes in order, so removing one node can change sub-graphs far from it (spec 002 §8
A2: 12 other training sub-graphs in the spec's own test; 1-36 on Computers). This sampler
decides every edge on its own, with a coin keyed by the edge:

```
for each undirected edge e = {u, v} with a training endpoint (self-loops, duplicates dropped):
    U_e  = keyed_uniform(seed, stream, min(u, v), max(u, v))        # stateless
    keep e  iff  U_e < p_e,    p_e = keep_probability, or
                               min(1, K / (2 max(deg u, deg v)))    (REF-CODE's rate)
a node left with more than K kept edges is dropped (all its kept edges removed)
```

so every node has at most ``K`` neighbours in the bounded graph and lies in at most ``K``
other training lists (I2, I3 of spec 002 §3.2), and the sensitivity argument of Lemma 1
(``2 (K + 1) C``) applies to the bounded graph as before.

Adjacent graphs. With a fixed ``keep_probability`` the coin of an edge depends only on
the edge, so replacing one node ``v`` by a null node (no edges) changes the decisions of
``v``'s own edges only; through the drop rule, a neighbour of ``v`` that falls back to at
most ``K`` kept edges can reappear in its neighbours' lists, so the affected lists lie
within distance 2 of ``v`` (the greedy pass has no such bound). With the default rate the
probability of an edge reads its endpoints' degrees, which a removal changes for ``v``'s
neighbours: the degree sequence is then treated as public, as HeterPoisson does.

*Privacy.* Unit node, relation replace-one, exactly as DP-GNN with Algorithm 2. Scope: the
bounded graph is the dataset; this sampler, like the greedy one, comes without an
end-to-end proof (spec 002 §8 A2), and the drop rule's one-hop propagation is not covered
by the accountant: trainers record it under ``privacy["unaccounted"]``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from gnnprivacy._validation import check_int, check_real
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.sampling._graph import clean_graph, node_ids
from gnnprivacy.sampling.counter_rng import keyed_uniform
from gnnprivacy.sampling.degree_bounded import BoundedSubgraphs, _padded_rows

__all__ = ["PER_EDGE_STREAM", "PER_EDGE_SCOPE", "per_edge_decisions",
           "sample_per_edge_bounded_subgraphs"]

#: stream id separating these coins from other keyed draws
PER_EDGE_STREAM = 0x0E06
_WHERE = "sample_per_edge_bounded_subgraphs"

PER_EDGE_SCOPE = ("replace-one node-level RDP on the degree-bounded training sub-graphs (the "
                  "bounded graph is the dataset; N = |V_tr| public); built by the stateless "
                  "per-edge sampler (spec 002 §8 A2 [EXT]): each edge's coin depends on that "
                  "edge only, but the drop rule can change lists within distance 2 of a "
                  "removed node and is not covered")


def per_edge_decisions(edge_index: Tensor, num_nodes: int, *, train_mask: Tensor,
                       max_degree: int, seed: int, keep_probability: float | None = None,
                       symmetrize: bool = True) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The coin stage: candidate undirected edges and their keep decisions.

    Returns:
        ``(lo, hi, keep, kept_after_drop)``: the candidate edges ``lo < hi`` (at least one
        training endpoint), the keyed coin decisions, and the decisions after the drop rule.
    """
    k = check_int("max_degree", max_degree, low=0, where=_WHERE)
    seed = check_int("seed", seed, low=0, where=_WHERE)
    graph = clean_graph(edge_index, num_nodes, symmetrize=bool(symmetrize), where=_WHERE)
    n = graph.num_nodes
    if not isinstance(train_mask, Tensor) or train_mask.shape != (n,) \
            or train_mask.dtype != torch.bool:
        raise InvalidParameterError("train_mask", f"a bool tensor of shape ({n},)",
                                    getattr(train_mask, "shape", type(train_mask)), where=_WHERE)
    src, dst = graph.src, graph.dst
    one = src < dst
    lo, hi = src[one], dst[one]
    if not symmetrize:  # keep each unordered pair once whatever its direction
        pairs = torch.unique(torch.stack([torch.minimum(src, dst), torch.maximum(src, dst)]),
                             dim=1)
        pairs = pairs[:, pairs[0] != pairs[1]]
        lo, hi = pairs[0], pairs[1]
    touch = train_mask[lo] | train_mask[hi]
    lo, hi = lo[touch], hi[touch]
    u = keyed_uniform(seed, PER_EDGE_STREAM, lo, hi)
    if keep_probability is None:
        deg = torch.bincount(torch.cat([lo, hi]), minlength=n).to(torch.float64)
        p = (k / (2.0 * torch.maximum(deg[lo], deg[hi]).clamp_min(1.0))).clamp(max=1.0)
    else:
        p = torch.full(lo.shape, check_real("keep_probability", keep_probability, low=0.0,
                                            high=1.0, where=_WHERE), dtype=torch.float64)
    keep = u < p
    kept_deg = torch.bincount(torch.cat([lo[keep], hi[keep]]), minlength=n)
    over = kept_deg > k
    final = keep & ~over[lo] & ~over[hi]
    return lo, hi, keep, final


def sample_per_edge_bounded_subgraphs(edge_index: Tensor, num_nodes: int, *,
                                      train_nodes: Tensor, max_degree: int, seed: int,
                                      keep_probability: float | None = None,
                                      symmetrize: bool = True) -> BoundedSubgraphs:
    """Degree-bounded training sub-graphs from stateless per-edge coins (module docstring).

    Args:
        edge_index: (2, E) raw graph.
        num_nodes: number of nodes.
        train_nodes: training node ids (no repeats) or a bool mask.
        max_degree: ``K >= 0``.
        seed: non-negative integer key of the coins.
        keep_probability: fixed keep rate in [0, 1]; ``None``: ``min(1, K / (2 max deg))``.
        symmetrize: treat the graph as undirected (default, as Algorithm 2).

    Returns:
        A `BoundedSubgraphs` (rows: the node
        itself, then at most ``K`` neighbours, then ``-1``).

    Raises:
        InvalidParameterError: bad graph, ``max_degree``, ``seed``, rate or empty training set.
    """
    k = check_int("max_degree", max_degree, low=0, where=_WHERE)
    graph = clean_graph(edge_index, num_nodes, symmetrize=bool(symmetrize), where=_WHERE)
    n = graph.num_nodes
    train = node_ids(train_nodes, n, name="train_nodes", where=_WHERE, keep_order=True)
    if train.numel() == 0:
        raise InvalidParameterError("train_nodes", "a non-empty set of training nodes",
                                    "an empty set", where=_WHERE)
    mask = torch.zeros(n, dtype=torch.bool)
    mask[train] = True
    lo, hi, _, final = per_edge_decisions(edge_index, n, train_mask=mask, max_degree=k,
                                          seed=seed, keep_probability=keep_probability,
                                          symmetrize=symmetrize)
    lo, hi = lo[final], hi[final]
    bounded = clean_graph(torch.stack([torch.cat([lo, hi]), torch.cat([hi, lo])]), n,
                          where=_WHERE)
    neighbors = _padded_rows(bounded, train, k)
    return BoundedSubgraphs(train, neighbors, neighbors >= 0, k, n, bounded.edge_index(), graph,
                            False)
