"""The default PLD grid step is accurate: compared with a 10x finer grid (benchmark configs)."""

import pytest

from gnnprivacy.accounting import (DEFAULT_VALUE_DISCRETIZATION_INTERVAL, dpsgd_event,
                                   heterpoisson_event, make_accountant)

REDDIT = 232_965


def _eps(event, steps, delta, vdi):
    acc = make_accountant("pld", value_discretization_interval=vdi).compose(event, steps)
    return acc.get_epsilon(delta)


def _compare(event, steps, delta, rel):
    coarse = _eps(event, steps, delta, DEFAULT_VALUE_DISCRETIZATION_INTERVAL)
    fine = _eps(event, steps, delta, DEFAULT_VALUE_DISCRETIZATION_INTERVAL / 10)
    assert fine <= coarse                        # pessimistic: both are upper bounds
    assert coarse <= fine * (1 + rel)


def test_default_grid_dpsgd_1000_steps():
    _compare(dpsgd_event(sample_rate=0.004, noise_multiplier=1.1), 1000, 1e-5, rel=5e-3)


def test_default_grid_heterpoisson_1000_steps():
    event = heterpoisson_event(q_b=4096 / REDDIT, M=1, out_degrees=[REDDIT - 1],
                               noise_multiplier=8.0)
    _compare(event, 1000, REDDIT ** -1.1, rel=5e-3)


@pytest.mark.slow
def test_default_grid_benchmark_configs_10000_steps():
    _compare(dpsgd_event(sample_rate=0.004, noise_multiplier=1.1), 10_000, 1e-5, rel=1e-2)
    event = heterpoisson_event(q_b=4096 / REDDIT, M=1, max_out_degree=REDDIT - 1,
                               noise_multiplier=8.0)
    _compare(event, 10_000, REDDIT ** -1.1, rel=1e-2)
