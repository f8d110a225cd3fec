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


def test_the_seconds_column_excludes_loading():
    """Issue 38 item 6: the column showed total_seconds (220.8 s for an 18 s GCN when the
    graph's loading was slow); it is the fit time."""
    from gnnprivacy.cli.demo_cmd import _COLUMNS, _LS_COLUMNS, _ls_row, _row
    from gnnprivacy.records.record import RunRecord

    timings = {"load_seconds": 202.0, "fit_seconds": 18.3, "total_seconds": 220.3}
    rec = RunRecord(run_id="r", method="gcn", dataset="csbm", config={}, seeds={"run": 0},
                    epsilon=float("inf"), delta=None, privacy={},
                    metrics={"test_accuracy": 0.9, "auc": 0.8, "tpr_at_1pct_fpr": 0.1,
                             "auc_label_only": 0.7, "model_test_accuracy": 0.9},
                    timings=timings)
    assert _COLUMNS[-1] == _LS_COLUMNS[-1] == "fit seconds"
    assert _row("non-private baseline", rec)[-1] == "18.3"
    assert _ls_row("none", rec)[-1] == "18.3"
