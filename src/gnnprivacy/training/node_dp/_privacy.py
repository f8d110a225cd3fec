"""The trainers' bridge to :mod:`gnnprivacy.accounting`: event factories and cached calibration.

An event factory is a frozen, hashable description of one step's event as a function of
the noise multiplier, so a calibration (seconds to minutes for the HeterPoisson PLD) is
computed once per process and reused across seeds of a sweep.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from dp_accounting import dp_event

from gnnprivacy.accounting import (Accountant, calibrate_noise_multiplier, dpgnn_event,
                                   dpsgd_event, heterpoisson_event, make_accountant)
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit

__all__ = ["EventFactory", "HETERPOISSON_MODES", "calibrate", "dpgnn_event_factory",
           "dpsgd_event_factory", "heterpoisson_accountant_kind", "heterpoisson_event_factory",
           "new_accountant"]

HETERPOISSON_MODES = ("sound", "paper")
_BUILDERS = {"heterpoisson": heterpoisson_event, "dpgnn": dpgnn_event, "dpsgd": dpsgd_event}


@dataclass(frozen=True)
class EventFactory:
    """``factory(noise_multiplier) -> DpEvent`` for one builder with fixed parameters.

    A noise multiplier of exactly 0 (the labelled non-private run, spec 000 §9 A21) gives
    ``NonPrivateDpEvent``, so the reported epsilon is infinite.
    """

    builder: str
    params: tuple[tuple[str, object], ...]

    def __call__(self, noise_multiplier: float) -> dp_event.DpEvent:
        if noise_multiplier == 0:
            return dp_event.NonPrivateDpEvent()
        return _BUILDERS[self.builder](noise_multiplier=noise_multiplier, **dict(self.params))


def heterpoisson_event_factory(*, q_b: float, M: float, max_out_degree: int,
                               overlap_removal: bool, mode: str) -> EventFactory:
    """HeterPoisson mixture step (spec 000 Theorem 2); noise multiplier = ``σ / R``."""
    return EventFactory("heterpoisson", (("q_b", q_b), ("M", M), ("max_out_degree", max_out_degree),
                                         ("overlap_removal", overlap_removal), ("mode", mode)))


def heterpoisson_accountant_kind(mode: str) -> str:
    """``"pld"`` for the sound mode, ``"rdp"`` for the paper's Theorem-2 RDP."""
    return "pld" if mode == "sound" else "rdp"


def dpgnn_event_factory(*, num_train: int, batch_size: int, max_degree: int,
                        sampling: str) -> EventFactory:
    """DP-GNN multi-term step (spec 002 Theorem 1); noise multiplier = ``λ``."""
    return EventFactory("dpgnn", (("num_train", num_train), ("batch_size", batch_size),
                                  ("max_degree", max_degree), ("sampling", sampling)))


def dpsgd_event_factory(*, sample_rate: float) -> EventFactory:
    """Poisson-subsampled Gaussian step; noise multiplier = ``σ / C``."""
    return EventFactory("dpsgd", (("sample_rate", sample_rate),))


@functools.lru_cache(maxsize=256)
def calibrate(make_event: EventFactory, *, steps: int, epsilon: float, delta: float,
              kind: str) -> float:
    """Smallest noise multiplier (within 0.1 %) whose epsilon after ``steps`` steps is at
    most ``epsilon`` (one-sided; cached per process)."""
    return calibrate_noise_multiplier(make_event, steps=steps, target_epsilon=epsilon,
                                      target_delta=delta, accountant=kind)


def new_accountant(kind: str, unit: PrivacyUnit, relation: NeighboringRelation) -> Accountant:
    """A fresh accountant that the engine composes one event into per executed step."""
    return make_accountant(kind, unit=unit, relation=relation)
