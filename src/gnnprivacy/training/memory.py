"""Keep freed training temporaries in the process instead of returning them to the OS.

A DP step allocates the same large temporaries every step (the ``(B, K+1, h)``
activations and output gradients of DP-GNN, the clipped sums). glibc serves blocks above
its mmap threshold with ``mmap`` and unmaps them on ``free``, and trims the heap top above
its trim threshold, so every step faults the same pages in again (issue 15: 140-156k page
faults per epoch and about half the CPU time in the kernel). `tune_malloc` raises
both thresholds once per process (``mallopt(M_MMAP_THRESHOLD, 32 MiB)``, glibc's maximum,
and ``mallopt(M_TRIM_THRESHOLD, 512 MiB)``), which is what setting
``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_`` in the environment does.

The trade: up to ``512 MiB`` of freed memory may stay mapped to the process. It is
process-wide and cannot be undone, so it is applied only by the trainers' ``fit`` and can
be switched off with ``GNNPRIVACY_MALLOC_TUNE=0``. On non-glibc systems it does nothing.

``benchmarks/bench_page_faults.py`` measures page faults and time per step with and
without it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

__all__ = ["tune_malloc"]

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's largest accepted value on 64-bit systems
TRIM_THRESHOLD = 512 * 1024 * 1024
_state: dict[str, bool] = {}


def tune_malloc() -> bool:
    """Raise glibc's mmap and trim thresholds once per process; returns whether it applied.

    Does nothing (returns ``False``) when ``GNNPRIVACY_MALLOC_TUNE=0`` or without glibc.
    """
    if os.environ.get("GNNPRIVACY_MALLOC_TUNE", "1") == "0":
        return False
    if "applied" not in _state:
        ok = False
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            mallopt = libc.mallopt
            mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
            ok = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
                mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
        except (OSError, AttributeError):
            ok = False
        _state["applied"] = ok
    return _state["applied"]
