"""The Laplace mechanism, with Mironov's snapping mechanism as its secure mode.

Math (Dwork, McSherry, Nissim and Smith 2006): ``M(x) = x + Lap(b)`` per coordinate with
``b = sensitivity / epsilon``, ``sensitivity`` the L1 sensitivity of the query. The noise is
``b * S * E`` with ``S`` a uniform sign and ``E = -ln(1 - U)`` a standard exponential.
It is ``epsilon``-DP; the event is ``LaplaceDpEvent(noise_multiplier = b / sensitivity)``.

Secure mode (``secure_mode=True``): the snapping mechanism of Mironov, "On significance of the
least significant bits for differential privacy" (CCS 2012, Sec. 5.2). Textbook floating-point
Laplace samplers leave holes in the support of ``x + noise`` that depend on ``x``, so single
outputs can reveal the input. In units of the sensitivity (``f = x / sensitivity``, so that
``f`` has sensitivity 1) the snapping mechanism releases:

```
clamp_B( round_Lambda( clamp_B(f) + S * lambda * ln(U*) ) ) * sensitivity
```

* ``B`` = ``bound / sensitivity``; ``bound`` is a public clamp on ``|x|`` (required);
* ``U*`` uniform on the doubles of ``(0, 1)`` with probability proportional to their ulp
  (see `full_precision_uniform`), ``S`` a
  uniform sign, all from the OS CSPRNG;
* ``Lambda`` = the smallest power of two ``>= lambda``; ``round_Lambda`` rounds to the nearest
  multiple of ``Lambda`` (exact in binary floating point), so every output lies on the grid
  ``Lambda * sensitivity * Z`` inside ``[-bound, bound]`` and the support no longer depends
  on ``x``.

Mironov's Theorem 1: for ``lambda < B < 2^46 lambda`` this is
``(1/lambda + 2^-49 B / lambda)``-DP. We set ``lambda = (1 + 2^-49 B) / epsilon`` so that the
guarantee is exactly the requested ``epsilon`` (``B`` outside the range raises). Caveat: the
theorem assumes a correctly rounded ``ln``; ``torch.log`` is faithfully (not always correctly)
rounded, an error of at most one ulp before the coarse ``Lambda`` rounding. The event stays
``LaplaceDpEvent(1 / epsilon)``: in exact arithmetic the snapped output is a post-processing of
``Lap(lambda)`` with ``lambda >= 1/epsilon``; the floating-point implementation is certified
pure ``epsilon``-DP by the theorem.
"""

from __future__ import annotations

import math

import torch
from dp_accounting import dp_event
from torch import Tensor

from gnnprivacy._validation import check_positive
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.mechanisms._random import RandomSource
from gnnprivacy.mechanisms.base import (Mechanism, check_flag, check_float_tensor, check_relation,
                                        check_unit)

_SNAP_SLACK = 2.0**-49  # Mironov 2012, Theorem 1
_SNAP_MAX_RATIO = 2.0**46


def laplace_noise(shape, *, scale: float, source: RandomSource) -> Tensor:
    """``Lap(scale)`` noise (float64): ``scale * S * (-ln(1 - U))``."""
    sign_u, exp_u = source.uniform((2, *shape))
    sign = torch.where(sign_u < 0.5, -1.0, 1.0).to(torch.float64)
    return scale * sign * -torch.log1p(-exp_u)


def snapping_parameters(*, epsilon: float, sensitivity: float, bound: float) -> tuple[float, float]:
    """``(lambda, Lambda)`` in sensitivity units for a snapping mechanism at exactly ``epsilon``.

    Raises:
        InvalidParameterError: ``bound`` violates ``lambda < B < 2^46 lambda``.
    """
    b_units = bound / sensitivity
    lam = (1.0 + _SNAP_SLACK * b_units) / epsilon
    if not lam < b_units < _SNAP_MAX_RATIO * lam:
        raise InvalidParameterError(
            "bound", f"in ({lam * sensitivity:.6g}, {_SNAP_MAX_RATIO * lam * sensitivity:.6g}) "
            "(Mironov's lambda < B < 2^46 lambda, lambda = (1 + 2^-49 B) / epsilon in "
            "sensitivity units)", bound)
    grid = 2.0 ** math.ceil(math.log2(lam))
    if grid < lam:  # guard against log2 rounding down
        grid *= 2.0
    return lam, grid


