"""Vectorised equivalents of two dp_accounting PLD operations on dense PMFs.

``PrivacyLossDistribution.self_compose`` and ``get_epsilon_for_delta`` are the same
arithmetic as dp_accounting 0.6 (``common.self_convolve`` and
``pld_pmf._get_epsilon_for_delta``) with the two Python loops replaced by array
operations:

* the Chernoff truncation bounds of a self-composition evaluate the log moment generating
  function at 40 orders, one ``logsumexp`` call per order (about 40 % of a HeterPoisson
  branch evaluation on a fine grid); here one matrix ``logsumexp``;
* epsilon for a delta walks the losses from the largest down in Python (early exit);
  here the running masses are cumulative sums and the stopping index is found at once.

Results agree with the library's to rounding (the tests compare both on random PMFs and
on HeterPoisson PLDs); any PMF that is not dense goes to the library unchanged.
"""

from __future__ import annotations

import math

import numpy as np
from dp_accounting.pld import pld_pmf
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from scipy import fft

from gnnprivacy.errors import InvalidParameterError

#: dp_accounting's default tail mass truncation of a self-composition
SELF_COMPOSE_TAIL = 1e-15
#: the most grid points a composed PMF may take (about 256 MiB, twice that during the
#: FFT): ``account --steps 1000000000000`` asked numpy for 226 GiB (issue 24)
MAX_COMPOSED_POINTS = 2 ** 25


class CompositionTooLargeError(InvalidParameterError):
    """A self-composition whose PLD would not fit in `MAX_COMPOSED_POINTS` points
    (too many steps for the noise); named ``steps``."""


def self_compose(pld: pld_lib.PrivacyLossDistribution, num_times: int,
                 tail_mass_truncation: float = SELF_COMPOSE_TAIL
                 ) -> pld_lib.PrivacyLossDistribution:
    """``pld.self_compose(num_times)`` (dense PMFs vectorised)."""
    remove = _self_compose_pmf(pld._pmf_remove, num_times, tail_mass_truncation)  # noqa: SLF001
    if pld._symmetric:                                                            # noqa: SLF001
        return pld_lib.PrivacyLossDistribution(remove)
    add = _self_compose_pmf(pld._pmf_add, num_times, tail_mass_truncation)        # noqa: SLF001
    return pld_lib.PrivacyLossDistribution(remove, add)


def epsilon_for_delta(pld: pld_lib.PrivacyLossDistribution, delta: float) -> float:
    """``pld.get_epsilon_for_delta(delta)`` (dense PMFs vectorised)."""
    eps = _pmf_epsilon(pld._pmf_remove, delta)                                    # noqa: SLF001
    if pld._symmetric:                                                            # noqa: SLF001
        return eps
    return max(eps, _pmf_epsilon(pld._pmf_add, delta))                            # noqa: SLF001


def _is_dense(pmf) -> bool:
    return type(pmf) is pld_pmf.DensePLDPmf


def convolve_bounds(probs: np.ndarray, num_times: int, tail_mass_truncation: float
                    ) -> tuple[int, int]:
    """``common.compute_self_convolve_bounds`` with the 40 orders in one array pass."""
    size = len(probs)
    upper, lower = (size - 1) * num_times, 0
    if tail_mass_truncation == 0:
        return lower, upper
    ks = np.concatenate((np.arange(-20, 0), np.arange(1, 21)))
    orders = ks / size
    # MGF at order k / size is sum_i p_i b^(k i) with b = e^(1/size): powers of one exp
    # array instead of 40 (every term lies in [e^-20, e^20]: no overflow)
    up = np.exp(np.arange(size) / size)
    down = 1.0 / up
    mgfs = np.empty(len(ks))
    cur_up, cur_down = np.ones(size), np.ones(size)
    for k in range(1, 21):
        cur_up *= up
        cur_down *= down
        mgfs[19 + k] = probs @ cur_up                   # order +k / size
        mgfs[20 - k] = probs @ cur_down                 # order -k / size
    with np.errstate(divide="ignore", invalid="ignore"):
        log_mgfs = np.log(mgfs)
    log_term = math.log(2 / tail_mass_truncation)
    for order, log_mgf in zip(orders.tolist(), log_mgfs.tolist()):
        bound = (num_times * log_mgf + log_term) / order
        if not math.isfinite(bound):
            continue
        if order > 0:
            upper = min(upper, math.ceil(bound))
        else:
            lower = max(lower, math.floor(bound))
    return lower, upper


