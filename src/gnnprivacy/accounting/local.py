"""Budgets of pure-epsilon local (LDP) mechanisms: composition and GRR-FS (004 §9).

GRR-FS (004 §3.2): each user samples m of d features without replacement, reports GRR
with budget ``eps_x`` on each sampled feature and a uniform value on the others.

* ``mode="sound"`` (default): the mechanism is exactly ``(m eps_x)``-LDP (004 §9.3).
  Two inputs may differ in every feature; for the output equal to one of them every
  sampled set gives the likelihood ratio ``(p/q)^m = e^{m eps_x}``, so no amplification
  by feature sampling applies.
* ``mode="paper"``: 004 Theorem 1, ``ln(1 + (m/d)(e^{m eps_x} - 1))``: central-DP
  amplification by sampling (Li et al. 2012) applied to LDP, which is unsound.
* ``mode="attribute"``: ``ln(1 + (m/d)(e^{eps_x} - 1))``, valid only for inputs differing
  in a single feature (homogeneous domain sizes).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from gnnprivacy._validation import check_choice, check_int, check_real
from gnnprivacy.accounting.events import EpsilonDeltaDpEvent, ScopedDpEvent
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit

GRR_FS_MODES = ("sound", "paper", "attribute")


def compose_pure_epsilon(epsilons: Iterable[float]) -> float:
    """Basic composition of pure-epsilon mechanisms: the exact sum (tight for delta = 0)."""
    return float(sum(check_real("epsilons", e, low=0.0) for e in epsilons))


def _check_grr_fs(epsilon, d, m, mode):
    eps = check_real("epsilon", epsilon, low=0.0)
    d = check_int("d", d, low=1)
    m = check_int("m", m, low=0, high=d)
    return eps, d, m, check_choice("mode", mode, GRR_FS_MODES)


def grr_fs_epsilon(*, epsilon: float, d: int, m: int, mode: str = "sound") -> float:
    """Per-user feature budget epsilon_X of GRR-FS with per-feature budget ``epsilon``.

    Args:
        epsilon: eps_x, the GRR budget of each sampled feature.
        d: number of features.
        m: number of sampled features (0 <= m <= d).
        mode: ``"sound"`` (m eps_x, default), ``"paper"`` or ``"attribute"`` (module doc).
    """
    eps, d, m, mode = _check_grr_fs(epsilon, d, m, mode)
    if m == 0:
        return 0.0
    if mode == "sound":
        return m * eps
    exponent = m * eps if mode == "paper" else eps
    return math.log1p((m / d) * math.expm1(exponent))


def grr_fs_feature_epsilon(*, total_epsilon: float, d: int, m: int, mode: str = "sound") -> float:
    """Inverse of `grr_fs_epsilon`: the eps_x that gives ``total_epsilon``."""
    total, d, m, mode = _check_grr_fs(total_epsilon, d, m, mode)
    check_int("m", m, low=1, high=d)
    if mode == "sound":
        return total / m
    inner = math.log1p((d / m) * math.expm1(total))
    return inner / m if mode == "paper" else inner


def grr_fs_event(*, epsilon: float, d: int, m: int, mode: str = "sound") -> ScopedDpEvent:
    """The FEATURE-unit event of one GRR-FS report: ``EpsilonDeltaDpEvent(eps_X, 0)``."""
    eps_x = grr_fs_epsilon(epsilon=epsilon, d=d, m=m, mode=mode)
    return ScopedDpEvent(EpsilonDeltaDpEvent(eps_x, 0.0), PrivacyUnit.FEATURE,
                         NeighboringRelation.REPLACE)