def snapping_mechanism(x: Tensor, *, epsilon: float, sensitivity: float, bound: float,
                       source: RandomSource | None = None) -> Tensor:
    """Mironov's snapping mechanism (secure Laplace); see the module docstring.

    Args:
        x: floating-point tensor; entries are clamped to ``[-bound, bound]`` first.
        epsilon: target ``epsilon > 0``.
        sensitivity: L1 sensitivity of the query.
        bound: public clamp ``B`` (output units).
        source: randomness; defaults to the OS CSPRNG.

    Returns:
        A new tensor of ``x``'s dtype with entries on the grid ``Lambda * sensitivity * Z``
        within ``[-bound, bound]``.
    """
    x = check_float_tensor(x)
    source = RandomSource(secure=True) if source is None else source
    lam, grid = snapping_parameters(epsilon=epsilon, sensitivity=sensitivity, bound=bound)
    b_units = bound / sensitivity
    f = torch.clamp(x.to(torch.float64) / sensitivity, -b_units, b_units)
    shape = tuple(x.shape)
    sign = torch.where(source.uniform(shape) < 0.5, -1.0, 1.0).to(torch.float64)
    noisy = f + sign * lam * torch.log(source.full_precision_uniform(shape))
    snapped = torch.round(noisy / grid) * grid
    return (torch.clamp(snapped, -b_units, b_units) * sensitivity).to(x.dtype)


def laplace_mechanism(x: Tensor, *, scale: float, generator: torch.Generator | None = None) -> Tensor:
    """Return ``x + Lap(scale)`` per coordinate (non-secure functional core)."""
    x = check_float_tensor(x)
    scale = check_positive("scale", scale)
    noise = laplace_noise(tuple(x.shape), scale=scale, source=RandomSource(generator))
    return (x.to(torch.float64) + noise).to(x.dtype)


class LaplaceMechanism(Mechanism):
    """Additive Laplace noise calibrated to an L1 sensitivity: ``b = sensitivity / epsilon``.

    *Privacy*: pure ``epsilon``-DP for the given unit and neighbouring relation (the caller
    states that one individual's change moves ``x`` by at most ``sensitivity`` in L1 norm);
    event ``LaplaceDpEvent(noise_multiplier = 1 / epsilon)`` per call. The mechanism does not
    clip except for the public ``bound`` in secure mode.

    Args:
        epsilon: ``epsilon > 0``.
        sensitivity: L1 sensitivity ``Delta_1 > 0``.
        unit: the privacy unit of the guarantee.
        relation: the neighbouring relation (default add-or-remove).
        secure_mode: OS CSPRNG plus Mironov's snapping (module docstring); requires ``bound``.
        bound: public clamp on ``|x|`` for the snapping mechanism (ignored otherwise: must be
            ``None`` when ``secure_mode`` is false).

    Attributes:
        scale: the Laplace scale actually used (``sensitivity * lambda`` in secure mode,
            slightly above ``sensitivity / epsilon``).
        grid: output grid spacing in secure mode (``None`` otherwise).

    Raises:
        InvalidParameterError: a parameter is out of range, ``bound`` is missing in secure
            mode or given outside it.

    Example:
        >>> import torch
        >>> from gnnprivacy.mechanisms import LaplaceMechanism
        >>> mech = LaplaceMechanism(epsilon=1.0, sensitivity=1.0, unit="edge")
        >>> mech.epsilon, mech(torch.tensor([3.0]), generator=torch.Generator().manual_seed(0)).shape
        (1.0, torch.Size([1]))
    """

    _repr_fields = ("epsilon", "sensitivity", "scale", "unit", "relation", "secure_mode", "bound")

    def __init__(self, *, epsilon: float, sensitivity: float, unit: PrivacyUnit | str,
                 relation: NeighboringRelation | str = NeighboringRelation.ADD_OR_REMOVE,
                 secure_mode: bool = False, bound: float | None = None):
        self.epsilon = check_positive("epsilon", epsilon)
        self.sensitivity = check_positive("sensitivity", sensitivity)
        self.unit = check_unit(unit)
        self.relation = check_relation(relation)
        self.secure_mode = check_flag("secure_mode", secure_mode)
        self.bound = None if bound is None else check_positive("bound", bound)
        self.scale = self.sensitivity / self.epsilon
        self.grid = None
        if self.secure_mode:
            if self.bound is None:
                raise InvalidParameterError("bound", "a public clamp bound > 0 when secure_mode=True "
                                            "(Mironov's snapping mechanism)", bound)
            lam, grid = snapping_parameters(epsilon=self.epsilon, sensitivity=self.sensitivity,
                                            bound=self.bound)
            self.scale, self.grid = lam * self.sensitivity, grid * self.sensitivity
        elif self.bound is not None:
            raise InvalidParameterError("bound", "None unless secure_mode=True", bound)

    @property
    def event(self) -> dp_event.LaplaceDpEvent:
        return dp_event.LaplaceDpEvent(noise_multiplier=1.0 / self.epsilon)

    def __call__(self, x: Tensor, *, generator: torch.Generator | None = None) -> Tensor:
        """Return a noisy copy of ``x`` (snapped to the grid in secure mode)."""
        if not self.secure_mode:
            return laplace_mechanism(x, scale=self.scale, generator=generator)
        source = RandomSource(generator, secure=True)  # raises if a generator is given
        return snapping_mechanism(x, epsilon=self.epsilon, sensitivity=self.sensitivity,
                                  bound=self.bound, source=source)


__all__ = ["LaplaceMechanism", "laplace_mechanism", "snapping_mechanism", "snapping_parameters"]
