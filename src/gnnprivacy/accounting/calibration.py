"""One-sided noise calibration: the epsilon reached never exceeds the target.

Bisection on ``log(noise_multiplier)`` that keeps the *upper* end of the bracket
feasible, and returns it after a full verification with the accountant (000 §4.3: return
the upper end). Feasibility of the result does not depend on epsilon being monotone in
the noise; monotonicity only makes the result near-minimal.

For events with a worst case over out-degrees (HeterPoisson under PLD), a first
bisection uses the cheap necessary condition "the largest out-degree alone is within
budget" (the accountant's first branch, a lower bound on the maximum); the bracket's
lower end is then infeasible for sure, and only the upper end needs the full maximum over
degrees. If that check fails, bisection continues with full evaluations.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Optional

from dp_accounting import dp_event

from gnnprivacy._validation import check_int, check_positive, check_probability
from gnnprivacy.accounting.accountants import make_accountant
from gnnprivacy.accounting.events import resolve_scope
from gnnprivacy.errors import InvalidParameterError


def calibrate_noise_multiplier(make_event: Callable[[float], dp_event.DpEvent], *, steps: int,
                               target_epsilon: float, target_delta: float,
                               accountant: str = "pld", unit=None, relation=None,
                               initial_noise_multiplier: float = 4.0, rtol: float = 1e-3,
                               max_noise_multiplier: float = 1e6,
                               accountant_options: Optional[dict] = None) -> float:
    """The (near-)smallest noise multiplier z with ``epsilon(steps x make_event(z)) <= target``.

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
        accountant_options: extra keyword options for :func:`make_accountant`.

    Returns:
        A noise multiplier whose epsilon, computed by the chosen accountant, is
        ``<= target_epsilon`` (verified), within a factor ``1 + rtol`` of the smallest.

    Raises:
        InvalidParameterError: bad arguments, or the target is unreachable.
    """
    steps = check_int("steps", steps, low=1)
    target = check_positive("target_epsilon", target_epsilon)
    delta = check_probability("target_delta", target_delta, allow_one=False)
    rtol = check_positive("rtol", rtol)
    start = check_positive("initial_noise_multiplier", initial_noise_multiplier)
    cap = check_positive("max_noise_multiplier", max_noise_multiplier)
    unit, relation = resolve_scope(make_event(start), unit, relation)
    options = dict(accountant_options or {})

    def passes(z: float, full: bool) -> tuple[bool, bool]:
        """(epsilon bound <= target, whether the bound was the full epsilon)."""
        acc = make_accountant(accountant, unit=unit, relation=relation, **options)
        acc.compose(make_event(z), steps)
        if full:
            return acc._epsilon_checked(delta, stop_above=target) <= target, True  # noqa: SLF001
        eps, exact = acc._first_branch_epsilon(delta)  # noqa: SLF001
        return eps <= target, exact

    lo, hi, verified = _bracket(passes, start, cap, target_epsilon)
    lo, hi, verified = _bisect(passes, lo, hi, verified, rtol, full=False)
    if verified or passes(hi, full=True)[0]:
        return hi
    lo, hi = hi, 2.0 * hi                                   # a smaller degree is the worst case
    while not passes(hi, full=True)[0]:
        lo, hi = hi, 2.0 * hi
        if hi > cap:
            raise InvalidParameterError("target_epsilon", f"reachable with noise multiplier <= "
                                        f"{cap:g}", target_epsilon)
    return _bisect(passes, lo, hi, True, rtol, full=True)[1]


def _bracket(passes, start: float, cap: float, target_epsilon: float):
    """(lo infeasible, hi passing, hi verified) with hi / lo = 2; lo = 0 if all pass."""
    ok, exact = passes(start, False)
    if ok:
        hi, verified = start, exact
        while hi > 1e-9:
            ok, exact = passes(hi / 2.0, False)
            if not ok:
                return hi / 2.0, hi, verified
            hi, verified = hi / 2.0, exact
        return 0.0, hi, verified
    lo = start
    while True:
        if 2.0 * lo > cap:
            raise InvalidParameterError("target_epsilon", f"reachable with noise multiplier <= "
                                        f"{cap:g}", target_epsilon)
        ok, exact = passes(2.0 * lo, False)
        if ok:
            return lo, 2.0 * lo, exact
        lo *= 2.0


def _bisect(passes, lo: float, hi: float, verified: bool, rtol: float, full: bool):
    while lo > 0.0 and hi / lo - 1.0 > rtol:
        mid = math.sqrt(lo * hi)
        ok, exact = passes(mid, full)
        if ok:
            hi, verified = mid, exact
        else:
            lo = mid
    return lo, hi, verified
