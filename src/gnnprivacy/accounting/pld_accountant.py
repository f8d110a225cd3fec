"""Privacy-loss-distribution accountant (the default).

dp_accounting PLDs (pessimistic connect-the-dots), composed with FFTs. HeterPoisson events
are evaluated, for each out-degree D of the event's degree set, as the PLD of the
Theorem-2 mixture composed with everything else, and the maximum is taken *after*
composition (000 §4.7, §9 A3).
"""

from __future__ import annotations

import math

import numpy as np
from dp_accounting import dp_event

from gnnprivacy._validation import check_positive, check_probability
from gnnprivacy.accounting import disk_cache, pld_fast, prefetch
from gnnprivacy.accounting.base import Accountant, cached
from gnnprivacy.accounting.events import DpGnnDpEvent, EdgeSubgraphDpEvent, HeterPoissonDpEvent
from gnnprivacy.accounting.heterpoisson import DEFAULT_TAIL_MASS, truncated_shift_distribution
from gnnprivacy.accounting.pld_builders import event_pld, pld_support_error
from gnnprivacy.accounting.pld_mixtures import MAX_GRID_POINTS, grid_points
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.errors import InvalidParameterError

#: Default PLD grid step; see ``benchmarks/bench_accounting.py`` for the speed/accuracy trade-off.
DEFAULT_VALUE_DISCRETIZATION_INTERVAL = 1e-3
#: the degree screen's grid is this many times coarser than the accountant's
SCREEN_FACTOR = 10.0
#: the coarsest PLD grid step (a loss step this large already says "almost no noise";
#: dp_accounting's connect-the-dots computes e^step - 1, which overflows past ~709)
MAX_DISCRETIZATION_INTERVAL = 100.0


