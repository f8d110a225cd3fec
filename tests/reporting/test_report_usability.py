"""Issue 11 §7: reports that read right (CI range and n, --quick marked, applicable references,
seed index, offset markers, umask permissions, relation beside epsilon)."""

import math
import os
import re

import pytest
from click.testing import CliRunner

from gnnprivacy.reporting.aggregate import metric_bounds, summarize
from gnnprivacy.reporting.html import build_report, render_markdown, write_report
from gnnprivacy.records.record import RunRecord


def _record(runs, run_id, *, method="dpmlp", dataset="csbm", acc=0.5, seed=0, epsilon=8.0,
            relation="add_or_remove", info=None):
    private = epsilon is not None
    config = {"method": method, "dataset": dataset, "seed": seed, "runs_dir": str(runs)}
    if private:
        config["epsilon"] = epsilon
    privacy = {"private": private, **({"relation": relation, "unit": "node"} if private else {})}
    record = RunRecord(run_id=run_id, method=method, dataset=dataset, config=config,
                       seeds={"run": seed, "split": seed}, epsilon=epsilon if private else math.inf,
                       delta=1e-5 if private else None, privacy=privacy, metrics={"test_accuracy": acc},
                       timings={"total_seconds": 1.0}, info=info or {}, versions={}, git_commit=None)
    record.save(runs)
    return record


def test_confidence_interval_stays_in_the_metric_range_and_n_is_shown(tmp_path):
    raw = summarize([0.99, 0.80])
    assert raw.ci_high > 1  # positive control: the plain t-interval leaves [0, 1] with n = 2
    clipped = summarize([0.99, 0.80], bounds=metric_bounds("test_accuracy"))
    assert 0 <= clipped.ci_low and clipped.ci_high == 1.0
    assert metric_bounds("train_loss") is None
    runs = tmp_path / "runs"
    _record(runs, "a", acc=0.99, seed=0)
    _record(runs, "b", acc=0.80, seed=1)
    md = render_markdown(build_report(runs))
    cis = [float(x) for pair in re.findall(r"\[(\d+\.\d), (\d+\.\d)\]", md) for x in pair]
    assert cis and max(cis) <= 100.0 and "(n=2)" in md


def test_quick_results_are_marked_in_every_table_and_plot(tmp_path):
    runs = tmp_path / "runs"
    for seed, eps in ((0, 4.0), (0, 8.0)):
        _record(runs, f"q{eps}", dataset="computers", epsilon=eps, seed=seed, info={"sweep": "000-table2-quick"})
    _record(runs, "gcn", method="gcn", dataset="computers", epsilon=None, info={"sweep": "000-table2-quick"})
    report = build_report(runs)
    assert "QUICK" in report.title and report.notes[0].startswith("QUICK")
    tables = [t for _, ts in report.sections for t in ts]
    assert tables and all(t.title.startswith("[QUICK") for t in tables)
    assert report.plots and all(p.title.startswith("QUICK") for p in report.plots)
    full = tmp_path / "full"
    _record(full, "f", dataset="computers")
    assert not any("QUICK" in t.title for _, ts in build_report(full).sections for t in ts)


def test_references_list_only_tables_about_the_runs_datasets(tmp_path):
    csbm = tmp_path / "csbm"
    _record(csbm, "c")
    report = build_report(csbm)
    assert report.references == []
    assert "none: no published table concerns these datasets" in render_markdown(report)
    computers = tmp_path / "computers"
    _record(computers, "c", dataset="computers")
    ids = [r.split(":")[0] for r in build_report(computers).references]
    assert "000-table2" in ids and "004-table2" not in ids


def test_results_show_the_seed_index_beside_the_derived_seed(tmp_path):
    from gnnprivacy.cli.results_cmd import results_command

    runs = tmp_path / "runs"
    _record(runs, "r1", seed=673228719, info={"sweep": "s", "seed_index": 1})
    out = CliRunner().invoke(results_command, [str(runs)])
    assert out.exit_code == 0, out.output
    header = next(line for line in out.output.splitlines() if "seed_index" in line)
    row = next(line for line in out.output.splitlines() if "673228719" in line)
    assert header.index("seed_index") < header.index(" seed ") and re.search(r"│ 1\s+│ 673228719", row)


