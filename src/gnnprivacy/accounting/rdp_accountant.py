"""Renyi-DP accountant: the cross-check, and the paper-literal HeterPoisson analysis.

Per-order RDP summed over events and converted with Balle et al. 2020 (default, 000
Theorem 1) or Mironov 2017 (002's conversion).
"""

from __future__ import annotations

import math

import attr
import numpy as np

from gnnprivacy._validation import check_choice, check_probability
from gnnprivacy.accounting.base import Accountant, cached
from gnnprivacy.accounting.events import HeterPoissonDpEvent
from gnnprivacy.accounting.rdp_builders import (CONVERSIONS, default_orders, event_rdp,
                                                rdp_support_error, rdp_to_delta, rdp_to_epsilon)
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.errors import InvalidParameterError


class RdpAccountant(Accountant):
    """Renyi-DP accountant (the cross-check, and the paper-literal HeterPoisson analysis).

    *Privacy*: an accountant emits nothing; it composes the events it is given and refuses
    (`PrivacyUnitMismatchError`) a scoped event of another unit or relation.

    HeterPoisson events are accounted with Theorem 2's RDP (000 §4.2: per order, the max
    over the event's out-degrees of both divergence directions, then summed over steps)
    whatever their ``mode``; use ``orders=heterpoisson_paper_orders()`` to reproduce §4.7.

    Args:
        unit: privacy unit.
        relation: neighbouring relation.
        orders: Renyi orders (> 1); default `default_orders`.
        conversion: ``"balle"`` (default, tighter) or ``"mironov"`` RDP-to-DP conversion.

    Example:
        >>> from gnnprivacy.accounting import RdpAccountant, dpsgd_event
        >>> acc = RdpAccountant(unit="node", relation="add_or_remove")
        >>> _ = acc.compose(dpsgd_event(sample_rate=0.01, noise_multiplier=1.1), count=1000)
        >>> 1.5 < acc.get_epsilon(1e-5) < 2.5         # RDP is looser than PLD (1.52)
        True
    """

    kind = "rdp"

    def __init__(self, *, unit=PrivacyUnit.NODE, relation=NeighboringRelation.ADD_OR_REMOVE,
                 orders=None, conversion: str = "balle"):
        orders = default_orders() if orders is None else np.asarray(orders, dtype=float)
        if orders.ndim != 1 or orders.size == 0 or np.any(orders <= 1):
            raise InvalidParameterError("orders", "a non-empty 1-D sequence of reals > 1", orders)
        self._orders = orders
        self._conversion = check_choice("conversion", conversion, CONVERSIONS)
        self._leaf_rdps: dict = {}
        self._support: dict = {}
        super().__init__(unit=unit, relation=relation)

    @property
    def orders(self) -> np.ndarray:
        return self._orders.copy()

    def options(self) -> dict:
        return {"orders": f"{len(self._orders)} in [{self._orders.min():g}, "
                          f"{self._orders.max():g}]", "conversion": self._conversion}

    def _support_error(self, leaf):
        key = repr(leaf)
        if key not in self._support:
            self._support[key] = rdp_support_error(leaf, self._relation, self._orders)
        return self._support[key]

    def _invalidate(self) -> None:
        self._total = None

    def _leaf_rdp(self, key: str, leaf) -> np.ndarray:
        if key not in self._leaf_rdps:
            self._leaf_rdps[key] = cached(
                ("rdp", key, self._relation, self._orders.tobytes()),
                lambda: event_rdp(leaf, relation=self._relation, orders=self._orders))
        return self._leaf_rdps[key]

    def rdp(self) -> np.ndarray:
        """Total RDP at each order of everything composed so far."""
        if self._non_private:
            return np.full(len(self._orders), np.inf)
        if self._total is None:
            total = np.zeros(len(self._orders))
            for key, (leaf, n) in self._leaves.items():
                total = total + n * self._leaf_rdp(key, leaf)
            self._total = total
        return self._total.copy()

    def _first_branch_epsilon(self, delta):
        """Epsilon with HeterPoisson events at their largest out-degree only (a lower bound)."""
        multi = [leaf for leaf, _ in self._leaves.values()
                 if isinstance(leaf, HeterPoissonDpEvent) and len(leaf.degrees) > 1]
        if not multi or self._non_private or check_probability("delta", delta) == 0:
            return super()._first_branch_epsilon(delta)
        total = np.zeros(len(self._orders))
        for key, (leaf, n) in self._leaves.items():
            if isinstance(leaf, HeterPoissonDpEvent) and len(leaf.degrees) > 1:
                top = attr.evolve(leaf, degrees=(leaf.max_degree,))
                total = total + n * self._leaf_rdp(repr(top), top)
            else:
                total = total + n * self._leaf_rdp(key, leaf)
        return rdp_to_epsilon(self._orders, total, delta, self._conversion)[0], False

    def get_epsilon_and_order(self, delta: float) -> tuple[float, float]:
        """Epsilon and the optimal Renyi order."""
        eps = self.get_epsilon(delta)
        if not self._leaves or self._non_private or delta == 0:
            return eps, math.nan
        return rdp_to_epsilon(self._orders, self.rdp(), delta, self._conversion)

    def _epsilon(self, delta, stop_above):
        return rdp_to_epsilon(self._orders, self.rdp(), delta, self._conversion)[0]

    def _delta(self, epsilon):
        return rdp_to_delta(self._orders, self.rdp(), epsilon, self._conversion)[0]
