"""The layer order of docs/architecture.md holds: `lint-imports` keeps every contract of
pyproject.toml's ``[tool.importlinter]`` (layers, independence, no import circle).

The positive controls copy ``src/`` to a temporary folder, plant an import there (never in the
tree) and check that the linter reports the broken contract: an upward import inside a function
(lazy imports count) and a circle between two sibling modules.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
CONFIG = REPO / "pyproject.toml"

pytest.importorskip("importlinter", reason="import-linter is in the test extra: "
                    "pip install -e '.[test]'")


def _lint(src: Path, *contracts: str) -> subprocess.CompletedProcess:
    """`lint-imports` with the repository's contracts over the package found in ``src``."""
    code = ("import sys\nfrom importlinter.cli import lint_imports\n"
            f"sys.exit(lint_imports(config_filename={str(CONFIG)!r}, no_cache=True, no_logo=True,"
            f" limit_to_contracts={contracts!r}))")
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run([sys.executable, "-c", code], cwd=src, capture_output=True, text=True,
                          timeout=300, env=env)


def _copy(tmp_path: Path) -> Path:
    dst = tmp_path / "src"
    shutil.copytree(SRC / "gnnprivacy", dst / "gnnprivacy",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def test_every_contract_is_kept():
    out = _lint(SRC)
    assert out.returncode == 0, out.stdout + out.stderr
    kept = re.search(r"Contracts: (\d+) kept, (\d+) broken", out.stdout)
    assert kept and int(kept.group(1)) >= 7 and kept.group(2) == "0", out.stdout
    files = int(re.search(r"Analyzed (\d+) files", out.stdout).group(1))
    assert files == len(list((SRC / "gnnprivacy").rglob("*.py"))), out.stdout


def test_a_planted_upward_import_breaks_the_layers(tmp_path):
    src = _copy(tmp_path)
    assert _lint(src, "layers").returncode == 0
    # an import inside a function (a lazy import) from a building block up to the drivers
    (src / "gnnprivacy" / "mechanisms" / "planted.py").write_text(
        "def f():\n    from gnnprivacy.experiments.sweep import run_sweep\n    return run_sweep\n")
    out = _lint(src, "layers")
    assert out.returncode == 1, out.stdout
    assert "gnnprivacy.mechanisms is not allowed to import gnnprivacy.experiments" in out.stdout
    assert "gnnprivacy.mechanisms.planted -> gnnprivacy.experiments.sweep" in out.stdout


def test_a_planted_circle_breaks_the_acyclic_contract(tmp_path):
    src = _copy(tmp_path)
    records = src / "gnnprivacy" / "records"
    assert _lint(src, "acyclic").returncode == 0
    # two sibling modules that import each other (one of them lazily): no layer is crossed
    (records / "planted_a.py").write_text("from gnnprivacy.records import planted_b  # noqa\n")
    (records / "planted_b.py").write_text("def f():\n    from gnnprivacy.records import planted_a\n"
                                          "    return planted_a\n")
    assert _lint(src, "layers").returncode == 0
    out = _lint(src, "acyclic")
    assert out.returncode == 1, out.stdout
    assert "No cycles are allowed in gnnprivacy.records" in out.stdout


#: the only places that import a module named by a string, and why none can hide a circle
IMPORTLIB_SITES = {
    "_lazy.py",               # a package's lazy exports: its own `if TYPE_CHECKING:` imports,
                              # which the linter reads
    "cli/lazy.py",            # the CLI's subcommands: modules of gnnprivacy.cli, the top layer
    "experiments/executors.py",   # a sweep's `imports:` (user modules) in each worker
    "experiments/sweep.py",
    "training/user_model.py",     # the modules a caller names in load_model(imports=) /
                                  # `assess --import` (user modules, never one a file names)
}


def test_no_module_is_imported_by_a_string_elsewhere():
    found = {str(p.relative_to(SRC / "gnnprivacy")) for p in (SRC / "gnnprivacy").rglob("*.py")
             if re.search(r"import_module\(|__import__\(", p.read_text(encoding="utf-8"))}
    assert found <= IMPORTLIB_SITES, sorted(found - IMPORTLIB_SITES)
