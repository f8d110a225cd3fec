"""The privacy report card (``gnnprivacy assess``) on a small synthetic run."""

import json

import pytest
from click.testing import CliRunner

from gnnprivacy.auditing.report_card import card_to_html, card_to_markdown, report_card
from gnnprivacy.cli import main
from gnnprivacy.method.runner import run


@pytest.fixture(scope="module")
def record_path(tmp_path_factory):
    d = tmp_path_factory.mktemp("runs")
    rec = run({"method": "dpmlp", "dataset": "csbm", "dataset_args": "num_nodes=300",
               "epsilon": 2.0, "steps": 10, "runs_dir": str(d)})
    return d / f"{rec.run_id}.json"


def test_card_contents_and_renderings(record_path):
    card = report_card(record_path, audit_runs=500)
    assert card["claimed"]["unit"] == "node" and card["claimed"]["relation"]
    assert card["audit"]["epsilon_claimed"] == 2.0 and not card["audit"]["violation"]
    assert 0.0 <= card["membership"]["white_box_gradient"]["auc"] <= 1.0
    assert "auc" in card["link_stealing"]
    assert "baseline" in card["utility"]
    md, page = card_to_markdown(card), card_to_html(card)
    assert "Audited epsilon" in md and "<table>" in page


def test_assess_cli_json(record_path):
    result = CliRunner().invoke(main, ["assess", str(record_path), "--audit-runs", "300",
                                       "--no-link-stealing", "--no-baseline", "--json"])
    assert result.exit_code == 0, result.output
    card = json.loads(result.stdout)
    assert card["method"] == "dpmlp" and "audit" in card and "link_stealing" not in card
