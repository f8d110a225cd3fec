"""``gnnprivacy sweep``: summary line, exit codes, clear errors for bad input."""

import yaml
from click.testing import CliRunner

from gnnprivacy.cli.sweep_cmd import sweep_command


def _write(tmp_path, data, name="sweep.yaml"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return str(path)


def test_failed_runs_are_reported_and_exit_code_is_nonzero(probe_base, probe_module, tmp_path):
    config = _write(tmp_path, {"name": "cli", "imports": [probe_module], "base": probe_base,
                               "grid": {"fail": [False, True]}})
    out = CliRunner().invoke(sweep_command, ["-c", config, "--runs-dir", str(tmp_path / "runs"), "--workers", "1", "-q"])
    assert out.exit_code == 1
    assert "2 runs; 0 already finished, 1 ran, 1 failed" in out.output
    assert "FAILED sweep-probe-csbm-" in out.output and "probe failure requested" in out.output


def test_bad_sweep_files_are_clear_errors(probe_base, probe_module, tmp_path):
    runs = tmp_path / "runs"
    cases = {
        "name: x\ngrid: {lr: [1, 2}\n": "valid YAML",
        "- a\n- b\n": "YAML mapping",
        yaml.safe_dump({"name": "x", "base": probe_base, "grid": {}}): "non-empty mapping",
        yaml.safe_dump({"name": "x", "base": probe_base, "grid": {"lr": []}}): "non-empty list",
        yaml.safe_dump({"name": "x", "imports": [probe_module], "base": probe_base, "grid": {"bogus": [1]}}):
            "'bogus'",
    }
    for i, (text, message) in enumerate(cases.items()):
        out = CliRunner().invoke(sweep_command, ["-c", _write(tmp_path, text, f"s{i}.yaml"), "--runs-dir", str(runs)])
        assert out.exit_code == 1 and message in out.output, (text, out.output)
        assert out.output.startswith("Error: ") and "Traceback" not in out.output
    assert not runs.exists()
    blocker = tmp_path / "file"
    blocker.write_text("x")
    good = _write(tmp_path, {"name": "x", "imports": [probe_module], "base": probe_base, "grid": {"lr": [0.1]}})
    out = CliRunner().invoke(sweep_command, ["-c", good, "--runs", str(blocker / "runs")])
    assert out.exit_code == 1 and "writable directory" in out.output
    out = CliRunner().invoke(sweep_command, ["-c", good, "--executor", "dask"])
    assert out.exit_code == 2 and "dask" in out.output