class PldAccountant(Accountant):
    """Privacy-loss-distribution accountant (the default).

    Worst case over out-degrees (HeterPoisson): the maximum over the event's degree set is
    taken after composition (000 §4.7), largest degree first. With ``degree_shortcut``
    (default) a smaller degree is evaluated on the accountant's grid only when its
    epsilon on a grid ``SCREEN_FACTOR`` times coarser exceeds the running maximum: every
    pessimistic PLD (any grid step) upper-bounds the true privacy curve, so a degree whose
    coarse epsilon is below the maximum cannot raise the true worst case. The result is a
    sound bound that equals the full cover's (``degree_shortcut=False``) unless a
    discretisation artefact makes a fine value exceed its own coarse bound (the tests
    check that both agree). The one-step PLDs of HeterPoisson numerically do *not*
    dominate each other across degrees, so no single degree can be assumed the worst.

    Args:
        unit: privacy unit.
        relation: neighbouring relation.
        value_discretization_interval: PLD grid step (smaller: tighter and slower).
        heterpoisson_tail_mass: per-step probability of the largest HeterPoisson shifts
            that may be dropped and charged to delta.
        degree_shortcut: evaluate only the largest degree where it is verified to dominate.
        disk_cache: read/write one-step PLDs and epsilons in the on-disk cache
            (`gnnprivacy.accounting.disk_cache`).
        reuse_background: take the result of a background computation of the same
            composition (`gnnprivacy.accounting.prefetch`); ``False`` with
            ``disk_cache=False`` computes everything anew (`gnnprivacy.accounting.verify`).

    Example:
        >>> from gnnprivacy.accounting import PldAccountant, heterpoisson_event
        >>> acc = PldAccountant(unit="node", relation="add_or_remove")
        >>> event = heterpoisson_event(q_b=0.3, M=1.0, noise_multiplier=8.0, max_out_degree=100)
        >>> _ = acc.compose(event, count=30)
        >>> 0 < acc.get_epsilon(1e-5) < 10
        True
    """

    kind = "pld"

    def __init__(self, *, unit=PrivacyUnit.NODE, relation=NeighboringRelation.ADD_OR_REMOVE,
                 value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
                 heterpoisson_tail_mass: float = DEFAULT_TAIL_MASS,
                 degree_shortcut: bool = True, disk_cache: bool = True,
                 reuse_background: bool = True):
        self._vdi = check_positive("value_discretization_interval", value_discretization_interval)
        self._tail_mass = check_probability("heterpoisson_tail_mass", heterpoisson_tail_mass,
                                            allow_one=False)
        self._shortcut = bool(degree_shortcut)
        self._disk = bool(disk_cache)
        self._background = bool(reuse_background)
        super().__init__(unit=unit, relation=relation)

    def options(self) -> dict:
        out = {"value_discretization_interval": self._vdi,
               "heterpoisson_tail_mass": self._tail_mass}
        if self._leaves and self._step() != self._vdi:
            out["effective_value_discretization_interval"] = self._step()
        return out

    def _support_error(self, leaf):
        return pld_support_error(leaf, self._relation)

    def _invalidate(self) -> None:
        self._base = None
        self._branches: dict = {}
        self._step_value = None
        self._leaf_plds = {}

    def _step(self) -> float:
        """The grid step actually used: ``value_discretization_interval``, doubled until
        every composed leaf's PLD grid fits in ``MAX_GRID_POINTS`` (large epsilons mean
        little noise, and the grid grows with shift^2 / noise^2). A coarser pessimistic
        PLD is still an upper bound, so this only trades tightness for time."""
        if self._step_value is None:
            step = self._vdi
            for leaf, _ in self._leaves.values():
                ratio = _shift_noise_ratio(leaf, self._tail_mass)
                if ratio is None:
                    continue
                while grid_points(1.0, ratio, step) > MAX_GRID_POINTS:
                    step *= 2.0
                    if step > MAX_DISCRETIZATION_INTERVAL:
                        raise InvalidParameterError(
                            "noise_multiplier", "large enough for a PLD grid step of at most "
                            f"{MAX_DISCRETIZATION_INTERVAL:g} (shift / noise <= "
                            f"{_max_ratio():.3g})", f"shift / noise {ratio:.3g}")
            self._step_value = step
        return self._step_value

    @property
    def effective_discretization_interval(self) -> float:
        """The grid step of the last evaluation (see `_step`)."""
        return self._step()

    def _leaf_pld(self, key: str, leaf, degree):
        cache_key = (key, degree)
        if cache_key not in self._leaf_plds:
            self._leaf_plds[cache_key] = cached(
                ("pld", key, self._relation, self._step(), degree, self._tail_mass),
                lambda: self._build_leaf_pld(key, leaf, degree))
        return self._leaf_plds[cache_key]

    def _build_leaf_pld(self, key: str, leaf, degree):
        """One-step PLD (and dropped mass), through the disk cache for costly leaves."""
        costly = isinstance(leaf, (HeterPoissonDpEvent, DpGnnDpEvent,
                                   dp_event.MixtureOfGaussiansDpEvent))
        disk_key = None
        if self._disk and costly:
            disk_key = disk_cache.key_of("pld", key, self._relation.value, self._step(), degree,
                                         self._tail_mass)
            arrays = disk_cache.load_arrays(disk_key)
            if arrays is not None:
                try:
                    return disk_cache.pld_from_arrays(arrays), float(arrays["dropped"][0])
                except (KeyError, ValueError, TypeError):
                    pass
        pld, dropped = event_pld(leaf, relation=self._relation,
                                 value_discretization_interval=self._step(), degree=degree,
                                 tail_mass=self._tail_mass)
        if disk_key is not None:
            arrays = disk_cache.pld_to_arrays(pld)
            if arrays is not None:
                disk_cache.save_arrays(disk_key, dropped=np.array([dropped]), **arrays)
        return pld, dropped

    def _all_degrees(self) -> list:
        degrees = {d for leaf, _ in self._leaves.values()
                   if isinstance(leaf, HeterPoissonDpEvent) for d in leaf.degrees}
        return sorted(degrees, reverse=True) if degrees else [None]

    def _degree_keys(self) -> list:
        return self._all_degrees()

    def _coarse_twin(self) -> "PldAccountant":
        """The same composition on a grid ``SCREEN_FACTOR`` times coarser (upper bounds)."""
        twin = PldAccountant(unit=self._unit, relation=self._relation,
                             value_discretization_interval=coarser(self._vdi, SCREEN_FACTOR),
                             heterpoisson_tail_mass=self._tail_mass, degree_shortcut=False,
                             disk_cache=self._disk)
        twin._leaves = self._leaves                                     # noqa: SLF001
        return twin

    def _base_pld(self):
        if self._base is None:
            base = None
            for key, (leaf, n) in self._leaves.items():
                if not isinstance(leaf, HeterPoissonDpEvent):
                    pld = pld_fast.self_compose(self._leaf_pld(key, leaf, None)[0], n)
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
                    composed = pld_fast.self_compose(leaf_pld, n)
                    pld = composed if pld is None else pld.compose(composed)
                    dropped += n * tau
                    eps_shift += -n * math.log1p(-tau)
            self._branches[degree] = (pld, dropped, eps_shift)
        return self._branches[degree]

    def _branch_epsilon(self, degree, delta) -> float:
        pld, dropped, eps_shift = self._branch(degree)
        if dropped >= delta:
            return math.inf
        return pld_fast.epsilon_for_delta(pld, delta - dropped) + eps_shift

    def _first_branch_epsilon(self, delta):
        """Epsilon of the largest out-degree only: a lower bound on the max over degrees."""
        delta = check_probability("delta", delta)
        degrees = self._all_degrees()
        if len(degrees) == 1 or self._non_private or delta == 0 or not self._leaves:
            return self.get_epsilon(delta), True
        pure = self._pure_epsilon_sum()
        eps = self._branch_epsilon(degrees[0], delta)
        return (eps if pure is None else min(eps, pure)), False

    def _ledger_key(self, delta) -> str:
        leaves = sorted((key, n) for key, (_, n) in self._leaves.items())
        return disk_cache.key_of("epsilon", leaves, float(delta), self._relation.value,
                                 self._step(), self._tail_mass, self._shortcut)

    def prefetch_epsilon(self, delta: float):
        """Start ``get_epsilon(delta)`` of what is composed now in a background thread
        (`prefetch`); an accountant that later holds the same
        composition and asks for the same delta waits for that result. Returns the
        `concurrent.futures.Future`."""
        delta = check_probability("delta", delta)
        return prefetch.submit(self._ledger_key(delta), lambda: self.get_epsilon(delta))

    def _epsilon(self, delta, stop_above):
        key = self._ledger_key(delta)
        pending = prefetch.lookup(key) if self._background else None
        if pending is not None and not prefetch.in_background():
            try:
                return pending.result()
            except Exception:                   # noqa: BLE001 - compute it here instead
                pass
        disk_key = key if self._disk else None
        if disk_key:
            hit = disk_cache.load_json(disk_key)
            if hit is not None:
                return float(hit["epsilon"])
        worst, complete = 0.0, True
        degrees = self._degree_keys()
        twin = self._coarse_twin() if self._shortcut and len(degrees) > 1 else None
        for i, degree in enumerate(degrees):
            if twin is not None and i > 0 and twin._branch_epsilon(degree, delta) <= worst:
                continue        # a sound upper bound on this degree is already below the max
            worst = max(worst, self._branch_epsilon(degree, delta))
            if stop_above is not None and worst > stop_above:
                complete = False
                break
        if disk_key and complete and math.isfinite(worst):
            disk_cache.save_json(disk_key, {"epsilon": worst})
        return worst

    def _delta(self, epsilon):
        worst = 0.0
        for degree in self._degree_keys():
            pld, dropped, eps_shift = self._branch(degree)
            worst = max(worst, float(pld.get_delta_for_epsilon(epsilon - eps_shift)) + dropped)
        return worst




