"""Per-user privacy budget of node-level LDP training (RGNN, LPGNN, the naive baseline).

Spec 004 §9. Each user reports its features once and, if labelled, its label once; the server
only post-processes. So the per-user guarantee is the sequential composition of the two
pure-epsilon reports (the exact sum; tight for ``delta = 0``):

* ``eps_mode="sound"`` (default): features ``m * eps_x`` (GRR-FS is exactly ``m eps_x``-LDP,
  spec §9.3; the multi-bit encoder with total ``m * eps_x`` likewise), so a labelled user is
  ``(m eps_x + eps_y)``-LDP and an unlabelled one ``m eps_x``-LDP.
* ``eps_mode="paper"``: Theorem 1's ``eps_X = ln(1 + (m/d)(e^{m eps_x} - 1))`` in place of
  ``m eps_x``. Central-DP sampling amplification does not hold under LDP (two users' vectors
  may differ in every feature), so this figure is *not* a valid guarantee; it exists only to
  reproduce the paper's reported budgets (e.g. Cora, ``eps_x = 1``: 8.24 instead of 10).

The accountant (`ldp_accountant`) composes the events of the reports that were actually
made, under unit ``NODE`` (a user's features and label) and the ``REPLACE`` relation (LDP:
any input may replace any other); ``get_epsilon(0)`` is the composed pure epsilon.
"""

from __future__ import annotations

from gnnprivacy._validation import check_choice, check_int, check_positive
from gnnprivacy.accounting import (grr_fs_epsilon, make_accountant, pure_dp_event,
                                   randomized_response_event)
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit

EPS_MODES = ("sound", "paper")


def feature_budget(*, eps_x: float, m: int, d: int, mode: str = "sound") -> float:
    """Per-user feature budget: ``m eps_x`` (sound) or the paper's amplified ``eps_X``."""
    check_choice("eps_mode", mode, EPS_MODES)
    return grr_fs_epsilon(epsilon=check_positive("eps_x", eps_x), d=check_int("d", d, low=1),
                          m=check_int("m", m, low=1, high=d), mode=mode)


def user_budget(*, eps_x: float, m: int, d: int, eps_y: float, labeled: bool = True,
                mode: str = "sound") -> float:
    """Total per-user epsilon: feature budget plus ``eps_y`` for a labelled user."""
    eps_y = check_positive("eps_y", eps_y)
    return feature_budget(eps_x=eps_x, m=m, d=d, mode=mode) + (eps_y if labeled else 0.0)


def budget_summary(*, eps_x: float, m: int, d: int, eps_y: float, mode: str = "sound") -> dict:
    """Both accountings (always logged, spec §9.2) and the one selected by ``mode``."""
    out = {"eps_mode": check_choice("eps_mode", mode, EPS_MODES), "eps_x": eps_x, "m": m, "d": d,
           "eps_y": eps_y}
    for name in EPS_MODES:
        feat = feature_budget(eps_x=eps_x, m=m, d=d, mode=name)
        out[f"feature_epsilon_{name}"] = feat
        out[f"labeled_user_epsilon_{name}"] = feat + eps_y
        out[f"unlabeled_user_epsilon_{name}"] = feat
    out["epsilon"] = out[f"labeled_user_epsilon_{mode}"]
    return out


def ldp_accountant(*, eps_x: float, m: int, d: int, eps_y: float, num_classes: int,
                   mode: str = "sound", labeled: bool = True):
    """A PLD accountant holding one user's reports: features (pure eps) and label (GRR).

    Returns:
        ``gnnprivacy.accounting`` accountant with unit ``NODE`` and relation ``REPLACE``;
        ``get_epsilon(0.0)`` equals `user_budget`.
    """
    acc = make_accountant("pld", unit=PrivacyUnit.NODE, relation=NeighboringRelation.REPLACE)
    acc.compose(pure_dp_event(epsilon=feature_budget(eps_x=eps_x, m=m, d=d, mode=mode)))
    if labeled:
        c = check_int("num_classes", num_classes, low=2)
        acc.compose(randomized_response_event(epsilon=check_positive("eps_y", eps_y),
                                              num_buckets=c))
    return acc


__all__ = ["EPS_MODES", "budget_summary", "feature_budget", "ldp_accountant", "user_budget"]
