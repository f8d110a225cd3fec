"""Batch sampling on the device in buffers of a fixed size (the GPU path, no host sync).

The exact samplers (`HeterPoissonSampler`,
`NodeBatchSampler`) return a batch of its realised, random size.
Building it needs that size on the host (``nonzero``, ``.item()``, ``repeat_interleave``),
and on a GPU every such read waits for the device to finish its queue. The samplers here
draw the same trials on the device and compact the chosen items into buffers of a fixed
*capacity*, with a mask for the slots left empty, so one step needs no value on the host:

* every trial is the exact sampler's (centre ``Bernoulli(q)``, peripheral
  ``Bernoulli(min(1, M / D_out(j)))``, overlap removal), drawn from a generator on the
  device; the batch has the same distribution, not the same random stream;
* a capacity is the smallest ``k`` that Bernstein's inequality proves the count exceeds
  with probability at most ``2^-60`` (`capacity`, from public quantities only:
  sizes, degrees, ``q``, ``M``; the kept peripherals take two such bounds);
* an overflow (a count above its capacity) is recorded on the device, never truncated
  silently: `check` (one read, after the step loop) raises
  `CapacityExceededError` and the run is discarded.

*Privacy.* The trials and their distribution are those of the exact sampler, so the
accountant's event is unchanged. What differs is the overflow: a run is refused (nothing is
released) with probability at most ``steps * 4 * 2^-60`` (about ``3.5e-13`` for ``10^5``
steps), so the released model is the exact mechanism's output conditioned on an event of
that probability: at most that much is added to ``delta``, far below any delta in use.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

from gnnprivacy.errors import GnnPrivacyError
from gnnprivacy.sampling.heter_poisson import HeterPoissonSampler
from gnnprivacy.sampling.minibatch import NodeBatchSampler
from gnnprivacy.sampling.star_batch import PaddedStarBatch

__all__ = ["CapacityExceededError", "FixedShapeHeterPoisson", "FixedShapeNodeBatches",
           "LOG_FAIL", "capacity", "compact"]

#: ``-ln`` of the largest overflow probability of one capacity in one step (``2^-60``)
LOG_FAIL = 60 * math.log(2.0)


class CapacityExceededError(GnnPrivacyError, RuntimeError):
    """A fixed-shape batch had more items than its capacity (probability below ``2^-60``
    per step); the run is discarded rather than trained on a truncated batch."""


def capacity(mean: float, variance: float, bound: float, *, log_fail: float = LOG_FAIL) -> int:
    """Smallest ``k`` with ``P(S > k) <= exp(-log_fail)`` for a sum ``S`` of independent
    terms in ``[0, bound]`` with the given mean and variance (Bernstein's inequality:
    ``P(S - mean >= t) <= exp(-t^2 / (2 (variance + bound t / 3)))``)."""
    a = bound * log_fail / 3.0
    t = a + math.sqrt(a * a + 2.0 * max(variance, 0.0) * log_fail)
    return max(1, math.ceil(mean + t))


def compact(mask: Tensor, values: Tensor, size: int) -> tuple[Tensor, Tensor]:
    """The entries of ``values`` where ``mask`` holds, in order, in a buffer of ``size``.

    Returns:
        ``(out, count)``: ``out`` ``(size,)`` with zeros after the ``count`` chosen entries
        (entries beyond ``size`` are dropped: compare ``count`` with ``size``), and
        ``count`` a 0-dim int64 tensor on the device.
    """
    pos = torch.cumsum(mask, 0)
    count = pos[-1] if pos.numel() else torch.zeros((), dtype=torch.long, device=mask.device)
    slot = torch.where(mask & (pos <= size), pos - 1, size)      # ``size`` is a dump slot
    out = torch.zeros(size + 1, dtype=values.dtype, device=values.device)
    out.scatter_(0, slot, values)
    return out[:size], count


def _segment_totals(rowptr: np.ndarray, per_edge: np.ndarray) -> np.ndarray:
    """Per-row sums of ``per_edge`` over the CSR rows ``rowptr``."""
    cums = np.concatenate([[0.0], np.cumsum(per_edge, dtype=np.float64)])
    return cums[rowptr[1:]] - cums[rowptr[:-1]]


class FixedShapeHeterPoisson:
    """HeterPoisson star batches drawn on ``device`` into fixed-size buffers.

    Args:
        sampler: the exact `HeterPoissonSampler` (its graph,
            candidates, eligible set, ``q_b``, ``M`` and overlap rule).
        device: where the graph arrays live and the trials are drawn.

    Each `sample` is one step: one uniform per central candidate, one per in-edge of
    every chosen centre, compacted into ``capacity_centers`` stars and ``capacity_peripherals``
    peripherals (`PaddedStarBatch`).
    """

    def __init__(self, sampler: HeterPoissonSampler, device: torch.device | str):
        self.device = torch.device(device)
        self.q_b = sampler.q_b
        self.enforce_no_overlap = sampler.enforce_no_overlap
        self.num_nodes = sampler.num_nodes
        rowptr = sampler._rowptr
        cand = sampler.candidate_nodes
        deg = (rowptr[cand + 1] - rowptr[cand]).numpy().astype(np.float64)
        keep = sampler._keep_prob.numpy()
        cand_ptr = np.concatenate([[0], np.cumsum(deg)]).astype(np.int64)
        order = _candidate_edge_order(rowptr, cand)
        mu = _segment_totals(cand_ptr, keep[order])        # E[K_i]: expected kept in-edges
        q, n = self.q_b, float(cand.numel())
        top = float(deg.max()) if deg.size else 0.0
        self.capacity_centers = capacity(q * n, q * (1 - q) * n, 1.0)
        self.capacity_gathered = (capacity(q * deg.sum(), q * (1 - q) * (deg ** 2).sum(), top)
                                  if top > 0 else 0)
        # kept peripherals in two stages (each failing with probability <= 2^-60): the
        # chosen centres' expected kept count m = sum_i B_i E[K_i] is at most ``bound``;
        # given the centres, the kept count is a sum of independent Bernoullis of mean m
        bound = capacity(q * mu.sum(), q * (1 - q) * (mu ** 2).sum(), float(mu.max(initial=0)))
        self.capacity_peripherals = capacity(bound, bound, 1.0) if top > 0 else 0
        to = dict(device=self.device)
        self._cand = cand.to(**to)
        self._rowptr = rowptr.to(**to)
        self._src = sampler._src.to(**to)
        self._keep_prob = sampler._keep_prob.to(**to)
        # buffers reused by every step (the device runs the steps in order)
        self._slots = torch.arange(self.capacity_gathered, **to)
        self._center_slots = torch.arange(self.capacity_centers, **to)
        self._periph_slots = torch.arange(self.capacity_peripherals, **to)
        self._central = torch.zeros(self.num_nodes, dtype=torch.bool, **to)
        self.overflow = torch.zeros((), dtype=torch.bool, **to)

    def sample(self, generator: torch.Generator) -> PaddedStarBatch:
        """One step's stars (``generator`` on `device`); no host synchronisation."""
        dev, cap_c = self.device, self.capacity_centers
        u = torch.rand(self._cand.shape, generator=generator, dtype=torch.float64, device=dev)
        chosen = u < self.q_b
        centers, count = compact(chosen, self._cand, cap_c)
        center_mask = self._center_slots < count
        overflow = count > cap_c
        if self.capacity_gathered == 0:
            empty = torch.zeros(0, dtype=torch.long, device=dev)
            self.overflow.logical_or_(overflow)
            return PaddedStarBatch(centers, center_mask, empty, empty.clone(),
                                   empty.bool(), count)
        deg = (self._rowptr[centers + 1] - self._rowptr[centers]) * center_mask
        ends = torch.cumsum(deg, 0)
        total = ends[-1]
        k = self._slots
        seg = torch.searchsorted(ends, k, right=True).clamp_max_(cap_c - 1)
        gathered = k < total
        edge = torch.where(gathered, self._rowptr[centers[seg]] + k - (ends[seg] - deg[seg]), 0)
        src = self._src[edge]
        v = torch.rand(k.shape, generator=generator, dtype=torch.float64, device=dev)
        keep = gathered & (v < self._keep_prob[edge])
        if self.enforce_no_overlap:
            central = self._central
            central[self._cand] = chosen          # every candidate's slot is overwritten
            keep &= ~central[src]
        cap_p = self.capacity_peripherals
        periph, kept = compact(keep, src, cap_p)
        sub, _ = compact(keep, seg, cap_p)
        overflow |= (total > self.capacity_gathered) | (kept > cap_p)
        self.overflow.logical_or_(overflow)
        return PaddedStarBatch(centers, center_mask, periph, sub, self._periph_slots < kept,
                               count)

    def check(self) -> None:
        """Raise `CapacityExceededError` if any step overflowed (one host read)."""
        if bool(self.overflow):
            raise CapacityExceededError(
                "a HeterPoisson batch exceeded its fixed capacity (centres "
                f"{self.capacity_centers}, in-edges {self.capacity_gathered}, peripherals "
                f"{self.capacity_peripherals}); this has probability below 2^-60 per step: "
                "the run is discarded, not trained on a truncated batch")

    def __repr__(self) -> str:
        return (f"FixedShapeHeterPoisson(device={self.device}, capacity_centers="
                f"{self.capacity_centers}, capacity_gathered={self.capacity_gathered}, "
                f"capacity_peripherals={self.capacity_peripherals})")


