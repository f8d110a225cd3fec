"""Data-parallel DP-SGD over ``torch.distributed``: one sample, one noise draw, one ledger.

Every rank holds the whole (public-size) graph and the same model. Per step:

1. every rank draws the SAME global Poisson sample from the shared sampling generator (same
   seed on every rank; in secure mode rank 0's OS-seeded state is broadcast once), and keeps
   its shard ``batch[rank::world_size]``;
2. each rank computes the clipped per-node gradient sum of its shard with the single-process
   engine's ghost clipping (`clip_and_sum`);
3. rank ``noise_rank`` (0) adds ONE draw of ``N(0, σ² I)`` to its local sum, from the same
   noise generator and in the same order as `DPEngine`;
4. one ``all_reduce(SUM)`` over a flat buffer gives every rank ``Σ_i clip(g_i) + N(0, σ² I)``,
   exactly the single-process noisy sum up to floating-point summation order;
5. every rank takes the identical optimizer step; the accountant composes one event per step
   (each rank's ledger is the same one ledger; rank 0's is the run's record).

So a ``world_size``-process run equals the single-process run with the same seeds: the same
batches, the same noise, parameters equal within float tolerance and the same ledger
(``tests/training/test_distributed.py``). Gloo runs on CPU (tests), NCCL on GPUs (each rank
on ``cuda:LOCAL_RANK``); ``docs/scale.md`` shows the ``torchrun`` command for many nodes.

*Privacy.* Identical to the single-process trainer: the unit, relation and event per step
are unchanged because the released quantity (the noisy sum) has the same distribution. The
noise is added once, by one rank, with the accounted variance ``σ²``; splitting it across
ranks would need every rank's share to stay secret from the others, which a shared
``all_reduce`` does not guarantee. Every rank sees the clipped sums of the other ranks
before noise only inside the reduction; ranks are assumed to be one trusted party (the
trainer), as in the single-process setting.
"""

from __future__ import annotations

import datetime
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor
from torch.nn import functional as F
from torch_geometric.data import Data

from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.sampling import poisson_node_batch
from gnnprivacy.training.dp.engine import DPEngine, StepInfo, make_optimizer
from gnnprivacy.training.dp.noise import flatten, unflatten
from gnnprivacy.training import _privacy
from gnnprivacy.training.node_dp.common import FeatureNorm, is_inductive
from gnnprivacy.sampling.star_batch import StarBatch
from gnnprivacy.training.node_dp.dpmlp import DPMLPTrainer, default_delta_dpmlp, mlp
from gnnprivacy.training.node_dp.heterpoisson import HeterPoissonTrainer
from gnnprivacy.training.nonprivate import num_classes_of, training_graph

__all__ = ["DistributedDPEngine", "DistributedDPMLPTrainer", "DistributedHeterPoissonTrainer",
           "broadcast_generator", "broadcast_parameters", "init_file_group", "init_from_env",
           "rank_and_world", "shard", "shard_star_batch", "spawn_local"]


def rank_and_world() -> tuple[int, int]:
    """``(rank, world_size)`` of the default process group, ``(0, 1)`` without one."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def shard(batch: Tensor, rank: int, world_size: int) -> Tensor:
    """This rank's part of a global batch: ``batch[rank::world_size]`` (sizes differ by <= 1)."""
    return batch[rank::world_size]


def _collective_device(default: torch.device) -> torch.device:
    return default if dist.is_initialized() and dist.get_backend() == "nccl" else \
        torch.device("cpu")


def broadcast_generator(gen: torch.Generator, src: int = 0) -> None:
    """Give every rank ``src``'s generator state (used for OS-seeded samplers)."""
    if rank_and_world()[1] == 1:
        return
    dev = _collective_device(torch.device("cuda", torch.cuda.current_device())
                             if torch.cuda.is_available() else torch.device("cpu"))
    state = gen.get_state().to(dev)
    dist.broadcast(state, src=src)
    gen.set_state(state.cpu())


