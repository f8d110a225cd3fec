"""Vectorised checks of the invariants I1-I5 of DP-GNN's Algorithm 2 (spec 002 §3.2)."""

from __future__ import annotations

from typing import Any, Protocol

import torch
from torch import Tensor

from gnnprivacy.errors import GnnPrivacyError


class BoundedSubgraphs(Protocol):
    """What the checks read of `gnnprivacy.sampling.degree_bounded.BoundedSubgraphs` (a
    protocol, so this module does not import the sampler that calls it)."""

    @property
    def train_nodes(self) -> Tensor: ...
    @property
    def neighbors(self) -> Tensor: ...
    @property
    def mask(self) -> Tensor: ...
    @property
    def max_degree(self) -> int: ...
    @property
    def num_nodes(self) -> int: ...
    @property
    def num_train(self) -> int: ...
    @property
    def edge_index(self) -> Tensor: ...
    @property
    def graph(self) -> Any: ...
    @property
    def bound_all_nodes(self) -> bool: ...
    def degrees(self) -> Tensor: ...


class SamplerInvariantError(GnnPrivacyError, AssertionError):
    """A sampler's output violates an invariant its privacy analysis relies on."""


def _fail(invariant: str, detail: str) -> None:
    raise SamplerInvariantError(f"{invariant} violated: {detail}")


def _keys(src: Tensor, dst: Tensor, n: int) -> Tensor:
    return dst * n + src


def _check_rows(s: "BoundedSubgraphs") -> Tensor:
    """Row shape, slot 0, no self-loop, no repeat; returns the (v, u) pairs of the rows."""
    k, nb, mask = s.max_degree, s.neighbors, s.mask
    if nb.shape != (s.num_train, k + 1):      # K+1 slots: the node and at most K neighbours
        _fail("I2", f"neighbors must be (N_tr, K+1) = ({s.num_train}, {k + 1}); got {tuple(nb.shape)}")
    if not torch.equal(mask, nb >= 0):
        _fail("layout", "mask must equal neighbors >= 0")
    if not torch.equal(nb[:, 0], s.train_nodes):
        _fail("layout", "slot 0 of every row must be the training node itself")
    if bool((mask[:, 1:].long().diff(dim=1) > 0).any()):
        _fail("layout", "padding (-1) must come after the neighbours")
    rows = torch.arange(s.num_train).unsqueeze(1).expand_as(nb)[:, 1:][mask[:, 1:]]
    u = nb[:, 1:][mask[:, 1:]]
    v = s.train_nodes[rows]
    if bool((u == v).any()):
        _fail("I4", "a node lists itself as a neighbour (self-loop)")
    if torch.unique(_keys(u, v, s.num_nodes)).numel() != u.numel():
        _fail("I1", "a neighbour is listed twice in one row")
    return torch.stack([u, v])


def _check_degrees(s: "BoundedSubgraphs", pairs: Tensor) -> Tensor:
    """I3 (from the rows themselves), then I1 against the bounded graph; returns its degrees.
    (I2 holds by the (N_tr, K+1) layout checked in `_check_rows`.)"""
    n, k = s.num_nodes, s.max_degree
    occ = torch.bincount(pairs[0], minlength=n)
    if bool((occ > k).any()):
        x = int(occ.argmax())
        _fail("I3", f"node {x} appears in {int(occ[x])} > K = {k} other training sub-graphs")
    deg_b = torch.bincount(s.edge_index[1], minlength=n)
    if bool((deg_b > k).any()):
        _fail("I1", f"a node has {int(deg_b.max())} > K = {k} sampled neighbours (count[x] <= K)")
    if not torch.equal(s.degrees(), deg_b[s.train_nodes]):
        _fail("I1", "a training row differs in size from the node's degree in the bounded graph")
    return deg_b


def _check_edges(s: "BoundedSubgraphs", pairs: Tensor, deg_b: Tensor) -> None:
    """I4 (raw edges, symmetry, rows = bounded adjacency) and I5 (greedy maximality)."""
    n, g = s.num_nodes, s.graph
    b_src, b_dst = s.edge_index
    bkeys = _keys(b_src, b_dst, n)
    raw_pairs = torch.cat([_keys(g.src, g.dst, n), _keys(g.dst, g.src, n)])   # kept in both directions
    if not bool(torch.isin(bkeys, raw_pairs).all()):
        _fail("I4", "a kept edge is not an edge of the (preprocessed) raw graph")
    if not torch.equal(torch.sort(bkeys).values, torch.sort(_keys(b_dst, b_src, n)).values):
        _fail("I4", "the bounded graph is not symmetric (u in S_v but v not in S_u)")
    is_train = torch.zeros(n, dtype=torch.bool)
    is_train[s.train_nodes] = True
    rows_keys = torch.sort(_keys(pairs[0], pairs[1], n)).values
    if not torch.equal(rows_keys, torch.sort(bkeys[is_train[b_dst]]).values):
        _fail("I4", "training rows differ from their adjacency in the bounded graph")
    scanned = torch.ones(n, dtype=torch.bool) if s.bound_all_nodes else is_train
    sel = scanned[g.dst]
    u, v = g.src[sel], g.dst[sel]
    missing = ~torch.isin(_keys(u, v, n), bkeys)
    stuck = missing & (deg_b[u] < s.max_degree) & (deg_b[v] < s.max_degree)
    if bool(stuck.any()):
        i = int(stuck.nonzero()[0])
        _fail("I5", f"raw edge {int(u[i])} -> {int(v[i])} was skipped although both counts are < K")


def check_bounded_invariants(s: "BoundedSubgraphs") -> None:
    """Raise `SamplerInvariantError` on the first violated invariant among I1-I5."""
    pairs = _check_rows(s)
    deg_b = _check_degrees(s, pairs)
    _check_edges(s, pairs, deg_b)
