"""Boundary checks with one message shape: parameter, expected, received."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from numbers import Integral, Real

from gnnprivacy.errors import InvalidParameterError, UnknownNameError


#: a number as YAML 1.2 and Python read it, which YAML 1.1 (PyYAML) reads as text: ``1e-3``
_NUMBER_TEXT = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def number_text_hint(value: object) -> str:
    """What to write when ``value`` is text that reads as a number, else ``""``: YAML 1.1
    (PyYAML) reads ``1e-3`` as a string (write ``1.0e-3``); a quoted ``'0.5'`` is text."""
    if not (isinstance(value, str) and _NUMBER_TEXT.match(value.strip())):
        return ""
    mantissa, _, exp = value.strip().lower().partition("e")
    if exp and "." not in mantissa:
        return f" (YAML 1.1 reads {value} as text, not a number: write {mantissa}.0e{exp})"
    return f" (text, not a number: write {value.strip()} without quotes)"


def _is_real(value: object) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def check_real(name: str, value: object, *, low: float | None = None, high: float | None = None,
               low_open: bool = False, high_open: bool = False, where: str | None = None) -> float:
    """Return ``value`` as float if it is a finite real inside the interval, else raise.

    Args:
        name: parameter name, used in the message.
        value: the received value.
        low, high: interval bounds (``None`` = unbounded).
        low_open, high_open: whether the bound is excluded.
    """
    lo = "-inf" if low is None else f"{low:g}"
    hi = "inf" if high is None else f"{high:g}"
    expected = f"a real number in {'(' if low_open or low is None else '['}{lo}, {hi}{')' if high_open or high is None else ']'}"
    if not _is_real(value) or math.isnan(float(value)):
        raise InvalidParameterError(name, expected + number_text_hint(value), value, where=where)
    v = float(value)
    if low is not None and (v < low or (low_open and v == low)):
        raise InvalidParameterError(name, expected, value, where=where)
    if high is not None and (v > high or (high_open and v == high)):
        raise InvalidParameterError(name, expected, value, where=where)
    if (low is None or high is None) and math.isinf(v) and not (high is None and v > 0):
        raise InvalidParameterError(name, expected, value, where=where)
    return v


def check_positive(name: str, value: object, *, where: str | None = None) -> float:
    """A finite real > 0."""
    v = check_real(name, value, low=0.0, low_open=True, where=where)
    if math.isinf(v):
        raise InvalidParameterError(name, "a finite real number > 0", value, where=where)
    return v


def check_probability(name: str, value: object, *, allow_zero: bool = True, allow_one: bool = True,
                      where: str | None = None) -> float:
    """A real in [0, 1] (ends optionally excluded)."""
    return check_real(name, value, low=0.0, high=1.0, low_open=not allow_zero,
                      high_open=not allow_one, where=where)


def check_int(name: str, value: object, *, low: int | None = None, high: int | None = None,
              where: str | None = None) -> int:
    """An integer (not bool) in [low, high]."""
    rng = f"[{'-inf' if low is None else low}, {'inf' if high is None else high}]"
    expected = f"an integer in {rng}"
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise InvalidParameterError(name, expected + number_text_hint(value), value, where=where)
    v = int(value)
    if (low is not None and v < low) or (high is not None and v > high):
        raise InvalidParameterError(name, expected, value, where=where)
    return v


def check_choice(name: str, value: object, choices: Iterable[str]) -> str:
    """``value`` must be one of ``choices``; the error lists them."""
    choices = list(choices)
    if value not in choices:
        raise UnknownNameError(name, value, choices)
    return value  # type: ignore[return-value]


#: The largest epsilon a pure-DP event takes: its randomized-response probability
#: ``2 / (e^eps + 1)`` underflows float64 beyond about 708, and the accountant would then see a
#: noiseless mechanism (epsilon = inf).
MAX_PURE_EPSILON = 700.0


def check_pure_epsilon(name: str, value: object) -> float:
    """A finite ``0 < epsilon <= MAX_PURE_EPSILON``, else `InvalidParameterError`."""
    eps = check_positive(name, value)
    if not eps <= MAX_PURE_EPSILON:
        raise InvalidParameterError(
            name, f"<= {MAX_PURE_EPSILON:g} (e^-epsilon underflows float64 beyond ~708, so the "
            "accountant cannot represent the mechanism; an epsilon this large protects nothing)", value)
    return eps


#: the range of a calibrated trainer's target epsilon (issue 22 item 6): below it the noise
#: exceeds what the accountants resolve within the noise cap, above it the PLD grid step
#: overflows (and the run protects nothing)
MIN_TARGET_EPSILON = 1e-3
MAX_TARGET_EPSILON = 1e5
#: the smallest delta the accountants state: the PLD truncates tails of about 1e-15 per
#: composition into its infinite-loss mass, so a delta near it reads as epsilon infinity
MIN_DELTA = 1e-12


def check_target_epsilon(name: str, value: object) -> float:
    """A target epsilon in ``[MIN_TARGET_EPSILON, MAX_TARGET_EPSILON]`` for a calibrated
    trainer, else `InvalidParameterError` naming the range."""
    eps = check_positive(name, value)
    if not MIN_TARGET_EPSILON <= eps <= MAX_TARGET_EPSILON:
        raise InvalidParameterError(
            name, f"in the supported range [{MIN_TARGET_EPSILON:g}, {MAX_TARGET_EPSILON:g}] "
            "(outside it the accountants cannot calibrate the noise reliably)", value)
    return eps


def check_delta_range(name: str, value: object, *, allow_zero: bool = False) -> float:
    """A delta in ``[MIN_DELTA, 1)`` (or exactly 0 where ``allow_zero``), else
    `InvalidParameterError` naming the range."""
    delta = check_real(name, value, low=0.0, high=1.0, high_open=True)
    if delta == 0.0 and allow_zero:
        return delta
    if not delta >= MIN_DELTA:
        raise InvalidParameterError(
            name, f"in the supported range [{MIN_DELTA:g}, 1) (the PLD accountant cannot "
            "resolve a smaller delta: it would report epsilon infinity)", value)
    return delta
