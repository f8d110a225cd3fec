"""Randomized response: binary (Warner 1965) and generalized / k-ary (GRR).

Math (spec 004 §3.1; Kairouz, Bonawitz and Ramage 2016 "direct encoding"). GRR over ``k``
values with budget ``epsilon`` reports the true value with probability
``p = e^eps / (e^eps + k - 1)`` and each of the ``k - 1`` other values with probability
``q = 1 / (e^eps + k - 1)``; ``p / q = e^eps``, so it is ``epsilon``-LDP and the bound is
attained. Binary RR is GRR with ``k = 2`` (keep with ``e^eps / (1 + e^eps)``, else flip).

Sampling uses the mixture form of GRR: keep with probability ``1 - k q``, else report a value
uniform over all ``k`` (see `grr_sample`), one uniform per entry. In secure mode the
uniforms come from the OS CSPRNG; the outputs are integers, so there is no floating-point
leakage beyond the 2^-53 resolution of the thresholds.

Event: ``RandomizedResponseDpEvent(noise_parameter = k / (e^eps + k - 1), num_buckets = k)``,
which is exactly GRR (dp_accounting's RR keeps with ``1 - p_n`` and otherwise draws uniformly
from all ``k`` buckets, ``1 - p_n + p_n / k = p``).
"""

from __future__ import annotations

import math

import torch
from dp_accounting import dp_event
from torch import Tensor

from gnnprivacy._validation import check_int, check_probability, check_pure_epsilon
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.mechanisms._random import RandomSource
from gnnprivacy.mechanisms.base import Mechanism, check_flag, check_unit


def grr_probabilities(epsilon: float, num_categories: int) -> tuple[float, float]:
    """``(p, q)`` of GRR: keep ``e^eps / (e^eps + k - 1)``, each other value ``1 / (e^eps + k - 1)``."""
    eps = check_pure_epsilon("epsilon", epsilon)
    k = check_int("num_categories", num_categories, low=2)
    # e^eps / (e^eps + k - 1) written to stay finite for large eps
    p = 1.0 / (1.0 + (k - 1) * math.exp(-eps))
    q = math.exp(-eps) / (1.0 + (k - 1) * math.exp(-eps))
    return p, q


def check_categories(x: object, num_categories: int, name: str = "x") -> Tensor:
    """An integer tensor with values in ``[0, num_categories)``, else a clear error."""
    if not isinstance(x, Tensor) or torch.is_floating_point(x) or torch.is_complex(x) \
            or x.dtype == torch.bool:
        raise InvalidParameterError(name, f"an integer tensor of categories in [0, {num_categories})",
                                    x.dtype if isinstance(x, Tensor) else type(x))
    if x.numel() and (int(x.min()) < 0 or int(x.max()) >= num_categories):
        bad = x[(x < 0) | (x >= num_categories)][0].item()
        raise InvalidParameterError(name, f"values (e.g. labels) in [0, {num_categories})",
                                    f"a value outside [0, {num_categories}): {bad}")
    return x


def grr_sample(x: Tensor, *, other_probability: Tensor | float, num_categories: Tensor | int,
               source: RandomSource, apply: Tensor | None = None) -> Tensor:
    """Vectorised GRR on an int64 tensor; ``other_probability`` (``q``) / ``num_categories`` broadcast.

    Uses GRR's mixture form: keep ``x`` with probability ``1 - k q``, otherwise report a value
    uniform over all ``k`` (so ``x`` has ``1 - k q + q = p`` and each other value ``q``). One
    uniform ``U`` per entry: ``U >= k q`` keeps ``x``; ``U < k q`` reports ``floor(U / q)``
    (``U / (k q)`` is uniform given ``U < k q``). Entries where ``apply`` is False report a
    value uniform over all ``k`` instead (``floor(U k)``), as GRR-FS does for unsampled features.
    No validation (callers validate); returns a new int64 tensor.
    """
    x = x.to(torch.int64)
    k = torch.as_tensor(num_categories, dtype=torch.int64)
    k_float = k.to(torch.float64)
    q = torch.as_tensor(other_probability, dtype=torch.float64)
    threshold = torch.where(k > 1, k_float * q, 0.0)  # k q; a constant (k = 1) is always kept
    u = source.uniform(tuple(x.shape))
    apply = torch.ones_like(x, dtype=torch.bool) if apply is None else apply
    keep = apply & (u >= threshold)
    spread = torch.where(apply, u / torch.clamp(threshold, min=1e-300), u)  # uniform on [0, 1)
    value = torch.minimum(torch.floor(spread * k_float).to(torch.int64), k - 1)
    return torch.where(keep, x, torch.clamp(value, min=0))


