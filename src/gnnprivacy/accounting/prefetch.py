"""Epsilons computed in a background thread while the caller trains (issue 15).

A calibrated HeterPoisson run needs, before anything is released, the epsilon of the
planned steps maximised over every covering out-degree; the calibration itself only
needs the largest degree (a lower bound on the maximum, see
`calibration`). `prefetch_epsilon` starts the full
maximum in a daemon thread and registers it under the accountant's ledger key; when the
trainer's own accountant asks for the same epsilon after the last step it waits for that
result instead of computing it again (same inputs, same code: the value is identical).
Nothing is released before that answer: a trainer whose deferred check fails
re-calibrates with the full check and trains again (the check depends on public
parameters only, so the discarded run leaks nothing).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future
from typing import Callable, Optional

_LOCK = threading.Lock()
_PENDING: dict[str, Future] = {}
_MAX_PENDING = 32
_THREAD_NAME = "gnnprivacy-epsilon"


def submit(key: str, compute: Callable[[], float]) -> Future:
    """Run ``compute`` in a daemon thread under ``key`` (once per key while pending)."""
    with _LOCK:
        if key in _PENDING:
            return _PENDING[key]
        future: Future = Future()
        _PENDING[key] = future
        while len(_PENDING) > _MAX_PENDING:                # forget the oldest finished ones
            oldest = next((k for k, f in _PENDING.items() if f.done()), None)
            if oldest is None:
                break
            del _PENDING[oldest]

    def work():
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(float(compute()))
        except BaseException as err:                       # noqa: BLE001 - handed to waiter
            future.set_exception(err)

    threading.Thread(target=work, name=_THREAD_NAME, daemon=True).start()
    return future


def in_background() -> bool:
    """Whether the caller runs inside a background computation of this module (which must
    compute, not wait for its own registered result)."""
    return threading.current_thread().name == _THREAD_NAME


def lookup(key: str) -> Optional[Future]:
    """The background computation registered under ``key``, if any."""
    with _LOCK:
        return _PENDING.get(key)


def clear() -> None:
    """Forget every registered computation (tests)."""
    with _LOCK:
        _PENDING.clear()


def _forget_after_fork() -> None:
    """A forked child has none of its parent's threads: waiting on their futures would
    block forever, so the child starts with an empty registry (and a fresh lock)."""
    global _LOCK
    _LOCK = threading.Lock()
    _PENDING.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
