"""One-sided noise calibration: the epsilon reached never exceeds the target.

A bracketing root finder on ``x = log(noise_multiplier)`` for ``f(x) = log(epsilon / target)``
(epsilon decreases in the noise), run in two passes (spec 000 §4.3, issue 15):

1. **coarse**: for the PLD accountant, grids ``COARSE_FACTORS`` (100 then 10) times
   coarser, each pass starting where the previous one ended; they only locate the root
   (nothing coarse is returned);
2. **fine**: the requested accountant; the bracket ``[lo, hi]`` always keeps ``lo``
   infeasible and ``hi`` feasible (``epsilon(hi) <= target``), and the steps are secant
   steps aimed slightly on the feasible side (a safeguarded regula falsi: each step
   shrinks the bracket by at least 10 %). It stops when ``hi / lo - 1 <= rtol`` and
   returns ``hi`` after a full verification with the accountant, so the result is
   feasible whatever the shape of epsilon in the noise; monotonicity only makes it
   near-minimal. Started from the coarse root, its first step down is exactly ``rtol``,
   so a good coarse root needs two fine evaluations.

``full_check=False`` skips that full verification where the bracket rests on the largest
out-degree only: the caller must then check the full epsilon before releasing anything
(the HeterPoisson trainer computes it in a background thread while it trains, see
`prefetch`, and re-calibrates with the full check if it
fails).

For events with a worst case over out-degrees (HeterPoisson under PLD) the passes use the
cheap necessary condition "the largest out-degree alone is within budget" (the
accountant's first branch, a lower bound on the maximum; exact when the accountant has
verified that the largest degree dominates): the bracket's lower end is then infeasible
for sure, and only the upper end needs the full maximum over degrees. If that check
fails, bisection continues with full evaluations.

Results are cached on disk (`gnnprivacy.accounting.disk_cache`) keyed by the
event's parameters, so a repeated calibration costs a file read.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Optional

from dp_accounting import dp_event

from gnnprivacy._validation import (MAX_TARGET_EPSILON, check_int, check_positive,
                                   check_probability)
from gnnprivacy.accounting import disk_cache
from gnnprivacy.accounting.accountants import make_accountant
from gnnprivacy.accounting.events import resolve_scope
from gnnprivacy.accounting.pld_fast import CompositionTooLargeError
from gnnprivacy.errors import InvalidParameterError

#: the coarse passes' grids are these many times coarser than the fine one (PLD only)
COARSE_FACTORS = (100.0, 10.0)
#: their tolerances (the last is the caller's rtol: the fine root sits next to it)
_COARSE_RTOLS = (5e-2, 0.0)
_MIN_NOISE = 1e-9
#: the largest target epsilon calibrated (the trainers' supported range ends there; beyond it
#: the PLD grid and exp(epsilon) overflow, and such a budget promises nothing anyway)
MAX_EPSILON = MAX_TARGET_EPSILON


def calibrate_noise_multiplier(make_event: Callable[[float], dp_event.DpEvent], *, steps: int,
                               target_epsilon: float, target_delta: float,
                               accountant: str = "pld", unit=None, relation=None,
                               initial_noise_multiplier: float = 4.0, rtol: float = 1e-3,
                               max_noise_multiplier: float = 1e6,
                               accountant_options: Optional[dict] = None,
                               use_disk_cache: bool = True, full_check: bool = True) -> float:
    """The (near-)smallest noise multiplier z with ``epsilon(steps x make_event(z)) <= target``.

    *Privacy*: one-sided: the epsilon reached at the returned noise multiplier never exceeds
    ``target_epsilon`` (a property test checks it over parameter grids).

    Args:
        make_event: maps a noise multiplier to the event of ONE step.
        steps: number of steps composed.
        target_epsilon: epsilon budget (> 0).
        target_delta: delta (in [0, 1)).
        accountant: ``"pld"`` (default) or ``"rdp"``.
        unit: privacy unit of the accountant (default: declared by the event, else NODE).
        relation: neighbouring relation (default: declared by the event, else ADD_OR_REMOVE).
        initial_noise_multiplier: starting guess; the bracket grows from it by factors of 2.
        rtol: stop when ``upper / lower - 1 <= rtol``.
        max_noise_multiplier: give up above this noise.
        accountant_options: extra keyword options for `make_accountant`.
        use_disk_cache: read/write the result in the on-disk accounting cache.
        full_check: verify the result with the full epsilon (every covering degree).
            ``False``: where only the largest degree was evaluated the caller must check
            the full epsilon at the result before releasing anything.

    Returns:
        A noise multiplier whose epsilon, computed by the chosen accountant, is
        ``<= target_epsilon`` (verified), within a factor ``1 + rtol`` of the smallest.

    Raises:
        InvalidParameterError: bad arguments (a target above `MAX_EPSILON`), or the
            target is unreachable.
    Example:
        >>> from gnnprivacy.accounting import calibrate_noise_multiplier, dpsgd_event, make_accountant
        >>> z = calibrate_noise_multiplier(lambda z: dpsgd_event(sample_rate=0.01, noise_multiplier=z),
        ...                                steps=1000, target_epsilon=2.0, target_delta=1e-5)
        >>> acc = make_accountant("pld")
        >>> _ = acc.compose(dpsgd_event(sample_rate=0.01, noise_multiplier=z), count=1000)
        >>> acc.get_epsilon(1e-5) <= 2.0
        True
    """
    steps = check_int("steps", steps, low=1)
    target = check_positive("target_epsilon", target_epsilon)
    if target > MAX_EPSILON:
        raise InvalidParameterError("epsilon", f"at most {MAX_EPSILON:g} (the accountants "
                                    "overflow beyond; such a budget promises nothing anyway)",
                                    target_epsilon)
    delta = check_probability("target_delta", target_delta, allow_one=False)
    rtol = check_positive("rtol", rtol)
    start = check_positive("initial_noise_multiplier", initial_noise_multiplier)
    cap = check_positive("max_noise_multiplier", max_noise_multiplier)
    unit, relation = resolve_scope(make_event(start), unit, relation)
    options = dict(accountant_options or {})
    key = None
    if use_disk_cache:
        key = disk_cache.key_of("calibration", repr(make_event(1.0)), repr(make_event(2.0)),
                                steps, target, delta, accountant, unit.value, relation.value,
                                rtol, cap, sorted((k, repr(v)) for k, v in options.items()),
                                "calibration-v2" if full_check else "calibration-v2-first")
        hit = disk_cache.load_json(key)
        if hit is not None:
            return float(hit["noise_multiplier"])

    def evaluate(z: float, full: bool, opts: dict) -> tuple[float, bool]:
        """(epsilon bound, whether it is the full epsilon)."""
        acc = make_accountant(accountant, unit=unit, relation=relation, **opts)
        try:
            acc.compose(make_event(z), steps)
            return _evaluate(acc, full)
        except InvalidParameterError as err:
            if err.name != "noise_multiplier" and not isinstance(err, CompositionTooLargeError):
                raise
            return math.inf, True           # too little noise to account: infeasible
        except (OverflowError, FloatingPointError):
            return math.inf, True           # so little noise that the privacy loss overflows: infeasible

    def _evaluate(acc, full: bool) -> tuple[float, bool]:
        if full:
            return acc._epsilon_checked(delta, stop_above=target), True  # noqa: SLF001
        return acc._first_branch_epsilon(delta)  # noqa: SLF001

    def unreachable():
        return InvalidParameterError("target_epsilon", f"reachable with noise multiplier <= "
                                     f"{cap:g}", target_epsilon)

    guess = start
    if accountant == "pld":
        vdi = options.get("value_discretization_interval")
        if vdi is None:
            from gnnprivacy.accounting.pld_accountant import DEFAULT_VALUE_DISCRETIZATION_INTERVAL
            vdi = DEFAULT_VALUE_DISCRETIZATION_INTERVAL
        from gnnprivacy.accounting.pld_accountant import coarser

        grow, slope = 2.0, None
        for factor, pass_rtol in zip(COARSE_FACTORS, _COARSE_RTOLS):
            pass_rtol = max(pass_rtol, rtol)
            coarse = {**options, "value_discretization_interval": coarser(vdi, factor)}
            if slope is not None and slope < 0:
                guess = _newton_guess(lambda z, c=coarse: evaluate(z, False, c), guess,
                                      slope, target, pass_rtol)
                grow = 1.0 + pass_rtol * (1 - 1e-6)
            found = _root(lambda z, c=coarse: evaluate(z, False, c), guess, cap, target,
                          pass_rtol, unreachable, grow=grow)
            guess, slope = found[1], found[3] if found[3] is not None else slope
    # from the last coarse root, the first step is exactly rtol (just inside it after rounding)
    lo, hi, verified = _root(lambda z: evaluate(z, False, options), guess, cap, target, rtol,
                             unreachable, grow=4.0 if guess == start else 1.0 + rtol * (1 - 1e-6))[:3]
    if not verified and full_check:         # else the caller checks the full epsilon
        if evaluate(hi, True, options)[0] <= target:
            verified = True
        else:                                               # a smaller degree is the worst case
            lo, hi = hi, 2.0 * hi
            while evaluate(hi, True, options)[0] > target:
                lo, hi = hi, 2.0 * hi
                if hi > cap:
                    raise unreachable()
            lo, hi = _root(lambda z: evaluate(z, True, options), hi, cap, target, rtol,
                           unreachable, bracket=(lo, hi))[:2]
    if key is not None:
        disk_cache.save_json(key, {"noise_multiplier": hi})
    return hi


def _newton_guess(evaluate, z: float, slope: float, target: float, rtol: float) -> float:
    """One evaluation at the previous pass's root, then a Newton step on log-log with the
    previous pass's slope, aimed ``rtol / 2`` inside the feasible side (near the root a
    finer grid lowers epsilon by about a constant factor)."""
    eps = evaluate(z)[0]
    if not (math.isfinite(eps) and eps > 0):
        return z
    return z * math.exp(-(math.log(eps) - math.log(target)) / slope) * (1.0 + 0.5 * rtol)


def _root(evaluate, start: float, cap: float, target: float, rtol: float, unreachable,
          bracket: Optional[tuple[float, float]] = None, grow: float = 4.0) -> tuple:
    """Bracket then shrink: ``(lo infeasible or 0, hi feasible, hi's bound was exact,
    slope)``; ``slope`` is d log(epsilon) / d log(noise) across the final bracket (``None``
    where it is not finite).

    ``evaluate(z) -> (epsilon bound, exact)``; feasible means ``bound <= target``. The
    bracket grows from ``start`` by ``grow``, squared after each miss (at most 4x).
    """
    log_t = math.log(target)

    def f(z):
        eps, exact = evaluate(z)
        if eps <= 0.0:
            return -math.inf, exact
        return (math.log(eps) - log_t if math.isfinite(eps) else math.inf), exact

    if bracket is not None:
        lo, hi = bracket
        f_lo, f_hi, verified = f(lo)[0], f(hi)[0], True
    else:
        f0, exact0 = f(start)
        if f0 <= 0:
            hi, f_hi, verified = start, f0, exact0
            lo, f_lo = None, None
            z, factor = start, grow
            while lo is None:
                z, factor = z / factor, min(4.0, factor * factor)
                if z < _MIN_NOISE:
                    return 0.0, hi, verified, None
                fz, exact = f(z)
                if fz <= 0:
                    hi, f_hi, verified = z, fz, exact
                else:
                    lo, f_lo = z, fz
        else:
            lo, f_lo = start, f0
            hi = None
            z, factor = start, grow
            while hi is None:
                if factor * z > cap:
                    if z < cap:
                        fz, exact = f(cap)
                        if fz <= 0:
                            hi, f_hi, verified = cap, fz, exact
                            break
                    raise unreachable()
                z, factor = factor * z, min(4.0, factor * factor)
                fz, exact = f(z)
                if fz <= 0:
                    hi, f_hi, verified = z, fz, exact
                else:
                    lo, f_lo = z, fz
    a, b = math.log(lo), math.log(hi)
    step_in = math.log1p(rtol) / 2.0
    aim = 1.0                       # +1: aim just above the root (feasible side), -1: below
    while hi / lo - 1.0 > rtol:
        width = b - a
        if math.isfinite(f_lo) and math.isfinite(f_hi) and f_lo > f_hi:
            x = b - f_hi * width / (f_hi - f_lo) + aim * step_in     # secant, nudged
        else:
            x = a + width / 2.0
        x = min(max(x, a + 0.1 * width), b - 0.1 * width)
        if b - x < 2.0 * step_in:                                # close the bracket from below
            x = max(a + 0.1 * width, b - 2.0 * step_in)
        z = math.exp(x)
        fz, exact = f(z)
        if fz <= 0:
            b, hi, f_hi, verified = x, z, fz, exact
            aim = -1.0                      # next, try to land just below the root
        else:
            a, lo, f_lo = x, z, fz
            aim = 1.0
    slope = None
    if math.isfinite(f_lo) and math.isfinite(f_hi) and b > a:
        slope = (f_hi - f_lo) / (b - a)
    return lo, hi, verified, slope
