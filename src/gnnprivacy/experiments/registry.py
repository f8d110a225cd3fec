"""Registry of training methods (``gnnprivacy train --method NAME``).

A method is a function ``fn(ctx: RunContext) -> MethodResult`` plus a frozen dataclass of
its own hyperparameters. The CLI builds its options from those dataclasses, so a method's
parameters are declared once.

Example:

```
@dataclass(frozen=True)
class MyParams:
    epochs: int = field(default=200, metadata={"help": "training epochs"})

@register_method("my-method", params=MyParams, private=False,
                 description="what it is")
def fit_my_method(ctx: RunContext) -> MethodResult: ...
```
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
                    checkpoints: bool = False):
    """Decorator registering ``fn`` as method ``name``."""
    if not dataclasses.is_dataclass(params):
        raise TypeError(f"params of method {name!r} must be a dataclass; got {params!r}")

    def decorator(fn):
        if name in _METHODS and not force:
            raise ValueError(f"method {name!r} is already registered")
        _METHODS[name] = MethodSpec(name, fn, params, description, private, default_delta, checkpoints)
        return fn

    return decorator


def _load_builtin_methods() -> None:
    # Importing the method modules registers them (decorators run on import).
    from gnnprivacy.experiments import methods  # noqa: F401


def get_method(name: str) -> MethodSpec:
    """Look up a method; unknown names raise `UnknownNameError` listing the choices."""
    _load_builtin_methods()
    if name not in _METHODS:
        raise UnknownNameError("method", name, _METHODS)
    return _METHODS[name]


def list_methods() -> list[MethodSpec]:
    """All registered methods, sorted by name."""
    _load_builtin_methods()
    return [_METHODS[k] for k in sorted(_METHODS)]
