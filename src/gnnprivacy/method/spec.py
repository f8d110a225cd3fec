"""The method table: `MethodSpec` and the `register_method` decorator.

A method module imports this (never `gnnprivacy.method.registry`, which imports the built-in
methods to look names up), so registration has no import circle: ``registry -> builtin ->
spec``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gnnprivacy.errors import UnknownNameError


@dataclass(frozen=True)
class MethodSpec:
    """A registered training method."""

    name: str
    fn: Callable[..., Any]
    params: type
    description: str
    private: bool
    default_delta: Callable[[int], float] | None = None  #: delta as a function of N (paper default)
    checkpoints: bool = False  #: writes checkpoints (``RunContext.checkpoint_path``), so ``resume`` applies
    task: str = "node"  #: ``"node"`` classification, ``"graph"`` (data: a `GraphSet`) or
    #: ``"link"`` (link prediction on a node dataset, split by the method)

    def make_params(self, values: dict[str, Any]):
        """Instantiate the params dataclass from ``values`` (unknown keys are an error)."""
        names = {f.name for f in dataclasses.fields(self.params)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise UnknownNameError(f"parameter of method {self.name!r}", unknown[0], names)
        return self.params(**values)


_METHODS: dict[str, MethodSpec] = {}


def register_method(name: str, *, params: type, description: str, private: bool,
                    default_delta: Callable[[int], float] | None = None, force: bool = False,
                    checkpoints: bool = False, task: str = "node"):
    """Decorator registering ``fn`` as method ``name``."""
    if not dataclasses.is_dataclass(params):
        raise TypeError(f"params of method {name!r} must be a dataclass; got {params!r}")

    def decorator(fn):
        if name in _METHODS and not force:
            raise ValueError(f"method {name!r} is already registered")
        _METHODS[name] = MethodSpec(name, fn, params, description, private, default_delta, checkpoints,
                                    task)
        return fn

    return decorator
