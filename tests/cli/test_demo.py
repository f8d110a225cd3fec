"""The demo (issue 11 §8): honest baselines side by side, a plain table when piped."""

from __future__ import annotations

import re
import subprocess
import sys


def test_demo_shows_both_dpmlp_baselines_in_a_plain_table(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "gnnprivacy.cli", "demo", "--graph",
         "num_nodes=2000,num_classes=4,num_features=32,avg_degree=10,homophily=0.85,feature_signal=1.0",
         "--runs-dir", str(tmp_path / "runs"), "-o", str(tmp_path / "report")],
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    table, rest = out.stdout.split("## Privacy report card")
    card, attack = rest.split("What an attacker learns about the edges")
    lines = table.strip().splitlines()
    assert lines[0].startswith("Privacy vs utility")
    header, rule, *rows = lines[1:]
    assert header.split()[:2] == ["method", "role"] and set(rule) <= {"-", " "}
    roles = {re.split(r"\s{2,}", r)[1]: r for r in rows}
    assert {"non-private baseline", "naive DP, paper defaults", "naive DP, configured",
            "node-level DP GNN"} <= set(roles), rows
    acc = {role: float(r.split()[-2]) for role, r in roles.items()}
    assert acc["naive DP, configured"] > acc["naive DP, paper defaults"]
    assert "node / add_or_remove" in roles["node-level DP GNN"]
    assert not any("│" in line or "┃" in line for line in lines)  # no box drawing in a pipe
    assert "heterpoisson on csbm" in card and "Audited epsilon (lower bound)" in card
    assert "Membership inference" in card
    html = (tmp_path / "report" / "report.html").read_text()
    assert "Privacy report card" in html  # the card is a section of the HTML report
    # issue 25: every method on one accuracy-against-epsilon plot (private runs at 2, 4, 8)
    plots = sorted(p.name for p in (tmp_path / "report" / "plots").iterdir())
    assert plots == ["test_accuracy-vs-epsilon-all-methods.png"], plots
    from gnnprivacy.records.store import ResultStore

    budgets = sorted((r.method, r.config.get("epsilon")) for r in ResultStore(tmp_path / "runs").records()
                     if r.method != "gcn")
    assert budgets == sorted([(m, e) for m in ("dpmlp", "dpmlp", "heterpoisson") for e in (2.0, 4.0, 8.0)])
    # link stealing on the same graph, without a defence and with GRID, beside the labels-only control
    header, rule, *ls_rows = attack.strip().splitlines()[1:5]
    assert header.split()[0] == "defence" and set(rule) <= {"-", " "}
    cells = {re.split(r"\s{2,}", r)[0]: re.split(r"\s{2,}", r) for r in ls_rows}
    assert set(cells) == {"none", "GRID (theta 0.4, n 3)"}, ls_rows
    none, grid = cells["none"], cells["GRID (theta 0.4, n 3)"]
    assert float(none[1]) > 0.6                  # the attack works on the undefended posteriors
    assert none[4] == grid[4] and none[3] == grid[3]  # GRID keeps every prediction exactly
    records = ResultStore(tmp_path / "runs" / "link-stealing").records()
    assert sorted(r.config["defense"] for r in records) == ["grid", "none"]
    assert "auc_label_only" in (tmp_path / "report" / "link-stealing" / "report.md").read_text()
    assert not (tmp_path / "report" / "link-stealing" / "plots").exists()
