"""The trainers' bridge to `gnnprivacy.accounting`: event factories and cached calibration.

An event factory is a frozen, hashable description of one step's event as a function of
the noise multiplier, so a calibration (seconds to minutes for the HeterPoisson PLD) is
computed once per process and reused across seeds of a sweep.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass

from dp_accounting import dp_event

from gnnprivacy.accounting import (Accountant, calibrate_noise_multiplier, dpgnn_event,
                                   dpsgd_event, edge_subgraph_event, heterpoisson_event,
                                   make_accountant)
from gnnprivacy.accounting.pld_accountant import DEFAULT_VALUE_DISCRETIZATION_INTERVAL
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.errors import InvalidParameterError

__all__ = ["EventFactory", "HETERPOISSON_MODES", "MAX_PLANNED_STEPS", "accountant_options",
           "calibrate", "calibrate_with_release", "check_delta", "check_plan", "check_planned_steps",
           "dpgnn_event_factory", "dpsgd_event_factory", "edge_event_factory",
           "heterpoisson_accountant_kind", "heterpoisson_event_factory", "new_accountant", "prefetch_final_epsilon"]

#: a plan with more noisy steps than this is refused (with the figure), unless the steps
#: were given explicitly
MAX_PLANNED_STEPS = 1_000_000
#: PLD grid step for large budgets: at most EPSILON_GRID_SHARE of the target epsilon is
#: lost to discretisation over all steps (the pessimistic PLD stays an upper bound)
EPSILON_GRID_SHARE = 1e-3
#: below a target of SMALL_EPSILON the default grid step over-noises (each step's loss is
#: rounded up by up to a grid step): dpmlp on a 20,000-node csbm at epsilon 0.001 spent
#: 3.1e-5 of its budget (issue 22 item 6). There the step is SMALL_EPSILON_GRID_SHARE of
#: the target over all steps.
SMALL_EPSILON = 1.0
SMALL_EPSILON_GRID_SHARE = 1e-2

HETERPOISSON_MODES = ("sound", "paper")
_BUILDERS = {"heterpoisson": heterpoisson_event, "dpgnn": dpgnn_event, "dpsgd": dpsgd_event,
             "edge": edge_subgraph_event}


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


def edge_event_factory(*, sample_rate: float, occurrence: int, bounding_factor: int = 1,
                       undirected: bool = True) -> EventFactory:
    """Edge-level DP-SGD step over Poisson-sampled subgraphs (`EdgeSubgraphDpEvent`);
    noise multiplier = ``σ / C``."""
    return EventFactory("edge", (("sample_rate", sample_rate), ("occurrence", occurrence),
                                 ("bounding_factor", bounding_factor),
                                 ("undirected", undirected)))


def accountant_options(kind: str, epsilon: float | None = None,
                       steps: int | None = None) -> dict:
    """Numerical options of the trainers' accountant for a target ``epsilon`` over ``steps``.

    PLD: the default grid step (1e-3), coarsened for large budgets to
    ``EPSILON_GRID_SHARE * epsilon / steps`` so that ``--epsilon 1000`` finishes in seconds
    (the PLD grid grows with shift^2 / noise^2); the pessimistic estimate stays an upper
    bound at any grid step, and the total discretisation slack is at most
    ``EPSILON_GRID_SHARE * epsilon``.
    """
    if kind != "pld" or epsilon is None or steps is None:
        return {}
    if float(epsilon) < SMALL_EPSILON:
        vdi = min(DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
                  SMALL_EPSILON_GRID_SHARE * float(epsilon) / max(int(steps), 1))
        return {} if vdi == DEFAULT_VALUE_DISCRETIZATION_INTERVAL else {
            "value_discretization_interval": vdi}
    vdi = max(DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
              EPSILON_GRID_SHARE * float(epsilon) / max(int(steps), 1))
    return {} if vdi == DEFAULT_VALUE_DISCRETIZATION_INTERVAL else {
        "value_discretization_interval": vdi}


@functools.lru_cache(maxsize=256)
def calibrate(make_event: EventFactory, *, steps: int, epsilon: float, delta: float,
              kind: str, full_check: bool = True) -> float:
    """Smallest noise multiplier (within 0.1 %) whose epsilon after ``steps`` steps is at
    most ``epsilon`` (one-sided; cached per process and on disk).

    ``full_check=False``: where the calibration only evaluated the largest out-degree, the
    caller must confirm the full epsilon before releasing anything (see
    `prefetch_final_epsilon`)."""
    return calibrate_noise_multiplier(make_event, steps=steps, target_epsilon=epsilon,
                                      target_delta=delta, accountant=kind,
                                      accountant_options=accountant_options(kind, epsilon, steps),
                                      full_check=full_check)


def calibrate_with_release(make_event: EventFactory, *, steps: int, release: tuple,
                           epsilon: float, delta: float, kind: str) -> float:
    """Smallest noise multiplier whose ``steps`` steps *composed with* the fixed events of a
    later ``release`` (e.g. the edge-private inference) stay within ``epsilon`` at
    ``delta`` (one-sided, like `calibrate`)."""
    def composed(z: float) -> dp_event.DpEvent:
        return dp_event.ComposedDpEvent([dp_event.SelfComposedDpEvent(make_event(z), steps),
                                         *release])

    return calibrate_noise_multiplier(composed, steps=1, target_epsilon=epsilon,
                                      target_delta=delta, accountant=kind,
                                      accountant_options=accountant_options(kind, epsilon,
                                                                            steps))


def prefetch_final_epsilon(kind: str, unit: PrivacyUnit, relation: NeighboringRelation, *,
                           event: dp_event.DpEvent, steps: int, delta: float,
                           epsilon: float | None = None):
    """Start, in a background thread, the epsilon that an accountant made by
    `new_accountant` will report after composing ``event`` ``steps`` times; that
    accountant's ``get_epsilon(delta)`` then waits for this result instead of computing it
    (PLD only; returns the future, or ``None`` for other accountants)."""
    acc = new_accountant(kind, unit, relation, epsilon=epsilon, steps=steps)
    if not hasattr(acc, "prefetch_epsilon"):
        return None
    acc.compose(event, steps)
    return acc.prefetch_epsilon(delta)


def new_accountant(kind: str, unit: PrivacyUnit, relation: NeighboringRelation, *,
                   epsilon: float | None = None, steps: int | None = None) -> Accountant:
    """A fresh accountant that the engine composes one event into per executed step (with
    the options `calibrate` used for the same ``epsilon`` and ``steps``)."""
    return make_accountant(kind, unit=unit, relation=relation,
                           **accountant_options(kind, epsilon, steps))


def check_delta(delta: float, num_units: int, *, allow_large_delta: bool = False,
                units: str = "training nodes") -> float:
    """Refuse ``delta >= 1 / n`` (n privacy units) unless ``allow_large_delta``.

    A delta of 1/n allows a mechanism that publishes one unit's data outright with
    probability 1/n per unit; the message is one line and says how to override.

    Raises:
        InvalidParameterError: naming ``delta``.
    """
    from gnnprivacy._validation import check_delta_range

    check_delta_range("delta", delta)
    n = int(num_units)
    if allow_large_delta or n <= 0 or delta < 1.0 / n:
        return delta
    raise InvalidParameterError(
        "delta", f"< 1/n = {1.0 / n:.3g} (n = {n} {units}, the privacy units); pass "
        "allow_large_delta=True (CLI --allow-large-delta) to accept it", delta)


def check_planned_steps(steps: int, *, explicit: bool = False, how: str = "") -> int:
    """Refuse a plan of more than `MAX_PLANNED_STEPS` noisy steps that the user did
    not ask for explicitly (e.g. ``--q-b 1e-6`` gives ``T = ceil(9 / q_b) = 9e6``); an
    explicit ``steps`` above it only warns.

    Raises:
        InvalidParameterError: naming ``steps`` and the figure.
    """
    steps = int(steps)
    if steps <= MAX_PLANNED_STEPS:
        return steps
    detail = f" ({how})" if how else ""
    if explicit:
        warnings.warn(f"{steps:,} noisy steps requested{detail}; accounting and training "
                      "will be slow", stacklevel=3)
        return steps
    raise InvalidParameterError(
        "steps", f"at most {MAX_PLANNED_STEPS:,} planned noisy steps{detail}; raise the "
        "sampling rate or pass steps explicitly", steps)


def check_expected_batch(rate: float, num_units: int, *, name: str = "q_b") -> float:
    """Refuse a sampling rate whose expected batch is below one unit: every step would then
    add noise to (almost always) nothing, and the run would train nothing while spending
    its budget. The message gives the figure.

    Raises:
        InvalidParameterError: naming the rate.
    """
    expected = float(rate) * int(num_units)
    if num_units > 0 and expected < 1.0:
        raise InvalidParameterError(
            name, f"a rate giving at least one sampled node per step (>= 1/{int(num_units)} "
            f"for {int(num_units)} training nodes)",
            f"{rate:g}, an expected {expected:.3g} nodes per step")
    return rate


def check_plan(*, delta: float, num_units: int, steps: int, explicit_steps: bool = False,
               allow_large_delta: bool = False, how: str = "",
               sample_rate: float | None = None, rate_name: str = "q_b") -> None:
    """The checks every private trainer runs before calibrating (issue 10): delta < 1/n, a
    bounded step count, and (when given) a sampling rate that samples someone."""
    check_delta(delta, num_units, allow_large_delta=allow_large_delta)
    if sample_rate is not None:
        check_expected_batch(sample_rate, num_units, name=rate_name)
    check_planned_steps(steps, explicit=explicit_steps, how=how)
