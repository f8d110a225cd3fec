"""``gnnprivacy report RUNS -o DIR``."""

from click.testing import CliRunner

from gnnprivacy.cli.report_cmd import report_command


def test_report_command_writes_markdown_and_html(table2_runs, tmp_path):
    runs, _ = table2_runs
    out = CliRunner().invoke(report_command, [str(runs), "-o", str(tmp_path / "rep"), "--reference", "000-table2"])
    assert out.exit_code == 0, out.output
    assert out.output.split() == [str(tmp_path / "rep" / "report.md"), str(tmp_path / "rep" / "report.html")]
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "paper 80.6 ± 0.4" in md and "004-table2" not in md  # only the requested reference


def test_report_command_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    out = CliRunner().invoke(report_command, [str(tmp_path / "empty"), "-o", str(tmp_path / "rep")])
    assert out.exit_code == 1 and "at least one finished run" in out.output
    assert not (tmp_path / "rep").exists()
    out = CliRunner().invoke(report_command, [str(tmp_path / "missing"), "-o", str(tmp_path / "rep")])
    assert out.exit_code == 2 and "does not exist" in out.output
