"""Report writers destroy nothing they did not write (issue 35, class 1).

A report folder keeps a manifest (``.gnnprivacy-outputs.json``) of the files a report wrote
there: a rerun replaces those; a file the user put there (their own ``report.md``, a PNG in
``plots/``, a report edited by hand) is refused unless ``force``, and never deleted.
"""

import json
import subprocess
import sys
import warnings

import pytest

from gnnprivacy._files import OUTPUT_MANIFEST, OutputFolder
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.reporting.html import write_report


def test_a_rerun_replaces_its_own_files_silently(table2_runs, tmp_path):
    runs, _ = table2_runs
    write_report(runs, tmp_path / "out", title="first")
    manifest = json.loads((tmp_path / "out" / OUTPUT_MANIFEST).read_text())
    assert {"report.md", "report.html"} <= set(manifest) and any(k.startswith("plots/") for k in manifest)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        md, _ = write_report(runs, tmp_path / "out", title="second")
    assert md.read_text().startswith("# second\n")


def test_a_foreign_report_md_is_not_replaced_silently(table2_runs, tmp_path):
    runs, _ = table2_runs
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.md").write_text("my own notes\n")
    with pytest.raises(InvalidParameterError, match=r"report\.md that gnnprivacy did not write.*--force"):
        write_report(runs, out)
    assert (out / "report.md").read_text() == "my own notes\n"
    assert not (out / "report.html").exists() and not (out / "plots").exists()  # refused before any write
    with pytest.warns(UserWarning, match="replacing the existing file"):
        write_report(runs, out, force=True)
    assert (out / "report.md").read_text().startswith("# gnnprivacy report")


def test_a_report_edited_by_hand_is_refused(table2_runs, tmp_path):
    runs, _ = table2_runs
    md, _ = write_report(runs, tmp_path / "out")
    md.write_text(md.read_text() + "\nmy comment\n")
    with pytest.raises(InvalidParameterError, match="report.md"):
        write_report(runs, tmp_path / "out")
    assert md.read_text().endswith("my comment\n")


def test_a_stray_user_file_in_plots_survives_and_only_stale_own_plots_go(table2_runs, tmp_path):
    runs, _ = table2_runs
    out = tmp_path / "out"
    write_report(runs, out)
    mine = out / "plots" / "my-figure.png"
    mine.write_bytes(b"\x89PNG mine")
    folder = OutputFolder(out, name="output")
    folder.write("plots/old-report-plot.png", b"\x89PNG old")  # what an earlier report wrote
    edited = folder.write("plots/edited-plot.png", b"\x89PNG old")
    edited.write_bytes(b"\x89PNG edited by the user")
    write_report(runs, out)
    assert mine.read_bytes() == b"\x89PNG mine"
    assert edited.read_bytes() == b"\x89PNG edited by the user"
    assert not (out / "plots" / "old-report-plot.png").exists()
    assert sorted(p.name for p in (out / "plots").iterdir()) == [
        "edited-plot.png", "my-figure.png", "test_accuracy-vs-epsilon-dataset=computers.png",
        "test_accuracy-vs-epsilon-dataset=facebook.png"]


def test_a_foreign_plot_of_the_same_name_is_refused(table2_runs, tmp_path):
    runs, _ = table2_runs
    plot = tmp_path / "out" / "plots" / "test_accuracy-vs-epsilon-dataset=computers.png"
    plot.parent.mkdir(parents=True)
    plot.write_bytes(b"mine")
    with pytest.raises(InvalidParameterError, match="did not write"):
        write_report(runs, tmp_path / "out")
    assert plot.read_bytes() == b"mine" and not (tmp_path / "out" / "report.md").exists()


def test_the_runs_directory_is_refused_as_the_output(table2_runs):
    runs, _ = table2_runs
    with pytest.raises(InvalidParameterError, match="other than the runs directory"):
        write_report(runs, runs)
    assert not (runs / "report.md").exists()


def test_a_broken_manifest_owns_nothing(table2_runs, tmp_path):
    runs, _ = table2_runs
    write_report(runs, tmp_path / "out")
    (tmp_path / "out" / OUTPUT_MANIFEST).write_text("[not a manifest")
    with pytest.raises(InvalidParameterError, match="did not write"):
        write_report(runs, tmp_path / "out")


def test_reproduce_all_refuses_a_foreign_docs_page_before_any_run(tmp_path):
    from gnnprivacy.experiments.reproduce import reproduce_all

    page = tmp_path / "docs" / "repro.md"
    page.parent.mkdir()
    page.write_text("hand-written page\n")
    with pytest.raises(InvalidParameterError, match="--docs.*repro.md"):
        reproduce_all(runs_root=tmp_path / "runs", out_dir=tmp_path / "r", docs_page=page,
                      names=["000-table2"], report_only=True)
    assert page.read_text() == "hand-written page\n" and not (tmp_path / "r").exists()


def test_cli_report_names_force(table2_runs, tmp_path):
    runs, _ = table2_runs
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.html").write_text("<p>mine</p>")
    cmd = [sys.executable, "-m", "gnnprivacy.cli", "report", str(runs), "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "--force" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert (out / "report.html").read_text() == "<p>mine</p>"
    proc = subprocess.run(cmd + ["--force"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "replacing the existing file" in proc.stderr and "<!DOCTYPE html>" in (out / "report.html").read_text()
