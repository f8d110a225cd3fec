"""Subgraph samplers for `gnnprivacy.make_private`: each draws the disjoint subgraphs of
one step and knows the privacy event of that draw.

A batch is a PyG `Data` with ``x``, ``edge_index`` (local ids,
every edge inside one subgraph), ``y``, ``batch`` (subgraph of every row, non-decreasing),
``center`` (row of each subgraph's centre, in subgraph order), ``n_id`` (node id in the
input graph of every row) and ``num_subgraphs``, plus every edge-level attribute of the
input graph (``edge_weight``, ``edge_attr``, any tensor whose first dimension is the number
of edges), sliced to the batch's edges (`edge_level_keys`; of duplicate edges, the first).
A node sampled into several subgraphs of one step appears once per subgraph (its own row
each time), so the subgraphs are disjoint.

Samplers (one noisy step per batch):

* `HeterPoissonSubgraphs` (``"heterpoisson"``): star subgraphs of Xiang et al., IEEE
  S&P 2024 -- each training node is a centre with probability ``q_b``, each in-neighbour
  ``j`` joins with probability ``min(1, M / D_out(j))``; edges ``j -> centre``. Event: the
  HeterPoisson mixture of Gaussians (its Theorem 2; the sound PLD analysis by default).
* `DegreeBoundedSubgraphs` (``"degree_bounded"``): DP-GNN (Daigavane et al.)'s
  degree-bounded graph, built once by its greedy Algorithm 2; a batch is a uniform
  ``m``-subset of training nodes (or Poisson), each with its ``K``-hop neighbourhood in the
  bounded graph (``K`` = the model's number of message-passing layers unless given). One node
  reaches at most ``M_K = 1 + D Σ_{j<K} (D-1)^j`` subgraphs; event: DP-GNN's multi-term amplified
  Gaussian with that occurrence bound, noise ``2 M_K C`` per unit multiplier.
* `NodeSubgraphs` (``"nodes"``): every training node alone, Poisson sampling, no
  edges: naive DP-SGD (the DP-MLP baseline). Event: the Poisson-subsampled Gaussian.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor
from torch_geometric.data import Data

from gnnprivacy._validation import check_choice, check_int, check_real
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.sampling.counter_rng import CounterRandom, counter_seed

__all__ = ["DegreeBoundedSubgraphs", "HeterPoissonSubgraphs", "NodeSubgraphs", "SAMPLERS",
           "SamplerPlan", "SubgraphSampler", "make_sampler"]


@dataclass(frozen=True)
class SamplerPlan:
    """What the accountant and the engine need from a sampler, fixed before training.

    Attributes:
        event_factory: noise multiplier ``z`` -> the event of one step.
        accountant: ``"pld"`` or ``"rdp"``.
        relation: the neighbouring relation of the event.
        sampling: the engine's sampling declaration (``DPEngine(sampling=...)``).
        rate: the probability that a given training node is a centre in one step.
        expected_batch_size: ``B_exp`` dividing the noisy sum.
        noise_scale: engine noise multiplier = ``noise_scale * z`` (sensitivity in clip units).
        default_delta: delta when the user gives none.
        scope, unaccounted: what the epsilon covers and what it does not.
        details: sampler facts for the record.
        unit: the privacy unit (a node; a graph for `GraphSampler`).
        occurrence: for a Poisson-sampled event, the most subgraphs of one step one unit's
            data enters (1; a group's graphs for `GraphSampler` with ``groups``); the
            noise covers that many clip norms (``noise_scale``), and the code audit checks
            it.
    """

    event_factory: Any
    accountant: str
    relation: NeighboringRelation
    sampling: str
    rate: float
    expected_batch_size: float
    noise_scale: float
    default_delta: float
    scope: str
    unaccounted: tuple[str, ...] = ()
    details: dict = field(default_factory=dict)
    unit: PrivacyUnit = PrivacyUnit.NODE
    occurrence: int = 1


def _check_data(data: Any) -> Data:
    if not isinstance(data, Data):
        raise InvalidParameterError("data", "a torch_geometric.data.Data graph",
                                    type(data).__name__)
    for key in ("x", "y", "edge_index", "train_mask"):
        if getattr(data, key, None) is None:
            hint = (" (a split: gnnprivacy.datasets.random_split or set data.train_mask)"
                    if key == "train_mask" else "")
            raise InvalidParameterError("data", f"a graph with data.{key}{hint}",
                                        f"no data.{key}")
    if int(data.train_mask.sum()) < 2:
        raise InvalidParameterError("data.train_mask", "at least 2 training nodes",
                                    int(data.train_mask.sum()))
    return data


class SubgraphSampler:
    """Base class. ``setup(data, model=...)`` reads the public sizes and builds the sampler;
    ``plan(...)`` returns the `SamplerPlan`; ``sample(generator)`` one batch."""

    name = "base"
    #: node ids of the training graph and its features/labels (set by setup)
    graph: Data
    #: ``"generator"`` (trials drawn from the generator passed to `sample`) or ``"counter"``
    #: (every trial keyed by ``(seed, step, node ids)``, the seed one draw of that generator:
    #: the stream a sharded run reproduces rank by rank)
    sampling_stream = "generator"
    _counter: tuple[int, int] | None = None

    def setup(self, data: Data, *, model: torch.nn.Module | None = None,
              generator: torch.Generator | None = None) -> None:
        from gnnprivacy.training.nonprivate import training_graph

        self.graph = training_graph(_check_data(data))
        self.train_nodes = self.graph.train_mask.nonzero().flatten()
        self.num_train = int(self.train_nodes.numel())
        self.num_nodes = int(self.graph.num_nodes)

    def default_batch_size(self) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def plan(self, *, batch_size: int | None) -> SamplerPlan:  # pragma: no cover - abstract
        raise NotImplementedError

    def default_steps(self, plan: SamplerPlan, *, epsilon: float, delta: float) -> int:
        from gnnprivacy.training.defaults import adaptive_steps

        return adaptive_steps(self.num_train, plan.expected_batch_size, epsilon=epsilon,
                              delta=delta, sensitivity=plan.noise_scale)

    def steps_for_epochs(self, plan: SamplerPlan, epochs: float) -> int:
        """``ceil(epochs / rate)``: ``epochs`` expected passes over the training nodes."""
        return max(1, math.ceil(float(epochs) / plan.rate))

    def sample(self, generator: torch.Generator) -> Data:  # pragma: no cover - abstract
        raise NotImplementedError

    # ------------------------------------------------------------------ sampling stream
    def _step_random(self, generator: torch.Generator) -> torch.Generator | CounterRandom:
        """This step's source of trials: ``generator`` itself, or the counter stream at the
        next step (its seed drawn from ``generator`` on the first step)."""
        if self.sampling_stream != "counter":
            return generator
        seed, step = self._counter or (self._stream_seed(generator), 0)
        self._counter = (seed, step + 1)
        return CounterRandom(seed, step)

    def _stream_seed(self, generator: torch.Generator) -> int:
        return counter_seed(generator)

    def _poisson_train_nodes(self, generator: torch.Generator) -> Tensor:
        """This step's Poisson sample of ``train_nodes`` at ``self._rate``: from the
        generator, or each node's central trial keyed by its id (the counter stream)."""
        from gnnprivacy.sampling import poisson_node_batch
        from gnnprivacy.sampling.heter_poisson import STREAM_CENTRAL

        rng = self._step_random(generator)
        if isinstance(rng, CounterRandom):
            return self.train_nodes[rng.uniform(STREAM_CENTRAL, self.train_nodes) < self._rate]
        return poisson_node_batch(self.train_nodes, rate=self._rate, generator=rng)

    def stream_state(self) -> tuple[int, int] | None:
        """The counter stream's ``(seed, next step)`` (``None`` before its first step)."""
        return self._counter

    def load_stream_state(self, state: tuple[int, int] | None) -> None:
        """Resume the counter stream at ``state`` (from `stream_state`)."""
        self._counter = None if state is None else (int(state[0]), int(state[1]))

    # ------------------------------------------------------------------ batch assembly
    def _rows(self, nodes: Tensor) -> tuple[Tensor, Tensor]:
        """Features and labels of the batch's rows (node ids ``nodes``)."""
        return self.graph.x[nodes], self.graph.y[nodes]

    def _edge_keys(self) -> list[str]:
        return edge_level_keys(self.graph)

    def _assemble(self, nodes: Tensor, seg: Tensor, centre_first: Tensor, num: int,
                  edges: tuple[Tensor, Tensor]) -> Data:
        """A batch from rows ``nodes`` grouped by subgraph ``seg`` (non-decreasing), the row of
        each centre, and local edges ``(src_rows, dst_rows)``.

        The subgraphs are renumbered by size (stable), so the subgraphs of one size occupy one
        contiguous block of rows: the engine then reads each size class of a layer's rows as a
        view, with no copy (the subgraphs' order in a batch carries no meaning)."""
        g = self.graph
        sizes = torch.bincount(seg, minlength=num)
        order = torch.argsort(sizes, stable=True)               # old subgraph ids, by size
        if num and not bool((order == torch.arange(num)).all()):
            rank = torch.empty_like(order)
            rank[order] = torch.arange(num)                    # old id -> new id
            new_seg = rank[seg]
            rows = torch.argsort(new_seg, stable=True)          # new row -> old row
            where = torch.empty_like(rows)
            where[rows] = torch.arange(rows.numel())            # old row -> new row
            nodes, seg = nodes[rows], new_seg[rows]
            centre_first = where[centre_first[order]]
            edges = (where[edges[0]], where[edges[1]])
        x, y = self._rows(nodes)
        out = Data(x=x, edge_index=torch.stack(edges), y=y, batch=seg,
                   center=centre_first, n_id=nodes, num_subgraphs=int(num),
                   num_nodes=int(nodes.numel()))
        keys = self._edge_keys()
        if keys:
            ids = self._edge_ids(nodes[edges[0]], nodes[edges[1]])
            for key in keys:
                out[key] = g[key][ids]
        return out

    def _edge_ids(self, src: Tensor, dst: Tensor) -> Tensor:
        """The id in the input graph of each edge ``src -> dst`` (the first of duplicates)."""
        g = self.graph
        lookup = getattr(self, "_edge_lookup", None)
        if lookup is None:
            key = g.edge_index[1] * self.num_nodes + g.edge_index[0]
            lookup = self._edge_lookup = torch.sort(key, stable=True)
        sorted_keys, perm = lookup
        query = dst * self.num_nodes + src
        pos = torch.searchsorted(sorted_keys, query).clamp_max(max(sorted_keys.numel() - 1, 0))
        if query.numel() and not bool((sorted_keys[pos] == query).all()):  # pragma: no cover
            raise RuntimeError("a sampled edge is not an edge of the input graph")
        return perm[pos]

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in vars(self).items()
                         if not k.startswith("_") and k not in ("graph", "train_nodes",
                                                                "num_train", "num_nodes"))
        return f"{type(self).__name__}({opts})"


