"""Tiny delta and extreme budgets (issue 22 item 6; the ``account`` bullets of issue 24).

Each is computed correctly or refused before any training with one line naming the
supported range:

* delta below 1e-12 (the PLD reads it as epsilon infinity, so calibration over-noised or
  gave up with a message about the target epsilon) is refused;
* a target epsilon outside [1e-3, 1e5] is refused; inside it, epsilon 1e5 over one step
  no longer overflows the PLD grid, epsilon 0.01 on a large graph no longer ends in a
  RecursionError, and a small target is spent (not over-noised by the grid rounding);
* DP-GNN's RDP stays positive at large noise (it rounded below zero, and dp_accounting
  then reported epsilon 0);
* ``account`` refuses contradictory or ignored options, M < 1, a composition too large for
  memory, and computes heterpoisson on a billion nodes without the exact binomial law.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from gnnprivacy.accounting import make_accountant
from gnnprivacy.accounting.query import account
from gnnprivacy.cli import main
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.training import _privacy

SMALL = ["--dataset", "csbm", "--dataset-args", "num_nodes=300", "-q"]


def _cli(*args, tmp=None):
    extra = [] if tmp is None else ["--runs-dir", str(tmp)]
    return CliRunner().invoke(main, [str(a) for a in args] + extra)


@pytest.mark.parametrize("method", ["heterpoisson", "dpmlp", "dpgnn"])
def test_tiny_delta_is_refused_before_training(method, tmp_path):
    out = _cli("train", "--method", method, *SMALL, "--delta", "1e-20", tmp=tmp_path)
    assert out.exit_code != 0 and "Traceback" not in out.output
    assert "'delta'" in out.output and "[1e-12, 1)" in out.output
    assert not list(tmp_path.glob("*.json"))


@pytest.mark.parametrize("eps", ["1e6", "1e-4"])
def test_target_epsilon_outside_the_supported_range_is_refused(eps, tmp_path):
    out = _cli("train", "--method", "dpmlp", *SMALL, "--epsilon", eps, tmp=tmp_path)
    assert out.exit_code != 0 and "Traceback" not in out.output
    assert "'epsilon'" in out.output and "[0.001, 100000]" in out.output


@pytest.mark.parametrize("method", ["heterpoisson", "dpmlp"])
def test_largest_epsilon_over_one_step_calibrates(method, tmp_path):
    """Before: the coarse calibration grid (100 x 100) overflowed e^step - 1."""
    out = _cli("train", "--method", method, *SMALL, "--epsilon", "1e5", "--steps", "1",
               tmp=tmp_path)
    assert out.exit_code == 0, out.output
    (record,) = [json.loads(p.read_text()) for p in tmp_path.glob("*.json")]
    assert 0.99e5 <= record["epsilon"] <= 1e5


def test_the_mixture_inverse_converges_at_huge_noise():
    """The root of epsilon 0.01 on a 20,000-node csbm: noise std 524288, shifts to 36
    (before: no convergence, then dp_accounting's recursive inverse hit RecursionError)."""
    from gnnprivacy.accounting.heterpoisson import truncated_shift_distribution
    from gnnprivacy.accounting.pld_mixtures import mixture_of_gaussians_pld

    shifts, weights, _ = truncated_shift_distribution(0.2, 1.0, 16, True, 1e-30)
    pld = mixture_of_gaussians_pld(524288.0, shifts, weights, value_discretization_interval=0.1)
    assert 0.0 <= pld.get_epsilon_for_delta(1e-5) < 1e-3


def test_a_small_target_is_spent_not_over_noised():
    """dpmlp on a 20,000-node csbm at epsilon 0.001 (q 0.125, 50 steps) got noise 15,856,
    whose epsilon on a fine grid is 3.1e-5: 3 % of the budget."""
    factory = _privacy.dpsgd_event_factory(sample_rate=0.125)
    z = _privacy.calibrate(factory, steps=50, epsilon=1e-3, delta=1e-5, kind="pld")
    fine = make_accountant("pld", value_discretization_interval=1e-7).compose(factory(z), 50)
    assert 0.95e-3 <= fine.get_epsilon(1e-5) <= 1e-3


def test_dpgnn_rdp_stays_positive_at_large_noise():
    import mpmath

    from gnnprivacy.accounting.multiterm import affected_count_log_pmf, dpgnn_rdp

    n, k, m, z = 10000, 3, 2500, 27257.0
    orders = np.array([1.5, 2.0, 8.0, 64.0, 1024.0])
    got = dpgnn_rdp(orders, num_train=n, max_degree=k, batch_size=m, noise_multiplier=z)
    mpmath.mp.dps = 50
    i, _ = affected_count_log_pmf(num_train=n, max_degree=k, batch_size=m)
    probs = [mpmath.binomial(k + 1, int(j)) * mpmath.binomial(n - k - 1, m - int(j))
             / mpmath.binomial(n, m) for j in i]
    for alpha, value in zip(orders, got):
        a = mpmath.mpf(float(alpha))
        exact = mpmath.log(sum(p * mpmath.exp(a * (a - 1) * int(j) ** 2
                                              / (2 * (k + 1) ** 2 * mpmath.mpf(z) ** 2))
                               for p, j in zip(probs, i))) / (a - 1)
        assert value > 0 and value == pytest.approx(float(exact), rel=1e-6)


# ---------------------------------------------------------------- account (issue 24)
ACCOUNT = ["account", "--steps", "10"]


@pytest.mark.parametrize("args, option, fragment", [
    (["--mechanism", "dpsgd", "--sample-rate", "0.01", "--noise-multiplier", "1.1",
      "--target-epsilon", "1"], "--noise-multiplier", "not both"),
    (["--mechanism", "laplace", "--noise-multiplier", "1", "--epsilon", "2"], "--epsilon",
     "laplace's scale"),
    (["--mechanism", "laplace", "--target-epsilon", "1", "--epsilon", "2"], "--epsilon",
     "laplace's scale"),
    (["--mechanism", "gaussian", "--noise-multiplier", "1", "--sample-rate", "0.1"],
     "--sample-rate", "does not use it"),
    (["--mechanism", "dpsgd", "--sample-rate", "0.1", "--noise-multiplier", "1",
      "--mode", "paper", "--accountant", "rdp"], "mode", "does not use it"),
    (["--mechanism", "rr", "--epsilon", "1", "--noise-multiplier", "1"], "--noise-multiplier",
     "rr is set by its epsilon"),
    (["--mechanism", "heterpoisson", "--q-b", "0.1", "--M", "0.5", "--num-nodes", "100",
      "--noise-multiplier", "2"], "--neighbor-multiplier", "[1, inf)"),
    (["--mechanism", "dpsgd", "--sample-rate", "0.01", "--noise-multiplier", "1.1",
      "--delta", "1e-20"], "--delta", "[1e-12, 1)"),
])
def test_account_refuses_contradictory_and_ignored_options(args, option, fragment):
    out = _cli(*ACCOUNT, *args)
    assert out.exit_code != 0 and "Traceback" not in out.output, out.output
    assert option in out.output and fragment in out.output


def test_account_refuses_a_composition_too_large_for_memory_and_rdp_computes_it():
    """``--steps 1e12`` asked numpy for 226 GiB; the guard refuses before allocating."""
    big = ["account", "--mechanism", "dpsgd", "--sample-rate", "0.01", "--noise-multiplier",
           "1.1", "--steps", str(10 ** 12)]
    out = _cli(*big)
    assert out.exit_code != 0 and "--steps" in out.output and "RDP accountant" in out.output
    rdp = _cli(*big, "--accountant", "rdp", "--json")
    assert rdp.exit_code == 0 and json.loads(rdp.output)["epsilon"] > 1e6


def test_account_heterpoisson_on_a_billion_nodes_is_computed_cheaply():
    out = account("heterpoisson", q_b=0.001, multiplier=2.0, num_nodes=10 ** 9,
                  noise_multiplier=2.0, steps=100, delta=1e-10)
    assert 0.0 < out["epsilon"] < 10.0
    with pytest.raises(Exception, match="exact shift law"):   # RDP needs the exact law
        account("heterpoisson", q_b=0.001, multiplier=2.0, num_nodes=10 ** 9,
                noise_multiplier=2.0, steps=100, delta=1e-10, accountant="rdp")


def test_the_cut_binomial_law_agrees_with_the_exact_one(monkeypatch):
    """The Chernoff-cut law (used above EXACT_DEGREE_LIMIT) gives the exact epsilon."""
    import gnnprivacy.accounting.heterpoisson as hp
    from gnnprivacy.accounting import heterpoisson_event

    event = heterpoisson_event(q_b=0.05, M=2.0, max_out_degree=3000, noise_multiplier=1.5)

    def eps():
        hp.truncated_shift_distribution.cache_clear()
        return make_accountant("pld", disk_cache=False).compose(event, 40).get_epsilon(1e-6)
    exact = eps()
    monkeypatch.setattr(hp, "EXACT_DEGREE_LIMIT", 10)
    cut = eps()
    hp.truncated_shift_distribution.cache_clear()
    assert cut == pytest.approx(exact, rel=1e-9) and cut >= exact * (1 - 1e-12)
    shifts = hp.shift_distribution(0.05, 2.0, 3000, cut_mass=1e-36)[0]
    assert len(shifts) < 100                                 # the law was cut (3,002 exact)


def test_account_api_errors_are_typed():
    with pytest.raises(InvalidParameterError):
        account("gaussian", noise_multiplier=1.0, sample_rate=0.1)
