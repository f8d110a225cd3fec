"""``gnnprivacy datasets`` through click's CliRunner."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from gnnprivacy.datasets import dataset_info, list_datasets
from click.testing import CliRunner

import gnnprivacy

try:
    from gnnprivacy.cli.datasets_cmd import datasets_command
    from gnnprivacy.cli import main as cli_main
except ImportError:  # gnnprivacy/cli/__init__.py imports sibling commands that may not exist yet
    _path = Path(gnnprivacy.__file__).parent / "cli" / "datasets_cmd.py"
    _spec = importlib.util.spec_from_file_location("_datasets_cmd", _path)
    _module = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_module)
    datasets_command, cli_main = _module.datasets_command, None


def test_lists_every_dataset_with_missing_files(tmp_path, no_data_env):
    result = CliRunner().invoke(datasets_command, ["--data-root", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert f"Data root: {tmp_path.resolve()}" in result.output
    assert "csbm        yes" in result.output
    assert f"missing {tmp_path.resolve()}/Cora/raw/{{ind.cora.x," in result.output
    generated = sum(dataset_info(name).generated for name in list_datasets())  # csbm, csbm-large
    assert f"{generated} of {len(list_datasets())} datasets available." in result.output


def test_json_output(tmp_path, no_data_env):
    result = CliRunner().invoke(datasets_command, ["--data-root", str(tmp_path), "--json"])
    assert result.exit_code == 0
    doc = json.loads(result.output)
    rows = {r["name"]: r for r in doc["datasets"]}
    assert doc["root"] == str(tmp_path.resolve()) and len(rows) == len(list_datasets())
    assert rows["csbm"]["available"] and not rows["cora"]["available"]
    assert str(tmp_path.resolve() / "Cora/raw/ind.cora.x") in rows["cora"]["missing_files"]
    assert rows["cora"]["description"]


@pytest.mark.dataset
def test_shared_root_availability(shared_root, no_data_env):
    result = CliRunner().invoke(datasets_command, ["--data-root", str(shared_root), "--json"])
    rows = {r["name"]: r for r in json.loads(result.output)["datasets"]}
    unavailable = sorted(n for n, r in rows.items() if not r["available"])
    assert unavailable == ["lastfm", "ogbn-arxiv", "pubmed"]
    assert any(f.endswith("PubMed/raw/ind.pubmed.allx") for f in rows["pubmed"]["missing_files"])


def test_bad_root_is_a_usage_error(tmp_path, no_data_env):
    result = CliRunner().invoke(datasets_command, ["--data-root", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "--data-root" in result.output


@pytest.mark.skipif(cli_main is None, reason="gnnprivacy.cli cannot be imported yet")
def test_registered_in_the_main_group(tmp_path, no_data_env):
    result = CliRunner().invoke(cli_main, ["datasets", "--data-root", str(tmp_path)])
    assert result.exit_code == 0 and "csbm" in result.output
