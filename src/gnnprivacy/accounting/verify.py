"""Check what was spent: rebuild a recorded ledger in a fresh accountant (issue 22 item 7).

A run's record holds its accountant's `to_dict`:
the kind, the numerical options, the unit, the relation and every composed event with its
count. `recompute_epsilon` rebuilds those events (`event_from_dict`), composes
them in a *new* accountant of the same kind and options that reads nothing from the on-disk
accounting cache nor from a result computed in the background, and returns its epsilon.
`check_spent` compares that figure with the target and with the figure the run
reported, and raises `SpentBudgetError` when the executed ledger costs more than
either (beyond the calibration tolerance). The runner calls it after every private run,
before a record is written, so a wrong cache entry, a trainer that composed the wrong
event, or a calibration that undershot cannot produce a finished record above its target.

Pure numpy/scipy on top of dp_accounting; never imports torch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Optional

import attr
from dp_accounting import dp_event

from gnnprivacy.accounting import events as _events
from gnnprivacy.errors import GnnPrivacyError, InvalidParameterError

__all__ = ["SPENT_RTOL", "SpentBudgetError", "accountant_from_dict", "check_spent",
           "event_from_dict", "ledger_rdp", "recompute_epsilon"]

#: relative tolerance of the comparison: the calibration's own (it stops within 0.1 % of the
#: smallest noise, one-sided) is far below; this only absorbs float noise of a recomputation
SPENT_RTOL = 1e-6


class SpentBudgetError(GnnPrivacyError, RuntimeError):
    """The executed ledger costs more than the target (or than the run reported)."""


def _event_classes() -> dict[str, type]:
    out = {}
    for module in (dp_event, _events):
        for name in dir(module):
            cls = getattr(module, name)
            if isinstance(cls, type) and issubclass(cls, dp_event.DpEvent):
                out[name] = cls
    return out


def _field_value(field, value):
    from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit

    if isinstance(value, Mapping) and ("type" in value or isinstance(value.get("event"), str)):
        return event_from_dict(value)
    if isinstance(value, list):     # ComposedDpEvent holds a list; sequences elsewhere tuples
        items = [_field_value(field, v) for v in value]
        return items if field.name == "events" else tuple(items)
    if field.name == "unit" and isinstance(value, str):
        return PrivacyUnit(value)
    if field.name == "relation" and isinstance(value, str):
        return NeighboringRelation(value)
    if isinstance(value, str) and value in ("inf", "-inf", "nan"):
        return float(value)
    return value


def event_from_dict(data: Mapping[str, Any]) -> dp_event.DpEvent:
    """Inverse of `gnnprivacy.accounting.events.event_to_dict` (lists become tuples,
    except a ``ComposedDpEvent``'s ``events``).

    Raises:
        InvalidParameterError: an unknown event class, or a description that does not name
            one (a record written before the ``"type"`` key whose class name was shadowed
            by a field called ``event``).
    """
    if not isinstance(data, Mapping):
        raise InvalidParameterError("event", "a mapping written by event_to_dict", data)
    name = data.get("type", data.get("event"))
    classes = _event_classes()
    if not isinstance(name, str) or name not in classes:
        raise InvalidParameterError("event type", "one of " + ", ".join(sorted(classes)), name)
    cls = classes[name]
    kwargs = {f.name: _field_value(f, data[f.name]) for f in attr.fields(cls) if f.name in data}
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as err:
        raise InvalidParameterError(f"event {name}", "the fields of its class", data) from err


def _entry_event(entry: Mapping[str, Any]) -> tuple[dp_event.DpEvent, int]:
    """``(event, count)`` of one ledger entry (``{"count": n, **event_to_dict(event)}``)."""
    count = entry.get("count")
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise InvalidParameterError("ledger entry count", "an integer >= 0", count)
    return event_from_dict({k: v for k, v in entry.items() if k != "count"}), count


def accountant_from_dict(data: Mapping[str, Any]):
    """A fresh accountant (no disk cache, no background result) holding the recorded ledger.

    Args:
        data: an accountant's ``to_dict()`` (``accountant``, ``options``, ``ledger``).
    """
    from gnnprivacy.accounting.accountants import make_accountant

    if not isinstance(data, Mapping) or not isinstance(data.get("ledger"), Mapping):
        raise InvalidParameterError("ledger", "an accountant's to_dict() (with 'accountant', "
                                    "'options' and 'ledger')", data)
    kind = data.get("accountant")
    ledger = data["ledger"]
    options = {}
    if kind == "pld":
        opts = dict(data.get("options") or {})
        options = {k: float(opts[k]) for k in ("value_discretization_interval",
                                               "heterpoisson_tail_mass") if k in opts}
        options.update(disk_cache=False, reuse_background=False)
    acc = make_accountant(kind, unit=ledger.get("unit"), relation=ledger.get("relation"),
                          **options)
    for entry in ledger.get("entries", []):
        acc.compose(*_entry_event(entry))
    return acc


def ledger_rdp(data: Mapping[str, Any], orders) -> "np.ndarray":
    """RDP curve (at ``orders``) of everything a recorded ledger composed, under its relation
    (``inf`` where it holds a non-private event). Used to compose a tuned run's total from
    what its trials executed (`gnnprivacy.experiments.tune`)."""
    import numpy as np

    from gnnprivacy.accounting.leaves import flatten_event, is_no_op, is_non_private
    from gnnprivacy.accounting.rdp_builders import event_rdp

    acc = accountant_from_dict(data)
    orders = np.asarray(orders, dtype=float)
    total = np.zeros(len(orders))
    for entry in acc.ledger.entries:
        for leaf, n in flatten_event(entry.event, entry.count):
            if is_non_private(leaf):
                return np.full(len(orders), np.inf)
            if n and not is_no_op(leaf):
                total = total + n * event_rdp(leaf, relation=acc.relation, orders=orders)
    return total


def recompute_epsilon(data: Mapping[str, Any], delta: Optional[float] = None) -> float:
    """Epsilon at ``delta`` (default: the recorded delta) of a recorded ledger, composed
    anew (see `accountant_from_dict`)."""
    if delta is None:
        delta = float(data.get("delta", 0.0) or 0.0)
    return float(accountant_from_dict(data).get_epsilon(delta))


def check_spent(data: Mapping[str, Any], *, reported: float, target: Optional[float] = None,
                delta: Optional[float] = None, rtol: float = SPENT_RTOL,
                what: str = "the run") -> float:
    """Recompute a recorded ledger's epsilon and refuse it above ``target`` or ``reported``.

    Args:
        data: the accountant's ``to_dict()``.
        reported: the epsilon the run reports for this ledger.
        target: the epsilon budget the run was calibrated to (``None``: no target).
        delta: the delta to evaluate at (default: the recorded one).
        rtol: relative slack of both comparisons.
        what: names the run in the message.

    Returns:
        The recomputed epsilon.

    Raises:
        SpentBudgetError: the recomputed epsilon exceeds ``target`` or ``reported``.
    """
    spent = recompute_epsilon(data, delta)
    for bound, name in ((target, "its target"), (reported, "the epsilon it reports")):
        if bound is not None and not spent <= float(bound) * (1.0 + rtol) + 1e-12:
            raise SpentBudgetError(
                f"{what} spent epsilon {spent:.6g} (its executed ledger composed in a fresh "
                f"accountant), above {name} {float(bound):.6g}; no finished record is "
                "written (a damaged accounting cache or a calibration error; see "
                "docs/bad-inputs.md)")
    return spent if math.isfinite(spent) else math.inf
