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

__all__ = ["CANARY_KEY", "CodeAuditSession", "EngineCanaries", "ReleaseTape", "attach",
           "note_batch", "note_checkpoint", "note_resume", "released", "step_sampling",
           "taped"]

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

    def note_batch(self, batch, sampler=None) -> None:
        """A batch a loader drew (and the sampler that drew it), for the observer of the
        newest engine."""
        if self.engines:
            self.engines[-1].observer.note_batch(batch, sampler)


def note_batch(batch, sampler=None) -> None:
    """Hand a loader's batch to the active session (no-op when none is active)."""
    if _ACTIVE:
        _ACTIVE[-1].note_batch(batch, sampler)


def note_checkpoint(engine, steps: int) -> None:
    """A checkpoint of ``engine``'s run that claims ``steps`` executed steps was written
    (no-op unless a code audit observes the engine)."""
    hook = getattr(engine, "_audit", None)
    if hook is not None:
        hook.observer.saves.append((int(steps), hook.observer.executed))


def note_resume(engine, steps: int) -> None:
    """``engine`` resumed from a checkpoint claiming ``steps`` executed steps (no-op unless
    a code audit observes it). Call it once the resume has composed the checkpoint's steps:
    what its accountant gained beyond the observed releases is read here."""
    hook = getattr(engine, "_audit", None)
    if hook is None or engine.accountant is None:
        return
    ledger = sum(e.count for e in engine.accountant.ledger.entries
                 if e.event == engine.step_event)
    composed = ledger - hook.observer.executed
    hook.observer.resumes.append((int(steps), int(composed)))


def note_post_processing(model) -> None:
    """``model``'s parameters were changed after its last DP step by a post-processing of
    the run's releases (the edge release's refit): the observers of its engines count it
    and take the parameters now as the released ones. What the post-processing read is
    checked by the publication audit's replay (pinned releases, moved private data), not
    here (no-op unless a code audit observes the model)."""
    for session in _ACTIVE:
        for hook in session.engines:
            if hook.engine.model is model:
                hook.observer.note_post_processing()


def attach(engine) -> EngineCanaries | None:
    """The hook of the active session for a new ``engine`` (``None`` when none is active)."""
    return _ACTIVE[-1].hook_for(engine) if _ACTIVE else None


# ---------------------------------------------------------------------- the release tape
class ReleaseTape:
    """Every noisy release of a run, in order (the publication audit's record), or a
    record to replay: while a tape made with ``pinned=`` is active, the ``k``-th release of
    the run returns the ``k``-th recorded value instead of its own, so a run on other
    private data releases exactly what the recorded run released (the coupling of a
    differential-privacy proof, made concrete). A release that the recorded run did not
    make (another kind, shape, or one too many) is listed in ``faults``: how many values a
    run releases must not depend on the private data."""

    def __init__(self, pinned: list | None = None):
        self.pinned = pinned
        self.values: list[tuple[str, Any]] = []
        self.faults: list[str] = []

    def release(self, kind: str, value):
        k = len(self.values)
        mine = _detached(value)
        self.values.append((kind, mine))
        if self.pinned is None:
            return value
        if k >= len(self.pinned):
            self.faults.append(f"release {k} ({kind}): the recorded run made only "
                               f"{len(self.pinned)}")
            return value
        was_kind, was = self.pinned[k]
        if was_kind != kind or _shapes(was) != _shapes(mine):
            self.faults.append(f"release {k}: {kind} {_shapes(mine)} where the recorded run "
                               f"released {was_kind} {_shapes(was)}")
            return value
        return _replayed(was, value)


_TAPES: list[ReleaseTape] = []


def released(kind: str, value):
    """A noisy value leaving a mechanism (an engine step's noisy sums, GAP's noisy
    aggregation): the value itself, or what the active `ReleaseTape` replays."""
    return _TAPES[-1].release(kind, value) if _TAPES else value


@contextmanager
def taped(pinned: list | None = None):
    """Record every release of the enclosed run on a new `ReleaseTape` (replaying
    ``pinned`` when given)."""
    tape = ReleaseTape(pinned)
    _TAPES.append(tape)
    try:
        yield tape
    finally:
        _TAPES.remove(tape)


def _detached(value):
    if isinstance(value, Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        return {k: v.detach().clone() for k, v in value.items()}
    raise TypeError(f"a release is a tensor or a dict of tensors, not {type(value).__name__}")


def _shapes(value):
    if isinstance(value, Tensor):
        return tuple(value.shape)
    return {k: tuple(v.shape) for k, v in value.items()}


def _replayed(recorded, value):
    """``recorded`` in the form of ``value`` (a `FlatSums` stays one, on its device)."""
    from gnnprivacy.training.dp.noise import flatten, unflatten

    if isinstance(value, Tensor):
        return recorded.clone().to(value.device, value.dtype)
    if getattr(value, "flat", None) is not None:
        flat = flatten({k: recorded[k] for k in value}).to(value.flat.device, value.flat.dtype)
        return unflatten(flat, value)
    return {k: recorded[k].clone().to(v.device, v.dtype) for k, v in value.items()}
