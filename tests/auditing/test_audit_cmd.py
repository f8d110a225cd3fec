"""`gnnprivacy audit` end to end on the synthetic CSBM graph."""

import json

from click.testing import CliRunner

from gnnprivacy.cli import main


def _run(*args):
    result = CliRunner().invoke(main, ["audit", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_audit_json_fields_and_positive_control():
    common = ["--method", "dpmlp", "--dataset", "csbm", "--epsilon", "2", "--runs", "2000",
              "--json", "-p", "steps=20"]
    out = json.loads(_run(*common))
    for key in ("epsilon_claimed", "epsilon_lower_bound", "epsilon_lower_bound_gdp", "runs",
                "confidence"):
        assert key in out
    assert out["epsilon_claimed"] == 2.0 and out["runs"] == 2000 and not out["violation"]
    bad = json.loads(_run(*common, "--noise-scale", "0.25"))
    assert bad["violation"] and bad["epsilon_lower_bound"] > 2.0


def test_audit_rgnn_paper_mode_is_exceeded():
    out = json.loads(_run("--method", "rgnn", "--dataset", "csbm", "-p", "eps_mode=paper",
                          "-p", "m=4", "--json"))
    assert out["mode"] == "exact" and out["violation"]


def test_audit_text_and_errors():
    assert "lower bound" in _run("--method", "dpmlp", "--dataset", "csbm", "--runs", "200",
                                 "-p", "steps=5")
    result = CliRunner().invoke(main, ["audit", "--method", "gcn", "--dataset", "csbm",
                                       "--epsilon", "2"])
    assert result.exit_code != 0
    assert "private method" in result.output and "heterpoisson" in result.output