def generalized_randomized_response(x: Tensor, *, epsilon: float, num_categories: int,
                                    generator: torch.Generator | None = None,
                                    secure_mode: bool = False) -> Tensor:
    """GRR on each entry of an integer tensor (functional core of `GRR`).

    Args:
        x: integer tensor with values in ``[0, num_categories)``; not modified.
        epsilon: per-entry budget ``> 0``.
        num_categories: ``k >= 2``.
        generator: randomness (reproducible mode); ``None`` in secure mode.
        secure_mode: draw from the OS CSPRNG.

    Returns:
        int64 tensor of ``x``'s shape.
    """
    _, q = grr_probabilities(epsilon, num_categories)
    x = check_categories(x, num_categories)
    source = RandomSource(generator, secure=check_flag("secure_mode", secure_mode))
    return grr_sample(x, other_probability=q, num_categories=num_categories, source=source)


def _two_point(same: Tensor, keep: float, other: float) -> Tensor:
    """float64 ``keep`` where ``same`` else ``other`` (exact, no float32 round trip)."""
    values = torch.tensor([other, keep], dtype=torch.float64)
    return values[same.to(torch.int64)]


class GRR(Mechanism):
    """Generalized (k-ary) randomized response, applied entrywise.

    *Privacy*: ``epsilon``-LDP per reported entry, under the replace relation (any value may
    be replaced by any other: ``sensitivity = 1`` report). Unit as given, e.g.
    ``PrivacyUnit.LABEL`` for label RR. Event: ``RandomizedResponseDpEvent(k / (e^eps + k - 1),
    k)`` per entry (a user reporting several entries composes several events).

    Args:
        epsilon: ``epsilon > 0``.
        num_categories: ``k >= 2``.
        unit: the privacy unit of the guarantee.
        secure_mode: draw from the OS CSPRNG (no user seed).

    Example:
        >>> import torch
        >>> from gnnprivacy.mechanisms import GRR
        >>> grr = GRR(epsilon=2.0, num_categories=4, unit="label")
        >>> labels = grr(torch.tensor([0, 1, 2, 3]), generator=torch.Generator().manual_seed(0))
        >>> labels.shape, grr.epsilon
        (torch.Size([4]), 2.0)
    """

    _repr_fields = ("epsilon", "num_categories", "keep_probability", "unit", "secure_mode")

    def __init__(self, *, epsilon: float, num_categories: int, unit: PrivacyUnit | str,
                 secure_mode: bool = False):
        self.keep_probability, self.other_probability = grr_probabilities(epsilon, num_categories)
        self.epsilon = float(epsilon)
        self.num_categories = int(num_categories)
        self.unit = check_unit(unit)
        self.relation = NeighboringRelation.REPLACE
        self.sensitivity = 1.0
        self.secure_mode = check_flag("secure_mode", secure_mode)

    @classmethod
    def from_keep_probability(cls, keep_probability: float, *, num_categories: int,
                              unit: PrivacyUnit | str, secure_mode: bool = False) -> GRR:
        """GRR with a given keep probability ``p`` in ``(1/k, 1)``: ``eps = ln(p (k-1) / (1-p))``."""
        k = check_int("num_categories", num_categories, low=2)
        p = check_probability("keep_probability", keep_probability, allow_one=False)
        if p <= 1.0 / k:
            raise InvalidParameterError("keep_probability", f"a probability in (1/{k}, 1)", keep_probability)
        return cls(epsilon=math.log(p * (k - 1) / (1.0 - p)), num_categories=k, unit=unit,
                   secure_mode=secure_mode)

    @property
    def event(self) -> dp_event.RandomizedResponseDpEvent:
        k = self.num_categories
        return dp_event.RandomizedResponseDpEvent(
            noise_parameter=k * self.other_probability, num_buckets=k)

    def __call__(self, x: Tensor, *, generator: torch.Generator | None = None) -> Tensor:
        """Randomize every entry of ``x`` (integers in ``[0, k)``); returns int64."""
        x = check_categories(x, self.num_categories)
        source = RandomSource(generator, secure=self.secure_mode)
        return grr_sample(x, other_probability=self.other_probability,
                          num_categories=self.num_categories, source=source)

    def probability(self, x: Tensor, y: Tensor) -> Tensor:
        """Exact ``P[M(x) = y]`` entrywise (float64)."""
        x = check_categories(x, self.num_categories)
        y = check_categories(y, self.num_categories, name="y")
        return _two_point(x == y, self.keep_probability, self.other_probability)