def broadcast_parameters(model: torch.nn.Module, src: int = 0) -> None:
    """Copy ``src``'s parameters and buffers to every rank (in place)."""
    if rank_and_world()[1] == 1:
        return
    for t in list(model.parameters()) + list(model.buffers()):
        dist.broadcast(t.data, src=src)


class RankZeroCheckpoints:
    """Mixin for a trainer that runs on every rank of a group: the ranks hold the same
    parameters, optimizer and ledger, so only rank 0 writes the checkpoint (put it before
    the trainer class: ``class T(RankZeroCheckpoints, HeterPoissonTrainer)``)."""

    def _save(self, engine: DPEngine) -> None:
        if rank_and_world()[0] == 0:
            super()._save(engine)  # type: ignore[misc]


class DistributedDPEngine(DPEngine):
    """`DPEngine` whose noisy sum is all-reduced across the ranks of a process group.

    Takes the arguments of `DPEngine` plus ``noise_rank`` (the one rank that draws the
    noise; 0). Only that rank needs ``generator``/``secure_mode`` noise; the others pass the
    same arguments and never draw. Without an initialised process group it is exactly
    `DPEngine`. The closure passed to `step` must return the losses of this
    rank's shard only (see `shard`).

    Privacy: as `DPEngine`; one noise draw of std ``σ`` per step on the global sum.
    """

    def __init__(self, *args: Any, noise_rank: int = 0, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.noise_rank = int(noise_rank)

    @classmethod
    def wrap(cls, engine: DPEngine, *, noise_rank: int = 0) -> DistributedDPEngine:
        """A distributed engine sharing ``engine``'s model, optimizer, clip groups, noise
        generator, accountant and step event (a trainer built the engine; this wraps it)."""
        new = cls.__new__(cls)
        new.__dict__.update(engine.__dict__)
        new.noise_rank = int(noise_rank)
        return new

    def noisy_sum(self, closure: Callable[[], Tensor], *,
                  row_mask: Tensor | None = None) -> tuple[dict[str, Tensor], int]:
        return self.reduce_noised(*self.clipped(closure, row_mask=row_mask))

    def release(self, clipped_sums: dict[str, Tensor], num_subgraphs: int) -> StepInfo:
        """`DPEngine.release` for this rank's clipped sums (the user-loop path of
        `make_private_sharded`): one noise draw on ``noise_rank``, one ``all_reduce``, the
        same update and one ledger entry on every rank."""
        return self.apply(*self.reduce_noised(clipped_sums, num_subgraphs))

    def reduce_noised(self, clipped_sums: dict[str, Tensor],
                      num_subgraphs: int) -> tuple[dict[str, Tensor], int]:
        """This rank's clipped sums, plus the one noise draw where this is ``noise_rank``,
        summed over the ranks (one ``all_reduce``); with the global number of subgraphs."""
        rank, world = rank_and_world()
        if world == 1:   # the single-process release, which a running code audit observes
            return self._noised(clipped_sums, num_subgraphs), num_subgraphs
        sums = clipped_sums
        if rank == self.noise_rank:
            sums = self.add_noise(sums)
        values = flatten(sums)
        count = torch.tensor([float(num_subgraphs)], dtype=values.dtype, device=values.device)
        flat = torch.cat([values, count])       # a new tensor: the caller's sums stay as they are
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        return unflatten(flat[:-1], sums), int(round(float(flat[-1])))


class DistributedDPMLPTrainer(RankZeroCheckpoints, DPMLPTrainer):
    """`DPMLPTrainer`, data-parallel over the ranks.

    Same arguments, same result as the single-process trainer with the same ``generator``
    (see the module docstring). Run it on every rank of an initialised process group
    (``torchrun``, or `spawn_local` on one machine); without a group it runs alone.
    Only rank 0 writes checkpoints.

    Privacy: as ``DPMLPTrainer`` (node unit, add/remove, one Poisson-subsampled Gaussian
    event per executed step, PLD accountant).
    """

    def _fit(self, data: Data, gens: dict[str, torch.Generator]) -> None:
        rank, world = rank_and_world()
        secure = bool(getattr(self, "secure_mode", False))
        dev = getattr(self, "device_", torch.device("cpu"))
        inductive = is_inductive(data)
        graph = training_graph(data)
        train = graph.train_mask.nonzero().flatten()
        n_train = int(train.numel())
        q = min(1.0, self.batch_size / n_train)
        delta = self.delta if self.delta is not None else default_delta_dpmlp(n_train)
        self.steps_planned_ = self.steps or math.ceil(self.epochs / q)
        make_event = _privacy.dpsgd_event_factory(sample_rate=q)
        self.noise_multiplier_ = (self.noise_multiplier if self.noise_multiplier is not None
                                  else _privacy.calibrate(make_event, steps=self.steps_planned_,
                                                          epsilon=self.epsilon, delta=delta,
                                                          kind="pld"))
        public = None if inductive else ~graph.train_mask
        self.feature_norm_ = FeatureNorm(self.feature_norm).fit(graph.x, public)
        x, y = self.feature_norm_.transform(graph.x).to(dev), graph.y.to(dev)
        self.num_classes_ = num_classes_of(data)
        self.model_ = mlp(x.shape[1], self.hidden_channels, self.num_classes_, self.num_layers,
                          self.activation).to(dev)
        broadcast_parameters(self.model_)
        if secure:
            broadcast_generator(gens["sample"])
        self.accountant_ = _privacy.new_accountant("pld", PrivacyUnit.NODE,
                                                   NeighboringRelation.ADD_OR_REMOVE)
        engine_kwargs = {"secure_mode": True} if secure else {}
        engine = DistributedDPEngine(
            self.model_, make_optimizer(self.optimizer, self.model_.parameters(), lr=self.lr),
            clip_norm=self.clip_norm, noise_multiplier=self.noise_multiplier_,
            expected_batch_size=q * n_train, generator=gens["noise"],
            accountant=self.accountant_, step_event=make_event(self.noise_multiplier_),
            sampling="poisson",
            **engine_kwargs)
        model, gen = self.model_, gens["sample"]

        def closure_for_step():
            nodes = shard(poisson_node_batch(train, rate=q, generator=gen), rank, world).to(dev)
            return lambda: F.cross_entropy(model(x[nodes]), y[nodes], reduction="none")

        self._run(engine, self.steps_planned_, closure_for_step)
        self._finish(engine, delta)
        self.privacy_info_ = {
            "unit": PrivacyUnit.NODE.value, "relation": NeighboringRelation.ADD_OR_REMOVE.value,
            "accountant": "pld", "noise_multiplier": self.noise_multiplier_, "sigma": self.sigma_,
            "clip_norm": self.clip_norm, "sample_rate": q, "steps": self.steps_,
            "secure_mode": secure, "world_size": world,
            "scope": ("the trained MLP's parameters: every executed noisy step (one global "
                      "sample, one noise draw per step across all ranks), for one training "
                      "node added or removed (features and label; the graph is not used)"),
            "unaccounted": (["feature standardisation over private nodes"]
                            if self.feature_norm_.unaccounted else []),
            "calibrated": self.noise_multiplier is None}
        self.info_ = {"setting": "inductive" if inductive else "transductive",
                      "num_train": n_train, "world_size": world, "rank": rank}


def shard_star_batch(batch: StarBatch, rank: int, world_size: int) -> StarBatch:
    """This rank's contiguous block of the star sub-graphs of ``batch`` (sizes differ by <= 1),
    peripherals renumbered to the block."""
    lo = rank * batch.num_subgraphs // world_size
    hi = (rank + 1) * batch.num_subgraphs // world_size
    ptr = batch.rowptr()
    a, b = int(ptr[lo]), int(ptr[hi])
    return StarBatch(batch.centers[lo:hi], batch.periph_nodes[a:b],
                     batch.periph_subgraph[a:b] - lo, hi - lo)


class _ShardedSampler:
    """A sampler whose ``sample(generator)`` is this rank's shard of the global batch."""

    def __init__(self, sampler: Any, rank: int, world_size: int):
        self.sampler, self.rank, self.world_size = sampler, rank, world_size

    def sample(self, generator: torch.Generator) -> StarBatch:
        return shard_star_batch(self.sampler.sample(generator), self.rank, self.world_size)

    def __getattr__(self, name: str) -> Any:  # max_out_degree, ... of the wrapped sampler
        return getattr(self.sampler, name)


class DistributedHeterPoissonTrainer(RankZeroCheckpoints, HeterPoissonTrainer):
    """`HeterPoissonTrainer`, data-parallel over the ranks.

    Every rank draws the same global HeterPoisson batch (same sampling seed) and trains on its
    contiguous block of star sub-graphs; the trainer's own engine is wrapped in a
    `DistributedDPEngine` (one noise draw on rank 0, one ``all_reduce``), so a run
    equals the single-process run with the same ``generator``. Only rank 0 writes checkpoints.

    Privacy: as ``HeterPoissonTrainer`` (one HeterPoisson mixture event per executed step).
    """

    def _sampler(self, graph: Data, inductive: bool):
        rank, world = rank_and_world()
        return _ShardedSampler(super()._sampler(graph, inductive), rank, world)

    def _run(self, engine: DPEngine, steps: int, closure_for_step: Callable[[], Callable]) -> None:
        broadcast_parameters(self.model_)
        gens = getattr(self, "_gens", {})
        if getattr(self, "secure_mode", False) and gens.get("sample") is not None:
            broadcast_generator(gens["sample"])
        wrapped = DistributedDPEngine.wrap(engine)
        super()._run(wrapped, steps, closure_for_step)
        engine.steps_ = wrapped.steps_
        self.world_size_ = rank_and_world()[1]


#: the collective timeout of `init_file_group` (a killed rank stops the others after at most this)
DEFAULT_TIMEOUT = datetime.timedelta(minutes=10)


def init_file_group(init_file: str | Path, rank: int, world_size: int, *,
                    backend: str = "gloo",
                    timeout: datetime.timedelta | None = DEFAULT_TIMEOUT) -> None:
    """Join a process group through a shared file (one machine or a shared file system)
    with a collective ``timeout`` (a killed rank stops the others after at most that;
    ``None``: torch's default)."""
    options = {} if timeout is None else {"timeout": timeout}
    dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank,
                            world_size=world_size, **options)


