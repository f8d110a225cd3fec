"""scikit-learn's parameter protocol for the trainers: ``get_params`` / ``set_params``.

A class that inherits `EstimatorParams` records the arguments its constructor was called with
(after the constructor validated them), so ``get_params()`` returns exactly what was passed
and ``sklearn.base.clone(trainer)`` builds an unfitted twin. ``set_params`` calls the
constructor again with the merged arguments, so a bad value is refused with the same message
as at construction. scikit-learn itself is not imported.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

from gnnprivacy.errors import UnknownNameError

__all__ = ["EstimatorParams"]


class EstimatorParams:
    """Mixin: ``get_params(deep=True)`` and ``set_params(**params)`` (scikit-learn's protocol).

    Example:
        >>> from sklearn.base import clone
        >>> from gnnprivacy.training.node_dp import HeterPoissonTrainer
        >>> trainer = HeterPoissonTrainer("gin", epsilon=4.0, generator=0)
        >>> twin = clone(trainer).set_params(epsilon=2.0)
        >>> twin.get_params()["backbone"], twin.epsilon, trainer.epsilon
        ('gin', 2.0, 4.0)
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None:
            return                      # inherits a constructor that already records
        signature = inspect.signature(init)
        named = [p.name for p in list(signature.parameters.values())[1:]
                 if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]

        @functools.wraps(init)
        def __init__(self, *args: Any, **kw: Any) -> None:
            bound = signature.bind(self, *args, **kw)
            bound.apply_defaults()
            depth = self.__dict__.get("_init_depth", 0)
            if depth == 0:              # the outermost constructor call starts afresh
                self.__dict__["_init_params"] = {}
            self.__dict__["_init_depth"] = depth + 1
            try:
                init(self, *args, **kw)
            finally:
                self.__dict__["_init_depth"] = depth
            # a parent's constructor (called through super() with **kwargs) recorded its
            # own arguments first; the named arguments of this one go on top
            self.__dict__["_init_params"].update(
                {name: bound.arguments[name] for name in named})

        cls.__init__ = __init__  # type: ignore[method-assign]

    @classmethod
    def _get_param_names(cls) -> list[str]:
        """The constructor's parameter names, sorted (``**kwargs`` passed to a parent's
        constructor contribute the parent's names)."""
        names: set[str] = set()
        for klass in cls.__mro__:
            init = klass.__dict__.get("__init__")
            if init is None or not hasattr(init, "__wrapped__"):
                continue
            params = list(inspect.signature(init.__wrapped__).parameters.values())[1:]
            names.update(p.name for p in params if p.kind not in (p.VAR_POSITIONAL,
                                                                  p.VAR_KEYWORD))
            if not any(p.kind == p.VAR_KEYWORD for p in params):
                break
        return sorted(names)

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The constructor arguments.

        Args:
            deep: also list the parameters of arguments that are estimators themselves,
                as ``name__parameter``.

        Returns:
            Parameter name -> the value the constructor received (or its default).
        """
        out = dict(self.__dict__["_init_params"])
        if deep:
            for name, value in list(out.items()):
                if hasattr(value, "get_params") and not isinstance(value, type):
                    out.update({f"{name}__{k}": v for k, v in value.get_params().items()})
        return out

    def set_params(self, **params: Any):
        """Set constructor parameters; they are validated as at construction.

        Args:
            **params: parameter name -> new value (``name__parameter`` for a nested
                estimator's parameter).

        Returns:
            ``self``.

        Raises:
            UnknownNameError: a name the constructor does not take (the message lists them).
            InvalidParameterError: a value the constructor refuses.
        """
        if not params:
            return self
        current = dict(self.__dict__["_init_params"])
        nested: dict[str, dict[str, Any]] = {}
        for key, value in params.items():
            name, _, sub = key.partition("__")
            if name not in current:
                raise UnknownNameError(f"parameter of {type(self).__name__}", name, current)
            if sub:
                nested.setdefault(name, {})[sub] = value
            else:
                current[name] = value
        for name, sub_params in nested.items():
            current[name].set_params(**sub_params)
        self.__init__(**current)  # type: ignore[misc]
        return self
