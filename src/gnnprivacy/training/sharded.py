r"""HeterPoisson node-level DP with the graph sharded over the ranks (no rank holds the graph).

`gnnprivacy.training.distributed` is data-parallel: every rank holds the whole graph. Here
each rank ``k`` holds one part of `gnnprivacy.datasets.shards.partition_graph` (its nodes'
features, labels and in-edges, memory-mapped) and the global maps (owner, row, out-degree,
training bit per node), and per step:

1. **sampling**: every trial is keyed by ``(seed, step, node ids)`` (`CounterRandom`, the
   ``"counter"`` sampling stream of `HeterPoissonTrainer`): rank ``k`` draws the central
   trials of its own training nodes, so the union over the ranks IS the global Poisson
   sample; each centre's in-neighbours come from the part's in-edges, each kept with
   probability ``min(1, M / D_ot(j))`` by the trial keyed ``(centre, j)``; a neighbour that
   is itself a centre of the step (on any rank) is removed, which every rank decides
   locally from the same keyed central trial of ``j``;
2. **exchange**: the feature rows of neighbours owned by other ranks are fetched with
   ``torch.distributed`` all-to-all (counts, then the requested rows' ids, then the rows);
   bytes per step: ``8 P`` (counts) + ``8`` per requested row + the rows themselves;
3. **clipping**: each rank clips the gradients of its own star sub-graphs (ghost clipping,
   as the single-process engine);
4. **noise and release**: rank 0 adds ONE draw of ``N(0, σ² I)`` (the run's noise generator,
   or the OS CSPRNG in secure mode) and one ``all_reduce(SUM)`` gives every rank the noisy
   sum; every rank takes the same optimizer step and composes one event per step.

The released sum is the single-process run's with ``sampling_stream="counter"`` and the same
seed: the same sub-graphs, clipped alike, the same noise; parameters agree up to
floating-point summation order and the ledgers are equal (``tests/training/test_sharded.py``).

`make_private_sharded` does the same for the user's own model and loop (``"heterpoisson"``,
``"nodes"`` and, on graph shards, ``"graphs"`` (`gnnprivacy.training.sharded_graphs`);
reference: `make_private` with ``sampling_stream="counter"``,
``tests/training/test_sharded_private.py``, ``tests/training/test_sharded_units.py``).

*Privacy.* Unchanged from `HeterPoissonTrainer`: node unit, add/remove inside a fixed graph
whose degree sequence is public, one HeterPoisson mixture event per executed step. The
ranks are one trusted party (the trainer): before the noise a rank sees the raw feature
rows it fetches and, inside the reduction, the other ranks' clipped sums. The
counter-based stream (splitmix64 keyed hashes) is not a CSPRNG; its seed comes from the
sampling generator (OS-seeded on rank 0 and broadcast in secure mode).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor
from torch.nn import functional as F
from torch_geometric.data import Data

from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.datasets.shards import Shard
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.nn.star import StarGNN
from gnnprivacy.sampling.counter_rng import CounterRandom
from gnnprivacy.sampling.star_batch import StarBatch
from gnnprivacy.training import _privacy
from gnnprivacy.training.checkpoint import fingerprint
from gnnprivacy.training.distributed import (DistributedDPEngine, RankZeroCheckpoints,
                                             broadcast_parameters, rank_and_world)
from gnnprivacy.training.dp import make_optimizer
from gnnprivacy.training.node_dp.heterpoisson import HeterPoissonTrainer
from gnnprivacy.training.private.make_private import PrivateTraining
from gnnprivacy.training.private.samplers import HeterPoissonSubgraphs, NodeSubgraphs
from gnnprivacy.datasets.graph_shards import open_graph_shard
from gnnprivacy.training.sharded_graphs import ShardedGraphSampler
from gnnprivacy.training.sharded_bounded import ShardedDegreeBoundedSubgraphs
from gnnprivacy.training.sharded_edges import ShardedEdgeSubgraphs
from gnnprivacy.training.sharded_parts import (ShardedRunError, _feature_norm, _Part,
                                               _ShardedSubgraphs, collective_guard,
                                               exchange_rows, fetch_rows, is_collective_failure,
                                               new_exchange, open_part, rank_zero_seed,
                                               sample_part_stars)

__all__ = ["ShardedGraphSampler", "ShardedHeterPoissonSubgraphs", "ShardedHeterPoissonTrainer",
           "ShardedNodeSubgraphs", "fit_graph_classifier_sharded",
           "ShardedPrivateTraining", "ShardedRunError", "collective_guard", "exchange_rows",
           "fetch_rows", "is_collective_failure", "make_private_sharded", "open_part",
           "sample_part_stars"]


class ShardedHeterPoissonTrainer(RankZeroCheckpoints, HeterPoissonTrainer):
    """`HeterPoissonTrainer` with the graph sharded over the ranks (module docstring).

    Takes `HeterPoissonTrainer`'s arguments (the sampling stream is always ``"counter"``;
    the fixed-shape GPU path is not used) and is fitted on shards instead of a ``Data``:
    ``fit(path)`` on every rank of an initialised process group with as many ranks as parts
    (``torchrun``, or `spawn_local` on one machine); rank ``k`` opens part ``k``. Without a
    group it is one rank on a one-part partition. Only rank 0 writes checkpoints; with
    ``resume`` every rank reads the same file. A failed collective (a rank killed or stuck
    past the group's timeout) raises `ShardedRunError` naming the step.

    Transductive only (the shards carry one training mask; every node is visible).

    Attributes (after `fit`), besides `HeterPoissonTrainer`'s: ``exchange_`` (per-rank
    totals over the run: ``bytes_sent``, ``remote_rows`` fetched, ``remote_feature_bytes``
    = their features' size, ``steps``), ``world_size_``, ``counter_seed_`` (the sampling
    stream's seed, rank 0's on every rank).

    Cost: the central trials of a rank's training nodes are drawn every step, so the
    sampling work per step is O(training nodes / ranks), not O(batch).

    Privacy: as `HeterPoissonTrainer` (one HeterPoisson mixture event per executed step);
    see the module docstring for what the ranks see of each other.
    """

    name = "heterpoisson-sharded"

    def __init__(self, backbone: str = "gcn", **kwargs: Any):
        stream = kwargs.pop("sampling_stream", "counter")
        if stream != "counter":
            raise InvalidParameterError("sampling_stream", "'counter' (sharded sampling keys "
                                        "every trial by node)", stream)
        super().__init__(backbone, sampling_stream="counter", **kwargs)

    def fit(self, shards):
        """Train on the shards in the folder ``shards`` (this rank's part); returns ``self``.

        Raises:
            InvalidParameterError: (on every rank) a partition into another number of parts
                than ranks, a damaged part, or ``resume`` from a checkpoint of a run on
                another number of ranks.
        """
        shard = open_part(shards)
        self._check_resume_world()
        self._step_now = None
        with collective_guard(lambda: self._step_now):
            return super().fit(shard)

    def _checkpoint_extra(self) -> dict[str, Any]:
        return {"world_size": rank_and_world()[1]}

    def _check_resume_world(self) -> None:
        """A resume reads rank 0's checkpoint on every rank: one written by a run on another
        number of ranks is refused (the same message on every rank)."""
        from gnnprivacy.training.checkpoint import load_checkpoint

        if not self.resume or self.checkpoint_path is None:
            return
        state = load_checkpoint(self.checkpoint_path)
        world = rank_and_world()[1]
        written = None if state is None else state.get("world_size")
        if written is not None and int(written) != world:
            raise InvalidParameterError(
                "resume", f"a checkpoint of a run on {world} rank(s) (this one was written by "
                f"a run on {written} ranks over a {written}-part partition: resume with "
                f"{written} ranks on that partition, or train again without resume)",
                str(self.checkpoint_path))

    def _run_fingerprint(self, shard: Shard) -> str:
        meta = {k: v for k, v in shard.meta.items() if k != "source"}
        return fingerprint({**self._fingerprint_settings(), "shards": meta})

    def _fit(self, shard: Shard, gens: dict[str, torch.Generator]) -> None:
        rank, world = rank_and_world()
        meta = shard.meta
        n, n_train = int(meta["num_nodes"]), int(meta["num_train"])
        delta = self._plan(num_nodes=n, num_train=n_train)
        d_max = int(meta["max_out_degree"]) if self.degree_public else n - 1
        kind, event = self._calibrate(delta, d_max)
        self.train_mask_ = torch.from_numpy(np.asarray(shard.train_mask, dtype=bool).copy())
        self.feature_norm_ = _feature_norm(self.feature_norm, shard)
        self.num_classes_ = int(meta["num_classes"])
        dev = self.device_
        self.model_ = StarGNN(int(meta["num_features"]), self.num_classes_,
                              aggregator=self.backbone, hidden_channels=self.hidden_channels,
                              update_layers=self.update_layers).to(dev)
        broadcast_parameters(self.model_)
        self.accountant_ = _privacy.new_accountant(kind, PrivacyUnit.NODE,
                                                   NeighboringRelation.ADD_OR_REMOVE,
                                                   epsilon=self.epsilon,
                                                   steps=self.steps_planned_)
        self.expected_batch_size_ = self.q_b_ * n_train
        seed = rank_zero_seed(gens["sample"])      # OS-seeded on rank 0 in secure mode
        self.counter_seed_ = seed
        engine = DistributedDPEngine(
            self.model_, make_optimizer("adam", self.model_.parameters(), lr=self.lr),
            clip_norm=self.clip_norm, noise_multiplier=self.noise_multiplier_,
            expected_batch_size=self.expected_batch_size_, generator=gens["noise"],
            secure_mode=self.secure_mode, accountant=self.accountant_, step_event=event,
            sampling="heterpoisson")
        part, model = _Part(shard), self.model_
        self.exchange_ = new_exchange()
        self._step_now = self._start_step()

        def closure_for_step():
            batch, ids, y_c = self._sample(part, CounterRandom(seed, self._step_now))
            x_sub = self._features(part, ids).to(dev)
            self._step_now += 1
            batch = StarBatch(batch.centers.to(dev), batch.periph_nodes.to(dev),
                              batch.periph_subgraph.to(dev), batch.num_subgraphs, ids)
            y_c = y_c.to(dev)
            return lambda: F.cross_entropy(model(x_sub, batch), y_c, reduction="none")

        self._run(engine, self.steps_planned_, closure_for_step)
        self._finish(engine, delta)
        self.world_size_ = world
        self.privacy_info_ = {**self._privacy_info(kind, d_max), "world_size": world,
                              "sharded": True}
        self.info_ = {"setting": "transductive", "max_out_degree_accounted": d_max,
                      "event": repr(event), "num_train": n_train, "num_nodes": n,
                      "world_size": world, "rank": rank, "partition": meta["method"],
                      "exchange": dict(self.exchange_)}

    def score_parts(self, shards: str | Path | Shard, *, seed: int = 0,
                    chunk_size: int = 65536) -> dict[str, float]:
        """Accuracy of private inference on the non-training nodes of all parts (every rank
        calls it; the result is the same on every rank).

        Each rank predicts its own part's query nodes as
        `HeterPoissonTrainer.predict_logits` does on the whole graph (up to ``fanout``
        in-neighbours among the non-training nodes, chosen by the keys ``(seed, u, j)``),
        fetching the features of neighbours owned by other ranks; the counts are
        all-reduced. The queries are the shards' test (and validation) nodes when the
        partitioned graph had a split (the nodes ``gnnprivacy train`` scores on that
        dataset and split), else every non-training node.

        Returns:
            ``test_accuracy``, ``num_test`` and, with a validation mask, ``val_accuracy``.

        Privacy: none spent (post-processing of the released model; training nodes are
        never aggregated).
        """
        from gnnprivacy.training.node_dp.private_inference import keyed_pick

        self._check_fitted()
        rank, world = rank_and_world()
        shard = open_part(shards)
        part = _Part(shard)
        nodes = np.asarray(shard.nodes)
        masks = shard.masks or {}
        if "test_mask" in masks:
            kinds = [np.asarray(masks[m][nodes], dtype=bool) for m in ("test_mask", "val_mask")
                     if m in masks]
        else:
            kinds = [~np.asarray(shard.train_mask[nodes], dtype=bool)]
        held = np.logical_or.reduce(kinds)
        rows = torch.from_numpy(np.flatnonzero(held).astype(np.int64))
        queries = torch.from_numpy(nodes[held].astype(np.int64))
        which = torch.from_numpy(np.stack([k[held] for k in kinds]))     # (kinds, queries)
        chunks = torch.tensor([math.ceil(rows.numel() / chunk_size)])
        counts = torch.zeros(len(kinds), 2, dtype=torch.float64)         # correct, queried
        with collective_guard("scoring"):
            if world > 1:               # fetch_rows is a collective: as many calls per rank
                dist.all_reduce(chunks, op=dist.ReduceOp.MAX)
            self.model_.eval()
            with torch.no_grad():
                for c in range(int(chunks)):
                    sl = slice(c * chunk_size, (c + 1) * chunk_size)
                    r, q, w = rows[sl], queries[sl], which[:, sl]
                    src, sub = part.in_edges(r)
                    ok = ~part.lookup("train_mask", src) & (src != q[sub])
                    stars = keyed_pick(q, src[ok], sub[ok], fanout=self.fanout, seed=seed)
                    ids = torch.unique(torch.cat([stars.centers, stars.periph_nodes]))
                    x = self.feature_norm_.transform(fetch_rows(part, ids, new_exchange()))
                    if not r.numel():
                        continue
                    batch = StarBatch(torch.searchsorted(ids, stars.centers).to(self.device_),
                                      torch.searchsorted(ids, stars.periph_nodes).to(
                                          self.device_),
                                      stars.periph_subgraph.to(self.device_),
                                      stars.num_subgraphs)
                    hit = (self.model_(x.to(self.device_), batch).argmax(1).cpu()
                           == part.y[r]).double()
                    counts += torch.stack([w.double() @ hit, w.double().sum(1)], 1)
            if world > 1:
                dist.all_reduce(counts)
        acc = [float(c[0] / c[1]) if c[1] else float("nan") for c in counts]
        out = {"test_accuracy": acc[0], "num_test": int(counts[0, 1])}
        if len(kinds) > 1:
            out["val_accuracy"] = acc[1]
        return out

    def _sample(self, part: _Part, rng: CounterRandom) -> tuple[StarBatch, Tensor, Tensor]:
        """This rank's star sub-graphs of the global HeterPoisson sample of ``rng``'s step,
        renumbered into ``ids`` (the sorted global ids whose features the step needs)."""
        stars, rows = sample_part_stars(part, rng, q_b=self.q_b_, M=self.M,
                                        peripheral_pool=self.peripheral_pool,
                                        enforce_no_overlap=self.enforce_no_overlap)
        ids = torch.unique(torch.cat([stars.centers, stars.periph_nodes]))
        batch = StarBatch(torch.searchsorted(ids, stars.centers),
                          torch.searchsorted(ids, stars.periph_nodes), stars.periph_subgraph,
                          stars.num_subgraphs)
        return batch, ids, part.y[rows]

    def _features(self, part: _Part, ids: Tensor) -> Tensor:
        """Transformed features of the global ``ids``: own rows from the map, the others'
        fetched from their owners."""
        return self.feature_norm_.transform(fetch_rows(part, ids, self.exchange_))



# ---------------------------------------------------------------------- make_private
class ShardedHeterPoissonSubgraphs(_ShardedSubgraphs, HeterPoissonSubgraphs):
    """`HeterPoissonSubgraphs` on this rank's part (``sampler="heterpoisson"`` of
    `make_private_sharded`): the rank's star sub-graphs of the global sample of the counter
    stream, the peripherals' features fetched from their owners. Options as
    `HeterPoissonSubgraphs` (the stream is always ``"counter"``)."""

    def __init__(self, **options: Any):
        stream = options.pop("sampling_stream", "counter")
        if stream != "counter":
            raise InvalidParameterError("sampling_stream", "'counter' (sharded sampling keys "
                                        "every trial by node)", stream)
        super().__init__(sampling_stream="counter", **options)

    def plan(self, *, batch_size: int | None):
        q_b = self._rate_for(batch_size)
        self.q_b_ = q_b
        meta = self._shard.meta
        return self._plan_for(q_b, int(meta["max_out_degree"]) if self.degree_public
                              else self.num_nodes - 1)

    def sample(self, generator: torch.Generator) -> Data:
        stars, _ = sample_part_stars(self._part, self._step_random(generator), q_b=self.q_b_,
                                     M=self.M, peripheral_pool=self.peripheral_pool,
                                     enforce_no_overlap=self.enforce_no_overlap)
        self._fetch(torch.unique(torch.cat([stars.centers, stars.periph_nodes])))
        return self._stars_batch(stars)


class ShardedNodeSubgraphs(_ShardedSubgraphs, NodeSubgraphs):
    """`NodeSubgraphs` on this rank's part (``sampler="nodes"`` of `make_private_sharded`):
    the part's training nodes whose keyed central trial hits; no edges, nothing fetched."""

    def __init__(self, *, sampling_stream: str = "counter"):
        if sampling_stream != "counter":
            raise InvalidParameterError("sampling_stream", "'counter' (sharded sampling keys "
                                        "every trial by node)", sampling_stream)
        super().__init__(sampling_stream="counter")

    def sample(self, generator: torch.Generator) -> Data:
        batch = super().sample(generator)
        self.exchange_["steps"] += 1
        return batch

    def _rows(self, nodes: Tensor) -> tuple[Tensor, Tensor]:
        rows = self._part.lookup("local", nodes).long()
        x = torch.from_numpy(np.asarray(self._shard.x[rows.numpy()]))
        return x, self._part.y[rows]