def test_series_are_offset_so_markers_do_not_overlap():
    from gnnprivacy.reporting.plots import _offsetter, series_offset

    offsets = [series_offset(i, 4) for i in range(4)]
    assert len(set(offsets)) == 4 and math.isclose(sum(offsets), 0.0, abs_tol=1e-12)
    xs = {_offsetter(i, 4, True)(8.0) for i in range(4)}
    assert len(xs) == 4 and all(7.0 < x < 9.0 for x in xs)  # near the true budget, all distinct


def test_files_get_the_users_umask_not_0600(tmp_path):
    old = os.umask(0o022)
    try:
        runs = tmp_path / "runs"
        rec = _record(runs, "u", dataset="computers")
        _record(runs, "u2", dataset="computers", epsilon=4.0)
        paths = write_report(runs, tmp_path / "out")
    finally:
        os.umask(old)
    files = [runs / f"{rec.run_id}.json", *paths, *(tmp_path / "out" / "plots").glob("*.png")]
    assert len(files) >= 4
    for f in files:
        assert (f.stat().st_mode & 0o777) == 0o644, (f, oct(f.stat().st_mode))


def test_relation_is_shown_beside_epsilon(tmp_path):
    runs = tmp_path / "runs"
    _record(runs, "d", method="dpgnn", relation="replace")
    _record(runs, "m", method="dpmlp", relation="add_or_remove")
    report = build_report(runs)
    tables = {t.title: t for _, ts in report.sections for t in ts}
    privacy = tables["privacy spent"]
    assert "relation" in privacy.header
    col = privacy.header.index("relation")
    assert {r[col] for r in privacy.rows} == {"replace", "add_or_remove"}
    results = next(t for t in tables.values() if t.title.startswith("test_accuracy"))
    assert "relation" in results.header


def test_report_metrics_of_a_reproduction_skip_those_no_run_has(tmp_path):
    from gnnprivacy.errors import UnknownNameError
    from gnnprivacy.experiments.reproduce import get_reproduction

    repro = get_reproduction("003-tables")
    assert repro.report_metrics[0] == "auc_flipped" and "auc_output_blind" in repro.report_metrics
    assert get_reproduction("002-table").report_metrics == ("test_accuracy",)
    runs = tmp_path / "runs"
    _record(runs, "a")
    with pytest.raises(UnknownNameError):
        build_report(runs, metrics=("test_accuracy", "auc_output_blind"))
    report = build_report(runs, metrics=("auc_output_blind", "test_accuracy"), missing_metrics_ok=True)
    titles = [t.title for _, ts in report.sections for t in ts]
    assert any(t.startswith("test_accuracy") for t in titles)
    assert not any("auc_output_blind" in t for t in titles)


def test_a_single_budget_is_one_tick_with_room_around_it():
    """Two series at one budget: the axis shows that budget once, the offsets stay small."""
    from matplotlib.figure import Figure

    from gnnprivacy.reporting.plots import _offsetter, budget_axis

    for x, log in ((10.0, True), (0.0, False)):
        ax = Figure().subplots()
        xs = [_offsetter(i, 2, log)(x) for i in range(2)]
        ax.plot(xs, [1, 2], "o")
        budget_axis(ax, [x], "eps_f")
        lo, hi = ax.get_xlim()
        assert [t.get_text() for t in ax.get_xticklabels()] == [f"{x:g}"]
        # the plotted markers take up a small part of the axis (autoscale alone zooms onto them)
        span = (math.log2(hi) - math.log2(lo)) if log else hi - lo
        gap = (math.log2(xs[1]) - math.log2(xs[0])) if log else xs[1] - xs[0]
        assert gap < 0.1 * span
    ax = Figure().subplots()
    budget_axis(ax, [1.0, 4.0, 16.0], "eps_f")
    assert ax.get_xscale() == "log" and [t.get_text() for t in ax.get_xticklabels()] == ["1", "4", "16"]
