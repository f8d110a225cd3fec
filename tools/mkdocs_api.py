"""mkdocs hook: the API reference, one page per public subpackage, generated from ``__all__``.

At build time ``gnnprivacy`` itself (``api/index.md``), every public package and the public
top-level modules get a page that renders the unit's docstring and then every name of its
``__all__`` with mkdocstrings (signature, parameters, examples, *Privacy* paragraph). A package
without ``__all__`` (``ldp.heterorr``, ``experiments``) lists its modules' ``__all__``. Each
object is documented once, on the page of the deepest unit that exports it and holds its
module; another unit that exports it links there. The pages replace the nav entry "API reference". A name added to an ``__all__`` therefore appears in the next build; a name that
mkdocstrings cannot render fails the strict build, and ``tests/docs`` checks that every
``__all__`` name has an entry.

Nothing is written into ``docs/``: the pages exist only in the build.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
import sys
from pathlib import Path

from mkdocs.structure.files import File

#: packages whose reference is elsewhere: the command line documents itself (``--help``)
SKIP = ("gnnprivacy.cli",)
#: top-level modules with a page of their own (``gnnprivacy.api``'s objects are on the
#: ``gnnprivacy`` page)
TOP_MODULES = ("gnnprivacy.errors", "gnnprivacy.random")
NAV_TITLE = "API reference"

_ROOT_OPTIONS = """    options:
      members: false
      show_root_heading: false
      show_root_toc_entry: false
"""


def public_units() -> list[str]:
    """The units that get a page: ``gnnprivacy`` itself (``api/index.md``), every public
    package, and the public top-level modules."""
    import gnnprivacy

    units = []
    for info in pkgutil.walk_packages(gnnprivacy.__path__, "gnnprivacy."):
        name = info.name
        if not info.ispkg or any(p.startswith("_") for p in name.split(".")):
            continue
        if name.startswith(SKIP):
            continue
        units.append(name)
    return ["gnnprivacy"] + sorted(units) + list(TOP_MODULES)


def page_path(unit: str) -> str:
    """Where a unit's page lives in the site's sources."""
    return "api/index.md" if unit == "gnnprivacy" else f"api/{unit}.md"


@functools.cache
def exported_names(unit: str) -> list[tuple[str, str]]:
    """``(public name, module it is listed in)`` for a package's ``__all__``, or its modules'."""
    module = importlib.import_module(unit)
    names = getattr(module, "__all__", None)
    if names is not None:
        return [(n, unit) for n in names if not n.startswith("__")]
    out = []
    for info in pkgutil.iter_modules(module.__path__):
        if info.ispkg or info.name.startswith("_"):
            continue
        sub = importlib.import_module(f"{unit}.{info.name}")
        out += [(n, sub.__name__) for n in getattr(sub, "__all__", ())]
    return out


@functools.cache
def object_path(name: str, where: str) -> tuple[str, bool]:
    """The dotted path mkdocstrings renders ``where.name`` from, and whether it is a class or
    function (rendered from its own module: a lazy name is not in the package at runtime);
    constants are rendered as the name in the listing module (griffe follows the import)."""
    obj = getattr(importlib.import_module(where), name)
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if (inspect.isclass(obj) or inspect.isfunction(obj)) and module and qualname \
            and module.startswith("gnnprivacy") and "<" not in qualname:
        return f"{module}.{qualname}", True
    return f"{where}.{name}", False


def owners(units: list[str]) -> dict[str, str]:
    """Object path -> the unit whose page documents it: among the units that export it, the
    deepest one that holds its module, else the deepest one (each object is rendered once)."""
    exporters: dict[str, list[str]] = {}
    for unit in units:
        for name, where in exported_names(unit):
            path, is_object = object_path(name, where)
            if is_object:
                exporters.setdefault(path, []).append(unit)
    return {path: max(us, key=lambda u: (path.startswith(u + "."), len(u)))
            for path, us in exporters.items()}


def _summary(path: str) -> str:
    module, _, name = path.rpartition(".")
    doc = inspect.getdoc(getattr(importlib.import_module(module), name)) or ""
    return doc.split("\n\n")[0].replace("\n", " ")


def page(unit: str, owner_of: dict[str, str]) -> str:
    """The Markdown of one reference page: the unit's docstring, its own objects in full, and
    the names it re-exports from deeper units as links to their entries."""
    lines = [f"# `{unit}`", "", f"::: {unit}", _ROOT_OPTIONS]
    elsewhere = []
    for name, where in sorted(exported_names(unit), key=lambda p: p[0].lower()):
        path, is_object = object_path(name, where)
        owner = owner_of[path] if is_object else unit
        alias = is_object and path.rsplit(".", 1)[1] != name
        if alias:       # a public name for an object with another name (gp.assess)
            lines += [f"## `{name}` {{#{unit}.{name}}}", "",
                      f"`{unit}.{name}` is `{path}`.", ""]
        if owner == unit:
            lines += [f"::: {path}"] + (["    options:", "      heading_level: 3"] if alias
                                          else []) + [""]
        else:
            elsewhere.append(f"- [`{name}`][{path}] (documented in `{owner}`): {_summary(path)}")
    if elsewhere:
        lines += ["## Re-exported here", ""] + elsewhere + [""]
    return "\n".join(lines)


def _src_on_path(config) -> None:
    for entry in config["plugins"]["mkdocstrings"].config["handlers"]["python"].get("paths", []):
        src = str(Path(config["config_file_path"]).parent / entry)
        if src not in sys.path:
            sys.path.insert(0, src)


def on_config(config):
    """Put the generated pages in the nav, under the entry titled "API reference"."""
    _src_on_path(config)
    pages = [{unit: page_path(unit)} for unit in public_units()]
    for i, entry in enumerate(config["nav"]):
        if isinstance(entry, dict) and NAV_TITLE in entry:
            config["nav"][i] = {NAV_TITLE: pages}
            break
    else:
        raise ValueError(f"mkdocs.yml has no nav entry {NAV_TITLE!r} for the API pages")
    return config


def on_files(files, config):
    """Add one generated page per unit."""
    units = public_units()
    owner_of = owners(units)
    for unit in units:
        files.append(File.generated(config, page_path(unit), content=page(unit, owner_of)))
    return files
