"""The documentation site builds with warnings as errors, and its examples run.

Every ```python block of a page in ``docs/`` is executed (the blocks of one page in order, in
one fresh interpreter, like a notebook), and the ``>>>`` examples of the public API's
docstrings run as doctests, so no example can rot.
"""

from __future__ import annotations

import doctest
import html as html_lib
import importlib
import os
import pkgutil
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


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site, built once with ``mkdocs build --strict`` (no ``-q``: warnings are shown
    and are errors), as ``make docs`` builds it."""
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent)) or shutil.which("mkdocs")
    if mkdocs is None:
        pytest.fail("mkdocs is not installed: `pip install -e '.[docs]'` (make install does it)")
    out_dir = tmp_path_factory.mktemp("site")
    out = subprocess.run([mkdocs, "build", "--strict", "-d", str(out_dir)],
                         cwd=REPO, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "NO_MKDOCS_2_WARNING": "1",
                              "PYTHONPATH": str(REPO / "src")})
    assert out.returncode == 0, out.stdout + out.stderr
    assert "WARNING" not in out.stderr, out.stderr
    return out_dir


def test_site_builds_with_warnings_as_errors(site):
    assert (site / "api" / "index.html").is_file()
    html = (site / "api" / "index.html").read_text()
    assert "gnnprivacy.api.train" in html  # the reference is generated from the docstrings


def _text(page: Path) -> str:
    return html_lib.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))


#: reST that mkdocstrings does not render: roles, literal-block markers, directives
RAW_RST = re.compile(r":(func|class|meth|mod|attr|data|exc|obj):`?|Example::|\.\. \w+::")


def test_no_raw_sphinx_markup_in_the_built_html(site):
    found = [f"{p.relative_to(site)}: ...{t[max(0, m.start() - 40):m.end() + 20]!r}"
             for p in sorted(site.rglob("*.html")) for t in [_text(p)]
             for m in RAW_RST.finditer(t)]
    assert not found, "\n".join(found[:20])


def test_the_raw_markup_check_can_fail():
    # positive control: what the site showed before issue 25
    assert RAW_RST.search("see :func:gnnprivacy.train for the step")
    assert RAW_RST.search("Example::\n    import gnnprivacy")


def _public_units() -> list[str]:
    """Every public package of gnnprivacy (no ``_`` part; the CLI documents itself)."""
    import gnnprivacy

    return sorted(info.name for info in pkgutil.walk_packages(gnnprivacy.__path__, "gnnprivacy.")
                  if info.ispkg and not any(part.startswith("_") for part in info.name.split("."))
                  and not info.name.startswith("gnnprivacy.cli"))


def _all_of(unit: str) -> list[str]:
    """A package's ``__all__``; a package without one: its public modules' ``__all__``."""
    module = importlib.import_module(unit)
    if hasattr(module, "__all__"):
        return [n for n in module.__all__ if not n.startswith("__")]
    names = []
    for info in pkgutil.iter_modules(module.__path__):
        if not info.name.startswith("_"):
            names += getattr(importlib.import_module(f"{unit}.{info.name}"), "__all__", [])
    return names


def _missing(page: Path, names: list[str]) -> list[str]:
    """Names with neither an entry (an anchor ``id="....name"``) nor a link to one."""
    html = page.read_text(encoding="utf-8") if page.is_file() else ""
    return [n for n in names
            if not re.search(r'id="[\w.]*\b' + re.escape(n) + '"', html)
            and not re.search(r'href="[^"]*#[\w.]*\b' + re.escape(n) + '"', html)]


def test_every_public_name_is_in_the_api_reference(site):
    units = ["gnnprivacy", *_public_units(), "gnnprivacy.errors", "gnnprivacy.random"]
    assert {"gnnprivacy.training.node_dp", "gnnprivacy.transforms", "gnnprivacy.ldp.heterorr",
            "gnnprivacy.accounting", "gnnprivacy.auditing", "gnnprivacy.defenses"} <= set(units)
    missing = {}
    for unit in units:
        page = site / "api" / ("index.html" if unit == "gnnprivacy" else f"{unit}/index.html")
        names = _all_of(unit)
        assert names, f"{unit} exports nothing"
        if gaps := _missing(page, names):
            missing[unit] = gaps
    assert not missing, f"names of __all__ without an API entry: {missing}"


def test_the_api_check_can_fail(site):
    # positive control: a name nobody documents is reported
    page = site / "api" / "gnnprivacy.transforms" / "index.html"
    assert _missing(page, ["EdgeRand", "NoSuchTransform"]) == ["NoSuchTransform"]


def test_code_blocks_scroll_and_signatures_wrap(site):
    css = (site / "stylesheets" / "extra.css").read_text()
    assert re.search(r"pre > code \{[^}]*overflow-x: auto", css)
    assert re.search(r"doc-signature[^{]*\{[^}]*white-space: pre-wrap", css)
    assert 'href="../stylesheets/extra.css"' in (site / "install" / "index.html").read_text()


def test_no_page_points_into_the_shared_folder(site):
    # users do not have the project's shared/ inputs: the docs cite papers, not spec files
    hits = [f"{p.relative_to(DOCS)}" for p in PAGES if "shared/" in p.read_text()]
    hits += [f"site/{p.relative_to(site)}" for p in site.rglob("*.html")
             if "shared/" in _text(p)]
    assert not hits, hits


def test_every_page_is_in_the_nav():
    nav = (REPO / "mkdocs.yml").read_text()
    missing = [str(p.relative_to(DOCS)) for p in PAGES if str(p.relative_to(DOCS)) not in nav]
    assert not missing, f"pages not in mkdocs.yml nav: {missing}"


def _shared_datasets() -> Path:
    """``$GNNPRIVACY_SHARED_DATASETS``, else ``<repo>/../shared/datasets`` (may be absent)."""
    return Path(os.environ.get("GNNPRIVACY_SHARED_DATASETS") or REPO.parent / "shared" / "datasets")


def _raw_files_missing(code: str, root: Path) -> list[str]:
    """The raw files of every registered file-backed dataset that ``code`` names (as a quoted
    string: ``load_dataset("cora")``, ``dataset="cora"``) and that ``root`` lacks."""
    from gnnprivacy.datasets import dataset_info, list_datasets

    from gnnprivacy.datasets.tu_graphs import _entry, list_graph_datasets

    def quoted(n: str) -> bool:
        return bool(re.search(r"[\"']" + re.escape(n) + r"[\"']", code, re.I))

    files = {n: dataset_info(n).raw_files for n in list_datasets()
             if not dataset_info(n).generated and quoted(n)}
    for n in list_graph_datasets():                  # the graph-classification sets (--task graph)
        if quoted(n):
            folder, names = _entry(n)
            files[n] = tuple(f"{folder}/{f}" for f in names)
    return [f"{n}: {root / f}" for n, fs in files.items() for f in fs if not (root / f).exists()]


def test_the_dataset_check_names_what_a_page_lacks(tmp_path):
    # broken control: a page that reads Cora from an empty root is caught, a synthetic one is not
    missing = _raw_files_missing('data = gp.load_dataset("cora")', tmp_path)
    assert missing and all(m.startswith(f"cora: {tmp_path}") for m in missing)
    assert _raw_files_missing('load_dataset("csbm", num_nodes=300)', tmp_path) == []
    graph = _raw_files_missing('load_graph_dataset("proteins")', tmp_path)   # a TU graph set
    assert graph and all(m.startswith(f"proteins: {tmp_path / 'PROTEINS_full'}") for m in graph)


#: pages whose examples take minutes (run with ``-m slow``): the reason, measured
SLOW_PAGES = {"assess.md": "LiRA shadows and the code audit on Amazon Computers: 397 s on 2 cores "
                            "before the several-models example (10 more epochs, 3 more cards)"}


@pytest.mark.parametrize("page", [pytest.param(p, marks=[pytest.mark.slow]
                                               if p.name in SLOW_PAGES else [])
                                  for p in PAGES if BLOCK.search(p.read_text())],
                         ids=lambda p: str(p.relative_to(DOCS)))
def test_page_examples_run(page, tmp_path):
    code = "\n\n".join(BLOCK.findall(page.read_text()))
    shared = _shared_datasets()
    if missing := _raw_files_missing(code, shared):
        pytest.skip(f"{page.name} reads datasets not found under {shared} (set "
                    f"GNNPRIVACY_SHARED_DATASETS): {', '.join(missing[:3])}")
    env = {**os.environ, "GNNPRIVACY_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    env.pop("GNNPRIVACY_DATA", None)
    if shared.is_dir():
        env["GNNPRIVACY_DATA"] = str(shared)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=600, env=env)
    assert out.returncode == 0, f"{page.name} example failed:\n{out.stderr[-3000:]}"


def _modules_with_examples() -> list[str]:
    """Every module of the package whose docstrings hold ``>>>`` examples."""
    src = REPO / "src"
    return sorted(".".join(p.relative_to(src).with_suffix("").parts).removesuffix(".__init__")
                  for p in (src / "gnnprivacy").rglob("*.py") if ">>> " in p.read_text())


#: the entries a PyG user meets first: each has an example and a *Privacy* paragraph
HEADLINE = {
    "gnnprivacy.training.node_dp": ["HeterPoissonTrainer", "DPGNNTrainer", "DPMLPTrainer"],
    "gnnprivacy.training": ["FullBatchTrainer", "MiniBatchTrainer"],
    "gnnprivacy.ldp": ["RGNN", "LPGNN"],
    "gnnprivacy.accounting": ["make_accountant", "PldAccountant", "RdpAccountant",
                              "heterpoisson_event", "calibrate_noise_multiplier"],
    "gnnprivacy.mechanisms": ["GaussianMechanism", "LaplaceMechanism", "RandomizedResponse",
                              "GRR", "GRRFS", "MultiBit", "ExponentialMechanism"],
    "gnnprivacy.sampling": ["HeterPoissonSampler", "sample_degree_bounded_subgraphs",
                            "NodeBatchSampler", "poisson_node_batch"],
    "gnnprivacy.transforms": ["EdgeRand", "LapGraph", "EdgeRR", "FeatureRR", "FeatureLDP",
                              "privacy_spent"],
    "gnnprivacy.nn": ["StarGNN", "OneLayerGCN", "build_encoder"],
    "gnnprivacy.attacks": ["attack_metrics"],
    "gnnprivacy.defenses": ["GRID", "MemGuard", "MinMaxTrainer"],
    "gnnprivacy.auditing": ["audit"],
    "gnnprivacy": ["train", "RunRecord"],
}


def test_headline_entries_have_an_example_and_a_privacy_paragraph():
    import inspect

    lacking = []
    for module, names in HEADLINE.items():
        for name in names:
            doc = inspect.getdoc(getattr(importlib.import_module(module), name)) or ""
            module_doc = inspect.getmodule(getattr(importlib.import_module(module), name)).__doc__
            if ">>> " not in doc:
                lacking.append(f"{module}.{name}: no example")
            if "Privacy" not in doc and "Privacy" not in (module_doc or "") and name != "train":
                lacking.append(f"{module}.{name}: no privacy paragraph")
    assert not lacking, lacking


@pytest.mark.parametrize("module", _modules_with_examples())
def test_docstring_examples(module, monkeypatch, tmp_path):
    monkeypatch.setenv("GNNPRIVACY_ACCOUNTING_CACHE", str(tmp_path / "acc"))
    result = doctest.testmod(importlib.import_module(module),
                             optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
def test_the_install_page_covers_every_extra_and_every_raw_file():
    import tomllib

    from gnnprivacy.datasets import dataset_info, list_datasets

    page = (DOCS / "install.md").read_text()
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(extras) >= {"report", "ray", "heterorr", "docs", "all"}
    assert not [e for e in extras if f"'.[{e}]'" not in page], "an extra the install page omits"
    assert "download.pytorch.org/whl/cu" in page and "pip install torch==2.13.0" in page
    missing = [f"{name}: {f}" for name in list_datasets() for f in dataset_info(name).raw_files
               if f"`{f}`" not in page]
    assert not missing, f"raw files the install page does not place: {missing}"
