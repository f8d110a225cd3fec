"""An instant CLI (issue 11 §3) and one name per concept across subcommands (§4)."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from gnnprivacy.cli import COMMANDS, main


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint(' '.join(sys.modules))"],
                         capture_output=True, text=True, timeout=120, check=True)
    return set(out.stdout.split())


def test_help_and_version_import_no_torch():
    mods = _modules_after(
        "import gnnprivacy.cli\nfrom click.testing import CliRunner\n"
        "r = CliRunner().invoke(gnnprivacy.cli.main, ['--help']); assert r.exit_code == 0, r.output\n"
        "r = CliRunner().invoke(gnnprivacy.cli.main, ['--version']); assert '0.' in r.output")
    assert "torch" not in mods and "torch_geometric" not in mods
    assert "dp_accounting" not in mods


def test_account_imports_neither_torch_nor_pyg():
    mods = _modules_after(
        "import gnnprivacy.cli\nfrom click.testing import CliRunner\n"
        "r = CliRunner().invoke(gnnprivacy.cli.main, ['account', '--mechanism', 'dpsgd', "
        "'--sample-rate', '0.01', '--noise-multiplier', '1.1', '--steps', '10'])\n"
        "assert r.exit_code == 0 and 'epsilon' in r.output, r.output")
    assert "torch" not in mods and "torch_geometric" not in mods


def test_train_help_imports_neither_torch_nor_pyg():
    # issue 25: `train --help` lists every method and option without loading PyG (under 1 s;
    # benchmarks/bench_cli_startup.py prints the time)
    mods = _modules_after(
        "import gnnprivacy.cli\nfrom click.testing import CliRunner\n"
        "r = CliRunner().invoke(gnnprivacy.cli.main, ['train', '--help'])\n"
        "assert r.exit_code == 0 and 'heterpoisson' in r.output, r.output")
    assert "torch" not in mods and "torch_geometric" not in mods


def test_help_lists_every_subcommand():
    out = CliRunner().invoke(main, ["--help"]).output
    for name in COMMANDS:
        assert name in out


def _all_commands() -> list[tuple[str, click.Command]]:
    ctx = click.Context(main)
    out = []
    for name in main.list_commands(ctx):
        cmd = main.get_command(ctx, name)
        if isinstance(cmd, click.Group):
            sub = click.Context(cmd)
            out += [(f"{name} {s}", cmd.get_command(sub, s)) for s in cmd.list_commands(sub)]
        out.append((name, cmd))
    return out


@pytest.mark.parametrize("concept, param_name, flag, kind", [
    ("runs directory", "runs_dir", "--runs-dir", click.Path),
    ("data root", "data_root", "--data-root", click.Path),
])
def test_one_name_per_concept(concept, param_name, flag, kind):
    seen = 0
    for name, cmd in _all_commands():
        for p in cmd.params:
            if (p.name == param_name and isinstance(p, click.Option)
                    and not getattr(p, "hidden", False)):
                seen += 1
                assert flag in p.opts, f"{name}: {concept} is {p.opts}, expected {flag}"
                assert isinstance(p.type, kind), f"{name}: {flag} is {p.type}, expected a path"
    assert seen >= 2


def test_output_directories_are_dash_o_everywhere():
    for name, cmd in _all_commands():
        for p in cmd.params:
            if p.name in ("report_dir", "out_dir", "output") and not getattr(p, "hidden", False):
                assert "-o" in p.opts and "--output" in p.opts, f"{name}: {p.opts}"


def test_case_twins_are_renamed_with_hidden_aliases(tmp_path):
    train = main.get_command(click.Context(main), "train")
    flags = {o for p in train.params if not getattr(p, "hidden", False) for o in p.opts}
    assert "--neighbor-multiplier" in flags and "--sampled-features" in flags
    assert "--M" not in flags and "--m" not in flags
    r = CliRunner().invoke(main, ["train", "--method", "heterpoisson", "--M", "2", "--print-config"])
    assert r.exit_code == 0 and "M: 2.0" in r.output, r.output
    r = CliRunner().invoke(main, ["train", "--method", "heterpoisson", "--M", "2",
                                  "--neighbor-multiplier", "3", "--print-config"])
    assert r.exit_code == 2 and "same option" in r.output
    r = CliRunner().invoke(main, ["train", "--data-root", str(tmp_path / "nope"), "--print-config"])
    assert r.exit_code == 2 and "data_root" in r.output


def test_train_output_puts_the_relation_beside_epsilon(tmp_path):
    r = CliRunner().invoke(main, ["train", "--method", "dpmlp", "--dataset-args", "num_nodes=300",
                                  "--runs-dir", str(tmp_path), "-q"])
    assert r.exit_code == 0, r.output
    assert "(node-level, add_or_remove)" in r.output
