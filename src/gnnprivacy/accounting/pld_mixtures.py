"""Privacy loss distributions of Gaussian mixtures, built on dp_accounting's public API.

* `mixture_of_gaussians_pld`: the PLD of the mixture-of-Gaussians (MoG) mechanism
  ``N(0, s^2)`` vs ``sum_j w_j N(c_j, s^2)`` (Choquette-Choo et al. 2023), identical to
  ``dp_accounting.pld.privacy_loss_distribution.from_mixture_gaussian_mechanism``
  (pessimistic connect-the-dots, Doroshenko et al. 2022) but with the inverse privacy loss
  computed by a vectorised bisection instead of a recursive scalar one; that inverse is
  the bottleneck of dp_accounting's builder (about 35 us per grid point), and HeterPoisson
  calibration builds many such PLDs on fine grids.
* `revealed_gaussian_mixture_pld`: the PLD of a Gaussian mechanism whose
  sensitivity is drawn from a known distribution *and revealed* (the mixture of the
  Gaussian PLDs); by joint convexity of the hockey-stick divergence it dominates any
  mechanism that is, conditioned on the draw, a Gaussian mechanism of that sensitivity
  (002 Lemma 4 in PLD form).
"""

from __future__ import annotations

import math

import numpy as np
from dp_accounting.pld import common as pld_common
from dp_accounting.pld import pld_pmf
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.pld import privacy_loss_mechanism as plm
from scipy import special

from gnnprivacy.errors import InvalidParameterError

_COARSE_POINTS = 8193
_NEWTON_STEPS = 4
_ROUNDING_STEPS = 64


