"""The record of what an accountant composed: printable and JSON-serialisable."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Union

from dp_accounting import dp_event

from gnnprivacy.accounting.events import describe_event, event_to_dict
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit


@dataclass(frozen=True)
class LedgerEntry:
    """One composed event and how many times it was composed in a row."""

    event: dp_event.DpEvent
    count: int

    def to_dict(self) -> dict:
        return {"count": self.count, **event_to_dict(self.event)}


class Ledger:
    """Ordered record of composed events; consecutive identical events are merged.

    Args:
        unit: privacy unit of the owning accountant.
        relation: neighbouring relation of the owning accountant.
    """

    def __init__(self, unit: PrivacyUnit, relation: NeighboringRelation):
        self.unit = unit
        self.relation = relation
        self._entries: list[LedgerEntry] = []

    def record(self, event: dp_event.DpEvent, count: int) -> None:
        """Append ``count`` compositions of ``event`` (merged with an identical last entry)."""
        if self._entries and self._entries[-1].event == event:
            last = self._entries.pop()
            self._entries.append(LedgerEntry(event, last.count + count))
        else:
            self._entries.append(LedgerEntry(event, count))

    @property
    def entries(self) -> tuple[LedgerEntry, ...]:
        return tuple(self._entries)

    @property
    def total_count(self) -> int:
        """Total number of composed events (with multiplicity)."""
        return sum(entry.count for entry in self._entries)

    def as_dp_event(self) -> dp_event.DpEvent:
        """The whole ledger as one dp_accounting ``ComposedDpEvent``."""
        return dp_event.ComposedDpEvent(
            [e.event if e.count == 1 else dp_event.SelfComposedDpEvent(e.event, e.count)
             for e in self._entries])

    def to_dict(self) -> dict:
        """JSON-able description: unit, relation and the entries in order."""
        return {"unit": self.unit.value, "relation": self.relation.value,
                "entries": [entry.to_dict() for entry in self._entries]}

    def save(self, path: Union[str, Path], *, force: bool = False) -> Path:
        """Write `to_dict` as JSON to ``path`` (atomically) and return the path; an existing run
        record, model or checkpoint there is refused unless ``force``
        (`gnnprivacy._files.check_output_file`)."""
        from gnnprivacy._files import write_output_file

        return write_output_file(path, json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n",
                                 force=force, what="ledger")

    def summary(self) -> str:
        """Multi-line human-readable listing."""
        head = (f"privacy ledger: unit={self.unit.value}, relation={self.relation.value}, "
                f"{self.total_count} event(s)")
        lines = [head] + [f"  {entry.count:>8} x {describe_event(entry.event)}"
                          for entry in self._entries]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        return (f"Ledger(unit={self.unit.value!r}, relation={self.relation.value!r}, "
                f"entries={len(self._entries)}, total_count={self.total_count})")

    def __len__(self) -> int:
        return len(self._entries)
