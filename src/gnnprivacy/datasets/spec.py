"""The dataset table: `DatasetInfo`, `DatasetSpec` and the `register_dataset` decorator.

Dataset modules (``catalog``, ``stream``, ``tu_merged``) register through this module, never
through `gnnprivacy.datasets.registry`, which imports the catalog to look names up: so
registration has no import circle (``registry -> catalog -> spec``). No torch, no PyG.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

SPLIT_KINDS = ("random", "public", "inductive")


@dataclass(frozen=True)
class DatasetInfo:
    """Public, file-free description of a registered dataset.

    Attributes:
        name: registry name (lower case, e.g. ``"twitch-de"``).
        description: one-line description (graph, features, labels).
        pyg_class: the PyTorch Geometric class used to read it (or the local class).
        raw_files: raw files it needs, relative to the data root (PyG layout). Empty for
            generated datasets.
        papers: papers (spec ids of this project, with short titles) that use it.
        notes: differences from the published version, preprocessing decisions.
        public_split: whether a ``split="public"`` (the dataset's official split) exists.
        default_split: the split kind used when ``split=None``.
        requires: Python packages needed beyond the core dependencies.
        generated: True for synthetic datasets built locally (no files).
        sizes: ``(nodes, edge_index columns, features, classes)`` the raw files give after
            loading (``None``: not known); every load is checked against it, so a replaced or
            damaged raw file is refused instead of trained on.
        public_sizes: ``(train, val, test)`` node counts of the public split, checked likewise.
    """

    name: str
    description: str
    pyg_class: str
    raw_files: tuple[str, ...] = ()
    papers: tuple[str, ...] = ()
    notes: str = ""
    public_split: bool = False
    default_split: str = "random"
    requires: tuple[str, ...] = ()
    generated: bool = False
    sizes: tuple[int, int, int, int] | None = None
    public_sizes: tuple[int, int, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict of the fields."""
        return {
            "name": self.name, "description": self.description, "pyg_class": self.pyg_class,
            "raw_files": list(self.raw_files), "papers": list(self.papers), "notes": self.notes,
            "public_split": self.public_split, "default_split": self.default_split,
            "requires": list(self.requires), "generated": self.generated,
        }


@dataclass(frozen=True)
class DatasetSpec:
    """A registered dataset: its `DatasetInfo` and the loader ``fn(ctx, **kwargs)``.

    ``fn`` receives a ``LoadContext`` (root, cache, download flag) and the dataset-specific
    keyword arguments, and returns a raw PyG ``Data`` (standardised by ``load_dataset``).
    """

    info: DatasetInfo
    fn: Callable[..., Any] = field(repr=False)

    def keyword_names(self) -> tuple[str, ...]:
        """Names of the dataset-specific keyword arguments the loader accepts."""
        params = list(inspect.signature(self.fn).parameters.values())[1:]
        return tuple(p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY)


_REGISTRY: dict[str, DatasetSpec] = {}


def register_dataset(name: str, **info_fields: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator registering ``fn(ctx, *, **kwargs) -> Data`` under ``name``.

    Args:
        name: registry name; must be new.
        **info_fields: the other `DatasetInfo` fields.

    Raises:
        ValueError: ``name`` is already registered or ``default_split`` is unknown.
    """
    def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
        if name in _REGISTRY:
            raise ValueError(f"dataset {name!r} is already registered")
        info = DatasetInfo(name=name, **info_fields)
        if info.default_split not in SPLIT_KINDS:
            raise ValueError(f"default_split of {name!r} must be one of {SPLIT_KINDS}")
        _REGISTRY[name] = DatasetSpec(info=info, fn=fn)
        return fn
    return decorator


def registered_info(name: str) -> DatasetInfo:
    """The `DatasetInfo` of a dataset already registered (a loader reading its own entry;
    unlike `gnnprivacy.datasets.registry.dataset_info` it imports no catalog)."""
    return _REGISTRY[name].info
