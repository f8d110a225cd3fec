"""Randomness as an argument. The library never seeds a global RNG.

Seeds for repeats are derived with `numpy.random.SeedSequence` (``spawn``), so
each repeat, split and mechanism gets an independent stream reproducible from one seed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from gnnprivacy._validation import check_int

if TYPE_CHECKING:  # torch is imported lazily so that `--help` stays fast
    import torch


__all__ = ["as_torch_generator", "numpy_generator", "seed_sequence", "spawn_seeds", "torch_generator"]

def seed_sequence(seed: int | np.random.SeedSequence) -> np.random.SeedSequence:
    """Return a SeedSequence for an integer seed (>= 0) or pass one through."""
    if isinstance(seed, np.random.SeedSequence):
        return seed
    return np.random.SeedSequence(check_int("seed", seed, low=0))


def spawn_seeds(seed: int | np.random.SeedSequence, n: int) -> list[int]:
    """``n`` independent 63-bit integer seeds derived from ``seed`` via ``SeedSequence.spawn``."""
    children = seed_sequence(seed).spawn(check_int("n", n, low=0))
    return [int(c.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1)) for c in children]


def numpy_generator(seed: int | np.random.SeedSequence | np.random.Generator | None) -> np.random.Generator:
    """A numpy Generator from a seed, a SeedSequence or an existing Generator.

    ``None`` draws fresh OS entropy (never a global state).
    """
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed)


def torch_generator(seed: int | None, device: str = "cpu"):
    """A ``torch.Generator`` seeded with ``seed`` (fresh OS entropy when ``None``)."""
    import torch

    gen = torch.Generator(device=device)
    if seed is None:
        gen.seed()
    else:
        gen.manual_seed(int(seed) & ((1 << 63) - 1))
    return gen


def as_torch_generator(generator) -> "torch.Generator":
    """Pass a ``torch.Generator`` through; seed a new one from an int; ``None`` = OS entropy."""
    import torch

    if isinstance(generator, torch.Generator):
        return generator
    return torch_generator(None if generator is None else int(generator))
