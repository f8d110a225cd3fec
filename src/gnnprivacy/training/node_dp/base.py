"""The estimator skeleton shared by the node-level DP trainers.

``fit(data)`` forks the global RNG (model initialisation draws from it) and seeds it from
the trainer's generator, so the library never changes global state and repeated fits with
the same int seed are identical. Subclasses implement ``_fit(data, generators)``.

Run-time options shared by every trainer (`NodeDPTrainer._set_runtime`):

* ``secure_mode``: every privacy-relevant random draw comes from the OS CSPRNG: the
  Gaussian noise (via `gnnprivacy.mechanisms.gaussian.gaussian_mechanism`, no
  generator at all) and the seeds of the batch samplers and of the DP-GNN degree-bounding
  pass. Only model initialisation stays seeded (it is not private). Without it, the noise
  is drawn from generators derived from the run seed: anyone who knows the seed (it is in
  the run record) can regenerate every noise draw bit for bit and subtract it, so seeded
  noise is for reproducible research only, never for a release.
* ``device``: ``"cpu"`` or ``"cuda[:K]"``; checked before any work
  (`gnnprivacy.training.device.resolve_device`), recorded as ``info_["device"]``.
* ``checkpoint_path`` / ``checkpoint_every`` / ``resume``: atomic checkpoints every
  ``checkpoint_every`` executed steps; with ``resume=True`` an existing checkpoint is
  loaded and training continues from its step with the same ledger
  (`gnnprivacy.training.checkpoint`).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch_geometric.data import Data

from gnnprivacy._estimator import EstimatorParams
from gnnprivacy._fixed_shapes import fixed_shapes
from gnnprivacy._validation import check_int
from gnnprivacy.training.checkpoint import fingerprint, load_checkpoint, save_checkpoint
from gnnprivacy.training.device import device_generator, device_name, resolve_device
from gnnprivacy.training.dp import DPEngine
from gnnprivacy.training.memory import tune_malloc
from gnnprivacy.training.node_dp.common import derive_generators, make_generator

#: the named random streams every trainer gets (``noise`` is ``None`` in secure mode)
GENERATOR_NAMES = ("init", "sample", "noise", "subgraphs")


def os_entropy_generator() -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with 63 bits from the OS CSPRNG (no user seed)."""
    return torch.Generator().manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)

__all__ = ["NodeDPTrainer"]


