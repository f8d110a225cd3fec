"""Accounting benchmark: epsilon for 10,000 steps (DP-SGD, HeterPoisson) and calibrations.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_accounting.py [--vdi 1e-3]``;
``--trainer-plan`` times the heterpoisson trainer's accounting on Computers (calibration +
final epsilon) with a cold and then a warm on-disk cache.
Targets on the development machine: < 2 s per epsilon, < 20 s per calibration. The epsilon
rows also report the value on a 10x finer PLD grid (not timed), which shows the
discretisation error of the default grid; both are upper bounds (pessimistic PLDs).

Configurations (000 §3.0 / §4.7):
  DP-SGD        q = 0.004, noise multiplier 1.1, delta = 1e-5
  HP-Reddit     HeterPoisson q_b = 4096/232965, M = 1, D_max = |V| - 1, sigma/R = 8,
                delta = |V|^-1.1 (17 out-degrees in the covering set)
  HP-Facebook   q_b = 4096/22470, M = 2, D_max = |V| - 1, T = 50, delta = |V|^-1.1
"""

from __future__ import annotations

import argparse
import time

from gnnprivacy.accounting import (DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
                                   calibrate_noise_multiplier, dpsgd_event, heterpoisson_event,
                                   heterpoisson_paper_orders, make_accountant)

REDDIT_NODES = 232_965
FACEBOOK_NODES = 22_470


def _epsilon(event, steps, delta, kind="pld", **options):
    accountant = make_accountant(kind, **options).compose(event, steps)
    start = time.perf_counter()
    eps = accountant.get_epsilon(delta)
    return eps, time.perf_counter() - start


def _facebook(mode="sound"):
    return lambda z: heterpoisson_event(q_b=4096 / FACEBOOK_NODES, M=2 if mode == "sound" else 1,
                                        max_out_degree=FACEBOOK_NODES - 1, noise_multiplier=z,
                                        mode=mode)


def _calibration_row(name, make, target, kind, options, rows):
    delta = FACEBOOK_NODES ** -1.1
    start = time.perf_counter()
    z = calibrate_noise_multiplier(make, steps=50, target_epsilon=target, target_delta=delta,
                                   accountant=kind, accountant_options=options)
    seconds = time.perf_counter() - start
    reached = _epsilon(make(z), 50, delta, kind, **options)[0]
    rows.append((name, f"z={z:.4f} eps={reached:.4f}", "-", seconds, 20.0))


def trainer_accounting(num_nodes: int = 13_752, epsilon: float = 8.0) -> None:
    """Calibration + final epsilon of the heterpoisson trainer's plan (Computers: |V| =
    13,752, q_b = 4096/|V|, T = ceil(9 / q_b), D_max = |V| - 1), cold (empty on-disk cache,
    fresh process state) then warm (same cache), as ``HeterPoissonTrainer`` runs them."""
    import math
    import os
    import tempfile

    from gnnprivacy.accounting import base
    from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
    from gnnprivacy.training import _privacy

    q_b = min(1.0, 4096 / num_nodes)
    steps, delta = math.ceil(9 / q_b), num_nodes ** -1.1
    factory = _privacy.heterpoisson_event_factory(q_b=q_b, M=1.0, max_out_degree=num_nodes - 1,
                                                  overlap_removal=True, mode="sound")
    with tempfile.TemporaryDirectory() as cache:
        os.environ["GNNPRIVACY_CACHE"] = cache
        for label in ("cold", "warm"):
            _privacy.calibrate.cache_clear()           # a new process: only the disk cache
            base._CACHE.clear()                        # noqa: SLF001
            start = time.perf_counter()
            z = _privacy.calibrate(factory, steps=steps, epsilon=epsilon, delta=delta, kind="pld")
            mid = time.perf_counter()
            acc = _privacy.new_accountant("pld", PrivacyUnit.NODE,
                                          NeighboringRelation.ADD_OR_REMOVE, epsilon=epsilon,
                                          steps=steps)
            eps = acc.compose(factory(z), steps).get_epsilon(delta)
            end = time.perf_counter()
            print(f"heterpoisson |V|={num_nodes} eps={epsilon:g} {label}: calibration "
                  f"{mid - start:.3f}s + final epsilon {end - mid:.3f}s = {end - start:.3f}s "
                  f"(z={z:.6f}, T={steps}, epsilon={eps:.6f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trainer-plan", action="store_true",
                        help="only time the heterpoisson trainer's accounting on Computers "
                             "(cold and warm on-disk cache)")
    parser.add_argument("--vdi", type=float, default=DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
                        help="PLD value_discretization_interval")
    parser.add_argument("--skip-fine", action="store_true", help="skip the 10x finer reference")
    parser.add_argument("--skip-paper", action="store_true", help="skip the RDP calibration")
    args = parser.parse_args()
    if args.trainer_plan:
        trainer_accounting()
        return

    rows = []
    hp = heterpoisson_event(q_b=4096 / REDDIT_NODES, M=1, max_out_degree=REDDIT_NODES - 1,
                            noise_multiplier=8.0)
    for name, event, delta in [
            ("eps, 10k steps, DP-SGD (PLD)", dpsgd_event(sample_rate=0.004, noise_multiplier=1.1),
             1e-5),
            ("eps, 10k steps, HP-Reddit sound (PLD)", hp, REDDIT_NODES ** -1.1)]:
        eps, seconds = _epsilon(event, 10_000, delta, value_discretization_interval=args.vdi)
        fine = "-" if args.skip_fine else (
            f"{_epsilon(event, 10_000, delta, value_discretization_interval=args.vdi / 10)[0]:.4f}")
        rows.append((name, f"{eps:.4f}", fine, seconds, 2.0))

    _calibration_row("calibrate HP-Facebook sound, eps<=4 (PLD)", _facebook(), 4.0, "pld",
                     {"value_discretization_interval": args.vdi}, rows)
    if not args.skip_paper:
        _calibration_row("calibrate HP-Facebook M=1 paper, eps<=2 (RDP)", _facebook("paper"),
                         2.0, "rdp", {"orders": heterpoisson_paper_orders()}, rows)

    print(f"PLD value_discretization_interval = {args.vdi:g}")
    print(f"{'task':<48} {'result':>24} {'finer grid':>10} {'seconds':>8} {'target':>7}")
    for task, result, fine, seconds, target in rows:
        flag = "ok" if seconds < target else "SLOW"
        print(f"{task:<48} {result:>24} {fine:>10} {seconds:8.2f} {target:6.0f}s {flag}")


if __name__ == "__main__":
    main()
