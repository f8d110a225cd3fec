"""The report card in plain words (issue 45 item 8): a verdict per question, the scope
explained where a number looks like a contradiction, and what it is doing while it runs."""

from __future__ import annotations

import math

import pytest
from click.testing import CliRunner

import gnnprivacy as gp
from gnnprivacy.auditing.card_verdicts import card_verdicts, max_auc
from gnnprivacy.auditing.report_card import card_to_html, card_to_markdown


@pytest.mark.parametrize("eps", [0.0, 0.5, 1.0, 4.0, 8.0])
def test_max_auc_of_pure_dp_is_the_logistic_of_epsilon(eps):
    """Known truth: under pure epsilon-DP the ROC bound min(e^eps f, 1 - e^-eps (1 - f))
    encloses the area e^eps / (1 + e^eps)."""
    assert max_auc(eps, 0.0) == pytest.approx(1 / (1 + math.exp(-eps)), abs=1e-4)


def test_max_auc_grows_with_delta_and_is_one_without_a_claim():
    assert max_auc(1.0, 1e-5) > max_auc(1.0, 0.0)
    assert max_auc(math.inf, None) == 1.0


def _card(**over):
    card = {"run_id": "r", "method": "heterpoisson", "dataset": "cora",
            "claimed": {"epsilon": 8.0, "delta": 1e-4, "unit": "node", "relation": "add_or_remove",
                        "scope": "the trained model's parameters", "accountant": "pld",
                        "accounting_mode": None, "unaccounted": []},
            "audit": {"mode": "mechanism", "epsilon_claimed": 8.0, "epsilon_lower_bound": 4.2,
                      "epsilon_estimate_gdp": 7.8, "runs": 100, "confidence": 0.95,
                      "violation": False},
            "membership": {"loss_threshold": {"auc": 0.72, "tpr_at_1pct_fpr": 0.09,
                                              "tpr_at_0.1pct_fpr": 0.01},
                           "white_box_gradient": {"auc": 0.91, "tpr_at_1pct_fpr": 0.3,
                                                  "tpr_at_0.1pct_fpr": 0.1}},
            "link_stealing": {"attack": "He et al. Attack-0", "auc": 0.85, "pairs": 4000,
                              "auc_vs_nhop": 0.52, "n_hop": 2},
            "utility": {"test_accuracy": 0.48, "baseline": {"method": "gcn (non-private)",
                                                            "test_accuracy": 0.81}}}
    card.update(over)
    return card


def test_each_question_gets_a_verdict_in_plain_words():
    answers = dict(card_verdicts(_card()))
    assert answers["Is the privacy claim kept?"].startswith("Yes, as far as measured")
    assert "a weak guarantee" in answers["Is the privacy claim kept?"]
    member = answers["Can an attacker tell which nodes were in the training set?"]
    assert member.startswith("Yes: the strongest attack on the released model (loss threshold)")
    assert "within what the claim allows" in member and "noisy gradient" in member
    link = answers["Can an attacker tell which nodes are linked?"]
    assert link.startswith("Yes, easily") and "does not contradict the claim" in link
    assert "2 hops apart it reaches 0.52" in link
    assert "33.0 points below gcn (non-private)" in answers["What does the privacy cost?"]


def test_a_violated_claim_reads_no_and_a_control_card_reads_yes():
    """Control pair: the same card with the audit's violation flag set and cleared."""
    bad = _card(audit={**_card()["audit"], "epsilon_lower_bound": 9.5, "violation": True})
    assert dict(card_verdicts(bad))["Is the privacy claim kept?"].startswith(
        "No: the audit's lower bound 9.50 exceed")
    assert dict(card_verdicts(_card()))["Is the privacy claim kept?"].startswith("Yes")


def test_no_claim_and_weak_links_get_no_scope_explanation():
    plain = _card(claimed={**_card()["claimed"], "epsilon": math.inf, "delta": None},
                  audit=None, link_stealing={"auc": 0.58, "attack": "x"})
    answers = dict(card_verdicts(plain))
    assert answers["Is the privacy claim kept?"].startswith("No privacy is claimed")
    assert answers["Can an attacker tell which nodes are linked?"].startswith("A little")
    assert "contradict" not in answers["Can an attacker tell which nodes are linked?"]


def test_a_graph_card_speaks_of_graphs_and_skips_link_stealing_with_its_reason():
    card = _card(level="graph", link_stealing={"applicable": False, "note": "one output per "
                                                                            "graph"})
    answers = dict(card_verdicts(card))
    assert "Can an attacker tell which graphs were in the training set?" in answers
    assert answers["Can an attacker tell which nodes are linked?"].startswith("Does not apply")


def test_the_rendered_card_leads_with_the_verdicts_and_names_what_it_assesses():
    md = card_to_markdown(_card())
    assert md.index("In plain words") < md.index("| Claimed epsilon")
    assert "Run `r`" in md
    model = _card(subject={"kind": "model", "class": "mymodels.Net", "named": False},
                  run_id="Net")
    md = card_to_markdown(model)
    assert "Model `Net` (class mymodels.Net, assessed as released: not a gnnprivacy run; " \
           "named after its class" in md and "Run `" not in md
    assert '<ul class="verdicts">' in card_to_html(model)


def test_assess_prints_what_it_is_doing_and_the_json_has_the_verdicts(tmp_path, monkeypatch):
    import json

    from gnnprivacy.cli import main

    monkeypatch.chdir(tmp_path)
    from torch_geometric.nn import GCNConv

    data = gp.load_dataset("csbm", num_nodes=150)
    conv = GCNConv(data.num_features, int(data.y.max()) + 1)
    gp.save_model(conv, "lin.pt", dataset={"name": "csbm", "num_nodes": 150},
                  init={"in_channels": data.num_features, "out_channels": conv.out_channels})
    out = CliRunner().invoke(main, ["assess", "lin.pt", "--no-link-stealing", "--json"])
    assert out.exit_code == 0, out.output
    stages = [line for line in out.stderr.splitlines() if line.startswith("assess [")]
    assert any("membership: loss and confidence thresholds" in s for s in stages), out.stderr
    card = json.loads(out.stdout)
    assert card["verdicts"][0]["question"] == "Is the privacy claim kept?"
    quiet = CliRunner().invoke(main, ["assess", "lin.pt", "--no-link-stealing", "-q"])
    assert quiet.exit_code == 0 and "assess [" not in quiet.stderr


def test_a_model_of_the_wrong_signature_is_one_line(tmp_path, monkeypatch):
    """A plain Linear (forward(x)) saved as a node model: one line, not a TypeError."""
    import torch

    from gnnprivacy.cli import main

    monkeypatch.chdir(tmp_path)
    lin = torch.nn.Linear(32, 2)
    gp.save_model(lin, "lin.pt", dataset={"name": "csbm", "num_nodes": 150},
                  init={"in_features": 32, "out_features": 2})
    out = CliRunner().invoke(main, ["assess", "lin.pt", "--no-link-stealing", "-q"])
    assert out.exit_code == 1 and "model(data.x, data.edge_index)" in out.output, out.output
    assert "Traceback" not in out.output and out.exception is None or isinstance(
        out.exception, SystemExit)


def test_numbers_kept_as_text_read_as_numbers():
    """A card read back from JSON keeps infinity as the text 'inf' (an audit's bound)."""
    card = _card(audit={**_card()["audit"], "epsilon_lower_bound": "inf", "violation": True},
                 claimed={**_card()["claimed"], "epsilon": "8.0", "delta": "0.0001"})
    assert dict(card_verdicts(card))["Is the privacy claim kept?"].startswith(
        "No: the audit's lower bound inf exceed")
