"""What the runner hands a method (`RunContext`) and what it returns (`MethodResult`)."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class MethodResult:
    """The outcome of one training run.

    Attributes:
        metrics: utility metrics; ``test_accuracy`` is required, ``val_accuracy``,
            ``test_macro_f1``, ``test_roc_auc`` (binary tasks) and others are optional.
        epsilon: privacy spent, from an accountant that saw every executed noisy step
            (``math.inf`` for a non-private method).
        delta: the delta that ``epsilon`` is stated for (``None`` when not private).
        ledger: JSON-able privacy ledger (the accountant's ``to_dict()``), or a list of
            event descriptions; a non-private run records one ``NonPrivateDpEvent``.
        privacy: further privacy facts for the record: accountant kind, accounting mode,
            noise multiplier, sigma, clip norm, unit, relation ...
        info: anything else worth keeping (epochs run, best epoch, sizes ...).
        model: the fitted estimator (kept in memory for ``gnnprivacy.train(...).predict``;
            never written to the record).
    """

    metrics: dict[str, float]
    epsilon: float = math.inf
    delta: float | None = None
    ledger: Any = field(default_factory=lambda: [{"event": "NonPrivateDpEvent", "count": 1}])
    privacy: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    model: Any = field(default=None, repr=False)


@dataclass
class RunContext:
    """Everything a method needs: resolved config, its params, the data and seeded randomness.

    Randomness: ``seed`` is the run seed; `seed_for` derives an independent 63-bit seed
    per named purpose (``"init"``, ``"sampler"``, ``"noise"`` ...), so streams never overlap
    and each is reproducible.
    """

    config: Any
    params: Any
    data: Any
    seed: int
    device: Any = "cpu"
    progress: Callable[[str, int], Any] | None = None
    log: Callable[[str], None] = lambda message: None
    checkpoint_path: str | None = None  #: where a private trainer checkpoints (None: off)
    resume: bool = False  #: continue from ``checkpoint_path`` when it exists

    def seed_for(self, purpose: str) -> int:
        """Deterministic seed for ``purpose`` derived from the run seed via SeedSequence."""
        key = int.from_bytes(hashlib.sha256(purpose.encode()).digest()[:4], "little")
        ss = np.random.SeedSequence([self.seed, key])
        return int(ss.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))

    def torch_generator(self, purpose: str):
        """A ``torch.Generator`` on the run's device seeded by `seed_for`."""
        from gnnprivacy.random import torch_generator

        return torch_generator(self.seed_for(purpose), device=str(self.device))

    def numpy_generator(self, purpose: str) -> np.random.Generator:
        """A numpy Generator seeded by `seed_for`."""
        return np.random.default_rng(self.seed_for(purpose))