SHARDED_SAMPLERS = {"heterpoisson": ShardedHeterPoissonSubgraphs,
                    "nodes": ShardedNodeSubgraphs, "graphs": ShardedGraphSampler,
                    "degree_bounded": ShardedDegreeBoundedSubgraphs,
                    "edges": ShardedEdgeSubgraphs}
_SHARDED_TYPES = (_ShardedSubgraphs, ShardedGraphSampler)


def make_private_sharded(model: torch.nn.Module, optimizer: torch.optim.Optimizer, shards, *,
                         sampler: str | _ShardedSubgraphs = "heterpoisson",
                         **kwargs: Any) -> PrivateTraining:
    """`make_private` with the graph sharded over the ranks of the default process group.

    Every rank calls it with the same model architecture, optimizer settings and arguments,
    and the shard folder of `gnnprivacy.datasets.shards.partition_graph` (``gp.partition``;
    rank ``k`` opens part ``k``) or its own `Shard`. The user's loop is unchanged::

        pt = make_private_sharded(model, optimizer, "shards", sampler="heterpoisson",
                                  epsilon=8.0)
        for batch in pt.loader:          # this rank's subgraphs, remote features fetched
            optimizer.zero_grad()
            out = model(batch.x, batch.edge_index)
            F.cross_entropy(out[batch.center], batch.y[batch.center]).backward()
            optimizer.step()             # clip here, ONE noise draw (rank 0), one all_reduce

    Each rank's ``pt.loader`` yields its part of the global sample of the counter stream
    (``sampling_stream="counter"``; the union over the ranks is the single-process sample,
    rank 0's seed broadcast once); ``batch.y`` holds the labels of the part's own rows
    (every centre) and ``-1`` for rows fetched from other parts. ``optimizer.step()`` clips
    each local subgraph, rank 0 adds one noise draw, one ``all_reduce`` sums, every rank
    takes the same update and composes one ledger entry; ``pt.epsilon`` is the same on every
    rank. The model's parameters are broadcast from rank 0 first. Without a process group
    it is one rank on a one-part partition.

    Args:
        model: as `make_private` (the same architecture on every rank).
        optimizer: as `make_private`.
        shards: a shard folder or this rank's `Shard`.
        sampler: ``"heterpoisson"``, ``"nodes"``, ``"degree_bounded"``, ``"edges"`` (unit
            edge, one message-passing layer: `gnnprivacy.training.sharded_edges`),
            ``"graphs"`` (graph shards: unit graph), or one of their sharded samplers
            (`ShardedHeterPoissonSubgraphs`, `ShardedEdgeSubgraphs`, ...) with options.
        **kwargs: `make_private`'s keyword arguments (``epsilon`` or ``noise_multiplier``,
            ``delta``, ``max_grad_norm``, ``epochs``/``steps``, ``batch_size``,
            ``secure_mode``, ``seed``, ``loss_reduction``); every rank passes the same.

    Privacy: the released noisy sum is the single-process `make_private` run's with the
    sampler's ``sampling_stream="counter"`` and the same seed, so the unit, relation, event
    per step, ledger and ``pt.privacy`` are that run's. The ranks are one trusted party
    (a rank reads the raw feature rows it fetches and, inside the reduction, the others'
    clipped sums).

    Raises:
        InvalidParameterError: another sampler, or a partition whose number of parts is not
            the world size.
    """
    if isinstance(sampler, str) and sampler in SHARDED_SAMPLERS:
        sampler = SHARDED_SAMPLERS[sampler]()
    if not isinstance(sampler, _SHARDED_TYPES):
        raise InvalidParameterError(
            "sampler", f"one of {sorted(SHARDED_SAMPLERS)} or a sharded sampler "
            "(ShardedHeterPoissonSubgraphs, ShardedEdgeSubgraphs, ...)",
            sampler if isinstance(sampler, str) else type(sampler).__name__)
    shard = open_part(shards, getattr(sampler, "opener", None))
    with collective_guard(None):
        broadcast_parameters(model)
        pt = ShardedPrivateTraining(model, optimizer, shard, sampler=sampler, **kwargs)
    pt.engine = DistributedDPEngine.wrap(pt.engine)
    return pt


