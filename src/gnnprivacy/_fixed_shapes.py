"""Which devices run the training step with fixed-shape (padded) batches.

A Poisson-sampled batch has a random size. On the CPU the samplers build it at its exact
size; on a GPU that would need the host to read the size back every step (a *host
synchronisation*: ``nonzero``, ``.item()``, ...), which stalls the GPU's queue. On the
devices named here the samplers instead draw on the device into buffers of a fixed capacity
(`gnnprivacy.sampling.fixed_shape`) with masks for the empty slots, and the models and
the engine's rules take the branch that needs no size on the host.

Tests add ``"cpu"`` to `FIXED_SHAPE_DEVICES` to run the GPU path's code on a CPU
(``tests/training/test_host_sync.py``).
"""

from __future__ import annotations

import torch

__all__ = ["FIXED_SHAPE_DEVICES", "fixed_shapes"]

#: device types whose step loop uses fixed-shape batches
FIXED_SHAPE_DEVICES = {"cuda"}


def fixed_shapes(device: torch.device | str) -> bool:
    """Whether the step loop on ``device`` uses fixed-shape batches."""
    return torch.device(device).type in FIXED_SHAPE_DEVICES
