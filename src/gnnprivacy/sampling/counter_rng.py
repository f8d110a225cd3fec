"""Counter-based (stateless) uniforms keyed by ``(seed, step, stream, ids...)``.

Spec 000 §3.2 note (h) and check S5 need a coupling between neighbouring graphs: every
Bernoulli trial of the sampler must be a function of *who* it is about, not of *how many*
trials were drawn before it. A stateful generator (``torch.Generator``) shifts every later
draw when one node is added or removed; a counter-based generator does not.

Each uniform is ``splitmix64`` applied as a hash chain over its key:

```
h0 = splitmix64(seed);  h_{r+1} = splitmix64(h_r XOR key_r)
u  = (h_last >> 11) * 2**-53            # a float64 in [0, 1)
```

``splitmix64`` (Steele, Lea & Flood, "Fast splittable pseudorandom number generators",
OOPSLA 2014) is a bijection of 64-bit words with good avalanche, which makes the chain a
reasonable (non-cryptographic) keyed hash for simulation and tests. Use the ordinary
``torch.Generator`` path for training; use this mode where the coupling is the point.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import Tensor

from gnnprivacy._validation import check_int
from gnnprivacy.errors import InvalidParameterError

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MUL1 = np.uint64(0xBF58476D1CE4E5B9)
_MUL2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = (np.uint64(s) for s in (30, 27, 31, 11))
_TWO_POW_M53 = 2.0 ** -53


def splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser, elementwise on a ``uint64`` array (wrapping arithmetic)."""
    z = np.asarray(x, dtype=np.uint64) + _GOLDEN
    z = (z ^ (z >> _S30)) * _MUL1
    z = (z ^ (z >> _S27)) * _MUL2
    return z ^ (z >> _S31)


def _as_u64(x: Tensor | int) -> np.ndarray:
    if isinstance(x, Tensor):
        return x.detach().cpu().long().numpy().astype(np.uint64)   # two's complement view
    return np.asarray(int(x) & 0xFFFFFFFFFFFFFFFF, dtype=np.uint64)


def keyed_uniform(*keys: Tensor | int) -> Tensor:
    """Uniforms in ``[0, 1)`` (float64), one per broadcast element of ``keys``.

    Args:
        *keys: integers or integer tensors (broadcast together); the first is the seed.

    Returns:
        A float64 tensor with the broadcast shape of the keys.
    """
    with np.errstate(over="ignore"):
        h = splitmix64(_as_u64(keys[0]))
        for k in keys[1:]:
            h = splitmix64(h ^ _as_u64(k))
    return torch.from_numpy(np.ascontiguousarray((h >> _S11).astype(np.float64) * _TWO_POW_M53))


@dataclass(frozen=True)
class CounterRandom:
    """A stateless random source keyed by ``(seed, step)``: pass it where a sampler takes a
    ``generator`` to get trials that depend only on the ids they are about.

    Args:
        seed: non-negative integer seed.
        step: training step ``t`` (the sampler reads it; use `at_step`).

    Example:
        >>> rng = CounterRandom(seed=7)
        >>> batch = sampler.sample(rng.at_step(3))   # doctest: +SKIP
    """

    seed: int
    step: int = 0

    def __post_init__(self) -> None:
        check_int("seed", self.seed, low=0, where="CounterRandom")
        check_int("step", self.step, low=0, where="CounterRandom")

    def at_step(self, step: int) -> "CounterRandom":
        """The same seed at another step."""
        return replace(self, step=step)

    def uniform(self, stream: int, *ids: Tensor) -> Tensor:
        """Uniforms keyed by ``(seed, step, stream, *ids)``; ``stream`` separates trial kinds."""
        return keyed_uniform(self.seed, self.step, stream, *ids)


def uniform_like(generator: torch.Generator | CounterRandom, stream: int, *ids: Tensor) -> Tensor:
    """One float64 uniform per element of ``ids[0]`` (all ``ids`` share its shape).

    With a ``torch.Generator`` the draws are i.i.d. from it (ids only fix the count); with a
    `CounterRandom` each draw is a function of ``(seed, step, stream, ids)``.
    """
    if isinstance(generator, torch.Generator):
        return torch.rand(ids[0].shape, generator=generator, dtype=torch.float64)
    if isinstance(generator, CounterRandom):
        return generator.uniform(stream, *ids)
    raise InvalidParameterError("generator", "a torch.Generator or a CounterRandom",
                                type(generator).__name__)


def counter_seed(generator: torch.Generator) -> int:
    """The seed of a run's `CounterRandom` sampling stream: one draw of its sampling
    generator (the same on every rank that holds the same generator state)."""
    return int(torch.randint(0, 2**62, (1,), generator=generator))