class HeterPoissonSubgraphs(SubgraphSampler):
    """HeterPoisson star subgraphs (spec of Xiang et al., S&P 2024, Algorithms 2-3).

    Args:
        M: neighbour multiplier (>= 1): peripheral ``j`` joins with ``min(1, M / D_out(j))``.
        enforce_no_overlap: drop peripherals that are centres of the same step (default).
        peripheral_pool: ``"all_visible"`` (every node of the training graph) or
            ``"train_only"``.
        degree_public: account over the graph's largest out-degree instead of ``|V| - 1``.
        accounting: ``"sound"`` (PLD of the mixture) or ``"paper"`` (Theorem 2's RDP).
        sampling_stream: ``"generator"`` (default) or ``"counter"`` (trials keyed by node
            ids: the single-process reference of `gnnprivacy.training.sharded`'s
            `make_private_sharded`; same law, same event).

    Privacy: unit node, add/remove of one training node inside a fixed graph whose degree
    sequence is public (peripheral probabilities read whole-graph out-degrees).
    """

    #: every edge of a batch lies inside one subgraph (`SubgraphSampler._assemble` is given
    #: local edges of each subgraph), so the engine skips re-checking the batch's own,
    #: unchanged ``edge_index`` at every step
    edges_inside = True

    name = "heterpoisson"

    def __init__(self, *, M: float = 1.0, enforce_no_overlap: bool = True,
                 peripheral_pool: str = "all_visible", degree_public: bool = False,
                 accounting: str = "sound", sampling_stream: str = "generator"):
        self.M = check_real("M", M, low=1.0)
        if math.isinf(self.M):
            raise InvalidParameterError("M", "a finite real >= 1", M)
        self.enforce_no_overlap = bool(enforce_no_overlap)
        self.peripheral_pool = check_choice("peripheral_pool", peripheral_pool,
                                            ("all_visible", "train_only"))
        self.degree_public = bool(degree_public)
        self.accounting = check_choice("accounting", accounting, ("sound", "paper"))
        self.sampling_stream = _check_stream(sampling_stream)

    def default_batch_size(self) -> int:
        from gnnprivacy.training.defaults import heterpoisson_rate

        return max(1, round(heterpoisson_rate(self.num_nodes, self.num_train) * self.num_train))

    def plan(self, *, batch_size: int | None) -> SamplerPlan:
        from gnnprivacy.sampling import HeterPoissonSampler

        q_b = self._rate_for(batch_size)
        g = self.graph
        inductive = getattr(getattr(g, "split", None), "kind", None) == "inductive"
        elig = (g.train_mask if inductive or self.peripheral_pool == "train_only"
                else torch.ones(self.num_nodes, dtype=torch.bool))
        self._sampler = HeterPoissonSampler(g.edge_index, self.num_nodes,
                                            candidates=g.train_mask, eligible=elig, q_b=q_b,
                                            M=self.M, enforce_no_overlap=self.enforce_no_overlap)
        d_max = self._sampler.max_out_degree if self.degree_public else self.num_nodes - 1
        return self._plan_for(q_b, d_max)

    def _rate_for(self, batch_size: int | None) -> float:
        m = self.default_batch_size() if batch_size is None else check_int(
            "batch_size", batch_size, low=1, high=self.num_train)
        return min(1.0, m / self.num_train)

    def _plan_for(self, q_b: float, d_max: int) -> SamplerPlan:
        """The plan of central rate ``q_b`` accounted over out-degrees up to ``d_max``."""
        from gnnprivacy.training import _privacy

        factory = _privacy.heterpoisson_event_factory(
            q_b=q_b, M=self.M, max_out_degree=d_max, overlap_removal=self.enforce_no_overlap,
            mode=self.accounting)
        unaccounted = ["degree sequence (assumed public): peripheral sampling probabilities "
                       "are computed from whole-graph out-degrees, so removing a node also "
                       "changes its neighbours' sampling probabilities"]
        return SamplerPlan(
            factory, _privacy.heterpoisson_accountant_kind(self.accounting),
            NeighboringRelation.ADD_OR_REMOVE, "heterpoisson", q_b, q_b * self.num_train, 1.0,
            float(self.num_nodes) ** -1.1,
            "the model's parameters: every executed noisy step, for one training node added "
            "or removed with its features, label and edges, inside a fixed graph whose degree "
            "sequence is public", tuple(unaccounted),
            {"q_b": q_b, "M": self.M, "max_out_degree_accounted": d_max,
             "enforce_no_overlap": self.enforce_no_overlap,
             "accounting_mode": self.accounting})

    def default_steps(self, plan: SamplerPlan, *, epsilon: float, delta: float) -> int:
        from gnnprivacy.training.defaults import MAX_STEPS_HETERPOISSON

        return min(super().default_steps(plan, epsilon=epsilon, delta=delta),
                   MAX_STEPS_HETERPOISSON)

    def sample(self, generator: torch.Generator) -> Data:
        return self._stars_batch(self._sampler.sample(self._step_random(generator)))

    def _stars_batch(self, stars) -> Data:
        """The batch of a `StarBatch` in node ids (edges peripheral -> centre)."""
        num = stars.num_subgraphs
        nodes = torch.cat([stars.centers, stars.periph_nodes])
        seg = torch.cat([torch.arange(num), stars.periph_subgraph])
        order = torch.argsort(seg, stable=True)           # centre first within each subgraph
        counts = torch.bincount(seg, minlength=num)
        first = torch.cumsum(counts, 0) - counts
        seg = seg[order]
        rows = torch.arange(seg.numel())
        periph = rows != first[seg]
        src = rows[periph]
        return self._assemble(nodes[order], seg, first, num, (src, first[seg[periph]]))


