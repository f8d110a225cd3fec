"""One-dimensional numeric LDP mechanisms used as FeatureRR's baselines (spec 001 §5.3).

Every mechanism takes values ``x in [-1, 1]`` (elementwise, any shape) and returns an unbiased
randomised estimate. ``epsilon`` is the budget of *one value*; applied to every coordinate of a
``d``-vector with ``epsilon = eps_f / d`` the vector is ``eps_f``-LDP by basic composition.

* `Duchi` (Duchi, Jordan, Wainwright 2018): ``+-(e+1)/(e-1)``, ``P[+] = 1/2 + x (e-1)/(2e+2)``.
* `Piecewise` (PM; Wang et al. ICDE 2019): uniform on ``[l(x), r(x)]`` w.p. ``z/(z+1)``,
  ``z = e^{eps/2}``, else on the rest of ``[-C, C]``.
* `Hybrid` (HM; Wang et al.): Duchi if ``eps <= 0.61``, else PM w.p. ``1 - e^{-eps/2}``.
* `ThreeOutput` (Zhao et al. IoT-J 2020): outputs ``{-C, 0, C}``.
* `PMSub` (Zhao et al.): sub-optimal piecewise with ``t = e^{eps/3}``.

*Privacy*: each output (density or probability) ratio between any two inputs is at most
``e^epsilon``; unit ``FEATURE`` (one value of one node), relation ``REPLACE``; event
`pure_epsilon_event` at ``epsilon`` per value.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from gnnprivacy._validation import check_positive
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.mechanisms.base import Mechanism, check_float_tensor, pure_epsilon_event

__all__ = ["Duchi", "FEATURE_MECHANISMS", "Hybrid", "PMSub", "Piecewise", "ThreeOutput",
           "three_output_params"]


def _check_x(x) -> Tensor:
    x = check_float_tensor(x, "x").to(torch.float64)
    if bool(((x < -1) | (x > 1)).any()):
        raise InvalidParameterError("x", "values in [-1, 1]", "values outside")
    return x


def _u(shape, generator) -> Tensor:
    return torch.rand(shape, generator=generator, dtype=torch.float64)


class _OneDim(Mechanism):
    _repr_fields = ("epsilon",)

    def __init__(self, *, epsilon: float):
        self.epsilon = check_positive("epsilon", epsilon)
        self.unit = PrivacyUnit.FEATURE
        self.relation = NeighboringRelation.REPLACE
        self.sensitivity = 2.0
        self.secure_mode = False

    @property
    def event(self):
        return pure_epsilon_event(self.epsilon)

    def __call__(self, x, *, generator=None):
        x = _check_x(x)
        return self._sample(x, generator).to(torch.float64)


class Duchi(_OneDim):
    """Duchi et al.'s binary mechanism (see the module docstring)."""

    @property
    def bound(self) -> float:
        e = math.exp(self.epsilon)
        return (e + 1) / (e - 1)

    def prob_positive(self, x: Tensor) -> Tensor:
        e = math.exp(self.epsilon)
        return 0.5 + x * (e - 1) / (2 * e + 2)

    def _sample(self, x, generator):
        return torch.where(_u(x.shape, generator) < self.prob_positive(x), self.bound, -self.bound)


class Piecewise(_OneDim):
    """The piecewise mechanism (PM)."""

    def params(self, x: Tensor):
        z = math.exp(self.epsilon / 2)
        C = (z + 1) / (z - 1)
        left = (C + 1) * x / 2 - (C - 1) / 2
        return z, C, left, left + C - 1

    def density(self, x: Tensor, y: Tensor) -> Tensor:
        """Output density at ``y`` given ``x`` (for the ratio tests)."""
        z, C, l, r = self.params(x)
        inside = (y >= l) & (y <= r)
        p_in = z / (z + 1) / (r - l)
        p_out = 1 / (z + 1) / (2 * C - (r - l))
        return torch.where((y < -C) | (y > C), 0.0, torch.where(inside, p_in, p_out))

    def _sample(self, x, generator):
        z, C, l, r = self.params(x)
        u1, u2 = _u(x.shape, generator), _u(x.shape, generator)
        centre = l + u2 * (r - l)
        # Outside [l, r]: a uniform point on [-C, l) u (r, C], lengths (l + C) and (C - r).
        left_len, right_len = l + C, C - r
        s = u2 * (left_len + right_len)
        outside = torch.where(s < left_len, -C + s, r + (s - left_len))
        return torch.where(u1 < z / (z + 1), centre, outside)