def _spawn_entry(rank: int, world_size: int, init_file: str, backend: str,
                 fn: Callable[..., Any], args: tuple) -> None:
    init_file_group(init_file, rank, world_size, backend=backend, timeout=None)
    try:
        fn(rank, world_size, *args)
    finally:
        dist.destroy_process_group()


def spawn_local(fn: Callable[..., Any], world_size: int, *args: Any, backend: str = "gloo",
                start_method: str = "spawn") -> None:
    """Run ``fn(rank, world_size, *args)`` in ``world_size`` local processes sharing a group.

    The group is initialised through a temporary file (no network port), so it only spans
    this machine; for several machines use ``torchrun`` (``docs/scale.md``). With the
    default ``start_method="spawn"``, ``fn`` must be importable (a module-level function);
    ``"fork"`` (POSIX, CPU only, no CUDA initialised in the parent) skips re-importing torch
    in every child. Raises if any process fails.
    """
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        init_file = str(Path(tmp) / "pg-init")
        mp.start_processes(_spawn_entry, args=(world_size, init_file, backend, fn, args),
                           nprocs=world_size, join=True, start_method=start_method)


def init_from_env(backend: str | None = None) -> tuple[int, int]:
    """Initialise the default group from ``torchrun``'s environment (``RANK``, ``WORLD_SIZE``,
    ``MASTER_ADDR``, ``MASTER_PORT``); NCCL when CUDA is available, else gloo. With NCCL the
    current device becomes ``cuda:LOCAL_RANK``. Returns ``(rank, world_size)``."""
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    if not dist.is_initialized():
        dist.init_process_group(backend)
    return rank_and_world()