class RandomizedResponse(Mechanism):
    """Binary randomized response: keep a bit with ``e^eps / (1 + e^eps)``, else flip it.

    Accepts bool, integer or floating tensors holding only 0/1 and returns the same dtype.

    *Privacy*: ``epsilon``-LDP per bit under the replace relation (``sensitivity = 1`` bit);
    unit as given (e.g. ``PrivacyUnit.EDGE`` for adjacency bits). Event:
    ``RandomizedResponseDpEvent(2 / (e^eps + 1), 2)`` per bit.

    Example:
        >>> import torch
        >>> from gnnprivacy.mechanisms import RandomizedResponse
        >>> rr = RandomizedResponse(epsilon=1.0, unit="edge")
        >>> round(rr.keep_probability, 4)               # e / (1 + e)
        0.7311
        >>> rr(torch.tensor([0, 1, 1]), generator=torch.Generator().manual_seed(0)).shape
        torch.Size([3])
    """

    _repr_fields = ("epsilon", "keep_probability", "unit", "secure_mode")

    def __init__(self, *, epsilon: float, unit: PrivacyUnit | str, secure_mode: bool = False):
        self.keep_probability, self.flip_probability = grr_probabilities(epsilon, 2)
        self.epsilon = float(epsilon)
        self.unit = check_unit(unit)
        self.relation = NeighboringRelation.REPLACE
        self.sensitivity = 1.0
        self.secure_mode = check_flag("secure_mode", secure_mode)

    @classmethod
    def from_flip_probability(cls, flip_probability: float, *, unit: PrivacyUnit | str,
                              secure_mode: bool = False) -> RandomizedResponse:
        """Binary RR with flip probability in ``(0, 1/2)``: ``eps = ln((1 - f) / f)``."""
        f = check_probability("flip_probability", flip_probability, allow_zero=False)
        if f >= 0.5:
            raise InvalidParameterError("flip_probability", "a probability in (0, 1/2)", flip_probability)
        return cls(epsilon=math.log((1.0 - f) / f), unit=unit, secure_mode=secure_mode)

    @property
    def event(self) -> dp_event.RandomizedResponseDpEvent:
        return dp_event.RandomizedResponseDpEvent(noise_parameter=2.0 * self.flip_probability,
                                                  num_buckets=2)

    @staticmethod
    def _check_bits(x: object, name: str = "x") -> Tensor:
        if not isinstance(x, Tensor) or torch.is_complex(x):
            raise InvalidParameterError(name, "a tensor of bits (0/1)", type(x))
        if x.numel() and not ((x == 0) | (x == 1)).all():
            raise InvalidParameterError(name, "bits: every entry 0 or 1", "a tensor with other values")
        return x

    def __call__(self, x: Tensor, *, generator: torch.Generator | None = None) -> Tensor:
        """Flip each bit of ``x`` with probability ``1 / (1 + e^eps)``; same dtype as ``x``."""
        x = self._check_bits(x)
        flip = RandomSource(generator, secure=self.secure_mode).uniform(tuple(x.shape)) \
            < self.flip_probability
        return torch.where(flip, 1 - x.to(torch.int64), x.to(torch.int64)).to(x.dtype)

    def probability(self, x: Tensor, y: Tensor) -> Tensor:
        """Exact ``P[M(x) = y]`` entrywise (float64)."""
        same = self._check_bits(x) == self._check_bits(y, "y")
        return _two_point(same, self.keep_probability, self.flip_probability)


__all__ = ["GRR", "RandomizedResponse", "generalized_randomized_response", "grr_probabilities",
           "grr_sample"]