class VectorizedMixtureGaussianPrivacyLoss(plm.MixtureGaussianPrivacyLoss):
    """dp_accounting's ``MixtureGaussianPrivacyLoss`` with a vectorised inverse.

    Only `inverse_privacy_losses` is replaced; its contract is unchanged: for each
    privacy loss l (non-decreasing input) return the smallest multiple of ``precision``,
    x, with ``privacy_loss(x) <= l`` (the loss is non-increasing in x).
    """

    def __init__(self, standard_deviation: float, sensitivities, sampling_probs, **kwargs):
        super().__init__(standard_deviation, sensitivities, sampling_probs, **kwargs)
        shifts = np.asarray(self.sensitivities, dtype=float)
        probs = np.asarray(self.sampling_probs, dtype=float)
        variance = float(standard_deviation) ** 2
        self._vec_slopes = shifts / variance
        self._vec_consts = np.log(probs) - shifts ** 2 / (2.0 * variance)
        self._vec_positive_mass = float(np.clip(probs[shifts > 0].sum(), 0.0, 1.0))
        self._vec_max_shift = float(shifts.max())
        self._vec_std = float(standard_deviation)

    # The four methods below compute exactly what dp_accounting's do (same formulas, same
    # scipy kernels ``ndtr`` / ``log_ndtr`` that ``scipy.stats.norm`` calls) without the
    # per-call overhead of frozen ``scipy.stats`` distributions and of ``logsumexp(b=...)``,
    # and with the monotone fix-up of the deltas as one reversed running maximum instead of
    # a Python loop; together they were about a third of a fine-grid HeterPoisson PLD build.

    def noise_cdf(self, x):
        return special.ndtr(np.asarray(x, dtype=float) / self._vec_std)

    def noise_log_cdf(self, x):
        return special.log_ndtr(np.asarray(x, dtype=float) / self._vec_std)

    def mu_lower_log_cdf(self, x):
        if self.adjacency_type != plm.AdjacencyType.ADD:
            return super().mu_lower_log_cdf(x)
        points = np.add.outer(np.atleast_1d(np.asarray(x, dtype=float)), -self.sensitivities)
        logs = self.noise_log_cdf(points)
        top = np.max(logs, axis=1, keepdims=True)
        top = np.where(np.isfinite(top), top, 0.0)
        with np.errstate(divide="ignore"):
            out = np.log(np.sum(np.exp(logs - top) * self.sampling_probs, axis=1)) + top[:, 0]
        return out[0] if np.ndim(x) == 0 else out

    def get_delta_for_epsilon(self, epsilon):
        if np.ndim(epsilon) == 0:
            return super().get_delta_for_epsilon(epsilon)
        epsilons = np.atleast_1d(np.asarray(epsilon, dtype=float))
        if not np.all(epsilons[1:] >= epsilons[:-1]):
            raise ValueError(f"Epsilon values must be non-decreasing: {epsilons}")
        deltas = np.zeros_like(epsilons, dtype=float)
        rate = self._sampling_prob
        if rate == 1.0:
            inverse = np.full(epsilons.shape, True)
        elif self.adjacency_type == plm.AdjacencyType.ADD:
            inverse = epsilons < -np.log1p(-rate)
        else:
            inverse = epsilons > np.log1p(-rate)
            deltas[~inverse] = -np.expm1(epsilons[~inverse])
        cutoffs = self.inverse_privacy_losses(epsilons[inverse])
        deltas[inverse] = self.mu_upper_cdf(cutoffs) - np.exp(
            epsilons[inverse] + self.mu_lower_log_cdf(cutoffs))
        deltas = np.clip(deltas, 0, 1)
        return np.maximum.accumulate(deltas[::-1])[::-1].copy()  # non-increasing, as upstream

    def privacy_loss_tail(self, precision: float = 1e-4) -> plm.TailPrivacyLossDistribution:
        """dp_accounting's tail, made robust where its binary search finds no point.

        Under REMOVE adjacency dp_accounting searches ``[z - max_shift, z]`` for the point
        where the mixture's cdf equals the truncated tail mass; when (nearly) all mass sits on
        the largest shift, rounding makes the cdf at the left end exceed the target and the
        search returns ``None`` (a ``TypeError`` further down). Any left truncation point is
        sound for the pessimistic estimate (the mass below it goes to +inf), so the left end
        of the interval is used then.
        """
        if (self.adjacency_type != plm.AdjacencyType.REMOVE or not self._pessimistic_estimate):
            return super().privacy_loss_tail(precision)
        tail_mass = 0.5 * np.exp(self._log_mass_truncation_bound)
        z_value = self._gaussian_random_variable.ppf(tail_mass)
        upper_x = -z_value
        lower_x = pld_common.inverse_monotone_function(
            self.mu_upper_cdf, tail_mass,
            pld_common.BinarySearchParameters(z_value - self._max_sens, z_value,
                                              tolerance=precision), increasing=True)
        if lower_x is None:
            lower_x = z_value - self._max_sens
        pmf = {math.inf: float(self.mu_upper_cdf(lower_x)),
               self.privacy_loss(upper_x): 1.0 - float(self.mu_upper_cdf(upper_x))}
        return plm.TailPrivacyLossDistribution(lower_x, upper_x, pmf)

    def _losses(self, x: np.ndarray, with_slopes: bool = False):
        """Vectorised privacy loss (and its derivative) at the points ``x``."""
        remove = self.adjacency_type == plm.AdjacencyType.REMOVE
        terms = np.multiply.outer(np.asarray(x, dtype=float),
                                  -self._vec_slopes if remove else self._vec_slopes)
        terms += self._vec_consts                       # in place: no (n, K) temporaries
        top = np.max(terms, axis=1)
        terms -= top[:, None]
        weights = np.exp(terms, out=terms)
        total = np.sum(weights, axis=1)
        losses = (np.log(total) + top) * (1.0 if remove else -1.0)
        if not with_slopes:
            return losses
        return losses, -(weights @ self._vec_slopes) / total

    def inverse_privacy_losses(self, privacy_losses, precision: float = 1e-6) -> np.ndarray:
        losses = np.asarray(privacy_losses, dtype=float)
        if losses.size == 0:
            return np.zeros(0)
        if not (np.diff(losses) >= 0).all():
            raise ValueError(f"Expected non-decreasing privacy_losses, got: {losses}.")
        mass = self._vec_positive_mass
        log_1m = math.log1p(-mass) if mass < 1 else -math.inf
        if self.adjacency_type == plm.AdjacencyType.REMOVE:
            asymptote, at_asymptote = log_1m, math.inf      # loss -> ln(1-q) as x -> +inf
            if losses[0] <= log_1m and not np.isclose(losses[0], log_1m):
                raise ValueError(f"privacy loss {losses[0]} is below ln(1 - q) = {log_1m}")
        else:
            asymptote, at_asymptote = -log_1m, -math.inf    # loss -> -ln(1-q) as x -> -inf
            if losses[-1] > -log_1m and not np.isclose(losses[-1], -log_1m):
                raise ValueError(f"privacy loss {losses[-1]} is above -ln(1 - q) = {-log_1m}")
        out = np.full(losses.shape, at_asymptote)
        finite = ~np.isclose(losses, asymptote)
        if finite.any():
            try:
                out[finite] = self._bisect(losses[finite], precision)
            except (RuntimeError, FloatingPointError):
                # extreme shift/noise ratios: dp_accounting's scalar (slow, exact) inverse
                out[finite] = super().inverse_privacy_losses(losses[finite], precision)
        return out

    def _bisect(self, losses: np.ndarray, precision: float) -> np.ndarray:
        """Bracket on a coarse grid, refine by safeguarded Newton, round up to ``precision``."""
        span = 10.0 * (self._vec_std + self._vec_max_shift) + 1.0
        lo, hi = -span, span
        while self._losses(np.array([lo]))[0] <= losses[-1]:    # need loss(lo) > every l
            lo *= 2.0
        while self._losses(np.array([hi]))[0] > losses[0]:      # need loss(hi) <= every l
            hi *= 2.0
        # narrow [lo, hi] to the x range of the targets first (a 257-point scan), so the
        # bracketing grid is dense where the targets are and Newton starts closer
        scan = np.linspace(lo, hi, 257)
        scan_losses = self._losses(scan)
        first = max(int(np.searchsorted(-scan_losses, -losses[-1], side="left")) - 1, 0)
        last = min(int(np.searchsorted(-scan_losses, -losses[0], side="right")), len(scan) - 1)
        if last > first:
            lo, hi = scan[first], scan[last]
        grid = np.linspace(lo, hi, min(_COARSE_POINTS, max(257, 4 * losses.size + 1)))
        grid_losses = self._losses(grid)                        # non-increasing
        # huge noise (e.g. epsilon 0.01 over thousands of steps) puts the roots so far out
        # that multiples of ``precision`` exceed float resolution (x / precision > 2^52):
        # round to the finest multiple that floats still resolve there instead
        precision = max(precision, max(abs(lo), abs(hi)) * 2.0 ** -44)
        idx = np.clip(np.searchsorted(-grid_losses, -losses, side="left"), 1, len(grid) - 1)
        left, right = grid[idx - 1], grid[idx]
        f_left, f_right = grid_losses[idx - 1], grid_losses[idx]
        frac = np.where(f_left > f_right, (f_left - losses) / np.where(
            f_left > f_right, f_left - f_right, 1.0), 0.5)
        x = left + np.clip(frac, 0.0, 1.0) * (right - left)
        converged = False
        for _ in range(_NEWTON_STEPS):
            value, slope = self._losses(x, with_slopes=True)
            step = np.where(slope < 0, (value - losses) / np.where(slope < 0, slope, -1.0), 0.0)
            x = np.clip(x - step, left, right)
            if np.max(np.abs(step)) < 1e-4 * precision:  # converged: more steps cannot
                converged = True                         # move the rounding below
                break
        k = np.ceil(x / precision)
        # after convergence the root is within ~1e-4 precision of x: only points that close
        # to a multiple of precision can round the wrong way; check those (all otherwise)
        near = (np.abs(x / precision - np.round(x / precision)) < 1e-2 if converged
                else np.ones(x.shape, dtype=bool))
        settled = np.ones(x.shape, dtype=bool)
        if near.any():
            kn, ln = k[near], losses[near]
            settled[near] = (self._losses(kn * precision) <= ln) & (
                self._losses((kn - 1.0) * precision) > ln)
        if not settled.all():
            # integer bisection on multiples of precision inside the coarse bracket:
            # loss(lo_k p) > l >= loss(hi_k p), ends with the smallest such multiple
            rest = ~settled
            target = losses[rest]
            lo_k = np.floor(left[rest] / precision)
            hi_k = np.ceil(right[rest] / precision)
            at_lo = self._losses(lo_k * precision) <= target       # clipped brackets
            lo_k = np.where(at_lo, lo_k - 1.0, lo_k)
            hi_k = np.where(self._losses(hi_k * precision) > target, hi_k + 1.0, hi_k)
            for _ in range(_ROUNDING_STEPS * 2):
                open_ = hi_k - lo_k > 1.0
                if not open_.any():
                    break
                mid = np.floor((lo_k + hi_k) / 2.0)
                ok = self._losses(mid * precision) <= target
                hi_k = np.where(open_ & ok, mid, hi_k)
                lo_k = np.where(open_ & ~ok, mid, lo_k)
            else:
                raise RuntimeError("inverse privacy loss did not converge")
            k[rest] = hi_k
        x = k * precision
        return x


