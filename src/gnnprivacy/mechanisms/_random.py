"""Where a mechanism's randomness comes from: a ``torch.Generator`` or the OS CSPRNG.

Every mechanism draws through a `RandomSource`, so the same sampling code serves the
reproducible mode (a user-supplied ``torch.Generator``) and the secure mode
(``secure_mode=True``), in which every random bit comes from `os.urandom` (the kernel's
CSPRNG) and no user seed is accepted.

Primitives (all ``float64`` / ``int64`` on CPU):

* `RandomSource.uniform`: ``U[0, 1)`` on the 2^-53 grid (53 random bits per draw).
* `RandomSource.normal`: standard normals. Secure mode uses Box-Muller on CSPRNG
  uniforms, ``z = sqrt(-2 ln(1 - u1)) cos(2 pi u2)``.
* `RandomSource.full_precision_uniform`: ``U(0, 1)`` in which every double ``v`` is drawn
  with probability proportional to its ulp (a geometric binade, then 52 uniform mantissa
  bits); this is the ``U*`` that Mironov's snapping mechanism requires.
* `RandomSource.random_subsets`: per row, a uniform ``m``-subset of ``d`` columns
  (Floyd's algorithm, vectorised over rows).
"""

from __future__ import annotations

import os

import numpy as np
import torch
from torch import Tensor

from gnnprivacy.errors import InvalidParameterError

_TWO_POW_53 = float(2**53)


def _os_random_bytes(n: int) -> bytes:
    """``n`` bytes from the OS CSPRNG (a seam the tests replace with a seeded stream)."""
    return os.urandom(n)


def _shape(shape) -> tuple[int, ...]:
    return (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)


def _bit_length(words: np.ndarray) -> np.ndarray:
    """Exact bit length of each uint64 (0 for 0), via two exactly representable halves."""
    hi = (words >> np.uint64(32)).astype(np.float64)
    lo = (words & np.uint64(0xFFFFFFFF)).astype(np.float64)
    hi_len = np.frexp(hi)[1]
    lo_len = np.frexp(lo)[1]
    return np.where(hi > 0, hi_len + 32, lo_len).astype(np.int64)


class RandomSource:
    """Uniform, normal and subset draws from a ``torch.Generator`` or from the OS CSPRNG.

    Args:
        generator: a ``torch.Generator`` (reproducible mode); ``None`` draws a fresh one from
            OS entropy. Must be ``None`` when ``secure``.
        secure: draw every bit from `os.urandom` instead.

    Raises:
        InvalidParameterError: ``generator`` is not a ``torch.Generator``, or one is given
            together with ``secure=True``.
    """

    def __init__(self, generator: torch.Generator | None = None, *, secure: bool = False):
        if secure and generator is not None:
            raise InvalidParameterError(
                "generator", "None when secure_mode=True (randomness comes from the OS CSPRNG, "
                "never from a user seed)", generator)
        if generator is not None and not isinstance(generator, torch.Generator):
            raise InvalidParameterError("generator", "a torch.Generator or None", generator)
        if generator is None and not secure:
            generator = torch.Generator()
            generator.seed()
        self.secure = bool(secure)
        self.generator = generator

    def words(self, shape) -> np.ndarray:
        """Uniform random ``uint64`` words of the given shape."""
        shape = _shape(shape)
        count = int(np.prod(shape, dtype=np.int64))
        if self.secure:
            return np.frombuffer(_os_random_bytes(8 * count), dtype=np.uint64).reshape(shape)
        halves = torch.randint(0, 2**32, (2, count), generator=self.generator, dtype=torch.int64)
        halves = halves.numpy().astype(np.uint64)
        return ((halves[0] << np.uint64(32)) | halves[1]).reshape(shape)

    def uniform(self, shape) -> Tensor:
        """``U[0, 1)`` draws (float64)."""
        shape = _shape(shape)
        if not self.secure:
            return torch.rand(shape, generator=self.generator, dtype=torch.float64)
        mantissa = (self.words(shape) >> np.uint64(11)).astype(np.float64)
        return torch.from_numpy(mantissa / _TWO_POW_53)

    def normal(self, shape) -> Tensor:
        """Standard normal draws (float64)."""
        shape = _shape(shape)
        if not self.secure:
            return torch.randn(shape, generator=self.generator, dtype=torch.float64)
        u1, u2 = self.uniform((2, *shape))
        return torch.sqrt(-2.0 * torch.log1p(-u1)) * torch.cos(2.0 * torch.pi * u2)

    def full_precision_uniform(self, shape) -> Tensor:
        """``U(0, 1)`` with each double drawn with probability proportional to its ulp.

        The binade ``[2^-k, 2^-k+1)`` is chosen with probability ``2^-k`` (``k`` = 1 + the
        number of leading zero bits of a random bit stream) and the 52 mantissa bits are
        uniform, which is exactly uniform sampling on ``(0, 1)`` followed by rounding down to
        a double (Mironov 2012, Section 5.2, ``U*``).
        """
        shape = _shape(shape)
        count = int(np.prod(shape, dtype=np.int64))
        exponent = np.ones(count, dtype=np.int64)
        pending = np.arange(count)
        while pending.size:  # a 64-bit all-zero word has probability 2^-64 per round
            w = self.words(pending.size)
            exponent[pending] += 64 - _bit_length(w)
            pending = pending[w == 0]
        exponent = np.minimum(exponent, 1074)  # below the subnormal range: never reached
        mantissa = (self.words(count) >> np.uint64(12)).astype(np.float64)
        value = np.ldexp(1.0 + mantissa / 2.0**52, -exponent)
        return torch.from_numpy(value.reshape(shape))

    def random_subsets(self, rows: int, columns: int, size: int) -> Tensor:
        """``(rows, columns)`` boolean mask with exactly ``size`` True per row, uniform subsets.

        Floyd's algorithm, vectorised over rows: for ``j = d-s .. d-1`` draw ``t`` uniform in
        ``[0, j]`` and add ``t``, or ``j`` if ``t`` is already in. Every ``s``-subset is equally
        likely. For ``s > d/2`` the complement is drawn instead (``min(s, d-s)`` rounds).
        """
        complement = size > columns - size
        draws = columns - size if complement else size
        mask = torch.zeros(rows, columns, dtype=torch.bool)
        row = torch.arange(rows)
        for j in range(columns - draws, columns):
            t = torch.clamp(torch.floor(self.uniform(rows) * (j + 1)).to(torch.int64), max=j)
            pick = torch.where(mask[row, t], j, t)
            mask[row, pick] = True
        return ~mask if complement else mask

    def __repr__(self) -> str:
        return "RandomSource(secure=True)" if self.secure else "RandomSource(generator=torch.Generator)"


__all__ = ["RandomSource"]