#: the auto degree bound keeps one node in at most this many subgraphs of the bounded graph
MAX_AUTO_OCCURRENCE = 4


def occurrence_bound(max_degree: int, hops: int) -> int:
    """The most ``K``-hop neighbourhoods of a graph of degree at most ``D`` that one node
    lies in: ``z`` is in ``v``'s neighbourhood exactly when ``v`` is within ``K`` hops of
    ``z``, and a ball of radius ``K`` holds at most ``1 + D Σ_{j<K} (D-1)^j`` nodes (the
    Moore bound: a walk leaving ``z`` has ``D`` first steps and at most ``D - 1`` new
    neighbours after each). Tighter than ``Σ_{j<=K} D^j``: 2 instead of ``K + 1`` for
    ``D = 1``."""
    return 1 + max_degree * sum((max_degree - 1) ** j for j in range(hops))


def auto_degree_bound(hops: int) -> int:
    """The largest ``D >= 1`` with ``M_K(D) <= MAX_AUTO_OCCURRENCE`` (1 when none is, and
    for ``K = 0``, where no edge is used)."""
    d = 1
    while hops > 0 and occurrence_bound(d + 1, hops) <= MAX_AUTO_OCCURRENCE:
        d += 1
    return d


class DegreeBoundedSubgraphs(SubgraphSampler):
    """DP-GNN degree-bounded ``K``-hop subgraphs (Daigavane et al., Algorithms 1-2).

    Args:
        max_degree: the degree bound ``D`` of the bounded graph; ``None``: the largest ``D``
            whose occurrence bound ``M_K`` is at most `MAX_AUTO_OCCURRENCE` (4, a
            sensitivity of 8 clip norms like DP-GNN's own ``K = 3`` for one layer): ``D = 3``
            for one hop, ``D = 1`` for two or three.
        hops: subgraph radius ``K``; ``None``: the model's number of message-passing layers.
        sampling: ``"fixed"`` (uniform ``m``-subsets, replace-one relation, the paper) or
            ``"poisson"`` (add/remove).
        sampling_stream: ``"generator"`` (default) or ``"counter"``: the greedy pass's order
            and every step's batch keyed by node ids (`CounterRandom`): the same laws, the
            single-process reference of the sharded sampler
            (`gnnprivacy.training.sharded_bounded`).

    Privacy: one node lies in at most ``M_K = 1 + D Σ_{j<K} (D-1)^j`` subgraphs of the bounded
    graph (`occurrence_bound`),
    so the summed clipped gradient moves by at most ``2 M_K C``. The greedy bounding pass
    reads the raw graph and is not covered (listed under ``unaccounted``).
    """

    #: every edge of a batch lies inside one subgraph (`SubgraphSampler._assemble` is given
    #: local edges of each subgraph), so the engine skips re-checking the batch's own,
    #: unchanged ``edge_index`` at every step
    edges_inside = True

    name = "degree_bounded"

    def __init__(self, *, max_degree: int | None = None, hops: int | None = None,
                 sampling: str = "fixed", sampling_stream: str = "generator"):
        self.max_degree = None if max_degree is None else check_int("max_degree", max_degree,
                                                                    low=1)
        self.hops = None if hops is None else check_int("hops", hops, low=0)
        self.sampling = check_choice("sampling", sampling, ("fixed", "poisson"))
        self.sampling_stream = _check_stream(sampling_stream)

    def setup(self, data: Data, *, model: torch.nn.Module | None = None,
              generator: torch.Generator | None = None) -> None:
        super().setup(data, model=model, generator=generator)
        from gnnprivacy.sampling import sample_degree_bounded_subgraphs
        from gnnprivacy.sampling._graph import clean_graph

        self._set_bounds(model)
        self._bounded = sample_degree_bounded_subgraphs(
            self.graph.edge_index, self.num_nodes, train_nodes=self.train_nodes,
            max_degree=self.max_degree_, generator=self._bounding_random(generator),
            bound_all_nodes=self.hops_ > 1)
        self._csr = clean_graph(self._bounded.edge_index, self.num_nodes,
                                where="DegreeBoundedSubgraphs")

    def _set_bounds(self, model: torch.nn.Module | None) -> None:
        self.hops_ = _message_passing_depth(model) if self.hops is None else self.hops
        self.max_degree_ = (auto_degree_bound(self.hops_) if self.max_degree is None
                            else self.max_degree)

    def _bounding_random(self, generator: torch.Generator | None):
        """The greedy pass's randomness: ``generator`` (seed 0 without one), or with the
        counter stream a `CounterRandom` seeded by one draw of it (the order keyed by node)."""
        gen = generator if generator is not None else torch.Generator().manual_seed(0)
        return CounterRandom(self._stream_seed(gen)) if self.sampling_stream == "counter" \
            else gen

    @property
    def occurrence_bound(self) -> int:
        """``M_K``: the most subgraphs one node can lie in (`occurrence_bound`)."""
        return occurrence_bound(self.max_degree_, self.hops_)

    def default_batch_size(self) -> int:
        from gnnprivacy.training.defaults import BATCH_FRACTION, adaptive_batch

        return adaptive_batch(self.num_train, fraction=BATCH_FRACTION["dpgnn"], low=256,
                              high=10000)

    def plan(self, *, batch_size: int | None) -> SamplerPlan:
        from gnnprivacy.sampling import NodeBatchSampler
        from gnnprivacy.training import _privacy

        m = self.default_batch_size() if batch_size is None else check_int(
            "batch_size", batch_size, low=1, high=self.num_train)
        occ = self.occurrence_bound
        if occ - 1 > self.num_train - 1:
            raise InvalidParameterError(
                "max_degree", f"an occurrence bound M_K (degree bound {self.max_degree_}, "
                f"{self.hops_} hops) of at most the {self.num_train} training nodes",
                f"M_K = {occ}")
        self._batches = NodeBatchSampler(self.num_train, batch_size=m, sampling=self.sampling)
        self._m = m
        factory = _privacy.dpgnn_event_factory(num_train=self.num_train, batch_size=m,
                                               max_degree=occ - 1, sampling=self.sampling)
        relation = (NeighboringRelation.REPLACE if self.sampling == "fixed"
                    else NeighboringRelation.ADD_OR_REMOVE)
        return SamplerPlan(
            factory, "rdp", relation, "degree_bounded", m / self.num_train, float(m),
            2.0 * occ, 1.0 / (10.0 * self.num_train),
            f"the model's parameters: every executed noisy step, for one node of the "
            f"degree-bounded graph (degree <= {self.max_degree_}) "
            + ("replaced by another" if self.sampling == "fixed" else "added or removed")
            + f", with {self.hops_}-hop subgraphs (each node in at most {occ})",
            ("greedy degree bounding (DP-GNN Algorithm 2) depends on the data: removing one "
             "node can change other nodes' neighbourhoods",
             "the number of training nodes (assumed public) sets the sampling rate"),
            {"max_degree": self.max_degree_, "hops": self.hops_, "occurrence_bound": occ,
             "sampling": self.sampling, "batch_size": m})

    def steps_for_epochs(self, plan: SamplerPlan, epochs: float) -> int:
        return max(1, math.ceil(float(epochs) * self.num_train / plan.expected_batch_size))

    def sample(self, generator: torch.Generator) -> Data:
        seeds = self._seeds(self._step_random(generator))
        num = int(seeds.numel())
        n = self.num_nodes
        keys = torch.arange(num) * n + seeds                 # (subgraph, node) pairs
        frontier = keys
        for _ in range(self.hops_):
            sub, node = frontier // n, frontier % n
            rep, nb = self._neighbours(node)
            new = torch.unique(sub[rep] * n + nb)
            frontier = new[~torch.isin(new, keys)]
            keys = torch.cat([keys, frontier])
        # rows: subgraph-major, centre first (its key sorts first only by construction below)
        sub, node = keys // n, keys % n
        is_centre = torch.zeros_like(keys, dtype=torch.bool)
        is_centre[:num] = True
        order = torch.argsort(sub * 2 + (~is_centre).long(), stable=True)
        keys, sub, node = keys[order], sub[order], node[order]
        counts = torch.bincount(sub, minlength=num)
        first = torch.cumsum(counts, 0) - counts
        # induced edges of the bounded graph inside each subgraph
        rep, nb = self._neighbours(node)
        nb_keys = sub[rep] * n + nb
        sorted_keys, perm = torch.sort(keys)
        pos = torch.searchsorted(sorted_keys, nb_keys).clamp_max(max(keys.numel() - 1, 0))
        inside = sorted_keys[pos] == nb_keys if keys.numel() else nb_keys.bool()
        src_rows = perm[pos[inside]]                    # neighbour j ...
        dst_rows = rep[inside]                          # ... -> row that aggregates it
        return self._assemble(node, sub, first, num, (src_rows, dst_rows))

    def _seeds(self, rng) -> Tensor:
        """The step's centres: a uniform ``m``-subset of the training nodes (``"fixed"``) or
        each with probability ``m / N`` (``"poisson"``); with the counter stream the
        ``m`` smallest keys keyed by node, or the keys below ``m / N``."""
        if not isinstance(rng, CounterRandom):
            return self.train_nodes[self._batches.sample(rng)]
        from gnnprivacy.sampling.heter_poisson import STREAM_CENTRAL

        u = rng.uniform(STREAM_CENTRAL, self.train_nodes)
        if self.sampling == "poisson":
            return self.train_nodes[u < self._m / self.num_train]
        return self.train_nodes[u <= self._kth_key(u, self._m)]

    def _kth_key(self, u: Tensor, m: int) -> float:
        """The ``m``-th smallest key over all training nodes (here: all of them are ``u``)."""
        return float(torch.kthvalue(u, m).values) if u.numel() else float("inf")

    def _neighbours(self, nodes: Tensor) -> tuple[Tensor, Tensor]:
        """The bounded-graph neighbours of ``nodes``: ``(rep, nb)``, ``nb`` the neighbours in
        ascending order per node and ``rep`` the position in ``nodes`` of each."""
        rowptr, src = self._csr.rowptr, self._csr.src
        start, count = rowptr[nodes], rowptr[nodes + 1] - rowptr[nodes]
        rep = torch.repeat_interleave(torch.arange(nodes.numel()), count)
        offs = torch.arange(rep.numel()) - (torch.cumsum(count, 0) - count)[rep]
        return rep, src[start[rep] + offs]