def mixture_of_gaussians_pld(standard_deviation: float, sensitivities, sampling_probs, *,
                             value_discretization_interval: float,
                             log_mass_truncation_bound: float = -50.0
                             ) -> pld_lib.PrivacyLossDistribution:
    """Pessimistic connect-the-dots PLD of the MoG mechanism (both adjacency directions).

    Args:
        standard_deviation: noise std (in the units of the sensitivities).
        sensitivities: non-negative shifts, at least one positive.
        sampling_probs: their probabilities (summing to one).
        value_discretization_interval: PLD grid step.
        log_mass_truncation_bound: ln of the noise mass dp_accounting may move to +inf.
    """
    vdi = value_discretization_interval
    check_grid_size(standard_deviation, float(np.max(sensitivities)), vdi)
    simple = _as_sampled_gaussian(sensitivities, sampling_probs)
    if simple is not None:                      # one positive shift: a (subsampled) Gaussian
        shift, rate = simple
        return pld_lib.from_gaussian_mechanism(
            float(standard_deviation), sensitivity=shift, sampling_prob=rate,
            value_discretization_interval=vdi,
            log_mass_truncation_bound=log_mass_truncation_bound)
    return connect_dots_mixture_pld(standard_deviation, sensitivities, sampling_probs,
                                    value_discretization_interval=vdi,
                                    log_mass_truncation_bound=log_mass_truncation_bound)


