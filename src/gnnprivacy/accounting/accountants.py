"""The accountant factory: ``make_accountant("pld" | "rdp", unit=..., relation=...)``.

* `PldAccountant` (default, tight);
* `RdpAccountant` (cross-check, paper mode).
"""

from __future__ import annotations

from gnnprivacy._validation import check_choice
from gnnprivacy.accounting.base import Accountant, UnsupportedEventError
from gnnprivacy.accounting.pld_accountant import (DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
                                                  PldAccountant)
from gnnprivacy.accounting.rdp_accountant import RdpAccountant
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit

ACCOUNTANT_KINDS = ("pld", "rdp")

__all__ = ["ACCOUNTANT_KINDS", "Accountant", "DEFAULT_VALUE_DISCRETIZATION_INTERVAL",
           "PldAccountant", "RdpAccountant", "UnsupportedEventError", "make_accountant"]


def make_accountant(kind: str = "pld", *, unit=PrivacyUnit.NODE,
                    relation=NeighboringRelation.ADD_OR_REMOVE, **options) -> Accountant:
    """Create a ``"pld"`` (default) or ``"rdp"`` accountant for ``unit`` and ``relation``.

    Extra keyword ``options`` go to the accountant (``value_discretization_interval`` for
    PLD; ``orders``/``conversion`` for RDP).
    """
    kind = check_choice("kind", kind, ACCOUNTANT_KINDS)
    cls = PldAccountant if kind == "pld" else RdpAccountant
    return cls(unit=unit, relation=relation, **options)