class ShardedPrivateTraining(PrivateTraining):
    """`PrivateTraining` over shards (`make_private_sharded`): a failed collective in a draw
    (the features fetched from other ranks) or in ``optimizer.step()`` (the all-reduce of the
    noisy sum) is one `ShardedRunError` naming the rank and the step."""

    def _draw(self):
        with collective_guard(self.steps):
            return super()._draw()

    def step(self):
        with collective_guard(self.steps):
            return super().step()


def fit_graph_classifier_sharded(shards, **kwargs):
    """`gnnprivacy.training.graph_classification.fit_graph_classifier` (private) on graph
    shards, on every rank: the same model (rank 0's parameters), loop and plan, with
    `make_private_sharded` (the counter stream; one noise draw on rank 0, one all-reduce per
    step). ``kwargs`` are ``fit_graph_classifier``'s; ``epsilon`` is required.

    Returns:
        The `GraphFit` (the same on every rank).
    """
    from gnnprivacy.training.graph_classification import fit_graph_classifier

    if kwargs.get("epsilon") is None:
        raise InvalidParameterError("epsilon", "a target epsilon (sharded training is private)",
                                    None)
    shard = open_part(shards, open_graph_shard)
    meta = shard.meta
    kwargs.setdefault("num_features", int(meta["num_features"]))
    kwargs.setdefault("num_classes", int(meta["num_classes"]))
    kwargs.setdefault("edge_dim", int(meta["edge_dim"]))
    return fit_graph_classifier(shard, make=make_private_sharded, **kwargs)