def connect_dots_mixture_pld(standard_deviation: float, sensitivities, sampling_probs, *,
                             value_discretization_interval: float,
                             log_mass_truncation_bound: float = -50.0
                             ) -> pld_lib.PrivacyLossDistribution:
    """The MoG PLD by the general connect-the-dots builder (no special cases)."""
    pmfs = []
    for adjacency in (plm.AdjacencyType.REMOVE, plm.AdjacencyType.ADD):
        loss = VectorizedMixtureGaussianPrivacyLoss(
            standard_deviation, sensitivities, sampling_probs, pessimistic_estimate=True,
            log_mass_truncation_bound=log_mass_truncation_bound, adjacency_type=adjacency)
        bounds = loss.connect_dots_bounds()
        lower = math.floor(bounds.epsilon_lower / value_discretization_interval)
        upper = math.ceil(bounds.epsilon_upper / value_discretization_interval)
        grid = np.arange(lower, upper + 1) * value_discretization_interval
        deltas = loss.get_delta_for_epsilon(grid)
        pmfs.append(connect_dots_pmf(value_discretization_interval, lower, upper, deltas))
    return pld_lib.PrivacyLossDistribution(pmfs[0], pmfs[1])


def connect_dots_pmf(discretization: float, lower: int, upper: int, deltas) -> pld_pmf.PLDPmf:
    """``pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap`` (Doroshenko et al. 2022,
    Alg. 1) without its round trip through a Python dict for large (dense) PMFs: the same
    probabilities, handed to ``DensePLDPmf`` directly; small ones go to the library."""
    deltas = np.asarray(deltas, dtype=np.float64)
    if upper - lower + 1 <= pld_pmf._MAX_PMF_SPARSE_SIZE or deltas.size != upper - lower + 1:  # noqa: SLF001
        return pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap(discretization, lower, upper,
                                                                    deltas)
    if np.any(deltas < 0) or np.any(deltas > 1):
        raise ValueError(f"deltas are not between 0 and 1 : deltas={deltas}.")
    if np.any(np.diff(deltas) > pld_pmf._DELTA_DIFF_TOLERANCE):                  # noqa: SLF001
        raise ValueError(f"deltas are not in non-increasing order: deltas={deltas}.")
    deltas = np.minimum.accumulate(deltas)
    diffs = np.diff(deltas)
    probs = np.zeros_like(deltas)
    probs[0] = 1 - deltas[0] + diffs[0] / math.expm1(discretization)
    probs[1:-1] = (diffs[1:] - diffs[:-1] * math.exp(discretization)) / math.expm1(discretization)
    probs[-1] = diffs[-1] / math.expm1(-discretization)
    probs = np.maximum(0.0, probs)
    return pld_pmf.DensePLDPmf(discretization, lower, probs, deltas[-1], True)