def _candidate_edge_order(rowptr: Tensor, cand: Tensor) -> np.ndarray:
    """Positions in the CSR arrays of the in-edges of ``cand``, grouped by candidate."""
    starts = rowptr[cand].numpy()
    counts = (rowptr[cand + 1] - rowptr[cand]).numpy()
    if counts.sum() == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(starts, counts) + offsets


class FixedShapeNodeBatches:
    """Node batches of positions ``0..num_items-1`` drawn on ``device`` (the GPU path of
    `NodeBatchSampler` and of DP-SGD's Poisson sampling).

    Args:
        num_items: ``N``.
        device: where the batches are drawn.
        batch_size: a uniform ``m``-subset per step in uniform order (the first ``m`` of a
            permutation drawn on the device), every slot valid; or
        rate: one ``Bernoulli(rate)`` trial per item, compacted into a capacity with a mask.
    """

    def __init__(self, num_items: int, *, device: torch.device | str,
                 batch_size: int | None = None, rate: float | None = None):
        if (batch_size is None) == (rate is None):
            raise ValueError("FixedShapeNodeBatches needs exactly one of batch_size and rate")
        self.device = torch.device(device)
        self.num_items, self.batch_size, self.rate = int(num_items), batch_size, rate
        self.sampling = "fixed" if rate is None else "poisson"
        n = self.num_items
        self.capacity = (int(batch_size) if rate is None
                         else min(n, capacity(rate * n, rate * (1 - rate) * n, 1.0)))
        self._items = torch.arange(n, device=self.device)
        self._slots = torch.arange(self.capacity, device=self.device)
        self.overflow = torch.zeros((), dtype=torch.bool, device=self.device)

    @classmethod
    def from_sampler(cls, sampler: NodeBatchSampler, device: torch.device | str
                     ) -> FixedShapeNodeBatches:
        """The device twin of ``sampler`` (its mode, batch size and rate)."""
        if sampler.sampling == "fixed":
            return cls(sampler.num_items, device=device, batch_size=sampler.batch_size)
        return cls(sampler.num_items, device=device, rate=sampler.sample_rate)

    def sample(self, generator: torch.Generator) -> tuple[Tensor, Tensor | None]:
        """``(positions, mask)``: ``(capacity,)`` positions, and ``None`` (fixed batches:
        all valid) or the ``(capacity,)`` mask of the valid slots."""
        dev = self.device
        if self.sampling == "fixed":
            perm = torch.randperm(self.num_items, generator=generator, device=dev)
            return perm[:self.batch_size], None
        u = torch.rand(self.num_items, generator=generator, dtype=torch.float64, device=dev)
        index, count = compact(u < self.rate, self._items, self.capacity)
        self.overflow.logical_or_(count > self.capacity)
        return index, self._slots < count

    def check(self) -> None:
        """Raise `CapacityExceededError` if any step overflowed (one host read)."""
        if bool(self.overflow):
            raise CapacityExceededError(
                f"a Poisson node batch exceeded its fixed capacity {self.capacity} "
                "(probability below 2^-60 per step): the run is discarded")

    def __repr__(self) -> str:
        return (f"FixedShapeNodeBatches(device={self.device}, sampling={self.sampling!r}, "
                f"capacity={self.capacity})")
