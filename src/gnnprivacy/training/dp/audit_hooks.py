"""Canaries for the white-box code audit (``gp.audit(..., mode="code")``).

While a `CodeAuditSession` is active, every `DPEngine` created gets
an `EngineCanaries` hook. At each executed step the hook adds, beside the model's
parameters, one extra block of coordinates to the clipped sums:

* ``num_canaries`` canary units, each sampled at the step's rate (read from the engine's
  step event) and then contributing ``multiplicity`` subgraph gradients (the most subgraphs
  one unit reaches), each a Dirac of norm ``canary_scale x C`` on the canary's own
  coordinate, clipped by the engine's own `clip_factors` to the engine's
  clip norm;
* ``num_noise`` coordinates no canary touches.

The engine then draws its noise over the model's sums *and* this block in one call, and the
hook reads the block back (and removes it) before the update, so training is unchanged
except for the randomness consumed. What the hook records per step, the noisy block and the
realised number of subgraphs, is what the code released: the auditor estimates the executed
noise, clip and sampling rate from it (`gnnprivacy.auditing.code`).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from gnnprivacy.training.dp import clipping

__all__ = ["CANARY_KEY", "CodeAuditSession", "EngineCanaries", "attach", "note_batch",
           "step_sampling"]

CANARY_KEY = "__audit_canaries__"
_ACTIVE: list[CodeAuditSession] = []


def step_sampling(event: Any) -> tuple[float, int]:
    """``(rate, multiplicity)`` of one unit in one step of ``event``: the probability that a
    given unit's subgraph is in the batch, and how many subgraphs one unit reaches."""
    from dp_accounting import dp_event

    from gnnprivacy.accounting.events import DpGnnDpEvent, HeterPoissonDpEvent, ScopedDpEvent

    if isinstance(event, ScopedDpEvent):
        return step_sampling(event.event)
    if isinstance(event, dp_event.PoissonSampledDpEvent):
        return float(event.sampling_probability), 1
    if isinstance(event, HeterPoissonDpEvent):
        return float(event.sampling_probability), 1
    if isinstance(event, DpGnnDpEvent):
        return event.batch_size / event.num_train, int(event.max_degree) + 1
    from gnnprivacy.accounting.events import EdgeSubgraphDpEvent

    if isinstance(event, EdgeSubgraphDpEvent):     # one edge changes up to `group` subgraphs
        return float(event.sampling_probability), int(event.group)
    return 1.0, 1


@dataclass
class EngineCanaries:
    """The canary block of one engine, and what it observed."""

    engine: Any
    generator: torch.Generator
    num_canaries: int
    num_noise: int
    canary_scale: float
    rate: float = field(init=False)
    multiplicity: int = field(init=False)
    observed: list = field(default_factory=list)       # noisy block per step
    counts: list = field(default_factory=list)         # sampled subgraphs per canary per step
    batch_sizes: list = field(default_factory=list)    # realised subgraphs per step

    def __post_init__(self) -> None:
        from gnnprivacy.training.dp.audit_observer import EngineObserver

        self.rate, self.multiplicity = step_sampling(self.engine.step_event)
        self._pending: Tensor | None = None
        self._sums: dict[str, Tensor] = {}
        self.observer = EngineObserver(self.engine)

    def inject(self, sums: dict[str, Tensor]) -> dict[str, Tensor]:
        """``sums`` plus the clipped canary block (same dtype and device as the sums)."""
        self._sums = sums
        like = next(iter(sums.values()))
        draws = torch.rand(self.num_canaries, self.multiplicity, generator=self.generator)
        count = (draws < self.rate).sum(1)                                      # (m,)
        self._pending = count
        c = self.engine.clip_norm
        norm = torch.full((int(count.sum()),), self.canary_scale * c, dtype=torch.float64)
        factor = clipping.clip_factors(norm, c)        # the engine's own clipping function
        clipped = torch.zeros(self.num_canaries, dtype=torch.float64)
        owners = torch.repeat_interleave(torch.arange(self.num_canaries), count)
        clipped.index_add_(0, owners, factor * norm)
        block = torch.cat([clipped, torch.zeros(self.num_noise, dtype=torch.float64)])
        return {**sums, CANARY_KEY: block.to(like.dtype).to(like.device)}

    def observe(self, noisy: dict[str, Tensor], num_subgraphs: int) -> dict[str, Tensor]:
        """Record the noisy block and the realised batch size; return the model's sums."""
        out = dict(noisy)
        self.observed.append(out.pop(CANARY_KEY).detach().double().cpu())
        self.counts.append(self._pending)
        self.batch_sizes.append(int(num_subgraphs))
        self.observer.noised(self._sums, int(num_subgraphs))
        self._sums = {}
        return out


class CodeAuditSession:
    """Attach canaries to every engine created while active (see the module docstring).

    Args:
        seed: seeds the canaries' sampling (not the trainer's randomness).
        num_canaries, num_noise: sizes of the canary block.
        canary_scale: a canary's gradient norm before clipping, in clip units (> 1, so a
            skipped clip shows).
    """

    def __init__(self, *, seed: int | None = None, num_canaries: int = 1024,
                 num_noise: int = 256, canary_scale: float = 10.0):
        self.seed = seed
        self.num_canaries, self.num_noise = int(num_canaries), int(num_noise)
        self.canary_scale = float(canary_scale)
        self.engines: list[EngineCanaries] = []

    def _generator(self) -> torch.Generator:
        gen = torch.Generator()
        if self.seed is None:
            gen.seed()
        else:
            gen.manual_seed(int(self.seed) * 1000 + len(self.engines))
        return gen

    def hook_for(self, engine) -> EngineCanaries | None:
        if engine.accountant is None or engine.noise_multiplier == 0 or not math.isfinite(
                engine.noise_multiplier):
            return None
        hook = EngineCanaries(engine, self._generator(), self.num_canaries, self.num_noise,
                              self.canary_scale)
        self.engines.append(hook)
        return hook

    @contextmanager
    def active(self):
        _ACTIVE.append(self)
        try:
            yield self
        finally:
            _ACTIVE.remove(self)
            for hook in self.engines:
                hook.observer.finish()

    def note_batch(self, batch) -> None:
        """A batch a loader drew, for the observer of the newest engine."""
        if self.engines:
            self.engines[-1].observer.note_batch(batch)


def note_batch(batch) -> None:
    """Hand a loader's batch to the active session (no-op when none is active)."""
    if _ACTIVE:
        _ACTIVE[-1].note_batch(batch)


def attach(engine) -> EngineCanaries | None:
    """The hook of the active session for a new ``engine`` (``None`` when none is active)."""
    return _ACTIVE[-1].hook_for(engine) if _ACTIVE else None
