"""Find host synchronisations in a training step without a GPU.

On a CUDA device, PyTorch waits for the GPU (the host *synchronises*) whenever Python needs a
value that lives on the device: ``.item()``, ``bool(t)``, ``int(t)``, ``.tolist()``,
``.cpu()``, an op whose output size depends on the data (``nonzero``, ``unique``,
``masked_select``, boolean-mask indexing, ``repeat_interleave`` without ``output_size``,
``bincount``), a sparse COO product (it coalesces), and every copy of host memory to the
device (``torch.tensor(..., device=...)``, ``t.to(device)``). Each one stalls the step until
the GPU has drained its queue, which is what keeps a GPU step as slow as a CPU one.

`HostSyncDetector` is a `torch.overrides.TorchFunctionMode` that records every
such call made while it is active, with the source line that made it, on any device: the
step loop of the GPU path can thus be checked on a CPU (``tests/training/test_host_sync.py``)
as well as with ``torch.cuda.set_sync_debug_mode("error")`` on a GPU (``-m gpu``).

Calls made from ``torch.optim`` are not counted: the optimizers keep their step counters on
the host by design (reading them costs no device synchronisation). Nor are calls inside
`host_side`, which marks work on host tensors only (secure mode's CSPRNG noise, drawn
on the host and copied to the device without blocking).

Example::

    with HostSyncDetector() as found:
        engine.step(closure)
    assert not found.calls, found.report()
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode

__all__ = ["HostSyncDetector", "format_calls", "host_side", "sync_reason"]

#: calls that hand a device value to Python or copy it to the host
_READS = frozenset({"item", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__",
                    "__complex__", "__repr__", "__format__", "cpu",
                    "equal", "allclose", "is_nonzero", "__array__"})
#: ops whose output size depends on the data (CUDA computes it on the device, then copies)
_DATA_SIZED = frozenset({"nonzero", "argwhere", "unique", "unique_consecutive", "masked_select",
                         "bincount", "coalesce", "histc", "_unique", "_unique2"})
#: constructors that copy host data (a Python number or list) into a new tensor
_HOST_DATA = frozenset({"tensor", "as_tensor", "from_numpy", "asarray"})
_INDEXING = frozenset({"__getitem__", "__setitem__", "index_put", "index_put_"})
_EXEMPT_PACKAGES = ("torch/optim/", "torch\\optim\\")


def _is_host_index(index) -> bool:
    """A boolean-mask or Python-sequence index (the first needs ``nonzero``, the second a
    host-to-device copy)."""
    parts = index if isinstance(index, tuple) else (index,)
    for part in parts:
        if isinstance(part, Tensor) and part.dtype == torch.bool and part.dim() > 0:
            return True
        if isinstance(part, (list, range)):
            return True
    return False


def sync_reason(name: str, args: tuple, kwargs: dict) -> str | None:
    """Why the torch call ``name(*args, **kwargs)`` synchronises a CUDA device with the host,
    or ``None`` when it does not (as far as this rule set knows)."""
    if name in _READS:
        return f"{name}: reads a device value on the host"
    if name in _DATA_SIZED:
        return f"{name}: output size depends on the data"
    if name in _HOST_DATA:
        return f"{name}: copies host data to the device"
    if name == "where" and len(args) + len(kwargs) == 1:
        return "where(condition): output size depends on the data"
    if name == "repeat_interleave" and "output_size" not in kwargs:
        repeats = args[1] if len(args) > 1 else kwargs.get("repeats")
        if isinstance(repeats, Tensor) and repeats.numel() > 1:
            return "repeat_interleave(repeats tensor) without output_size"
    if name in _INDEXING and len(args) > 1 and _is_host_index(args[1]):
        return f"{name} with a boolean mask or a Python list"
    if name in ("to", "cuda", "pin_memory"):
        moved = any(isinstance(a, (torch.device, str, int, Tensor)) and not isinstance(a, bool)
                    for a in args[1:]) or "device" in kwargs
        if moved and not kwargs.get("non_blocking", False):
            return f"{name}: a blocking copy between host and device"
    if any(isinstance(a, Tensor) and a.layout == torch.sparse_coo for a in args) \
            and name not in ("sparse_coo_tensor", "_sparse_coo_tensor_unsafe"):
        return f"{name} on a sparse COO tensor (coalesces on the device)"
    return None


_HOST = threading.local()


@contextmanager
def host_side() -> Iterator[None]:
    """Mark a block that works on host tensors only: nothing in it waits for a device, so
    `HostSyncDetector` does not count its calls."""
    _HOST.depth = getattr(_HOST, "depth", 0) + 1
    try:
        yield
    finally:
        _HOST.depth -= 1


def _caller() -> str:
    """``file:line`` of the innermost frame outside torch (where the library made the call)."""
    frame = sys._getframe(2)
    while frame is not None:
        path = frame.f_code.co_filename
        if "/torch/" not in path and "\\torch\\" not in path and path != __file__:
            return f"{path}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


def _from_exempt() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        path = frame.f_code.co_filename
        if any(p in path for p in _EXEMPT_PACKAGES):
            return True
        frame = frame.f_back
    return False


class HostSyncDetector(TorchFunctionMode):
    """Records the torch calls that would synchronise a CUDA device with the host.

    Attributes:
        calls: ``(reason, "file:line")`` of every such call while active.
    """

    def __init__(self):
        super().__init__()
        self.calls: list[tuple[str, str]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        reason = sync_reason(name, args, kwargs)
        if reason is not None and not getattr(_HOST, "depth", 0) and not _from_exempt():
            self.calls.append((reason, _caller()))
        return func(*args, **kwargs)

    def report(self) -> str:
        """One line per distinct ``(reason, place)``, with its count."""
        return format_calls(self.calls)


def format_calls(calls: list[tuple[str, str]]) -> str:
    """``calls`` of a `HostSyncDetector` as one line per distinct ``(reason, place)``."""
    return "\n".join(f"{n:5d} x {reason}   at {where}"
                     for (reason, where), n in Counter(calls).most_common())
