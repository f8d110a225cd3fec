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


__all__ = ["FlatSums", "flatten", "gaussian_noise", "noised_flat", "to_device", "unflatten"]


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


class FlatSums(dict):
    """Name -> tensor, every value a view of ``flat`` (the values laid end to end, in
    order): what `noised_flat` returns, so the update scales them in one operation."""

    def __init__(self, items, flat: Tensor):
        super().__init__(items)
        self.flat = flat


def flatten(tensors: dict[str, Tensor]) -> Tensor:
    """The values of ``tensors`` laid end to end (one copy; ``.flat`` of a `FlatSums`)."""
    flat = getattr(tensors, "flat", None)
    if flat is not None:
        return flat
    return torch._C._nn.flatten_dense_tensors(list(tensors.values()))


def unflatten(flat: Tensor, like: dict[str, Tensor]) -> FlatSums:
    """``flat`` cut into views with the names and shapes of ``like``'s values."""
    return FlatSums(zip(like, torch._C._nn.unflatten_dense_tensors(flat, list(like.values()))),
                    flat)


def noised_flat(sums: dict[str, Tensor], std: float, *,
                generator: torch.Generator | None = None,
                secure: bool = False) -> dict[str, Tensor]:
    """``sums`` plus one draw of ``N(0, std² I)`` over all their coordinates: one flat
    ``randn`` (`gaussian_noise`) added to the sums laid end to end, handed back as views
    (a `FlatSums`). Sums of several dtypes or devices get one draw each."""
    if not sums:
        return {}
    values = list(sums.values())
    first = values[0]
    if any(t.dtype != first.dtype or t.device != first.device for t in values):
        return {name: s + gaussian_noise(s, std, generator=generator, secure=secure)
                for name, s in sums.items()}
    flat = flatten(sums)
    return unflatten(flat + gaussian_noise(flat, std, generator=generator, secure=secure), sums)


def to_device(t: Tensor, device: torch.device) -> Tensor:
    """``t`` on ``device``; a host tensor goes to a GPU through pinned memory without
    blocking (a pageable copy would make the host wait for the GPU's queue every step)."""
    if t.device == device:
        return t
    if device.type == "cuda" and t.device.type == "cpu":
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)