def coarser(interval: float, factor: float) -> float:
    """A grid step ``factor`` times coarser, but not past `MAX_DISCRETIZATION_INTERVAL`
    (unless ``interval`` already is)."""
    return min(factor * interval, max(interval, MAX_DISCRETIZATION_INTERVAL))


def _max_ratio() -> float:
    """The largest shift / noise whose grid fits at `MAX_DISCRETIZATION_INTERVAL`."""
    # grid_points(1, r, step) = (r^2 / 2 + 11 r) 2 / step = MAX_GRID_POINTS, solved for r
    c = MAX_GRID_POINTS * MAX_DISCRETIZATION_INTERVAL / 2.0
    return -11.0 + math.sqrt(121.0 + 2.0 * c)


def _shift_noise_ratio(leaf, tail_mass: float):
    """Largest shift over noise std of a leaf's PLD (``None``: not a Gaussian family)."""
    if isinstance(leaf, HeterPoissonDpEvent):
        shifts = truncated_shift_distribution(leaf.sampling_probability,
                                              leaf.neighbor_multiplier, leaf.max_degree,
                                              leaf.overlap_removal, tail_mass)[0]
        return float(shifts.max()) / leaf.noise_multiplier
    if isinstance(leaf, dp_event.MixtureOfGaussiansDpEvent):
        return float(max(leaf.sensitivities)) / leaf.standard_deviation
    if isinstance(leaf, dp_event.GaussianDpEvent):
        return 1.0 / leaf.noise_multiplier
    if isinstance(leaf, EdgeSubgraphDpEvent):          # shift 2 at noise z / sqrt(m)
        return 2.0 * math.sqrt(leaf.group) / leaf.noise_multiplier
    if isinstance(leaf, dp_event.PoissonSampledDpEvent) and isinstance(
            leaf.event, dp_event.GaussianDpEvent):
        return 1.0 / leaf.event.noise_multiplier
    return None
