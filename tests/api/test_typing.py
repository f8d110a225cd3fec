"""Type checkers see the public API (issue 25): ``py.typed`` and typed lazy imports, so mypy
knows ``gp.train``'s signature and that ``.epsilon`` is a float."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
MYPY_INI = """[mypy]
follow_imports = silent
ignore_missing_imports = True
[mypy-torch.*,torch_geometric.*,numpy.*,scipy.*,sklearn.*,dp_accounting.*,matplotlib.*]
follow_imports = skip
"""
GOOD = '''import gnnprivacy as gp

result = gp.train("cora", method="heterpoisson", epsilon=8.0, data_root="data")
epsilon: float = result.epsilon
reveal_type(result.epsilon)
reveal_type(gp.account)
'''
BAD = '''import gnnprivacy as gp

gp.train("csbm", method="dpmlp", seed="zero")
'''


def _mypy(tmp_path: Path, code: str) -> subprocess.CompletedProcess:
    (tmp_path / "mypy.ini").write_text(MYPY_INI)
    (tmp_path / "snippet.py").write_text(code)
    return subprocess.run([sys.executable, "-m", "mypy", "--config-file", "mypy.ini",
                           "--cache-dir", str(tmp_path / "cache"), "snippet.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={"MYPYPATH": str(SRC), "PATH": "/usr/bin:/bin"})


def test_mypy_sees_the_signatures_of_the_top_level_api(tmp_path):
    pytest.importorskip("mypy")
    good = _mypy(tmp_path, GOOD)
    assert good.returncode == 0, good.stdout + good.stderr
    assert 'Revealed type is "builtins.float"' in good.stdout or \
        'Revealed type is "float"' in good.stdout, good.stdout
    assert "noise_multiplier: float | None" in good.stdout       # gp.account's signature
    bad = _mypy(tmp_path, BAD)
    assert bad.returncode == 1
    assert 'Argument "seed" to "train" has incompatible type "str"; expected "int"' in bad.stdout


def test_a_lazy_name_without_its_type_checking_import_is_any(tmp_path):
    # positive control: a name served by __getattr__ alone is Any, so the error goes unseen
    pytest.importorskip("mypy")
    pkg = tmp_path / "lazypkg"
    pkg.mkdir()
    (pkg / "impl.py").write_text("def train(seed: int) -> float:\n    return 1.0\n")
    (pkg / "__init__.py").write_text("def __getattr__(name: str):\n"
                                     "    from lazypkg import impl\n    return getattr(impl, name)\n")
    (pkg / "py.typed").write_text("")
    out = _mypy(tmp_path, "import lazypkg\nlazypkg.train(seed='zero')\n")
    assert out.returncode == 0, out.stdout


def test_the_package_ships_py_typed():
    assert (SRC / "gnnprivacy" / "py.typed").is_file()
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "py.typed" in config["tool"]["setuptools"]["package-data"]["gnnprivacy"]
    assert any(dep.startswith("mypy") for dep in config["project"]["optional-dependencies"]["test"])


def test_every_lazy_name_resolves_and_is_exported():
    # the TYPE_CHECKING imports are the one declaration of a package's lazy names
    import importlib

    from gnnprivacy._lazy import type_checking_imports

    for init in sorted(SRC.glob("gnnprivacy/**/__init__.py")):
        table = type_checking_imports(init)
        if not table:
            continue
        name = ".".join(init.relative_to(SRC).parent.parts)
        module = importlib.import_module(name)
        for public in table:
            assert getattr(module, public) is not None
            assert public in module.__all__, f"{name}.{public} is lazy but not in __all__"