#: the largest PLD grid (points per direction) the builders accept
MAX_GRID_POINTS = 1_000_000


def grid_points(standard_deviation: float, max_shift: float, vdi: float) -> float:
    """About how many grid points the PLD of a shift ``max_shift`` at noise
    ``standard_deviation`` needs at grid step ``vdi`` (the loss range over +-11 noise
    standard deviations, where dp_accounting truncates at mass e^-50)."""
    ratio = max_shift / standard_deviation
    return (ratio * ratio / 2.0 + 11.0 * ratio) * 2.0 / vdi


def check_grid_size(standard_deviation: float, max_shift: float, vdi: float) -> None:
    """Refuse (clearly) a PLD whose grid would not fit: large epsilons mean small noise,
    and the grid grows with shift^2 / noise^2 (issue 10).

    Raises:
        InvalidParameterError: naming ``noise_multiplier``.
    """
    points = grid_points(standard_deviation, max_shift, vdi)
    if points > MAX_GRID_POINTS:
        raise InvalidParameterError(
            "noise_multiplier", f"large enough for a PLD grid of at most {MAX_GRID_POINTS:.0e} "
            f"points at grid step {vdi:g} (shift {max_shift:g} needs about {points:.1e}); use "
            "a larger value_discretization_interval or the RDP accountant",
            standard_deviation)


def _as_sampled_gaussian(sensitivities, sampling_probs):
    """``(shift, rate)`` if the mixture puts all positive mass on ONE shift, else ``None``.

    A one-component mixture is the Gaussian mechanism with that sensitivity (``rate = 1``);
    shifts ``{0, s}`` are the Poisson-subsampled Gaussian mechanism with rate ``P(s)``.
    Raises ``ValueError`` when no shift is positive (the caller handles the identity).
    """
    shifts = np.asarray(sensitivities, dtype=float)
    probs = np.asarray(sampling_probs, dtype=float)
    positive = (shifts > 0) & (probs > 0)
    if not positive.any():
        raise ValueError("a mixture of Gaussians needs one positive shift with positive mass")
    distinct = np.unique(shifts[positive])
    if distinct.size != 1:
        return None
    rate = float(min(1.0, probs[positive].sum()))
    return float(distinct[0]), rate


def revealed_gaussian_mixture_pld(standard_deviation: float, sensitivities, probabilities, *,
                                  value_discretization_interval: float
                                  ) -> pld_lib.PrivacyLossDistribution:
    """PLD of ``sum_i p_i * PLD(Gaussian with sensitivity s_i)`` (the draw i is revealed).

    Zero sensitivities contribute the identity PLD (loss 0 with probability 1).
    """
    mixture, total = None, 0.0
    for sens, prob in zip(sensitivities, probabilities):
        if prob <= 0.0:
            continue
        if sens == 0.0:
            component = pld_lib.identity(value_discretization_interval)
        else:
            component = pld_lib.from_gaussian_mechanism(
                standard_deviation, sensitivity=float(sens),
                value_discretization_interval=value_discretization_interval)
        total += prob
        mixture = component if mixture is None else component.compute_mixture(
            mixture, prob / total)
    return mixture
