"""The quick reproduction report (issue 38 item 6): no verdict and no "Finding" from one run,
no spec file that the repository does not hold, rerun commands with the given data root."""

from __future__ import annotations

from gnnprivacy.reporting.reproduction import (NO_VERDICT, Part, build_reproduction, render_html,
                                               render_markdown)
from gnnprivacy.reporting.verdicts import VERDICTS, Reason


def _report(tmp_path, write_run, *, seeds: int, data_root="data", quick=True,
            commands=("python why.py --data-root data --seeds 2",)):
    runs = tmp_path / f"runs-{seeds}"
    for seed in range(seeds):   # paper (Amazon, eps 8): heterpoisson 82.6, naive DP-SGD 37.4
        write_run(runs, method="heterpoisson", dataset="computers", seed=seed,
                  acc=0.70 + 0.002 * seed, epsilon=8, backbone="gcn")
        write_run(runs, method="dpmlp", dataset="computers", seed=seed, acc=0.83 + 0.002 * seed,
                  epsilon=8, preset="paper")
        write_run(runs, method="dpmlp", dataset="computers", seed=seed, acc=0.85 + 0.002 * seed,
                  epsilon=8, preset="auto")  # ours at defaults, beside it
    reason = Reason("amazon", "Amazon is different", "Measured: because.",
                    tuple(commands),
                    ({"table": "000-table2", "dataset": "computers"},))
    part = Part("000-table2-quick" if quick else "000-table2", "HeterPoisson", "notes",
                ("000-table2",), ("test_accuracy",), str(runs))
    return build_reproduction([part], command="gnnprivacy reproduce --all --quick", quick=quick,
                              reasons=[reason], data_root=data_root, held={"computers"})


def _verdict_column(md: str) -> list[str]:
    return [line.rstrip("| ").rsplit("|", 1)[-1].strip() for line in md.splitlines()
            if line.startswith("| GCN column:")]


def test_one_run_gives_no_verdict_and_no_finding(tmp_path, write_run):
    report = _report(tmp_path, write_run, seeds=1)
    md = render_markdown(report)
    assert report.cells and all(c.verdict == NO_VERDICT for c in report.cells)
    assert _verdict_column(md) and set(_verdict_column(md)) == {NO_VERDICT}
    assert report.counts == {}                                  # nothing judged, nothing counted
    summary = next(line for line in md.splitlines() if line.startswith("| 000:"))
    # 32 published Amazon cells (held), 2 run, 2 comparisons, judged none, 2 without a verdict
    assert summary.endswith("| 32 | 2 | 30 | 2 | 0 | 0 | 0 | 0 | 0 | 2 |"), summary
    assert "Finding" not in md and "no finding is drawn" in md
    assert "Why some cells are not reproduced" not in md        # no reason without a verdict


def test_the_check_can_fail_several_seeds_are_judged(tmp_path, write_run):
    report = _report(tmp_path, write_run, seeds=3, quick=False)
    md = render_markdown(report)
    assert {c.verdict for c in report.cells} <= set(VERDICTS)
    assert set(_verdict_column(md)) & {"beaten", "reproduced"} and "**Finding.**" in md


def test_no_spec_file_is_cited(tmp_path, write_run):
    report = _report(tmp_path, write_run, seeds=3, quick=False)
    for text in (render_markdown(report), render_html(report)):
        assert "specs/" not in text and ".md §" not in text
        assert "Paper 000 (HeterPoisson) Table II" in text and "docs/papers.md" in text


def test_rerun_commands_honour_the_data_root(tmp_path, write_run):
    # a reason without commands shows each cell's rerun command; one with commands, those
    md = render_markdown(_report(tmp_path, write_run, seeds=3, data_root="/srv/my data",
                                 commands=()))
    assert "gnnprivacy reproduce 000-table2 --quick --data-root '/srv/my data'   # cell:" in md
    assert "--data-root data" not in md
    md = render_markdown(_report(tmp_path / "r", write_run, seeds=3, data_root="/srv/my data"))
    assert "python why.py --data-root '/srv/my data' --seeds 2" in md
    assert "--data-root data" not in md
    md = render_markdown(_report(tmp_path / "none", write_run, seeds=3, data_root=None,
                                 commands=()))
    assert "gnnprivacy reproduce 000-table2 --quick   # cell:" in md
    assert "--data-root" not in md                          # the default root: no option
    md = render_markdown(_report(tmp_path / "data", write_run, seeds=3, commands=()))
    assert "gnnprivacy reproduce 000-table2 --quick --data-root data   # cell:" in md