def _self_compose_pmf(pmf, num_times: int, tail_mass_truncation: float):
    if (type(pmf) is pld_pmf.SparsePLDPmf and num_times > 1
            and pmf.size ** num_times > pld_pmf._MAX_PMF_SPARSE_SIZE):      # noqa: SLF001
        pmf = pmf.to_dense_pmf()              # what the library does next, on the fast path
    if not _is_dense(pmf) or num_times <= 0:
        return pmf.self_compose(num_times, tail_mass_truncation)
    probs = pmf._probs                                                            # noqa: SLF001
    lower, upper = convolve_bounds(probs, num_times, tail_mass_truncation)
    length = upper - lower + 1
    if length > MAX_COMPOSED_POINTS:
        raise CompositionTooLargeError(
            "steps", f"few enough for the composed PLD to fit in {MAX_COMPOSED_POINTS:,} grid "
            f"points at this noise (it needs {length:.3g}); use fewer steps, more noise, or "
            "the RDP accountant", num_times)
    fast_len = fft.next_fast_len(max(length, len(probs)))
    convolved = np.real(fft.ifft(fft.fft(probs, fast_len) ** num_times))
    out = np.array(np.roll(convolved, -lower)[:length])
    infinity = tail_mass_truncation - math.expm1(
        num_times * math.log1p(-pmf._infinity_mass))                              # noqa: SLF001
    return pld_pmf.DensePLDPmf(pmf._discretization, pmf._lower_loss * num_times + lower,  # noqa: SLF001
                               out, infinity, pmf._pessimistic_estimate)          # noqa: SLF001


def _pmf_epsilon(pmf, delta: float) -> float:
    """``pld_pmf._get_epsilon_for_delta`` on a dense PMF, losses taken largest first."""
    if not _is_dense(pmf):
        return pmf.get_epsilon_for_delta(delta)
    infinity = pmf._infinity_mass                                                 # noqa: SLF001
    if infinity > delta:
        return math.inf
    probs = np.flip(pmf._probs)                                                   # noqa: SLF001
    size = len(probs)
    top = (pmf._lower_loss + size - 1) * pmf._discretization                      # noqa: SLF001
    losses = top - np.arange(size) * pmf._discretization                          # noqa: SLF001
    # masses BEFORE adding loss i (index i) and after the last one (index size)
    upper = np.cumsum(np.concatenate(([infinity], probs)))
    # exp(-loss) overflows only for very negative losses, which come last, past the stopping
    # index (the walk stops by loss 0 unless the PMF holds no more than delta): never read
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        lower = np.cumsum(np.concatenate(([0.0], np.exp(-losses) * probs)))
        stop = ((upper[:-1] > delta) & (lower[:-1] > 0)
                & (np.log((upper[:-1] - delta) / lower[:-1]) >= losses))
    # a loss so large that exp(-loss) underflows: the library returns it at once
    huge = (upper[1:] >= delta) & (lower[1:] == 0)
    first_stop = int(np.argmax(stop)) if stop.any() else size
    first_huge = int(np.argmax(huge)) if huge.any() else size
    if first_huge < first_stop:
        return max(0.0, float(losses[first_huge]))
    mass_upper, mass_lower = float(upper[first_stop]), float(lower[first_stop])
    if mass_upper <= mass_lower + delta:
        return 0
    return math.log((mass_upper - delta) / mass_lower)
