"""The torch device a trainer runs on, checked before any work starts.

Every trainer takes ``device`` (``"cpu"``, ``"cuda"``, ``"cuda:1"``, a ``torch.device``)
and resolves it with `resolve_device`, which refuses a device this torch cannot use
with a one-line error instead of a traceback deep inside training. The record then states
the device actually used (`device_name`).
"""

from __future__ import annotations

import torch

from gnnprivacy.errors import InvalidParameterError

__all__ = ["DeviceUnavailableError", "device_generator", "device_name", "resolve_device"]


class DeviceUnavailableError(InvalidParameterError):
    """The requested device is well formed but not usable by this torch build or machine."""

    def __init__(self, requested: object, reason: str):
        self.name, self.expected, self.received = "device", "an available device", requested
        ValueError.__init__(self, f"device {str(requested)!r} requested but {reason}")


def resolve_device(device: str | torch.device | None) -> torch.device:
    """The ``torch.device`` for ``device``, or a clear error when it cannot be used.

    Args:
        device: ``"cpu"``, ``"cuda"``, ``"cuda:K"``, ``"mps"``, a ``torch.device`` or ``None``
            (CPU).

    Raises:
        InvalidParameterError: the string is not a torch device.
        DeviceUnavailableError: CUDA (or MPS) requested but not available, or a CUDA index
            beyond the visible devices.
    """
    if device is None:
        return torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise InvalidParameterError("device", "a torch device such as 'cpu' or 'cuda'",
                                    device) from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceUnavailableError(device, "torch.cuda.is_available() is False")
        count = torch.cuda.device_count()
        if dev.index is not None and dev.index >= count:
            raise DeviceUnavailableError(device, f"only {count} CUDA device(s) are visible")
    elif dev.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise DeviceUnavailableError(device, "torch.backends.mps.is_available() is False")
    elif dev.type != "cpu":
        raise InvalidParameterError("device", "'cpu', 'cuda[:K]' or 'mps'", device)
    return dev


def device_name(device: torch.device) -> str:
    """The device as recorded: ``"cpu"``, ``"cuda:0"`` (index made explicit) ..."""
    if device.type == "cuda" and device.index is None:
        return f"cuda:{torch.cuda.current_device()}"
    return str(device)


def device_generator(parent: torch.Generator | None, device: torch.device
                     ) -> torch.Generator | None:
    """A ``torch.Generator`` on ``device`` seeded with one draw of ``parent`` (``None`` stays
    ``None``: secure mode has no noise generator).

    The GPU path draws its noise and batches where they are used, so no random numbers cross
    from the host each step; the stream is still a function of the run seed (through
    ``parent``), or of OS entropy where ``parent`` was seeded from it (secure mode's
    samplers).
    """
    if parent is None:
        return None
    seed = int(torch.randint(0, 2**62, (1,), generator=parent))
    return torch.Generator(device=device).manual_seed(seed)
