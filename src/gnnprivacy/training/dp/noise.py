"""Gaussian noise for the clipped gradient sum.

One fresh draw of ``N(0, σ² I)`` per step over all parameters, ``σ = noise_multiplier · C``
(spec 000 §3.3: σ is absolute on the SUM; spec 002 §3.5: ``σ = λ · 2(K+1) · C``, i.e. the
engine's multiplier is ``λ · 2(K+1)``).

Randomness comes from a ``torch.Generator`` argument: seeded noise is for reproducible
research only, since anyone holding the seed can regenerate every noise draw and subtract
it. ``secure=True`` delegates to
`gnnprivacy.mechanisms.gaussian.gaussian_mechanism` in secure mode: every bit from the
OS CSPRNG and each coordinate the normalised sum of 4 draws (the floating-point-attack
defence of Holohan and Braghin 2021, as in Opacus).
"""

from __future__ import annotations

import torch
from torch import Tensor


__all__ = ["gaussian_noise", "to_device"]


def gaussian_noise(like: Tensor, std: float, *, generator: torch.Generator | None = None,
                   secure: bool = False) -> Tensor:
    """``N(0, std²)`` noise with the shape, dtype and device of ``like``.

    Args:
        like: template tensor.
        std: standard deviation (``0`` gives zeros, for the labelled non-private ε = ∞ run).
        generator: the ``torch.Generator`` to draw from (required unless ``secure``).
        secure: draw from the OS CSPRNG instead of ``generator``.
    """
    if std == 0:
        return torch.zeros_like(like)
    if secure:                               # imported here: only secure runs need them
        from gnnprivacy.mechanisms.gaussian import gaussian_mechanism
        from gnnprivacy.training.host_sync import host_side

        with host_side():                    # the OS CSPRNG is on the host
            zeros = torch.zeros(like.shape, dtype=like.dtype)
            noise = gaussian_mechanism(zeros, std=std, secure_mode=True)
        return to_device(noise, like.device)
    if generator is None:
        raise ValueError("gaussian_noise needs a torch.Generator (randomness is an argument) "
                         "or secure=True")
    # The generator's device decides where the draw happens: a generator on the model's
    # device draws there (the trainers' GPU path); a CPU generator serving a CUDA model
    # gives the same numbers on every device, then one asynchronous copy.
    z = torch.randn(like.shape, generator=generator, dtype=like.dtype, device=generator.device)
    return to_device(z.mul_(std), like.device)


def to_device(t: Tensor, device: torch.device) -> Tensor:
    """``t`` on ``device``; a host tensor goes to a GPU through pinned memory without
    blocking (a pageable copy would make the host wait for the GPU's queue every step)."""
    if t.device == device:
        return t
    if device.type == "cuda" and t.device.type == "cpu":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)
