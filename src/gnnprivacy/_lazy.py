"""Lazy package exports: names whose modules import torch load on first use, so importing a
package (and ``gnnprivacy --help``) stays light."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy_getattr(package: str, table: Mapping[str, str], namespace: dict) -> Callable[[str], object]:
    """A module-level ``__getattr__`` for ``package``: ``name`` in ``table`` is imported from
    ``table[name]`` on first access and cached in ``namespace`` (the package's ``globals()``)."""

    def __getattr__(name: str):
        if name in table:
            value = getattr(importlib.import_module(table[name]), name)
            namespace[name] = value
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
