"""Edge-level DP for the user's own PyG model: the ``"edges"`` sampler of `make_private`.

::

    pt = gp.make_private(model, optimizer, data, sampler="edges", epsilon=1.0)
    for batch in pt.loader:
        optimizer.zero_grad()
        out = model(batch.x, batch.edge_index)
        F.cross_entropy(out[batch.center], batch.y[batch.center]).backward()
        optimizer.step()        # per-subgraph clipping, one noise draw, one ledger entry
    predict = pt.release_predictor()    # edge-private predictions, in the same epsilon

*The unit.* One edge, added or removed; node features, labels and the node set are public
(they are not what this unit protects). On an undirected graph (every entry ``u -> v`` has
its reverse) the unit is the unordered pair ``{u, v}``: both directed entries at once; on a
directed graph it is one directed entry ``u -> v`` (``edge_unit=`` forces either).
Self-loops and repeated entries are dropped before anything is sampled.

*The subgraphs.* Every training node is a centre independently with probability ``q``
(Poisson). Centre ``w``'s subgraph is its ``K``-hop computation graph: the nodes within
``K`` hops against the edge direction (``a`` reaches ``w`` in at most ``K`` steps ``a -> ..
-> w``) and exactly the entries ``a -> b`` whose target ``b`` lies within ``K - 1`` hops of
``w`` (the entries a ``K``-layer model's output at ``w`` reads; the entries between two
nodes at depth ``K`` are left out). ``K`` is the model's number of message-passing layers
unless given. Whatever the model does with a batch, the centre's loss is a function of its
subgraph only, so:

*The occurrence bound.* Adding or removing one entry ``a -> b`` changes exactly the
subgraphs that contain it, those of the centres ``w`` with ``b`` within ``K - 1`` hops of
``w`` (a changed subgraph that did not contain the entry would need another path through
it). So

* ``K = 1``: an entry lies only in its target's star: one subgraph per directed entry, two
  per undirected edge, with no degree bound at all;
* ``K >= 2``: ``b`` reaches at most ``M = sum_{j<K} D^j`` centres when every node keeps at
  most ``D`` out-entries (the ball of radius ``K - 1`` of out-degree ``D``). The bound is
  a top-``D`` selection by fixed pseudo-random priorities keyed by the entry ``(a, b)``
  alone (`bound_entries`), computed over the raw entries: adding ``a -> b`` can only
  displace ``a``'s ``D``-th kept out-entry (and, with ``max_in_degree``, ``b``'s
  ``D_in``-th in-entry), with no cascade. So one raw edge changes at most ``2`` (``3``)
  bounded entries per direction.

The per-step occurrence of one unit (the most sampled subgraphs that hold it) is
``occurrence = (2 if undirected else 1) * M`` (``M = 1`` for ``K = 1``), and one raw edge
changes at most ``m = occurrence * bounding_factor`` subgraphs, each by a substitution of
its clipped gradient (``bounding_factor`` is 1 for ``K = 1``, else 2 or 3). The step event
is `EdgeSubgraphDpEvent` (the ``m``-fold Poisson-subsampled Gaussian under substitution at
noise ``z / sqrt(m)``), accounted by the PLD accountant; `tests/training/private/
test_edge_sampler.py` finds the worst edge by enumeration on small adversarial graphs.
``max_in_degree`` caps the in-entries for speed (at ``K = 1`` its displaced entry lies in
the same star, so it costs nothing).

*Predictions.* Inference reads the private edges too (LinkTeller queries it), so the
weights' guarantee does not cover it. ``inference="noisy"`` (the default) releases, once,
every message-passing layer's aggregate of clipped messages plus Gaussian noise
(`gnnprivacy.training.private.edge_inference`), composed into the same accountant: the
predictor answers from those frozen aggregates and never reads an edge again.
``inference="unprotected"`` plans no such release (the epsilon covers the weights only and
the record says so); ``inference="none"`` for a model that will not be queried on the graph.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch_geometric.data import Data

from gnnprivacy._validation import check_choice, check_int, check_real
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.training.private.samplers import (SamplerPlan, SubgraphSampler,
                                                  _message_passing_depth)

__all__ = ["EDGE_UNITS", "INFERENCE_MODES", "EdgeSubgraphs", "bound_entries",
           "edge_bounding_factor", "edge_occurrence_bound", "is_undirected",
           "subgraph_entries"]

EDGE_UNITS = ("auto", "undirected", "directed")
INFERENCE_MODES = ("noisy", "unprotected", "none")
#: the auto out-degree bound keeps one entry in at most this many subgraphs (K >= 2)
MAX_AUTO_BALL = 4
#: default share of epsilon spent on the inference release (``inference="noisy"``)
INFERENCE_SHARE = 0.5
#: default expected batch: this fraction of the training nodes, clamped to [LOW, HIGH]
EDGE_BATCH_FRACTION, EDGE_BATCH_LOW, EDGE_BATCH_HIGH = 1.0 / 8.0, 256, 4096


def ball_size(max_out_degree: int | None, hops: int) -> int:
    """``M = sum_{j<K} D^j``: the most centres whose ``K``-hop subgraph holds one directed
    entry when every node keeps at most ``D`` out-entries (1 for ``K <= 1``, any ``D``)."""
    if hops <= 1:
        return 1
    if max_out_degree is None:
        raise InvalidParameterError("max_out_degree", f"a degree bound for {hops} hops", None)
    return sum(int(max_out_degree) ** j for j in range(hops))


def edge_occurrence_bound(hops: int, max_out_degree: int | None, *, undirected: bool) -> int:
    """The most subgraphs of one step that hold one unit edge (see the module docstring)."""
    return (2 if undirected else 1) * ball_size(max_out_degree, hops)


def edge_bounding_factor(hops: int, max_in_degree: int | None) -> int:
    """How many times `edge_occurrence_bound` one raw edge can change through the degree
    bounding: 1 for ``K <= 1`` (no out-bound; an in-bound's displaced entry shares the
    star), else 2 (the out-bound's displaced entry) or 3 (with an in-bound)."""
    if hops <= 1:
        return 1
    return 2 if max_in_degree is None else 3


def auto_out_degree(hops: int) -> int:
    """The largest ``D >= 1`` with ``sum_{j<K} D^j <= MAX_AUTO_BALL``."""
    d = 1
    while ball_size(d + 1, hops) <= MAX_AUTO_BALL:
        d += 1
    return d


def is_undirected(src: Tensor, dst: Tensor, num_nodes: int) -> bool:
    """Whether every entry ``src -> dst`` (self-loops dropped) has its reverse."""
    keys = torch.unique(src * num_nodes + dst)
    rev = torch.unique(dst * num_nodes + src)
    return keys.numel() == rev.numel() and bool((keys == rev).all())


def _ranks(group: Tensor, prio: Tensor) -> Tensor:
    """Each entry's rank (0 first) by ``prio`` among the entries of its ``group``."""
    order = torch.argsort(group.double() * 2.0 + prio)       # prio in [0, 1)
    g = group[order]
    first = torch.ones_like(g, dtype=torch.bool)
    first[1:] = g[1:] != g[:-1]
    start = torch.cummax(torch.where(first, torch.arange(g.numel()), 0), 0).values
    out = torch.empty_like(order)
    out[order] = torch.arange(g.numel()) - start
    return out


def bound_entries(src: Tensor, dst: Tensor, num_nodes: int, *, seed: int,
                  max_out_degree: int | None = None,
                  max_in_degree: int | None = None) -> Tensor:
    """Keep mask of the entries ``src -> dst``: an entry is kept when it ranks below
    ``max_out_degree`` among its source's entries and below ``max_in_degree`` among its
    target's, by priorities keyed by ``(seed, src, dst)`` only (`keyed_uniform`). Ranks are
    over the given (raw) entries, so adding one entry changes the kept set by that entry
    and at most one displaced entry per bounded end."""
    from gnnprivacy.sampling.counter_rng import keyed_uniform

    keep = torch.ones(src.numel(), dtype=torch.bool)
    if src.numel() == 0 or (max_out_degree is None and max_in_degree is None):
        return keep
    prio = keyed_uniform(int(seed), src * num_nodes + dst)
    if max_out_degree is not None:
        keep &= _ranks(src, prio) < int(max_out_degree)
    if max_in_degree is not None:
        keep &= _ranks(dst, prio) < int(max_in_degree)
    return keep


def subgraph_entries(rowptr: Tensor, src: Tensor, centres: Tensor, hops: int,
                     num_nodes: int) -> tuple[Tensor, Tensor, Tensor]:
    """The ``K``-hop computation subgraphs of ``centres`` over the entries grouped by target
    (``src[rowptr[b]:rowptr[b+1]]`` are the sources of the entries into ``b``).

    Returns:
        ``(keys, edge_src_keys, edge_dst_keys)``: the ``subgraph * n + node`` key of every
        row (centres first, in centre order, then by discovery), and of each entry's
        source and target rows.
    """
    n = int(num_nodes)
    keys = torch.arange(centres.numel()) * n + centres
    frontier = keys
    e_src, e_dst = [], []
    for _ in range(int(hops)):
        if frontier.numel() == 0:
            break
        sub, node = frontier // n, frontier % n
        start, count = rowptr[node], rowptr[node + 1] - rowptr[node]
        rep = torch.repeat_interleave(torch.arange(node.numel()), count)
        offs = torch.arange(rep.numel()) - (torch.cumsum(count, 0) - count)[rep]
        nb = sub[rep] * n + src[start[rep] + offs]
        e_src.append(nb)
        e_dst.append(frontier[rep])
        new = torch.unique(nb)
        frontier = new[~torch.isin(new, keys)]
        keys = torch.cat([keys, frontier])
    empty = torch.zeros(0, dtype=torch.long)
    return (keys, torch.cat(e_src) if e_src else empty, torch.cat(e_dst) if e_dst else empty)


class EdgeSubgraphs(SubgraphSampler):
    """Poisson-sampled ``K``-hop computation subgraphs for edge-level DP: ``"edges"``.

    Args:
        hops: ``K``; ``None``: the model's number of message-passing layers.
        max_out_degree: ``D`` for ``K >= 2`` (``None``: the largest with ``sum_{j<K} D^j
            <= 4``); refused for ``K = 1``, which needs no bound.
        max_in_degree: an optional cap on each node's in-entries (speed on hubs).
        edge_unit: ``"auto"`` (undirected when every entry has its reverse),
            ``"undirected"`` (the pair ``{u, v}``, both entries) or ``"directed"``.
        inference: ``"noisy"`` (predictions from a noisy release of every layer's aggregate,
            in the same epsilon), ``"unprotected"`` (predictions read the private edges;
            named in the record) or ``"none"`` (no predictions on the private graph).
        inference_share: share of epsilon (and delta) planned for the inference release.
        message_clip: the norm bound ``B`` of each message at inference.
        inference_noise_multiplier: fix the release's noise multiplier instead of sharing
            epsilon (with ``noise_multiplier=`` in `make_private`).
        noise_in_training: train with the release's message clip and aggregate noise (an
            augmentation in training mode only, so the model learns to read noisy
            aggregates; no privacy cost).
        sampling_stream: ``"generator"`` (default) or ``"counter"`` (each centre's trial
            keyed by its id: the single-process reference of a sharded run, same law and
            event; `gnnprivacy.training.sharded_edges`).

    Privacy: unit edge, add/remove; `EdgeSubgraphDpEvent` per step (see the module
    docstring); the inference release adds one Gaussian event per message-passing call.
    """

    name = "edges"
    unit = PrivacyUnit.EDGE

    def __init__(self, *, hops: int | None = None, max_out_degree: int | None = None,
                 max_in_degree: int | None = None, edge_unit: str = "auto",
                 inference: str = "noisy", inference_share: float = INFERENCE_SHARE,
                 message_clip: float = 1.0, inference_noise_multiplier: float | None = None,
                 noise_in_training: bool = False, sampling_stream: str = "generator"):
        from gnnprivacy.training.private.samplers import _check_stream

        self.sampling_stream = _check_stream(sampling_stream)
        self.hops = None if hops is None else check_int("hops", hops, low=1)
        self.max_out_degree = (None if max_out_degree is None
                               else check_int("max_out_degree", max_out_degree, low=1))
        self.max_in_degree = (None if max_in_degree is None
                              else check_int("max_in_degree", max_in_degree, low=1))
        self.edge_unit = check_choice("edge_unit", edge_unit, EDGE_UNITS)
        self.inference = check_choice("inference", inference, INFERENCE_MODES)
        self.inference_share = check_real("inference_share", inference_share, low=0.0,
                                          high=1.0, low_open=True, high_open=True)
        self.message_clip = check_real("message_clip", message_clip, low=0.0, low_open=True)
        if math.isinf(self.message_clip):
            raise InvalidParameterError("message_clip", "a finite norm bound > 0", message_clip)
        self.noise_in_training = bool(noise_in_training)
        if self.noise_in_training and self.inference != "noisy":
            raise InvalidParameterError("noise_in_training", "False unless inference='noisy' "
                                        "(it imitates that release)", noise_in_training)
        self.inference_noise_multiplier = (
            None if inference_noise_multiplier is None else check_real(
                "inference_noise_multiplier", inference_noise_multiplier, low=0.0,
                low_open=True))

    # ------------------------------------------------------------------ setup
    def setup(self, data: Data, *, model: torch.nn.Module | None = None,
              generator: torch.Generator | None = None) -> None:
        super().setup(data, model=model, generator=generator)
        from gnnprivacy.sampling._graph import clean_graph
        from gnnprivacy.sampling.counter_rng import counter_seed

        self.hops_ = _message_passing_depth(model) if self.hops is None else self.hops
        if self.hops_ < 1:
            raise InvalidParameterError(
                "model", "a model with message passing for sampler='edges' (a model that reads "
                "no edge needs no edge-level privacy: train it without DP, or pass hops=)",
                "no MessagePassing module")
        if self.hops_ == 1 and self.max_out_degree is not None:
            raise InvalidParameterError(
                "max_out_degree", "None for one hop (an entry lies in its target's star "
                "only; a bound would double the occurrence for nothing)", self.max_out_degree)
        n = self.num_nodes
        raw = clean_graph(self.graph.edge_index, n, where="EdgeSubgraphs")
        self.undirected_ = (is_undirected(raw.src, raw.dst, n) if self.edge_unit == "auto"
                            else self.edge_unit == "undirected")
        self.max_out_degree_ = (None if self.hops_ == 1 else self.max_out_degree
                                or auto_out_degree(self.hops_))
        gen = generator if generator is not None else torch.Generator().manual_seed(0)
        self._priority_seed = counter_seed(gen)
        keep = bound_entries(raw.src, raw.dst, n, seed=self._priority_seed,
                             max_out_degree=self.max_out_degree_,
                             max_in_degree=self.max_in_degree)
        src, dst = raw.src[keep], raw.dst[keep]                 # grouped by target
        counts = torch.bincount(dst, minlength=n)
        self._rowptr = torch.zeros(n + 1, dtype=torch.long)
        self._rowptr[1:] = torch.cumsum(counts, 0)
        self._src = src
        pairs = torch.unique(torch.minimum(raw.src, raw.dst) * n + torch.maximum(raw.src, raw.dst))
        self.num_units = int(pairs.numel()) if self.undirected_ else int(raw.src.numel())
        self.entries_dropped_ = int((~keep).sum())
        self.self_loops_dropped_ = int(raw.num_self_loops)

    @property
    def occurrence_bound(self) -> int:
        """The most sampled subgraphs of one step that hold one unit edge."""
        return edge_occurrence_bound(self.hops_, self.max_out_degree_,
                                     undirected=self.undirected_)

    @property
    def bounding_factor(self) -> int:
        return edge_bounding_factor(self.hops_, self.max_in_degree)

    # ------------------------------------------------------------------ plan
    def default_batch_size(self) -> int:
        from gnnprivacy.training.defaults import adaptive_batch

        return adaptive_batch(self.num_train, fraction=EDGE_BATCH_FRACTION, low=EDGE_BATCH_LOW,
                              high=EDGE_BATCH_HIGH)

    def plan(self, *, batch_size: int | None) -> SamplerPlan:
        from gnnprivacy.training import _privacy

        m = self.default_batch_size() if batch_size is None else check_int(
            "batch_size", batch_size, low=1, high=self.num_train)
        q = min(1.0, m / self.num_train)
        self._rate = q
        occ, factor = self.occurrence_bound, self.bounding_factor
        what = ("one undirected edge {u, v} (both directed entries)" if self.undirected_
                else "one directed edge u -> v")
        scope = (f"the model's parameters: every executed noisy step, for {what} added or "
                 f"removed, with {self.hops_}-hop subgraphs (one edge in at most {occ} "
                 f"subgraphs of a step, changing at most {occ * factor})")
        if self.inference == "noisy":
            scope += ("; and the predictions: one release of every message-passing layer's "
                      "noisy aggregate (pt.release_predictor())")
        unaccounted = ["node features, labels and the node set are public under the edge "
                       "unit: the guarantee does not hide them",
                       "the number of training nodes (public) sets the sampling rate"]
        if self.inference == "unprotected":
            unaccounted.insert(0, "inference is UNPROTECTED: predictions on the graph read "
                               "its private edges, outside this epsilon (LinkTeller reads "
                               "edges from them)")
        elif self.inference == "none":
            unaccounted.insert(0, "no prediction on the private graph is covered: the epsilon "
                               "is for the parameters only")
        details = {"hops": self.hops_, "edge_unit": "undirected" if self.undirected_
                   else "directed", "occurrence_bound": occ, "bounding_factor": factor,
                   "changed_subgraphs_bound": occ * factor, "max_out_degree": self.max_out_degree_,
                   "max_in_degree": self.max_in_degree, "sample_rate": q, "batch_size": m,
                   "num_unit_edges": self.num_units, "entries_dropped": self.entries_dropped_,
                   "self_loops_dropped": self.self_loops_dropped_, "inference": self.inference}
        return SamplerPlan(
            _privacy.edge_event_factory(sample_rate=q, occurrence=occ, bounding_factor=factor,
                                        undirected=bool(self.undirected_)),
            "pld", NeighboringRelation.ADD_OR_REMOVE, "poisson", q, q * self.num_train, 1.0,
            1.0 / (10.0 * max(self.num_units, 1)), scope, tuple(unaccounted), details,
            unit=PrivacyUnit.EDGE)

    def default_steps(self, plan: SamplerPlan, *, epsilon: float, delta: float) -> int:
        from gnnprivacy.training.defaults import adaptive_steps

        group = self.occurrence_bound * self.bounding_factor
        return adaptive_steps(self.num_train, plan.expected_batch_size, epsilon=epsilon,
                              delta=delta, sensitivity=2.0 * group)

    # ------------------------------------------------------------------ batches
    def sample(self, generator: torch.Generator) -> Data:
        return self.subgraphs(self._poisson_train_nodes(generator))

    def subgraphs(self, centres: Tensor) -> Data:
        """The batch of the ``K``-hop computation subgraphs of ``centres`` (node ids)."""
        keys, e_src, e_dst = subgraph_entries(self._rowptr, self._src, centres, self.hops_,
                                              self.num_nodes)
        return self._entries_batch(keys, e_src, e_dst, int(centres.numel()))

    def _entries_batch(self, keys: Tensor, e_src: Tensor, e_dst: Tensor, num: int) -> Data:
        """The batch of `subgraph_entries`' rows and entries (``subgraph * n + node`` keys,
        the ``num`` centres first): each subgraph's centre row, then its other rows."""
        n = self.num_nodes
        sub, node = keys // n, keys % n
        is_centre = torch.zeros(keys.numel(), dtype=torch.bool)
        is_centre[:num] = True
        order = torch.argsort(sub * 2 + (~is_centre).long(), stable=True)
        keys, sub, node = keys[order], sub[order], node[order]
        counts = torch.bincount(sub, minlength=num)
        first = torch.cumsum(counts, 0) - counts
        sorted_keys, perm = torch.sort(keys)
        rows = lambda k: perm[torch.searchsorted(sorted_keys, k)]   # noqa: E731
        return self._assemble(node, sub, first, num, (rows(e_src), rows(e_dst)))

    def __repr__(self) -> str:
        stream = ("" if self.sampling_stream == "generator"
                  else f", sampling_stream={self.sampling_stream!r}")
        return (f"EdgeSubgraphs(hops={self.hops!r}, max_out_degree={self.max_out_degree!r}, "
                f"max_in_degree={self.max_in_degree!r}, edge_unit={self.edge_unit!r}, "
                f"inference={self.inference!r}{stream})")