class NodeSubgraphs(SubgraphSampler):
    """Every training node alone, Poisson sampled: naive DP-SGD with no graph (DP-MLP).

    Args:
        sampling_stream: ``"generator"`` (default) or ``"counter"`` (each node's trial keyed
            by its id: the single-process reference of a sharded run; same law and event).

    Privacy: unit node, add/remove; one Poisson-subsampled Gaussian event per step. The
    model sees no edge, so edges are outside the guarantee's object.
    """

    #: every edge of a batch lies inside one subgraph (`SubgraphSampler._assemble` is given
    #: local edges of each subgraph), so the engine skips re-checking the batch's own,
    #: unchanged ``edge_index`` at every step
    edges_inside = True

    name = "nodes"
    unit = PrivacyUnit.NODE
    scope = ("the model's parameters: every executed noisy step, for one training node added "
             "or removed (features and label; the model sees no edge)")

    def __init__(self, *, sampling_stream: str = "generator"):
        self.sampling_stream = _check_stream(sampling_stream)

    def default_batch_size(self) -> int:
        from gnnprivacy.training.defaults import BATCH_FRACTION, adaptive_batch

        return adaptive_batch(self.num_train, fraction=BATCH_FRACTION["dpmlp"], low=256,
                              high=4096)

    def plan(self, *, batch_size: int | None) -> SamplerPlan:
        from gnnprivacy.training import _privacy

        m = self.default_batch_size() if batch_size is None else check_int(
            "batch_size", batch_size, low=1, high=self.num_train)
        q = min(1.0, m / self.num_train)
        self._rate = q
        return SamplerPlan(
            _privacy.dpsgd_event_factory(sample_rate=q), "pld",
            NeighboringRelation.ADD_OR_REMOVE, "poisson", q, q * self.num_train, 1.0,
            1.0 / (10.0 * self.num_train), self.scope,
            (f"the number of training {self.unit.value}s (assumed public) sets the sampling "
             "rate",), {"sample_rate": q, "batch_size": m, **self._details()}, unit=self.unit)

    def _details(self) -> dict:
        return {}

    def sample(self, generator: torch.Generator) -> Data:
        return self._nodes_batch(self._poisson_train_nodes(generator))

    def _nodes_batch(self, nodes: Tensor) -> Data:
        num = int(nodes.numel())
        empty = torch.zeros(0, dtype=torch.long)
        return self._assemble(nodes, torch.arange(num), torch.arange(num), num, (empty, empty))


