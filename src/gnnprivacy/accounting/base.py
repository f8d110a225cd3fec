"""The accountant interface shared by the PLD and RDP accountants.

Both accountants hold a privacy unit and a neighbouring relation, refuse events that
declare another (`PrivacyUnitMismatchError`), keep a printable
and savable `Ledger`, and compute lazily: composing
is cheap bookkeeping (counts per distinct event), the PLD/RDP work happens in
``get_epsilon`` / ``get_delta`` and is cached until the next ``compose``. Composing an
event n times is therefore *identical* to composing it once with ``count=n``.

With ``delta = 0`` both return the exact sum of epsilons when every composed event is
pure-DP (EpsilonDelta(eps, 0), Laplace, randomized response); for delta > 0 they return
the smaller of that sum and their own (PLD: optimal, Kairouz et al. 2015) composition.
"""

from __future__ import annotations

import abc
import json
import math
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Optional, Union

import numpy as np
from dp_accounting import dp_event
from dp_accounting import privacy_accountant as dp_privacy_accountant

from gnnprivacy._validation import check_choice, check_probability, check_real
from gnnprivacy.accounting.events import declared_scope, describe_event
from gnnprivacy.accounting.leaves import flatten_event, is_non_private, pure_epsilon
from gnnprivacy.accounting.ledger import Ledger
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.errors import GnnPrivacyError, InvalidParameterError, PrivacyUnitMismatchError

class UnsupportedEventError(GnnPrivacyError, dp_privacy_accountant.UnsupportedEventError,
                            ValueError):
    """The accountant cannot account this event (under its neighbouring relation)."""


def _as_enum(enum_cls, name: str, value):
    if isinstance(value, enum_cls):
        return value
    choice = check_choice(name, value, [member.value for member in enum_cls])
    return enum_cls(choice)


