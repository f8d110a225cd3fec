"""The ``gnnprivacy account`` command (click), checked against the library."""

import json

import pytest
from click.testing import CliRunner

from gnnprivacy.accounting import dpsgd_event, make_accountant, randomized_response_event
from gnnprivacy.cli.account_cmd import account_command


def _run(*args):
    result = CliRunner().invoke(account_command, list(args))
    return result


def _json(*args):
    result = _run(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_dpsgd_json_matches_library():
    out = _json("--mechanism", "dpsgd", "--sample-rate", "0.01", "--noise-multiplier", "1.1",
                "--steps", "1000", "--delta", "1e-5")
    expected = make_accountant("pld").compose(
        dpsgd_event(sample_rate=0.01, noise_multiplier=1.1), 1000).get_epsilon(1e-5)
    assert set(out) >= {"epsilon", "delta", "noise_multiplier", "accountant"}
    assert out["epsilon"] == pytest.approx(expected) and out["accountant"] == "pld"
    assert out["noise_multiplier"] == 1.1 and out["delta"] == 1e-5
    rdp = _json("--mechanism", "dpsgd", "--sample-rate", "0.01", "--noise-multiplier", "1.1",
                "--steps", "1000", "--accountant", "rdp")
    assert rdp["epsilon"] > out["epsilon"] and rdp["accountant"] == "rdp"


def test_target_epsilon_calibrates_one_sided():
    out = _json("--mechanism", "dpsgd", "--sample-rate", "0.01", "--steps", "1000",
                "--target-epsilon", "1.0")
    assert out["epsilon"] <= 1.0 and out["epsilon"] > 0.99
    assert 1.0 < out["noise_multiplier"] < 2.0


def test_heterpoisson_and_dpgnn():
    hp = _json("--mechanism", "heterpoisson", "--q-b", "0.182287", "--M", "2",
               "--max-out-degree", "64", "--noise-multiplier", "8", "--steps", "50",
               "--delta", str(22470 ** -1.1))
    assert hp["epsilon"] == pytest.approx(2.97, abs=0.01)
    gnn = _json("--mechanism", "dpgnn", "--num-nodes", "90941", "--batch-size", "10000",
                "--degree-bound", "7", "--noise-multiplier", "1.0", "--steps", "100",
                "--delta", str(1 / 909410), "--accountant", "rdp")
    assert gnn["epsilon"] == pytest.approx(9.6062, abs=0.02)   # improved conversion, 002 §4.5
    text = _run("--mechanism", "heterpoisson", "--q-b", "0.2", "--M", "1", "--num-nodes", "100",
                "--noise-multiplier", "20")
    assert text.exit_code == 0 and "epsilon =" in text.output


def test_gaussian_laplace_rr():
    gauss = _json("--mechanism", "gaussian", "--noise-multiplier", "2.0", "--steps", "4")
    single = _json("--mechanism", "gaussian", "--noise-multiplier", "1.0")
    assert gauss["epsilon"] == pytest.approx(single["epsilon"], rel=1e-3)   # 4 x sigma=2 ~ sigma=1
    lap = _json("--mechanism", "laplace", "--epsilon", "0.5", "--steps", "3", "--delta", "0")
    assert lap["epsilon"] == pytest.approx(1.5) and lap["noise_multiplier"] == 2.0
    rr = _json("--mechanism", "rr", "--epsilon", "1.0", "--num-buckets", "4", "--steps", "2",
               "--delta", "0")
    assert rr["epsilon"] == pytest.approx(2.0) and rr["noise_multiplier"] is None
    rr_delta = _json("--mechanism", "rr", "--epsilon", "1.0", "--num-buckets", "4", "--steps", "2")
    expected = make_accountant("pld", relation="replace").compose(
        randomized_response_event(epsilon=1.0, num_buckets=4), 2).get_epsilon(1e-5)
    assert rr_delta["epsilon"] == pytest.approx(expected)


@pytest.mark.parametrize("args, option", [
    (["--mechanism", "dpsgd", "--noise-multiplier", "1.0"], "--sample-rate"),
    (["--mechanism", "dpsgd", "--sample-rate", "2.0", "--noise-multiplier", "1.0"],
     "--sample-rate"),
    (["--mechanism", "dpsgd", "--sample-rate", "0.1"], "--noise-multiplier"),
    (["--mechanism", "heterpoisson", "--M", "1", "--num-nodes", "10", "--noise-multiplier", "4"],
     "--q-b"),
    (["--mechanism", "heterpoisson", "--q-b", "0.1", "--M", "-1", "--num-nodes", "10",
      "--noise-multiplier", "4"], "--neighbor-multiplier"),
    (["--mechanism", "dpgnn", "--num-nodes", "100", "--batch-size", "500", "--degree-bound", "3",
      "--noise-multiplier", "1"], "--batch-size"),
    (["--mechanism", "rr", "--epsilon", "1", "--target-epsilon", "2"], "--target-epsilon"),
    (["--mechanism", "heterpoisson", "--q-b", "0.1", "--M", "1", "--num-nodes", "10",
      "--noise-multiplier", "4", "--mode", "paper"], "--accountant: parameter 'accountant' must be 'rdp'"),
    (["--mechanism", "nope"], "--mechanism"),
    (["--mechanism", "gaussian", "--noise-multiplier", "1", "--delta", "1.5"], "--delta"),
])
def test_bad_input_names_the_option(args, option):
    result = _run(*args)
    assert result.exit_code == 2, result.output
    assert option in result.output
