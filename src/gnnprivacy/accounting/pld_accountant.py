"""Privacy-loss-distribution accountant (the default).

dp_accounting PLDs (pessimistic connect-the-dots), composed with FFTs. HeterPoisson events
are evaluated, for each out-degree D of the event's degree set, as the PLD of the
Theorem-2 mixture composed with everything else, and the maximum is taken *after*
composition (000 §4.7, §9 A3).
"""

from __future__ import annotations

import math

from gnnprivacy._validation import check_positive, check_probability
from gnnprivacy.accounting.base import Accountant, cached
from gnnprivacy.accounting.events import HeterPoissonDpEvent
from gnnprivacy.accounting.heterpoisson import DEFAULT_TAIL_MASS
from gnnprivacy.accounting.pld_builders import event_pld, pld_support_error
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit

#: Default PLD grid step; see ``benchmarks/bench_accounting.py`` for the speed/accuracy trade-off.
DEFAULT_VALUE_DISCRETIZATION_INTERVAL = 1e-3


class PldAccountant(Accountant):
    """Privacy-loss-distribution accountant (the default).

    Args:
        unit: privacy unit.
        relation: neighbouring relation.
        value_discretization_interval: PLD grid step (smaller: tighter and slower).
        heterpoisson_tail_mass: per-step probability of the largest HeterPoisson shifts
            that may be dropped and charged to delta.
    """

    kind = "pld"

    def __init__(self, *, unit=PrivacyUnit.NODE, relation=NeighboringRelation.ADD_OR_REMOVE,
                 value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
                 heterpoisson_tail_mass: float = DEFAULT_TAIL_MASS):
        self._vdi = check_positive("value_discretization_interval", value_discretization_interval)
        self._tail_mass = check_probability("heterpoisson_tail_mass", heterpoisson_tail_mass,
                                            allow_one=False)
        self._leaf_plds: dict = {}
        super().__init__(unit=unit, relation=relation)

    def options(self) -> dict:
        return {"value_discretization_interval": self._vdi,
                "heterpoisson_tail_mass": self._tail_mass}

    def _support_error(self, leaf):
        return pld_support_error(leaf, self._relation)

    def _invalidate(self) -> None:
        self._base = None
        self._branches: dict = {}

    def _leaf_pld(self, key: str, leaf, degree):
        cache_key = (key, degree)
        if cache_key not in self._leaf_plds:
            self._leaf_plds[cache_key] = cached(
                ("pld", key, self._relation, self._vdi, degree, self._tail_mass),
                lambda: event_pld(leaf, relation=self._relation,
                                  value_discretization_interval=self._vdi, degree=degree,
                                  tail_mass=self._tail_mass))
        return self._leaf_plds[cache_key]

    def _degree_keys(self) -> list:
        degrees = {d for leaf, _ in self._leaves.values()
                   if isinstance(leaf, HeterPoissonDpEvent) for d in leaf.degrees}
        return sorted(degrees, reverse=True) if degrees else [None]

    def _base_pld(self):
        if self._base is None:
            base = None
            for key, (leaf, n) in self._leaves.items():
                if not isinstance(leaf, HeterPoissonDpEvent):
                    pld = self._leaf_pld(key, leaf, None)[0].self_compose(n)
                    base = pld if base is None else base.compose(pld)
            self._base = base
        return self._base

    def _branch(self, degree):
        """(composed PLD, dropped mass charged to delta, epsilon shift) for out-degree D."""
        if degree not in self._branches:
            pld, dropped, eps_shift = self._base_pld(), 0.0, 0.0
            for key, (leaf, n) in self._leaves.items():
                if isinstance(leaf, HeterPoissonDpEvent):
                    leaf_pld, tau = self._leaf_pld(key, leaf, min(degree, leaf.max_degree))
                    composed = leaf_pld.self_compose(n)
                    pld = composed if pld is None else pld.compose(composed)
                    dropped += n * tau
                    eps_shift += -n * math.log1p(-tau)
            self._branches[degree] = (pld, dropped, eps_shift)
        return self._branches[degree]

    def _first_branch_epsilon(self, delta):
        """Epsilon of the largest out-degree only: a lower bound on the max over degrees."""
        exact = len(self._degree_keys()) == 1
        return self._epsilon_checked(delta, stop_above=None if exact else -math.inf), exact

    def _epsilon(self, delta, stop_above):
        worst = 0.0
        for degree in self._degree_keys():
            pld, dropped, eps_shift = self._branch(degree)
            eps = math.inf if dropped >= delta else (
                pld.get_epsilon_for_delta(delta - dropped) + eps_shift)
            worst = max(worst, eps)
            if stop_above is not None and worst > stop_above:
                break
        return worst

    def _delta(self, epsilon):
        worst = 0.0
        for degree in self._degree_keys():
            pld, dropped, eps_shift = self._branch(degree)
            worst = max(worst, float(pld.get_delta_for_epsilon(epsilon - eps_shift)) + dropped)
        return worst
