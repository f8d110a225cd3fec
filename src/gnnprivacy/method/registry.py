"""Registry of training methods (``gnnprivacy train --method NAME``): look a name up.

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

from gnnprivacy.errors import UnknownNameError
from gnnprivacy.method.spec import _METHODS, MethodSpec, register_method

__all__ = ["MethodSpec", "register_method", "get_method", "list_methods"]


def _load_builtin_methods() -> None:
    # Importing the method modules registers them (decorators run on import).
    from gnnprivacy.method import builtin  # noqa: F401


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
