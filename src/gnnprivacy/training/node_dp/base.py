"""The estimator skeleton shared by the node-level DP trainers.

``fit(data)`` forks the global RNG (model initialisation draws from it) and seeds it from
the trainer's generator, so the library never changes global state and repeated fits with
the same int seed are identical. Subclasses implement ``_fit(data, generators)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch_geometric.data import Data

from gnnprivacy.training.dp import DPEngine
from gnnprivacy.training.node_dp.common import derive_generators, make_generator

__all__ = ["NodeDPTrainer"]


class NodeDPTrainer:
    """Base class: randomness plumbing, the step loop and the privacy summary.

    Learned state common to all subclasses: ``model_``, ``noise_multiplier_``, ``sigma_``
    (std of the noise on the clipped sum), ``steps_`` (executed noisy steps),
    ``epsilon_``/``delta_``/``privacy_spent_``, ``ledger_``, ``accountant_``, ``info_``.
    """

    name = "node-dp"
    generator: torch.Generator | int | None = None
    progress: Callable[[str, int], object] | None = None

    def fit(self, data: Data):
        """Train a fresh model on ``data``; returns ``self``."""
        gen = make_generator(self.generator)
        gens = derive_generators(gen, ("init", "sample", "noise", "subgraphs"))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=gens["init"])))
            self._fit(data, gens)
        return self

    def _fit(self, data: Data, gens: dict[str, torch.Generator]) -> None:  # pragma: no cover
        raise NotImplementedError(f"{type(self).__name__} must implement _fit(data, gens)")

    def _run(self, engine: DPEngine, steps: int, closure_for_step: Callable[[], Callable]) -> None:
        """Execute ``steps`` noisy steps; ``closure_for_step()`` samples a batch and returns
        the closure computing its per-subgraph losses."""
        bar = self.progress(self.name, steps) if self.progress else None
        self.model_.train()
        for _ in range(steps):
            engine.step(closure_for_step())
            if bar is not None:
                bar.update(1)
        self.model_.eval()
        self.steps_ = engine.steps_

    def _finish(self, engine: DPEngine, delta: float) -> None:
        """Epsilon from the accountant over the executed steps."""
        self.sigma_ = engine.noise_std
        self.delta_ = float(delta)
        self.epsilon_ = float(self.accountant_.get_epsilon(self.delta_))
        self.privacy_spent_ = (self.epsilon_, self.delta_)
        self.ledger_ = self.accountant_.to_dict(self.delta_)

    def _check_fitted(self) -> None:
        if not hasattr(self, "model_"):
            raise RuntimeError(f"{type(self).__name__} is not fitted; call fit(data) first")

    def privacy_record(self) -> dict[str, Any]:
        """Privacy facts for a run record (unit, relation, accountant, mode, sigma ...)."""
        self._check_fitted()
        return dict(self.privacy_info_)