class NodeDPTrainer(EstimatorParams):
    """Base class: randomness plumbing, the step loop and the privacy summary.

    Learned state common to all subclasses: ``model_``, ``noise_multiplier_`` (noise std
    over the clip norm, Opacus's name), ``noise_std_`` (std of the noise on the clipped sum;
    ``sigma_`` is its old name), ``steps_`` (executed noisy steps),
    ``epsilon_``/``delta_``/``privacy_spent_``, ``ledger_``, ``accountant_``, ``info_``.
    """

    name = "node-dp"
    generator: torch.Generator | int | None = None
    progress: Callable[[str, int], object] | None = None
    secure_mode: bool = False
    device: str | torch.device = "cpu"
    checkpoint_path: str | None = None
    checkpoint_every: int = 100
    resume: bool = False
    #: calibrate with the full check up front (set by fit() for a second attempt)
    _strict_calibration: bool = False

    def _set_runtime(self, *, secure_mode: bool = False, device: str | torch.device = "cpu",
                     checkpoint_path: str | os.PathLike | None = None,
                     checkpoint_every: int = 100, resume: bool = False) -> None:
        """Store (and check) the run-time options documented in the module docstring."""
        self.secure_mode = bool(secure_mode)
        resolve_device(device)  # a bad device fails here, before any work
        self.device = device
        self.checkpoint_path = None if checkpoint_path is None else str(checkpoint_path)
        self.checkpoint_every = check_int("checkpoint_every", checkpoint_every, low=1)
        self.resume = bool(resume)
        if self.resume and self.checkpoint_path is None:
            from gnnprivacy.errors import InvalidParameterError

            raise InvalidParameterError("checkpoint_path", "a path when resume=True", None)

    def fit(self, data: Data):
        """Train a fresh model on ``data`` (or resume from a checkpoint); returns ``self``."""
        self.device_ = resolve_device(self.device)
        tune_malloc()  # reuse freed step temporaries instead of faulting them in again
        gen = make_generator(self.generator)
        gens = derive_generators(gen, GENERATOR_NAMES)
        if self.secure_mode:
            gens.update(sample=os_entropy_generator(), subgraphs=os_entropy_generator(),
                        noise=None)
        self._fingerprint = self._run_fingerprint(data)
        self._resume_state = None
        if self.resume:
            state = load_checkpoint(self.checkpoint_path, expected_fingerprint=self._fingerprint)
            if state is not None:
                for k, st in state["generators_initial"].items():
                    gens[k].set_state(st)
                self._resume_state = state
        self._gens = gens
        self._gens_initial = {k: g.get_state() for k, g in gens.items() if g is not None}
        cuda = [self.device_.index or 0] if self.device_.type == "cuda" else []
        with torch.random.fork_rng(devices=cuda):
            seed = int(torch.randint(0, 2**62, (1,), generator=gens["init"]))
            torch.manual_seed(seed)
            self._strict_calibration = False
            self._fit(data, gens)
            if self._deferred_check_failed():
                # the noise was calibrated on the largest out-degree and the full epsilon
                # (every covering degree, computed during training) exceeds the target:
                # nothing of this run is kept; calibrate with the full check, train again
                # (the check depends on public parameters only)
                warnings.warn(f"{self.name}: epsilon {self.epsilon_:.6g} at the noise "
                              f"calibrated on the largest out-degree exceeds the target "
                              f"{self.epsilon:g}; re-calibrating on every degree and "
                              "training again", RuntimeWarning, stacklevel=2)
                for k, state in self._gens_initial.items():
                    gens[k].set_state(state)
                torch.manual_seed(seed)
                self._strict_calibration = True
                self._resume_state = None
                self._fit(data, gens)
        self.info_ = {**getattr(self, "info_", {}), "device": device_name(self.device_)}
        if hasattr(self, "privacy_info_"):
            self.privacy_info_["secure_mode"] = self.secure_mode
        return self

    def _step_generators(self, gens: dict[str, torch.Generator | None]
                         ) -> tuple[torch.Generator, torch.Generator | None]:
        """``(sample, noise)`` generators of the step loop: the run's streams, or on a
        fixed-shape device (a GPU) generators on the device seeded from them, so no random
        number crosses from the host in a step. They join ``gens`` (``sample_device``,
        ``noise_device``), so checkpoints carry their state."""
        if not fixed_shapes(self.device_):
            return gens["sample"], gens["noise"]
        for name in ("sample", "noise"):
            gens[f"{name}_device"] = device_generator(gens[name], self.device_)
        return gens["sample_device"], gens["noise_device"]

    def _deferred_check_failed(self) -> bool:
        """A calibration checked only on the largest degree gave more than the target."""
        return (getattr(self, "_deferred_check_", False)
                and getattr(self, "epsilon", None) is not None
                and self.epsilon_ > float(self.epsilon))

    def _run_fingerprint(self, data: Data) -> str:
        """What a checkpoint must match: the trainer's settings, the seed and the data."""
        x = data.x
        return fingerprint({**self._fingerprint_settings(),
                            "num_nodes": int(data.num_nodes), "x_shape": list(x.shape),
                            "x_sum": float(x.double().sum()),
                            "edges": int(data.edge_index.shape[1]),
                            "train": int(data.train_mask.sum())})

    def _fingerprint_settings(self) -> dict[str, Any]:
        """The trainer's part of a checkpoint fingerprint: its class, settings and int seed
        (not where it runs, reports or checkpoints)."""
        skip = {"generator", "progress", "checkpoint_path", "checkpoint_every", "resume",
                "device"}
        settings = {k: v for k, v in vars(self).items()
                    if not k.endswith("_") and not k.startswith("_") and k not in skip}
        seed = self.generator if isinstance(self.generator, int) else None
        return {"trainer": type(self).__name__, "settings": settings, "seed": seed}

    def _fit(self, data: Data, gens: dict[str, torch.Generator]) -> None:  # pragma: no cover
        raise NotImplementedError(f"{type(self).__name__} must implement _fit(data, gens)")

    def _run(self, engine: DPEngine, steps: int, closure_for_step: Callable[[], Callable]) -> None:
        """Execute ``steps`` noisy steps; ``closure_for_step()`` samples a batch and returns
        the closure computing its per-subgraph losses."""
        start = self._restore(engine) if self._resume_state is not None else 0
        bar = self.progress(self.name, steps) if self.progress else None
        if bar is not None and start:
            bar.update(start)
        self.model_.train()
        for t in range(start, steps):
            engine.step(closure_for_step())
            if bar is not None:
                bar.update(1)
            if self.checkpoint_path is not None and (
                    (t + 1) % self.checkpoint_every == 0 or t + 1 == steps):
                self._save(engine)
        self.model_.eval()
        self.steps_ = engine.steps_
        self.resumed_from_step_ = start

    def _run_private(self, pt, step: Callable[[Any], None]) -> None:
        """The user-loop path (`PrivateTraining`) with
        the trainer's progress, checkpoints and resume: ``step(batch)`` runs forward,
        backward and ``optimizer.step()`` on each batch of ``pt.loader``."""
        engine = pt.engine
        start = self._restore(engine) if self._resume_state is not None else 0
        bar = self.progress(self.name, pt.steps_planned) if self.progress else None
        if bar is not None and start:
            bar.update(start)
        done = start
        self.model_.train()
        for batch in pt.loader:
            step(batch)
            if bar is not None:
                bar.update(engine.steps_ - done)
            if self.checkpoint_path is not None and (
                    engine.steps_ // self.checkpoint_every > done // self.checkpoint_every
                    or engine.steps_ == pt.steps_planned):
                self._save(engine)
            done = engine.steps_
        self.model_.eval()
        pt.close()
        self.steps_ = engine.steps_
        self.resumed_from_step_ = start

    def _save(self, engine: DPEngine) -> None:
        """Atomic checkpoint after ``engine.steps_`` executed steps."""
        from gnnprivacy.training.dp.audit_hooks import note_checkpoint

        gens = {k: g.get_state() for k, g in self._gens.items() if g is not None}
        state = {
            "fingerprint": self._fingerprint, "step": engine.steps_,
            "model": self.model_.state_dict(), "optimizer": engine.optimizer.state_dict(),
            "generators_initial": self._gens_initial, "generators": gens,
            "torch_rng": torch.get_rng_state(), "noise_multiplier": engine.noise_multiplier,
            "ledger": None if engine.accountant is None else engine.accountant.ledger.to_dict(),
            **self._checkpoint_extra()}
        note_checkpoint(engine, state["step"])
        save_checkpoint(self.checkpoint_path, state)

    def _checkpoint_extra(self) -> dict[str, Any]:
        """More plain values for the checkpoint (a sharded run adds its world size)."""
        return {}

    def _restore(self, engine: DPEngine) -> int:
        """Load the checkpoint's state into ``engine``; returns the executed step count."""
        state = self._resume_state
        if abs(state["noise_multiplier"] - engine.noise_multiplier) > 1e-12 * max(
                1.0, engine.noise_multiplier):
            raise RuntimeError(f"checkpoint {self.checkpoint_path}: noise multiplier "
                               f"{state['noise_multiplier']} != {engine.noise_multiplier}")
        self.model_.load_state_dict(state["model"])
        engine.optimizer.load_state_dict(state["optimizer"])
        for k, st in state["generators"].items():
            self._gens[k].set_state(st)
        torch.set_rng_state(state["torch_rng"])
        from gnnprivacy.training.dp.audit_hooks import note_resume

        step = int(state["step"])
        engine.steps_ = step
        if engine.accountant is not None and step:
            engine.accountant.compose(engine.step_event, count=step)
            if engine.accountant.ledger.to_dict() != state["ledger"]:
                raise RuntimeError(f"checkpoint {self.checkpoint_path}: the rebuilt ledger "
                                   "differs from the saved one")
        note_resume(engine, step)
        return step

    @property
    def checkpoint_file(self) -> Path | None:
        """The checkpoint path (``None`` when checkpoints are off)."""
        return None if self.checkpoint_path is None else Path(self.checkpoint_path)

    def _finish(self, engine: DPEngine, delta: float) -> None:
        """Epsilon from the accountant over the executed steps."""
        self.noise_std_ = engine.noise_std
        self.delta_ = float(delta)
        self.epsilon_ = float(self.accountant_.get_epsilon(self.delta_))
        self.privacy_spent_ = (self.epsilon_, self.delta_)
        self.ledger_ = self.accountant_.to_dict(self.delta_)

    def _check_fitted(self) -> None:
        if not hasattr(self, "model_"):
            raise RuntimeError(f"{type(self).__name__} is not fitted; call fit(data) first")

    @property
    def sigma_(self) -> float:
        """The old name of `noise_std_` (kept readable)."""
        return self.noise_std_

    def privacy_record(self) -> dict[str, Any]:
        """Privacy facts for a run record (unit, relation, accountant, mode, noise ...)."""
        self._check_fitted()
        return dict(self.privacy_info_)
