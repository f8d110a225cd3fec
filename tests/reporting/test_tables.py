"""Report tables: layout (rows = dataset/method, columns = epsilon), paper values beside ours."""

import math

from gnnprivacy.records.store import ResultStore
from gnnprivacy.reporting.aggregate import group_rows
from gnnprivacy.reporting.reference_values import load_references
from gnnprivacy.reporting.tables import (Table, comparison_tables, fmt_summary, privacy_table, results_tables,
                                         to_html, to_markdown)


def _groups(runs):
    return group_rows(ResultStore(runs).rows())


def test_results_table_layout_with_paper_values(table2_runs):
    runs, _ = table2_runs
    (table,) = results_tables(_groups(runs), "test_accuracy", load_references(["000-table2"]))
    assert table.header == ["dataset", "method", "epsilon = 4", "epsilon = 16", "epsilon = ∞ (non-private)"]
    rows = {tuple(r[:2]): r[2:] for r in table.rows}
    assert set(rows) == {(d, m) for d in ("computers", "facebook") for m in ("dpmlp", "gcn", "heterpoisson")}
    het = rows[("computers", "heterpoisson")]
    assert "(n=3)" in het[0] and "paper 80.6 ± 0.4" in het[0] and "paper 83.5 ± 0.3" in het[1] and het[2] == "–"
    assert "paper 51.0 ± 3.6" in rows[("facebook", "dpmlp")][0]  # Naive DP-SGD = dpmlp
    assert rows[("facebook", "gcn")][:2] == ["–", "–"] and "paper" not in rows[("facebook", "gcn")][2]


def test_comparison_table_keeps_the_papers_layout(table2_runs):
    runs, _ = table2_runs
    tables = comparison_tables(_groups(runs), load_references())
    assert [t.title.rsplit("— ", 1)[1] for t in tables] == ["GCN column"]  # nothing else matches
    t = tables[0]
    assert t.header == ["ε", "method", "Facebook", "Twitch", "Amazon", "PubMed", "Reddit"]
    assert [r[:2] for r in t.rows] == [["4", "Naive DP-SGD"], ["4", "Ours (HeterPoisson)"],
                                       ["16", "Naive DP-SGD"], ["16", "Ours (HeterPoisson)"]]
    amazon = t.rows[1][4]
    assert amazon.startswith("paper 80.6 ± 0.4 | ours ") and "(n=3)" in amazon
    assert t.rows[1][3] == "paper 66.4 ± 0.4"  # Twitch: not run, paper only
    assert "Table II" in t.caption and "docs/papers.md" in t.caption   # the paper's table, not
    assert "000_a68cceb6d6862899.md" not in t.caption                    # a spec file not shipped


def test_privacy_table_and_renderers(table2_runs):
    runs, _ = table2_runs
    t = privacy_table(_groups(runs))
    assert t.header[-4:] == ["epsilon spent (mean)", "relation", "delta", "runs"]
    assert ["computers", "gcn", "–", "∞ (not private)", "–", "–", "3"] in t.rows
    md = to_markdown(Table("T", ["a", "b|c"], [["1", "x<br>y"]], "note"))
    assert md.splitlines()[2] == "| a | b\\|c |" and "| 1 | x<br>y |" in md and "*note*" in md
    page = to_html(Table("T", ["a"], [["<script>1</script><br>2"]]))
    assert "&lt;script&gt;1&lt;/script&gt;<br>2" in page and "<script>" not in page


def test_fmt_summary():
    from gnnprivacy.reporting.aggregate import summarize

    assert fmt_summary(summarize([0.5, 0.7]), 100).startswith("60.0 ± 14.1 (n=2) [")
    assert fmt_summary(summarize([0.5]), 100, ci=False) == "50.0 (n=1)"


def test_private_method_without_an_epsilon_option_sits_in_its_spent_budget_column():
    """rgnn has eps_x / eps_y, no `epsilon`: it must not land under "∞ (non-private)"."""
    from gnnprivacy.reporting.aggregate import Group, Summary
    from gnnprivacy.reporting.tables import _col_value

    def group(attrs, eps):
        return Group(attrs, ["r"], {}, Summary(1, eps, 0.0, eps, eps), None)

    assert _col_value(group({"method": "rgnn", "private": True}, 8.0), "epsilon") == "8"
    assert _col_value(group({"method": "dpmlp", "private": True, "epsilon": 4.0}, 3.99),
                      "epsilon") == "4"
    assert _col_value(group({"method": "gcn", "private": False}, math.inf),
                      "epsilon") == "∞ (non-private)"


def test_feature_and_edge_budgets_get_their_own_tables():
    """Feature mechanisms (eps_f) and edge mechanisms (eps_e) protect different parts: they are
    tabulated on separate budget axes, the non-private baseline beside each; a sweep with one
    kind (or with neither) is left as one part."""
    from gnnprivacy.reporting.aggregate import Group, Summary
    from gnnprivacy.reporting.tables import budget_partitions

    def group(attrs, eps, acc):
        return Group(attrs, ["r"], {"test_accuracy": Summary(1, acc, math.nan, math.nan, math.nan)},
                     Summary(1, eps, 0.0, eps, eps), None)

    feats = [group({"method": "featurerr", "private": True, "eps_f": e}, e, 0.5) for e in (1, 10)]
    edges = [group({"method": "edgerr", "private": True, "eps_e": e}, e, 0.6) for e in (0.1, 1)]
    clean = group({"method": "gcn", "private": False}, math.inf, 0.9)
    parts = budget_partitions(feats + edges + [clean])
    assert [sorted(g.get("method") for g in p) for p in parts] == [
        ["featurerr", "featurerr", "gcn"], ["edgerr", "edgerr", "gcn"]]
    headers = [results_tables(p, "test_accuracy")[0].header for p in parts]
    assert headers == [["method", "eps_f = 1", "eps_f = 10", "eps_f = ∞ (non-private)"],
                       ["method", "eps_e = 0.1", "eps_e = 1", "eps_e = ∞ (non-private)"]]
    assert budget_partitions(feats + [clean]) == [feats + [clean]]
    other = [group({"method": "dpmlp", "private": True, "epsilon": 4}, 4, 0.7), clean]
    assert budget_partitions(other) == [other]
