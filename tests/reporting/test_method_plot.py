"""Every method on one accuracy-against-epsilon figure (issue 25: the demo's report)."""

from __future__ import annotations

from gnnprivacy.records.store import ResultStore
from gnnprivacy.reporting.aggregate import group_rows
from gnnprivacy.reporting.html import build_report
from gnnprivacy.reporting.method_plot import _label, _settings, methods_plot
from gnnprivacy.reporting.plots import privacy_utility_plots


def _demo_like(runs, write_record):
    """The demo's shape: a GCN, two DP-MLP settings and HeterPoisson, each private one at
    three budgets."""
    write_record(runs, method="gcn", dataset="csbm", seed=0, acc=0.99, epochs=60, hidden=64)
    for eps in (2.0, 4.0, 8.0):
        write_record(runs, method="dpmlp", dataset="csbm", seed=0, acc=0.35 + eps / 100, epsilon=eps,
                     epochs=5, hidden=32)
        write_record(runs, method="dpmlp", dataset="csbm", seed=0, acc=0.53, epsilon=eps,
                     epochs=20, hidden=128)
        write_record(runs, method="heterpoisson", dataset="csbm", seed=0, acc=0.78, epsilon=eps,
                     epochs=None, hidden=128)
    return group_rows(ResultStore(runs).rows())


def test_one_figure_with_a_line_per_setting_and_the_baseline_flat(tmp_path, write_run):
    groups = _demo_like(tmp_path, write_run)
    settings = _settings(groups)
    assert settings == {"gcn": [], "dpmlp": ["epochs", "hidden"], "heterpoisson": []}
    labels = {_label(g, settings[g.get("method")]) for g in groups}
    assert labels == {"gcn", "heterpoisson", "dpmlp (epochs=5, hidden=32)",
                      "dpmlp (epochs=20, hidden=128)"}
    plot = methods_plot(groups, "test_accuracy")
    assert plot.png.startswith(b"\x89PNG") and plot.filename == \
        "test_accuracy-vs-epsilon-all-methods.png"
    assert methods_plot(groups, "no_such_metric") is None
    # control: the per-configuration panels split these runs into four one-method figures
    assert len(privacy_utility_plots(groups, "test_accuracy")) == 4


def test_the_report_draws_it_on_request(tmp_path, write_run):
    _demo_like(tmp_path, write_run)
    assert [p.filename for p in build_report(tmp_path, plots="methods").plots] == [
        "test_accuracy-vs-epsilon-all-methods.png"]
    assert len(build_report(tmp_path).plots) == 4


def test_a_panel_of_runs_without_a_key_is_named_none(tmp_path, write_run):
    """000's baselines set ``preset`` and HeterPoisson does not: the third panel per dataset is
    titled "preset=–" and its file ends "preset=none" (it ended "preset=.png")."""
    for eps in (2.0, 8.0):
        write_run(tmp_path, method="dpmlp", dataset="cora", seed=0, acc=0.4, epsilon=eps, preset="paper")
        write_run(tmp_path, method="dpmlp", dataset="cora", seed=0, acc=0.6, epsilon=eps, preset="auto")
        write_run(tmp_path, method="heterpoisson", dataset="cora", seed=0, acc=0.7, epsilon=eps)
    names = sorted(p.filename for p in privacy_utility_plots(group_rows(ResultStore(tmp_path).rows()),
                                                              "test_accuracy"))
    assert names == [f"test_accuracy-vs-epsilon-preset={v}.png" for v in ("auto", "none", "paper")]