class Hybrid(_OneDim):
    """The hybrid mechanism (HM): Duchi for small epsilon, else a mixture of PM and Duchi."""

    def _sample(self, x, generator):
        duchi = Duchi(epsilon=self.epsilon)._sample(x, generator)
        if self.epsilon <= 0.61:
            return duchi
        pm = Piecewise(epsilon=self.epsilon)._sample(x, generator)
        return torch.where(_u(x.shape, generator) < 1 - math.exp(-self.epsilon / 2), pm, duchi)


def three_output_params(epsilon: float) -> tuple[float, float, float, float]:
    """``(a, b, d, C)`` of the three-output mechanism (spec 001 §5.3)."""
    e = math.exp(epsilon)
    if epsilon < math.log(2):
        a = 0.0
    elif epsilon < math.log(5.53):
        d0 = e**4 + 14 * e**3 + 50 * e**2 - 2 * e + 25
        d1 = -2 * e**6 - 42 * e**5 - 270 * e**4 - 404 * e**3 - 918 * e**2 + 30 * e - 250
        a = -(1 / 6) * (-e**2 - 4 * e - 5 + 2 * math.sqrt(d0) * math.cos(
            math.pi / 3 + (1 / 3) * math.acos(-d1 / (2 * d0**1.5))))
    else:
        a = e / (e + 2)
    b = a * (e - 1) / e
    d = (a + 1) * (e - 1) / (2 * (e + 1))
    C = e * (e + 1) / ((e - 1) * (e - a))
    return a, b, d, C


class ThreeOutput(_OneDim):
    """The three-output mechanism with outputs ``{-C, 0, C}``."""

    def probabilities(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``P(-C), P(0), P(C)`` given ``x``."""
        a, b, d, _ = three_output_params(self.epsilon)
        p0 = a - b * x.abs()
        pos = x >= 0
        p_plus = torch.where(pos, (1 - a) / 2 + d * x, (1 - a) / 2 + (d - b) * x)
        p_minus = torch.where(pos, (1 - a) / 2 - (d - b) * x, (1 - a) / 2 - d * x)
        return p_minus, p0, p_plus

    def _sample(self, x, generator):
        C = three_output_params(self.epsilon)[3]
        p_minus, p0, _ = self.probabilities(x)
        u = _u(x.shape, generator)
        return torch.where(u < p_minus, -C, torch.where(u < p_minus + p0, 0.0, C))


class PMSub(_OneDim):
    """The sub-optimal piecewise mechanism (PM-SUB)."""

    def params(self, x: Tensor):
        e, t = math.exp(self.epsilon), math.exp(self.epsilon / 3)
        C = (e + t) * (t + 1) / (t * (e - 1))
        g1 = (e + t) * (x * t - 1) / (t * (e - 1))
        g2 = (e + t) * (x * t + 1) / (t * (e - 1))
        return e, t, C, g1, g2

    def density(self, x: Tensor, y: Tensor) -> Tensor:
        e, t, C, g1, g2 = self.params(x)
        mid = e / (e + t) / (g2 - g1)
        left = (x + 1) * t / (2 * t + 2 * e) / (g1 + C)
        right = (1 - x) * t / (2 * t + 2 * e) / (C - g2)
        return torch.where((y < -C) | (y > C), 0.0,
                           torch.where(y < g1, left, torch.where(y <= g2, mid, right)))

    def _sample(self, x, generator):
        e, t, C, g1, g2 = self.params(x)
        p_left = (x + 1) * t / (2 * t + 2 * e)
        p_mid = e / (e + t)
        u1, u2 = _u(x.shape, generator), _u(x.shape, generator)
        left = -C + u2 * (g1 + C)
        mid = g1 + u2 * (g2 - g1)
        right = g2 + u2 * (C - g2)
        return torch.where(u1 < p_left, left, torch.where(u1 < p_left + p_mid, mid, right))


#: name -> mechanism class, as used by the HeteroRR baselines
FEATURE_MECHANISMS = {"duchi": Duchi, "piecewise": Piecewise, "hybrid": Hybrid,
                      "three-output": ThreeOutput, "pm-sub": PMSub}
