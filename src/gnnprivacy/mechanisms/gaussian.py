"""The Gaussian mechanism, with a floating-point-safe secure mode.

Math (Dwork and Roth 2014, App. A; the accounting is dp_accounting's):
``M(x) = x + N(0, sigma^2 I)`` with ``sigma = noise_multiplier * sensitivity``, where
``sensitivity`` is the L2 sensitivity of the query that produced ``x``. The privacy cost is
``GaussianDpEvent(noise_multiplier)`` (sensitivity normalised to 1); its ``(epsilon, delta)``
comes from an accountant, not from this class.

Secure mode (``secure_mode=True``). Two attacks are closed:

1. Predictable randomness: every bit comes from the OS CSPRNG (`os.urandom`), never
   from a user seed; passing a ``generator`` is an error.
2. The floating-point attack on Gaussian samplers (Jin et al., "Are we there yet?
   Timing and floating-point attacks on differential privacy systems", arXiv:2112.05307):
   the low-order bits of one Box-Muller/polar sample betray the uniforms it came from, and so
   the unperturbed value. Following Holohan and Braghin, "Secure random sampling in
   differential privacy" (arXiv:2107.10138, Sec. 5.1) as Opacus does, each noise coordinate is
   the sum of ``2n = 4`` independent ``N(0, sigma^2)`` draws divided by ``sqrt(2n) = 2``, which
   is exactly ``N(0, sigma^2)`` in distribution while the inversion attack now has to search
   ``2^(53 * (2n - 1))`` candidates. The noise is drawn and added in float64; the result is
   cast back to ``x.dtype`` (a post-processing).
"""

from __future__ import annotations

import math

import torch
from dp_accounting import dp_event
from torch import Tensor

from gnnprivacy._validation import check_positive
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.mechanisms._random import RandomSource
from gnnprivacy.mechanisms.base import (Mechanism, check_flag, check_float_tensor, check_relation,
                                        check_unit)

_SECURE_DRAWS = 4  # 2n with n = 2 (Holohan and Braghin 2021, Sec. 5.1)


def gaussian_noise(shape, *, std: float, source: RandomSource) -> Tensor:
    """``N(0, std^2)`` noise (float64); secure sources sum 4 draws and divide by 2."""
    if not source.secure:
        return std * source.normal(shape)
    draws = source.normal((_SECURE_DRAWS, *shape))
    return std * draws.sum(dim=0) / math.sqrt(_SECURE_DRAWS)


def gaussian_mechanism(x: Tensor, *, std: float, generator: torch.Generator | None = None,
                       secure_mode: bool = False) -> Tensor:
    """Return ``x + N(0, std^2)`` (functional core of `GaussianMechanism`).

    Args:
        x: floating-point tensor (the query answer); not modified.
        std: noise standard deviation ``sigma > 0``.
        generator: randomness (reproducible mode); must be ``None`` in secure mode.
        secure_mode: draw from the OS CSPRNG with the sum-of-draws protection.

    Returns:
        A new tensor of ``x``'s shape and dtype.
    """
    x = check_float_tensor(x)
    std = check_positive("std", std)
    source = RandomSource(generator, secure=check_flag("secure_mode", secure_mode))
    noisy = x.to(torch.float64) + gaussian_noise(tuple(x.shape), std=std, source=source)
    return noisy.to(x.dtype)


class GaussianMechanism(Mechanism):
    """Additive Gaussian noise calibrated to an L2 sensitivity.

    ``sigma = noise_multiplier * sensitivity``; ``M(x) = x + N(0, sigma^2 I)``.

    *Privacy*: unit and neighbouring relation as given (the caller states what one
    individual's change moves ``x`` by at most ``sensitivity`` in L2 norm); event
    ``GaussianDpEvent(noise_multiplier)`` per call. Not pure: no ``epsilon`` attribute; ask an
    accountant. The mechanism does not clip: bounding the sensitivity is the caller's job.

    Args:
        noise_multiplier: ``sigma / sensitivity > 0``.
        sensitivity: L2 sensitivity ``Delta_2 > 0`` of the query.
        unit: the privacy unit of the guarantee.
        relation: the neighbouring relation (default add-or-remove).
        secure_mode: OS CSPRNG plus the sum-of-draws defence (module docstring).

    Raises:
        InvalidParameterError: a parameter is out of range.

    Example:
        >>> import torch
        >>> from gnnprivacy.mechanisms import GaussianMechanism
        >>> mech = GaussianMechanism(noise_multiplier=2.0, sensitivity=0.5, unit="node")
        >>> mech.std, mech.event
        (1.0, GaussianDpEvent(noise_multiplier=2.0))
        >>> mech(torch.zeros(3), generator=torch.Generator().manual_seed(0)).shape
        torch.Size([3])
    """

    _repr_fields = ("noise_multiplier", "sensitivity", "std", "unit", "relation", "secure_mode")

    def __init__(self, *, noise_multiplier: float, sensitivity: float, unit: PrivacyUnit | str,
                 relation: NeighboringRelation | str = NeighboringRelation.ADD_OR_REMOVE,
                 secure_mode: bool = False):
        self.noise_multiplier = check_positive("noise_multiplier", noise_multiplier)
        self.sensitivity = check_positive("sensitivity", sensitivity)
        self.unit = check_unit(unit)
        self.relation = check_relation(relation)
        self.secure_mode = check_flag("secure_mode", secure_mode)
        self.std = self.noise_multiplier * self.sensitivity

    @property
    def event(self) -> dp_event.GaussianDpEvent:
        return dp_event.GaussianDpEvent(noise_multiplier=self.noise_multiplier)

    def __call__(self, x: Tensor, *, generator: torch.Generator | None = None) -> Tensor:
        """Return ``x + N(0, sigma^2)`` as a new tensor of ``x``'s dtype."""
        return gaussian_mechanism(x, std=self.std, generator=generator, secure_mode=self.secure_mode)


__all__ = ["GaussianMechanism", "gaussian_mechanism"]