class Accountant(abc.ABC):
    """Common interface: ``compose``, ``get_epsilon``, ``get_delta``, ``ledger``, scope.

    Args:
        unit: the privacy unit of every composed event.
        relation: the neighbouring relation of the guarantee.
    """

    kind = ""

    def __init__(self, *, unit: Union[PrivacyUnit, str] = PrivacyUnit.NODE,
                 relation: Union[NeighboringRelation, str] = NeighboringRelation.ADD_OR_REMOVE):
        self._unit = _as_enum(PrivacyUnit, "unit", unit)
        self._relation = _as_enum(NeighboringRelation, "relation", relation)
        self._ledger = Ledger(self._unit, self._relation)
        self._leaves: dict[str, list] = {}
        self._non_private = False
        self._invalidate()

    @property
    def unit(self) -> PrivacyUnit:
        return self._unit

    @property
    def relation(self) -> NeighboringRelation:
        return self._relation

    @property
    def ledger(self) -> Ledger:
        return self._ledger

    def compose(self, event: dp_event.DpEvent, count: int = 1) -> "Accountant":
        """Account ``count`` adaptive compositions of ``event``; returns ``self``.

        Raises:
            PrivacyUnitMismatchError: the event declares another unit or relation.
            UnsupportedEventError: this accountant cannot account the event.
        """
        if not isinstance(event, dp_event.DpEvent):
            raise InvalidParameterError("event", "a dp_accounting DpEvent", event)
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
            raise InvalidParameterError("count", "an integer >= 0", count)
        self._check_scope(event)
        leaves = list(flatten_event(event, int(count)))
        for leaf, _ in leaves:
            error = None if is_non_private(leaf) else self._support_error(leaf)
            if error is not None:
                raise UnsupportedEventError(f"{type(self).__name__} cannot compose "
                                            f"{describe_event(leaf)}: {error}")
        if count == 0:
            return self
        self._ledger.record(event, int(count))
        for leaf, n in leaves:
            if is_non_private(leaf):
                self._non_private = True
            else:
                self._leaves.setdefault(repr(leaf), [leaf, 0])[1] += n
        self._invalidate()
        return self

    def get_epsilon(self, delta: float) -> float:
        """Smallest epsilon such that everything composed is (epsilon, delta)-DP."""
        return self._epsilon_checked(delta, stop_above=None)

    def get_delta(self, epsilon: float) -> float:
        """Smallest delta such that everything composed is (epsilon, delta)-DP."""
        epsilon = check_real("epsilon", epsilon, low=0.0)
        if self._non_private:
            return 1.0
        pure = self._pure_epsilon_sum()
        if not self._leaves or (pure is not None and pure <= epsilon):
            return 0.0
        if math.isinf(epsilon):
            return 0.0
        return float(min(max(self._delta(epsilon), 0.0), 1.0))

    def _epsilon_checked(self, delta, stop_above: Optional[float]) -> float:
        delta = check_probability("delta", delta)
        if self._non_private:
            return math.inf
        if not self._leaves:
            return 0.0
        pure = self._pure_epsilon_sum()
        if pure is not None and (delta == 0 or pure == 0):
            return pure
        if delta == 0:
            return math.inf
        eps = float(self._epsilon(delta, stop_above))
        return eps if pure is None else min(eps, pure)

    def _first_branch_epsilon(self, delta: float) -> tuple[float, bool]:
        """A lower bound on ``get_epsilon(delta)`` that is cheap, and whether it is exact."""
        return self.get_epsilon(delta), True

    def _pure_epsilon_sum(self) -> Optional[float]:
        total = 0.0
        for leaf, n in self._leaves.values():
            eps = pure_epsilon(leaf)
            if eps is None:
                return None
            total += n * eps
        return total

    def _check_scope(self, event: dp_event.DpEvent) -> None:
        for unit, relation in declared_scope(event):
            if unit is not None and unit is not self._unit:
                raise PrivacyUnitMismatchError(
                    f"event {describe_event(event)} protects unit {unit.value!r} but this "
                    f"accountant accounts unit {self._unit.value!r}")
            if relation is not None and relation is not self._relation:
                raise PrivacyUnitMismatchError(
                    f"event {describe_event(event)} assumes relation {relation.value!r} but "
                    f"this accountant uses {self._relation.value!r}")

    def options(self) -> dict:
        """The accountant's numerical options (JSON-able)."""
        return {}

    def summary(self, delta: Optional[float] = None) -> str:
        """The ledger listing, plus epsilon at ``delta`` if given."""
        text = f"{type(self).__name__} {self.options()}\n{self._ledger.summary()}"
        if delta is not None:
            text += f"\nepsilon = {self.get_epsilon(delta):.6g} at delta = {delta:.3g}"
        return text

    def to_dict(self, delta: Optional[float] = None) -> dict:
        """JSON-able record: kind, options, ledger, and (epsilon, delta) if ``delta`` given."""
        out = {"accountant": self.kind, "options": self.options(), "ledger": self._ledger.to_dict()}
        if delta is not None:
            eps = self.get_epsilon(delta)
            out.update(epsilon=eps if math.isfinite(eps) else "inf", delta=delta)
        return out

    def save(self, path: Union[str, Path], delta: Optional[float] = None, *, force: bool = False) -> Path:
        """Write `to_dict` as JSON to ``path`` (atomically); an existing run record, model or
        checkpoint there is refused unless ``force`` (`gnnprivacy._files.check_output_file`)."""
        from gnnprivacy._files import write_output_file

        return write_output_file(path, json.dumps(self.to_dict(delta), indent=2) + "\n", force=force,
                                 what="accountant")

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        opts = "".join(f", {k}={v!r}" for k, v in self.options().items())
        return (f"{type(self).__name__}(unit={self._unit.value!r}, "
                f"relation={self._relation.value!r}{opts}, events={self._ledger.total_count})")

    @abc.abstractmethod
    def _support_error(self, leaf: dp_event.DpEvent) -> Optional[str]:
        """``None`` if ``leaf`` can be accounted, else the reason."""

    @abc.abstractmethod
    def _invalidate(self) -> None:
        """Drop cached results after a composition."""

    @abc.abstractmethod
    def _epsilon(self, delta: float, stop_above: Optional[float]) -> float:
        """Epsilon for delta in (0, 1]; may stop early once it exceeds ``stop_above``."""

    @abc.abstractmethod
    def _delta(self, epsilon: float) -> float:
        """Delta for a finite epsilon >= 0."""


_CACHE: "OrderedDict[tuple, object]" = OrderedDict()
_CACHE_SIZE = 64


_CACHE_LOCK = threading.Lock()


def cached(cache_key: tuple, compute):
    """Process-wide LRU of one-step PLDs / RDP curves (never mutated, safe to share; the
    bookkeeping is locked because a background epsilon (`
    prefetch`) may use it beside the caller's thread)."""
    with _CACHE_LOCK:
        if cache_key in _CACHE:
            _CACHE.move_to_end(cache_key)
            return _CACHE[cache_key]
    value = compute()
    with _CACHE_LOCK:
        _CACHE[cache_key] = value
        if len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return value
