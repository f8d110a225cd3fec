"""Shared shape of every mechanism, and the event used for pure-epsilon mechanisms.

A mechanism is a thin class over a functional core. It is configured once (privacy parameters
keyword-only, validated at construction) and then called as ``mech(x, *, generator=None)`` on
torch tensors. It states what it protects:

* ``.event``: the ``dp_accounting`` `DpEvent` one call emits;
* ``.sensitivity``: how far neighbouring inputs may be apart (documented per mechanism);
* ``.unit`` / ``.relation``: the `PrivacyUnit` and
  `NeighboringRelation` of the guarantee;
* ``.epsilon`` for pure-epsilon mechanisms.

Pure-epsilon events. ``dp_accounting`` 0.6 has no ``EpsilonDeltaDpEvent``. A pure
``epsilon``-DP mechanism is represented by `pure_epsilon_event`, binary randomized
response at ``epsilon``: ``RandomizedResponseDpEvent(noise_parameter=2/(e^eps+1),
num_buckets=2)``. Binary RR is the dominating pair of every ``epsilon``-DP mechanism: for any
neighbouring pair, an ``epsilon``-DP mechanism's output is a post-processing of binary RR's
(Kairouz, Oh and Viswanath, "The composition theorem for differential privacy", ICML 2015,
Section 2, privacy regions), so its hockey-stick curve lies below RR's and PLD
composition of this event is sound for any ``epsilon``-DP mechanism, and exact for one
``epsilon``-DP step (``delta(epsilon) = 0``).
"""

from __future__ import annotations

import abc
import math

import torch
from dp_accounting import dp_event
from torch import Tensor

from gnnprivacy._validation import check_pure_epsilon
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.errors import InvalidParameterError


def pure_epsilon_event(epsilon: float) -> dp_event.RandomizedResponseDpEvent:
    """The ``DpEvent`` of a pure ``epsilon``-DP mechanism: binary randomized response at ``epsilon``.

    Args:
        epsilon: ``0 < epsilon <= MAX_PURE_EPSILON`` (700).

    Returns:
        ``RandomizedResponseDpEvent(noise_parameter=2 / (e^epsilon + 1), num_buckets=2)``;
        keeping the input with probability ``1 - p + p/2 = e^eps / (1 + e^eps)``.
    """
    eps = check_pure_epsilon("epsilon", epsilon)
    tail = math.exp(-eps)                     # 2 / (e^eps + 1) without overflowing e^eps
    return dp_event.RandomizedResponseDpEvent(noise_parameter=2.0 * tail / (1.0 + tail),
                                              num_buckets=2)


def check_unit(unit: object) -> PrivacyUnit:
    """A `PrivacyUnit` (or its string value), else `InvalidParameterError`."""
    try:
        return PrivacyUnit(unit)
    except ValueError:
        raise InvalidParameterError("unit", f"one of {[u.value for u in PrivacyUnit]}", unit) from None


def check_relation(relation: object) -> NeighboringRelation:
    """A `NeighboringRelation` (or its string value), else `InvalidParameterError`."""
    try:
        return NeighboringRelation(relation)
    except ValueError:
        raise InvalidParameterError(
            "relation", f"one of {[r.value for r in NeighboringRelation]}", relation) from None


def check_flag(name: str, value: object) -> bool:
    """A real ``bool`` (no truthy integers or strings)."""
    if not isinstance(value, bool):
        raise InvalidParameterError(name, "a bool", value)
    return value


def check_float_tensor(x: object, name: str = "x") -> Tensor:
    """A floating-point tensor with finite entries, else `InvalidParameterError`."""
    if not isinstance(x, Tensor) or not torch.is_floating_point(x):
        raise InvalidParameterError(name, "a floating-point torch.Tensor",
                                    x.dtype if isinstance(x, Tensor) else type(x))
    if not torch.isfinite(x).all():
        raise InvalidParameterError(name, "finite entries", "a tensor with inf or nan")
    return x


class Mechanism(abc.ABC):
    """Base class: privacy metadata, the event and an informative ``repr``.

    Subclasses set ``unit``, ``relation``, ``sensitivity`` and ``secure_mode`` in
    ``__init__``, implement `__call__` and `event`, and list the constructor
    arguments shown by ``repr`` in ``_repr_fields``.
    """

    unit: PrivacyUnit
    relation: NeighboringRelation
    sensitivity: float
    secure_mode: bool
    _repr_fields: tuple[str, ...] = ()

    @property
    @abc.abstractmethod
    def event(self) -> dp_event.DpEvent:
        """The ``DpEvent`` one call of this mechanism emits."""

    @abc.abstractmethod
    def __call__(self, x, *, generator=None):
        """Apply the mechanism to ``x`` (a tensor) with randomness from ``generator``."""

    def __repr__(self) -> str:
        parts = []
        for name in self._repr_fields:
            value = getattr(self, name)
            if isinstance(value, (PrivacyUnit, NeighboringRelation)):
                value = value.value
            parts.append(f"{name}={value!r}" if not isinstance(value, float) else f"{name}={value:.6g}")
        return f"{type(self).__name__}({', '.join(parts)})"


__all__ = ["Mechanism", "check_flag", "check_float_tensor", "check_relation", "check_unit",
           "pure_epsilon_event"]
