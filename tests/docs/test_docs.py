"""The documentation site builds with warnings as errors, and its examples run.

Every ```python block of a page in ``docs/`` is executed (the blocks of one page in order, in
one fresh interpreter, like a notebook), and the ``>>>`` examples of the public API's
docstrings run as doctests, so no example can rot.
"""

from __future__ import annotations

import doctest
import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md"))
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def test_site_builds_with_warnings_as_errors(tmp_path):
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent)) or shutil.which("mkdocs")
    if mkdocs is None:
        pytest.fail("mkdocs is not installed: `pip install -e '.[docs]'` (make install does it)")
    out = subprocess.run([mkdocs, "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                         cwd=REPO, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert out.returncode == 0, out.stdout + out.stderr
    assert (tmp_path / "site" / "api" / "index.html").is_file()
    html = (tmp_path / "site" / "api" / "index.html").read_text()
    assert "gnnprivacy.api.train" in html  # the reference is generated from the docstrings


def test_every_page_is_in_the_nav():
    nav = (REPO / "mkdocs.yml").read_text()
    missing = [str(p.relative_to(DOCS)) for p in PAGES if str(p.relative_to(DOCS)) not in nav]
    assert not missing, f"pages not in mkdocs.yml nav: {missing}"


@pytest.mark.parametrize("page", [p for p in PAGES if BLOCK.search(p.read_text())],
                         ids=lambda p: str(p.relative_to(DOCS)))
def test_page_examples_run(page, tmp_path):
    code = "\n\n".join(BLOCK.findall(page.read_text()))
    shared = os.environ.get("GNNPRIVACY_SHARED_DATASETS", str(REPO.parent / "shared" / "datasets"))
    env = {**os.environ, "GNNPRIVACY_DATA": shared, "GNNPRIVACY_CACHE": str(tmp_path / "cache"),
           "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=600, env=env)
    assert out.returncode == 0, f"{page.name} example failed:\n{out.stderr[-3000:]}"


@pytest.mark.parametrize("module", ["gnnprivacy.api", "gnnprivacy.accounting.query"])
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
