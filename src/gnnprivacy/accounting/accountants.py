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

    *Privacy*: an accountant emits nothing; it composes the events it is given (refusing a
    scoped event of another unit or relation) and answers ``get_epsilon(delta)``.

    Extra keyword ``options`` go to the accountant (``value_discretization_interval`` for
    PLD; ``orders``/``conversion`` for RDP).

    Example:
        >>> from gnnprivacy.accounting import dpsgd_event, make_accountant
        >>> acc = make_accountant("pld", unit="node", relation="add_or_remove")
        >>> _ = acc.compose(dpsgd_event(sample_rate=0.01, noise_multiplier=1.1), count=1000)
        >>> round(acc.get_epsilon(1e-5), 2)
        1.52
    """
    kind = check_choice("kind", kind, ACCOUNTANT_KINDS)
    cls = PldAccountant if kind == "pld" else RdpAccountant
    return cls(unit=unit, relation=relation, **options)