SAMPLERS = {"heterpoisson": HeterPoissonSubgraphs, "degree_bounded": DegreeBoundedSubgraphs,
            "nodes": NodeSubgraphs}


def make_sampler(sampler: str | SubgraphSampler) -> SubgraphSampler:
    """A sampler instance from its name (default options) or passed through.

    Raises:
        InvalidParameterError: an unknown name, listing the valid ones.
    """
    if isinstance(sampler, SubgraphSampler):
        return sampler
    if isinstance(sampler, str) and sampler in SAMPLERS:
        return SAMPLERS[sampler]()
    raise InvalidParameterError("sampler", f"one of {sorted(SAMPLERS)} or a SubgraphSampler",
                                sampler)


def _check_stream(stream: str) -> str:
    return check_choice("sampling_stream", stream, ("generator", "counter"))


def edge_level_keys(graph: Data) -> list[str]:
    """The graph's edge-level tensor attributes: first dimension the number of edges (a name
    with ``edge`` in it when there are as many nodes as edges), ``edge_index`` excepted."""
    n_edges = int(graph.edge_index.shape[1])
    ambiguous = n_edges == graph.num_nodes
    return [k for k in graph.keys() if k != "edge_index" and isinstance(graph[k], Tensor)
            and graph[k].dim() >= 1 and graph[k].shape[0] == n_edges
            and (not ambiguous or "edge" in k)]


def _message_passing_depth(model: torch.nn.Module | None) -> int:
    """Number of PyG ``MessagePassing`` modules in ``model`` that are not inside another
    one (a GIN's inner MLP does not count): the receptive field of a stacked model."""
    if model is None:
        return 1
    from torch_geometric.nn.conv import MessagePassing

    inner = set()
    count = 0
    for module in model.modules():
        if isinstance(module, MessagePassing) and id(module) not in inner:
            count += 1
            inner.update(id(m) for m in module.modules() if m is not module)
    return count
