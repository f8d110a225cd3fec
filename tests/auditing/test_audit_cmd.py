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
    for key in ("epsilon_claimed", "epsilon_lower_bound", "epsilon_estimate_gdp", "runs",
                "confidence"):
        assert key in out
    assert "epsilon_lower_bound_gdp" not in out          # an estimate, not a bound (issue 22)
    assert out["details"]["variants"][out["details"]["worst_variant"]]["selection"] == "heldout"
    assert out["epsilon_claimed"] == 2.0 and out["runs"] == 2000 and not out["violation"]
    bad = json.loads(_run(*common, "--noise-scale", "0.25"))
    assert bad["violation"] and bad["epsilon_lower_bound"] > 2.0


def test_audit_rgnn_paper_mode_is_exceeded():
    out = json.loads(_run("--method", "rgnn", "--dataset", "csbm", "-p", "eps_mode=paper",
                          "-p", "m=4", "--json"))
    assert out["mode"] == "exact" and out["violation"]


def test_audit_text_and_errors():
    text = _run("--method", "dpmlp", "--dataset", "csbm", "--runs", "200", "-p", "steps=5")
    assert "lower bound" in text and "GDP estimate" in text and "(not a bound)" in text
    result = CliRunner().invoke(main, ["audit", "--method", "gcn", "--dataset", "csbm",
                                       "--epsilon", "2"])
    assert result.exit_code != 0
    assert "private method" in result.output and "heterpoisson" in result.output


def test_old_audit_records_are_read():
    """An audit result written before issue 22 (GDP figure under epsilon_lower_bound_gdp)."""
    from gnnprivacy.auditing.api import AuditResult
    from gnnprivacy.auditing.report_card import _rows

    old = {"method": "dpmlp", "dataset": "csbm", "mode": "mechanism", "epsilon_claimed": 2.0,
           "epsilon_lower_bound": 1.1, "epsilon_lower_bound_gdp": 1.7, "runs": 100,
           "confidence": 0.95, "delta": 1e-5, "violation": False}
    res = AuditResult.from_dict(old)
    assert res.epsilon_estimate_gdp == 1.7 and res.epsilon_lower_bound_gdp == 1.7
    assert AuditResult.from_dict(res.to_dict()).epsilon_estimate_gdp == 1.7
    card = {"claimed": {"epsilon": 2.0, "delta": 1e-5, "unit": "node", "relation": "x",
                        "scope": None, "accountant": "pld", "accounting_mode": None,
                        "unaccounted": []},
            "audit": {k: old[k] for k in ("mode", "epsilon_claimed", "epsilon_lower_bound",
                                          "epsilon_lower_bound_gdp", "runs", "confidence",
                                          "violation")},
            "utility": {"test_accuracy": 0.5}}
    assert any("GDP estimate 1.700" in value for _, value in _rows(card))
