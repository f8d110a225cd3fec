"""Lazy package exports: names whose modules import torch load on first use, so importing a
package (and ``gnnprivacy --help``) stays light.

A package declares its lazy names once, as imports under ``if TYPE_CHECKING:`` (so type
checkers and the API reference see the real signatures), and builds its ``__getattr__`` from
that block:

```
from typing import TYPE_CHECKING

from gnnprivacy._lazy import lazy_exports

if TYPE_CHECKING:
    from gnnprivacy.nn.star import StarGNN

__getattr__, __dir__ = lazy_exports(__name__, __file__, globals())
```
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable, Mapping
from pathlib import Path


def lazy_getattr(package: str, table: Mapping[str, str | tuple[str, str]],
                 namespace: dict) -> Callable[[str], object]:
    """A module-level ``__getattr__`` for ``package``.

    Args:
        package: the package's ``__name__`` (for the error message).
        table: public name -> module it lives in, or -> ``(module, attribute)`` when the
            public name differs from the attribute's.
        namespace: the package's ``globals()``; a loaded name is cached there.

    Returns:
        The function to assign to ``__getattr__``; unknown names raise ``AttributeError``.
    """

    def __getattr__(name: str):
        if name in table:
            target = table[name]
            module, attribute = target if isinstance(target, tuple) else (target, name)
            value = getattr(importlib.import_module(module), attribute)
            namespace[name] = value
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


def type_checking_imports(path: str | Path) -> dict[str, tuple[str, str]]:
    """The ``from M import a as b`` statements under ``if TYPE_CHECKING:`` in a source file.

    Args:
        path: the package's ``__init__.py`` (its ``__file__``).

    Returns:
        Public name (``b``) -> ``(M, a)``, in source order.
    """
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    table: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.module and stmt.level == 0:
                    for alias in stmt.names:
                        table[alias.asname or alias.name] = (stmt.module, alias.name)
    return table


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def lazy_exports(package: str, path: str | Path, namespace: dict
                 ) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for a package whose lazy names are its
    ``TYPE_CHECKING`` imports (one declaration serves the type checker and the runtime).

    Args:
        package: the package's ``__name__``.
        path: the package's ``__file__``.
        namespace: the package's ``globals()``.

    Returns:
        ``(__getattr__, __dir__)`` to assign at the end of the package's ``__init__``.
    """
    table = type_checking_imports(path)

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(table))

    return lazy_getattr(package, table, namespace), __dir__
