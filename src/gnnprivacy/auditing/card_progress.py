"""What a report card is doing, as it does it: ``gnnprivacy assess`` prints each stage.

The card's functions announce their stages with `stage` ("membership: loss and confidence
thresholds", "link stealing: He et al. Attack-2 ..."); nothing is printed unless a caller
installed a reporter with `reporting` (the command line does, on stderr, with the elapsed
time; ``--quiet`` does not).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["reporting", "stage"]

_REPORTER: contextvars.ContextVar[Callable[[str], None] | None] = contextvars.ContextVar(
    "card_progress", default=None)


@contextmanager
def reporting(report: Callable[[str], None]) -> Iterator[None]:
    """Within the block, every `stage` calls ``report(text)``."""
    token = _REPORTER.set(report)
    try:
        yield
    finally:
        _REPORTER.reset(token)


def stage(text: str) -> None:
    """Announce a stage of a card (no-op without a reporter)."""
    report = _REPORTER.get()
    if report is not None:
        report(text)
