"""DP-GNN degree-bounded training sub-graphs (Daigavane et al., "Node-Level Differentially
Private Graph Neural Networks", Algorithm 2; spec 002 §3.1-3.2 with the fixes of §8 A3).

The greedy pass (run once, before training):

```
count[x] <- 0, S[x] <- {x}                   for every node x
for v in shuffle(V_tr):                       # then shuffle(V \\ V_tr) if bound_all_nodes
    for u in shuffle(N_v):                    # N_v: neighbours in the symmetrised simple graph
        if u in S[v] or count[u] == K: continue
        S[v] += {u};  S[u] += {v};  count[u] += 1;  count[v] += 1
        if count[v] == K: break
```

leaves every node in at most ``K`` other lists (I3), so removing or replacing one node
changes at most ``K + 1`` per-node loss terms: the sensitivity of the summed clipped
gradient is ``2 (K + 1) C`` (Lemma 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from gnnprivacy._validation import check_int
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.sampling._bounded_checks import check_bounded_invariants
from gnnprivacy.sampling._graph import CleanGraph, clean_graph, gather_segments, node_ids
from gnnprivacy.sampling.counter_rng import CounterRandom

_WHERE = "sample_degree_bounded_subgraphs"

#: what the guarantee covers (spec 002 §6 last item, §8 A1-A2)
PRIVACY_SCOPE = ("replace-one node-level RDP on the degree-bounded training sub-graphs S_tr "
                 "(the bounded graph is the dataset; N = |V_tr| public); the data-dependent greedy "
                 "pass that builds S_tr from the raw graph is not covered (spec 002 §8 A2)")


@dataclass(frozen=True, eq=False, repr=False)
class BoundedSubgraphs:
    """Per-training-node neighbour sets ``S_v`` with in-degree and occurrence at most ``K``.

    Attributes:
        train_nodes: (N_tr,) training node ids, in the order given.
        neighbors: (N_tr, K+1) int64; slot 0 is the node itself, then its sampled neighbours,
            then -1 padding.
        mask: (N_tr, K+1) bool, ``neighbors >= 0``.
        max_degree: the bound ``K``.
        num_nodes: number of nodes of the graph.
        edge_index: (2, E_b) the degree-bounded graph (symmetric, sorted by target): every
            kept edge in both directions, non-training endpoints included.
        graph: the preprocessed raw graph the greedy pass read (for `check_invariants`).
        bound_all_nodes: whether non-training nodes were scanned too (multi-layer extension).
    """

    train_nodes: Tensor
    neighbors: Tensor
    mask: Tensor
    max_degree: int
    num_nodes: int
    edge_index: Tensor
    graph: CleanGraph
    bound_all_nodes: bool = False

    @property
    def num_train(self) -> int:
        return int(self.train_nodes.numel())

    @property
    def max_occurrence(self) -> int:
        """``K + 1``: the most per-node loss terms one node can influence (1 layer)."""
        return self.max_degree + 1

    def occurrence_bound(self, num_layers: int = 1) -> int:
        """Affected-term bound ``M_r = sum_{j=0..r} K^j`` for an ``r``-layer model (spec 002
        §4.1 [EXT], not proven in the paper).

        For ``r > 1`` it needs every node's list bounded (``bound_all_nodes=True``) and the
        model must aggregate over `edge_index` only (the bounded graph), never the raw one.

        Raises:
            InvalidParameterError: ``num_layers > 1`` without ``bound_all_nodes``.
        """
        r = check_int("num_layers", num_layers, low=1, where="BoundedSubgraphs.occurrence_bound")
        if r > 1 and not self.bound_all_nodes:
            raise InvalidParameterError(
                "num_layers", "1 unless the sub-graphs were sampled with bound_all_nodes=True "
                "(multi-layer extension, spec 002 §4.1 [EXT])", num_layers)
        return sum(self.max_degree ** j for j in range(r + 1))

    def degrees(self) -> Tensor:
        """``|S_v| - 1`` for each training node, shape (N_tr,)."""
        return self.mask.sum(dim=1) - 1

    def gather(self, index: Tensor) -> tuple[Tensor, Tensor]:
        """Padded rows of a minibatch: ``(neighbors[index], mask[index])``, each (b, K+1)."""
        return self.neighbors[index], self.mask[index]

    def accounting_params(self, num_layers: int = 1) -> dict:
        """What the DP-GNN accountant needs (spec 002 §4.3): N, K and the occurrence bound."""
        return {"num_train": self.num_train, "max_degree": self.max_degree,
                "max_occurrence": self.occurrence_bound(num_layers), "num_layers": num_layers,
                "unit": PrivacyUnit.NODE, "relation": NeighboringRelation.REPLACE,
                "scope": PRIVACY_SCOPE}

    def check_invariants(self) -> None:
        """Verify I1-I5 of spec 002 §3.2 (I6, determinism, needs a re-run; see the tests).

        Raises:
            SamplerInvariantError: naming the first invariant that fails.
        """
        check_bounded_invariants(self)

    def __repr__(self) -> str:
        deg = self.degrees()
        return (f"BoundedSubgraphs(num_train={self.num_train}, max_degree={self.max_degree}, "
                f"mean_degree={float(deg.float().mean()) if deg.numel() else 0.0:.2f}, "
                f"num_bounded_edges={int(self.edge_index.shape[1])}, "
                f"bound_all_nodes={self.bound_all_nodes})")


def _greedy_pass(rowptr: list[int], col: list[int], order: list[int], num_nodes: int,
                 k: int) -> tuple[list[int], list[int]]:
    """Algorithm 2's sequential core over Python lists; returns kept pairs ``(v, u)``.

    ``members[x]`` lists the scanners that added ``x``: when ``v`` is scanned, ``S[v] \\ {v}``
    is exactly ``members[v]`` (each node is scanned once), so that is the only membership
    test needed (de-duplication fix, spec 002 §8 A3).
    """
    count = [0] * num_nodes
    members: list[list[int] | None] = [None] * num_nodes
    kept_v: list[int] = []
    kept_u: list[int] = []
    for v in order:
        cv = count[v]
        if cv >= k:
            continue
        sv = members[v] or ()
        for u in col[rowptr[v]:rowptr[v + 1]]:
            if count[u] >= k or u in sv:
                continue
            count[u] += 1
            mu = members[u]
            if mu is None:
                members[u] = [v]
            else:
                mu.append(v)
            kept_v.append(v)
            kept_u.append(u)
            cv += 1
            if cv == k:
                break
        count[v] = cv
    return kept_v, kept_u


#: the keyed streams of the greedy pass under a `CounterRandom` (scan order, neighbour order)
STREAM_ORDER, STREAM_SHUFFLE = 21, 22


def _shuffled_columns(graph: CleanGraph, generator, shuffle: bool) -> list[int]:
    """Neighbour lists ``col`` (CSR by target) with each row in random order (vectorised):
    by i.i.d. keys from ``generator``, or keyed by ``(node, neighbour)`` from a
    `CounterRandom`."""
    if not shuffle or graph.num_edges == 0:
        return graph.src.tolist()
    keys = (generator.uniform(STREAM_SHUFFLE, graph.dst, graph.src)
            if isinstance(generator, CounterRandom)
            else torch.rand(graph.num_edges, generator=generator, dtype=torch.float64))
    perm = torch.argsort(keys)
    perm = perm[torch.sort(graph.dst[perm], stable=True).indices]
    return graph.src[perm].tolist()


def _shuffled(nodes: Tensor, generator) -> Tensor:
    """``nodes`` in random order: a permutation from ``generator``, or sorted by keys keyed by
    node from a `CounterRandom` (a uniform order, the same whoever computes it)."""
    if isinstance(generator, CounterRandom):
        return nodes[torch.argsort(generator.uniform(STREAM_ORDER, nodes), stable=True)]
    return nodes[torch.randperm(nodes.numel(), generator=generator)]


def _padded_rows(bounded: CleanGraph, train: Tensor, k: int) -> Tensor:
    """(N_tr, K+1): node itself in slot 0, then its bounded-graph neighbours, then -1."""
    entry, seg = gather_segments(bounded.rowptr, train)
    out = torch.full((train.numel(), k + 1), -1, dtype=torch.long)
    out[:, 0] = train
    counts = torch.bincount(seg, minlength=train.numel())
    slot = torch.arange(seg.numel()) - (torch.cumsum(counts, 0) - counts)[seg] + 1
    out[seg, slot] = bounded.src[entry]
    return out


def sample_degree_bounded_subgraphs(edge_index: Tensor, num_nodes: int, *, train_nodes: Tensor,
                                    max_degree: int, generator: torch.Generator,
                                    symmetrize: bool = True, shuffle_neighbors: bool = True,
                                    bound_all_nodes: bool = False) -> BoundedSubgraphs:
    """Run DP-GNN's Algorithm 2 once and return the degree-bounded training sub-graphs.

    Reference: A. Daigavane et al., "Node-Level Differentially Private Graph Neural
    Networks", Algorithm 2 (App. B), with spec 002's fixes: self-loops skipped, an edge
    already present is not counted twice, the occurrence test ``count[u] == K`` before the
    in-degree test, every kept edge added in both directions, neighbour lists shuffled.

    Invariants (spec 002 §3.2, checked by `BoundedSubgraphs.check_invariants`):
    I1 ``count[x] = |S[x]| - 1``; I2 ``|S_v \\ {v}| <= K``; I3 every node lies in at most ``K``
    other training lists; I4 kept edges are raw edges, ``u in S_v <=> v in S_u``; I5 greedy
    maximality; I6 deterministic given the generator's state.

    Privacy:
        Unit node, relation replace-one (``N = |V_tr|`` public; removal = replacement by a
        null node, spec 002 §8 A1). One node influences at most ``max_occurrence = K + 1``
        per-node terms, so the summed clipped gradient has sensitivity ``2 (K+1) C``; the
        trainer records the hypergeometric (fixed-size batches) or binomial (Poisson
        batches) amplified Gaussian event of spec 002 §4.3 per executed step. Scope: the
        bounded graph is the dataset; the greedy pass itself is data-dependent and not
        covered (spec 002 §8 A2; removing a node can change sub-graphs far from it).

    Args:
        edge_index: (2, E) raw graph. ``N_v`` are the in-neighbours ``j`` of edges ``j -> v``
            (the library convention); with ``symmetrize`` (default) in = out.
        num_nodes: number of nodes.
        train_nodes: training nodes ``V_tr`` (ids, no repeats, or a bool mask).
        max_degree: ``K >= 0``.
        generator: ``torch.Generator`` for the node order and the neighbour shuffles, or a
            `CounterRandom`: the order sorts keys keyed by node and each row keys keyed by
            ``(node, neighbour)`` (the same uniform orders; what a sharded run reproduces
            without any rank holding the graph, `gnnprivacy.sampling.bounded_rounds`).
        symmetrize: add reverse edges first (spec 002 §3.1, default True).
        shuffle_neighbors: shuffle each ``N_v`` (spec 002 §8 A3, default True).
        bound_all_nodes: after ``V_tr``, also scan the other nodes (in random order), so every
            node's list is bounded; enables `BoundedSubgraphs.occurrence_bound` for
            more than one layer.

    Returns:
        A `BoundedSubgraphs`.

    Raises:
        InvalidParameterError: bad graph, ``max_degree``, empty ``train_nodes`` or generator.

    Example:
        >>> import torch
        >>> from gnnprivacy.datasets import load_dataset
        >>> from gnnprivacy.sampling import sample_degree_bounded_subgraphs
        >>> data = load_dataset("csbm", num_nodes=400, seed=0)
        >>> sub = sample_degree_bounded_subgraphs(data.edge_index, 400,
        ...     train_nodes=data.train_mask.nonzero().view(-1), max_degree=5,
        ...     generator=torch.Generator().manual_seed(0))
        >>> int((sub.neighbors >= 0).sum(dim=1).max()) <= 5 + 1    # the node and <= 5 neighbours
        True
    """
    k = check_int("max_degree", max_degree, low=0, where=_WHERE)
    if not isinstance(generator, (torch.Generator, CounterRandom)):
        raise InvalidParameterError("generator", "a torch.Generator or a CounterRandom",
                                    type(generator).__name__, where=_WHERE)
    graph = clean_graph(edge_index, num_nodes, symmetrize=bool(symmetrize), where=_WHERE)
    n = graph.num_nodes
    train = node_ids(train_nodes, n, name="train_nodes", where=_WHERE, keep_order=True)
    if train.numel() == 0:
        raise InvalidParameterError("train_nodes", "a non-empty set of training nodes", "an empty set",
                                    where=_WHERE)
    order = _shuffled(train, generator)
    col = _shuffled_columns(graph, generator, bool(shuffle_neighbors))
    if bound_all_nodes:
        rest = torch.ones(n, dtype=torch.bool)
        rest[train] = False
        rest = rest.nonzero().flatten()
        order = torch.cat([order, _shuffled(rest, generator)])
    kept_v, kept_u = _greedy_pass(graph.rowptr.tolist(), col, order.tolist(), n, k)
    kv, ku = torch.tensor(kept_v, dtype=torch.long), torch.tensor(kept_u, dtype=torch.long)
    bounded = clean_graph(torch.stack([torch.cat([ku, kv]), torch.cat([kv, ku])]), n, where=_WHERE)
    neighbors = _padded_rows(bounded, train, k)
    return BoundedSubgraphs(train, neighbors, neighbors >= 0, k, n, bounded.edge_index(), graph,
                            bool(bound_all_nodes))
