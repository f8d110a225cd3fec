"""The shape every privatising transform shares, and the epsilon of a pipeline.

A privatising transform is a PyG ``BaseTransform``: it composes with ``T.Compose`` and the
public transforms (``T.ToUndirected``, ``T.NormalizeFeatures`` ...). Each one

* states the cost of one application as ``.events`` (scoped ``dp_accounting`` events: unit
  and neighbouring relation named), and ``.unit`` / ``.relation``;
* returns a new ``Data`` (the input is not modified) whose ``privacy_events`` attribute is the
  input's events plus its own, so the released graph carries the cost of everything that ran
  on it, in order.

`privacy_spent` turns those events into an epsilon per privacy unit. Units are never added:
an edge-level and a feature-level guarantee protect different things (HeteroRR keeps them
apart the same way).
"""

from __future__ import annotations

import abc
import math
from typing import Any

from torch_geometric.data import Data
from torch_geometric.transforms import BaseTransform, Compose

from gnnprivacy.accounting.accountants import make_accountant
from gnnprivacy.accounting.events import ScopedDpEvent
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit
from gnnprivacy.errors import InvalidParameterError
from gnnprivacy.random import as_torch_generator, numpy_generator

__all__ = ["EVENTS_KEY", "PrivatizingTransform", "privacy_spent"]

#: the ``Data`` attribute holding the events of the transforms that produced it
EVENTS_KEY = "privacy_events"


class PrivatizingTransform(BaseTransform, abc.ABC):
    """Base class: a PyG transform that releases a privatised copy and records its cost.

    Subclasses set ``unit``, ``relation`` and ``_events`` (the cost of one application,
    known before it runs) and `_release` (the new ``Data`` and the events that
    executed, which the output carries).

    Args:
        generator: randomness of the releases: an int seed, a ``torch.Generator`` or a
            ``numpy.random.Generator`` (as the mechanism needs), or ``None`` for fresh OS
            entropy. An int seed makes the first release reproducible; each later call
            draws anew from the same stream.
    """

    unit: PrivacyUnit
    relation: NeighboringRelation

    def __init__(self, *, generator: Any = None):
        self._seed = generator
        self._numpy = None
        self._torch = None

    #: the scoped events of one application (set by the subclass's ``__init__``)
    _events: tuple[ScopedDpEvent, ...] = ()

    @property
    def events(self) -> tuple[ScopedDpEvent, ...]:
        """The scoped events of one application (its cost, known before it runs)."""
        return self._events

    @abc.abstractmethod
    def _release(self, data: Data) -> tuple[Data, tuple[ScopedDpEvent, ...]]:
        """Privatise the shallow copy ``data`` (assign new tensors, never modify in place);
        return it with the events of the noisy steps that ran."""

    def numpy_rng(self):
        """The transform's numpy stream (created on first use from ``generator``)."""
        if self._numpy is None:
            self._numpy = numpy_generator(self._seed)
        return self._numpy

    def torch_rng(self):
        """The transform's torch stream (created on first use from ``generator``)."""
        if self._torch is None:
            self._torch = as_torch_generator(self._seed)
        return self._torch

    def forward(self, data: Data) -> Data:
        """Release a privatised copy; its ``privacy_events`` gain this transform's events."""
        if not isinstance(data, Data):
            raise InvalidParameterError("data", "a torch_geometric.data.Data",
                                        type(data).__name__)
        before = tuple(getattr(data, EVENTS_KEY, None) or ())
        out, executed = self._release(data)
        out[EVENTS_KEY] = before + tuple(executed)
        return out

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self._repr_fields)
        return f"{type(self).__name__}({fields})"

    _repr_fields: tuple[str, ...] = ("epsilon",)


def _events_of(obj: Any) -> tuple[ScopedDpEvent, ...]:
    if isinstance(obj, Data):
        return tuple(getattr(obj, EVENTS_KEY, None) or ())
    if isinstance(obj, PrivatizingTransform):
        return tuple(obj.events)
    if isinstance(obj, Compose):
        return tuple(ev for t in obj.transforms for ev in _events_of(t))
    if isinstance(obj, BaseTransform):
        return ()                                    # a public transform: no privacy cost
    if isinstance(obj, (list, tuple)):
        return tuple(ev for t in obj for ev in _events_of(t))
    raise InvalidParameterError("obj", "a Data released by privatising transforms, a "
                                "transform, a T.Compose or a list of them", type(obj).__name__)


def privacy_spent(obj: Any, *, delta: float = 0.0) -> dict[str, float]:
    """Epsilon per privacy unit of a released graph, a transform or a pipeline.

    *Privacy*: reads the events, spends nothing. For a released ``Data`` the events are those
    of the releases that ran on it, in order; for a transform or a pipeline, the cost of one
    application.

    Args:
        obj: a ``Data`` returned by privatising transforms (its ``privacy_events``: what ran),
            a `PrivatizingTransform`, a ``T.Compose`` or a list of transforms (what one
            application would cost; public transforms cost nothing).
        delta: the delta to state epsilon at (0 for the pure mechanisms here).

    Returns:
        ``{unit: epsilon}``, e.g. ``{"edge": 1.0, "feature": 2.0}``; empty when nothing
        private ran. Events of one unit are composed by one PLD accountant (which refuses
        events of one unit under different neighbouring relations); units are never added.

    Example:
        >>> import torch
        >>> import torch_geometric.transforms as T
        >>> from torch_geometric.data import Data
        >>> from gnnprivacy.transforms import EdgeRand, privacy_spent
        >>> data = Data(x=torch.rand(30, 4), edge_index=torch.tensor([[0, 1], [1, 2]]))
        >>> out = T.Compose([T.ToUndirected(), EdgeRand(epsilon=1.0, generator=0)])(data)
        >>> privacy_spent(out)
        {'edge': 1.0}
    """
    by_unit: dict[PrivacyUnit, list[ScopedDpEvent]] = {}
    for ev in _events_of(obj):
        by_unit.setdefault(ev.unit, []).append(ev)
    out = {}
    for unit, events in by_unit.items():
        relation = events[0].relation or NeighboringRelation.ADD_OR_REMOVE
        acc = make_accountant("pld", unit=unit, relation=relation)
        for ev in events:
            acc.compose(ev)
        # rounded up at the 12th decimal: 0.7 composed by PLD reads 0.6999999999999998
        out[unit.value] = math.ceil(float(acc.get_epsilon(delta)) * 1e12) / 1e12
    return out
